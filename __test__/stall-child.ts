// A program that arms a stall nothing will reach, holds a put's WAL append with another and
// disposes of it, then closes its writer: `stalls.spec.ts` checks that it prints what it did
// and exits on its own, since a pending `reached()` must not hold the event loop open.
// Argument: the shard's directory.

import { ObjectStore, ShardWriter } from '../index'
import { rows, schema } from './helpers'

async function main(): Promise<void> {
  const store = ObjectStore.local(process.argv[2] ?? '.')
  // No tailer runs in this process.
  const never = store.faults.stall({ actor: 'tailer' })
  void never.reached().then(() => console.log('the tailer stall was reached'))

  const held = store.faults.stall({ actor: 'put', op: 'create', object: 'wal' })
  const w = await ShardWriter.open(store, { schema })
  const put = w.put(rows([1]))
  await held.reached()
  console.log('reached')
  held[Symbol.dispose]()
  await put
  await w.close()
  console.log('released and closed')
}

void main()
