// No silent gaps, as a user meets them: delete WAL entry 4 of 10 by hand,
// and every way of reading the shard says so, naming the slot, instead of returning 30 of 100
// rows; put it back and everything is there. A copy of an entry in the next slot is refused
// rather than replayed twice. Deleting the newest entry is the one gap nothing can see.

import { copyFileSync, renameSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { memwalCli as memwal } from './support/child-process'
import { CorruptError, ShardReader, ShardWriter, WalTailer } from '../index'
import { ids, rows, schema, tempDir } from './support/helpers'

/** The file of WAL entry `position` (`bitrev64(position).arrow`, as the layout names it). */
function walFile(dir: string, shardId: string, position: number): string {
  const name = BigInt.asUintN(64, BigInt(position)).toString(2).padStart(64, '0').split('').reverse().join('')
  return join(dir, '_mem_wal', shardId, 'wal', `${name}.arrow`)
}

/** A shard whose 100 rows are only in its 10 WAL entries (the writer stopped without a flush). */
async function tenEntries(dir: string): Promise<string> {
  const w = await ShardWriter.open(dir, { schema })
  for (let i = 0; i < 10; i++) await w.put(rows(Array.from({ length: 10 }, (_, j) => i * 10 + j)))
  await w.abort()
  return w.shardId
}


test('a WAL entry deleted by hand is CORRUPT for writers, readers, tailers and the CLI, until it is back', async (t) => {
  const dir = tempDir(t)
  const shardId = await tenEntries(dir)
  const file = walFile(dir, shardId, 4)
  renameSync(file, `${file}.moved`)
  const named = { instanceOf: CorruptError, code: 'CORRUPT', message: /WAL entry 4 of shard .* is missing, but an entry exists at position/ } as const

  await t.throwsAsync(ShardWriter.open(dir, { schema }), named)
  await t.throwsAsync(async () => (await ShardReader.open(dir)).scan(), named)
  const tailer = await WalTailer.open(dir)
  t.is((await tailer.read(3))?.table?.numRows, 10)
  await t.throwsAsync(tailer.read(4), named)
  for (const args of [['scan', dir], ['wal', dir], ['inspect', dir]]) {
    const r = await memwal(...args)
    t.is(r.code, 4, `${args[0]}: ${r.stdout}${r.stderr}`)
    t.regex(r.stderr, /^memwal: CORRUPT: .*WAL entry 4 of shard/m, args[0])
  }

  renameSync(`${file}.moved`, file)
  const w = await ShardWriter.open(dir, { schema })
  t.deepEqual(
    ids(await w.scan()),
    Array.from({ length: 100 }, (_, i) => i),
  )
  await w.close()
})

test('a WAL entry copied into the next slot is CORRUPT, not replayed twice', async (t) => {
  const dir = tempDir(t)
  const shardId = await tenEntries(dir)
  copyFileSync(walFile(dir, shardId, 10), walFile(dir, shardId, 11))
  const misplaced = { instanceOf: CorruptError, message: /belongs at position 10 of shard/ } as const
  await t.throwsAsync(ShardWriter.open(dir, { schema }), misplaced)
  await t.throwsAsync(async () => (await ShardReader.open(dir)).scan(), misplaced)
  await t.throwsAsync(async () => (await WalTailer.open(dir)).read(11), misplaced)
})

// The limit docs/operations.md states ("Objects deleted outside memwal"): nothing follows the
// newest entry, so its deletion looks like the end of the WAL. Pinned so that the page stays true.
test('the newest WAL entry deleted by hand goes unnoticed: its rows are lost and its slot is reused', async (t) => {
  const dir = tempDir(t)
  const shardId = await tenEntries(dir)
  renameSync(walFile(dir, shardId, 10), `${walFile(dir, shardId, 10)}.moved`)
  const tailer = await WalTailer.open(dir)
  await tailer.verify()
  t.is(await tailer.nextPosition(), 10)
  const w = await ShardWriter.open(dir, { schema })
  t.deepEqual(
    ids(await w.scan()),
    Array.from({ length: 90 }, (_, i) => i),
  )
  t.like(await tailer.read(10), { isSentinel: true, writerEpoch: 2 })
  await w.close()
})
