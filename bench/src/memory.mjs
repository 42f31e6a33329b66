// Memory use of this process while a cell runs.

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
