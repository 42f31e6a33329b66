// The report's chart (SVG, rendered headless by vega + vega-lite): W2 throughput against
// concurrency per store, and latency percentiles per store (W1 lone put, W2 at 64 clients).

import * as vega from 'vega'
import * as vl from 'vega-lite'

const ORDER = [
  'memwal',
  'memwal objects',
  'memwal (objects)',
  'memwal objects (objects)',
  'memwal (segments)',
  'memwal objects (segments)',
  'floor-js',
  'floor-rust',
  'segment-floor-js',
  'segment-floor-rust',
  'better-sqlite3',
  'lmdb',
  'classic-level',
  'lancedb',
]
const COLORS = [
  '#d62728',
  '#e377c2',
  '#d62728',
  '#e377c2',
  '#8c564b',
  '#c49c94',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
  '#9edae5',
  '#1f77b4',
  '#2ca02c',
  '#9467bd',
  '#ff7f0e',
]

export async function renderChart(report) {
  const cells = report.cells
  const scaling = cells
    .filter((c) => c.workload === 'W2' && c.putsPerSec > 0)
    .map((c) => ({
      store: c.store,
      clients: c.clients,
      putsPerSec: c.putsPerSec,
      rows: `${c.rows} row${c.rows > 1 ? 's' : ''} per put`,
    }))
  const lat = []
  const add = (w, rows, clients, title) => {
    for (const c of cells.filter((c) => c.workload === w && c.rows === rows && c.clients === clients && c.durable)) {
      for (const [p, k] of [
        ['p50', 'p50'],
        ['p99', 'p99'],
        ['p99.9', 'p999'],
      ]) {
        if (c.latencyUs[k] > 0) lat.push({ store: c.store, percentile: p, ms: c.latencyUs[k] / 1000, panel: title })
      }
    }
  }
  add('W1', 1, 1, 'W1: lone durable 1-row put (1 client)')
  add('W2', 1, 64, 'W2: durable 1-row puts, 64 clients')
  const color = {
    field: 'store',
    type: 'nominal',
    scale: { domain: ORDER, range: COLORS },
    legend: { title: 'store', orient: 'right' },
  }
  const floor = report.machine.floor
  const title = `memwal benchmark (${report.mode}, ${report.generatedAt.slice(0, 10)}) — fdatasync p50 ${(floor.fdatasyncAppend100B.p50 / 1000).toFixed(2)} ms, publish p50 ${(floor.publishNewFile100B.p50 / 1000).toFixed(2)} ms`
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, fontSize: 14 },
    config: { font: 'sans-serif', view: { stroke: '#ddd' } },
    background: 'white',
    vconcat: [
      {
        data: { values: scaling },
        facet: {
          column: {
            field: 'rows',
            type: 'nominal',
            title: 'W2 group commit: durable puts/s against concurrent clients (log–log)',
          },
        },
        spec: {
          width: 330,
          height: 230,
          layer: [
            {
              mark: { type: 'line', point: true },
              encoding: {
                x: {
                  field: 'clients',
                  type: 'quantitative',
                  scale: { type: 'log', base: 2 },
                  title: 'closed-loop clients (C)',
                  axis: { values: [1, 4, 16, 64, 256] },
                },
                y: { field: 'putsPerSec', type: 'quantitative', scale: { type: 'log' }, title: 'durable puts/s' },
                color,
              },
            },
          ],
        },
        resolve: { scale: { y: 'shared' } },
      },
      {
        data: { values: lat },
        facet: { column: { field: 'panel', type: 'nominal', title: 'latency percentiles per store (ms, log scale)' } },
        spec: {
          width: 330,
          height: 230,
          mark: { type: 'point', filled: true, size: 90, opacity: 1 },
          encoding: {
            x: { field: 'store', type: 'nominal', sort: ORDER, title: null, axis: { labelAngle: -35 } },
            xOffset: { field: 'percentile', sort: ['p50', 'p99', 'p99.9'] },
            y: { field: 'ms', type: 'quantitative', scale: { type: 'log' }, title: 'latency (ms)' },
            shape: {
              field: 'percentile',
              type: 'nominal',
              sort: ['p50', 'p99', 'p99.9'],
              scale: { range: ['circle', 'square', 'triangle-up'] },
              legend: { title: 'percentile' },
            },
            color: {
              field: 'percentile',
              type: 'nominal',
              sort: ['p50', 'p99', 'p99.9'],
              scale: { range: ['#4c78a8', '#f58518', '#e45756'] },
              legend: null,
            },
            tooltip: [{ field: 'store' }, { field: 'percentile' }, { field: 'ms', format: '.3f' }],
          },
        },
      },
    ],
    resolve: { scale: { color: 'independent' } },
  }
  const compiled = vl.compile(spec).spec
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' })
  const svg = await view.toSVG()
  view.finalize()
  return svg
}
