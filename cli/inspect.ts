// `memwal inspect <location> [--shard NAME|ID] [--json]`: what a store holds, shard by shard, as a
// new writer would find it, and what `memwal gc` would remove (read-only: it claims nothing).

import type { Command } from 'commander'

import {
  ShardReader,
  WalTailer,
  collectGarbage,
  type ObjectStore,
  type ShardInfo,
  type ShardManifest,
} from '../index.js'
import { redactLocation } from '../lib/redact.js'
import { noShards, openStore, resolveShard, shardLabel } from './location.js'
import { formatBytes, formatCount, out, textTable } from './output.js'
import { PROGRESS_OPTION, type Progress, progressShown, startProgress } from './progress.js'

interface InspectOptions {
  shard?: string
  json?: boolean
  progress?: boolean
}

/** The reads of one shard the progress bar counts (see `report`). */
const READS_PER_SHARD = 3

/** One shard as `inspect` reports it. */
interface ShardReport {
  shardId: string
  /** The shard's name; `null` for a shard only ever opened by id. */
  shardName: string | null
  epoch: number
  manifestVersion: number
  writerId: string
  /** The writer that claimed the epoch; `null` if the manifest predates holder records. */
  holder: { writerId: string; host: string; pid: number; epoch: number; claimedAt: string } | null
  /** How the shard's WAL is laid out: one file per entry, or records in segment files. */
  walLayout: 'segments' | 'objects'
  currentGeneration: number
  generations: Array<{ generation: number; path: string; rows: number | null; bytes: number | null }>
  /** WAL entries at or below this position are in flushed generations. */
  replayCursor: number
  /**
   * The WAL low-water mark (at most the replay cursor): entries at or below it may have been
   * removed by garbage collection; reading one is `TRUNCATED`. 0 while nothing may have been.
   */
  walLowWater: number
  /**
   * WAL entries still stored at or below the low-water mark: those collection has yet to
   * remove, and the fence sentinels (with the entry before each) it keeps for good.
   */
  walEntriesAtOrBelowLowWater: number
  /** The last WAL position that holds an entry (0: empty WAL). */
  walTip: number
  /** WAL entries after the replay cursor: what opening the shard replays. */
  walLag: number
  /** Generation folders the manifest does not list (uncommitted or abandoned flushes). */
  uncommittedGenerations: string[]
  /** What `memwal gc` with its defaults would remove now (a dry run: nothing was removed). */
  collectable: {
    walEntries: number
    manifestVersions: number
    generationDirs: string[]
    bytes: number
  }
}

async function report(store: ObjectStore, shard: ShardInfo, bar: Progress): Promise<ShardReport> {
  const reader = await ShardReader.open(store, { shardId: shard.id })
  const m: ShardManifest = await reader.manifest()
  bar.increment()
  const tailer = await WalTailer.open(store, { shardId: shard.id })
  await tailer.verify()
  const walTip = (await tailer.nextPosition()) - 1
  bar.increment()
  // A dry run: a listing each of the WAL (as `verify` above), the manifest versions and the
  // shard's folders, and a read of the few sentinel-sized entries at the mark. It answers both
  // "how much is still stored up to the mark" and "what would gc free", so they cannot disagree.
  const gc = await collectGarbage(store, { shardId: shard.id, dryRun: true })
  bar.increment()
  return {
    shardId: shard.id,
    shardName: m.shardName,
    epoch: m.writerEpoch,
    manifestVersion: m.version,
    writerId: m.writerId,
    holder: m.holder === null ? null : { ...m.holder, claimedAt: m.holder.claimedAt.toISOString() },
    walLayout: m.walLayout,
    currentGeneration: m.currentGeneration,
    generations: m.flushedGenerations.map((g) => ({ ...g })),
    replayCursor: m.replayAfterWalEntryPosition,
    walLowWater: m.walLowWater,
    walEntriesAtOrBelowLowWater: gc.walEntriesRemoved + gc.walEntriesKept,
    walTip,
    walLag: Math.max(0, walTip - m.replayAfterWalEntryPosition),
    uncommittedGenerations: await reader.uncommittedGenerations(),
    collectable: {
      walEntries: gc.walEntriesRemoved,
      manifestVersions: gc.manifestVersionsRemoved,
      generationDirs: gc.generationDirsRemoved,
      bytes: gc.bytesRemoved,
    },
  }
}

/** `3` → `3 entries`, `1, 'WAL'` → `1 WAL entry`. */
function entries(n: number, kind?: string): string {
  return `${formatCount(n)} ${kind === undefined ? '' : `${kind} `}${n === 1 ? 'entry' : 'entries'}`
}

function sum(values: Array<number | null>): number | null {
  return values.some((v) => v === null) ? null : values.reduce<number>((a, v) => a + (v ?? 0), 0)
}

function render(r: ShardReport): string {
  const lines = [
    `shard ${shardLabel({ id: r.shardId, name: r.shardName })}`,
    `  epoch ${r.epoch}, manifest version ${r.manifestVersion}, writer ${r.writerId || '-'}`,
    r.holder === null
      ? '  holder: unknown (the manifest does not record one)'
      : `  holder: writer ${r.holder.writerId} on host ${r.holder.host} pid ${r.holder.pid} ` +
        `(epoch ${r.holder.epoch}, claimed at ${r.holder.claimedAt})`,
    `  WAL layout: ${r.walLayout}`,
  ]
  const rows = sum(r.generations.map((g) => g.rows))
  const bytes = sum(r.generations.map((g) => g.bytes))
  lines.push(
    `  flushed generations: ${r.generations.length} (${formatCount(rows)} rows, ${formatBytes(bytes)} in memory); ` +
      `current generation ${r.currentGeneration}`,
  )
  if (r.generations.length > 0) {
    const table = textTable(
      ['generation', 'rows', 'in-memory size', 'file'],
      r.generations.map((g) => [
        String(g.generation),
        formatCount(g.rows),
        formatBytes(g.bytes),
        `${g.path}/data.parquet`,
      ]),
      100,
    )
    lines.push(...table.split('\n').map((l) => `    ${l}`))
  }
  lines.push(`  replay cursor: WAL position ${r.replayCursor} (entries up to it are in flushed generations)`)
  const kept = r.walEntriesAtOrBelowLowWater - r.collectable.walEntries
  lines.push(
    r.walLowWater === 0
      ? '  WAL low-water mark: 0 (no WAL entry may be garbage-collected yet)'
      : `  WAL low-water mark: position ${r.walLowWater} (entries up to it may be garbage-collected; ` +
          `${formatCount(r.walEntriesAtOrBelowLowWater)} still stored: ${formatCount(r.collectable.walEntries)} for ` +
          `\`memwal gc\` to remove, ${formatCount(kept)} kept for good to fence stale writers)`,
  )
  lines.push(`  WAL tip: position ${r.walTip}; lag: ${entries(r.walLag)} to replay on open`)
  for (const dir of r.uncommittedGenerations) {
    const fate = r.collectable.generationDirs.includes(dir)
      ? '`memwal gc` would remove it now'
      : '`memwal gc` removes it once it is abandoned and older than the grace period'
    lines.push(
      `  not in the manifest: ${dir}/ (a flush or compaction in progress, one abandoned by a writer that crashed or was fenced, or a generation compaction replaced; its rows are counted elsewhere, so do not read it; ${fate})`,
    )
  }
  const c = r.collectable
  const parts = [
    c.walEntries > 0 ? entries(c.walEntries, 'WAL') : '',
    c.manifestVersions > 0
      ? `${formatCount(c.manifestVersions)} manifest ${c.manifestVersions === 1 ? 'version' : 'versions'}`
      : '',
    c.generationDirs.length > 0
      ? `${formatCount(c.generationDirs.length)} generation ${c.generationDirs.length === 1 ? 'folder' : 'folders'}`
      : '',
  ].filter((p) => p !== '')
  lines.push(
    parts.length === 0
      ? '  garbage: none (`memwal gc` would remove nothing)'
      : `  garbage: \`memwal gc\` would remove ${parts.join(', ')} (${formatBytes(c.bytes)})`,
  )
  return lines.join('\n')
}

/** Registers `inspect` on the program. */
export function inspectCommand(program: Command): void {
  program
    .command('inspect')
    .summary('list the shards at a location and their state')
    .description(
      // Paragraphs without hard breaks: commander wraps them to the terminal's width.
      'For each shard at <location>: writer epoch and manifest version; the holder (the writer that claimed the ' +
        'epoch: writer id, host, pid, claim time); the WAL layout (objects: a file per entry; segments: records ' +
        'in preallocated segment files); flushed generations with their rows and in-memory bytes (as ' +
        'the manifest records them; the Parquet files are compressed); the replay cursor; the WAL low-water mark ' +
        '(entries up to it may be garbage-collected) and how many entries are still stored up to it; the WAL tip ' +
        'and the lag between the cursor and the tip (entries a new writer would replay); and what `memwal gc` ' +
        'would remove now (found by a dry run).\n' +
        'Shard folders with no manifest (a first open cut off before writing one; they hold nothing) are noted ' +
        'and skipped. Read-only: it claims nothing and never writes.',
    )
    .argument('<location>', 'a directory, file:///abs/path, or memory://NAME')
    .option('--shard <name or id>', 'only this shard')
    .option('--json', 'print the report as one JSON object on one line (NDJSON)')
    .option(...PROGRESS_OPTION)
    .action(async (location: string, options: InspectOptions) => {
      const store = openStore(location)
      let shards: ShardInfo[]
      let incomplete: string[] = []
      if (options.shard !== undefined) {
        shards = [await resolveShard(store, location, options.shard)]
      } else {
        shards = await store.listShards()
        incomplete = await store.listIncompleteShards()
        if (shards.length === 0 && incomplete.length === 0) throw noShards(location)
      }
      const reports: ShardReport[] = []
      const bar = startProgress('reads', shards.length * READS_PER_SHARD, progressShown(options.progress), {
        clearOnStop: true,
      })
      try {
        for (const shard of shards) reports.push(await report(store, shard, bar))
      } finally {
        bar.stop()
      }
      // What the user typed may carry credentials (`s3://KEY:SECRET@…`, `?sig=…`); it is only shown.
      const shown = redactLocation(location)
      if (options.json) {
        await out(`${JSON.stringify({ location: shown, shards: reports, incompleteShards: incomplete })}\n`)
        return
      }
      const head = `${shown}: ${reports.length} ${reports.length === 1 ? 'shard' : 'shards'}`
      const notes = incomplete.map(
        (id) => `incomplete shard folder ${id}: it has no manifest (a first open was cut off before writing one); it holds nothing and is skipped`,
      )
      await out(`${[head, ...reports.map(render), ...notes].join('\n\n')}\n`)
    })
}
