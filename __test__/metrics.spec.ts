// Writer metrics: `stats()` counts object-store requests by kind, retries and
// failures by operation, and latency summaries; `metrics()` is valid Prometheus exposition
// text with a `shard` label; `put(rows, { cost: true })` reports the WAL entry's cost.

import test from 'ava'
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format'

import { InvalidArgumentError, ObjectStore, ShardWriter, formatMetrics } from '../index'
import { memoryLocation, rows, schema, tempDir } from './support/helpers'

/** The family `name` of a parsed exposition; fails the test if it is missing. */
function family(families: ParsedFamily[], name: string): ParsedFamily {
  const f = families.find((x) => x.name === name)
  if (f === undefined) throw new Error(`no metric family ${name} in ${families.map((x) => x.name).join(', ')}`)
  return f
}

/** The text format's line grammar (0.0.4): comments, or `name{labels} value`. */
const SAMPLE = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})? (NaN|[+-]Inf|-?[0-9.]+(e[+-]?[0-9]+)?)$/

test('stats count store requests by kind, retries by operation, and latencies', async (t) => {
  const store = ObjectStore.memory()
  const w = await ShardWriter.open(store, { schema, gc: false, walPersistRetryBaseDelayMs: 1 })
  const opened = w.stats()
  t.true(opened.store.putRequests >= 1, 'the claim writes a manifest version')
  await w.put(rows([1]))
  await w.put(rows([2]))
  let s = w.stats()
  t.is(s.store.putRequests - opened.store.putRequests, 2, 'one PUT per durable put')
  t.is(s.store.putBytes - opened.store.putBytes, s.walFlushBytes, 'the PUTs sent the entries')
  t.is(s.store.getRequests, opened.store.getRequests, 'a put reads nothing')
  t.is(s.walAppendLatency.count, 2)
  t.is(s.putToDurableLatency.count, 2)
  t.true(s.putToDurableLatency.maxMs >= s.putToDurableLatency.p50Ms)
  t.is(s.operations.walAppend.retries, 0)

  store.faults.failWalPuts(2)
  await w.put(rows([3]))
  s = w.stats()
  t.deepEqual(s.operations.walAppend, { retries: 2, failures: 0 })
  t.is(s.store.putRequests - opened.store.putRequests, 2 + 3)
  for (const op of ['fenceSentinel', 'generationFlush', 'manifestCommit', 'compaction', 'gc'] as const) {
    t.deepEqual(s.operations[op], { retries: 0, failures: 0 }, op)
  }
  store.faults.recover()
  await w.close()
})

test('metrics() is Prometheus exposition text with the shard label', async (t) => {
  const w = await ShardWriter.open(tempDir(t), { schema, shard: 'orders "eu"', gc: false })
  await w.put(rows([1, 2]))
  await w.forceSealActive()
  await w.waitForFlushDrain()
  const text = w.metrics()
  for (const line of text.trimEnd().split('\n')) {
    if (!line.startsWith('# ')) t.regex(line, SAMPLE)
  }
  const families = parsePrometheusTextFormat(text)
  const names = new Set<string>()
  for (const f of families) {
    t.false(names.has(f.name), `${f.name} appears once`)
    names.add(f.name)
    t.true(f.name.startsWith('memwal_'), f.name)
    if (f.type === 'COUNTER') t.true(f.name.endsWith('_total'), f.name)
    // The parser folds a summary's samples into one, dropping their labels (checked below
    // through the line grammar instead).
    if (f.type !== 'SUMMARY') for (const m of f.metrics) t.is(m.labels?.shard, 'orders "eu"', f.name)
  }
  t.is(family(families, 'memwal_puts_total').type, 'COUNTER')
  t.is(family(families, 'memwal_puts_total').metrics[0]?.value, '1')
  const requests = family(families, 'memwal_store_requests_total')
  t.deepEqual(requests.metrics.map((m) => m.labels?.kind).sort(), ['delete', 'get', 'head', 'list', 'put'])
  const put = requests.metrics.find((m) => m.labels?.kind === 'put')
  t.is(Number(put?.value), w.stats().store.putRequests)
  const retries = family(families, 'memwal_operation_retries_total')
  t.deepEqual(
    retries.metrics.map((m) => m.labels?.operation).sort(),
    ['compaction', 'fence_sentinel', 'gc', 'generation_flush', 'manifest_commit', 'wal_append'],
  )
  family(families, 'memwal_operation_failures_total')
  family(families, 'memwal_store_bytes_total')
  for (const name of ['memwal_wal_append_seconds', 'memwal_generation_flush_seconds', 'memwal_put_to_durable_seconds']) {
    const f = family(families, name)
    t.is(f.type, 'SUMMARY', name)
    t.deepEqual(Object.keys(f.metrics[0]?.quantiles ?? {}).sort(), ['0.5', '0.99'], name)
  }
  t.regex(text, /^memwal_put_to_durable_seconds\{shard="orders \\"eu\\"",quantile="0\.99"\} [0-9.e-]+$/m)
  t.regex(text, /^memwal_put_to_durable_seconds_count\{shard="orders \\"eu\\""\} 1$/m)
  t.regex(text, /^memwal_generation_flush_seconds_count\{shard="orders \\"eu\\""\} 1$/m)
  t.regex(text, /^memwal_wal_append_seconds_sum\{shard="orders \\"eu\\""\} [0-9.e-]+$/m)
  t.is(family(families, 'memwal_puts_per_wal_entry').type, 'GAUGE')
  t.is(family(families, 'memwal_memtable_rows').type, 'GAUGE')
  t.is(family(families, 'memwal_writer_epoch').metrics[0]?.value, '1')
  await w.close()
})

test('formatMetrics writes each family once for several writers', async (t) => {
  const a = await ShardWriter.open(memoryLocation(), { schema, shard: 'a', gc: false })
  const b = await ShardWriter.open(memoryLocation(), { schema, shard: 'b', gc: false, enableMemtable: false })
  await a.put(rows([1]))
  t.regex(b.metrics(), /memwal_puts_total\{shard="b"\} 0/)
  t.notRegex(b.metrics(), /memwal_memtable_rows/, 'WAL-only mode has no MemTable gauges')
  const families = parsePrometheusTextFormat(
    formatMetrics([a, b].map((w) => ({ shard: w.shardName ?? w.shardId, stats: w.stats() }))),
  )
  const puts = family(families, 'memwal_puts_total')
  t.deepEqual(
    puts.metrics.map((m) => [m.labels?.shard, m.value]),
    [
      ['a', '1'],
      ['b', '0'],
    ],
  )
  t.is(families.filter((f) => f.name === 'memwal_puts_total').length, 1)
  await a.close()
  await b.close()
})

test('put(rows, { cost: true }) reports the WAL entry: puts sharing one see the same', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, gc: false })
  const plain = await w.put(rows([0]))
  t.false('walEntry' in plain, 'no cost unless asked')
  // Issued together: how many share an entry depends on when the WAL handler drains them, so
  // the check holds for any grouping. Each entry's puts see the same numbers, their count is
  // the group's size, and each append took one PUT of exactly the entry's bytes.
  const before = await w.walStats()
  const shared = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => w.put(rows([i]), { cost: true })))
  const after = await w.walStats()
  const groups = new Map<number, Array<(typeof shared)[number]['walEntry']>>()
  for (const { walEntry } of shared) {
    if (walEntry === null) return t.fail('a durable put with cost: true has a walEntry')
    groups.set(walEntry.position, [...(groups.get(walEntry.position) ?? []), walEntry])
  }
  t.is(groups.size, after.entriesAppended - before.entriesAppended)
  let bytes = 0
  for (const [, group] of groups) {
    for (const e of group) t.deepEqual(e, group[0])
    t.like(group[0], { puts: group.length, requests: 1 })
    bytes += group[0]?.bytes ?? 0
  }
  t.is(bytes, after.bytesAppended - before.bytesAppended)
  const alone = await w.put(rows([7]), { cost: true })
  t.like(alone.walEntry, { position: after.nextWalEntryPosition, puts: 1, requests: 1 })
  // A retry answered from a remembered request id wrote nothing of its own.
  const first = await w.put(rows([5]), { requestId: 'r', cost: true })
  const again = await w.put(rows([5]), { requestId: 'r', cost: true })
  t.not(first.walEntry, null)
  t.is(again.walEntry, null)
  await t.throwsAsync(w.putNoWait(rows([6]), { cost: true }), { instanceOf: InvalidArgumentError })
  await t.throwsAsync(w.put(rows([6]), { cost: 'yes' as never }), { instanceOf: InvalidArgumentError })
  await w.close()

  const nd = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  t.is((await nd.put(rows([1]), { cost: true })).walEntry, null, 'non-durable: no WAL entry to wait for')
  await nd.close()
})
