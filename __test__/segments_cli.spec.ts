// The segment-log WAL (`walLayout: 'segments'`) from JavaScript: the layout in the manifest,
// `WalTailer.read` and `follow` (with TRUNCATED once segments are collected), and the CLI's
// `wal`, `inspect`, `files --wal` and `stats` on a segment-layout shard, beside an object-layout
// one. Expected numbers come from the writers and the files on disk, never from the CLI's code.

import { readFileSync, readdirSync, renameSync, statSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { memwalCli as memwal } from './support/child-process'
import { ShardReader, ShardWriter, type ShardWriterOptions, TruncatedError, WalTailer } from '../index'
import { ids, memoryLocation, rows, schema, tempDir } from './support/helpers'

/** Small segments, so that a few puts rotate; no background collection. */
const SEGMENTS: Omit<ShardWriterOptions, 'schema'> = { walLayout: 'segments', walSegmentBytes: 65_536, gc: false }

/** Rows of put `i`: 2,000 ids from `i * 10_000`, enough for a few puts to fill a segment. */
function put(i: number): number[] {
  return Array.from({ length: 2000 }, (_, k) => i * 10_000 + k)
}

/** The segment files of the only shard under `dir`, by name (which orders them by sequence number). */
function segmentFiles(dir: string): string[] {
  const shard = readdirSync(join(dir, '_mem_wal'))[0]!
  const segments = join(dir, '_mem_wal', shard, 'segments')
  return readdirSync(segments)
    .filter((n) => /^\d{20}\.seg$/.test(n))
    .sort()
    .map((n) => join(segments, n))
}

/**
 * A segment-layout shard at `dir`: a first writer puts `first` times and stops without a flush
 * (as a crash leaves it), a second takes it over and puts `second` times, and stops too. Its
 * epochs, and the position of every put.
 */
async function segmentShard(dir: string, first: number, second: number) {
  const a = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  for (let i = 0; i < first; i++) await a.put(rows(put(i)))
  await a.abort()
  const b = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  for (let i = first; i < first + second; i++) await b.put(rows(put(i)))
  await b.abort()
  return { epochs: [a.epoch, b.epoch] as const, puts: first + second }
}

test('the manifest records the WAL layout a writer was opened with', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  await w.put(rows([1]))
  t.is((await w.manifest())?.walLayout, 'segments')
  await w.close()
  t.is((await (await ShardReader.open(dir)).manifest()).walLayout, 'segments')
  t.true(segmentFiles(dir).length >= 1)
  const other = tempDir(t)
  const o = await ShardWriter.open(other, { schema, walLayout: 'objects' })
  await o.put(rows([1]))
  t.is((await o.manifest())?.walLayout, 'objects')
  await o.close()
  // Reopened without the option, each keeps its own.
  for (const [location, layout] of [
    [dir, 'segments'],
    [other, 'objects'],
  ] as const) {
    const again = await ShardWriter.open(location, { schema })
    t.is((await again.manifest())?.walLayout, layout)
    await again.close()
  }
})

test('WalTailer reads a segment-layout shard by position, across rotations and a takeover', async (t) => {
  const dir = tempDir(t)
  const { epochs, puts } = await segmentShard(dir, 12, 8)
  t.true(segmentFiles(dir).length >= 3, 'the log rotated')
  const tailer = await WalTailer.open(dir)
  t.is(await tailer.firstPosition(), 1)
  t.is(await tailer.nextPosition(), puts + 1)
  await tailer.verify()
  for (let p = 1; p <= puts; p++) {
    const e = await tailer.read(p)
    t.is(e?.position, p)
    t.is(e?.writerEpoch, p <= 12 ? epochs[0] : epochs[1])
    t.deepEqual(ids(e!.table!), put(p - 1))
  }
  t.is(await tailer.read(puts + 1), null)
  await tailer.close()
})

test('follow yields a segment-layout shard entry by entry while a writer writes', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  const puts = 30
  const writing = (async () => {
    for (let i = 0; i < puts; i++) await w.put(rows(put(i)))
  })()
  const tailer = await WalTailer.open(dir)
  const seen: number[][] = []
  // Without a tailer that reads segments this waits for ever: the signal fails the test instead.
  for await (const e of tailer.follow({ from: 1, pollIntervalMs: 5, signal: AbortSignal.timeout(60_000) })) {
    t.is(e.position, seen.length + 1)
    seen.push(ids(e.table!))
    if (seen.length === puts) break
  }
  await writing
  t.deepEqual(
    seen,
    Array.from({ length: puts }, (_, i) => put(i)),
  )
  t.true(segmentFiles(dir).length >= 3, 'the writer rotated while followed')
  await w.close()
  await tailer.close()
})

test('read and follow are TRUNCATED below the first segment left, naming where to resume', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, ...SEGMENTS })
  for (let i = 0; i < 20; i++) await w.put(rows(put(i)))
  // The close flushes every row into a generation: the low-water mark reaches the last entry.
  await w.close()
  const lowWater = (await (await ShardReader.open(dir)).manifest()).walLowWater
  t.is(lowWater, 20)
  // As collection does: a segment wholly at or below the mark becomes a spare.
  const [first] = segmentFiles(dir)
  renameSync(first!, join(first!, '..', '.spare-collected.seg'))
  const tailer = await WalTailer.open(dir)
  t.is(await tailer.firstPosition(), lowWater + 1)
  const e = await t.throwsAsync(tailer.read(1), { instanceOf: TruncatedError })
  t.is(e?.firstAvailable, lowWater + 1)
  // Below the mark, but still in a segment: readable, as an entry collection has yet to remove.
  const second = Number(readFileSync(segmentFiles(dir)[0]!).readBigUInt64LE(32))
  t.true(second > 1 && second <= lowWater)
  t.deepEqual(ids((await tailer.read(second))!.table!), put(second - 1))
  await t.throwsAsync(tailer.read(second - 1), { instanceOf: TruncatedError })
  const followed = await t.throwsAsync(
    (async () => {
      for await (const entry of tailer.follow({ from: 1, signal: AbortSignal.timeout(60_000) })) t.fail(`read ${entry.position}`)
    })(),
    { instanceOf: TruncatedError },
  )
  t.is(followed?.firstAvailable, lowWater + 1)
  t.is(await tailer.nextPosition(), 21)
  await tailer.close()
})

/** The objects `memwal wal --json` prints. */
interface WalJson {
  firstPosition: number
  walTip: number
  entries: Array<{ position: number; epoch: number; batches: number; rows: number; sentinel: boolean }>
}

test('memwal wal lists the positions, epochs and rows of a segment-layout shard', async (t) => {
  const dir = tempDir(t)
  const { epochs, puts } = await segmentShard(dir, 5, 4)
  const json = await memwal('wal', dir, '--json')
  t.is(json.code, 0, json.stderr)
  const listing = JSON.parse(json.stdout) as WalJson
  t.is(listing.firstPosition, 1)
  t.is(listing.walTip, puts)
  t.deepEqual(
    listing.entries,
    Array.from({ length: puts }, (_, i) => ({
      position: i + 1,
      epoch: i < 5 ? epochs[0] : epochs[1],
      batches: 1,
      rows: 2000,
      sentinel: false,
    })),
  )
  const text = await memwal('wal', dir, '--from', '5', '--limit', '2')
  t.is(text.code, 0, text.stderr)
  t.regex(text.stdout, new RegExp(`^5 +${epochs[0]} +1 +2000 *$`, 'm'))
  t.regex(text.stdout, new RegExp(`^6 +${epochs[1]} +1 +2000 *$`, 'm'))
  t.regex(text.stdout, new RegExp(`\\(positions 5\\.\\.6; WAL tip: position ${puts}\\)`))
})

test('memwal inspect shows the WAL layout, and the tip of a segment-layout shard', async (t) => {
  const dir = tempDir(t)
  const { puts } = await segmentShard(dir, 6, 3)
  const text = await memwal('inspect', dir)
  t.is(text.code, 0, text.stderr)
  t.regex(text.stdout, /^ {2}WAL layout: segments$/m)
  t.regex(text.stdout, new RegExp(`WAL tip: position ${puts}; lag: ${puts} entries to replay on open`))
  const json = await memwal('inspect', dir, '--json')
  t.is(json.code, 0, json.stderr)
  const report = JSON.parse(json.stdout) as { shards: Array<{ walLayout: string; walTip: number }> }
  t.like(report.shards[0], { walLayout: 'segments', walTip: puts })

  const objects = tempDir(t)
  const w = await ShardWriter.open(objects, { schema, walLayout: 'objects' })
  await w.put(rows([1]))
  await w.close()
  const plain = await memwal('inspect', objects)
  t.is(plain.code, 0, plain.stderr)
  t.regex(plain.stdout, /^ {2}holder: .*\n {2}WAL layout: objects\n {2}flushed generations: /m)
})

/** The objects `memwal files --wal --json` prints, one per line. */
interface WalFileJson {
  kind: string
  seq: number | null
  firstPosition: number | null
  epoch: number | null
  bytes: number
  path: string
}

test('memwal files --wal lists the segment files, spares and fence file with their sizes', async (t) => {
  const dir = tempDir(t)
  const { epochs } = await segmentShard(dir, 12, 2)
  const r = await memwal('files', dir, '--wal', '--json')
  t.is(r.code, 0, r.stderr)
  const listed = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as WalFileJson)
  const segments = listed.filter((f) => f.kind === 'segment')
  t.deepEqual(
    segments.map((f) => f.path),
    segmentFiles(dir),
  )
  for (const f of listed) t.is(f.bytes, statSync(f.path).size, f.path)
  t.deepEqual(
    segments.map((f) => f.seq),
    segments.map((_, i) => i + 1),
  )
  t.is(segments[0]?.firstPosition, 1)
  t.is(segments[0]?.epoch, epochs[0])
  // The second writer's first segment starts where the first writer's entries end.
  const takeover = segments.find((f) => f.epoch === epochs[1])
  t.is(takeover?.firstPosition, 13)
  t.true(listed.some((f) => f.kind === 'spare'), 'a spare is allocated ahead')
  t.is(listed.filter((f) => f.kind === 'fence').length, 1)

  const text = await memwal('files', dir, '--wal')
  t.is(text.code, 0, text.stderr)
  t.regex(text.stdout, /^kind +seq +position +epoch +size +file$/m)
  t.regex(text.stdout, new RegExp(`^segment +1 +1 +${epochs[0]} +64\\.0 KiB +${segmentFiles(dir)[0]}$`, 'm'))
  t.regex(text.stdout, /^fence +\d+ B +\S+\/segments\/fence$/m)

  // Without --wal: the committed generation files only, as before (none yet here).
  const generations = await memwal('files', dir)
  t.is(generations.code, 0, generations.stderr)
  t.is(generations.stdout, '')
})

test('memwal files --wal lists an object-layout shard entries, and needs a local directory', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, walLayout: 'objects' })
  for (let i = 0; i < 3; i++) await w.put(rows([i]))
  await w.abort()
  const r = await memwal('files', dir, '--wal', '--json')
  t.is(r.code, 0, r.stderr)
  const listed = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as WalFileJson)
  t.deepEqual(
    listed.map((f) => [f.kind, f.firstPosition]),
    [
      ['entry', 1],
      ['entry', 2],
      ['entry', 3],
    ],
  )
  for (const f of listed) t.is(f.bytes, statSync(f.path).size)

  for (const location of [memoryLocation(), 's3://bucket/data']) {
    const r = await memwal('files', location, '--wal')
    t.is(r.code, 2, r.stderr)
    t.regex(r.stderr, /--wal lists the files of a local directory/)
  }
})

test('memwal stats measures a segment-layout shard: its WAL depth and the segments above the mark', async (t) => {
  const dir = tempDir(t)
  const { puts } = await segmentShard(dir, 10, 5)
  const r = await memwal('stats', dir, '--json')
  t.is(r.code, 0, r.stderr)
  const s = JSON.parse(r.stdout) as {
    wal: { lowWater: number; firstPosition: number; tip: number; depth: number }
    bytes: { wal: number | null; generations: number | null; total: number | null }
  }
  t.deepEqual(s.wal, { lowWater: 0, firstPosition: 1, tip: puts, depth: puts })
  const segmentBytes = segmentFiles(dir).reduce((n, f) => n + statSync(f).size, 0)
  t.is(s.bytes.wal, segmentBytes, 'every segment holds entries above the mark')
  t.is(s.bytes.total, segmentBytes + (s.bytes.generations ?? 0))
  const text = await memwal('stats', dir)
  t.is(text.code, 0, text.stderr)
  t.regex(text.stdout, new RegExp(`WAL depth +${puts} entries above the low-water mark \\(positions 1\\.\\.${puts}; `))
})
