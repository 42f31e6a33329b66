// The child of fencing.spec.ts's cross-process holder test: opens the shard (fencing the
// parent's writer), prints its writer id and epoch as one JSON line, and closes.
// Run as `node --import tsx __test__/support/holder-child.ts <dir> <shardId>`.

import { ShardWriter } from '../../index'
import { schema } from './helpers'

async function main(): Promise<void> {
  const [dir, shardId] = process.argv.slice(2)
  if (dir === undefined || shardId === undefined) throw new Error('usage: holder-child.ts <dir> <shardId>')
  const w = await ShardWriter.open(dir, { schema, shardId })
  process.stdout.write(`${JSON.stringify({ writerId: w.writerId, epoch: w.epoch, pid: process.pid })}\n`)
  await w.close()
}

main().catch((e: unknown) => {
  process.stderr.write(`holder-child failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
  process.exit(2)
})
