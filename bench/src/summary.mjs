// A short Markdown summary of a report (machine floor, headline cells, targets), written next to
// the JSON by run.mjs. `node bench/src/summary.mjs [report.json]` prints it;
// `node bench/src/summary.mjs --readme` puts the summary of results/latest.json into the README's
// Performance section (between its markers).

import fs from 'node:fs'
import { fileURLToPath } from 'node:url'

import { fmtNum, fmtUs } from './format.mjs'

const row = (cells) => `| ${cells.join(' | ')} |`

/** A detail's text up to its first `; ` outside parentheses. */
function firstClause(detail) {
  let depth = 0
  for (let i = 0; i < detail.length; i++) {
    const c = detail[i]
    if (c === '(') depth++
    else if (c === ')') depth = Math.max(0, depth - 1)
    else if (depth === 0 && detail.startsWith('; ', i)) return detail.slice(0, i)
  }
  return detail
}

/**
 * A Markdown table with a column per store and a row per `[name, pick(store) -> cell, fmt(cell)]`
 * (`-` where a store has no such cell).
 */
function storeTable(stores, rows) {
  return [
    row(['', ...stores]),
    row(['---', ...stores.map(() => '---:')]),
    ...rows.map(([name, pick, fmt]) =>
      row([
        name,
        ...stores.map((s) => {
          const c = pick(s)
          return c ? fmt(c) : '-'
        }),
      ]),
    ),
  ]
}

export function summaryMarkdown(report) {
  const f = report.machine.floor
  const v = report.machine.versions
  const load = report.machine.loadavgAtStart
  const find = (w, store, rows, clients, pred = () => true) =>
    report.cells.find(
      (c) => c.workload === w && c.store === store && c.rows === rows && c.clients === clients && pred(c),
    )
  const durable = (c) => c.durable
  const lines = []
  lines.push(
    `Run of ${report.generatedAt.slice(0, 10)} (${report.mode}, ${Math.round(report.totalSeconds / 60)} min): ${v.cpu}, ${v.memoryGiB} GiB, ${report.machine.fs.type}${report.machine.fs.journal === false ? ' (no journal)' : ''} on ${report.machine.fs.device}, ${v.kernel}, Node ${v.node}${load ? `; load average at start ${load.map((x) => x.toFixed(1)).join(' / ')}` : ''}.`,
  )
  lines.push('')
  lines.push(row(['machine floor', 'p50', 'p99']))
  lines.push(row(['---', '---:', '---:']))
  lines.push(row(['fdatasync of a 100 B append', fmtUs(f.fdatasyncAppend100B.p50), fmtUs(f.fdatasyncAppend100B.p99)]))
  if (f.fdatasyncPreallocated100B) {
    lines.push(
      row([
        'fdatasync of a 100 B write into a preallocated file (a segment log\'s commit)',
        fmtUs(f.fdatasyncPreallocated100B.p50),
        fmtUs(f.fdatasyncPreallocated100B.p99),
      ]),
    )
  }
  lines.push(
    row([
      'durable publish of a new file (write, fdatasync, rename, dir fsync)',
      fmtUs(f.publishNewFile100B.p50),
      fmtUs(f.publishNewFile100B.p99),
    ]),
  )
  if (f.publishNewFileSynced100B) {
    lines.push(
      row([
        'the same, plus fsync of the file after the rename (memwal\'s order on no-journal ext4)',
        fmtUs(f.publishNewFileSynced100B.p50),
        fmtUs(f.publishNewFileSynced100B.p99),
      ]),
    )
  }
  lines.push(row(['Node async hop (libuv round trip)', fmtUs(f.asyncHop.p50), fmtUs(f.asyncHop.p99)]))
  lines.push(
    row([
      'memcpy (1 MiB / 64 MiB)',
      `${f.memcpyGBs.inCache1MiB.toFixed(0)} GB/s`,
      `${f.memcpyGBs.dram64MiB.toFixed(0)} GB/s`,
    ]),
  )
  lines.push('')
  // memwal on each WAL layout that ran (`memwal` alone when the writer has one), then the floors.
  const memwals = ['memwal', 'memwal (objects)', 'memwal (segments)'].filter((s) => report.cells.some((c) => c.store === s))
  const floors = ['floor-js', 'floor-rust', 'segment-floor-js', 'segment-floor-rust'].filter(
    (s) => s.startsWith('floor') || report.cells.some((c) => c.store === s),
  )
  const stores = [...(memwals.length ? memwals : ['memwal']), ...floors, 'better-sqlite3', 'lmdb', 'classic-level', 'lancedb']
  const perPut = (c) =>
    c.syncs?.perPut != null ? c.syncs.perPut.toFixed(c.syncs.perPut < 0.1 ? 3 : 2) : c.syncs?.unavailable ? 'n/a' : '-'
  const headline = [
    [
      'W1 lone durable 1-row put: p50 / p99',
      (s) => find('W1', s, 1, 1, durable),
      (c) => `${fmtUs(c.latencyUs.p50)} / ${fmtUs(c.latencyUs.p99)}`,
    ],
    ['W2 durable 1-row puts/s, 1 client', (s) => find('W2', s, 1, 1, durable), (c) => fmtNum(c.putsPerSec)],
    [
      'W2 durable 1-row puts/s, 64 clients (puts per WAL entry)',
      (s) => find('W2', s, 1, 64, durable),
      (c) => `${fmtNum(c.putsPerSec)}${c.putsPerWalEntry ? ` (${c.putsPerWalEntry.toFixed(0)})` : ''}`,
    ],
    [
      'W3 durable 10,000-row batches, rows/s (best of 1 and 8 clients)',
      (s) =>
        [find('W3', s, 10000, 1, durable), find('W3', s, 10000, 8, durable)]
          .filter(Boolean)
          .sort((a, b) => b.rowsPerSec - a.rowsPerSec)[0],
      (c) => fmtNum(c.rowsPerSec),
    ],
    ['sync calls per put: W1, 1 client', (s) => find('W1', s, 1, 1, durable), perPut],
    ['sync calls per put: W2, 64 clients', (s) => find('W2', s, 1, 64, durable), perPut],
    ['W4 non-durable 1-row put, 1 client: p50', (s) => find('W4', s, 1, 1), (c) => fmtUs(c.latencyUs.p50)],
    ['W4 non-durable 1-row puts/s, 64 clients', (s) => find('W4', s, 1, 64), (c) => fmtNum(c.putsPerSec)],
  ]
  lines.push(...storeTable(stores, headline))
  lines.push('')
  lines.push('LanceDB issues no fsync on a local directory, so its column is not durable (an upper bound).')
  lines.push('')
  const w8 = report.cells.filter((c) => c.workload === 'W8' || c.workload === 'W8e')
  if (w8.length) {
    const w8Stores = [...new Set(w8.map((c) => c.store))]
    const pick = (w, clients, isDurable) => (st) =>
      w8.find((c) => c.workload === w && c.store === st && c.clients === clients && c.durable === isDurable)
    const w8Rows = [
      ['W8 durable event puts/s, 1 client', pick('W8', 1, true), (c) => fmtNum(c.putsPerSec)],
      ['W8 durable event puts/s, 64 clients', pick('W8', 64, true), (c) => fmtNum(c.putsPerSec)],
      ['W8 non-durable event puts/s, 1 client', pick('W8', 1, false), (c) => fmtNum(c.putsPerSec)],
      ['W8 non-durable event puts/s, 64 clients', pick('W8', 64, false), (c) => fmtNum(c.putsPerSec)],
      ['W8 JS thread per non-durable put, 1 client', pick('W8', 1, false), (c) => fmtUs(c.jsThreadUsPerPut)],
      ['W8e durable 768-float embedding rows, 64 clients: MB/s', pick('W8e', 64, true), (c) => c.mbPerSec.toFixed(0)],
    ]
    lines.push(
      'W8, events as users write them: 1-row puts of a ~100 B `{ id, ts, user, payload }` event, the input built inside each timed put (memwal: the object itself, or a Table from `tableFromArrays`; the peers: as their docs show).',
    )
    lines.push('')
    lines.push(...storeTable(w8Stores, w8Rows))
    lines.push('')
  }
  lines.push(row(['target', 'result', 'ratio', 'measured']))
  lines.push(row(['---', '---', '---:', '---']))
  for (const t of report.targets) {
    lines.push(
      row([
        `${t.id}: ${t.target}`,
        t.met === null ? 'n/a' : t.met ? 'met' : '**missed**',
        t.ratio === null ? '' : t.ratio.toFixed(2),
        // The headline of the detail; the full text is in the JSON and on stdout.
        firstClause(t.detail.replace(/ \(ratio = [^)]*\)/, '')).replaceAll('|', '/'),
      ]),
    )
  }
  return `${lines.join('\n')}\n`
}

const START = '<!-- bench summary: start (node bench/src/summary.mjs --readme) -->'
const END = '<!-- bench summary: end -->'

/** Replaces the README's summary between the markers with the summary of `report`. */
export function updateReadme(readmePath, report) {
  const text = fs.readFileSync(readmePath, 'utf8')
  const a = text.indexOf(START)
  const b = text.indexOf(END)
  if (a < 0 || b < a) throw new Error(`${readmePath} has no bench summary markers`)
  fs.writeFileSync(readmePath, `${text.slice(0, a + START.length)}\n\n${summaryMarkdown(report)}\n${text.slice(b)}`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  const file =
    args.find((a) => !a.startsWith('--')) ?? fileURLToPath(new URL('../results/latest.json', import.meta.url))
  const report = JSON.parse(fs.readFileSync(file, 'utf8'))
  if (args.includes('--readme')) {
    updateReadme(fileURLToPath(new URL('../../README.md', import.meta.url)), report)
  } else {
    process.stdout.write(summaryMarkdown(report))
  }
}
