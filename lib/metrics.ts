// Writer statistics in the Prometheus text exposition format (version 0.0.4), so that a service
// can serve them from its `/metrics` route with no client library. Formatted here, not in Rust:
// the statistics already reach JavaScript as plain objects (`stats()`), a service may merge
// several writers into one exposition (each metric family's HELP and TYPE must then appear
// once, which `formatMetrics` does), and the text stays out of the binding's per-call surface.
// Every name is defined once, in the tables below.

import type { LatencySummary, MemTableStats, WalStats, WriteStats } from './types.js'

/** What {@link formatMetrics} reports for one writer. */
export interface MetricsSource {
  /** The value of the `shard` label: the shard's name, or its id for a shard opened by id. */
  shard: string
  /** The writer's counters ({@link ShardWriter.stats}). */
  stats: WriteStats
  /** The writer's epoch, reported as a gauge. */
  epoch?: number
  /** The writer's WAL position ({@link ShardWriter.walStats}), reported as gauges. */
  wal?: WalStats
  /** The writer's MemTables ({@link ShardWriter.memtableStats}; MemTable mode), reported as gauges. */
  memtable?: MemTableStats
}

type Kind = 'counter' | 'gauge' | 'summary'

/** One metric family: its samples come from each source, with extra labels per sample. */
interface Family {
  name: string
  kind: Kind
  help: string
  samples: (s: MetricsSource) => Array<[labels: string, value: number]>
}

const one = (v: number | undefined): Array<[string, number]> => (v === undefined ? [] : [['', v]])
const seconds = (ms: number): number => ms / 1000

const STORE_KINDS = ['put', 'get', 'head', 'list', 'delete'] as const
const OPERATIONS = [
  ['wal_append', 'walAppend'],
  ['fence_sentinel', 'fenceSentinel'],
  ['generation_flush', 'generationFlush'],
  ['manifest_commit', 'manifestCommit'],
  ['compaction', 'compaction'],
  ['gc', 'gc'],
] as const

/** A summary's samples: quantiles, `_sum` and `_count` (with their suffix in the label slot). */
function summary(l: LatencySummary): Array<[string, number]> {
  return [
    ['{quantile="0.5"}', seconds(l.p50Ms)],
    ['{quantile="0.99"}', seconds(l.p99Ms)],
    ['_sum', seconds(l.sumMs)],
    ['_count', l.count],
  ]
}

const FAMILIES: Family[] = [
  { name: 'memwal_puts_total', kind: 'counter', help: 'Successful put and putNoWait calls.', samples: (s) => one(s.stats.putCount) },
  { name: 'memwal_put_rows_total', kind: 'counter', help: 'Rows put.', samples: (s) => one(s.stats.putRows) },
  { name: 'memwal_durable_puts_total', kind: 'counter', help: 'Durable-put completions (successes and failures).', samples: (s) => one(s.stats.durableRequests) },
  { name: 'memwal_retried_puts_total', kind: 'counter', help: 'Puts answered from a remembered requestId.', samples: (s) => one(s.stats.retriedPuts) },
  { name: 'memwal_wal_entries_total', kind: 'counter', help: 'WAL entries appended (fence sentinels excluded).', samples: (s) => one(s.stats.walFlushCount) },
  { name: 'memwal_wal_bytes_total', kind: 'counter', help: 'Encoded bytes of the WAL entries appended.', samples: (s) => one(s.stats.walFlushBytes) },
  { name: 'memwal_generation_flushes_total', kind: 'counter', help: 'MemTable generations flushed as Parquet files.', samples: (s) => one(s.stats.memtableFlushCount) },
  { name: 'memwal_generation_flush_rows_total', kind: 'counter', help: 'Rows in the flushed generations.', samples: (s) => one(s.stats.memtableFlushRows) },
  { name: 'memwal_backpressure_waits_total', kind: 'counter', help: 'Puts that waited for backpressure.', samples: (s) => one(s.stats.backpressureEvents) },
  { name: 'memwal_backpressure_wait_seconds_total', kind: 'counter', help: 'Time puts waited for backpressure.', samples: (s) => one(seconds(s.stats.backpressureWaitMs)) },
  {
    name: 'memwal_store_requests_total',
    kind: 'counter',
    help: 'Object-store requests by kind (retries count again; a LIST per 1000 objects).',
    samples: (s) => STORE_KINDS.map((k) => [`{kind="${k}"}`, s.stats.store[`${k}Requests`]]),
  },
  {
    name: 'memwal_store_bytes_total',
    kind: 'counter',
    help: 'Object-store bytes: sent by PUTs (kind="put"), received by GETs (kind="get").',
    samples: (s) => [
      ['{kind="put"}', s.stats.store.putBytes],
      ['{kind="get"}', s.stats.store.getBytes],
    ],
  },
  {
    name: 'memwal_operation_retries_total',
    kind: 'counter',
    help: 'Store operations retried after a failed attempt, by operation.',
    samples: (s) => OPERATIONS.map(([label, key]) => [`{operation="${label}"}`, s.stats.operations[key].retries]),
  },
  {
    name: 'memwal_operation_failures_total',
    kind: 'counter',
    help: 'Store operations that failed for good, by operation.',
    samples: (s) => OPERATIONS.map(([label, key]) => [`{operation="${label}"}`, s.stats.operations[key].failures]),
  },
  { name: 'memwal_wal_append_seconds', kind: 'summary', help: 'WAL append latency (one sample per entry, retries included).', samples: (s) => summary(s.stats.walAppendLatency) },
  { name: 'memwal_generation_flush_seconds', kind: 'summary', help: 'Generation flush latency (file, request ids, manifest commit).', samples: (s) => summary(s.stats.generationFlushLatency) },
  { name: 'memwal_put_to_durable_seconds', kind: 'summary', help: 'Time from a durable put to its durability acknowledgement in the core.', samples: (s) => summary(s.stats.putToDurableLatency) },
  { name: 'memwal_wal_append_max_seconds', kind: 'gauge', help: 'Slowest WAL append so far.', samples: (s) => one(seconds(s.stats.walAppendLatency.maxMs)) },
  { name: 'memwal_put_to_durable_max_seconds', kind: 'gauge', help: 'Slowest durable put so far.', samples: (s) => one(seconds(s.stats.putToDurableLatency.maxMs)) },
  { name: 'memwal_puts_per_wal_entry', kind: 'gauge', help: 'Mean durable puts per WAL entry (the group-commit factor).', samples: (s) => one(s.stats.putsPerWalEntry) },
  { name: 'memwal_writer_epoch', kind: 'gauge', help: 'The epoch this writer claimed.', samples: (s) => one(s.epoch) },
  { name: 'memwal_wal_next_position', kind: 'gauge', help: 'The position the next WAL entry will be written at.', samples: (s) => one(s.wal?.nextWalEntryPosition) },
  { name: 'memwal_memtable_rows', kind: 'gauge', help: 'Rows in the active MemTable.', samples: (s) => one(s.memtable?.rowCount) },
  { name: 'memwal_memtable_bytes', kind: 'gauge', help: 'Estimated bytes of the active MemTable.', samples: (s) => one(s.memtable?.estimatedSize) },
  { name: 'memwal_frozen_memtables', kind: 'gauge', help: 'Frozen MemTables awaiting their generation flush.', samples: (s) => one(s.memtable?.frozenMemtableCount) },
  { name: 'memwal_frozen_memtable_bytes', kind: 'gauge', help: 'Estimated bytes of the frozen MemTables.', samples: (s) => one(s.memtable?.frozenEstimatedBytes) },
]

/** A label value escaped as the exposition format requires (backslash, quote, newline). */
function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
}

/** A sample value: integers as they are, `NaN` and infinities by their names. */
function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN'
  if (v === Infinity) return '+Inf'
  if (v === -Infinity) return '-Inf'
  return String(v)
}

/**
 * The statistics of one or more writers in the Prometheus text exposition format (0.0.4):
 * counters named `memwal_*_total`, gauges, and summaries with `quantile="0.5"` and `"0.99"`,
 * every sample labelled with its writer's `shard`. Each family's HELP and TYPE lines appear
 * once, so the writers of several shards can be served from one `/metrics` route.
 * {@link ShardWriter.metrics} is this for one writer.
 *
 * @param sources - one entry per writer
 * @returns the exposition text, ending with a newline; serve it with
 * `Content-Type: text/plain; version=0.0.4`
 *
 * @example
 * ```ts
 * const body = formatMetrics(writers.map((w) => ({ shard: w.shardName ?? w.shardId, stats: w.stats() })))
 * ```
 */
export function formatMetrics(sources: readonly MetricsSource[]): string {
  const lines: string[] = []
  for (const f of FAMILIES) {
    const body: string[] = []
    for (const s of sources) {
      const shard = `shard="${escapeLabel(s.shard)}"`
      for (const [labels, value] of f.samples(s)) {
        // `labels` is `{k="v"}`, a suffix (`_sum`, `_count`), or empty.
        const [suffix, inner] = labels.startsWith('{') ? ['', labels.slice(1, -1)] : [labels, '']
        const all = inner === '' ? shard : `${shard},${inner}`
        body.push(`${f.name}${suffix}{${all}} ${formatValue(value)}`)
      }
    }
    if (body.length === 0) continue
    lines.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.kind}`, ...body)
  }
  return lines.join('\n') + '\n'
}
