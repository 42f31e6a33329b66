// `memwal gc`, and the commands that must keep working once it has run: `memwal wal` (which
// starts where the WAL now begins, and says clearly when asked for a collected position) and
// `memwal inspect` (which shows the low-water mark). Spawned as a user runs them; what
// collection may remove, and why fencing holds, is tested in the core and in gc.spec.ts.

import { copyFileSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'

import { memwalCli as memwal } from './support/child-process'
import { ShardReader, ShardWriter } from '../index'
import { ids, rows, schema, tempDir } from './support/helpers'

// Exit codes, as documented in the README and `memwal --help`.
const USAGE = 2
const NOT_FOUND = 3

/**
 * A shard at `dir` written by two writers in turn, `perWriter` one-row durable puts each, every
 * row flushed by `close()`. The second writer's fence sentinel, and the entry just before it,
 * are what collection keeps for good. Collection is off, so only the test removes anything.
 */
async function flushedShard(dir: string, perWriter: number): Promise<{ shardId: string; ids: number[] }> {
  const written: number[] = []
  let shardId = ''
  for (let k = 0; k < 2; k++) {
    const w = await ShardWriter.open(dir, { schema, gc: false })
    for (let i = 0; i < perWriter; i++) {
      await w.put(rows([k * 100 + i]))
      written.push(k * 100 + i)
    }
    await w.close()
    shardId = w.shardId
  }
  return { shardId, ids: written }
}

/** The names of the objects in one folder of the shard (`wal`, `manifest`) or of the shard itself. */
function objects(dir: string, shardId: string, sub = ''): string[] {
  return readdirSync(join(dir, '_mem_wal', shardId, sub)).sort()
}

/** The JSON `memwal gc --json` prints. */
interface GcJson {
  shardId: string
  shardName: string | null
  keepManifestVersions: number
  graceMs: number
  manifestVersion: number
  lowWater: number
  walEntriesRemoved: number
  walEntriesKept: number
  walSegmentsRemoved: number
  manifestVersionsRemoved: number
  generationDirsRemoved: string[]
  generationDirsKept: string[]
  bytesRemoved: number
  dryRun: boolean
}

/** `memwal gc ...args --json`, checked to succeed. */
async function gcJson(t: ExecutionContext, ...args: string[]): Promise<GcJson> {
  const r = await memwal('gc', ...args, '--json')
  t.is(r.code, 0, r.stderr)
  return JSON.parse(r.stdout) as GcJson
}

test('gc removes WAL entries whose rows are flushed, keeps the fence sentinel, and every row still scans', async (t) => {
  const dir = tempDir(t)
  const { shardId, ids: written } = await flushedShard(dir, 5)
  const walBefore = objects(dir, shardId, 'wal')
  t.is(walBefore.length, 11, 'entries 1-5, the sentinel at 6, entries 7-11')

  const r = await memwal('gc', dir)
  t.is(r.code, 0, r.stderr)
  t.is(r.stderr, '')
  t.regex(r.stdout, new RegExp(`^shard default \\(${shardId}\\): garbage collected \\(manifest version \\d+, WAL low-water mark 11\\)$`, 'm'))
  t.regex(r.stdout, /^ {2}WAL: removed 9 entries at or below position 11 \(their rows are in flushed generations\)$/m)
  t.regex(r.stdout, /^ {2}WAL: kept 2 entries at or below the mark to fence stale writers \(fence sentinels, /m)
  t.regex(r.stdout, /^ {2}manifest: removed 0 versions, keeping the newest 10 \(version 1 and later\)$/m)
  t.regex(r.stdout, /^ {2}freed \d+(\.\d)? (B|KiB)$/m)

  t.is(objects(dir, shardId, 'wal').length, 2, 'only the sentinel and the entry before it are left')
  const scan = await memwal('scan', dir, '--format', 'json')
  t.is(scan.code, 0, scan.stderr)
  t.deepEqual(
    (JSON.parse(scan.stdout) as Array<{ id: number }>).map((row) => row.id),
    written,
  )
  t.deepEqual(ids(await (await ShardReader.open(dir)).scan()), written)

  // A second run finds nothing more to remove, and says so.
  const again = await gcJson(t, dir)
  t.like(again, { walEntriesRemoved: 0, walEntriesKept: 2, bytesRemoved: 0, dryRun: false })
})

test('gc --dry-run reports what would go and removes nothing', async (t) => {
  const dir = tempDir(t)
  const { shardId } = await flushedShard(dir, 3)
  const before = {
    wal: objects(dir, shardId, 'wal'),
    manifest: objects(dir, shardId, 'manifest'),
    shard: objects(dir, shardId),
  }
  const r = await memwal('gc', dir, '--dry-run', '--keep-manifest-versions', '2')
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /: dry run, nothing was removed \(manifest version \d+, WAL low-water mark 7\)$/m)
  t.regex(r.stdout, /^ {2}WAL: would remove 5 entries at or below position 7/m)
  t.regex(r.stdout, /^ {2}WAL: would keep 2 entries at or below the mark to fence stale writers/m)
  t.regex(r.stdout, /^ {2}manifest: would remove [1-9]\d* versions?, keeping the newest 2 \(version \d+ and later\)$/m)
  t.regex(r.stdout, /^ {2}would free /m)
  t.deepEqual(
    { wal: objects(dir, shardId, 'wal'), manifest: objects(dir, shardId, 'manifest'), shard: objects(dir, shardId) },
    before,
  )

  const json = await gcJson(t, dir, '--dry-run', '--keep-manifest-versions', '2')
  t.like(json, { dryRun: true, lowWater: 7, walEntriesRemoved: 5, walEntriesKept: 2, keepManifestVersions: 2 })
  t.true(json.manifestVersionsRemoved > 0)
  t.true(json.bytesRemoved > 0)
  t.deepEqual(objects(dir, shardId, 'wal'), before.wal)
  t.deepEqual(objects(dir, shardId, 'manifest'), before.manifest)
})

test('gc --json prints one object; abandoned generation folders wait for the grace period', async (t) => {
  const dir = tempDir(t)
  const { shardId, ids: written } = await flushedShard(dir, 2)
  // An orphan: a copy of a generation whose commit never happened (a fenced writer's flush).
  const manifest = await (await ShardReader.open(dir)).manifest()
  const first = manifest.flushedGenerations[0]!.path
  mkdirSync(join(dir, '_mem_wal', shardId, 'deadbeef_gen_1'))
  copyFileSync(
    join(dir, '_mem_wal', shardId, first, 'data.parquet'),
    join(dir, '_mem_wal', shardId, 'deadbeef_gen_1', 'data.parquet'),
  )

  const kept = await gcJson(t, dir, '--shard', 'default')
  t.deepEqual(Object.keys(kept).sort(), [
    'bytesRemoved',
    'dryRun',
    'generationDirsKept',
    'generationDirsRemoved',
    'graceMs',
    'keepManifestVersions',
    'lowWater',
    'manifestVersion',
    'manifestVersionsRemoved',
    'shardId',
    'shardName',
    'walEntriesKept',
    'walEntriesRemoved',
    'walSegmentsRemoved',
  ])
  t.like(kept, {
    shardId,
    shardName: 'default',
    keepManifestVersions: 10,
    graceMs: 600_000,
    manifestVersion: manifest.version,
    lowWater: 5,
    walEntriesRemoved: 3,
    walEntriesKept: 2,
    walSegmentsRemoved: 0,
    dryRun: false,
  })
  t.deepEqual(kept.generationDirsKept, ['deadbeef_gen_1'], 'newer than the default grace period')
  t.deepEqual(kept.generationDirsRemoved, [])

  const text = await memwal('gc', dir, '--dry-run', '--grace-ms', '600000')
  t.regex(text.stdout, /^ {2}generation folders: would keep 1 folder the manifest does not list, because .* grace period \(10 min\)/m)
  t.regex(text.stdout, /^ {4}deadbeef_gen_1\/$/m)

  const removed = await gcJson(t, dir, '--shard', shardId, '--grace-ms', '0')
  t.deepEqual(removed.generationDirsRemoved, ['deadbeef_gen_1'])
  t.false(objects(dir, shardId).includes('deadbeef_gen_1'))
  t.deepEqual(ids(await (await ShardReader.open(dir)).scan()), written)
})

test('gc of a missing shard or location, or with bad options, fails with one clear line', async (t) => {
  const dir = tempDir(t)
  const { shardId } = await flushedShard(dir, 1)
  const walBefore = objects(dir, shardId, 'wal')

  const unknown = await memwal('gc', dir, '--shard', 'nope')
  t.is(unknown.code, NOT_FOUND)
  t.regex(unknown.stderr, new RegExp(`^memwal: no shard nope at .*; shards there: default \\(${shardId}\\)\\n$`))

  const empty = await memwal('gc', tempDir(t))
  t.is(empty.code, NOT_FOUND)
  t.regex(empty.stderr, /no memwal shards at .*_mem_wal\/<shard-id>/)

  const missing = await memwal('gc', join(dir, 'nope'))
  t.is(missing.code, NOT_FOUND)
  t.regex(missing.stderr, /^memwal: no such directory: /)

  const cases: Array<[string[], RegExp]> = [
    [['gc'], /missing required argument 'location'/],
    [['gc', dir, '--keep-manifest-versions', '1'], /'--keep-manifest-versions <n>' argument '1' is invalid\. expected an integer ≥ 2/],
    [['gc', dir, '--grace-ms', '-5'], /'--grace-ms <ms>' argument '-5' is invalid/],
    [['gc', dir, '--bogus'], /unknown option '--bogus'/],
  ]
  for (const [args, message] of cases) {
    const r = await memwal(...args)
    t.is(r.code, USAGE, args.join(' '))
    t.regex(r.stderr, message, args.join(' '))
    t.notRegex(r.stderr, /\n\s+at /, 'no stack trace')
  }
  t.deepEqual(objects(dir, shardId, 'wal'), walBefore, 'no failed run removed anything')
})

test('memwal gc never prints credentials of a URI', async (t) => {
  const secret = 'SUPERSECRETvalue42'
  const r = await memwal('gc', `s3://AKIAKEY:${secret}@bucket/prefix?sig=${secret}`)
  t.not(r.code, 0)
  t.false(r.stderr.includes(secret), r.stderr)
  t.false(r.stdout.includes(secret), r.stdout)
})

test('memwal wal lists entries below the low-water mark until gc removes them, then starts after it', async (t) => {
  const dir = tempDir(t)
  const { shardId } = await flushedShard(dir, 4)
  // Every entry is at or below the mark (9), and all are still stored: all are listed.
  const stored = await memwal('wal', dir, '--json')
  t.is(stored.code, 0, stored.stderr)
  t.deepEqual(
    (JSON.parse(stored.stdout) as { firstPosition: number; entries: Array<{ position: number }> }).entries.map(
      (e) => e.position,
    ),
    [1, 2, 3, 4, 5, 6, 7, 8, 9],
  )
  t.regex((await memwal('wal', dir)).stdout, /^\(positions 1\.\.9; WAL tip: position 9\)\n\(low-water mark: position 9; /m)

  t.is((await memwal('gc', dir)).code, 0)
  // A third writer: its sentinel and one entry land after the low-water mark (9).
  const w = await ShardWriter.open(dir, { schema, gc: false })
  await w.put(rows([999]))
  await w.abort()

  const json = await memwal('wal', dir, '--json')
  t.is(json.code, 0, json.stderr)
  const listing = JSON.parse(json.stdout) as {
    shardId: string
    firstPosition: number
    walTip: number
    entries: Array<{ position: number; epoch: number; rows: number; sentinel: boolean }>
  }
  t.like(listing, { shardId, firstPosition: 10, walTip: 11 })
  t.deepEqual(
    listing.entries.map((e) => [e.position, e.epoch, e.rows, e.sentinel]),
    [
      [10, 3, 0, true],
      [11, 3, 1, false],
    ],
  )

  const text = await memwal('wal', dir)
  t.is(text.code, 0, text.stderr)
  t.regex(
    text.stdout,
    /^\(positions 10\.\.11; WAL tip: position 11\)\n\(low-water mark: position 9; entries up to it are in flushed generations, and garbage collection removes them\)\n$/m,
  )

  // Asking for a collected position is a usage error that says where to start instead.
  const collected = await memwal('wal', dir, '--from', '2')
  t.is(collected.code, USAGE)
  t.is(collected.stdout, '')
  t.regex(
    collected.stderr,
    /^memwal: WAL position 2 of shard default \(.*\) was removed by garbage collection .*the first available position is 10\. Run again with --from 10, or without --from\n$/,
  )
  t.notRegex(collected.stderr, /\n\s+at /)
  // Entry 4 and the sentinel at 5 are kept for fencing, but 6 is gone: the range is refused.
  const kept = await memwal('wal', dir, '--from', '4')
  t.is(kept.code, USAGE)
  t.regex(kept.stderr, /^memwal: WAL position 6 of shard .* the first available position is 10\./)

  const page = await memwal('wal', dir, '--from', '11', '--limit', '5', '--json')
  t.is(page.code, 0, page.stderr)
  t.deepEqual(
    (JSON.parse(page.stdout) as typeof listing).entries.map((e) => e.position),
    [11],
  )
})

test('memwal wal on a fully collected WAL lists nothing, without failing', async (t) => {
  const dir = tempDir(t)
  await flushedShard(dir, 2)
  t.is((await memwal('gc', dir)).code, 0)
  const r = await memwal('wal', dir)
  t.is(r.code, 0, r.stderr)
  t.regex(r.stdout, /^\(no entries; WAL tip: position 5\)\n\(low-water mark: position 5; /m)
})

test('memwal inspect shows the low-water mark, what is still below it, and what gc would remove', async (t) => {
  const dir = tempDir(t)
  const { shardId } = await flushedShard(dir, 3)

  const before = await memwal('inspect', dir, '--json')
  t.is(before.code, 0, before.stderr)
  const shard = (
    JSON.parse(before.stdout) as {
      shards: Array<{
        shardId: string
        replayCursor: number
        walLowWater: number
        walEntriesAtOrBelowLowWater: number
        collectable: { walEntries: number; manifestVersions: number; generationDirs: string[]; bytes: number }
      }>
    }
  ).shards[0]!
  t.like(shard, { shardId, replayCursor: 7, walLowWater: 7, walEntriesAtOrBelowLowWater: 7 })
  t.like(shard.collectable, { walEntries: 5, manifestVersions: 0, generationDirs: [] })
  t.true(shard.collectable.bytes > 0)
  const text = await memwal('inspect', dir)
  t.regex(
    text.stdout,
    /^ {2}WAL low-water mark: position 7 \(entries up to it may be garbage-collected; 7 still stored: 5 for `memwal gc` to remove, 2 kept for good to fence stale writers\)$/m,
  )
  t.regex(text.stdout, /^ {2}garbage: `memwal gc` would remove 5 WAL entries \(\d+(\.\d)? (B|KiB)\)$/m)
  t.deepEqual(objects(dir, shardId, 'wal').length, 7, 'inspect removed nothing')

  t.is((await memwal('gc', dir)).code, 0)
  const after = await memwal('inspect', dir)
  t.is(after.code, 0, after.stderr)
  t.regex(after.stdout, /WAL low-water mark: position 7 \(.*; 2 still stored: 0 for `memwal gc` to remove, 2 kept/)
  t.regex(after.stdout, /^ {2}garbage: none/m)

  // A shard no generation has been committed to has nothing to collect.
  const fresh = tempDir(t)
  const w = await ShardWriter.open(fresh, { schema, gc: false })
  await w.put(rows([1]))
  await w.abort()
  const none = await memwal('inspect', fresh)
  t.is(none.code, 0, none.stderr)
  t.regex(none.stdout, /^ {2}WAL low-water mark: 0 \(no WAL entry may be garbage-collected yet\)$/m)
})

test('--help lists gc with its options, and the exit codes name TRUNCATED', async (t) => {
  const help = await memwal('--help')
  t.is(help.code, 0)
  t.regex(help.stdout, /^ {2}gc \[options\] <location> +remove what a shard no longer needs/m)
  t.regex(help.stdout, /2 {2}bad command line or input .*\n.*TRUNCATED/)
  const gc = await memwal('gc', '--help')
  t.is(gc.code, 0)
  t.regex(gc.stdout, /^Usage: memwal gc \[options\] <location>/m)
  for (const option of ['--shard', '--dry-run', '--keep-manifest-versions <n>', '--grace-ms <ms>', '--json']) {
    t.true(gc.stdout.includes(option), option)
  }
  t.regex(gc.stdout, /\(default:\s+10\)/)
  t.regex(gc.stdout, /\(default:\s+600000\)/)
})
