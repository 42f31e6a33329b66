// The closed-loop driver: N clients, each awaiting its own operation before starting the next,
// for a warm-up and then a measured window.

import { Latencies, now } from './latencies.mjs'

/**
 * Runs `clients` closed-loop clients, each awaiting its own `op(client, seq)` until the window
 * ends. Latencies are recorded for ops invoked inside the measured window; throughput counts ops
 * that complete inside it. `hooks.start()`/`hooks.end()` run at the window's edges (e.g. to
 * snapshot counters). Errors are counted; more than `maxErrors` aborts the cell. An error for
 * which `tolerated(e)` is true (a peer's documented refusal, such as LanceDB's commit conflict
 * under concurrent appends) is counted apart as `tolerated` and never aborts the cell.
 */
export async function closedLoop({ clients, warmupMs, measureMs, op, hooks = {}, maxErrors = 0, tolerated = () => false }) {
  const lat = new Latencies()
  const t0 = now()
  const from = t0 + warmupMs
  const end = from + measureMs
  let ops = 0
  let errors = 0
  let toleratedErrors = 0
  let firstTolerated = null
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
        if (tolerated(e)) {
          toleratedErrors++
          firstTolerated ??= e
          continue
        }
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
    tolerated: toleratedErrors,
    firstTolerated: firstTolerated ? String(firstTolerated.message ?? firstTolerated).slice(0, 160) : null,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    startSnap,
    endSnap,
  }
}

/**
 * {@link closedLoop} of session `s`'s puts (a store adapter's session, see stores.mjs), which
 * ends afterwards whatever happened: a memwal writer is aborted (its rows are not needed), any
 * other store closed.
 */
export async function closedLoopOf(s, options) {
  try {
    return await closedLoop({ ...options, op: s.put })
  } finally {
    if (s.writer) await s.writer.abort()
    else await s.close()
  }
}
