// Numbers, durations and sizes for people, and aligned text tables, as the report prints them.

/** Microseconds as `12 µs`, `3.40 ms` or `1.20 s`; `-` when missing. */
export function fmtUs(us) {
  if (us === null || us === undefined || Number.isNaN(us)) return '-'
  if (us < 1000) return `${us.toFixed(us < 10 ? 1 : 0)} µs`
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`
  return `${(us / 1e6).toFixed(2)} s`
}

/** `12345` as `12.3k`, `1.5e6` as `1.50M`; `-` when missing. */
export function fmtNum(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return '-'
  if (Math.abs(n) >= 1e6) return `${(n / 1e6).toFixed(2)}M`
  if (Math.abs(n) >= 1e4) return `${(n / 1e3).toFixed(1)}k`
  return n.toFixed(digits)
}

/** Bytes as `512 B`, `1.5 KiB`, `2.0 MiB` or `1.25 GiB`; `-` when missing. */
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
