// W7's second writer in a process of its own, as in a failover between instances: it claims
// each shard the parent names and reports the claim. Loaded once and warmed up first, so a
// claim pays no process start, addon load or runtime start.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { arrowKit, loadModules } from './data.mjs'

const { memwal, arrow21 } = loadModules()
const { schema } = arrowKit(arrow21)

/** Opens the writer of `shardId` in `dir` (fencing the live one) and reports its open. */
async function claim(dir, shardId) {
  const t0 = performance.now()
  const b = await memwal.ShardWriter.open(dir, { schema, shardId })
  const openMs = performance.now() - t0
  const stats = b.openStats()
  const { fenceSentinelPosition } = await b.walStats()
  // The claimer writes nothing: aborting it loses nothing, and the fenced writer stays fenced.
  await b.abort()
  return { ...stats, openMs, fenceSentinelPosition }
}

const warm = fs.mkdtempSync(path.join(os.tmpdir(), 'memwal-claimer-'))
try {
  const w = await memwal.ShardWriter.open(warm, { schema })
  await claim(warm, w.shardId)
  await w.abort()
} finally {
  fs.rmSync(warm, { recursive: true, force: true })
}

process.on('message', async ({ dir, shardId }) => {
  try {
    process.send({ ok: true, ...(await claim(dir, shardId)) })
  } catch (e) {
    process.send({ ok: false, error: String(e?.stack ?? e) })
  }
})
process.on('disconnect', () => process.exit(0))
process.send({ ready: true })
