// W7's claim of a live writer's shard, shared by the in-process variant (run.mjs) and the
// second process (claimer.mjs) so both measure exactly the same steps.

import { now } from './latencies.mjs'

/**
 * W7's claim: opens the writer of `shardId` in `dir` (fencing the live one) with memwal's
 * `ShardWriter`, reports its open, and aborts it (it writes nothing, so nothing is lost, and
 * the fenced writer stays fenced).
 */
export async function claimShard(ShardWriter, schema, dir, shardId) {
  const t0 = now()
  const b = await ShardWriter.open(dir, { schema, shardId })
  const openMs = now() - t0
  const stats = b.openStats()
  const { fenceSentinelPosition } = await b.walStats()
  await b.abort()
  return { ...stats, openMs, fenceSentinelPosition }
}
