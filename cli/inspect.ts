// `memwal inspect <location> [--shard NAME|ID] [--json]`: what a store holds, shard by shard, as a
// new writer would find it (read-only: it claims nothing).

import type { Command } from 'commander'

import { ShardReader, WalTailer, type ObjectStore, type ShardInfo, type ShardManifest } from '../index.js'
import { noShards, openStore, resolveShard, shardLabel } from './location.js'
import { formatBytes, formatCount, out, textTable } from './output.js'

interface InspectOptions {
  shard?: string
  json?: boolean
}

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
  currentGeneration: number
  generations: Array<{ generation: number; path: string; rows: number | null; bytes: number | null }>
  /** WAL entries at or below this position are in flushed generations. */
  replayCursor: number
  /** The last WAL position that holds an entry (0: empty WAL). */
  walTip: number
  /** WAL entries after the replay cursor: what opening the shard replays. */
  walLag: number
  /** Generation folders the manifest does not list (uncommitted or abandoned flushes). */
  uncommittedGenerations: string[]
}

async function report(store: ObjectStore, shard: ShardInfo): Promise<ShardReport> {
  const reader = await ShardReader.open(store, { shardId: shard.id })
  const m: ShardManifest = await reader.manifest()
  const tailer = await WalTailer.open(store, { shardId: shard.id })
  await tailer.verify()
  const walTip = (await tailer.nextPosition()) - 1
  return {
    shardId: shard.id,
    shardName: m.shardName,
    epoch: m.writerEpoch,
    manifestVersion: m.version,
    writerId: m.writerId,
    holder: m.holder === null ? null : { ...m.holder, claimedAt: m.holder.claimedAt.toISOString() },
    currentGeneration: m.currentGeneration,
    generations: m.flushedGenerations.map((g) => ({ ...g })),
    replayCursor: m.replayAfterWalEntryPosition,
    walTip,
    walLag: Math.max(0, walTip - m.replayAfterWalEntryPosition),
    uncommittedGenerations: await reader.uncommittedGenerations(),
  }
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
  lines.push(
    `  WAL tip: position ${r.walTip}; lag: ${r.walLag} ${r.walLag === 1 ? 'entry' : 'entries'} to replay on open`,
  )
  for (const dir of r.uncommittedGenerations) {
    lines.push(
      `  not in the manifest: ${dir}/ (a flush in progress, or abandoned by a writer that crashed or was fenced; its rows are counted elsewhere, so do not read it)`,
    )
  }
  return lines.join('\n')
}

/** Registers `inspect` on the program. */
export function inspectCommand(program: Command): void {
  program
    .command('inspect')
    .summary('list the shards at a location and their state')
    .description(
      'For each shard at <location>: writer epoch and manifest version; the holder (the writer that claimed the\n' +
        'epoch: writer id, host, pid, claim time); flushed generations with their rows and\n' +
        'in-memory bytes (as the manifest records them; the Parquet files are compressed); the replay cursor;\n' +
        'the WAL tip and the lag between them (entries a new writer would replay).\n' +
        'Shard folders with no manifest (a first open cut off before writing one; they hold nothing) are\n' +
        'noted and skipped. Read-only: it claims nothing and never writes.',
    )
    .argument('<location>', 'a directory, file:///abs/path, or memory://NAME')
    .option('--shard <name or id>', 'only this shard')
    .option('--json', 'print JSON instead of text')
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
      for (const shard of shards) reports.push(await report(store, shard))
      if (options.json) {
        await out(`${JSON.stringify({ location, shards: reports, incompleteShards: incomplete }, null, 2)}\n`)
        return
      }
      const head = `${location}: ${reports.length} ${reports.length === 1 ? 'shard' : 'shards'}`
      const notes = incomplete.map(
        (id) => `incomplete shard folder ${id}: it has no manifest (a first open was cut off before writing one); it holds nothing and is skipped`,
      )
      await out(`${[head, ...reports.map(render), ...notes].join('\n\n')}\n`)
    })
}
