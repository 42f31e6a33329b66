// The child of request_ids.spec.ts's failover test: opens the shard, makes one durable put
// with a request id, prints its result as one JSON line once the put is acknowledged, then
// waits to be SIGKILLed (it never closes, so nothing is flushed to a generation).
// Run as `node --import tsx __test__/support/request-id-child.ts '<json config>'`.

import { ShardWriter } from '../../index'
import { rows, schema } from './helpers'

interface Config {
  dir: string
  shardId: string
  requestId: string
  ids: number[]
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2] ?? '') as Config
  const w = await ShardWriter.open(cfg.dir, { schema, shardId: cfg.shardId })
  const result = await w.put(rows(cfg.ids), { requestId: cfg.requestId })
  process.stdout.write(`${JSON.stringify(result)}\n`)
  // Keep the process (and the writer) alive until the parent kills it.
  setInterval(() => undefined, 60_000)
}

main().catch((e: unknown) => {
  process.stderr.write(`request-id-child failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
  process.exit(2)
})
