import test from 'ava'

import { ClosedError, FencedError, ObjectStore, ShardWriter, WalTailer } from '../index'
import { ids, inMemoryWriter, memoryLocation, rows, schema, tempDir } from './support/helpers'

test('an injected persistence failure rejects the put with PersistenceFailure and poisons the writer', async (t) => {
  const { store, w } = await inMemoryWriter({
    maxWalPersistRetries: 0,
    walPersistRetryBaseDelayMs: 1,
    maxWalFlushIntervalMs: null,
  })
  await w.put(rows([0]))
  await w.forceSealActive()
  await w.waitForFlushDrain()
  store.faults.failWalPuts(Infinity)
  const e = await t.throwsAsync(w.put(rows([1])), { instanceOf: FencedError, code: 'FENCED' })
  t.is(e?.fenceReason, 'PersistenceFailure')
  t.regex(e?.message ?? '', /WAL persistence failed/)
  const attempts = store.faults.walPutAttempts()
  const again = await t.throwsAsync(w.put(rows([2])), { instanceOf: FencedError })
  t.is(again?.fenceReason, 'PersistenceFailure')
  t.is(store.faults.walPutAttempts(), attempts, 'a poisoned writer fails fast without touching the WAL')
  // Reopening after the store recovers replays what was durable.
  store.faults.recover()
  const w2 = await ShardWriter.open(store, { schema, shardId: w.shardId })
  t.deepEqual(ids(await w2.scan()), [0])
  await w2.close()
})

test('transient WAL failures are retried at the same position and the put succeeds', async (t) => {
  const { store, w } = await inMemoryWriter({ walPersistRetryBaseDelayMs: 1 })
  store.faults.failWalPuts(2)
  await w.put(rows([7]))
  t.is(store.faults.walPutAttempts(), 3)
  const tailer = await WalTailer.open(store, { shardId: w.shardId })
  t.is(await tailer.nextPosition(), 2)
  await w.close()
})

test('abort while a durable put waits rejects the put and never hangs', async (t) => {
  const { store, w } = await inMemoryWriter({ maxWalPersistRetries: 20, walPersistRetryBaseDelayMs: 1000 })
  store.faults.failWalPuts(Infinity)
  const pending = w.put(rows([1]))
  while (store.faults.walPutAttempts() === 0) {
    await new Promise((r) => setTimeout(r, 1))
  }
  await w.abort()
  const e = await t.throwsAsync(pending, { instanceOf: ClosedError, code: 'CLOSED' })
  t.regex(e?.message ?? '', /WAL flush handler exited before reporting durability/)
  await t.throwsAsync(w.put(rows([2])), { instanceOf: ClosedError })
  await t.notThrowsAsync(w.abort(), 'abort is idempotent')
})

test('100 concurrent durable puts all resolve and share WAL entries', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema })
  const puts = Array.from({ length: 100 }, (_, i) => w.put(rows([i])))
  const results = await Promise.all(puts)
  t.is(results.length, 100)
  const tailer = await WalTailer.open(dir, { shardId: w.shardId })
  const entries = (await tailer.nextPosition()) - 1
  t.true(entries < 100, `${entries} WAL entries for 100 puts`)
  t.true(w.stats().putsPerWalEntry > 1)
  t.deepEqual(
    ids(await w.scan()).sort((a, b) => a - b),
    Array.from({ length: 100 }, (_, i) => i),
  )
  await w.close()
})

test('a durable put is readable through scan at once', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, maxWalFlushIntervalMs: 10 })
  await w.put(rows([1, 2, 3]))
  t.deepEqual(ids(await w.scan()), [1, 2, 3])
  await w.close()
})

test('putNoWait returns at once and its durable promise resolves when the rows are durable', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, maxWalFlushIntervalMs: null })
  const { result, durable } = await w.putNoWait(rows([1, 2]))
  t.deepEqual(result, { generation: 1, batchPositions: { start: 0, end: 1 } })
  t.is((await w.memtableStats()).rowCount, 2)
  t.not(durable, null)
  await durable
  await w.close()
  const nd = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  const r = await nd.putNoWait(rows([1]))
  t.is(r.durable, null)
  await nd.close()
})

test('non-durable puts become durable on flush()', async (t) => {
  const { store, w } = await inMemoryWriter({ durableWrite: false, maxWalFlushIntervalMs: null })
  await w.put(rows([1]))
  await w.put(rows([2]))
  const tailer = await WalTailer.open(store, { shardId: w.shardId })
  t.is(await tailer.nextPosition(), 1, 'nothing in the WAL before flush')
  t.deepEqual(ids(await w.scan()), [1, 2], 'read-your-writes in non-durable mode')
  await w.flush()
  t.is(await tailer.nextPosition(), 2)
  const entry = await tailer.read(1)
  t.deepEqual(ids(entry!.table!), [1, 2])
  await w.close()
})

test('the event loop keeps running while durable puts wait for their WAL append', async (t) => {
  // Counted, not timed, so a busy machine cannot fail it: the WAL append is held (every WAL put
  // fails and is retried until recover()), so a put that blocked the JS thread until it was
  // durable would deadlock here (ava's timeout) instead of letting timers and immediates run.
  const dir = tempDir(t)
  const store = ObjectStore.local(dir)
  const w = await ShardWriter.open(store, { schema, maxWalPersistRetries: 64, walPersistRetryBaseDelayMs: 5 })
  await w.put(rows([0]))
  store.faults.failWalPuts(Infinity)
  let settled = 0
  const puts = Array.from({ length: 8 }, (_, i) =>
    w.put(rows([i + 1])).finally(() => {
      settled++
    }),
  )
  let ticks = 0
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      if (++ticks === 20) {
        clearInterval(timer)
        resolve()
      }
    }, 1)
  })
  for (let turns = 0; turns < 200; turns++) await new Promise((r) => setImmediate(r))
  while (store.faults.walPutAttempts() < 3) await new Promise((r) => setTimeout(r, 1))
  t.is(ticks, 20, 'a 1 ms timer fired 20 times while the puts waited')
  t.is(settled, 0, 'no put settled while its WAL append was failing')
  store.faults.recover()
  await Promise.all(puts)
  t.deepEqual(ids(await w.scan()), [0, 1, 2, 3, 4, 5, 6, 7, 8])
  await w.close()
})

test('concurrent durable puts to two writers each settle with their own writer’s outcome', async (t) => {
  // Small durable puts are acknowledged in batches, one callback per WAL append, through ids
  // shared by every writer of the process: no put may see another one's outcome.
  const failing = ObjectStore.memory()
  const a = await ShardWriter.open(failing, { schema, maxWalPersistRetries: 0, walPersistRetryBaseDelayMs: 1 })
  const b = await ShardWriter.open(memoryLocation(), { schema })
  await a.put(rows([0]))
  failing.faults.failWalPuts(Infinity)
  const n = 64
  const outcomes = await Promise.allSettled(
    Array.from({ length: 2 * n }, (_, i) => (i % 2 === 0 ? a : b).put(rows([i]))),
  )
  for (const [i, o] of outcomes.entries()) {
    if (i % 2 === 0) {
      t.is(o.status, 'rejected', `put ${i} to the failing writer`)
      if (o.status === 'rejected') t.true(o.reason instanceof FencedError, String(o.reason))
    } else {
      t.is(o.status, 'fulfilled', `put ${i} to the healthy writer`)
    }
  }
  t.deepEqual(
    ids(await b.scan()).sort((x, y) => x - y),
    Array.from({ length: n }, (_, i) => 2 * i + 1),
  )
  await a.abort()
  await b.close()
})
