// Durable one-row event puts from many clients in one process, for as long as asked: the W8a
// shape without the peers, for A/B runs of two builds and for long runs that background garbage
// collection reaches (W8's cells end before its first run).
//
//   node durable-clients.mjs                        64 clients, 5 s, collection every 60 s
//   SECS=100 GC_INTERVAL_MS=20000 node durable-clients.mjs
//   SECS=100 GC=0 node durable-clients.mjs          no background collection
//   MEMWAL=/path/to/other/checkout/dist/index.mjs ...    another build of memwal
//
// Prints the rate of each 5 s window while it runs, then one JSON line: puts/s, the JavaScript
// thread's busy time per put, and the writer's WAL append latencies. The data directory (in
// DIR, default the system temp directory) is kept: deleting its files would slow the next run's
// file creation on ext4 without a journal (docs/operations.md, "Collection on ext4 without a
// journal").

import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'

import { Field, Int64, Schema, TimestampMillisecond, Utf8 } from 'apache-arrow'

const { ShardWriter, ObjectStore } = await import(process.env.MEMWAL ?? 'memwal')

const CLIENTS = Number(process.env.CLIENTS ?? 64)
const SECS = Number(process.env.SECS ?? 5)
const dir = fs.mkdtempSync(path.join(process.env.DIR ?? os.tmpdir(), 'memwal-durable-clients-'))
const schema = new Schema([
  new Field('id', new Int64(), false),
  new Field('ts', new TimestampMillisecond(), false),
  new Field('user', new Utf8(), false),
  new Field('payload', new Utf8(), false),
])
const writer = await ShardWriter.open(ObjectStore.local(dir), {
  schema,
  durableWrite: true,
  gc: process.env.GC !== '0',
  gcIntervalMs: Number(process.env.GC_INTERVAL_MS ?? 60_000),
})
const payload = 'x'.repeat(70)

let puts = 0
let stop = false
let windowStart = 0
const windows = setInterval(() => {
  process.stdout.write(`${((puts - windowStart) / 5000).toFixed(1)}k/s `)
  windowStart = puts
}, 5000)
const elu0 = performance.eventLoopUtilization()
const t0 = performance.now()
setTimeout(() => (stop = true), SECS * 1000)
await Promise.all(
  Array.from({ length: CLIENTS }, async (_, c) => {
    for (let seq = 0; !stop; seq++) {
      await writer.put([{ id: c * 1e9 + seq, ts: new Date(), user: `user-${seq % 1000}`, payload }])
      puts++
    }
  }),
)
clearInterval(windows)
const secs = (performance.now() - t0) / 1000
const busy = performance.eventLoopUtilization(elu0).active
const { walAppendLatency } = writer.stats()
await writer.close()
console.log(
  `\n${JSON.stringify({
    dir,
    clients: CLIENTS,
    putsPerSec: Math.round(puts / secs),
    jsUsPerPut: Number(((busy * 1000) / puts).toFixed(2)),
    walAppendLatency,
  })}`,
)
