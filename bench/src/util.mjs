// Timing, percentiles, the closed-loop driver and formatting.

import fs from 'node:fs'
import path from 'node:path'
import { performance } from 'node:perf_hooks'

export const now = () => performance.now()
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
export const ROW_BYTES = 100

/** A growable list of latencies in microseconds. */
export class Latencies {
  constructor() {
    this.a = new Float64Array(1 << 14)
    this.n = 0
  }
  push(us) {
    if (this.n === this.a.length) {
      const b = new Float64Array(this.a.length * 2)
      b.set(this.a)
      this.a = b
    }
    this.a[this.n++] = us
  }
  extend(values) {
    for (const v of values) this.push(v)
  }
  /** p50/p99/p99.9/max/mean in µs (nearest rank), or nulls when empty. */
  summary() {
    if (this.n === 0) return { p50: null, p99: null, p999: null, max: null, mean: null, samples: 0 }
    const s = this.a.slice(0, this.n).sort()
    const at = (p) => s[Math.min(this.n, Math.max(1, Math.ceil((p / 100) * this.n))) - 1]
    let sum = 0
    for (let i = 0; i < this.n; i++) sum += s[i]
    return { p50: at(50), p99: at(99), p999: at(99.9), max: s[this.n - 1], mean: sum / this.n, samples: this.n }
  }
}

/**
 * Runs `clients` closed-loop clients, each awaiting its own `op(client, seq)` until the window
 * ends. Latencies are recorded for ops invoked inside the measured window; throughput counts ops
 * that complete inside it. `hooks.start()`/`hooks.end()` run at the window's edges (e.g. to
 * snapshot counters). Errors are counted; more than `maxErrors` aborts the cell.
 */
export async function closedLoop({ clients, warmupMs, measureMs, op, hooks = {}, maxErrors = 0 }) {
  const lat = new Latencies()
  const t0 = now()
  const from = t0 + warmupMs
  const end = from + measureMs
  let ops = 0
  let errors = 0
  let firstError = null
  let startedHook = false
  let endedHook = false
  let startSnap = null
  let endSnap = null
  const edge = (t) => {
    if (!startedHook && t >= from) {
      startedHook = true
      startSnap = hooks.start?.() ?? null
    }
    if (!endedHook && t >= end) {
      endedHook = true
      endSnap = hooks.end?.() ?? null
    }
  }
  const cpu0 = process.cpuUsage()
  const client = async (c) => {
    for (let seq = 0; ; seq++) {
      const a = now()
      edge(a)
      if (a >= end) return
      try {
        await op(c, seq)
      } catch (e) {
        errors++
        firstError ??= e
        if (errors > maxErrors) throw e
        continue
      }
      const b = now()
      if (a >= from) lat.push((b - a) * 1000)
      if (b >= from && b <= end) ops++
    }
  }
  // A timer makes sure the edges are seen even while every client is waiting.
  const timer = setInterval(() => edge(now()), 5)
  try {
    await Promise.all(Array.from({ length: clients }, (_, c) => client(c)))
  } finally {
    clearInterval(timer)
  }
  edge(Math.max(now(), end))
  const cpu = process.cpuUsage(cpu0)
  return {
    ops,
    seconds: measureMs / 1000,
    latencyUs: lat.summary(),
    errors,
    firstError: firstError ? String(firstError.message ?? firstError).slice(0, 300) : null,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    startSnap,
    endSnap,
  }
}

/**
 * Samples memory every `ms` until stopped: peak RSS, and the peak of RSS minus the V8 heap
 * (memory outside the JS heap: native MemTables, buffers) — both relative to the start.
 */
export function rssSampler(ms = 50) {
  const outside = (m) => m.rss - m.heapTotal
  const m0 = process.memoryUsage()
  let peak = m0.rss
  let peakOutside = outside(m0)
  const sample = () => {
    const m = process.memoryUsage()
    peak = Math.max(peak, m.rss)
    peakOutside = Math.max(peakOutside, outside(m))
  }
  const t = setInterval(sample, ms)
  return {
    stop() {
      clearInterval(t)
      sample()
      return { start: m0.rss, peak, outsideHeapStart: outside(m0), outsideHeapPeak: peakOutside }
    },
  }
}

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

/**
 * Frees a finished cell's disk space but keeps its files, emptied, until the run ends (when
 * the whole data directory is removed). On ext4 without a journal (this class of VM), creating
 * a file scans past every inode freed in the last minutes (`recently_deleted` in ext4's inode
 * allocator): deleting one cell's tens of thousands of small files made each file created by
 * the cells after it cost up to a millisecond of kernel CPU (a quarter of all CPU samples in a
 * profile of durable puts). That charged memwal and the floors, which create a file per WAL
 * entry, for the harness's own cleanup, and the peers, which reuse their files, nothing.
 */
export function retire(dir) {
  let entries
  try {
    entries = fs.readdirSync(dir, { recursive: true, withFileTypes: true })
  } catch (e) {
    if (e?.code === 'ENOENT') return
    throw e
  }
  for (const e of entries) {
    if (e.isFile()) fs.truncateSync(path.join(e.parentPath ?? e.path, e.name), 0)
  }
}

// abort() stops a writer's tasks without waiting for an append already handed to the disk; that
// file can still appear while the directory is being removed, so retry on ENOTEMPTY.
// (Node 20's own maxRetries does not cover a rmdir deep in the tree.)
export function rmrf(p) {
  for (let attempt = 1; ; attempt++) {
    try {
      fs.rmSync(p, { recursive: true, force: true })
      return
    } catch (e) {
      if (e?.code !== 'ENOTEMPTY' || attempt >= 40) throw e
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50)
    }
  }
}

export function fmtUs(us) {
  if (us === null || us === undefined || Number.isNaN(us)) return '-'
  if (us < 1000) return `${us.toFixed(us < 10 ? 1 : 0)} µs`
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`
  return `${(us / 1e6).toFixed(2)} s`
}

export function fmtNum(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return '-'
  if (Math.abs(n) >= 1e6) return `${(n / 1e6).toFixed(2)}M`
  if (Math.abs(n) >= 1e4) return `${(n / 1e3).toFixed(1)}k`
  return n.toFixed(digits)
}

export function fmtBytes(b) {
  if (b === null || b === undefined) return '-'
  if (b < 0) return `-${fmtBytes(-b)}`
  if (b >= 1 << 30) return `${(b / (1 << 30)).toFixed(2)} GiB`
  if (b >= 1 << 20) return `${(b / (1 << 20)).toFixed(1)} MiB`
  if (b >= 1 << 10) return `${(b / (1 << 10)).toFixed(1)} KiB`
  return `${b} B`
}

/** Renders rows (arrays of strings) as an aligned text table. */
export function textTable(header, rows, rightAlign = []) {
  const all = [header, ...rows]
  const w = header.map((_, i) => Math.max(...all.map((r) => String(r[i] ?? '').length)))
  const line = (r) =>
    r
      .map((c, i) => {
        const s = String(c ?? '')
        return rightAlign[i] ? s.padStart(w[i]) : s.padEnd(w[i])
      })
      .join('  ')
      .trimEnd()
  return [line(header), w.map((n) => '-'.repeat(n)).join('  '), ...rows.map(line)].join('\n')
}
