// `memwal stats`, and what every command's --json and progress bar promise scripts: NDJSON (one
// JSON object per line) on stdout, and no bar or terminal codes unless stderr is a terminal (or
// --progress asks). Expected numbers come from the writers' own counters and a ShardReader,
// never from the CLI's code.

import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { memwalCli as memwal, runProcess } from './support/child-process'
import { ObjectStore, ShardReader, ShardWriter, WalTailer, dropMemoryStore } from '../index'
import { renderStats, shardStats } from '../cli/stats.js'
import { memoryLocation, rows, schema, tempDir } from './support/helpers'

const root = join(__dirname, '..')

// Exit codes, as documented in the README and `memwal --help`.
const USAGE = 2
const NOT_FOUND = 3

/** The objects `memwal stats --json` prints, one per line. */
interface StatsJson {
  location: string
  shardId: string
  shardName: string | null
  manifestVersion: number
  lastClaim: { epoch: number; holder: { writerId: string; host: string; pid: number; claimedAt: string } | null }
  generations: { count: number; rows: number | null }
  wal: { lowWater: number; firstPosition: number; tip: number; depth: number }
  bytes: { generations: number | null; wal: number | null; total: number | null }
}

/** Every line of `stdout` parsed as JSON: NDJSON, or the test fails. */
function ndjson<T>(stdout: string): T[] {
  if (!stdout.endsWith('\n')) throw new Error(`NDJSON ends with a newline: ${JSON.stringify(stdout.slice(-40))}`)
  return stdout
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as T)
}

/** A terminal escape sequence, or a bar drawn by cli-progress's default characters. */
const BAR_OR_ANSI = /\u001b\[|[█░]|={5,}|-{5,}|\d+% \|/

/**
 * A shard with flushed generations and WAL entries above the low-water mark: a first writer
 * rotates small MemTables and closes (so every row is in a generation and the mark is raised
 * to its last entry); a second claims the shard (its fence sentinel) and writes `walPuts`
 * more entries, then stops without flushing them. Collection is off, so nothing else moves.
 */
async function shardWithWal(dir: string, walPuts: number, shard = 'default') {
  const first = await ShardWriter.open(dir, { schema, shard, gc: false, maxMemtableSize: 2048 })
  for (let i = 0; i < 12; i++) await first.put(rows(Array.from({ length: 20 }, (_, k) => i * 20 + k)))
  await first.close()
  const second = await ShardWriter.open(dir, { schema, shard, gc: false })
  for (let i = 0; i < walPuts; i++) await second.put(rows([10_000 + i]))
  const wal = await second.walStats()
  const written = second.stats()
  await second.abort()
  return { first: first.stats(), second, wal, written }
}

test('stats reports sizes, WAL depth, generations, the last claim and the manifest version', async (t) => {
  const dir = tempDir(t)
  const { first, second, wal } = await shardWithWal(dir, 3)
  const reader = await ShardReader.open(dir)
  const m = await reader.manifest()
  const files = await reader.files()
  const tailer = await WalTailer.open(dir)
  const tip = (await tailer.nextPosition()) - 1
  await tailer.close()
  await reader.close()
  // The shard the test meant to build: several generations, entries above the mark.
  t.true(m.flushedGenerations.length > 1)
  t.is(m.flushedGenerations.length, first.memtableFlushCount)
  t.is(tip, wal.nextWalEntryPosition - 1)

  const r = await memwal('stats', dir, '--json')
  t.is(r.code, 0, r.stderr)
  t.is(r.stderr, '')
  const [s, ...rest] = ndjson<StatsJson>(r.stdout)
  t.is(rest.length, 0)
  t.like(s, {
    location: dir,
    shardId: second.shardId,
    shardName: 'default',
    manifestVersion: m.version,
    lastClaim: { epoch: second.epoch, holder: { writerId: second.writerId, pid: process.pid } },
    generations: { count: first.memtableFlushCount, rows: first.memtableFlushRows },
    // Above the mark: the second writer's fence sentinel and its entries.
    wal: { lowWater: m.walLowWater, firstPosition: m.walLowWater + 1, tip, depth: wal.entriesAppended + 1 },
  })
  t.is(s!.lastClaim.holder!.claimedAt, m.holder!.claimedAt.toISOString())
  const generationBytes = files.reduce((a, f) => a + statSync(f.uri).size, 0)
  t.is(s!.bytes.generations, generationBytes)
  // The entries the second writer appended, and its sentinel (a few hundred bytes at most).
  t.true(s!.bytes.wal! > wal.bytesAppended && s!.bytes.wal! < wal.bytesAppended + 4096, String(s!.bytes.wal))
  t.is(s!.bytes.total, generationBytes + s!.bytes.wal!)

  const text = await memwal('stats', dir)
  t.is(text.code, 0, text.stderr)
  t.regex(text.stdout, new RegExp(`^shard default \\(${second.shardId}\\)\\n`))
  t.regex(text.stdout, new RegExp(`^  manifest version  ${m.version}$`, 'm'))
  t.regex(text.stdout, new RegExp(`^  last claim +epoch ${second.epoch} by writer ${second.writerId} on host `, 'm'))
  t.regex(
    text.stdout,
    new RegExp(
      `^  generations +${first.memtableFlushCount} \\(${first.memtableFlushRows.toLocaleString('en-US')} rows\\)$`,
      'm',
    ),
  )
  t.regex(
    text.stdout,
    new RegExp(
      `^  WAL depth +${wal.entriesAppended + 1} entries above the low-water mark ` +
        `\\(positions ${m.walLowWater + 1}\\.\\.${tip}; low-water mark ${m.walLowWater}, tip ${tip}\\)$`,
      'm',
    ),
  )
  t.regex(text.stdout, /^  size +[\d.]+ KiB \(generation files [\d.]+ KiB, WAL above the low-water mark [\d.]+ (B|KiB)\)$/m)
})

test('stats of a WAL with no generation counts exactly the bytes the writer appended', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, gc: false })
  for (let i = 0; i < 5; i++) await w.put(rows([i, i + 100]))
  const written = w.stats()
  await w.abort()
  const [s] = ndjson<StatsJson>((await memwal('stats', dir, '--json')).stdout)
  t.like(s, {
    generations: { count: 0, rows: 0 },
    wal: { lowWater: 0, firstPosition: 1, tip: written.walFlushCount, depth: written.walFlushCount },
    bytes: { generations: 0, wal: written.walFlushBytes, total: written.walFlushBytes },
  })
})

test('stats prints every shard without --shard, one JSON line each; --shard picks one', async (t) => {
  const dir = tempDir(t)
  await shardWithWal(dir, 1, 'default')
  await shardWithWal(dir, 2, 'events')
  const all = await memwal('stats', dir, '--json')
  t.is(all.code, 0, all.stderr)
  const lines = ndjson<StatsJson>(all.stdout)
  t.deepEqual(lines.map((s) => s.shardName).sort(), ['default', 'events'])
  t.deepEqual(
    lines.map((s) => [s.shardName, s.wal.depth]).sort(),
    [
      ['default', 2],
      ['events', 3],
    ],
  )

  const text = await memwal('stats', dir)
  t.is(text.stdout.match(/^shard /gm)?.length, 2)

  const one = await memwal('stats', dir, '--shard', 'events', '--json')
  t.deepEqual(
    ndjson<StatsJson>(one.stdout).map((s) => s.shardName),
    ['events'],
  )
})

test('stats of an unknown shard or location is NOT_FOUND, naming what is there', async (t) => {
  const dir = tempDir(t)
  await shardWithWal(dir, 1)
  const unknown = await memwal('stats', dir, '--shard', 'nope')
  t.is(unknown.code, NOT_FOUND)
  t.regex(unknown.stderr, /^memwal: no shard nope at .*; shards there: default \(/)
  t.is(unknown.stdout, '')

  const missing = await memwal('stats', join(dir, 'missing'))
  t.is(missing.code, NOT_FOUND)
  t.regex(missing.stderr, /no such directory/)

  const empty = await memwal('stats', tempDir(t))
  t.is(empty.code, NOT_FOUND)
  t.regex(empty.stderr, /no memwal shards at/)

  const bad = await memwal('stats', dir, '--bogus')
  t.is(bad.code, USAGE)
})

test('stats of a store whose object sizes the CLI cannot list says so, and reports the rest', async (t) => {
  // A memory:// store lives in one process, so this one is read in the test's process, through
  // the command's own function, as `memwal stats memory://NAME` would in the CLI's.
  const location = memoryLocation()
  t.teardown(() => dropMemoryStore(location))
  const w = await ShardWriter.open(location, { schema, gc: false })
  await w.put(rows([1, 2, 3]))
  const written = w.stats()
  await w.abort()
  const store = ObjectStore.fromUri(location)
  const [shard] = await store.listShards()
  const s = await shardStats(store, location, shard!)
  t.like(s, {
    shardName: 'default',
    generations: { count: 0, rows: 0 },
    wal: { lowWater: 0, firstPosition: 1, tip: written.walFlushCount, depth: written.walFlushCount },
    bytes: { generations: null, wal: null, total: null },
  })
  t.regex(renderStats(s), /^  size +unknown \(sizes are read for local directories only\)$/m)
  t.regex(renderStats(s), /^  WAL depth +1 entry above the low-water mark \(positions 1\.\.1; low-water mark 0, tip 1\)$/m)
})

test('--json is NDJSON for every command: each line one complete object', async (t) => {
  const dir = tempDir(t)
  await shardWithWal(dir, 2)
  for (const args of [
    ['stats', dir, '--json'],
    ['inspect', dir, '--json'],
    ['wal', dir, '--json'],
    ['files', dir, '--json'],
    ['gc', dir, '--dry-run', '--json'],
    ['scan', dir, '--json'],
  ]) {
    const r = await memwal(...args)
    t.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`)
    const objects = ndjson<Record<string, unknown>>(r.stdout)
    t.true(
      objects.every((o) => typeof o === 'object' && o !== null && !Array.isArray(o)),
      args.join(' '),
    )
  }
  // One line per row for scan, per file for files; one report for the others.
  const scan = ndjson<{ id: number }>((await memwal('scan', dir, '--json')).stdout)
  const reader = await ShardReader.open(dir)
  t.deepEqual(
    scan.map((r) => r.id),
    Array.from((await reader.scan()).getChild('id')!.toArray() as Int32Array, Number),
  )
  t.is(ndjson((await memwal('files', dir, '--json')).stdout).length, (await reader.files()).length)
  await reader.close()
  t.is(ndjson((await memwal('inspect', dir, '--json')).stdout).length, 1)
  t.is(ndjson((await memwal('gc', dir, '--dry-run', '--json')).stdout).length, 1)

  // --json is --format ndjson; asking for both formats is a usage error.
  const both = await memwal('scan', dir, '--json', '--format', 'csv')
  t.is(both.code, USAGE)
  t.regex(both.stderr, /'--json' cannot be used with option '--format/)
  t.is((await memwal('scan', dir, '--format', 'ndjson')).stdout, (await memwal('scan', dir, '--json')).stdout)
})

test('no progress bar when stderr is not a terminal; --progress draws one on stderr only', async (t) => {
  const dir = tempDir(t)
  await shardWithWal(dir, 2)
  for (const args of [
    ['scan', dir],
    ['scan', dir, '--json'],
    ['inspect', dir],
    ['stats', dir],
  ]) {
    const r = await memwal(...args)
    t.is(r.code, 0, r.stderr)
    t.is(r.stderr, '', args.join(' '))
    t.notRegex(r.stdout, BAR_OR_ANSI, args.join(' '))
  }
  for (const command of ['scan', 'inspect', 'stats']) {
    const forced = await memwal(command, dir, '--json', '--progress')
    t.is(forced.code, 0, forced.stderr)
    t.regex(forced.stderr, /100% \| \d+\/\d+ /, command)
    t.notRegex(forced.stdout, BAR_OR_ANSI, command)
    ndjson(forced.stdout)
  }
})

// `script` runs the CLI on a pseudo-terminal, as a user's shell does.
const script = ['/usr/bin/script', '/bin/script'].find((p) => existsSync(p))
;(script === undefined ? test.skip : test)('on a terminal, scan and inspect draw the bar', async (t) => {
  const dir = tempDir(t)
  await shardWithWal(dir, 2)
  for (const command of ['scan', 'inspect']) {
    const cli = `"${process.execPath}" --import tsx cli/main.ts ${command} "${dir}"`
    const r = await runProcess(script!, ['-qec', cli, '/dev/null'], {
      cwd: root,
      env: { ...process.env, FORCE_COLOR: '0', MEMWAL_DEBUG: '' },
    })
    t.is(r.code, 0, r.stdout)
    t.regex(r.stdout, /100% \| \d+\/\d+ /, command)
  }
})
