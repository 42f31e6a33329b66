// `memwal gc <location> [--shard NAME|ID] [--dry-run] [--keep-manifest-versions N] [--grace-ms MS] [--json]`:
// garbage collection of one shard on demand, through the public `collectGarbage`. It deletes,
// unlike the read-only commands, but writes nothing and claims nothing, so it is safe beside a
// running writer (the rules and why fencing holds: crates/memwal-core/src/gc.rs).

import type { Command } from 'commander'

import { type GcReport, type ShardInfo, collectGarbage } from '../index.js'
import { SHARD_OPTION, openStore, resolveShard, shardLabel } from './location.js'
import { integerAtLeast } from './options.js'
import { formatBytes, formatCount, out } from './output.js'

/**
 * The API's defaults (`GcOptions`), passed explicitly so that the summary can say what it
 * kept ("the newest 10") and `--help` shows them.
 */
const DEFAULT_KEEP_MANIFEST_VERSIONS = 10
const DEFAULT_GRACE_MS = 600_000

interface GcCliOptions {
  shard: string
  dryRun?: boolean
  keepManifestVersions: number
  graceMs: number
  json?: boolean
}

/** `600000` → `10 min`: the grace period as people say it. */
function formatDuration(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1_000, 's'],
  ]
  for (const [size, unit] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`
  }
  return `${formatCount(ms)} ms`
}

function plural(n: number, one: string, many: string): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`
}

/** The summary people read: what went (or would go), what stayed and why. */
function render(shard: ShardInfo, r: GcReport, o: GcCliOptions): string {
  // A dry run reports the same counts; only the verbs change.
  const removed = r.dryRun ? 'would remove' : 'removed'
  const kept = r.dryRun ? 'would keep' : 'kept'
  const lines = [
    `shard ${shardLabel(shard)}: ${r.dryRun ? 'dry run, nothing was removed' : 'garbage collected'} ` +
      `(manifest version ${r.manifestVersion}, WAL low-water mark ${r.lowWater})`,
  ]
  if (r.lowWater === 0) {
    lines.push('  WAL: nothing to collect yet (the low-water mark is 0: no generation commit has raised it)')
  } else {
    lines.push(
      `  WAL: ${removed} ${plural(r.walEntriesRemoved, 'entry', 'entries')} at or below position ${r.lowWater} ` +
        '(their rows are in flushed generations)',
    )
  }
  if (r.walSegmentsRemoved > 0) {
    lines.push(
      `  WAL: ${removed} ${plural(r.walSegmentsRemoved, 'segment', 'segments')} holding them ` +
        "(recycled as spares for the writer's next segments, or deleted)",
    )
  }
  if (r.walEntriesKept > 0) {
    lines.push(
      `  WAL: ${kept} ${plural(r.walEntriesKept, 'entry', 'entries')} at or below the mark to fence stale writers ` +
        '(fence sentinels, and the entry just before each, are kept for good: a stale writer can never append past one)',
    )
  }
  const oldestKept = Math.max(1, r.manifestVersion - o.keepManifestVersions + 1)
  lines.push(
    `  manifest: ${removed} ${plural(r.manifestVersionsRemoved, 'version', 'versions')}, keeping the newest ` +
      `${o.keepManifestVersions} (version ${oldestKept} and later)`,
  )
  if (r.generationDirsRemoved.length === 0 && r.generationDirsKept.length === 0) {
    lines.push('  generation folders: none outside the manifest')
  }
  if (r.generationDirsRemoved.length > 0) {
    lines.push(
      `  generation folders: ${removed} ${plural(r.generationDirsRemoved.length, 'folder', 'folders')} the manifest ` +
        `does not list, abandoned for longer than the grace period (${formatDuration(o.graceMs)}):`,
    )
    lines.push(...r.generationDirsRemoved.map((d) => `    ${d}/`))
  }
  if (r.generationDirsKept.length > 0) {
    lines.push(
      `  generation folders: ${kept} ${plural(r.generationDirsKept.length, 'folder', 'folders')} the manifest does not ` +
        `list, because a flush may still be writing it or it is newer than the grace period (${formatDuration(o.graceMs)}); ` +
        'a later run removes what has been abandoned:',
    )
    lines.push(...r.generationDirsKept.map((d) => `    ${d}/`))
  }
  lines.push(`  ${r.dryRun ? 'would free' : 'freed'} ${formatBytes(r.bytesRemoved)}`)
  return `${lines.join('\n')}\n`
}

/** Registers `gc` on the program. */
export function gcCommand(program: Command): void {
  program
    .command('gc')
    .summary('remove what a shard no longer needs (garbage collection)')
    .description(
      // One paragraph: commander wraps it to the terminal's width.
      'Garbage-collects one shard, as a writer does in the background: removes WAL entries at or below the ' +
        "manifest's low-water mark (their rows are in flushed generations), except fence sentinels and the entry " +
        'just before each (they keep stale writers fenced), or on a segment-layout shard the WAL segments wholly ' +
        'at or below the mark (recycled as spares or deleted); manifest versions beyond the newest ' +
        '--keep-manifest-versions; and generation folders the manifest does not list, of a generation it has ' +
        'passed, once their newest file is older than --grace-ms. It writes nothing and claims nothing, so it is ' +
        'safe while a writer runs, from any machine; a run cut short is finished by the next one. ' +
        '--dry-run shows what would be removed.',
    )
    .argument('<location>', 'a directory, file:///abs/path, memory://NAME, or an object store URI')
    .option(...SHARD_OPTION)
    .option('--dry-run', 'report what would be removed, and remove nothing')
    .option(
      '--keep-manifest-versions <n>',
      'manifest versions to keep, newest first (at least 2)',
      integerAtLeast(2),
      DEFAULT_KEEP_MANIFEST_VERSIONS,
    )
    .option(
      '--grace-ms <ms>',
      'how old an abandoned generation folder must be before it is removed, in milliseconds',
      integerAtLeast(0),
      DEFAULT_GRACE_MS,
    )
    .option('--json', 'print the report as one JSON object on one line (NDJSON)')
    .action(async (location: string, options: GcCliOptions) => {
      const store = openStore(location)
      const shard = await resolveShard(store, location, options.shard)
      const report = await collectGarbage(store, {
        shardId: shard.id,
        dryRun: options.dryRun === true,
        keepManifestVersions: options.keepManifestVersions,
        graceMs: options.graceMs,
      })
      if (options.json) {
        const json = {
          shardId: shard.id,
          shardName: shard.name,
          keepManifestVersions: options.keepManifestVersions,
          graceMs: options.graceMs,
          ...report,
        }
        await out(`${JSON.stringify(json)}\n`)
        return
      }
      await out(render(shard, report, options))
    })
}
