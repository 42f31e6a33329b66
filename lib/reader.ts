// The read-only handles: ShardReader (what a new writer would recover) and WalTailer (WAL
// entries by position, for change-data capture). Neither claims the shard or writes.

import { type Table, tableFromIPC } from 'apache-arrow'

import { type NativeObjectStore, NativeShardReader, NativeWalTailer } from '../native.js'
import { describeValue } from './arguments.js'
import { withDeadline } from './deadline.js'
import { AbortError, ClosedError, InvalidArgumentError } from './errors.js'
import { manifestOf } from './holder.js'
import { call } from './native-call.js'
import { type ShardOptions, shardOptionsOf } from './options.js'
import { type Location, nativeStore } from './store.js'
import type { GenerationFile, ShardManifest, WalEntry } from './types.js'

/** Checks `options` of the open call `what` and opens the native reader of that shard. */
function openShard<T>(
  what: string,
  location: Location,
  options: ShardOptions | undefined,
  open: (store: NativeObjectStore, shard: string) => Promise<T>,
): Promise<T> {
  const { shard, storage, deadline } = shardOptionsOf(what, options)
  const store = nativeStore(location, storage)
  // A handle opened after the caller stopped waiting holds nothing (readers never claim): it
  // is dropped.
  return withDeadline(what, deadline, () => call(() => open(store, shard)))
}

/** Throws a {@link ClosedError} if the handle `what` was closed. */
function requireOpen(closed: boolean, what: string): void {
  if (closed) {
    throw new ClosedError(`${what} is closed; open a new one`)
  }
}

/**
 * A read-only view of a shard: what a new writer would recover. It claims nothing and never
 * writes.
 */
export class ShardReader {
  readonly #native: NativeShardReader
  #closed = false

  private constructor(native: NativeShardReader) {
    this.#native = native
  }

  /**
   * Opens a shard for reading: `options.shard` (a name), `options.shardId`, or the shard named
   * `'default'` if neither is given.
   * @throws {InvalidArgumentError} if there is no such shard at the location
   * @throws {CorruptError} if the shard has WAL entries or generations but no manifest (its
   * manifest folder was deleted): restore the folder from a backup
   * @throws {TimeoutError} if the store did not answer within its budgets, or `timeoutMs` passed
   * @throws {AbortError} if `options.signal` aborted the open
   */
  static async open(location: Location, options?: ShardOptions): Promise<ShardReader> {
    return new ShardReader(await openShard('ShardReader.open', location, options, NativeShardReader.open))
  }

  /** The shard id (a UUID). */
  get shardId(): string {
    return this.#native.shardId
  }

  /** The shard's name, as its manifest recorded it at open; `null` for a shard only ever opened by id. */
  get shardName(): string | null {
    return this.#native.shardName ?? null
  }

  /** Every recoverable row: the flushed generations, then the WAL after the replay cursor. */
  async scan(): Promise<Table> {
    requireOpen(this.#closed, 'ShardReader')
    return tableFromIPC(await call(() => this.#native.scan()))
  }

  /**
   * The committed generation files, oldest first, as the latest manifest lists them: what to
   * hand DuckDB, pyarrow or Polars. Never read a glob of the shard's folder instead: it can also
   * match a generation whose flush did not reach the manifest, whose rows are then counted
   * twice. Rows after the replay cursor are only in the WAL; {@link ShardReader.scan} includes
   * them.
   */
  async files(): Promise<GenerationFile[]> {
    requireOpen(this.#closed, 'ShardReader')
    return call(() => this.#native.generationFiles())
  }

  /**
   * Generation folders in the shard's folder that the latest manifest does not list: a flush or
   * compaction in progress, one a writer abandoned (it crashed or was fenced before committing
   * it), or generations compaction replaced (until garbage collection removes them). Their rows
   * are also in the WAL or a committed generation: never read them.
   */
  async uncommittedGenerations(): Promise<string[]> {
    requireOpen(this.#closed, 'ShardReader')
    return call(() => this.#native.uncommittedGenerations())
  }

  /** The latest manifest. */
  async manifest(): Promise<ShardManifest> {
    requireOpen(this.#closed, 'ShardReader')
    return manifestOf(await call(() => this.#native.manifest()))
  }

  /**
   * Releases the reader: later calls reject with {@link ClosedError}. A reader holds no lock
   * and writes nothing, so closing never fails. Idempotent.
   */
  async close(): Promise<void> {
    this.#closed = true
  }

  /** `await using r = await ShardReader.open(...)` closes the reader at scope exit (Node ≥ 22). */
  async [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

/** Reads a shard's WAL entries by position, for change-data capture. Never writes. */
export class WalTailer {
  readonly #native: NativeWalTailer
  #closed = false
  /** Aborted by `close()`, so that a `follow()` waiting for the next entry ends at once. */
  readonly #closing = new AbortController()

  private constructor(native: NativeWalTailer) {
    this.#native = native
  }

  /**
   * A tailer over a shard's WAL: `options.shard` (a name), `options.shardId`, or the shard named
   * `'default'` if neither is given.
   *
   * Unlike {@link ShardReader.open}, it resolves even when the location holds no such shard
   * (yet): a change-data-capture consumer may start before the shard's first writer, and its
   * {@link WalTailer.follow} then waits for the shard's first entry ({@link WalTailer.read}
   * returns `null`, {@link WalTailer.nextPosition} 1). So a misspelt location or shard name
   * waits for ever instead of failing: check the name, or open a {@link ShardReader} first
   * where the shard must already exist.
   * @throws {InvalidArgumentError} for a bad location or option, e.g. a shard name that is not
   * valid
   * @throws {TimeoutError} if `options.timeoutMs` passed
   * @throws {AbortError} if `options.signal` aborted the open
   */
  static async open(location: Location, options?: ShardOptions): Promise<WalTailer> {
    return new WalTailer(await openShard('WalTailer.open', location, options, NativeWalTailer.open))
  }

  /**
   * The first position with no entry; every position from {@link WalTailer.firstPosition} up
   * to it holds one.
   * @throws {CorruptError} if that slot is a hole: empty, with an entry after it (found from
   * the hole's last slot; {@link WalTailer.verify} checks the whole WAL)
   */
  async nextPosition(): Promise<number> {
    requireOpen(this.#closed, 'WalTailer')
    return call(() => this.#native.nextPosition())
  }

  /**
   * The first position garbage collection has not removed: the shard's WAL low-water mark plus
   * one (1 while nothing was collected). Entries below it may be gone; their rows are in the
   * shard's flushed generations.
   */
  async firstPosition(): Promise<number> {
    requireOpen(this.#closed, 'WalTailer')
    return call(() => this.#native.firstPosition())
  }

  /**
   * Checks the WAL above its low-water mark for a hole, an empty slot below a written one (left
   * by an entry deleted outside memwal), with one listing of the WAL.
   * @throws {CorruptError} naming the first such slot
   */
  async verify(): Promise<void> {
    requireOpen(this.#closed, 'WalTailer')
    return call(() => this.#native.verify())
  }

  /**
   * The entry at `position` (≥ 1), or `null` if there is none yet.
   * @throws {TruncatedError} if garbage collection removed it; `firstAvailable` says where to
   * resume
   * @throws {CorruptError} if the slot is a hole (empty, with an entry after it), or holds a
   * damaged entry or one that belongs elsewhere
   */
  async read(position: number): Promise<WalEntry | null> {
    if (typeof position !== 'number') {
      throw new InvalidArgumentError(`read(position) expects a number, got ${describeValue(position)}`)
    }
    requireOpen(this.#closed, 'WalTailer')
    const e = await call(() => this.#native.read(position))
    if (e === null || e === undefined) return null
    return {
      position: e.position,
      writerEpoch: e.writerEpoch,
      isSentinel: e.isSentinel,
      table: e.data === null || e.data === undefined ? null : tableFromIPC(e.data),
    }
  }

  /**
   * Yields every WAL entry from `options.from` on, in position order, as it lands: entries that
   * exist at once, then each new one, polling the next slot every `pollIntervalMs` while there
   * is none. Fence sentinels are yielded too (`isSentinel`, no table). It never ends by itself:
   * `break` out of the loop, abort `options.signal` (the loop then throws an
   * {@link AbortError}), or close the tailer: {@link WalTailer.close}, from anywhere, ends a
   * running loop as `break` would (it returns, without throwing, and yields nothing more, not
   * even an entry whose read was under way); iterating a tailer closed before the loop's first
   * step throws {@link ClosedError}. To resume after a restart, save `entry.position + 1` and
   * pass it as `from`.
   *
   * @param options - `from`: the first position (default: {@link WalTailer.firstPosition});
   * `pollIntervalMs` (default 100); `signal` ends the iteration with an {@link AbortError}
   * @throws {TruncatedError} if a position it reaches was removed by garbage collection (the
   * follower fell behind the low-water mark): resume from `firstAvailable`
   * @throws {CorruptError} if the WAL has a hole, or an entry is damaged
   *
   * @example
   * ```ts
   * for await (const entry of tailer.follow({ from: saved })) {
   *   if (entry.table !== null) await forward(entry.table)
   *   saved = entry.position + 1
   * }
   * ```
   */
  async *follow(options?: FollowOptions): AsyncGenerator<WalEntry, void, undefined> {
    const { from, pollIntervalMs, signal } = followOptionsOf(options)
    // Iterating a tailer that was already closed is a mistake, as any other call on it is; a
    // close while the loop runs is how its owner stops it, which is no error of the consumer's.
    requireOpen(this.#closed, 'WalTailer')
    let position = from ?? (await this.firstPosition())
    while (true) {
      if (signal?.aborted) {
        throw new AbortError('WalTailer.follow was aborted', { cause: signal.reason })
      }
      if (this.#closed) return
      const entry = await this.read(position)
      if (this.#closed) return
      if (entry !== null) {
        yield entry
        position += 1
        continue
      }
      await sleep(pollIntervalMs, signal, this.#closing.signal)
    }
  }

  /**
   * Releases the tailer: later calls reject with {@link ClosedError}, and a
   * {@link WalTailer.follow} loop in progress ends (returns) at once. Never fails. Idempotent.
   */
  async close(): Promise<void> {
    this.#closed = true
    this.#closing.abort()
  }

  /** `await using t = await WalTailer.open(...)` closes the tailer at scope exit (Node ≥ 22). */
  async [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

/** Options of {@link WalTailer.follow}. */
export interface FollowOptions {
  /**
   * The first position to yield (≥ 1).
   * @defaultValue the tailer's {@link WalTailer.firstPosition}
   */
  from?: number
  /**
   * Milliseconds between looks at the next slot while it is empty (1 to 60,000).
   * @defaultValue 100
   */
  pollIntervalMs?: number
  /**
   * Ends the iteration: the loop rejects with an {@link AbortError} at its next step.
   * @defaultValue none
   */
  signal?: AbortSignal
}

/** Checks the options of `follow`. */
function followOptionsOf(options: unknown): { from?: number; pollIntervalMs: number; signal?: AbortSignal } {
  if (options === undefined) options = {}
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`follow: expected an options object (or none), got ${describeValue(options)}`)
  }
  const o = options as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (!['from', 'pollIntervalMs', 'signal'].includes(key)) {
      throw new InvalidArgumentError(`follow: unknown option \`${key.slice(0, 100)}\`; known options: from, pollIntervalMs, signal`)
    }
  }
  const whole = (name: string, v: unknown, min: number, max: number): number => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      throw new InvalidArgumentError(`follow: ${name} must be an integer from ${min} to ${max}, got ${describeValue(v)}`)
    }
    return v
  }
  const from = o.from === undefined ? undefined : whole('from', o.from, 1, Number.MAX_SAFE_INTEGER)
  const pollIntervalMs = o.pollIntervalMs === undefined ? 100 : whole('pollIntervalMs', o.pollIntervalMs, 1, 60_000)
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`follow: signal must be an AbortSignal, got ${describeValue(o.signal)}`)
  }
  return { from, pollIntervalMs, signal: o.signal as AbortSignal | undefined }
}

/** Waits `ms`, or until `signal` or `closing` aborts (then resolves at once: the caller checks them). */
function sleep(ms: number, signal: AbortSignal | undefined, closing: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      closing.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
    closing.addEventListener('abort', done, { once: true })
  })
}
