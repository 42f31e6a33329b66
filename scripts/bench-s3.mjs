// Durable put latency and WAL entries per second on S3 (the local S3-compatible test server,
// `crates/memwal-core/examples/s3_server.rs`, built in release) beside a local directory, with
// the same workload: a lone writer issuing one durable put at a time, then 64 concurrent durable
// puts (group commit). Prints a Markdown table and writes JSON next to it.
//
//   npm run build && node scripts/bench-s3.mjs [--seconds N] [--rows N] [--latency-ms N] [--out FILE]
//
// The server is s3s-fs on this machine's disk, over HTTP on loopback: no network round trip
// and no fsync, so its numbers are the client and protocol cost of a conditional PUT, not
// what S3 itself takes. A second server adds `--latency-ms` (default 20) to every request, a
// stand-in for a real store's PUT latency: it shows what a durable ack and group commit do
// when a PUT takes that long (see docs/operations.md, "What a write costs").
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { ShardWriter } from '../dist/index.mjs'
import { opt, root, schema, startS3Server, tables } from './s3-workload.mjs'

const seconds = Number(opt('seconds', '5'))
const rowsPerPut = Number(opt('rows', '10'))
const out = opt('out', join(root, 'bench-s3.json'))
const latencyMs = Number(opt('latency-ms', '20'))

const table = tables(rowsPerPut)

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

/** `concurrency` loops of durable puts for `seconds`; latencies in ms, entries/s. */
async function run(location, storage, concurrency) {
  const w = await ShardWriter.open(location, {
    schema,
    ...(storage === undefined ? {} : { storage }),
    maxWalFlushIntervalMs: null,
  })
  // Warm up: the client's connection pool, the writer's first entries.
  for (let i = 0; i < 20; i++) await w.put(table())
  const before = w.stats()
  const latencies = []
  const start = performance.now()
  const deadline = start + seconds * 1000
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now()
        await w.put(table())
        latencies.push(performance.now() - t0)
      }
    }),
  )
  const elapsed = (performance.now() - start) / 1000
  const after = w.stats()
  await w.close()
  latencies.sort((a, b) => a - b)
  const entries = after.walFlushCount - before.walFlushCount
  return {
    concurrency,
    puts: latencies.length,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    putsPerSec: latencies.length / elapsed,
    walEntriesPerSec: entries / elapsed,
    putsPerWalEntry: latencies.length / Math.max(1, entries),
  }
}

const work = mkdtempSync(join(tmpdir(), 'memwal-bench-s3-'))
const servers = []
const results = []
try {
  const stores = [{ name: 'local disk (fsync)', location: (c) => join(work, `local-${c}`) }]
  for (const ms of [0, latencyMs]) {
    const server = await startS3Server(join(work, `s3-${ms}`), ms)
    servers.push(server)
    const { info } = server
    stores.push({
      name: ms === 0 ? 'S3 (local s3s-fs server)' : `S3 (local server, +${ms} ms per request)`,
      location: (c) => `s3://${info.bucket}/bench-${c}`,
      storage: info.storage,
    })
  }
  for (const concurrency of [1, 64]) {
    for (const s of stores) {
      results.push({ store: s.name, ...(await run(s.location(concurrency), s.storage, concurrency)) })
    }
  }
} finally {
  for (const { child } of servers) {
    child.stdin.end()
    child.kill()
  }
  rmSync(work, { recursive: true, force: true })
}

const f = (n, d = 2) => n.toFixed(d)
console.log(`\ndurable puts of ${rowsPerPut} rows, ${seconds} s per run\n`)
console.log(
  '| store | concurrent puts | p50 latency (ms) | p99 latency (ms) | puts/s | WAL entries/s | puts per WAL entry |',
)
console.log('|---|---|---|---|---|---|---|')
for (const r of results) {
  console.log(
    `| ${r.store} | ${r.concurrency} | ${f(r.p50Ms)} | ${f(r.p99Ms)} | ${f(r.putsPerSec, 0)} | ${f(r.walEntriesPerSec, 0)} | ${f(r.putsPerWalEntry, 1)} |`,
  )
}
writeFileSync(out, `${JSON.stringify({ seconds, rowsPerPut, latencyMs, results }, null, 2)}\n`)
console.log(`\n(written to ${out})`)
