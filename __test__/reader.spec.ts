import test from 'ava'

import { ClosedError, InvalidArgumentError, ShardReader, ShardWriter, type WalEntry, WalTailer } from '../index'
import { ids, memoryLocation, rows, schema } from './support/helpers'

test('a reader sees generations and the WAL tail, and never writes', async (t) => {
  const loc = memoryLocation()
  const w = await ShardWriter.open(loc, { schema })
  await w.put(rows([1]))
  await w.forceSealActive()
  await w.waitForFlushDrain()
  await w.put(rows([2]))
  const r = await ShardReader.open(loc, { shardId: w.shardId })
  const before = (await r.manifest()).version
  t.deepEqual(ids(await r.scan()), [1, 2])
  t.is((await r.manifest()).version, before)
  await w.close()
})

test('a tailer reads entries by position, including the fence sentinel', async (t) => {
  const loc = memoryLocation()
  const a = await ShardWriter.open(loc, { schema })
  await a.put(rows([1, 2]))
  const b = await ShardWriter.open(loc, { schema, shardId: a.shardId })
  const tailer = await WalTailer.open(loc, { shardId: a.shardId })
  t.is(await tailer.nextPosition(), 3)
  const first = await tailer.read(1)
  t.is(first?.writerEpoch, 1)
  t.false(first?.isSentinel)
  t.deepEqual(ids(first!.table!), [1, 2])
  const sentinel = await tailer.read(2)
  t.deepEqual(sentinel, { position: 2, writerEpoch: 2, isSentinel: true, table: null })
  t.is(await tailer.read(3), null)
  await t.throwsAsync(tailer.read(0), { code: 'INVALID_ARGUMENT' })
  await b.close()
})

test('closing a tailer ends a follow() loop in progress: it returns, it does not throw', async (t) => {
  const loc = memoryLocation()
  const w = await ShardWriter.open(loc, { schema })
  await w.put(rows([1]))
  const tailer = await WalTailer.open(loc)
  const seen: WalEntry[] = []
  // Waiting for entry 2 (a long poll, so that only the close can end the wait) when closed.
  const following = (async () => {
    for await (const entry of tailer.follow({ pollIntervalMs: 60_000 })) {
      seen.push(entry)
      if (seen.length === 1) void tailer.close()
    }
    return 'returned'
  })()
  t.is(await following, 'returned')
  t.deepEqual(
    seen.map((e) => e.position),
    [1],
  )
  // Closed from outside the loop, while it waits for an entry.
  const other = await WalTailer.open(loc)
  const waiting = (async () => {
    const positions: number[] = []
    for await (const entry of other.follow({ from: 2, pollIntervalMs: 60_000 })) positions.push(entry.position)
    return positions
  })()
  await new Promise((resolve) => setImmediate(resolve))
  await other.close()
  t.deepEqual(await waiting, [])
  // Every other call on a closed tailer still rejects, and so does a loop begun after the close.
  await t.throwsAsync(other.read(1), { instanceOf: ClosedError })
  await t.throwsAsync(other.follow().next(), { instanceOf: ClosedError })
  await w.close()
})

test('WalTailer.open waits for a shard that does not exist yet, where ShardReader.open rejects', async (t) => {
  const loc = memoryLocation()
  await t.throwsAsync(ShardReader.open(loc, { shard: 'later' }), { instanceOf: InvalidArgumentError, message: /no shard/ })
  const tailer = await WalTailer.open(loc, { shard: 'later' })
  t.is(await tailer.nextPosition(), 1)
  t.is(await tailer.read(1), null)
  const first = tailer.follow({ pollIntervalMs: 5 }).next()
  // The shard's first writer starts after the tailer: its entries reach the waiting loop.
  const w = await ShardWriter.open(loc, { schema, shard: 'later' })
  await w.put(rows([7]))
  const entry = (await first).value as WalEntry
  t.is(entry.position, 1)
  t.deepEqual(ids(entry.table!), [7])
  await tailer.close()
  await w.close()
})
