import test from 'ava'

import { ShardWriter, ShardReader } from '../index'
import { ids, rows, schema, tempDir } from './support/helpers'

test('a durable put is readable through scan and after reopen', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema })
  const r = await w.put(rows([1, 2, 3]))
  t.deepEqual(r, { generation: 1, batchPositions: { start: 0, end: 1 } })
  t.deepEqual(ids(await w.scan()), [1, 2, 3])
  await w.close()
  const reader = await ShardReader.open(dir, { shardId: w.shardId })
  t.deepEqual(ids(await reader.scan()), [1, 2, 3])
})
