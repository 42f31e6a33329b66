// What the commands print: numbers and sizes for people, plain-text tables, and writes to
// stdout that wait for it to drain.

/** `1536` → `1.5 KiB`. */
export function formatBytes(n: number | null): string {
  if (n === null) return '?'
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = n
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`
}

/** `1234567` → `1,234,567`. */
export function formatCount(n: number | null): string {
  return n === null ? '?' : n.toLocaleString('en-US')
}

/**
 * Left-aligned text columns under a header, two spaces apart. Cells longer than `maxWidth`
 * are cut with `…`.
 */
export function textTable(header: string[], rows: string[][], maxWidth = 60): string {
  const cut = (s: string): string => (s.length > maxWidth ? `${s.slice(0, maxWidth - 1)}…` : s)
  const all = [header, ...rows].map((r) => r.map(cut))
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)))
  return all
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}

/** Writes to stdout; resolves once the chunk is handed off (so large outputs keep memory flat). */
export function out(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve()
    else process.stdout.once('drain', resolve)
  })
}
