// `memwal wal <location> [--shard NAME|ID] [--from N] [--limit M] [--json]`: a shard's WAL entries by
// position, as a change-data-capture reader (WalTailer) sees them. Read-only.

import type { Command } from 'commander'

import { TruncatedError, WalTailer } from '../index.js'
import { CliError, Exit } from './exit-codes.js'
import { SHARD_OPTION, openStore, resolveShard, shardLabel } from './location.js'
import { integerAtLeast } from './options.js'
import { out, textTable } from './output.js'

interface WalOptions {
  shard: string
  /** Absent: from the oldest entry, or where garbage collection left the WAL starting. */
  from?: number
  limit?: number
  json?: boolean
}

/** One WAL entry as `wal` reports it. */
interface EntryReport {
  position: number
  epoch: number
  batches: number
  rows: number
  sentinel: boolean
}

/** What `wal` lists: the entries from `from`, and where the WAL starts and ends. */
interface Listing {
  from: number
  /** The first position collection has not removed (the low-water mark plus one). */
  firstPosition: number
  /** The last position that holds an entry. */
  walTip: number
  entries: EntryReport[]
}

/**
 * How often a listing without --from starts over because a collection running meanwhile
 * removed where it was. Each retry starts at the new first position, so only a collector
 * that keeps raising the mark while the entries are read can exhaust this.
 */
const RESTARTS = 3

/** The error of a requested position that garbage collection has removed. */
function collected(shard: string, position: number, firstAvailable: number): CliError {
  return new CliError(
    Exit.USAGE,
    `WAL position ${position} of shard ${shard} was removed by garbage collection (its rows are in flushed ` +
      `generations: \`memwal scan\` or \`memwal files\` read them); the first available position is ` +
      `${firstAvailable}. Run again with --from ${firstAvailable}, or without --from`,
  )
}

/**
 * The entries from `options.from`, or by default from position 1 while nothing there was
 * collected: entries at or below the low-water mark stay readable until a collection removes
 * them, and are worth showing until then. Once one is gone, the listing starts over at the
 * first position collection has not removed, so that it never has a hole in it.
 */
async function list(tailer: WalTailer, options: WalOptions, label: string): Promise<Listing> {
  let from = options.from ?? 1
  for (let attempt = 1; ; attempt++) {
    const firstPosition = await tailer.firstPosition()
    const next = await tailer.nextPosition()
    const last = options.limit === undefined ? next - 1 : Math.min(next - 1, from + options.limit - 1)
    const entries: EntryReport[] = []
    let position = from
    try {
      for (; position <= last; position++) {
        const e = await tailer.read(position)
        if (e === null) break
        entries.push({
          position: e.position,
          epoch: e.writerEpoch,
          batches: e.table?.batches.length ?? 0,
          rows: e.table?.numRows ?? 0,
          sentinel: e.isSentinel,
        })
      }
    } catch (e) {
      if (!(e instanceof TruncatedError)) throw e
      // An explicit --from asked for this position: say that it is gone, and where to start.
      if (options.from !== undefined || attempt >= RESTARTS) throw collected(label, position, e.firstAvailable)
      from = e.firstAvailable
      continue
    }
    return { from, firstPosition, walTip: next - 1, entries }
  }
}

/** Registers `wal` on the program. */
export function walCommand(program: Command): void {
  program
    .command('wal')
    .summary("list a shard's WAL entries")
    .description(
      // One paragraph: commander wraps it to the terminal's width.
      "Lists a shard's WAL entries from position --from (1-based; default: the oldest entry, or the first " +
        'position garbage collection has not removed): position, the epoch of the writer that appended it, its ' +
        'record batches and rows, and whether it is a fence sentinel (written by a new writer when it takes the ' +
        'shard over; it holds no rows). Entries at or below the low-water mark (see `memwal inspect`) have their ' +
        'rows in flushed generations and are removed by garbage collection; asking for one that was removed is ' +
        'an error that names the first available position. Read-only.',
    )
    .argument('<location>', 'a directory, file:///abs/path, or memory://NAME')
    .option(...SHARD_OPTION)
    .option('--from <n>', 'first position (default: the oldest one still stored)', integerAtLeast(1))
    .option('--limit <m>', 'at most this many entries (default: all)', integerAtLeast(1))
    .option('--json', 'print the listing as one JSON object on one line (NDJSON)')
    .action(async (location: string, options: WalOptions) => {
      const store = openStore(location)
      const shard = await resolveShard(store, location, options.shard)
      const tailer = await WalTailer.open(store, { shardId: shard.id })
      const { from, firstPosition, walTip, entries } = await list(tailer, options, shardLabel(shard))
      if (options.json) {
        await out(
          `${JSON.stringify({ shardId: shard.id, shardName: shard.name, firstPosition, walTip, entries })}\n`,
        )
        return
      }
      const rows = entries.map((e) => [
        String(e.position),
        String(e.epoch),
        String(e.batches),
        String(e.rows),
        e.sentinel ? 'yes' : '',
      ])
      await out(`${textTable(['position', 'epoch', 'batches', 'rows', 'sentinel'], rows)}\n`)
      const shown = entries.length === 0 ? 'no entries' : `positions ${from}..${from + entries.length - 1}`
      await out(`(${shown}; WAL tip: position ${walTip})\n`)
      if (firstPosition > 1) {
        await out(
          `(low-water mark: position ${firstPosition - 1}; entries up to it are in flushed generations, and garbage collection removes them)\n`,
        )
      }
    })
}
