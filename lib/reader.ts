// The read-only handles: ShardReader (what a new writer would recover) and WalTailer (WAL
// entries by position, for change-data capture). Neither claims the shard or writes.

import { type Table, tableFromIPC } from 'apache-arrow'

import { type NativeObjectStore, NativeShardReader, NativeWalTailer } from '../native.js'
import { withDeadline } from './deadline.js'
import { InvalidArgumentError, call, describe } from './errors.js'
import { manifestOf } from './holder.js'
import { type ShardOptions, shardOptionsOf } from './options.js'
import { type Location, nativeStore } from './store.js'
import type { ShardManifest, WalEntry } from './types.js'

/** Checks `options` of the open call `what` and opens the native reader of that shard. */
function openShard<T>(
  what: string,
  location: Location,
  options: ShardOptions,
  open: (store: NativeObjectStore, shardId: string) => Promise<T>,
): Promise<T> {
  const { shardId, storage, deadline } = shardOptionsOf(what, options)
  const store = nativeStore(location, storage)
  // A handle opened after the caller stopped waiting holds nothing (readers never claim): it
  // is dropped.
  return withDeadline(what, deadline, () => call(() => open(store, shardId)))
}

/**
 * A read-only view of a shard: what a new writer would recover. It claims nothing and never
 * writes.
 */
export class ShardReader {
  readonly #native: NativeShardReader

  private constructor(native: NativeShardReader) {
    this.#native = native
  }

  /**
   * Opens a shard for reading.
   * @throws {InvalidArgumentError} if there is no such shard at the location
   * @throws {TimeoutError} if the store did not answer within its budgets, or `timeoutMs` passed
   * @throws {AbortError} if `options.signal` aborted the open
   */
  static async open(location: Location, options: ShardOptions): Promise<ShardReader> {
    return new ShardReader(await openShard('ShardReader.open', location, options, NativeShardReader.open))
  }

  /** Every recoverable row: the flushed generations, then the WAL after the replay cursor. */
  async scan(): Promise<Table> {
    return tableFromIPC(await call(() => this.#native.scan()))
  }

  /** The latest manifest. */
  async manifest(): Promise<ShardManifest> {
    return manifestOf(await call(() => this.#native.manifest()))
  }
}

/** Reads a shard's WAL entries by position, for change-data capture. Never writes. */
export class WalTailer {
  readonly #native: NativeWalTailer

  private constructor(native: NativeWalTailer) {
    this.#native = native
  }

  /**
   * A tailer over a shard's WAL.
   * @throws {TimeoutError} if `options.timeoutMs` passed
   * @throws {AbortError} if `options.signal` aborted the open
   */
  static async open(location: Location, options: ShardOptions): Promise<WalTailer> {
    return new WalTailer(await openShard('WalTailer.open', location, options, NativeWalTailer.open))
  }

  /** The first position with no entry; every position below it holds one. */
  async nextPosition(): Promise<number> {
    return call(() => this.#native.nextPosition())
  }

  /** The entry at `position` (≥ 1), or `null` if there is none. */
  async read(position: number): Promise<WalEntry | null> {
    if (typeof position !== 'number') {
      throw new InvalidArgumentError(`read(position) expects a number, got ${describe(position)}`)
    }
    const e = await call(() => this.#native.read(position))
    if (e === null || e === undefined) return null
    return {
      position: e.position,
      writerEpoch: e.writerEpoch,
      isSentinel: e.isSentinel,
      table: e.data === null || e.data === undefined ? null : tableFromIPC(e.data),
    }
  }
}
