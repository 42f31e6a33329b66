// `memwal stats <location> [--shard NAME|ID] [--json] [--progress]`: how big a shard is and how
// deep its WAL runs, in a few numbers for dashboards and scripts (`memwal inspect` explains the
// state; this measures it). Read-only: it claims nothing and never writes.

import { statSync } from 'node:fs'
import { join } from 'node:path'

import type { Command } from 'commander'

import { ShardReader, WalTailer, type ObjectStore, type ShardInfo } from '../index.js'
import { redactLocation } from '../lib/redact.js'
import { localPath, openStore, resolveShard, shardLabel, shardsAt } from './location.js'
import { formatBytes, formatCount, out } from './output.js'
import { PROGRESS_OPTION, progressShown, startProgress } from './progress.js'
import { walBytesAbove, walFiles } from './wal-files.js'

interface StatsOptions {
  shard?: string
  json?: boolean
  progress?: boolean
}

/** One shard as `stats` reports it (`--json` prints one of these per line). */
export interface ShardStats {
  /** The location as given, with any credentials it carries masked (`***`). */
  location: string
  shardId: string
  /** `null` for a shard only ever opened by id. */
  shardName: string | null
  manifestVersion: number
  /** The latest claim of the shard: its epoch, and the writer that made it if recorded. */
  lastClaim: {
    epoch: number
    /** `null` if the manifest predates holder records. */
    holder: { writerId: string; host: string; pid: number; claimedAt: string } | null
  }
  /** The flushed generations the manifest lists. */
  generations: {
    count: number
    /** `null` if the manifest does not record the rows of one of them. */
    rows: number | null
  }
  /** The WAL above the low-water mark: what garbage collection may not remove. */
  wal: {
    /** Entries at or below it have their rows in flushed generations (0: none yet). */
    lowWater: number
    /** The first position above the mark (`lowWater + 1`). */
    firstPosition: number
    /** The last position that holds an entry (0: empty WAL). */
    tip: number
    /** Entries from `firstPosition` to `tip`. */
    depth: number
  }
  /**
   * Stored bytes; `null` where the CLI cannot list object sizes (anything but a local
   * directory).
   */
  bytes: {
    /** The Parquet files of the flushed generations. */
    generations: number | null
    /** The WAL files holding entries above the low-water mark (on the segment layout, whole segments). */
    wal: number | null
    total: number | null
  }
}

/** The size of `path`, or 0 if it is gone (garbage collection may remove it meanwhile). */
function sizeOf(path: string): number {
  try {
    return statSync(path).size
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw e
  }
}

/**
 * Bytes of the generation files and of the WAL files holding positions in `(lowWater, tip]`,
 * on a local store.
 */
function localBytes(
  root: string,
  shardId: string,
  walLayout: 'segments' | 'objects',
  generationPaths: string[],
  lowWater: number,
  tip: number,
): { generations: number; wal: number } {
  const shardDir = join(root, '_mem_wal', shardId)
  const generations = generationPaths.reduce((a, p) => a + sizeOf(join(shardDir, p, 'data.parquet')), 0)
  return { generations, wal: walBytesAbove(walFiles(root, shardId, walLayout), lowWater, tip) }
}

/** The stats of `shard` in `store` (opened from `location`). */
export async function shardStats(store: ObjectStore, location: string, shard: ShardInfo): Promise<ShardStats> {
  const reader = await ShardReader.open(store, { shardId: shard.id })
  const tailer = await WalTailer.open(store, { shardId: shard.id })
  try {
    const m = await reader.manifest()
    // The tailer's view of the WAL, read after the manifest: a collection in between only
    // raises the mark, so the depth is never counted from below what the manifest allows.
    const firstPosition = await tailer.firstPosition()
    const tip = (await tailer.nextPosition()) - 1
    const lowWater = firstPosition - 1
    const rows = m.flushedGenerations.some((g) => g.rows === null)
      ? null
      : m.flushedGenerations.reduce((a, g) => a + (g.rows ?? 0), 0)
    const root = localPath(location)
    const local =
      root === null
        ? null
        : localBytes(
            root,
            shard.id,
            m.walLayout,
            m.flushedGenerations.map((g) => g.path),
            lowWater,
            tip,
          )
    return {
      location: redactLocation(location),
      shardId: shard.id,
      shardName: m.shardName,
      manifestVersion: m.version,
      lastClaim: {
        epoch: m.writerEpoch,
        holder:
          m.holder === null
            ? null
            : {
                writerId: m.holder.writerId,
                host: m.holder.host,
                pid: m.holder.pid,
                claimedAt: m.holder.claimedAt.toISOString(),
              },
      },
      generations: { count: m.flushedGenerations.length, rows },
      wal: { lowWater, firstPosition, tip, depth: Math.max(0, tip - lowWater) },
      bytes: {
        generations: local?.generations ?? null,
        wal: local?.wal ?? null,
        total: local === null ? null : local.generations + local.wal,
      },
    }
  } finally {
    await tailer.close()
    await reader.close()
  }
}

function plural(n: number, one: string, many: string): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`
}

/** The text form: one label column, aligned. */
export function renderStats(s: ShardStats): string {
  const claim =
    s.lastClaim.holder === null
      ? `epoch ${s.lastClaim.epoch} (the manifest does not record the holder)`
      : `epoch ${s.lastClaim.epoch} by writer ${s.lastClaim.holder.writerId} on host ${s.lastClaim.holder.host} ` +
        `pid ${s.lastClaim.holder.pid}, at ${s.lastClaim.holder.claimedAt}`
  const w = s.wal
  const positions = w.depth === 0 ? 'none' : `positions ${w.firstPosition}..${w.tip}`
  const size =
    s.bytes.total === null
      ? 'unknown (sizes are read for local directories only)'
      : `${formatBytes(s.bytes.total)} (generation files ${formatBytes(s.bytes.generations)}, ` +
        `WAL above the low-water mark ${formatBytes(s.bytes.wal)})`
  const rows: Array<[string, string]> = [
    ['manifest version', String(s.manifestVersion)],
    ['last claim', claim],
    ['generations', `${formatCount(s.generations.count)} (${formatCount(s.generations.rows)} rows)`],
    [
      'WAL depth',
      `${plural(w.depth, 'entry', 'entries')} above the low-water mark (${positions}; ` +
        `low-water mark ${w.lowWater}, tip ${w.tip})`,
    ],
    ['size', size],
  ]
  const width = Math.max(...rows.map(([label]) => label.length))
  return [
    `shard ${shardLabel({ id: s.shardId, name: s.shardName })}`,
    ...rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`),
  ].join('\n')
}

/** Registers `stats` on the program. */
export function statsCommand(program: Command): void {
  program
    .command('stats')
    .summary("a shard's size, WAL depth, generations and last claim")
    .description(
      // One paragraph: commander wraps it to the terminal's width.
      'For the shard --shard (default: every shard at <location>): its size (bytes of the generation files, of ' +
        'the WAL entries above the low-water mark, and their total; local directories only, unknown elsewhere), ' +
        'its WAL depth (entries between the low-water mark and the tip, and their positions), its flushed ' +
        'generations (count and rows), its last claim (epoch; holder: writer id, host, pid, claim time) and its ' +
        'manifest version. --json prints one JSON object per shard, one per line (NDJSON). Read-only.',
    )
    .argument('<location>', 'a directory, file:///abs/path, memory://NAME, or an object store URI')
    .option('--shard <name or id>', 'only this shard (default: every shard)')
    .option('--json', 'one JSON object per shard, one per line (NDJSON)')
    .option(...PROGRESS_OPTION)
    .action(async (location: string, options: StatsOptions) => {
      const store = openStore(location)
      const shards =
        options.shard === undefined
          ? await shardsAt(store, location)
          : [await resolveShard(store, location, options.shard)]
      const bar = startProgress('shards read', shards.length, progressShown(options.progress), { clearOnStop: true })
      const all: ShardStats[] = []
      try {
        for (const shard of shards) {
          all.push(await shardStats(store, location, shard))
          bar.increment()
        }
      } finally {
        bar.stop()
      }
      if (options.json) {
        await out(all.map((s) => `${JSON.stringify(s)}\n`).join(''))
        return
      }
      await out(`${all.map(renderStats).join('\n\n')}\n`)
    })
}
