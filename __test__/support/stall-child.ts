// A program whose only pending work, at one point, is a writer's background generation commit
// that a stall holds: `stalls.spec.ts` checks that awaiting the stall's `reached()` kept the
// process running until the commit got there, and that a stall never reached did not keep it
// running once the writer closed. Argument: the shard's directory.

import { ObjectStore, ShardWriter } from '../../index'
import { rows, schema } from './helpers'

async function main(): Promise<void> {
  const store = ObjectStore.local(process.argv[2] ?? '.')
  // No tailer runs in this process.
  const never = store.faults.stall({ actor: 'tailer' })
  void never.reached().then(() => console.log('the tailer stall was reached'))

  const w = await ShardWriter.open(store, { schema, gc: false, compaction: false })
  await w.put(rows([1]))
  const commit = store.faults.stall({ actor: 'commit', op: 'create', object: 'manifest' })
  await w.forceSealActive()
  // Nothing but the stall's own hold keeps the event loop running while the flush gets there.
  await commit.reached()
  console.log('reached')
  commit[Symbol.dispose]()
  await w.waitForFlushDrain()
  await w.close()
  console.log('released and closed')
}

void main()
