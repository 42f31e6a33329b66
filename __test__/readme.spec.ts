import fs from 'node:fs'
import path from 'node:path'

import test from 'ava'
import { Field, Int64, Schema, TimestampMillisecond, Utf8, tableFromArrays } from 'apache-arrow'

import { ShardWriter } from '../index'
import { tempDir } from './support/helpers'

const README = path.join(__dirname, '..', 'README.md')

/** The lines of `text` between `from` and `to` (exclusive), trimmed, without blank lines. */
function between(text: string, from: string, to: string): string[] {
  const start = text.indexOf(from)
  const end = text.indexOf(to, start + from.length)
  if (start < 0 || end < 0) throw new Error(`markers ${from} / ${to} not found`)
  return text
    .slice(start + from.length, end)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0)
}

test('the README quick start runs as written', async (t) => {
  const dir = tempDir(t)
  const logged: unknown[] = []
  const console = { log: (v: unknown) => logged.push(v) }
  const open = (_where: string, options: Parameters<typeof ShardWriter.open>[1]) => ShardWriter.open(dir, options)
  // ---- README quick start ----
  const schema = new Schema([
    new Field('id', new Int64(), false),
    new Field('ts', new TimestampMillisecond(), false),
    new Field('user', new Utf8(), true),
  ])
  const writer = await open('./data', { schema })
  try {
    // Plain objects, one per row, converted in Rust against the schema. Durable when it resolves.
    await writer.put([{ id: 1, ts: new Date(), user: 'ada' }])
    // Retry-safe: a retry with the same requestId writes nothing and resolves with the first result.
    await writer.put([{ id: 2, ts: new Date(), user: null }], { requestId: 'order-2' })
    // Arrow data you already have: a Table from apache-arrow 15 or newer, RecordBatches or IPC bytes.
    await writer.put(tableFromArrays({ id: BigInt64Array.of(3n), ts: [new Date()], user: ['bob'] }))
    console.log((await writer.scan()).numRows) // 3
  } finally {
    await writer.close()
  }
  // ---- end ----
  t.deepEqual(logged, [3])
})

test('the quick start this test runs is the one the README prints', (t) => {
  const readme = fs.readFileSync(README, 'utf8')
  const snippet = between(readme.slice(readme.indexOf('## Quick start')), '```ts', '```')
  const ran = between(fs.readFileSync(__filename, 'utf8'), '// ---- README quick start ----', '// ---- end ----')
  t.deepEqual(
    ran.map((l) => l.replace("await open('./data',", "await ShardWriter.open('./data',")),
    snippet.filter((l) => !l.startsWith('import ')),
  )
})
