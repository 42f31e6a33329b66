// W7's second writer in a process of its own, as in a failover between instances: it claims
// each shard the parent names and reports the claim. Loaded once and warmed up first, so a
// claim pays no process start, addon load or runtime start.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { arrowKit, loadModules } from './data.mjs'
import { claimShard } from './claim.mjs'

const { memwal, arrow21 } = loadModules()
const { schema } = arrowKit(arrow21)

const claim = (dir, shardId) => claimShard(memwal.ShardWriter, schema, dir, shardId)

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
