// `memwal demo [dir]`: the README's main job, end to end. Concurrent writers ingest synthetic
// rows with durable puts (each resolves only once its rows are in a persisted WAL entry) while
// small MemTables rotate into Parquet generations; a second writer then takes the shard over
// and the first is fenced; finally the shard is reopened and every acknowledged row is checked
// to be there exactly once, with nothing else.

import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

import type { Command } from 'commander'
import { Field, Float64, Int32, Int64, Schema, type Table, Utf8, makeVector, vectorFromArray } from 'apache-arrow'

import { FencedError, ShardReader, ShardWriter } from '../index.js'
import { tableOf } from './table.js'
import { CliError, Exit } from './exit-codes.js'
import { integerAtLeast } from './options.js'
import { formatBytes, formatCount } from './output.js'
import { startProgress } from './progress.js'

/** Marks a directory as the demo's own, so a rerun may clear it (and never anything else). */
const MARKER = '.memwal-demo'

interface DemoOptions {
  rows: number
  writers: number
  batchRows: number
  memtableSize: number
}

const schema = new Schema([
  new Field('id', new Int64(), false),
  new Field('writer', new Int32(), false),
  new Field('value', new Float64(), false),
  new Field('payload', new Utf8(), false),
])

/** Rows `[first, first + count)` written by `writer`; `id` is the global row number. */
function batchOf(first: number, count: number, writer: number): Table {
  const id = makeVector(BigInt64Array.from({ length: count }, (_, i) => BigInt(first + i)))
  const w = makeVector(new Int32Array(count).fill(writer))
  const value = makeVector(Float64Array.from({ length: count }, (_, i) => Math.sin(first + i)))
  const payload = vectorFromArray(
    Array.from({ length: count }, (_, i) => `sensor-${writer} reading ${first + i}`),
    new Utf8(),
  )
  return tableOf(schema, [id, w, value, payload])
}

/** Empties `dir` if a previous demo made it; refuses a non-empty directory it did not make. */
function prepare(dir: string): void {
  if (existsSync(dir) && readdirSync(dir).length > 0) {
    if (!existsSync(join(dir, MARKER))) {
      throw new CliError(
        Exit.USAGE,
        `${dir} is not empty and was not made by \`memwal demo\`; pass an empty or new directory`,
      )
    }
    rmSync(dir, { recursive: true, force: true })
  }
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, MARKER), 'made by `memwal demo`; a rerun empties this directory\n')
}

const seconds = (since: number): number => (performance.now() - since) / 1000
const plural = (n: number, one: string, many = `${one}s`): string => `${formatCount(n)} ${n === 1 ? one : many}`

async function demo(dirArg: string, o: DemoOptions): Promise<void> {
  // The demo prepares, marks and clears a local directory; `resolve` would turn a URI into a
  // relative path (`s3://b/p` → `./s3:/b/p`) and report success on data written elsewhere.
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(dirArg)) {
    throw new CliError(
      Exit.USAGE,
      `memwal demo writes to a local directory, not to ${dirArg}; pass a directory path (inspect and scan read any location)`,
    )
  }
  const dir = resolve(dirArg)
  prepare(dir)
  const totalBatches = Math.ceil(o.rows / o.batchRows)
  console.log(
    `memwal demo: ${formatCount(o.rows)} rows from ${o.writers} concurrent writers, durable puts of ` +
      `${formatCount(o.batchRows)} rows, MemTables of ${formatBytes(o.memtableSize)}, in ${dir}`,
  )

  // 1. Ingest. Every put is durable: it resolves once a persisted WAL entry holds its rows.
  const writer = await ShardWriter.open(dir, { schema, maxMemtableSize: o.memtableSize })
  console.log(`shard ${writer.shardName} (${writer.shardId}): writer epoch ${writer.epoch}`)
  const acked = new Uint8Array(totalBatches)
  let ackedRows = 0
  let nextBatch = 0
  const started = performance.now()
  const bar = startProgress(
    'rows acknowledged | {speed} rows/s | generation {generation}',
    o.rows,
    // The demo is watched: its bar shows in a pipe too, one line a second.
    'always',
    {},
    { speed: '0', generation: 1 },
  )
  const progress = async (): Promise<void> => {
    const { generation } = await writer.memtableStats()
    bar.update(ackedRows, { speed: formatCount(Math.round(ackedRows / Math.max(seconds(started), 1e-3))), generation })
  }
  await Promise.all(
    Array.from({ length: o.writers }, async (_, w) => {
      for (let b = nextBatch++; b < totalBatches; b = nextBatch++) {
        const first = b * o.batchRows
        const count = Math.min(o.batchRows, o.rows - first)
        await writer.put(batchOf(first, count, w))
        acked[b] = 1
        ackedRows += count
        await progress()
      }
    }),
  )
  const ingestSeconds = seconds(started)
  await progress()
  bar.stop()
  const stats = writer.stats()
  const rotated = (await writer.memtableStats()).generation - 1
  console.log(
    `ingested ${formatCount(ackedRows)} rows in ${ingestSeconds.toFixed(2)} s: ` +
      `${formatCount(Math.round(ackedRows / ingestSeconds))} rows/s, ` +
      `${formatBytes(stats.walFlushBytes / ingestSeconds)}/s of WAL; ` +
      `${plural(stats.putCount, 'durable put')} in ${plural(stats.walFlushCount, 'WAL entry', 'WAL entries')} ` +
      `(${stats.putsPerWalEntry.toFixed(1)} puts per entry: group commit); ` +
      `${plural(rotated, 'MemTable')} rotated into Parquet generations`,
  )

  // 2. Failover: a second writer claims the shard; the first one's next put is refused.
  const failoverStarted = performance.now()
  // Opened by path alone, as the first: both reach the shard named `default`.
  const successor = await ShardWriter.open(dir, { schema, maxMemtableSize: o.memtableSize })
  console.log(
    `failover: a second writer opened the shard in ${seconds(failoverStarted).toFixed(2)} s ` +
      `(epoch ${successor.epoch}; it fenced the WAL and replayed it)`,
  )
  let fenced: FencedError | null = null
  try {
    await writer.put(batchOf(o.rows, o.batchRows, 0))
  } catch (e) {
    if (!(e instanceof FencedError)) throw e
    fenced = e
  }
  await writer.abort()
  if (fenced === null) {
    await successor.close()
    throw new CliError(Exit.VERIFY_FAILED, 'the first writer was not fenced: its put after the takeover succeeded')
  }
  console.log(
    `  the first writer (epoch ${writer.epoch}) is fenced: its next put was rejected with ` +
      `FencedError (${fenced.fenceReason}) and nothing of it was written`,
  )
  await successor.close()

  // 3. Reopen and verify: every acknowledged row exactly once, and nothing else.
  const verifyStarted = performance.now()
  const reader = await ShardReader.open(dir)
  const manifest = await reader.manifest()
  const table = await reader.scan()
  const seen = new Uint8Array(o.rows)
  let missing = 0
  let duplicates = 0
  let unacknowledged = 0
  for (const batch of table.batches) {
    const ids = batch.getChild('id')?.toArray() as BigInt64Array | undefined
    for (const big of ids ?? []) {
      const id = Number(big)
      if (id < 0 || id >= o.rows || acked[Math.floor(id / o.batchRows)] !== 1) unacknowledged++
      else if (seen[id] === 1) duplicates++
      else seen[id] = 1
    }
  }
  for (let b = 0; b < totalBatches; b++) {
    if (acked[b] !== 1) continue
    for (let id = b * o.batchRows; id < Math.min(o.rows, (b + 1) * o.batchRows); id++) {
      if (seen[id] !== 1) missing++
    }
  }
  const generations = manifest.flushedGenerations
  console.log(
    `verify: reopened the shard and read ${formatCount(table.numRows)} rows in ${seconds(verifyStarted).toFixed(2)} s ` +
      `from ${plural(generations.length, 'Parquet generation')} (epoch ${manifest.writerEpoch}, ` +
      `manifest version ${manifest.version})`,
  )
  if (missing + duplicates + unacknowledged > 0) {
    throw new CliError(
      Exit.VERIFY_FAILED,
      `verification failed: ${missing} acknowledged rows missing, ${duplicates} duplicated, ` +
        `${unacknowledged} rows that were never acknowledged`,
    )
  }
  console.log(`  every one of the ${formatCount(ackedRows)} acknowledged rows is there exactly once, and nothing else`)
  console.log(
    `\nsummary: ${formatCount(ackedRows)} rows, ${formatCount(Math.round(ackedRows / ingestSeconds))} rows/s durable ` +
      `ingest from ${o.writers} writers, ${plural(generations.length, 'generation')} flushed, 1 failover, 0 rows lost`,
  )
  console.log(`look inside: npx memwal inspect ${dirArg}; npx memwal wal|scan ${dirArg}`)
}

/** Registers `demo` on the program. */
export function demoCommand(program: Command): void {
  program
    .command('demo')
    .summary('ingest durably, fail over, reopen and verify (the README in one run)')
    .description(
      'Ingests --rows synthetic rows with durable puts from --writers concurrent writers (group commit),\n' +
        'rotating small MemTables into Parquet generations; opens a second writer on the shard and shows the\n' +
        'first one fenced; reopens the shard and verifies that every acknowledged row is there exactly once.\n' +
        `[dir] is created if needed; a rerun empties a directory an earlier demo made (marked ${MARKER}) and\n` +
        'refuses any other non-empty one.',
    )
    .argument('[dir]', 'where the shard is written', 'memwal-demo')
    .option('--rows <n>', 'rows to ingest', integerAtLeast(1), 1_000_000)
    .option('--writers <n>', 'concurrent writers', integerAtLeast(1), 16)
    .option('--batch-rows <n>', 'rows per durable put', integerAtLeast(1), 1_000)
    .option('--memtable-size <bytes>', 'MemTable size that triggers a rotation', integerAtLeast(1), 8 << 20)
    .action(async (dir: string, options: DemoOptions) => demo(dir, options))
}
