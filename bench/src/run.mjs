// The benchmark: workloads W0-W8 (bench/README.md describes each) side by side in one run,
// against the raw disk floor (JavaScript and memwal-core's store from Rust) and better-sqlite3,
// lmdb, classic-level and LanceDB. Run through bench.mjs (`npm run bench [-- --smoke]`), which
// installs and builds what this needs first.

import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { fork } from 'node:child_process'
import { parseArgs } from 'node:util'

import { renderChart } from './chart.mjs'
import { summaryMarkdown } from './summary.mjs'
import { sayFencingTable, sayRecoveryTable, sayWorkloadTables, summarizeFencing } from './tables.mjs'
import { ROW_BYTES, arrowKit, loadModules, poolSize, tablePools } from './data.mjs'
import { fsInfo, machineFloor, runRustFloor, versions } from './floor.mjs'
import { rustExampleBinary } from './rust-example.mjs'
import { RECORD_HEADER_BYTES, recordBytes, runRustSegmentFloor, segmentFloorStore } from './segment-floor.mjs'
import { jsFloorStore, lancedbStore, levelStore, lmdbStore, memwalObjectsStore, memwalStore, sqliteStore } from './stores.mjs'
import { countSyncs, probeSyncCounting } from './syncs.mjs'
import { eventCell, eventStores } from './events.mjs'
import { claimShard } from './claim.mjs'
import { closedLoopOf } from './closed-loop.mjs'
import { retire, rmrf } from './data-dir.mjs'
import { fmtBytes, fmtNum, fmtUs, textTable } from './format.mjs'
import { now } from './latencies.mjs'
import { cellFinder } from './lookup.mjs'
import { rssSampler } from './memory.mjs'
import {
  BURST,
  FLOORS,
  MEMWAL_OBJECTS,
  PEERS,
  SEGMENT_FLOORS,
  SUSTAINED,
  W5_ROTATING,
  W5_STEADY,
  layoutName,
  w8Plan,
} from './plan.mjs'
import { saySmokeChecks, smokeChecks } from './smoke.mjs'
import { judgeTargets, sayTargets } from './targets.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const benchDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const { values: argv } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: process.env.MEMWAL_BENCH_SMOKE === '1' },
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    rows: { type: 'string' },
    clients: { type: 'string' },
    dir: { type: 'string' },
    'warmup-ms': { type: 'string' },
    'measure-ms': { type: 'string' },
    save: { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
  },
  strict: true,
})

const MODE = argv.smoke ? 'smoke' : argv.quick ? 'quick' : 'full'
const P = {
  full: {
    warmupMs: 2000,
    measureMs: 10000,
    floorMs: 2000,
    w5Ms: 30000,
    w5SteadyMs: 10000,
    w6Large: [64e6, 1e9],
    w6TinyMax: 5000,
    w6TinyMs: 10000,
    w7Reps: 20,
    w7LeadMs: 200,
    segmentBytes: 64 << 20,
  },
  quick: {
    warmupMs: 500,
    measureMs: 2000,
    floorMs: 1000,
    w5Ms: 8000,
    w5SteadyMs: 4000,
    w6Large: [64e6, 256e6],
    w6TinyMax: 2000,
    w6TinyMs: 3000,
    w7Reps: 8,
    w7LeadMs: 150,
    segmentBytes: 64 << 20,
  },
  smoke: {
    warmupMs: 100,
    measureMs: 500,
    floorMs: 300,
    w5Ms: 1500,
    w5SteadyMs: 800,
    w6Large: [8e6],
    w6TinyMax: 100,
    w6TinyMs: 1000,
    w7Reps: 3,
    w7LeadMs: 100,
    // Zero-filling the segment comes before each floor cell: a smaller one keeps smoke short.
    segmentBytes: 16 << 20,
  },
}[MODE]
if (argv['warmup-ms']) P.warmupMs = Number(argv['warmup-ms'])
if (argv['measure-ms']) P.measureMs = Number(argv['measure-ms'])
const ONLY = argv.only ? new Set(argv.only.split(',').map((s) => s.trim().toUpperCase())) : null
// `--rows 1 --clients 1,64`: only the cells (W0-W5, W8) of these sizes, for a full-length look at
// a few of them (W1's lone put and W2's 64 clients, say) in minutes instead of half an hour.
const numbers = (list) => (list ? new Set(list.split(',').map(Number)) : null)
const ROWS = numbers(argv.rows)
const CLIENTS = numbers(argv.clients)
const SAVE_LATEST =
  argv.save || (MODE === 'full' && !ONLY && !ROWS && !CLIENTS && !argv['warmup-ms'] && !argv['measure-ms'])
const startedAt = now()
const loadStart = os.loadavg()

// ---------------------------------------------------------------------------------------------
// Set-up: data directory (disk-backed), modules, stores, prebuilt data
// ---------------------------------------------------------------------------------------------

function dataRoot() {
  const base = argv.dir ?? os.tmpdir()
  fs.mkdirSync(base, { recursive: true })
  let info = fsInfo(base)
  let dir = base
  if (info.tmpfs) {
    // fsync is a no-op on tmpfs: fall back to a directory inside the repository.
    dir = path.join(benchDir, 'results', 'tmp')
    fs.mkdirSync(dir, { recursive: true })
    info = fsInfo(dir)
    if (info.tmpfs) throw new Error(`${base} and ${dir} are on tmpfs; pass --dir on a disk-backed file system`)
  }
  return { root: fs.mkdtempSync(path.join(dir, 'memwal-bench-')), info }
}

const { root: DATA, info: FS } = dataRoot()
process.on('exit', () => rmrf(DATA))
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    rmrf(DATA)
    process.exit(130)
  })
}
let cellNo = 0
const cellDir = (name) => path.join(DATA, `${String(++cellNo).padStart(3, '0')}-${name}`)

const mods = loadModules()
const kit21 = arrowKit(mods.arrow21)
const kit18 = arrowKit(mods.arrow18)
const pools21 = tablePools(kit21)
pools21.schema = kit21.schema
const pools18 = tablePools(kit18)
pools18.schema = kit18.schema
const payloads = new Map()
/** The Arrow IPC stream bytes of a put of `rows` rows (what the raw floors publish). */
const payloadFor = (rows) => {
  if (!payloads.has(rows)) payloads.set(rows, Buffer.from(mods.arrow21.tableToIPC(pools21(rows)[0], 'stream')))
  return payloads.get(rows)
}

const RUST_BIN = rustExampleBinary(benchDir, 'store_floor', { allowDebug: MODE === 'smoke' })
const SEGMENT_BIN = rustExampleBinary(benchDir, 'segment_floor', { allowDebug: MODE === 'smoke' })

/**
 * The WAL layouts memwal's W1, W2 and W8 cells run on: `objects` and `segments` when the writer
 * takes the `walLayout` option (tried on a fresh shard: an unknown option is an error), else
 * `[null]`, the writer's only layout. `MEMWAL_BENCH_WAL_LAYOUTS=objects` (or `segments`) keeps
 * one of the two.
 */
async function walLayouts() {
  const dir = path.join(DATA, 'wal-layout-probe')
  let layouts = [null]
  let reason = null
  try {
    const w = await mods.memwal.ShardWriter.open(dir, { schema: kit21.schema, walLayout: 'segments' })
    await w.abort()
    layouts = ['objects', 'segments']
  } catch (e) {
    reason = String(e?.message ?? e).split(/[\n;]/)[0].slice(0, 200)
  }
  rmrf(dir)
  const only = process.env.MEMWAL_BENCH_WAL_LAYOUTS?.split(',').map((l) => l.trim())
  if (only && layouts[0] !== null) layouts = layouts.filter((l) => only.includes(l))
  return { layouts, reason }
}
const LAYOUTS = await walLayouts()
/** memwal's stores in W1 and W2, one per WAL layout (prebuilt Tables, then plain objects). */
const MEMWALS = LAYOUTS.layouts.map((l) => layoutName('memwal', l))
const MEMWALS_OBJECTS = LAYOUTS.layouts.map((l) => layoutName(MEMWAL_OBJECTS, l))

const STORES = {
  'floor-js': jsFloorStore(payloadFor),
  'segment-floor-js': segmentFloorStore({ segmentBytes: P.segmentBytes }),
  memwal: memwalStore(mods, pools21),
  [MEMWAL_OBJECTS]: memwalObjectsStore(mods, kit21.schema),
  'better-sqlite3': sqliteStore(),
  lmdb: lmdbStore(),
  'classic-level': levelStore(),
  lancedb: lancedbStore(mods, pools18),
}
for (const l of LAYOUTS.layouts) {
  if (l === null) continue
  STORES[layoutName('memwal', l)] = memwalStore(mods, pools21, l)
  STORES[layoutName(MEMWAL_OBJECTS, l)] = memwalObjectsStore(mods, kit21.schema, l)
}

// Sync calls per acknowledged put, counted in W1's, W2's and W8's durable 1-row cells.
const SYNCS = process.env.MEMWAL_BENCH_SYNCS === '0' ? { available: false, reason: 'MEMWAL_BENCH_SYNCS=0' } : probeSyncCounting()

function say(s = '') {
  process.stdout.write(`${s}\n`)
}
function note(s) {
  process.stderr.write(`  … ${s}\n`)
}

// ---------------------------------------------------------------------------------------------
// Cells
// ---------------------------------------------------------------------------------------------

const results = [] // every cell, in run order
const cache = new Map()
// perf's counts of a cell, once it has exited (which takes it ~150 ms): read before the report,
// so that no cell waits for the one before to be counted.
const pendingSyncs = new Map()
/** Cells counted, and the seconds their cells waited for perf to start, in all. */
const countingCost = { cells: 0, startSeconds: 0 }
// The next cell's session, started as the last counted cell ended: perf takes ~0.1 s to start,
// which a cell would otherwise wait for; attached and switched off, it costs nothing meanwhile.
let spareCounting = null

/** A sync-counting session for the next cell (see syncs.mjs), and a spare for the one after. */
async function startCounting() {
  const t0 = now()
  const starting = spareCounting ?? countSyncs(SYNCS, DATA)
  spareCounting = null
  const perf = await starting
  countingCost.cells++
  countingCost.startSeconds += (now() - t0) / 1000
  return perf
}

/** Starts the spare session (see {@link startCounting}) if there is none. */
function spareSession() {
  if (SYNCS.available && spareCounting === null) spareCounting = countSyncs(SYNCS, DATA)
}

/**
 * The closed loop's window hooks: snapshot `s`'s counters at each edge, and switch perf's sync
 * counters on and off there when `perf` is a counting session.
 */
function syncHooks(perf, s) {
  const on = perf && !perf.failed ? perf : null
  return {
    start: () => {
      on?.start()
      return s.counters()
    },
    end: () => {
      const snap = s.counters()
      on?.stop()
      return snap
    },
  }
}

/**
 * A cell's sync calls, per acknowledged put and per WAL entry (a group commit), from perf's
 * counts (or a floor's own); `{ unavailable: why }` when counting failed; null when not counted.
 */
function syncsOf(syncs, puts, walEntries) {
  if (!syncs) return null
  if (syncs.failed) return { unavailable: syncs.failed }
  return {
    ...syncs,
    source: syncs.source ?? 'perf',
    perPut: puts ? syncs.total / puts : null,
    perWalEntry: walEntries ? syncs.total / walEntries : null,
  }
}

function counterDelta(a, b) {
  if (!a || !b) return null
  const d = {}
  for (const k of Object.keys(b)) if (typeof b[k] === 'number' && typeof a[k] === 'number') d[k] = b[k] - a[k]
  return d
}

/**
 * One cell: `clients` closed-loop clients of `store`, each putting `rows` rows, for the
 * warm-up and measured window. Cached by its parameters so a workload can reuse another's cell.
 */
async function cell(
  workload,
  {
    store,
    rows,
    clients,
    durable = true,
    options = null,
    label = null,
    measureMs = P.measureMs,
    warmupMs = P.warmupMs,
  },
) {
  const key = JSON.stringify([store, rows, clients, durable, options, label, measureMs, warmupMs])
  if (cache.has(key)) {
    const r = { ...cache.get(key), workload, reusedFrom: cache.get(key).workload }
    if (pendingSyncs.has(cache.get(key))) pendingSyncs.set(r, pendingSyncs.get(cache.get(key)))
    results.push(r)
    return r
  }
  if (store === 'floor-rust' && !RUST_BIN) return null
  if (store === 'segment-floor-rust' && !SEGMENT_BIN) return null
  if ((ROWS && !ROWS.has(rows)) || (CLIENTS && !CLIENTS.has(clients))) return null
  const started = now()
  const dir = cellDir(`${workload}-${store.replace(/[ ()]+/g, '-')}`)
  note(`${workload} ${store} rows=${rows} C=${clients}${durable ? '' : ' non-durable'}${label ? ` ${label}` : ''}`)
  let res
  let counters = null
  let rss = null
  let syncs = null
  if (store === 'segment-floor-rust') {
    const r = await runRustSegmentFloor(SEGMENT_BIN, { dir, rows, clients, warmupMs, measureMs, segmentBytes: P.segmentBytes })
    res = {
      ops: r.puts,
      seconds: r.seconds,
      latencyUs: { ...r.latencyUs, samples: r.samples },
      errors: 0,
      cpuSeconds: null,
    }
    counters = { walFlushCount: r.rounds, putCount: r.puts }
    // One fdatasync per round, by construction (it runs in its own process, out of perf's view).
    syncs = { total: r.rounds, calls: { fdatasync: r.rounds }, source: 'rounds' }
  } else if (store === 'floor-rust') {
    const r = await runRustFloor(RUST_BIN, { dir, payload: payloadFor(rows), clients, warmupMs, measureMs })
    res = {
      ops: r.puts,
      seconds: r.seconds,
      latencyUs: { ...r.latencyUs, samples: r.samples },
      errors: 0,
      cpuSeconds: null,
    }
    counters = { walFlushCount: r.objects, putCount: r.puts }
  } else {
    const counted = SYNCS.available && durable && rows === 1 && (workload === 'W1' || workload === 'W2')
    const [s, perf] = await Promise.all([
      STORES[store].open(dir, { durable, rows, clients, options: options ?? {} }),
      counted ? startCounting() : null,
    ])
    const sampler = rssSampler()
    try {
      res = await closedLoopOf(s, {
        clients,
        warmupMs,
        measureMs,
        hooks: syncHooks(perf, s),
        tolerated: STORES[store].tolerated,
      })
    } finally {
      rss = sampler.stop()
      if (perf) {
        syncs = perf.failed ? perf : perf.result()
        spareSession()
      }
    }
    counters = counterDelta(res.startSnap, res.endSnap)
  }
  retire(dir)
  const opsPerSec = res.ops / res.seconds
  const r = {
    workload,
    store,
    rows,
    clients,
    durable,
    label,
    options,
    measuredSeconds: res.seconds,
    warmupSeconds: warmupMs / 1000,
    ops: res.ops,
    putsPerSec: opsPerSec,
    rowsPerSec: opsPerSec * rows,
    mbPerSec: (opsPerSec * rows * ROW_BYTES) / 1e6,
    latencyUs: res.latencyUs,
    errors: res.errors,
    firstError: res.firstError ?? null,
    tolerated: res.tolerated ?? 0,
    firstTolerated: res.firstTolerated ?? null,
    cpuSeconds: res.cpuSeconds,
    rssStart: rss?.start ?? null,
    rssPeak: rss?.peak ?? null,
    rssOutsideHeapGrowth: rss ? rss.outsideHeapPeak - rss.outsideHeapStart : null,
  }
  if (counters && typeof counters.walFlushCount === 'number') {
    const entries = counters.walFlushCount
    const puts = store === 'floor-js' ? counters.durableRequests : counters.putCount
    r.walEntries = entries
    r.walEntriesPerSec = entries / res.seconds
    r.putsPerWalEntry = entries ? puts / entries : null
  }
  if (syncs instanceof Promise) pendingSyncs.set(r, syncs)
  else r.syncs = syncsOf(syncs, res.ops, r.walEntries)
  if (STORES[store]?.memwal) {
    const end = res.endSnap
    r.libPutsPerWalEntry = end?.putsPerWalEntry ?? null
    r.walFlushCount = end?.walFlushCount ?? null
    r.walBytesPerEntry = counters?.walFlushCount ? counters.walFlushBytes / counters.walFlushCount : null
    r.walBytesPerRow = counters?.putRows ? counters.walFlushBytes / counters.putRows : null
    r.generationsFlushed = counters?.memtableFlushCount ?? null
    r.generationFlushMs = counters?.memtableFlushCount
      ? counters.memtableFlushTimeMs / counters.memtableFlushCount
      : null
    r.generationFlushMBps = counters?.memtableFlushTimeMs
      ? (counters.memtableFlushRows * ROW_BYTES) / 1e6 / (counters.memtableFlushTimeMs / 1000)
      : null
    r.backpressureWaitMs = counters?.backpressureWaitMs ?? null
    r.backpressureEvents = counters?.backpressureEvents ?? null
    if (!store.startsWith(MEMWAL_OBJECTS))
      r.tables = `prebuilt before timing (${poolSize(rows)} distinct Tables of ${rows} row${rows > 1 ? 's' : ''}, cycled): measures the store, not Table construction`
  }
  if (FLOORS.includes(store)) r.payloadBytes = payloadFor(rows).length
  if (SEGMENT_FLOORS.includes(store)) {
    r.recordBytes = recordBytes(rows)
    r.segmentBytes = P.segmentBytes
  }
  // Set-up, window and tear-down: what the cell costs a run (the smoke run's budget).
  r.wallSeconds = (now() - started) / 1000
  cache.set(key, r)
  results.push(r)
  return r
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

const W = {}
const wanted = (w) => !ONLY || ONLY.has(w)
const smoke = MODE === 'smoke'

W.W0 = async () => {
  for (const rows of [1, 10000]) for (const store of FLOORS) await cell('W0', { store, rows, clients: 1 })
}

/**
 * The stores of W1 and W2 cells of `rows` rows: the floors (a segment log's floors for 1-row
 * puts), memwal on each WAL layout, the peers; W2 adds memwal given plain objects.
 */
const w12Stores = (rows, { objects = false } = {}) => [
  ...FLOORS,
  ...(rows === 1 ? SEGMENT_FLOORS : []),
  ...MEMWALS,
  ...PEERS,
  ...(objects ? MEMWALS_OBJECTS : []),
]

W.W1 = async () => {
  const sizes = smoke ? [1, 1000] : [1, 100, 1000]
  for (const rows of sizes) for (const store of w12Stores(rows)) await cell('W1', { store, rows, clients: 1 })
}

W.W2 = async () => {
  const plan = smoke
    ? [
        [1, [1, 64]],
        [100, [1, 64]],
      ]
    : [
        [1, [1, 4, 16, 64, 256]],
        [100, [1, 16, 64]],
      ]
  for (const [rows, cs] of plan)
    for (const clients of cs) for (const store of w12Stores(rows, { objects: true })) await cell('W2', { store, rows, clients })
}

W.W3 = async () => {
  for (const clients of [1, 8]) for (const store of [...FLOORS, 'memwal', ...PEERS]) await cell('W3', { store, rows: 10000, clients })
  // Non-durable: a burst from a fresh writer (ingest before maxUnflushedMemtableBytes can push
  // back: the CPU-bound rate), then the sustained rate over the full window (bounded by the
  // disk: the background WAL and the Parquet generations each write every byte).
  for (const clients of [1, 8]) {
    await cell('W3', {
      store: 'memwal',
      rows: 10000,
      clients,
      durable: false,
      label: BURST,
      warmupMs: 100,
      measureMs: 500,
    })
  }
  for (const clients of [1, 8])
    await cell('W3', { store: 'memwal', rows: 10000, clients, durable: false, label: SUSTAINED })
}

W.W4 = async () => {
  for (const clients of [1, 64]) {
    for (const store of ['memwal', 'better-sqlite3', 'lmdb', 'classic-level'])
      await cell('W4', { store, rows: 1, clients, durable: false })
  }
}

W.W5 = async () => {
  await cell('W5', {
    store: 'memwal',
    rows: 1,
    clients: 64,
    options: W5_STEADY,
    label: 'steady (no rotation)',
    measureMs: P.w5SteadyMs,
  })
  global.gc?.()
  await cell('W5', {
    store: 'memwal',
    rows: 1,
    clients: 64,
    options: W5_ROTATING,
    label: 'rotating (MemTables of 1000 batches / 1 MiB, 8 MiB unflushed; collection every 1 s, compaction past 8 generations)',
    measureMs: P.w5Ms,
  })
}

// W8: events as users write them, each put building its own input (events.mjs).
const events = eventStores(mods, LAYOUTS.layouts)
W.W8 = async () => {
  for (const [workload, store, cellOptions] of w8Plan(LAYOUTS.layouts)) {
    const { durable, clients, kind } = cellOptions
    if (CLIENTS && !CLIENTS.has(clients)) continue
    const dir = cellDir(`${workload}-${store.replace(/[ ()]+/g, '-')}`)
    note(`${workload} ${store} C=${clients}${durable ? '' : ' non-durable'}`)
    const counted = SYNCS.available && durable && kind === 'events'
    const starting = counted ? startCounting() : null
    const r = await eventCell(events, store, {
      dir,
      ...cellOptions,
      warmupMs: P.warmupMs,
      measureMs: P.measureMs,
      edges: starting?.then((perf) => (perf.failed ? null : perf)),
    })
    const perf = await starting
    const syncs = perf ? (perf.failed ? perf : perf.result()) : null
    if (perf) spareSession()
    retire(dir)
    if (r !== null) {
      if (syncs instanceof Promise) pendingSyncs.set(r, syncs)
      else r.syncs = syncsOf(syncs, r.ops, r.walEntries)
      results.push(r)
    }
  }
}

const BIG = { maxMemtableSize: 2 ** 34, maxUnflushedMemtableBytes: 2 ** 35, maxMemtableBatches: 1 << 20 }
const w6 = []
async function replayCase(kind, { rows, clients, bytes = Infinity, entriesMax = Infinity, ms = Infinity, options = BIG }) {
  const { ShardWriter } = mods.memwal
  const dir = cellDir(`W6-${kind}`)
  note(`W6 replay ${kind}: writing`)
  const pool = pools21(rows)
  const a = await ShardWriter.open(dir, { schema: kit21.schema, ...options })
  let written = 0
  let puts = 0
  const deadline = now() + ms
  let i = 0
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (written < bytes && puts < entriesMax && now() < deadline) {
        puts++
        written += rows * ROW_BYTES
        await a.put(pool[i++ % pool.length])
      }
    }),
  )
  const wal = await a.walStats()
  const shardId = a.shardId
  // With rotations: what is in generations is not replayed, and collection removes its WAL.
  const collected = options === BIG ? null : await a.collectGarbage()
  const flushed = ((await a.manifest())?.flushedGenerations ?? []).reduce((n, g) => n + (g.rows ?? 0), 0)
  await a.abort()
  global.gc?.()
  note(`W6 replay ${kind}: reopening (${wal.entriesAppended} entries, ${fmtBytes(wal.bytesAppended)})`)
  const t0 = now()
  const b = await ShardWriter.open(dir, { schema: kit21.schema, shardId, ...options })
  const openMs = now() - t0
  const m = await b.memtableStats()
  await b.abort()
  retire(dir)
  global.gc?.()
  const r = {
    workload: 'W6',
    store: 'memwal',
    kind,
    rowsPerPut: rows,
    walEntries: wal.entriesAppended,
    walBytes: wal.bytesAppended,
    rowsWritten: puts * rows,
    rowsFlushed: flushed,
    walEntriesCollected: collected?.walEntriesRemoved ?? 0,
    rowsReplayed: m.rowCount,
    openMs,
    replayMBps: wal.bytesAppended / 1e6 / (openMs / 1000),
    entriesPerSec: wal.entriesAppended / (openMs / 1000),
    rowsPerSec: m.rowCount / (openMs / 1000),
    pageCache: 'warm (the WAL was just written; caches were not dropped)',
  }
  w6.push(r)
  return r
}
W.W6 = async () => {
  for (const bytes of P.w6Large) await replayCase(`large ${fmtBytes(bytes)}`, { rows: 10000, clients: 2, bytes })
  await replayCase('tiny (1-row entries)', { rows: 1, clients: 1, entriesMax: P.w6TinyMax, ms: P.w6TinyMs })
  // A shard run as a service: MemTables rotate, collection and compaction run, so a reopen
  // replays only what was not yet in generations, however long the shard has run.
  await replayCase('rotating, collected (1-row entries, 8 clients)', {
    rows: 1,
    clients: 8,
    ms: P.w6TinyMs,
    options: { ...W5_ROTATING, gcIntervalMs: 200 },
  })
}

const w7 = { process: [], inProcess: [] }
const w7Idle = []

/** W7's claimer in a child process (see claimer.mjs): `claim(dir, shardId)`, then `close()`. */
async function claimerProcess() {
  const child = fork(path.join(benchDir, 'src', 'claimer.mjs'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  let pending = null
  child.on('message', (m) => pending?.resolve(m))
  child.on('exit', (code) => pending?.reject(new Error(`W7 claimer exited with ${code}`)))
  const next = () => new Promise((resolve, reject) => (pending = { resolve, reject }))
  await next() // ready
  return {
    claim: async (dir, shardId) => {
      const reply = next()
      child.send({ dir, shardId })
      const r = await reply
      if (!r.ok) throw new Error(`W7 claimer: ${r.error}`)
      return r
    },
    close: () => child.disconnect(),
  }
}

/** The claim in this process, next to the writer it fences. */
const claimInProcess = (dir, shardId) => claimShard(mods.memwal.ShardWriter, kit21.schema, dir, shardId)

/** One W7 repetition: 16 clients put durably on writer A while `claim` opens the shard. */
async function fenceLive(claim) {
  const { ShardWriter, FencedError } = mods.memwal
  const dir = cellDir('W7')
  const a = await ShardWriter.open(dir, { schema: kit21.schema })
  const records = []
  let nextId = 1
  let stopAll = false
  const clients = Array.from({ length: 16 }, async () => {
    while (!stopAll) {
      const id = nextId++
      const t = kit21.table(1, id) // built per put: W7 checks identities, it does not time puts
      const rec = { id, invoked: now(), settled: null, ok: null, code: null, reason: null }
      records.push(rec)
      try {
        await a.put(t)
        rec.ok = true
      } catch (e) {
        rec.ok = false
        rec.code = e?.code ?? String(e)
        rec.reason = e instanceof FencedError ? e.fenceReason : null
        return
      } finally {
        rec.settled = now()
      }
    }
  })
  await sleep(P.w7LeadMs)
  const t0 = now()
  const opened = await claim(dir, a.shardId)
  const tB = now()
  const hung = await Promise.race([Promise.all(clients).then(() => false), sleep(5000).then(() => true)])
  stopAll = true
  // A third writer recovers the shard: every acknowledged put must be in it.
  const c = await ShardWriter.open(dir, { schema: kit21.schema, shardId: a.shardId })
  const scan = await c.scan()
  const keys = scan.getChild('key')
  const present = new Set()
  for (let i = 0; i < scan.numRows; i++) present.add(Buffer.from(keys.get(i)).readUInt32BE(12))
  // In flight when the claim started: invoked before it, not settled before it.
  const inflight = records.filter((r) => r.invoked < t0 && (r.settled === null || r.settled > t0))
  const rejected = records.filter((r) => r.ok === false)
  const result = {
    // The claim ends when the old writer is fenced (epoch CAS, WAL tip, fence sentinel);
    // open then replays the unflushed WAL tail the old writer left.
    claimMs: opened.claimMs,
    openMs: opened.openMs,
    replayMs: opened.replayMs,
    replayedEntries: opened.replayedEntries,
    putsBeforeClaim: records.filter((r) => r.settled !== null && r.settled <= tB && r.ok).length,
    inflightAtClaim: inflight.length,
    inflightRejected: inflight.filter((r) => r.ok === false).length,
    inflightResolvedAndRecovered: inflight.filter((r) => r.ok && present.has(r.id)).length,
    duringClaim: records.filter((r) => r.invoked >= t0 && r.invoked < tB).length,
    duringClaimRejected: records.filter((r) => r.invoked >= t0 && r.invoked < tB && r.ok === false).length,
    duringClaimResolvedAndRecovered: records.filter(
      (r) => r.invoked >= t0 && r.invoked < tB && r.ok && present.has(r.id),
    ).length,
    okAfterClaimInvoked: records.filter((r) => r.invoked >= tB && r.ok).length,
    okMissingAfterReopen: records.filter((r) => r.ok && !present.has(r.id)).length,
    nonFencedErrors: rejected.filter((r) => r.code !== 'FENCED' || r.reason !== 'PeerClaimedEpoch').length,
    firstRejectAfterClaimMs: rejected.length ? Math.min(...rejected.map((r) => r.settled)) - tB : null,
    hung: hung || records.some((r) => r.settled === null),
    walTailEntries: opened.fenceSentinelPosition,
  }
  await a.abort()
  await c.abort()
  retire(dir)
  return result
}

W.W7 = async () => {
  const { ShardWriter } = mods.memwal
  // The claimer runs in its own process, as failover between instances would; the same claim
  // from inside the fenced writer's process (sharing its runtime and CPU) is reported too.
  const claimer = await claimerProcess()
  try {
    for (let rep = 0; rep < P.w7Reps; rep++) {
      w7.process.push(await fenceLive(claimer.claim))
      w7.inProcess.push(await fenceLive(claimInProcess))
    }
  } finally {
    claimer.close()
  }
  // The same claim on an idle shard (one durable put, nothing in flight): claim cost without
  // a live WAL tail to replay.
  for (let rep = 0; rep < P.w7Reps; rep++) {
    const dir = cellDir('W7-idle')
    const a = await ShardWriter.open(dir, { schema: kit21.schema })
    await a.put(kit21.table(1, 0))
    const t0 = now()
    const b = await ShardWriter.open(dir, { schema: kit21.schema, shardId: a.shardId })
    w7Idle.push({ openMs: now() - t0, claimMs: b.openStats().claimMs })
    await a.abort()
    await b.abort()
    retire(dir)
  }
}

// ---------------------------------------------------------------------------------------------
// Run
// ---------------------------------------------------------------------------------------------

say(`memwal benchmark (${MODE}) — ${new Date().toISOString()}`)
say(`data directory: ${DATA} (${FS.type ?? '?'} on ${FS.device ?? '?'}${FS.journal === false ? ', no journal' : ''}${FS.tmpfs ? ', tmpfs!' : ''})`)
note('machine floor')
const floor = await machineFloor(path.join(DATA, 'floor'), { ms: P.floorMs })
const vers = versions(
  { ...mods, addonPath: path.join(benchDir, '..', 'memwal.linux-x64-gnu.node') },
  benchDir,
  RUST_BIN,
)
vers.segmentFloor = SEGMENT_BIN ? path.relative(path.join(benchDir, '..'), SEGMENT_BIN) : null
{
  const Database = (await import('better-sqlite3')).default
  const db = new Database(':memory:')
  vers.sqlite = db.prepare('select sqlite_version()').pluck().get()
  db.close()
}
say()
say('Machine floor')
say(
  textTable(
    ['measurement', 'p50', 'p99', 'rate'],
    [
      [
        'fdatasync of a 100 B append',
        fmtUs(floor.fdatasyncAppend100B.p50),
        fmtUs(floor.fdatasyncAppend100B.p99),
        `${fmtNum(floor.fdatasyncAppend100B.perSecond)}/s serial`,
      ],
      [
        'fdatasync of a 100 B write into a preallocated, zero-filled file (a segment log\'s commit)',
        fmtUs(floor.fdatasyncPreallocated100B.p50),
        fmtUs(floor.fdatasyncPreallocated100B.p99),
        `${fmtNum(floor.fdatasyncPreallocated100B.perSecond)}/s serial`,
      ],
      [
        'durable publish of a new 100 B file (write, fdatasync, rename, dir fsync)',
        fmtUs(floor.publishNewFile100B.p50),
        fmtUs(floor.publishNewFile100B.p99),
        `${fmtNum(floor.publishNewFile100B.perSecond)}/s serial`,
      ],
      ...(floor.publishNewFileSynced100B
        ? [
            [
              'the same, plus fsync of the file after the rename (memwal\'s order: no-journal ext4)',
              fmtUs(floor.publishNewFileSynced100B.p50),
              fmtUs(floor.publishNewFileSynced100B.p99),
              `${fmtNum(floor.publishNewFileSynced100B.perSecond)}/s serial`,
            ],
          ]
        : []),
      [
        'memcpy, 1 MiB (in cache) / 64 MiB (DRAM)',
        '',
        '',
        `${floor.memcpyGBs.inCache1MiB.toFixed(1)} / ${floor.memcpyGBs.dram64MiB.toFixed(1)} GB/s`,
      ],
      ['Node async hop (libuv thread-pool round trip)', fmtUs(floor.asyncHop.p50), fmtUs(floor.asyncHop.p99), ''],
    ],
    [false, true, true, true],
  ),
)
say(
  `versions: node ${vers.node}; memwal ${vers.memwal}; apache-arrow ${vers.apacheArrowMemwal} (memwal) / ${vers.apacheArrowLancedb} (LanceDB); better-sqlite3 ${vers.betterSqlite3} (SQLite ${vers.sqlite}); lmdb ${vers.lmdb}; classic-level ${vers.classicLevel}; @lancedb/lancedb ${vers.lancedb}; ${vers.rustc ?? 'no rustc'}; ${vers.kernel}; ${vers.cpu}; ${vers.memoryGiB} GiB`,
)
say(`loadavg at start: ${loadStart.map((x) => x.toFixed(2)).join(' ')}`)
if (!RUST_BIN) say('note: the Rust store floor binary is missing (no cargo?): its rows are skipped')
if (!SEGMENT_BIN) say('note: the Rust segment floor binary is missing (no cargo?): its rows are skipped')
say(
  LAYOUTS.layouts[0] === null
    ? `WAL layouts: the writer's only one (it does not take walLayout: ${LAYOUTS.reason})`
    : `WAL layouts: memwal's W1, W2 and W8 durable cells run on ${LAYOUTS.layouts.join(' and ')}`,
)
say(
  SYNCS.available
    ? `sync calls per put: counted with perf (${SYNCS.events.join(', ')}) in the durable 1-row cells of W1, W2 and W8`
    : `sync calls per put: not counted (${SYNCS.reason})`,
)

// W5 runs first: its RSS bound is only meaningful before earlier cells have grown the heap and
// the allocator's arenas (freed memory is reused without raising RSS). Reports keep W0-W8 order.
const order = ['W5', 'W0', 'W1', 'W2', 'W3', 'W4', 'W6', 'W7', 'W8']
const workloadSeconds = {}
for (const w of order) {
  if (!wanted(w)) continue
  const t0 = now()
  await W[w]()
  workloadSeconds[w] = (now() - t0) / 1000
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

for (const [r, counted] of pendingSyncs) r.syncs = syncsOf(await counted, r.ops, r.walEntries)
if (spareCounting) {
  const spare = await spareCounting
  if (!spare.failed) await spare.result()
}

sayWorkloadTables(results, say)
sayRecoveryTable(w6, say)
const w7Summary = summarizeFencing(w7, w7Idle)
if (w7Summary) sayFencingTable(w7, w7Summary, say)

// Targets (ratios within this run) and, in a smoke run, guards (what ran, never how fast).
const report = {
  results,
  find: cellFinder(results),
  w6,
  w7,
  w7Summary,
  floor,
  wanted,
  payloadFor,
  layouts: LAYOUTS.layouts,
  syncCounting: { ...SYNCS, ...countingCost },
}
const targets = judgeTargets(report)
sayTargets(targets, say)
const checks = smoke ? smokeChecks(report) : null

const totalSeconds = (now() - startedAt) / 1000
const out = {
  schemaVersion: 1,
  mode: MODE,
  generatedAt: new Date().toISOString(),
  totalSeconds,
  workloadSeconds,
  params: {
    ...P,
    rowBytes: ROW_BYTES,
    row: '{key: 20 B binary, value: 72 B binary, ts: int64}',
    only: ONLY ? [...ONLY] : null,
  },
  machine: { floor, versions: vers, fs: FS, loadavgAtStart: loadStart, loadavgAtEnd: os.loadavg() },
  walLayouts: LAYOUTS,
  syncCounting: SYNCS.available ? { available: true, tool: 'perf stat', events: SYNCS.events, ...countingCost } : SYNCS,
  stores: Object.fromEntries(
    Object.entries({
      ...STORES,
      'floor-rust': {
        durability:
          'memwal-core LocalStore put_opts(PutMode::Create): O_TMPFILE, write, fdatasync, linkat, dir fsync (group commit), from Rust (crates/memwal-core/examples/store_floor.rs)',
      },
      'segment-floor-rust': {
        durability: `records pwritten at the next offset of a preallocated, zero-filled, fsynced ${P.segmentBytes >> 20} MiB file, then fdatasync, by one committer thread (group commit), from Rust (crates/memwal-core/examples/segment_floor.rs)`,
      },
    }).map(([k, s]) => [k, { durable: s.durability, nondurable: s.nondurable ?? null }]),
  ),
  notes: [
    'MB/s counts 100 B per row (the logical record), for every store.',
    'memwal: Tables prebuilt before timing (a pool of distinct Tables per put size, cycled); each put still pays the JS-side column export; W7 builds a Table per put (it checks identities, not speed).',
    '"memwal objects" (W2) puts plain-object rows { key, value, ts } built per put; W8 builds every input inside the timed call (an event object, or a Table from tableFromArrays), as a service does per request.',
    'Floors publish the Arrow IPC stream bytes of the same put (payloadBytes), group-committing concurrent puts into one file.',
    `Segment floors (1-row puts) write a record per put (recordBytes: a ${RECORD_HEADER_BYTES} B header and 100 B per row) at the next offset of a preallocated, zero-filled, fsynced file, starting again at its beginning when full (as a recycled segment), then one fdatasync per round; records arriving during a sync form the next round.`,
    'syncs: fsync and fdatasync calls of this process over the measured window (perf stat on the syscall tracepoints; background work such as generation commits included), per acknowledged put and per WAL entry (a group commit); the Rust segment floor counts its own rounds.',
    'LanceDB: table.add does no fsync/fdatasync on a local directory (strace), so its rows are an upper bound, not durable; it is left out of "best durable peer".',
    'better-sqlite3 is synchronous: concurrent clients are serialized on the event loop (one transaction per put).',
    'memwal cells use default options (8000 batches per MemTable: 1-row puts rotate a generation every 8000 puts) except W5 and W6.',
  ],
  cells: results,
  w6,
  w7: { summary: w7Summary, reps: w7, idle: w7Idle },
  targets,
  guards: checks?.guards,
  readings: checks?.readings,
}

const resultsDir = path.join(benchDir, 'results')
const outDir = SAVE_LATEST ? resultsDir : path.join(resultsDir, 'tmp')
fs.mkdirSync(outDir, { recursive: true })
const base = SAVE_LATEST ? 'latest' : MODE
fs.writeFileSync(path.join(outDir, `${base}.json`), `${JSON.stringify(out, null, 2)}\n`)
fs.writeFileSync(path.join(outDir, `${base}.md`), summaryMarkdown(out))
try {
  const svg = await renderChart(out)
  fs.writeFileSync(path.join(outDir, `${base}.svg`), svg)
  say()
  say(`wrote ${path.relative(process.cwd(), path.join(outDir, `${base}.json`))} and ${base}.svg`)
} catch (e) {
  say(`chart failed: ${e.stack ?? e}`)
  if (smoke) checks.guard('chart renders', false, String(e))
}

say(
  `total ${totalSeconds.toFixed(1)} s (${Object.entries(workloadSeconds)
    .map(([k, v]) => `${k} ${v.toFixed(1)} s`)
    .join(', ')})`,
)
if (smoke) process.exitCode = saySmokeChecks(checks, say) ? 1 : 0
