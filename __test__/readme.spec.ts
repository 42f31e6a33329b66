import test from 'ava'
import { Field, Int32, Schema, tableFromArrays } from 'apache-arrow'

import { ShardWriter } from '../index'
import { tempDir } from './helpers'

test('the README quick start runs as written', async (t) => {
  const dir = tempDir(t)
  const logged: unknown[] = []
  const console = { log: (v: unknown) => logged.push(v) }
  // ---- README quick start (keep in sync) ----
  const schema = new Schema([new Field('id', new Int32(), true)])
  const writer = await ShardWriter.open(dir, { schema })
  try {
    await writer.put(tableFromArrays({ id: Int32Array.from([1, 2, 3]) })) // durable when it resolves
    console.log((await writer.scan()).numRows) // 3
  } finally {
    await writer.close()
  }
  // ---- end ----
  t.deepEqual(logged, [3])
})
