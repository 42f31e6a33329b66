// Retry-safe puts through the public API: `put(data, { requestId })` and `putNoWait` answer a
// retry with the first put's result and write nothing, in the same process, across a reopen,
// and across a failover to another process that was SIGKILLed after its acknowledgement.

import { spawn } from 'node:child_process'
import { join } from 'node:path'

import test from 'ava'

import { InvalidArgumentError, ShardWriter } from '../index'
import { ids, memoryLocation, rows, schema, tempDir } from './support/helpers'

const CHILD = join(__dirname, 'support', 'request-id-child.ts')

test('a retry with the same requestId gets the first result and writes nothing, even with other data', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, maxWalFlushIntervalMs: null })
  await w.put(rows([0]))
  const first = await w.put(rows([1, 2]), { requestId: 'order-42' })
  t.deepEqual(first, { generation: 1, batchPositions: { start: 1, end: 2 } })
  t.deepEqual(await w.put(rows([9]), { requestId: 'order-42' }), first)
  const again = await w.putNoWait(rows([9]), { requestId: 'order-42' })
  t.deepEqual(again.result, first)
  await again.durable
  t.deepEqual(await w.put(rows([3]), { requestId: 'order-43' }), { generation: 1, batchPositions: { start: 2, end: 3 } })
  t.deepEqual(ids(await w.scan()), [0, 1, 2, 3])
  t.is(w.stats().retriedPuts, 2)
  await w.close()
})

test('a retry in non-durable mode resolves at once with the first result', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  const first = await w.put(rows([1]), { requestId: 'r' })
  t.deepEqual(await w.put(rows([1]), { requestId: 'r' }), first)
  const { result, durable } = await w.putNoWait(rows([1]), { requestId: 'r' })
  t.deepEqual([result, durable], [first, null])
  t.deepEqual(ids(await w.scan()), [1])
  await w.close()
})

test('a retry after a reopen is answered from the WAL, and after a flush from the generation', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema, maxWalFlushIntervalMs: null })
  const first = await a.put(rows([1]), { requestId: 'wal' })
  await a.abort() // a crash: the put is only in the WAL
  const b = await ShardWriter.open(dir, { schema, shardId: a.shardId })
  t.deepEqual(await b.put(rows([1]), { requestId: 'wal' }), first)
  const flushed = await b.put(rows([2]), { requestId: 'gen' })
  await b.close() // flushes both puts to a generation: the WAL is no longer replayed
  const c = await ShardWriter.open(dir, { schema, shardId: a.shardId })
  t.is(c.openStats().replayedRows, 0)
  t.deepEqual(await c.put(rows([1]), { requestId: 'wal' }), first)
  t.deepEqual(await c.put(rows([2]), { requestId: 'gen' }), flushed)
  t.deepEqual(ids(await c.scan()), [1, 2])
  await c.close()
})

test('after a failover to another process killed after its ack, the retry finds exactly one copy', async (t) => {
  const dir = tempDir(t)
  const setup = await ShardWriter.open(dir, { schema })
  const shardId = setup.shardId
  await setup.close()
  const config = { dir, shardId, requestId: 'from-the-child', ids: [7, 8] }
  const acked = await new Promise<unknown>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let result: unknown
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString()
      const line = stdout.split('\n')[0]
      if (result === undefined && stdout.includes('\n') && line !== undefined) {
        result = JSON.parse(line)
        child.kill('SIGKILL')
      }
    })
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('error', reject)
    child.on('close', (_code, signal) => {
      if (result !== undefined && signal === 'SIGKILL') resolve(result)
      else reject(new Error(`the child ended without an acknowledged put (signal ${signal}): ${stderr}`))
    })
  })
  const w = await ShardWriter.open(dir, { schema, shardId })
  t.deepEqual(await w.put(rows([7, 8]), { requestId: 'from-the-child' }), acked)
  t.is(w.stats().retriedPuts, 1)
  t.deepEqual(ids(await w.scan()), [7, 8])
  await w.close()
})

test('requestIdRetentionMs is a writer option', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, requestIdRetentionMs: 0 })
  const first = await w.put(rows([1]), { requestId: 'r' })
  t.deepEqual(await w.put(rows([1]), { requestId: 'r' }), first, 'kept until its generation is flushed')
  await w.close()
  await t.throwsAsync(ShardWriter.open(memoryLocation(), { schema, requestIdRetentionMs: -1 }), {
    instanceOf: InvalidArgumentError,
    message: /requestIdRetentionMs/,
  })
})

test('a bad requestId or put option is INVALID_ARGUMENT naming it, and nothing is written', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  const bad: unknown[] = [
    { requestId: '' },
    { requestId: 'é'.repeat(129) },
    { requestId: 42 },
    { requestId: null },
    { requestID: 'typo' },
    'r',
    null,
  ]
  for (const options of bad) {
    // @ts-expect-error: bad options on purpose
    await t.throwsAsync(w.put(rows([1]), options), { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' })
    // @ts-expect-error: bad options on purpose
    await t.throwsAsync(w.putNoWait(rows([1]), options), { instanceOf: InvalidArgumentError })
  }
  await t.throwsAsync(w.put(rows([1]), { requestId: '' }), { message: /requestId/ })
  await t.throwsAsync(w.put(rows([1]), { requestId: 'x'.repeat(257) }), { message: /requestId.*256/ })
  t.deepEqual(await w.put(rows([1]), { requestId: 'x'.repeat(256) }), { generation: 1, batchPositions: { start: 0, end: 1 } })
  t.deepEqual(ids(await w.scan()), [1])
  await w.close()
})

test('a requestId that is not well-formed UTF-16 is INVALID_ARGUMENT naming the lone surrogate, and nothing is written', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  // Read as UTF-8, all three would be 'order-\ufffd': one id, and two acknowledged puts lost.
  for (const [requestId, index, unit] of [
    ['order-\ud800', 6, '0xD800'],
    ['order-\udbff', 6, '0xDBFF'],
    ['order-\udc00\ud83d\ude00', 6, '0xDC00'],
    ['order-\ud83d\ude00\ud83d', 8, '0xD83D'],
  ] as const) {
    const message = new RegExp(`requestId.*well-formed UTF-16.*code unit ${unit} at index ${index}.*isWellFormed\\(\\)`)
    await t.throwsAsync(w.put(rows([1]), { requestId }), { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message })
    await t.throwsAsync(w.putNoWait(rows([1]), { requestId }), { instanceOf: InvalidArgumentError, message })
  }
  const first = await w.put(rows([2]), { requestId: 'order-\ufffd' })
  t.deepEqual(first, { generation: 1, batchPositions: { start: 0, end: 1 } }, 'a new put: no id was remembered')
  // A well-formed astral id works, and its retry is answered.
  const emoji = await w.put(rows([3]), { requestId: 'order-\ud83d\ude00' })
  t.deepEqual(await w.put(rows([3]), { requestId: 'order-😀' }), emoji)
  t.deepEqual(ids(await w.scan()), [2, 3])
  t.is(w.stats().retriedPuts, 1)
  await w.close()
})
