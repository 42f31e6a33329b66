// The segment-log WAL through the public API (`walLayout: 'segments'`, local directories only):
// durable puts of rows and Arrow data come back after a crash and to a reader, request ids are
// answered across a reopen and a takeover, a stale writer is fenced, the layout a shard was
// created with is kept (asking for the other one, or for segments where there is no local disk,
// is a typed error saying what to do), and a writer's events and statistics report its WAL
// appends as they do on the object layout.
//
// The crash loop and the model-based test run on both layouts too (crash_loop.spec.ts,
// model.spec.ts).

import { spawn } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'
import { tableFromArrays } from 'apache-arrow'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'

import {
  FencedError,
  InvalidArgumentError,
  ObjectStore,
  ShardReader,
  ShardWriter,
  type ShardWriterOptions,
  type WalAppendEvent,
} from '../index'
import { ids, memoryLocation, rows, schema, tempDir } from './support/helpers'

const REQUEST_ID_CHILD = join(__dirname, 'support', 'request-id-child.ts')

/**
 * Durable, on segments, with the smallest segments so that a few puts rotate (and allocating a
 * spare costs little), and no ticker or background collection to move things under a test.
 */
const SEGMENTS = {
  walLayout: 'segments',
  walSegmentBytes: 64 << 10,
  maxWalFlushIntervalMs: null,
  gc: false,
} as const satisfies Omit<ShardWriterOptions, 'schema'>

/** The segment files in place in the shard's segments folder (spares, dot-named, left out). */
function segmentFiles(dir: string, shardId: string): string[] {
  const folder = join(dir, '_mem_wal', shardId, 'segments')
  return existsSync(folder) ? readdirSync(folder).filter((f) => f.endsWith('.seg') && !f.startsWith('.')) : []
}

/**
 * Waits until `done()` (events arrive through their own callback, which may come after the
 * put they report has resolved).
 */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 5))
  }
}

/** The WAL entries of the object layout in the shard's folder. */
function walObjects(dir: string, shardId: string): string[] {
  const folder = join(dir, '_mem_wal', shardId, 'wal')
  return existsSync(folder) ? readdirSync(folder).filter((f) => f.endsWith('.arrow')) : []
}

test('durable puts of plain objects and Arrow tables on segments survive a crash, and a reader sees them', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  await a.put([{ id: 1, name: 'one' }, { id: 2, name: null }])
  await a.put(rows([3, 4]))
  await a.put(tableFromArrays({ id: Int32Array.of(5), name: ['five'] }))
  t.deepEqual(ids(await a.scan()), [1, 2, 3, 4, 5])
  t.true(segmentFiles(dir, a.shardId).length >= 1, 'the WAL is in segment files')
  t.deepEqual(walObjects(dir, a.shardId), [], 'and not in WAL objects')

  // A reader sees the live writer's durable rows without claiming anything.
  const reader = await ShardReader.open(dir, { shardId: a.shardId })
  t.deepEqual(ids(await reader.scan()), [1, 2, 3, 4, 5])
  t.is((await reader.manifest()).writerEpoch, a.epoch, 'the reader claimed nothing')

  await a.abort() // a crash: the rows are only in the WAL
  // Without walLayout the shard keeps the layout it records.
  const b = await ShardWriter.open(dir, { schema, shardId: a.shardId, maxWalFlushIntervalMs: null, gc: false })
  t.like(b.openStats(), { replayedRows: 5 })
  const scanned = await b.scan()
  t.deepEqual(ids(scanned), [1, 2, 3, 4, 5])
  t.deepEqual(
    scanned.getChild('name')?.toArray().slice(0, 2),
    ['one', null],
    'plain-object rows keep their values, nulls included',
  )
  await b.put([{ id: 6, name: 'six' }])
  t.deepEqual(walObjects(dir, a.shardId), [], 'a writer opened without walLayout appends to segments')
  await b.close() // a clean close: the rows go to a generation
  const c = await ShardWriter.open(dir, { schema, ...SEGMENTS, shardId: a.shardId })
  t.deepEqual(ids(await c.scan()), [1, 2, 3, 4, 5, 6])
  await c.close()
  t.deepEqual(ids(await (await ShardReader.open(dir, { shardId: a.shardId })).scan()), [1, 2, 3, 4, 5, 6])
})

test('non-durable puts on segments are durable after flush() and recovered after a crash', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema, ...SEGMENTS, durableWrite: false })
  await a.put([{ id: 1, name: 'a' }])
  await a.put(rows([2, 3]))
  await a.flush()
  await a.abort()
  const b = await ShardWriter.open(dir, { schema, ...SEGMENTS, shardId: a.shardId })
  t.deepEqual(ids(await b.scan()), [1, 2, 3])
  await b.abort()
})

test('puts that fill several segments are all recovered, once and in order', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema, ...SEGMENTS, maxMemtableBatches: 16 })
  const pad = 'x'.repeat(2000)
  const all: number[] = []
  for (let i = 0; i < 60; i++) {
    const put = [i * 2, i * 2 + 1]
    all.push(...put)
    await a.put(put.map((id) => ({ id, name: pad })))
  }
  t.true(segmentFiles(dir, a.shardId).length >= 2, `the log rotated: ${segmentFiles(dir, a.shardId).join(', ')}`)
  await a.abort()
  const b = await ShardWriter.open(dir, { schema, ...SEGMENTS, shardId: a.shardId })
  t.deepEqual(ids(await b.scan()), all)
  t.deepEqual(ids(await (await ShardReader.open(dir, { shardId: a.shardId })).scan()), all)
  await b.close()
})

test('concurrent durable puts on segments share WAL appends (group commit), and all come back', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  const appends: WalAppendEvent[] = []
  w.on('walAppend', (e) => appends.push(e))
  const puts = Array.from({ length: 64 }, (_, i) => w.put([{ id: i, name: `n${i}` }]))
  await Promise.all(puts)
  await until(() => appends.reduce((n, e) => n + e.puts, 0) >= 64, 'the walAppend events of 64 puts')
  const s = w.stats()
  t.true(s.walFlushCount < 64, `64 puts took ${s.walFlushCount} WAL appends`)
  t.is(
    appends.reduce((n, e) => n + e.puts, 0),
    64,
    'the appends acknowledged every put once',
  )
  t.is(appends.reduce((n, e) => n + e.rows, 0), 64)
  await w.abort()
  const again = await ShardWriter.open(dir, { schema, ...SEGMENTS, shardId: w.shardId })
  t.deepEqual(
    ids(await again.scan()).sort((x, y) => x - y),
    Array.from({ length: 64 }, (_, i) => i),
  )
  await again.close()
})

test('on segments, a request id is answered across a crash and a reopen, and across a takeover; the old writer is fenced', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  const first = await a.put(rows([1]), { requestId: 'order-1' })
  await a.abort()
  const b = await ShardWriter.open(dir, { schema, ...SEGMENTS, shardId: a.shardId })
  t.deepEqual(await b.put(rows([1]), { requestId: 'order-1' }), first, 'answered from the replayed WAL')
  const second = await b.put(rows([2]), { requestId: 'order-2' })

  // A second writer takes over the live shard: it replays b's rows and their ids.
  const c = await ShardWriter.open(dir, { schema, ...SEGMENTS, shardId: a.shardId })
  t.true(c.epoch > b.epoch)
  t.deepEqual(await c.put(rows([2]), { requestId: 'order-2' }), second)
  t.deepEqual(await c.put(rows([1]), { requestId: 'order-1' }), first)
  t.is(c.stats().retriedPuts, 2)

  const e = await t.throwsAsync(b.put(rows([3]), { requestId: 'order-3' }), { instanceOf: FencedError, code: 'FENCED' })
  t.is(e?.fenceReason, 'PeerClaimedEpoch')
  await t.throwsAsync(b.put(rows([4])), { instanceOf: FencedError }, 'the fence is latched')
  await b.abort()
  t.deepEqual(ids(await c.scan()), [1, 2], 'one copy of each put, none of the stale writer’s')
  await c.close()
  t.deepEqual(ids(await (await ShardReader.open(dir, { shardId: a.shardId })).scan()), [1, 2])
})

test('on segments, after a failover to another process killed after its ack, the retry finds exactly one copy', async (t) => {
  const dir = tempDir(t)
  const setup = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  const shardId = setup.shardId
  await setup.close()
  // The child opens without walLayout: the shard's recorded layout is what it writes.
  const config = { dir, shardId, requestId: 'from-the-child', ids: [7, 8] }
  const acked = await new Promise<unknown>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', REQUEST_ID_CHILD, JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let result: unknown
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString()
      const line = stdout.split('\n')[0]
      if (result === undefined && stdout.includes('\n') && line !== undefined) {
        result = JSON.parse(line)
        child.kill('SIGKILL')
      }
    })
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('error', reject)
    child.on('close', (_code, signal) => {
      if (result !== undefined && signal === 'SIGKILL') resolve(result)
      else reject(new Error(`the child ended without an acknowledged put (signal ${signal}): ${stderr}`))
    })
  })
  t.deepEqual(walObjects(dir, shardId), [], 'the child wrote segments')
  const w = await ShardWriter.open(dir, { schema, ...SEGMENTS, shardId })
  t.deepEqual(await w.put(rows([7, 8]), { requestId: 'from-the-child' }), acked)
  t.is(w.stats().retriedPuts, 1)
  t.deepEqual(ids(await w.scan()), [7, 8])
  await w.close()
})

test('a shard keeps its layout: asking for the other one is INVALID_ARGUMENT naming `memwal wal convert`, and claims nothing', async (t) => {
  for (const [created, asked] of [
    ['objects', 'segments'],
    ['segments', 'objects'],
  ] as const) {
    const dir = tempDir(t)
    const a = await ShardWriter.open(dir, { schema, ...SEGMENTS, walLayout: created })
    await a.put(rows([1]))
    const e = await t.throwsAsync(ShardWriter.open(dir, { schema, ...SEGMENTS, shardId: a.shardId, walLayout: asked }), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
    })
    const message = e?.message ?? ''
    t.true(message.includes(`uses the ${created} layout`), `names the shard's layout: ${message}`)
    t.true(message.includes(`walLayout '${asked}' was asked`), `names the layout asked for: ${message}`)
    t.true(message.includes('open it without walLayout'), `says how to keep the layout: ${message}`)
    t.true(message.includes(`memwal wal convert <location> --to ${asked}`), `says how to change it: ${message}`)
    // The refused open claimed nothing: the writer that holds the shard goes on.
    await a.put(rows([2]))
    await a.checkFenced()
    await a.close()
    const b = await ShardWriter.open(dir, { schema, shardId: a.shardId })
    t.deepEqual(ids(await b.scan()), [1, 2], `a ${created} shard opened without walLayout`)
    await b.close()
  }
})

test('a walLayout or walSegmentBytes that is not allowed is INVALID_ARGUMENT saying what is', async (t) => {
  const dir = tempDir(t)
  for (const bad of ['Segments', 'segment', 'object', '', 42, null, true, { layout: 'segments' }]) {
    await t.throwsAsync(
      ShardWriter.open(dir, { schema, walLayout: bad } as never),
      {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /^invalid option walLayout: must be 'segments' \(a local disk\) or 'objects' \(an object store, or a shard Lance also opens\), got .*; leave it out to keep an existing shard's layout$/,
      },
      String(bad),
    )
  }
  for (const [bad, message] of [
    [65535, /^invalid config: walSegmentBytes must be between 65536 and 1073741824 bytes, got 65535$/],
    [2 ** 30 + 1, /^invalid config: walSegmentBytes must be between 65536 and 1073741824 bytes, got 1073741825$/],
    [0, /walSegmentBytes must be between 65536 and 1073741824/],
    [65536.5, /^invalid option walSegmentBytes: expected a non-negative integer, got 65536\.5$/],
    [-1, /^invalid option walSegmentBytes: expected a non-negative integer/],
    ['64MiB', /^invalid option walSegmentBytes: expected a number, got string "64MiB"$/],
  ] as const) {
    await t.throwsAsync(ShardWriter.open(dir, { schema, ...SEGMENTS, walSegmentBytes: bad as number }), { instanceOf: InvalidArgumentError, message }, String(bad))
  }
  t.deepEqual(readdirSync(dir), [], 'nothing was created')
})

test('segments on an object store are INVALID_ARGUMENT saying to use the objects layout there', async (t) => {
  for (const location of [memoryLocation(), ObjectStore.memory()]) {
    const e = await t.throwsAsync(ShardWriter.open(location, { schema, ...SEGMENTS }), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /the segment WAL layout needs a local directory, and .* is an object store; use walLayout 'objects' there/,
    })
    t.truthy(e)
    // Nothing was claimed: the same shard opens on the object layout, as a new shard.
    const w = await ShardWriter.open(location, { schema, ...SEGMENTS, walLayout: 'objects' })
    t.is(w.epoch, 1)
    await w.put(rows([1]))
    await w.close()
  }
})

/** What a writer reported about its WAL appends: events, statistics and metrics. */
async function appendReports(location: string, walLayout: 'segments' | 'objects') {
  const w = await ShardWriter.open(location, { schema, ...SEGMENTS, walLayout })
  const events: WalAppendEvent[] = []
  w.on('walAppend', (e) => events.push(e))
  const results = [
    await w.put(rows([1]), { cost: true }),
    await w.put([{ id: 2, name: 'b' }, { id: 3, name: 'c' }], { cost: true }),
    await w.put(rows([4, 5, 6]), { cost: true }),
  ]
  await until(() => events.length >= 3, 'three walAppend events')
  const stats = w.stats()
  const metrics = parsePrometheusTextFormat(w.metrics())
  const wal = await w.walStats()
  await w.close()
  const sample = (name: string) => Number(metrics.find((f) => f.name === name)?.metrics[0]?.value)
  return {
    events: events.map(({ position, puts, batches, rows }) => ({ position, puts, batches, rows })),
    eventBytes: events.map((e) => e.bytes),
    latenciesMs: events.map((e) => e.latencyMs),
    costs: results.map((r) => ({ position: r.walEntry?.position, puts: r.walEntry?.puts })),
    walFlushCount: stats.walFlushCount,
    walFlushBytes: stats.walFlushBytes,
    walAppendCount: stats.walAppendLatency.count,
    putToDurableCount: stats.putToDurableLatency.count,
    durableRequests: stats.durableRequests,
    putsPerWalEntry: stats.putsPerWalEntry,
    metricEntries: sample('memwal_wal_entries_total'),
    metricBytes: sample('memwal_wal_bytes_total'),
    metricNextPosition: sample('memwal_wal_next_position'),
    nextPosition: wal.nextWalEntryPosition,
  }
}

test('walAppend events, stats(), metrics() and put costs report appends on segments as on objects', async (t) => {
  const segments = await appendReports(tempDir(t), 'segments')
  const objects = await appendReports(tempDir(t), 'objects')
  const { latenciesMs, ...comparable } = segments
  t.true(latenciesMs.every((ms) => ms >= 0), `latencies: ${latenciesMs.join(', ')}`)
  t.is(segments.walFlushCount, 3)
  t.is(segments.walAppendCount, 3)
  t.is(segments.metricEntries, 3)
  t.is(segments.metricBytes, segments.walFlushBytes)
  t.is(
    segments.eventBytes.reduce((n, b) => n + b, 0),
    segments.walFlushBytes,
    'the events add up to the bytes stats() counts',
  )
  t.deepEqual(
    segments.costs.map((c) => c.position),
    segments.events.map((e) => e.position),
    'each put’s cost names its append',
  )
  const { latenciesMs: _objectLatencies, ...expected } = objects
  t.deepEqual(comparable, expected)
})
