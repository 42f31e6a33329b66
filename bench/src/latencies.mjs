// The clock every cell is measured with, and latency percentiles.

import { performance } from 'node:perf_hooks'

/** Milliseconds since the process started, with sub-millisecond resolution. */
export const now = () => performance.now()

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
