#!/usr/bin/env node
// The soak test: a shard run as a service runs it, compressed. Durable
// one-row puts from several clients, MemTables small enough to rotate every few seconds, a
// failover to a new writer process every few seconds (each fences the one before), garbage
// collection and compaction on. Checked while it runs and at the end:
//   - bytes on disk stay within 2x the live data (the generation files the manifest lists)
//     plus the WAL above the low-water mark, plus the replaced or unlisted generation folders
//     that collection may still keep (within their grace period), plus a fixed allowance for
//     small files; and no unlisted folder outlives its grace period (plus slack);
//   - replay stays bounded: no open replays more than a few MemTables' worth of rows;
//   - every acknowledged row is read exactly once through ShardWriter.scan(), ShardReader.scan()
//     and DuckDB over the listed generation files.
// Open times are reported, not judged: the machine's speed is not what this checks.
//
// Usage: npm run soak [-- --minutes 30] [--failover-seconds 5] [--clients 8] [--dir DIR] [--json]
// (30 minutes by default; CI runs --minutes 2.) Exits 1 if any check fails.

import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'

import { DuckDBInstance } from '@duckdb/node-api'

import { ShardReader, ShardWriter, collectGarbage } from '../dist/index.js'
import { SHARD, WRITER_OPTIONS, schema } from './config.mjs'

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    'failover-seconds': { type: 'string', default: '5' },
    clients: { type: 'string', default: '8' },
    dir: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
})
const minutes = Number(args.minutes)
const failoverMs = Number(args['failover-seconds']) * 1000
const clients = Number(args.clients)
if (!(minutes > 0) || !(failoverMs > 0) || !(clients >= 1)) {
  console.error('soak: --minutes, --failover-seconds and --clients must be positive numbers')
  process.exit(2)
}
const dir = args.dir ?? mkdtempSync(join(tmpdir(), 'memwal-soak-'))
mkdirSync(dir, { recursive: true })
const log = (line) => {
  if (!args.json) console.log(line)
}

// Collection removes files while the shard is measured: a file or folder gone between its
// listing and its stat counts as absent.
const gone = (e) => e?.code === 'ENOENT'

/** The stat of `path`, or null if it is gone. */
function statOrNull(path) {
  try {
    return statSync(path)
  } catch (e) {
    if (gone(e)) return null
    throw e
  }
}

/** The names in folder `path`, or none if it is gone. */
function namesIn(path) {
  try {
    return readdirSync(path)
  } catch (e) {
    if (gone(e)) return []
    throw e
  }
}

/** Bytes of every file under `path`. */
function bytesUnder(path) {
  let total = 0
  for (const name of namesIn(path)) {
    const st = statOrNull(join(path, name))
    if (st === null) continue
    total += st.isDirectory() ? bytesUnder(join(path, name)) : st.size
  }
  return total
}

const mib = (bytes) => (bytes / 2 ** 20).toFixed(1)

const failures = []
const fail = (what) => {
  failures.push(what)
  console.error(`soak: FAILED: ${what}`)
}

/** Compactions of every writer that has exited, and the rows they rewrote. */
const compactions = { count: 0, rows: 0 }

/** Every writer process started, so that none outlives this one if it fails. */
const children = new Set()
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL')
})

/** Starts writer `index`; resolves with the child and its first report (how its open went). */
function startWriter(index) {
  const ackFile = join(dir, `acks-${index}.txt`)
  writeFileSync(ackFile, '')
  const child = spawn(process.execPath, [join(import.meta.dirname, 'child.mjs'), dir, String(index), ackFile, String(clients)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  children.add(child)
  child.on('exit', () => children.delete(child))
  const lines = createInterface({ input: child.stdout })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  // Its last line says what its compactions rewrote (see child.mjs).
  lines.on('line', (line) => {
    const report = JSON.parse(line)
    if (report.exited !== undefined) {
      compactions.count += report.compactions
      compactions.rows += report.compactedRows
    }
  })
  const opened = new Promise((resolve, reject) => {
    lines.once('line', (line) => resolve(JSON.parse(line)))
    child.once('exit', (code) => reject(new Error(`writer ${index} exited (code ${code}) before it opened`)))
  })
  return { index, child, ackFile, exited, opened }
}

// Collection runs every `gcIntervalMs` and removes a generation folder the manifest no longer
// lists once its newest file is `gcGraceMs` old; a pass that deletes thousands of WAL entries on
// a busy machine can take seconds, so a folder is counted as left behind only this much later.
const COLLECTION_SLACK_MS = 15_000
// A fixed allowance for the rest: manifest versions, the fence sentinels kept forever (one per
// failover), WAL entries below the mark that the next pass removes, request-id files.
const ALLOWANCE = 8 * 1024 * 1024

/**
 * What the shard holds on disk now: every byte; the listed generation files; the WAL above the
 * low-water mark and below it; generation folders the manifest no longer lists (replaced by a
 * compaction, a fenced writer's lost flush, one in progress), split into those collection may
 * still keep (younger than the grace period plus slack) and those it should have removed.
 */
async function diskNow() {
  const reader = await ShardReader.open(dir, { shard: SHARD })
  const manifest = await reader.manifest()
  const files = await reader.files()
  const shardDir = join(dir, '_mem_wal', reader.shardId)
  await reader.close()
  // Listed files by folder and name (the live data), and their folders.
  const listedFiles = new Set(files.map((f) => join(basename(dirname(f.uri)), basename(f.uri))))
  const listed = new Set(files.map((f) => basename(dirname(f.uri))))
  const now = Date.now()
  const d = { total: 0, live: 0, walAbove: 0, walBelow: 0, unlistedKept: 0, leftBehind: [], walFiles: 0, generations: files.length }
  for (const name of namesIn(join(shardDir, 'wal'))) {
    const st = statOrNull(join(shardDir, 'wal', name))
    if (st === null) continue
    d.walFiles++
    d.total += st.size
    // bitrev64 names: the position is the reversed binary digits.
    const position = Number.parseInt(name.slice(0, 64).split('').reverse().join(''), 2)
    if (position > manifest.walLowWater) d.walAbove += st.size
    else d.walBelow += st.size
  }
  for (const folder of namesIn(shardDir)) {
    if (folder === 'wal') continue
    if (!/_gen_\d+$/.test(folder)) {
      d.total += bytesUnder(join(shardDir, folder))
      continue
    }
    const stats = namesIn(join(shardDir, folder))
      .map((n) => [n, statOrNull(join(shardDir, folder, n))])
      .filter(([, st]) => st !== null)
    if (stats.length === 0) continue
    const bytes = stats.reduce((n, [, st]) => n + st.size, 0)
    const newest = Math.max(...stats.map(([, st]) => st.mtimeMs))
    d.total += bytes
    if (listed.has(folder)) {
      for (const [n, st] of stats) if (listedFiles.has(join(folder, n))) d.live += st.size
    } else if (now - newest < WRITER_OPTIONS.gcGraceMs + COLLECTION_SLACK_MS) d.unlistedKept += bytes
    else d.leftBehind.push(`${folder} (${Math.round((now - newest) / 1000)} s old)`)
  }
  return d
}

/** The check after every failover: collection keeps up, and the disk holds what it may. */
const allowedBytes = (d) => 2 * d.live + d.walAbove + d.unlistedKept + ALLOWANCE

const started = Date.now()
const deadline = started + minutes * 60_000
const opens = []
const disk = []
let writers = 0
let current = startWriter(writers++)
opens.push(await current.opened)
log(`soak: ${minutes} min in ${dir}, a failover every ${failoverMs / 1000} s, ${clients} clients per writer`)

while (Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, Math.min(failoverMs, Math.max(0, deadline - Date.now()))))
  if (Date.now() >= deadline) break
  const next = startWriter(writers++)
  opens.push(await next.opened)
  const previous = current
  current = next
  // The old writer is fenced at its next put and exits; one that does not is a failure.
  const timeout = setTimeout(() => {
    fail(`writer ${previous.index} did not stop within 60 s of being fenced`)
    previous.child.kill('SIGKILL')
  }, 60_000)
  const { code } = await previous.exited
  clearTimeout(timeout)
  if (code !== 0) fail(`writer ${previous.index} exited with code ${code}`)
  const d = await diskNow()
  disk.push(d)
  if (d.total > allowedBytes(d)) {
    fail(
      `after failover ${writers - 1}: ${d.total} bytes on disk > 2 x ${d.live} live + ${d.walAbove} WAL above the mark + ${d.unlistedKept} in replaced or unlisted generations within the grace period + ${ALLOWANCE} (WAL below the mark: ${d.walBelow})`,
    )
  }
  if (d.leftBehind.length > 0) {
    fail(`after failover ${writers - 1}: collection left ${d.leftBehind.length} unlisted generation folders past their grace period: ${d.leftBehind.slice(0, 5).join(', ')}`)
  }
  const last = opens[opens.length - 1]
  log(
    `soak: ${Math.round((Date.now() - started) / 1000)} s, writer ${writers - 1}: opened in ${last.openMs.toFixed(0)} ms (replayed ${last.replayedRows} rows), disk ${mib(d.total)} MiB (live ${mib(d.live)}, unlisted generations in their grace period ${mib(d.unlistedKept)}, WAL ${mib(d.walBelow + d.walAbove)} in ${d.walFiles} files, ${mib(d.walBelow)} of it collectable), ${d.generations} generations`,
  )
}

// Stop the last writer cleanly: its close flushes every row into generations.
current.child.kill('SIGTERM')
const { code } = await current.exited
if (code !== 0) fail(`the last writer exited with code ${code}`)

const acked = []
for (let i = 0; i < writers; i++) {
  for (const line of readFileSync(join(dir, `acks-${i}.txt`), 'utf8').split('\n')) {
    if (line !== '') acked.push(Number(line))
  }
}

/** Checks that `ids` (what one way of reading returned) holds every acknowledged id exactly once. */
function checkReadOnce(what, ids) {
  const seen = new Set()
  let duplicates = 0
  for (const id of ids) {
    if (seen.has(id)) duplicates++
    seen.add(id)
  }
  if (duplicates > 0) fail(`${what}: ${duplicates} rows read twice`)
  const missing = acked.filter((id) => !seen.has(id)).length
  if (missing > 0) fail(`${what}: ${missing} acknowledged rows missing`)
  return ids.length
}
const idsOf = (table) => Array.from(table.getChild('id'), Number)

const writer = await ShardWriter.open(dir, { schema, shard: SHARD, ...WRITER_OPTIONS })
const viaWriter = checkReadOnce('ShardWriter.scan()', idsOf(await writer.scan()))
await writer.close()
const reader = await ShardReader.open(dir, { shard: SHARD })
const viaReader = checkReadOnce('ShardReader.scan()', idsOf(await reader.scan()))
const files = await reader.files()
const manifest = await reader.manifest()
await reader.close()
const duck = await (await DuckDBInstance.create(':memory:')).connect()
const list = files.map((f) => `'${f.uri.replaceAll("'", "''")}'`).join(', ')
const result = await duck.runAndReadAll(`SELECT id FROM read_parquet([${list}])`)
const viaDuckDb = checkReadOnce('DuckDB over the listed files', result.getRowObjects().map((r) => Number(r.id)))

// Replay is bounded by what was not yet in generations: a few MemTables' worth of rows.
const rowBytes = 200
const replayBound = (4 * WRITER_OPTIONS.maxMemtableSize) / rowBytes
const maxReplayed = Math.max(...opens.map((o) => o.replayedRows))
if (maxReplayed > replayBound) fail(`an open replayed ${maxReplayed} rows, more than ${replayBound}`)
// Every row is in generations now: one more collection leaves only what fences stale writers
// (a sentinel and the entry before it, per takeover).
await collectGarbage(dir, { shard: SHARD, graceMs: WRITER_OPTIONS.gcGraceMs })
const final = await diskNow()
if (final.walFiles > 2 * writers + 2) {
  fail(`${final.walFiles} WAL files left after the last collection, more than 2 per writer`)
}
if (final.total > allowedBytes(final)) {
  fail(`${final.total} bytes on disk at the end, more than 2 x ${final.live} live + ${final.unlistedKept} within the grace period + ${ALLOWANCE}`)
}
if (final.leftBehind.length > 0) fail(`the last collection left ${final.leftBehind.join(', ')}`)

const openMs = opens.map((o) => o.openMs).sort((a, b) => a - b)
const summary = {
  minutes,
  writers,
  failovers: writers - 1,
  ackedRows: acked.length,
  ackedPerSecond: Math.round(acked.length / ((Date.now() - started) / 1000)),
  rowsRead: { writer: viaWriter, reader: viaReader, duckdb: viaDuckDb },
  openMs: { p50: Math.round(openMs[Math.floor(openMs.length / 2)]), max: Math.round(openMs[openMs.length - 1]) },
  maxReplayedRows: maxReplayed,
  maxDiskRatio: Math.max(...disk.map((d) => d.total / allowedBytes(d)), 0),
  meanUnlistedKeptBytes: Math.round(disk.reduce((n, d) => n + d.unlistedKept, 0) / Math.max(disk.length, 1)),
  compactions: { ...compactions, rowsPerAckedRow: compactions.rows / Math.max(acked.length, 1) },
  final: { ...final, walLowWater: manifest.walLowWater },
  failures,
}
if (args.json) {
  console.log(JSON.stringify(summary))
} else {
  log(
    `soak: ${summary.failovers} failovers, ${summary.ackedRows} acknowledged rows (${summary.ackedPerSecond}/s), each read once by scan(), ShardReader and DuckDB (${viaWriter}, ${viaReader}, ${viaDuckDb} rows read)`,
  )
  log(
    `soak: open p50 ${summary.openMs.p50} ms, max ${summary.openMs.max} ms; at most ${maxReplayed} rows replayed; disk at most ${(summary.maxDiskRatio * 100).toFixed(0)}% of the bound; at the end ${(final.total / 2 ** 20).toFixed(1)} MiB on disk for ${(final.live / 2 ** 20).toFixed(1)} MiB of generations (${final.generations} files), ${final.walFiles} WAL files`,
  )
  log(
    `soak: ${compactions.count} compactions rewrote ${compactions.rows} rows (${summary.compactions.rowsPerAckedRow.toFixed(2)} per acknowledged row); replaced or unlisted generations in their grace period: ${mib(summary.meanUnlistedKeptBytes)} MiB on average`,
  )
}
if (args.dir === undefined) rmSync(dir, { recursive: true, force: true })
console.log(failures.length === 0 ? 'soak: 1 passed, 0 failed' : `soak: 0 passed, 1 failed (${failures.length} problems)`)
process.exit(failures.length === 0 ? 0 : 1)
