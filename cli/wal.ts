// `memwal wal <location> [--shard NAME|ID] [--from N] [--limit M] [--json]`: a shard's WAL entries by
// position, as a change-data-capture reader (WalTailer) sees them. Read-only.

import type { Command } from 'commander'

import { WalTailer } from '../index.js'
import { SHARD_OPTION, openStore, resolveShard } from './location.js'
import { integerAtLeast } from './options.js'
import { out, textTable } from './output.js'

interface WalOptions {
  shard: string
  from: number
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

/** Registers `wal` on the program. */
export function walCommand(program: Command): void {
  program
    .command('wal')
    .summary("list a shard's WAL entries")
    .description(
      "Lists a shard's WAL entries from position --from (1-based): position, the epoch of the writer that\n" +
        'appended it, its record batches and rows, and whether it is a fence sentinel (written by a new writer\n' +
        'when it takes the shard over; it holds no rows). Read-only.',
    )
    .argument('<location>', 'a directory, file:///abs/path, or memory://NAME')
    .option(...SHARD_OPTION)
    .option('--from <n>', 'first position', integerAtLeast(1), 1)
    .option('--limit <m>', 'at most this many entries (default: all)', integerAtLeast(1))
    .option('--json', 'print JSON instead of a table')
    .action(async (location: string, options: WalOptions) => {
      const store = openStore(location)
      const shard = await resolveShard(store, location, options.shard)
      const tailer = await WalTailer.open(store, { shardId: shard.id })
      const next = await tailer.nextPosition()
      const last = options.limit === undefined ? next - 1 : Math.min(next - 1, options.from + options.limit - 1)
      const entries: EntryReport[] = []
      for (let position = options.from; position <= last; position++) {
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
      if (options.json) {
        await out(`${JSON.stringify({ shardId: shard.id, shardName: shard.name, walTip: next - 1, entries }, null, 2)}\n`)
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
      const shown =
        entries.length === 0 ? 'no entries' : `positions ${options.from}..${options.from + entries.length - 1}`
      await out(`(${shown}; WAL tip: position ${next - 1})\n`)
    })
}
