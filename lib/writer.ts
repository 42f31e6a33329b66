// ShardWriter: the one writer of a shard. Each method checks its arguments, makes one native
// call through `call`/`callSync` (typed errors), and converts Arrow data at the edge.
//
// `put` and `putNoWait` are one path (`#submit`): one binding call, which inserts a small put at
// once and returns a promise of the insert for a large one or one that backpressure makes
// wait. In durable mode every put then waits in the durable registry (./durable.ts), where the
// binding's relay reports its WAL append.

import { type Table, tableFromIPC } from 'apache-arrow'

import { type GcReport, NativeShardWriter, type NativeWriteTicket } from '../native.js'
import { awaitDurable, cancelDurable, newDurableId, settleDurable } from './durable.js'
import { EventEmitter, type ShardWriterEvents, checkListener, emitNativeEvent } from './events.js'
import { type PutData, encode } from './encoding.js'
import { InvalidArgumentError } from './errors.js'
import { manifestOf } from './holder.js'
import { formatMetrics } from './metrics.js'
import { withDeadline } from './deadline.js'
import {
  type CloseOptions,
  type FlushOptions,
  type PutOptions,
  type ShardWriterOptions,
  callDeadlineOf,
  putOptionsOf,
  writerOptionsOf,
} from './options.js'
import { call, callSync } from './native-call.js'
import { type Location, nativeStore, writerOpenedOn } from './store.js'
import type {
  CostedWriteResult,
  MemTableStats,
  OpenStats,
  PutNoWaitResult,
  ShardManifest,
  WalEntryCost,
  WalStats,
  WriteResult,
  WriteStats,
} from './types.js'
import { yieldIfDue } from './yield.js'

/** A writer reclaimed by the JavaScript engine without close or abort makes no more store calls either. */
const unclosedWriters = new FinalizationRegistry<() => void>((ended) => ended())

/** Flags of the binding's `put` (`writer.rs`): a putNoWait; report the WAL entry's cost. */
const PUT_NO_WAIT = 1
const PUT_COST = 2

/** A put's outcome: where its rows went, and (durable mode) the promise of their durability. */
interface Submitted {
  result: WriteResult
  /** Resolves with the WAL entry's cost for a put inserted asking for it, else with nothing. */
  durable: Promise<WalEntryCost | undefined> | null
}

/**
 * The one writer of a shard.
 *
 * Opening claims the shard (a higher epoch), fences any previous writer, and replays its WAL.
 * Methods may be called concurrently: concurrent durable puts share WAL entries (group commit).
 *
 * @example
 * ```ts
 * const w = await ShardWriter.open('./data', { schema })
 * try {
 *   await w.put(tableFromArrays({ id: Int32Array.from([1, 2]) }))
 *   console.log((await w.scan()).numRows)
 * } finally {
 *   await w.close()
 * }
 * ```
 */
export class ShardWriter {
  readonly #native: NativeShardWriter
  readonly #durableWrite: boolean
  /** The first `close()`'s outcome: later calls (e.g. an explicit close inside `await using`) share it. */
  #closing: Promise<void> | undefined
  /** Listeners of this writer's events; the binding sends events only once one is added. */
  readonly #events = new EventEmitter()
  /** Where the binding writes where a put's rows went (see `put` in `writer.rs`). */
  readonly #out = new Float64Array(3)
  #subscribed = false
  /** Ends this writer's count on its store (see `writerOpenedOn`); called once it has ended. */
  readonly #ended: () => void

  private constructor(native: NativeShardWriter, ended: () => void) {
    this.#native = native
    this.#durableWrite = native.durableWrite
    this.#ended = ended
    unclosedWriters.register(this, ended, this)
    callSync(() => native.relayDurable(settleDurable))
  }

  /** This writer has ended (closed, aborted, or either failed): it makes no more store calls. */
  #end(): void {
    unclosedWriters.unregister(this)
    this.#ended()
  }

  /**
   * Opens the writer of a shard: claims the next epoch, fences the previous writer (its next
   * WAL append fails), replays the WAL, and starts the background tasks.
   *
   * @param location - a local path, `file:///abs/path`, `memory://NAME`, an object store URI
   * (`s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`; see `storage`), or an
   * {@link ObjectStore}
   * @param options - the schema (required) and configuration
   * @returns the open writer
   * @throws {InvalidArgumentError} for a bad option (unknown key, wrong type, NaN, negative), a
   * bad storage option or missing credentials, or an object store without conditional writes
   * (put-if-not-exists), which cannot fence a stale writer
   * @throws {SchemaMismatchError} if the shard was written with another schema (nothing is
   * written; a manifest written by Lance records none, and then the WAL or the newest
   * generation says which)
   * @throws {FencedError} if another writer claimed the shard at the same time
   * @throws {CorruptError} if a manifest or WAL entry cannot be decoded, or if the shard has
   * WAL entries or generations but no manifest (nothing is written; restore the manifest folder)
   * @throws {IoError} if the store fails (e.g. a read-only directory)
   * @throws {TimeoutError} if the store did not answer within its budgets, or `timeoutMs` passed
   * @throws {AbortError} if `signal` aborted the open (a writer claimed afterwards is aborted)
   */
  static async open(location: Location, options: ShardWriterOptions): Promise<ShardWriter> {
    const { schema, native, storage, deadline } = writerOptionsOf(options)
    const store = nativeStore(location, storage)
    const opened = await withDeadline(
      'ShardWriter.open',
      deadline,
      () => call(() => NativeShardWriter.open(store, schema, native)),
      // Nobody holds a writer claimed after the caller stopped waiting: release it.
      (late) => void late.abort().catch(() => undefined),
    )
    return new ShardWriter(opened, writerOpenedOn(store))
  }

  /**
   * Adds `listener` for `event` (see {@link ShardWriterEvents}): `fenced`, `walAppend`,
   * `generationFlushed`, `compaction`, `gc`, `error`. Listeners run on the JavaScript thread,
   * after what they report took effect. The first listener starts the events; with none, a
   * writer builds none. A listener that throws (or rejects) never crashes the process: what it
   * threw comes as an `error` event if the writer has an `error` listener, otherwise as a
   * process warning (see {@link ShardWriterEvents}).
   * @returns this writer, for chaining
   * @throws {InvalidArgumentError} for an unknown event or a listener that is not a function
   *
   * @example
   * ```ts
   * writer.on('fenced', (e) => log.error({ holder: e.holder }, e.message))
   * writer.on('generationFlushed', ({ generation, rows }) => metrics.flushed(generation, rows))
   * ```
   */
  on<K extends keyof ShardWriterEvents>(event: K, listener: (...args: ShardWriterEvents[K]) => void): this {
    checkListener('ShardWriter.on', event, listener)
    this.#subscribe()
    this.#events.on(event, listener as (...args: unknown[]) => void)
    return this
  }

  /**
   * Adds `listener` for the next `event` only. See {@link ShardWriter.on}.
   * @returns this writer, for chaining
   * @throws {InvalidArgumentError} for an unknown event or a listener that is not a function
   */
  once<K extends keyof ShardWriterEvents>(event: K, listener: (...args: ShardWriterEvents[K]) => void): this {
    checkListener('ShardWriter.once', event, listener)
    this.#subscribe()
    this.#events.once(event, listener as (...args: unknown[]) => void)
    return this
  }

  /**
   * Removes `listener` from `event`.
   * @returns this writer, for chaining
   */
  off<K extends keyof ShardWriterEvents>(event: K, listener: (...args: ShardWriterEvents[K]) => void): this {
    this.#events.off(event, listener as (...args: unknown[]) => void)
    return this
  }

  #subscribe(): void {
    if (this.#subscribed) return
    this.#subscribed = true
    const events = this.#events
    callSync(() => this.#native.onEvents((json) => emitNativeEvent(events, json)))
  }

  /** The shard id (a UUID). Pass it as `shardId` to reopen the shard. */
  get shardId(): string {
    return this.#native.shardId
  }

  /**
   * The shard's name, as its manifest records it (`'default'` for a shard opened with neither
   * `shard` nor `shardId`); `null` for a shard only ever opened by id.
   */
  get shardName(): string | null {
    return this.#native.shardName ?? null
  }

  /** The epoch this writer claimed (higher than every previous writer's). */
  get epoch(): number {
    return this.#native.epoch
  }

  /**
   * This handle's random writer id. The manifest records it as the shard's holder, so it is
   * what a fenced writer's {@link FencedError.holder} names when this handle fenced it.
   */
  get writerId(): string {
    return this.#native.writerId
  }

  /**
   * Inserts rows atomically. In durable mode it resolves only once the WAL entry holding
   * exactly these rows is persisted; in non-durable mode, once they are in memory.
   *
   * Rows may be plain objects, one per row, keyed by field name: they are converted in Rust
   * against the shard's schema, so the JavaScript thread only hands the array over (the fastest
   * way to put a few rows). Numbers and bigints fill integer and float fields (range-checked),
   * strings fill Utf8, LargeUtf8 and dictionary fields, a `Date`, an epoch number in the
   * column's unit or an ISO-8601 string fills Timestamp and Date fields, a `Buffer` or
   * `Uint8Array` fills binary fields, an array or typed array fills lists (a `Float32Array`
   * embedding is copied in one piece), a nested object fills a Struct, and `null`, `undefined`
   * or a missing key is null. Tables, RecordBatches and IPC bytes suit bulk data built as
   * Arrow already.
   *
   * A string value holding a lone surrogate (half of a UTF-16 surrogate pair, such as
   * `'\uD800'`, which has no UTF-8 spelling) is not rejected: each lone surrogate is stored as
   * U+FFFD (`'\uFFFD'`), as `TextEncoder` writes it, so the value read back differs. Check
   * `value.isWellFormed()` before the put where that matters.
   *
   * @param data - an array of plain objects (rows); an apache-arrow Table, a RecordBatch, or
   * RecordBatch[] (from any copy of apache-arrow, version 15 or newer, loaded through `import`
   * or `require`); or Arrow IPC stream bytes. A Table's empty batches are skipped; in a
   * RecordBatch[] every batch must hold rows, since the batch positions count the caller's
   * batches. Batches may carry different dictionaries.
   * @param options - `requestId` makes the put retry-safe: a retry with the same id writes
   * nothing and resolves with the first put's result (see {@link PutOptions}); `cost: true`
   * adds `walEntry`, what the WAL entry that made the rows durable cost
   * ({@link CostedWriteResult})
   * @returns the generation and the generation-local batch positions
   * @throws {InvalidArgumentError} for input that holds nothing to write (no rows, a Table,
   * RecordBatch or batch list with 0 rows, an empty list), an empty batch among others, anything
   * that is not a put input, a Table or RecordBatch whose structure is not apache-arrow's, or
   * bytes that are not an Arrow IPC stream; for rows: an element that is not a plain object, a
   * value that does not fit its field (the message names the row, the field's path, what was
   * expected and what was got), a row whose keys cannot be read (a Proxy whose `ownKeys` trap
   * throws; the message names the row and what was thrown), a key that is not a field (unless the writer was opened with
   * `ignoreUnknownFields: true`), or a field whose type plain objects cannot fill (pass a Table
   * instead); a bad option (a `requestId` that is not a non-empty, well-formed string of at most
   * 256 UTF-8 bytes). A rejected put writes nothing.
   * @throws {SchemaMismatchError} if the data's schema is not the shard's
   * @throws {FencedError} if this put's WAL append failed or the writer was already fenced
   * (for a retry: the first put's append)
   * @throws {ClosedError} after `close()`/`abort()`
   * @throws {AbortError} if `options.signal` aborted the wait; the rows may still become durable
   *
   * @example
   * ```ts
   * await writer.put([{ id: 1, ts: new Date(), user: 'ada', payload: Buffer.from('hi') }])
   * await writer.put(tableFromArrays({ id: Int32Array.from([2, 3]) }))
   *
   * // retry-safe: after a timeout, or in another process after a failover, no second copy
   * const requestId = crypto.randomUUID()
   * const first = await writer.put(rows, { requestId })
   * const again = await writer.put(rows, { requestId }) // deep-equals `first`
   * ```
   */
  put(data: PutData, options: PutOptions & { cost: true }): Promise<CostedWriteResult>
  put(data: PutData, options?: PutOptions): Promise<WriteResult>
  // Not `async`: the promise of #put is returned as it is, where an async wrapper would add a
  // promise and two microtask turns to every put. Bad options still reject, never throw.
  put(data: PutData, options?: PutOptions): Promise<WriteResult | CostedWriteResult> {
    let parsed: ReturnType<typeof putOptionsOf>
    try {
      parsed = putOptionsOf(options)
    } catch (e) {
      return Promise.reject(e)
    }
    const { requestId, deadline, cost } = parsed
    if (deadline !== undefined) {
      return withDeadline('put', deadline, () => this.#put(data, requestId, cost === true))
    }
    return this.#put(data, requestId, cost === true)
  }

  async #put(data: PutData, requestId: string | undefined, cost: boolean): Promise<WriteResult | CostedWriteResult> {
    const inserted = this.#submit(data, 'put', requestId, cost)
    const { result, durable } = inserted instanceof Promise ? await inserted : inserted
    const entry = durable !== null ? await durable : undefined
    if (durable === null) await yieldIfDue()
    return cost ? { ...result, walEntry: entry ?? null } : result
  }

  /**
   * Inserts rows and resolves once they are in memory, with a promise of their durability
   * (`null` in non-durable mode). MemTable mode only.
   *
   * @param data - the same as {@link ShardWriter.put}'s: an array of plain objects (rows), a
   * Table, a RecordBatch, RecordBatch[], or Arrow IPC stream bytes
   * @param options - as for {@link ShardWriter.put}; a retry resolves with the first put's
   * result and `durable` settles with the first put's durability
   * @throws like {@link ShardWriter.put}; `durable` rejects like a durable `put` would (a
   * `signal` stops the wait for the insert only, not `durable`)
   */
  async putNoWait(data: PutData, options?: PutOptions): Promise<PutNoWaitResult> {
    const { requestId, deadline, cost } = putOptionsOf(options)
    if (cost === true) {
      throw new InvalidArgumentError('the put option cost applies to put(), not putNoWait(); await put(rows, { cost: true }) to learn what its WAL entry cost')
    }
    const insert = async (): Promise<PutNoWaitResult> => {
      const inserted = this.#submit(data, 'noWait', requestId)
      const submitted = inserted instanceof Promise ? await inserted : inserted
      if (submitted.durable === null) await yieldIfDue()
      // Inserted without asking for a cost, its durability resolves with nothing.
      return submitted as PutNoWaitResult
    }
    return deadline === undefined ? insert() : withDeadline('putNoWait', deadline, insert)
  }

  /**
   * The one put path. A durable put's waiter is registered before the insert: the relay may
   * report the append before a deferred insert's promise settles here. Synchronous when the
   * binding inserted at once, so a small put costs no extra event-loop turn.
   */
  #submit(
    data: PutData,
    mode: 'put' | 'noWait',
    requestId: string | undefined,
    cost = false,
  ): Submitted | Promise<Submitted> {
    const e = encode(data)
    const id = this.#durableWrite ? newDurableId() : undefined
    const durable = id === undefined ? null : awaitDurable(id)
    // Handled from the start: the relay may reject it before a deferred insert lets the caller
    // await it, and a caller of putNoWait may never await it.
    durable?.catch(() => undefined)
    const flags = (mode === 'noWait' ? PUT_NO_WAIT : 0) | (cost ? PUT_COST : 0)
    const out = this.#out
    let inserted: boolean | Promise<NativeWriteTicket>
    try {
      inserted = callSync(() =>
        e.kind === 'rows'
          ? this.#native.put(e.rows, e.keyCounts, flags, id ?? null, requestId ?? null, out)
          : this.#native.put(e, null, flags, id ?? null, requestId ?? null, out),
      )
    } catch (err) {
      if (id !== undefined) cancelDurable(id)
      throw err
    }
    if (typeof inserted === 'boolean') {
      // Read at once: the next put writes `out` again.
      const result: WriteResult = {
        generation: Number.isNaN(out[0]) ? null : out[0]!,
        batchPositions: { start: out[1]!, end: out[2]! },
      }
      if (id !== undefined && !inserted) cancelDurable(id)
      return { result, durable: inserted ? durable : null }
    }
    return call(() => inserted).then(
      (ticket: NativeWriteTicket): Submitted => {
        if (id !== undefined && !ticket.relayed) cancelDurable(id)
        return { result: ticket.result, durable: ticket.relayed ? durable : null }
      },
      (err: unknown): never => {
        if (id !== undefined) cancelDurable(id)
        throw err
      },
    )
  }

  /**
   * Makes every row written so far durable; resolves when it is.
   * @param options - `signal` stops the wait (the WAL append still happens)
   * @throws {FencedError} if the WAL append fails
   * @throws {AbortError} if `options.signal` aborted the wait
   */
  async flush(options?: FlushOptions): Promise<void> {
    const deadline = callDeadlineOf('flush', options, false)
    return withDeadline('flush', deadline, () => call(() => this.#native.flush()))
  }

  /**
   * Freezes the active MemTable (if it holds rows) and queues its generation flush. Does not
   * wait for the flush: see {@link ShardWriter.waitForFlushDrain}.
   * @throws {FencedError} if another writer claimed the shard
   */
  async forceSealActive(): Promise<void> {
    return call(() => this.#native.forceSealActive())
  }

  /** Resolves when every frozen MemTable is flushed as a Parquet generation. */
  async waitForFlushDrain(): Promise<void> {
    return call(() => this.#native.waitForFlushDrain())
  }

  /**
   * Collects garbage in this writer's shard now, with its `gc*` options, whether or not
   * background collection (`gc`) is on. See {@link collectGarbage} for what is removed.
   * @returns what was removed
   * @throws {ClosedError} after `close`
   * @throws {IoError} if the store fails (a rerun continues)
   */
  async collectGarbage(): Promise<GcReport> {
    return call(() => this.#native.collectGarbage())
  }

  /**
   * Reads the manifest and rejects with a {@link FencedError} (`PeerClaimedEpoch`) if another
   * writer claimed the shard.
   */
  async checkFenced(): Promise<void> {
    return call(() => this.#native.checkFenced())
  }

  /** Statistics of the active and frozen MemTables. MemTable mode only. */
  async memtableStats(): Promise<MemTableStats> {
    return callSync(() => this.#native.memtableStats())
  }

  /** The writer's view of its WAL. */
  async walStats(): Promise<WalStats> {
    return callSync(() => this.#native.walStats())
  }

  /** Where {@link ShardWriter.open} spent its time: claiming the shard, then replaying the WAL. */
  openStats(): OpenStats {
    return callSync(() => this.#native.openStats())
  }

  /**
   * Write counters: puts, WAL entries, the group-commit factor, generation flushes,
   * backpressure; object-store requests and bytes by kind (`store`); retries and failures by
   * operation (`operations`); and latency summaries (count, p50, p99, max, sum in
   * milliseconds) of WAL appends, generation flushes and put-to-durable. Counted from this
   * writer's open, by this writer only.
   */
  stats(): WriteStats {
    return callSync(() => this.#native.stats())
  }

  /**
   * All of this writer's statistics in the Prometheus text exposition format, labelled with
   * `shard` (its name, or its id if it has none): serve it from a `/metrics` route with
   * `Content-Type: text/plain; version=0.0.4`. For several writers in one response, use
   * {@link formatMetrics}, which writes each family's HELP and TYPE once.
   *
   * @example
   * ```ts
   * http.createServer((req, res) => {
   *   if (req.url !== '/metrics') return void res.writeHead(404).end()
   *   res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' }).end(writer.metrics())
   * }).listen(9464)
   * ```
   */
  metrics(): string {
    const native = this.#native
    const memtable = (() => {
      try {
        return native.memtableStats()
      } catch {
        return undefined // WAL-only mode has no MemTable
      }
    })()
    return formatMetrics([
      {
        shard: native.shardName ?? native.shardId,
        stats: callSync(() => native.stats()),
        epoch: native.epoch,
        wal: callSync(() => native.walStats()),
        memtable,
      },
    ])
  }

  /** The shard's latest manifest, read from the store. */
  async manifest(): Promise<ShardManifest | null> {
    const m = await call(() => this.#native.manifest())
    return m === null ? null : manifestOf(m)
  }

  /**
   * Every row the writer holds, in insertion order (flushed generations, frozen MemTables,
   * the active MemTable). In durable mode only WAL-appended rows are included. MemTable mode
   * only.
   * @throws {FencedError} if the writer is fenced
   */
  async scan(): Promise<Table> {
    return tableFromIPC(await call(() => this.#native.scan()))
  }

  /**
   * Flushes everything (WAL, active MemTable, generations), stops the background tasks and
   * reports the first error. Idempotent: a second call (e.g. an explicit `close()` in a scope
   * that `await using` also disposes) settles like the first, and after {@link ShardWriter.abort}
   * it settles like the abort, so disposal never throws for a handle already ended. Other
   * calls reject with {@link ClosedError} afterwards.
   * @param options - `signal` and `timeoutMs` stop the wait: the writer goes on closing, and
   * its rows may still become durable; call {@link ShardWriter.abort} to stop it at once
   * @throws {TimeoutError} if `options.timeoutMs` passed first
   * @throws {AbortError} if `options.signal` aborted the wait
   */
  async close(options?: CloseOptions): Promise<void> {
    const deadline = callDeadlineOf('close', options, true)
    this.#closing ??= call(() => this.#native.close()).finally(() => this.#end())
    const closing = this.#closing
    return withDeadline('close', deadline, () => closing)
  }

  /**
   * Stops without flushing: rows not yet durable are dropped (as in a crash) and waiting
   * durable puts reject. Idempotent.
   *
   * Like a crash, it does not wait for a write already handed to the store: a WAL entry in
   * flight may still land afterwards. Such an entry is valid and the next writer replays it,
   * so treat the puts that `abort` rejected as "maybe written", never as "not written".
   */
  async abort(): Promise<void> {
    const aborted = call(() => this.#native.abort()).finally(() => this.#end())
    this.#closing ??= aborted
    return aborted
  }

  /**
   * `await using w = await ShardWriter.open(...)` closes the writer at scope exit (Node ≥ 22;
   * on Node 20 use `try { … } finally { await w.close() }`).
   */
  async [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
