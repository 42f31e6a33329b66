// What durable puts cost on S3: object-store requests and bytes per million puts, from the
// writer's own counters (`stats().store`), against the local S3-compatible test server
// (`crates/memwal-core/examples/s3_server.rs`, built in release), with one durable put at a
// time (C=1) and 64 concurrent ones (C=64, group commit). Prints the table of docs/operations.md
// ("What a put costs on S3").
//
//   npm run build && node scripts/measure-put-cost.mjs [--puts N] [--rows N] [--latency-ms N]
//
// The server adds `--latency-ms` (default 20) to every request, a stand-in for a real store's
// PUT latency: group commit (puts per WAL entry) depends on it. Counted after a warm-up, so
// the writer's open is not included; generation flushes and their manifest commits that fall
// in the run are.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { ShardWriter } from '../dist/index.mjs'
import { opt, schema, startS3Server, tables } from './s3-workload.mjs'

const puts = Number(opt('puts', '2000'))
const rowsPerPut = Number(opt('rows', '10'))
const latencyMs = Number(opt('latency-ms', '20'))

const table = tables(rowsPerPut)

async function run(location, storage, concurrency) {
  const w = await ShardWriter.open(location, { schema, storage, maxWalFlushIntervalMs: null, gc: false })
  for (let i = 0; i < 20; i++) await w.put(table())
  const before = w.stats()
  let left = puts
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left > 0) {
        left--
        await w.put(table())
      }
    }),
  )
  const after = w.stats()
  await w.close()
  const d = (k) => after.store[k] - before.store[k]
  const perMillion = (n) => (n * 1e6) / puts
  return {
    concurrency,
    putsPerWalEntry: puts / (after.walFlushCount - before.walFlushCount),
    put: perMillion(d('putRequests')),
    get: perMillion(d('getRequests')),
    head: perMillion(d('headRequests')),
    list: perMillion(d('listRequests')),
    del: perMillion(d('deleteRequests')),
    sentMB: perMillion(d('putBytes')) / 1e6,
    receivedMB: perMillion(d('getBytes')) / 1e6,
    generationFlushes: after.memtableFlushCount - before.memtableFlushCount,
  }
}

const work = mkdtempSync(join(tmpdir(), 'memwal-put-cost-'))
const { child, info } = await startS3Server(join(work, 's3'), latencyMs)
const results = []
try {
  for (const c of [1, 64]) results.push(await run(`s3://${info.bucket}/cost-${c}`, info.storage, c))
} finally {
  child.stdin.end()
  child.kill()
  rmSync(work, { recursive: true, force: true })
}

const n = (x) => Math.round(x).toLocaleString('en-US')
console.log(`\n${puts} durable puts of ${rowsPerPut} rows each, +${latencyMs} ms per request; per million puts:\n`)
console.log('| concurrent puts | puts per WAL entry | PUT | GET | HEAD | LIST | DELETE | MB sent | MB received | generation flushes in run |')
console.log('|---|---|---|---|---|---|---|---|---|---|')
for (const r of results) {
  console.log(
    `| ${r.concurrency} | ${r.putsPerWalEntry.toFixed(1)} | ${n(r.put)} | ${n(r.get)} | ${n(r.head)} | ${n(r.list)} | ${n(r.del)} | ${n(r.sentMB)} | ${n(r.receivedMB)} | ${r.generationFlushes} |`,
  )
}
