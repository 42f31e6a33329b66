// Garbage collection on demand, for any shard at a location (what `memwal gc` runs). A writer
// also collects in the background (`ShardWriterOptions.gc`) and on demand
// (`ShardWriter.collectGarbage`); the rules, and why fencing stays sound, are the core's
// (`crates/memwal-core/src/gc.rs`).

import type { GcReport } from '../native.js'
import { withDeadline } from './deadline.js'
import { call } from './native-call.js'
import { type GcOptions, gcOptionsOf } from './options.js'
import { type Location, nativeStore } from './store.js'

export type { GcReport } from '../native.js'

/**
 * Removes what a shard no longer needs: WAL entries whose rows are in committed generations
 * (never a fence sentinel, nor the entry just before one; on a segment-layout shard, the WAL
 * segments wholly at or below the low-water mark, recycled as spares or deleted), manifest
 * versions beyond the newest `keepManifestVersions`, and generation folders of abandoned
 * flushes older than `graceMs`.
 * Safe while a writer runs, and from any process: it writes nothing, and removes only what the
 * latest manifest allows. A rerun after a failure continues where it stopped.
 *
 * @param location - the store, or its location string
 * @param options - the shard (`shard`, `shardId`, or `'default'`) and what may be removed
 * @returns what was removed (with `dryRun`, what would be)
 * @throws {InvalidArgumentError} for a bad option, or if there is no such shard at the location
 * @throws {CorruptError} if the shard has WAL entries or generations but no manifest (its
 * manifest folder was deleted): restore the folder from a backup
 * @throws {IoError} if the store fails (what was removed stays removed)
 *
 * @example
 * ```ts
 * const report = await collectGarbage('./data', { shard: 'events' })
 * console.log(`${report.walEntriesRemoved} WAL entries, ${report.bytesRemoved} bytes removed`)
 * ```
 */
export async function collectGarbage(location: Location, options?: GcOptions): Promise<GcReport> {
  const { shard, storage, deadline, gc } = gcOptionsOf('collectGarbage', options)
  const store = nativeStore(location, storage)
  return withDeadline('collectGarbage', deadline, () => call(() => store.collectGarbage(shard, gc)))
}
