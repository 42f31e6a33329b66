// Options of the open calls, and their checks. Each options interface has a table with one
// entry per option, typed `Record<keyof Interface, OptionKind>`: an option added to the
// interface does not compile until it has an entry, and the entry drives the unknown-key
// check and the type check. Writer options then go to the core under these same names
// (`WriterConfig::set_host_option`, the core's one list of them), which checks the values.

import { describeValue, requireString, truncate } from './arguments.js'
import type { ArrowSchema } from './arrow-schema.js'
import { schemaBytes } from './encoding.js'
import { type Deadline, deadlineOf } from './deadline.js'
import { InvalidArgumentError } from './errors.js'
import { type StorageOptions, storageOf } from './store.js'

/** Options of {@link ShardWriter.open}. Sizes are bytes, durations milliseconds. */
export interface ShardWriterOptions {
  /**
   * The shard's schema: an apache-arrow `Schema` from any copy of apache-arrow (version 15 or
   * newer). Every put must match it (field names, types, nullability).
   */
  schema: ArrowSchema
  /**
   * The shard to write, by name: every open of the same name, from any process, reaches the
   * same shard (its id is derived from the name, and the manifest records the name). Reopening
   * a shard takes it over from its previous writer and replays its WAL. A name is 1 to 200
   * bytes, with no control characters, and is not a UUID. Pass `shard` or `shardId`, not both.
   * @defaultValue `'default'` (when `shardId` is not given either), so reopening a location
   * reopens its shard
   */
  shard?: string
  /**
   * The shard to write, by id (a UUID), for shards created by id (as Lance's MemWAL names
   * them). Pass `shard` or `shardId`, not both.
   * @defaultValue none: the shard is chosen by `shard`
   */
  shardId?: string
  /**
   * `true`: `put` resolves once its rows are in a persisted WAL entry. `false`: once they are in
   * memory; the WAL is written by the ticker, the size trigger, `flush()` and `close()`.
   * @defaultValue true
   */
  durableWrite?: boolean
  /**
   * `false` selects WAL-only mode: puts go to the WAL only (no scan, no generations, no replay);
   * batch positions are writer-lifetime.
   * @defaultValue true
   */
  enableMemtable?: boolean
  /**
   * Non-durable size trigger: a WAL append is queued each time this many bytes accumulate in
   * the active MemTable. 0 disables it.
   * @defaultValue 10485760 (10 MiB)
   */
  maxWalBufferSize?: number
  /**
   * Background ticker period: pending non-durable rows are appended to the WAL at least this
   * often. `null` disables the ticker.
   * @defaultValue 100
   */
  maxWalFlushIntervalMs?: number | null
  /**
   * Retries of a failing WAL append at the same WAL position before the writer fences itself with
   * `PersistenceFailure`.
   * @defaultValue 3
   */
  maxWalPersistRetries?: number
  /**
   * Base of the exponential retry backoff (doubles per retry, capped at 5 s).
   * @defaultValue 50
   */
  walPersistRetryBaseDelayMs?: number
  /**
   * How the shard's WAL is laid out on storage. The shard's manifest records its layout when
   * the shard is created, and the shard keeps it:
   *
   * - `'segments'`: a log of preallocated segment files, for a local disk. A group commit
   *   costs one `fdatasync` (the objects layout needs about three on a disk), so durable puts
   *   are faster, alone and under concurrency. Only on a local directory, and not on a network
   *   file system (NFS, SMB, FUSE network mounts): a writer checks for a newer claim in this
   *   host's page cache, which does not see a claim made on another host.
   * - `'objects'`: one object per WAL entry, created only if absent. The layout of object
   *   stores (`s3://`, `gs://`, `az://`, `memory://`), and the one Lance's MemWAL reads and
   *   writes, so choose it for a shard that Lance also opens.
   *
   * Asking for the other layout than an existing shard's rejects with an
   * {@link InvalidArgumentError} (as does `'segments'` on an object store or a network file
   * system); open the shard without `walLayout` to keep its layout. A shard changes layout
   * only by converting its WAL while no writer has it open (`memwal wal convert`, coming).
   * @defaultValue the layout an existing shard records; `'objects'` for a new shard
   */
  walLayout?: 'segments' | 'objects'
  /**
   * Size of each WAL segment file of the `'segments'` layout, in bytes, from 65536 (64 KiB) to
   * 1073741824 (1 GiB). A segment is allocated ahead of use, so this is the disk space a
   * shard's WAL holds at least once it has rotated, and a rotation (a sync and a rename) comes
   * once per this many bytes written. A WAL entry larger than this gets a segment of its own
   * size. It applies to segments created from this open on, and has no effect on the
   * `'objects'` layout.
   * @defaultValue 67108864 (64 MiB)
   */
  walSegmentBytes?: number
  /**
   * Freeze the active MemTable (and flush it as a Parquet generation) at this estimated size.
   * The estimate is of heap bytes, not data bytes: it counts each batch's fixed costs (about
   * 1.3 KiB for a 1-row batch of three columns), so MemTables of small puts stay within it.
   * @defaultValue 268435456 (256 MiB)
   */
  maxMemtableSize?: number
  /**
   * Batches a MemTable holds; it freezes when full. A single put may not carry more.
   * @defaultValue 8000
   */
  maxMemtableBatches?: number
  /**
   * Seal the active MemTable, flushing it as a Parquet generation, once it has held rows for
   * this long, however small it is: a quiet shard's rows then reach Parquet and its replay
   * stays short. `null` seals by size only.
   * @defaultValue 3600000 (one hour)
   */
  maxMemtableAgeMs?: number | null
  /**
   * Backpressure: puts wait (never fail) while unflushed MemTables hold more than this.
   * @defaultValue 1073741824 (1 GiB)
   */
  maxUnflushedMemtableBytes?: number
  /**
   * What a put of plain-object rows does with a key that is not a field of the shard's schema
   * (at any depth: a nested object's keys are checked against its Struct's fields). `false`:
   * the put rejects with an {@link InvalidArgumentError} naming the key, so a misspelt field is
   * never silently stored as null. `true`: such keys are skipped, for rows that carry more than
   * the shard stores. Arrow data (Tables, RecordBatches, IPC bytes) is checked against the
   * schema either way.
   * @defaultValue false
   */
  ignoreUnknownFields?: boolean
  /**
   * How long, in milliseconds after a put with a `requestId` was accepted, a retry with the
   * same id is still answered with the first put's result instead of writing again, also after
   * the rows were flushed to a generation, a reopen or a failover (the ids of a flushed
   * generation are kept in its `request_ids.json`). Regardless of this, an id whose rows are
   * not yet in a flushed generation is always remembered (its WAL entry carries it). 0 = only
   * until the rows are in a flushed generation. Each remembered id costs about 200 bytes of
   * memory plus its length, and opening reads one small object per generation flushed within
   * the window. In WAL-only mode ids are remembered by the writer that took the put only.
   * See {@link PutOptions.requestId}.
   * @defaultValue 600000 (10 minutes)
   */
  requestIdRetentionMs?: number
  /**
   * Whether the writer collects garbage in the background, every `gcIntervalMs`: WAL entries
   * whose rows are in committed generations, manifest versions beyond the newest
   * `gcKeepManifestVersions`, and generation folders of abandoned flushes older than
   * `gcGraceMs`. Fencing stays sound while it runs (fence sentinels are never collected; see
   * the README, "Running a shard for months"). With `false`, nothing is removed unless asked:
   * {@link ShardWriter.collectGarbage}, {@link collectGarbage}, `memwal gc`.
   * @defaultValue true
   */
  gc?: boolean
  /**
   * Milliseconds between background collections (1 to 86,400,000).
   * @defaultValue 60000
   */
  gcIntervalMs?: number
  /**
   * Manifest versions collection keeps, newest first (at least 2).
   * @defaultValue 10
   */
  gcKeepManifestVersions?: number
  /**
   * How old, in milliseconds, an abandoned generation folder (of a flush that lost to a
   * committed generation) must be before collection removes it (up to 7 days).
   * @defaultValue 600000 (10 minutes)
   */
  gcGraceMs?: number
  /**
   * Whether the writer merges small generations: after a generation flush that leaves more
   * than `compactionMaxGenerations`, the oldest run of generations smaller than half of
   * `compactionTargetBytes` (up to that many bytes in all) becomes one generation, committed
   * atomically (a reader sees the old files or the new one, never both). A run at the newest
   * end in which one generation outweighs all the others together waits (the smaller ones
   * merge among themselves meanwhile) until they outweigh it, so that a large file is not
   * rewritten at every flush to absorb a small one. Generations whose
   * request ids are still within `requestIdRetentionMs` wait for it to pass. The replaced files
   * are removed by garbage collection after `gcGraceMs`.
   * @defaultValue true
   */
  compaction?: boolean
  /**
   * How many generations a shard may list before compaction merges small ones (at least 2).
   * @defaultValue 16
   */
  compactionMaxGenerations?: number
  /**
   * The generation size compaction aims for, in estimated in-memory bytes (the Parquet file is
   * smaller).
   * @defaultValue 134217728 (128 MiB)
   */
  compactionTargetBytes?: number
  /**
   * Options of an object store location given as a string (`s3://`, `gs://`, `az://`):
   * region, endpoint, credentials… See {@link StorageOptions}.
   * @defaultValue none (configuration from the environment)
   */
  storage?: StorageOptions
  /**
   * Aborts the open: it rejects with an {@link AbortError} (`cause`: the signal's reason) at
   * once, also while it waits on the store. A writer that the open still claims afterwards is
   * aborted, so nothing keeps it; the shard's next writer fences it as usual.
   * @defaultValue none
   */
  signal?: AbortSignal
  /**
   * Milliseconds after which the open rejects with a {@link TimeoutError} (as `signal` does;
   * both may be given). The object store's own budgets (see {@link StorageOptions}) apply
   * regardless.
   * @defaultValue none (only the object store's budgets)
   */
  timeoutMs?: number
}

/**
 * What an option's value must be: a JavaScript type (`'number or null'`: a number, or `null`
 * to switch the feature off), or `'schema'`/`'storage'`, which are converted on their own, or
 * `'deadline'`: an option of the call itself (`signal`, `timeoutMs`), checked by `deadlineOf`,
 * or `'wal layout'`: one of the layout names.
 */
type OptionKind =
  | 'schema'
  | 'storage'
  | 'deadline'
  | 'shard name'
  | 'shard id'
  | 'wal layout'
  | 'string'
  | 'boolean'
  | 'number'
  | 'number or null'

/** Every writer option, in the order the unknown-option message lists them. */
const WRITER_OPTIONS: Record<keyof ShardWriterOptions, OptionKind> = {
  schema: 'schema',
  shard: 'shard name',
  shardId: 'shard id',
  storage: 'storage',
  maxWalFlushIntervalMs: 'number or null',
  maxWalBufferSize: 'number',
  maxWalPersistRetries: 'number',
  walPersistRetryBaseDelayMs: 'number',
  walLayout: 'wal layout',
  walSegmentBytes: 'number',
  maxMemtableSize: 'number',
  maxMemtableBatches: 'number',
  maxMemtableAgeMs: 'number or null',
  maxUnflushedMemtableBytes: 'number',
  requestIdRetentionMs: 'number',
  gcIntervalMs: 'number',
  gcKeepManifestVersions: 'number',
  gcGraceMs: 'number',
  compactionMaxGenerations: 'number',
  compactionTargetBytes: 'number',
  durableWrite: 'boolean',
  compaction: 'boolean',
  gc: 'boolean',
  enableMemtable: 'boolean',
  ignoreUnknownFields: 'boolean',
  signal: 'deadline',
  timeoutMs: 'deadline',
}

/**
 * Throws an {@link InvalidArgumentError} unless `v` names a WAL layout. Checked here so that the
 * message can say what each layout is for, which is what a caller choosing between them needs.
 */
function requireWalLayout(v: unknown): asserts v is 'segments' | 'objects' {
  if (v !== 'segments' && v !== 'objects') {
    throw new InvalidArgumentError(
      `invalid option walLayout: must be 'segments' (a local disk) or 'objects' (an object store, or a shard Lance also opens), got ${describeValue(v)}; leave it out to keep an existing shard's layout`,
    )
  }
}

/** A shard id as the binding parses it (any UUID spelling `uuid::Uuid::parse_str` takes is longer than 32). */
const UUID = /^(urn:uuid:)?\{?[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\}?$/i

/**
 * Throws an {@link InvalidArgumentError} unless `v` is a UUID string. Checked here rather than
 * only in the binding so that the message echoes a long id truncated, never in full.
 */
function requireShardId(what: string, v: unknown): asserts v is string {
  requireString(what, v)
  if (!UUID.test(v)) {
    throw new InvalidArgumentError(
      `shardId ${truncate(JSON.stringify(v))} is not a UUID; pass the id of an existing shard (e.g. writer.shardId), or a name as shard`,
    )
  }
}

/**
 * Throws an {@link InvalidArgumentError} unless `v` is a string that is not a UUID (the core
 * checks the rest of a name: length, control characters).
 */
function requireShardName(what: string, v: unknown): asserts v is string {
  requireString(what, v)
  if (UUID.test(v)) {
    throw new InvalidArgumentError(`shard name ${JSON.stringify(v)} is a UUID; pass a shard's id as shardId`)
  }
  // The binding reads strings as UTF-8, which turns a lone surrogate into U+FFFD: two names
  // differing only there would reach one shard.
  const at = loneSurrogateAt(v)
  if (at !== -1) {
    throw new InvalidArgumentError(
      `${what}: the shard name has a lone surrogate (0x${v.charCodeAt(at).toString(16)}) at index ${at}; a name must be well-formed Unicode (check with name.isWellFormed(), and cut names without splitting a surrogate pair)`,
    )
  }
}

/** The index of the first lone surrogate in `s` (half of a surrogate pair alone), or -1. */
function loneSurrogateAt(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++
        continue
      }
      return i
    }
    if (c >= 0xdc00 && c <= 0xdfff) return i
  }
  return -1
}

/** The shard chosen by `shard` or `shardId` (at most one): a name, an id, or `'default'`. */
function shardOf(o: { shard?: unknown; shardId?: unknown }): string {
  if (o.shard !== undefined && o.shardId !== undefined) {
    throw new InvalidArgumentError('invalid options: pass either shard (a name) or shardId (a UUID), not both')
  }
  if (o.shardId !== undefined) {
    requireShardId('options.shardId', o.shardId)
    return o.shardId
  }
  if (o.shard !== undefined) {
    requireShardName('options.shard', o.shard)
    return o.shard
  }
  return DEFAULT_SHARD_NAME
}

/** The shard opened when neither `shard` nor `shardId` is given. */
export const DEFAULT_SHARD_NAME = 'default'

/** Throws an {@link InvalidArgumentError} for the first key of `options` not in `known`. */
function rejectUnknownOptions(options: object, known: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      throw new InvalidArgumentError(`unknown option \`${truncate(key)}\`; known options: ${known.join(', ')}`)
    }
  }
}

/**
 * Checks the options of `ShardWriter.open` and splits them into the binding's arguments: the
 * schema as IPC bytes, the options the binding takes under the same names, and the storage
 * options as strings.
 */
export function writerOptionsOf(options: unknown): {
  schema: Uint8Array
  native: Record<string, string | number | boolean | null>
  storage: Record<string, string> | undefined
  deadline: Deadline
} {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`ShardWriter.open needs an options object with a schema, got ${describeValue(options)}`)
  }
  rejectUnknownOptions(options, Object.keys(WRITER_OPTIONS))
  const o = options as Record<string, unknown>
  const native: Record<string, string | number | boolean | null> = {}
  for (const [key, kind] of Object.entries(WRITER_OPTIONS)) {
    const v = o[key]
    if (v === undefined || kind === 'schema' || kind === 'storage' || kind === 'deadline') continue
    if (kind === 'shard id') {
      requireShardId(`options.${key}`, v)
    } else if (kind === 'shard name') {
      requireShardName(`options.${key}`, v)
    } else if (kind === 'wal layout') {
      requireWalLayout(v)
    } else if (kind === 'string') {
      requireString(`options.${key}`, v)
    } else if (v === null && kind === 'number or null') {
      // null switches the feature off (maxWalFlushIntervalMs: no ticker); the core takes it.
    } else if (typeof v !== (kind === 'number or null' ? 'number' : kind)) {
      throw new InvalidArgumentError(`invalid option ${key}: expected a ${kind}, got ${describeValue(v)}`)
    }
    native[key] = v as string | number | boolean | null
  }
  return {
    schema: schemaBytes(o.schema),
    native,
    storage: storageOf('ShardWriter.open', o.storage),
    deadline: deadlineOf('ShardWriter.open', o, true),
  }
}

/** Options of {@link ShardReader.open} and {@link WalTailer.open}. */
export interface ShardOptions {
  /**
   * The shard to read, by name (as {@link ShardWriterOptions.shard}). Pass `shard` or
   * `shardId`, not both.
   * @defaultValue `'default'` (when `shardId` is not given either)
   */
  shard?: string
  /** The shard to read, by id (a UUID). */
  shardId?: string
  /**
   * Options of an object store location given as a string (`s3://`, `gs://`, `az://`). See
   * {@link StorageOptions}.
   * @defaultValue none (configuration from the environment)
   */
  storage?: StorageOptions
  /**
   * Aborts the open: it rejects with an {@link AbortError} (`cause`: the signal's reason) at
   * once, also while it waits on the store.
   * @defaultValue none
   */
  signal?: AbortSignal
  /**
   * Milliseconds after which the open rejects with a {@link TimeoutError}. The object store's
   * own budgets (see {@link StorageOptions}) apply regardless.
   * @defaultValue none (only the object store's budgets)
   */
  timeoutMs?: number
}

/** Every reader option, in the order the unknown-option message lists them. */
const SHARD_OPTIONS: Record<keyof ShardOptions, OptionKind> = {
  shard: 'shard name',
  shardId: 'shard id',
  storage: 'storage',
  signal: 'deadline',
  timeoutMs: 'deadline',
}

/** Checks the options of `ShardReader.open` or `WalTailer.open` (`what`). */
export function shardOptionsOf(
  what: string,
  options: unknown,
): { shard: string; storage: Record<string, string> | undefined; deadline: Deadline } {
  if (options === undefined) options = {}
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what}: expected an options object (or none), got ${describeValue(options)}`)
  }
  rejectUnknownOptions(options, Object.keys(SHARD_OPTIONS))
  const o = options as { shard?: unknown; shardId?: unknown; storage?: unknown; signal?: unknown; timeoutMs?: unknown }
  return { shard: shardOf(o), storage: storageOf(what, o.storage), deadline: deadlineOf(what, o, true) }
}

/** Options of one {@link ShardWriter.put} or {@link ShardWriter.putNoWait}. */
export interface PutOptions {
  /**
   * Makes the put retry-safe. If the writer remembers a put with this id (one that this or an
   * earlier writer of the shard accepted; for how long, see
   * {@link ShardWriterOptions.requestIdRetentionMs}), this put writes nothing and resolves with
   * the first put's result (its generation and batch positions as the first put returned
   * them): in durable mode only once the first put's rows are durable, and with the first
   * put's error if its WAL append failed. The first put wins even if this one carries other
   * data; a retry with another row count than the first put's is logged as a warning (target
   * `memwal::request_id`, see `setLogger`) when this writer took the first put itself, since an
   * id reused for another request is a bug nothing else would show. After a crash only ids whose rows reached the WAL are known: an
   * unacknowledged put that never reached it is written by its retry, once.
   *
   * A non-empty string of at most 256 UTF-8 bytes (a UUID, a hash of the request, …), compared
   * byte for byte. It must be well-formed UTF-16 (`requestId.isWellFormed()`): a lone surrogate
   * (half of a surrogate pair, such as what is left of an emoji cut in two by truncating an id)
   * has no UTF-8 form, so ids that differ only there could not be told apart, and the put
   * rejects with an {@link InvalidArgumentError} naming its index and code unit. Cut ids without
   * splitting a surrogate pair; `toWellFormed()` does not help ids that must stay distinct, as
   * it replaces every lone surrogate with the same U+FFFD.
   * @defaultValue none (an ordinary put)
   */
  requestId?: string
  /**
   * Stops waiting for the put: its promise rejects with an {@link AbortError} (`cause`: the
   * signal's reason). An already-aborted signal rejects at once and writes nothing. Once the
   * rows were handed over, aborting does not take them back: they may still become durable,
   * as after a timeout, so treat an aborted put as "maybe written" (retry it with the same
   * `requestId` to find out). To stop the writer itself, call `abort()`.
   * @defaultValue none
   */
  signal?: AbortSignal
  /**
   * With `true`, a durable put resolves with `walEntry`: what the WAL entry that made its rows
   * durable cost (its position, the object-store requests and bytes its append took, and how
   * many durable puts it acknowledged together; see {@link WalEntryCost}). `null` in
   * non-durable mode and for a retry answered from a remembered `requestId`. Only puts that
   * ask pay for it (a few numbers more per WAL entry's callback). For `put` only: `putNoWait`
   * rejects it.
   * @defaultValue false
   */
  cost?: boolean
}

/**
 * Checks the options of a put: its request id and deadline.
 * @throws {InvalidArgumentError} for options that are not an object, an unknown key, a
 * `requestId` that is not a string (the core checks its length and that it is well-formed
 * UTF-16), or a signal that is not an AbortSignal
 */
export function putOptionsOf(options: unknown): {
  requestId: string | undefined
  deadline: Deadline | undefined
  cost?: boolean
} {
  if (options === undefined) return NO_PUT_OPTIONS
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`put options must be an object like { requestId, signal }, got ${describeValue(options)}`)
  }
  rejectUnknownOptions(options, Object.keys(PUT_OPTIONS))
  const { requestId } = options as PutOptions
  if (requestId !== undefined) requireString('the put option requestId', requestId)
  const { cost } = options as { cost?: unknown }
  if (cost !== undefined && typeof cost !== 'boolean') {
    throw new InvalidArgumentError(`the put option cost must be a boolean, got ${describeValue(cost)}`)
  }
  const o = options as { signal?: unknown }
  return { requestId, deadline: o.signal === undefined ? undefined : deadlineOf('put', o, false), cost }
}

/** What a put without options gets (one object, not one per put). */
const NO_PUT_OPTIONS = Object.freeze({ requestId: undefined, deadline: undefined })

/** Every put option. */
const PUT_OPTIONS: Record<keyof PutOptions, OptionKind> = { requestId: 'string', signal: 'deadline', cost: 'boolean' }

/** Options of {@link ShardWriter.flush}. */
export interface FlushOptions {
  /**
   * Stops waiting: `flush` rejects with an {@link AbortError} (`cause`: the signal's reason).
   * The WAL append it asked for still happens.
   * @defaultValue none
   */
  signal?: AbortSignal
}

/** Options of {@link ShardWriter.close}. */
export interface CloseOptions {
  /**
   * Stops waiting: `close` rejects with an {@link AbortError} (`cause`: the signal's reason)
   * while the writer goes on closing (flushing what it holds). Call `abort()` to stop it now.
   * @defaultValue none
   */
  signal?: AbortSignal
  /**
   * Milliseconds after which `close` rejects with a {@link TimeoutError}, as with `signal`.
   * @defaultValue none
   */
  timeoutMs?: number
}

/** Every option of the call `what` that takes only a deadline (`flush`, `close`). */
export function callDeadlineOf(what: string, options: unknown, withTimeout: boolean): Deadline {
  if (options === undefined) return {}
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what} options must be an object like { signal }, got ${describeValue(options)}`)
  }
  rejectUnknownOptions(options, withTimeout ? ['signal', 'timeoutMs'] : ['signal'])
  return deadlineOf(what, options, withTimeout)
}

/** Options of {@link collectGarbage}: which shard, and what it may remove. */
export interface GcOptions extends ShardOptions {
  /**
   * Manifest versions to keep, newest first (at least 2).
   * @defaultValue 10
   */
  keepManifestVersions?: number
  /**
   * How old, in milliseconds, an abandoned generation folder must be before it is removed.
   * @defaultValue 600000 (10 minutes)
   */
  graceMs?: number
  /**
   * Report what would be removed, and remove nothing.
   * @defaultValue false
   */
  dryRun?: boolean
}

/** What {@link collectGarbage} may remove, checked: the binding's `NativeGcOptions`. */
const GC_OPTIONS = { keepManifestVersions: 'number', graceMs: 'number', dryRun: 'boolean' } as const

/** Checks the options of `collectGarbage` (`what`): the shard's, then what it may remove. */
export function gcOptionsOf(
  what: string,
  options: unknown,
): ReturnType<typeof shardOptionsOf> & { gc: { keepManifestVersions?: number; graceMs?: number; dryRun?: boolean } } {
  if (options === undefined) options = {}
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what}: expected an options object (or none), got ${describeValue(options)}`)
  }
  rejectUnknownOptions(options, [...Object.keys(SHARD_OPTIONS), ...Object.keys(GC_OPTIONS)])
  const rest: Record<string, unknown> = { ...options }
  const gc: Record<string, number | boolean> = {}
  for (const [key, kind] of Object.entries(GC_OPTIONS)) {
    const v = rest[key]
    delete rest[key]
    if (v === undefined) continue
    if (typeof v !== kind) {
      throw new InvalidArgumentError(`invalid option ${key}: expected a ${kind}, got ${describeValue(v)}`)
    }
    gc[key] = v as number | boolean
  }
  return { ...shardOptionsOf(what, rest), gc }
}
