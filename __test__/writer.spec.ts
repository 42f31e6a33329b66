import test from 'ava'
import { RecordBatch, tableFromArrays, tableToIPC } from 'apache-arrow'

import { ShardWriter, ShardReader } from '../index'
import { ids, memoryLocation, rows, schema, tempDir } from './support/helpers'

test('batch positions are local to the generation across a rotation', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, maxWalFlushIntervalMs: null })
  t.deepEqual(await w.put(rows([1])), { generation: 1, batchPositions: { start: 0, end: 1 } })
  t.deepEqual(await w.put(rows([2])), { generation: 1, batchPositions: { start: 1, end: 2 } })
  await w.forceSealActive()
  t.deepEqual(await w.put(rows([3])), { generation: 2, batchPositions: { start: 0, end: 1 } })
  await w.waitForFlushDrain()
  t.deepEqual(ids(await w.scan()), [1, 2, 3])
  const m = await w.manifest()
  t.is(m?.flushedGenerations.length, 1)
  t.is(m?.flushedGenerations[0]?.generation, 1)
  t.is(m?.currentGeneration, 2)
  await w.close()
})

test('a full MemTable rotates by batch count', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, maxMemtableBatches: 2 })
  const gens = []
  for (let i = 0; i < 5; i++) gens.push((await w.put(rows([i]))).generation)
  t.deepEqual(gens, [1, 1, 2, 2, 3])
  await w.waitForFlushDrain()
  t.deepEqual(ids(await w.scan()), [0, 1, 2, 3, 4])
  await w.close()
})

test('positions in WAL-only mode are writer-lifetime and generation is null', async (t) => {
  const loc = memoryLocation()
  const w = await ShardWriter.open(loc, { schema, enableMemtable: false })
  t.deepEqual(await w.put(rows([1, 2, 3, 4])), { generation: null, batchPositions: { start: 0, end: 1 } })
  t.deepEqual(await w.put(rows([5, 6])), { generation: null, batchPositions: { start: 1, end: 2 } })
  await t.throwsAsync(w.scan(), { code: 'INVALID_ARGUMENT', message: /WAL-only mode/ })
  await t.throwsAsync(w.memtableStats(), { code: 'INVALID_ARGUMENT', message: /WAL-only mode/ })
  await w.close()
  const r = await ShardReader.open(loc, { shardId: w.shardId })
  t.deepEqual(ids(await r.scan()), [1, 2, 3, 4, 5, 6])
})

test('put accepts a Table, a RecordBatch, RecordBatch[] and IPC bytes', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  const batch = (n: number): RecordBatch => rows([n]).batches[0]!
  await w.put(rows([1]))
  await w.put(batch(2))
  t.deepEqual((await w.put([batch(3), batch(4)])).batchPositions, { start: 2, end: 4 })
  await w.put(tableToIPC(rows([5]), 'stream'))
  t.deepEqual(ids(await w.scan()), [1, 2, 3, 4, 5])
  await w.close()
})

test('close flushes the active MemTable as a generation that a reader and a new writer see', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, durableWrite: false })
  for (let i = 0; i < 10; i++) await w.put(rows([i]))
  await w.close()
  const r = await ShardReader.open(dir, { shardId: w.shardId })
  const m = await r.manifest()
  t.is(m.flushedGenerations.length, 1)
  t.is(m.flushedGenerations[0]?.rows, 10)
  t.deepEqual(ids(await r.scan()), [...Array(10).keys()])
  const w2 = await ShardWriter.open(dir, { schema, shardId: w.shardId })
  t.is((await w2.memtableStats()).rowCount, 0, 'nothing to replay after a clean close')
  t.deepEqual(ids(await w2.scan()), [...Array(10).keys()])
  await w2.close()
})

test('await using closes the writer at scope exit', async (t) => {
  const loc = memoryLocation()
  let shardId = ''
  {
    await using w = await ShardWriter.open(loc, { schema, durableWrite: false })
    shardId = w.shardId
    await w.put(rows([1]))
  }
  const r = await ShardReader.open(loc, { shardId })
  t.is((await r.manifest()).flushedGenerations.length, 1)
  t.deepEqual(ids(await r.scan()), [1])
})

test('stats count puts, WAL entries and generation flushes', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  await w.put(rows([1]))
  await w.put(rows([2]))
  await w.forceSealActive()
  await w.waitForFlushDrain()
  const s = w.stats()
  t.is(s.putCount, 2)
  t.is(s.putRows, 2)
  t.is(s.walFlushCount, 2)
  t.is(s.memtableFlushCount, 1)
  t.is(s.durableRequests, 2)
  const wal = await w.walStats()
  t.is(wal.nextWalEntryPosition, 3)
  t.is(wal.fenceSentinelPosition, null)
  await w.close()
})

test('dictionary-encoded strings from tableFromArrays fit a Utf8 field', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  await w.put(tableFromArrays({ id: Int32Array.from([1, 2]), name: ['x', 'y'] }))
  const out = await w.scan()
  t.deepEqual(ids(out), [1, 2])
  t.deepEqual(out.getChild('name')?.toArray(), ['x', 'y'])
  await w.close()
})
