import test from 'ava'

import { ShardReader, ShardWriter, WalTailer } from '../index'
import { ids, memoryLocation, rows, schema } from './helpers'

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
