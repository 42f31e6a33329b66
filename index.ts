/**
 * memwal: a durable, write-ahead-logged MemTable of Apache Arrow record batches.
 *
 * A {@link ShardWriter} owns one shard. In durable mode `await writer.put(batches)` resolves
 * only once those exact rows are in a WAL entry on the object store, so a crash loses nothing
 * it acknowledged. Rows are readable at once (`scan()`); full MemTables become immutable
 * Parquet generation files; a new writer of the same shard fences the old one, whose calls
 * then reject with a {@link FencedError}.
 *
 * This file is the whole public API. It converts Arrow data to IPC bytes at the edge, turns
 * native errors into typed {@link MemWalError}s, and otherwise forwards to the Rust core.
 *
 * @packageDocumentation
 */

import { type Data, RecordBatch, Schema, Table, Type, tableFromIPC, tableToIPC } from 'apache-arrow'

import {
  NativeObjectStore,
  NativeShardReader,
  NativeShardWriter,
  NativeWalTailer,
  type NativeWriteTicket,
  type NativeWriterOptions,
} from './native.js'

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** Stable error codes. Branch on these, not on messages. */
export type MemWalErrorCode = 'FENCED' | 'INVALID_ARGUMENT' | 'SCHEMA_MISMATCH' | 'CLOSED' | 'CORRUPT' | 'IO'

/**
 * Why a writer was fenced: another writer claimed the shard (`PeerClaimedEpoch`), or this
 * writer could not make its WAL durable (`PersistenceFailure`). Both are terminal for the
 * writer; reopen the shard to replay its WAL.
 */
export type FenceReason = 'PeerClaimedEpoch' | 'PersistenceFailure'

/**
 * Every error memwal throws or rejects with. `code` is stable; `message` says what happened
 * and what to do.
 */
export class MemWalError extends Error {
  /** The stable error code. */
  readonly code: MemWalErrorCode

  /** @hidden */
  constructor(code: MemWalErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'MemWalError'
    this.code = code
  }
}

/**
 * The writer lost the shard (`fenceReason: 'PeerClaimedEpoch'`) or can no longer vouch for its
 * WAL (`'PersistenceFailure'`). Every later call on the writer fails with the same error; open
 * a new writer to take the shard over and replay the WAL.
 */
export class FencedError extends MemWalError {
  /** Why the writer was fenced. */
  readonly fenceReason: FenceReason

  /** @hidden */
  constructor(fenceReason: FenceReason, message: string, options?: { cause?: unknown }) {
    super('FENCED', message, options)
    this.name = 'FencedError'
    this.fenceReason = fenceReason
  }
}

/** A bad argument or option. Fix the call; nothing was written. */
export class InvalidArgumentError extends MemWalError {
  /** @hidden */
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_ARGUMENT', message, options)
    this.name = 'InvalidArgumentError'
  }
}

/** The data's schema is not the shard's; the message names the differing field. */
export class SchemaMismatchError extends MemWalError {
  /** @hidden */
  constructor(message: string, options?: { cause?: unknown }) {
    super('SCHEMA_MISMATCH', message, options)
    this.name = 'SchemaMismatchError'
  }
}

/** The handle was closed or aborted (or its background task stopped). Open a new one. */
export class ClosedError extends MemWalError {
  /** @hidden */
  constructor(message: string, options?: { cause?: unknown }) {
    super('CLOSED', message, options)
    this.name = 'ClosedError'
  }
}

/** Stored data could not be decoded; the message names the object. */
export class CorruptError extends MemWalError {
  /** @hidden */
  constructor(message: string, options?: { cause?: unknown }) {
    super('CORRUPT', message, options)
    this.name = 'CorruptError'
  }
}

/** The object store failed; the message keeps the cause. Often transient. */
export class IoError extends MemWalError {
  /** @hidden */
  constructor(message: string, options?: { cause?: unknown }) {
    super('IO', message, options)
    this.name = 'IoError'
  }
}

const TAG = /^\[memwal:([A-Z_]+)(?::([A-Za-z]+))?\] /

/** Node-API statuses that mean "an argument had the wrong type". */
const ARGUMENT_STATUSES = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NameExpected',
  'FunctionExpected',
  'NumberExpected',
  'BooleanExpected',
  'ArrayExpected',
  'BigintExpected',
  'DateExpected',
  'ArrayBufferExpected',
  'DetachableArraybufferExpected',
])

function errorOf(code: MemWalErrorCode, message: string, fenceReason: string | undefined, cause: unknown): MemWalError {
  const options = { cause }
  switch (code) {
    case 'FENCED':
      return new FencedError(fenceReason === 'PersistenceFailure' ? 'PersistenceFailure' : 'PeerClaimedEpoch', message, options)
    case 'INVALID_ARGUMENT':
      return new InvalidArgumentError(message, options)
    case 'SCHEMA_MISMATCH':
      return new SchemaMismatchError(message, options)
    case 'CLOSED':
      return new ClosedError(message, options)
    case 'CORRUPT':
      return new CorruptError(message, options)
    case 'IO':
      return new IoError(message, options)
  }
}

/** The one place native errors become typed errors. */
function translate(e: unknown): unknown {
  if (e instanceof MemWalError || !(e instanceof Error)) {
    return e
  }
  const m = TAG.exec(e.message)
  if (m !== null) {
    return errorOf(m[1] as MemWalErrorCode, e.message.slice(m[0].length), m[2], e)
  }
  const status = (e as { code?: unknown }).code
  if (typeof status === 'string' && ARGUMENT_STATUSES.has(status)) {
    return new InvalidArgumentError(e.message, { cause: e })
  }
  return new IoError(e.message, { cause: e })
}

async function call<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f()
  } catch (e) {
    throw translate(e)
  }
}

function callSync<T>(f: () => T): T {
  try {
    return f()
  } catch (e) {
    throw translate(e)
  }
}

// ---------------------------------------------------------------------------------------------
// Object stores
// ---------------------------------------------------------------------------------------------

/** Test hooks that make the WAL's object store misbehave. All faults are off by default. */
export class StoreFaults {
  readonly #native: NativeObjectStore

  /** @hidden */
  constructor(native: NativeObjectStore) {
    this.#native = native
  }

  /**
   * Fail the next `n` WAL-entry puts with a transient error; `Infinity` fails every WAL put
   * until {@link StoreFaults.recover}.
   */
  failWalPuts(n: number): void {
    if (typeof n !== 'number') {
      throw new InvalidArgumentError(`failWalPuts(n) expects a number (a count or Infinity), got ${describe(n)}`)
    }
    callSync(() => this.#native.failWalPuts(n))
  }

  /** When on, a failing WAL put lands in the store before its error is returned. */
  setLostAck(on: boolean): void {
    if (typeof on !== 'boolean') {
      throw new InvalidArgumentError(`setLostAck(on) expects a boolean, got ${describe(on)}`)
    }
    callSync(() => this.#native.setLostAck(on))
  }

  /** Switches every fault off. */
  recover(): void {
    callSync(() => this.#native.recover())
  }

  /** WAL-entry puts attempted through this store so far (failed or not). */
  walPutAttempts(): number {
    return callSync(() => this.#native.walPutAttempts())
  }
}

const storeNatives = new WeakMap<ObjectStore, NativeObjectStore>()

/**
 * Where shards live: a local directory (fsync on), an in-memory store, or a URI.
 *
 * @example
 * ```ts
 * const store = ObjectStore.local('./data')
 * const shared = ObjectStore.fromUri('memory://tests') // same objects for every open in this process
 * ```
 */
export class ObjectStore {
  /** Fault injection for tests (shared by every handle on the same store). */
  readonly faults: StoreFaults
  readonly #native: NativeObjectStore

  private constructor(native: NativeObjectStore) {
    this.#native = native
    this.faults = new StoreFaults(native)
    storeNatives.set(this, native)
  }

  /**
   * A local directory. Files and directories are fsynced before a write is acknowledged. The
   * directory is created on the first write.
   *
   * @throws {InvalidArgumentError} if the path is empty or names a file.
   */
  static local(dir: string): ObjectStore {
    requireString('ObjectStore.local(dir)', dir)
    return new ObjectStore(callSync(() => NativeObjectStore.local(dir)))
  }

  /** A fresh, private in-memory store (nothing survives the process). */
  static memory(): ObjectStore {
    return new ObjectStore(callSync(() => NativeObjectStore.memory()))
  }

  /**
   * A store from a location string: `file:///abs/path` or a plain path (local directory),
   * `memory://NAME` (an in-process store shared by every open that uses the same name), or an
   * object store: `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`.
   *
   * Object stores take their configuration from `storage` and from the environment (for S3
   * the usual `AWS_*` variables); `storage` wins. Nothing is contacted until the store is used.
   *
   * @param uri - the location
   * @param storage - options of an object store location (see {@link StorageOptions})
   * @returns the store
   * @throws {InvalidArgumentError} for an empty location, an unsupported scheme, an unknown
   * storage option or a value of the wrong type, missing credentials, or storage options
   * given for a local or in-memory location
   *
   * @example
   * ```ts
   * const store = ObjectStore.fromUri('s3://my-bucket/events', { region: 'eu-west-1' })
   * const writer = await ShardWriter.open(store, { schema })
   * ```
   */
  static fromUri(uri: string, storage?: StorageOptions): ObjectStore {
    requireString('ObjectStore.fromUri(uri)', uri)
    const options = storageOf('ObjectStore.fromUri(uri, storage)', storage)
    return new ObjectStore(callSync(() => NativeObjectStore.fromUri(uri, options)))
  }

  /** Where the store lives. */
  get location(): string {
    return this.#native.location
  }

  /** Ids of the shards present in this store. */
  async listShards(): Promise<string[]> {
    return call(() => this.#native.listShards())
  }
}

/** A location: a path or URI string, or an {@link ObjectStore}. */
export type Location = string | ObjectStore

/**
 * Options of an object store location (`s3://`, `gs://`, `az://`), as the `storage` option of
 * {@link ShardWriter.open}, {@link ShardReader.open} and {@link WalTailer.open}, or the second
 * argument of {@link ObjectStore.fromUri}. They override the environment.
 *
 * The named fields are the common S3 ones. Every other
 * [object_store](https://docs.rs/object_store) configuration key of the location's store is
 * accepted too, in camelCase or snake_case (S3: `AmazonS3ConfigKey`, e.g. `checksumAlgorithm`;
 * GCS: `GoogleConfigKey`, e.g. `serviceAccount`, `serviceAccountKey`; Azure:
 * `AzureConfigKey`, e.g. `accountName`, `accessKey`, `sasKey`). Values are strings, numbers or
 * booleans; an unknown key is an {@link InvalidArgumentError}.
 *
 * Credentials must come from somewhere explicit: these options, or the environment (for S3
 * `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, `AWS_WEB_IDENTITY_TOKEN_FILE` or the container
 * credentials variables; for GCS `GOOGLE_SERVICE_ACCOUNT` or gcloud's application-default
 * credentials; for Azure `AZURE_STORAGE_ACCOUNT_KEY` and the like). To use the machine's role
 * from the cloud's metadata service (an EC2 instance profile, a GCE service account, an Azure
 * managed identity), set `instanceCredentials: true`; without credentials and without it,
 * opening fails at once.
 */
export interface StorageOptions {
  /** The bucket's AWS region, e.g. `us-east-1` (environment: `AWS_REGION`). */
  region?: string
  /**
   * The endpoint URL, for S3-compatible stores (MinIO, R2, a test server), e.g.
   * `http://127.0.0.1:9000` (environment: `AWS_ENDPOINT`).
   * @defaultValue the AWS endpoint of the region
   */
  endpoint?: string
  /**
   * Allow a plain `http://` endpoint.
   * @defaultValue false
   */
  allowHttp?: boolean
  /** Access key id (environment: `AWS_ACCESS_KEY_ID`). */
  accessKeyId?: string
  /** Secret access key (environment: `AWS_SECRET_ACCESS_KEY`). */
  secretAccessKey?: string
  /** Session token of temporary credentials (environment: `AWS_SESSION_TOKEN`). */
  sessionToken?: string
  /**
   * `true`: address the bucket as `https://bucket.endpoint/` (virtual-hosted style);
   * `false`: as `https://endpoint/bucket/` (path style, what most S3-compatible servers want).
   * @defaultValue false
   */
  virtualHostedStyleRequest?: boolean
  /**
   * Use the machine's credentials from the cloud's metadata service when none are configured.
   * @defaultValue false (no credentials is an error)
   */
  instanceCredentials?: boolean
  /**
   * Retries of one failed request (5xx, throttling, a reset connection) inside the object
   * store client, before memwal's own WAL retries (`maxWalPersistRetries`) see the failure.
   * @defaultValue 10
   */
  clientMaxRetries?: number
  /**
   * Seconds after which the client stops retrying one request.
   * @defaultValue 180
   */
  clientRetryTimeout?: number
  /** Any other object_store configuration key of the location's store. */
  [key: string]: string | number | boolean | undefined
}

const STORAGE_OPTION_TYPES: Record<string, 'string' | 'boolean' | 'number'> = {
  region: 'string',
  endpoint: 'string',
  allowHttp: 'boolean',
  accessKeyId: 'string',
  secretAccessKey: 'string',
  sessionToken: 'string',
  virtualHostedStyleRequest: 'boolean',
  instanceCredentials: 'boolean',
  clientMaxRetries: 'number',
  clientRetryTimeout: 'number',
}

/** Type-checks storage options and turns their values into strings (core checks the keys). */
function storageOf(what: string, storage: unknown): Record<string, string> | undefined {
  if (storage === undefined) return undefined
  if (typeof storage !== 'object' || storage === null || Array.isArray(storage)) {
    throw new InvalidArgumentError(`${what}: storage must be an object of options, got ${describe(storage)}`)
  }
  const out: Record<string, string> = {}
  for (const [key, v] of Object.entries(storage)) {
    if (v === undefined) continue
    const expected = STORAGE_OPTION_TYPES[key]
    const ok =
      expected === undefined
        ? typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))
        : typeof v === expected && (expected !== 'number' || Number.isFinite(v))
    if (!ok) {
      throw new InvalidArgumentError(
        `invalid storage option ${key}: expected ${expected === undefined ? 'a string, number or boolean' : `a ${expected}`}, got ${describe(v)}`,
      )
    }
    out[key] = String(v)
  }
  return out
}

function nativeStore(location: Location, storage?: Record<string, string>): NativeObjectStore {
  if (location instanceof ObjectStore) {
    if (storage !== undefined) {
      throw new InvalidArgumentError(
        'storage options belong to the ObjectStore: pass them to ObjectStore.fromUri(uri, storage), or pass the URI string as the location',
      )
    }
    const n = storeNatives.get(location)
    if (n !== undefined) return n
  }
  if (typeof location === 'string') {
    return callSync(() => NativeObjectStore.fromUri(location, storage))
  }
  throw new InvalidArgumentError(
    `location must be a path, a URI (file:///abs/path, memory://NAME, s3://bucket/prefix) or an ObjectStore, got ${describe(location)}`,
  )
}

// ---------------------------------------------------------------------------------------------
// Arrow data at the edge
// ---------------------------------------------------------------------------------------------

/** What `put` accepts: a Table, a RecordBatch, an array of RecordBatches, or IPC stream bytes. */
export type PutData = Table | RecordBatch | RecordBatch[] | Uint8Array

function describe(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'object') return `an object (${(v as object).constructor?.name ?? 'Object'})`
  return `${typeof v} ${String(v)}`
}

function requireString(what: string, v: unknown): asserts v is string {
  if (typeof v !== 'string') {
    throw new InvalidArgumentError(`${what} expects a string, got ${describe(v)}`)
  }
}

/** A put's data as Arrow IPC stream bytes (any input), checked against `rows`/`columns`. */
interface IpcData {
  kind: 'ipc'
  bytes: Uint8Array
  rows: number | null
  columns: number | null
}

/**
 * A put's batches as column buffers (the fast path for Tables; see `columns.rs` in the
 * binding): the schema as an IPC schema message, each batch's row count, three words per array
 * node in depth-first order (length, offset, has-validity), and the nodes' buffers.
 */
interface ColumnData {
  kind: 'columns'
  schema: Uint8Array
  batches: Float64Array
  nodes: Float64Array
  buffers: Uint8Array[]
}

type Encoded = IpcData | ColumnData

function encodeTable(table: Table): Encoded {
  return columnsOf(table.schema, table.batches) ?? ipcOf(table)
}

function ipcOf(table: Table): IpcData {
  let bytes: Uint8Array
  try {
    bytes = tableToIPC(table, 'stream')
  } catch (e) {
    throw new InvalidArgumentError(
      `the Table could not be encoded as Arrow IPC (${(e as Error).message}). If two copies of apache-arrow are installed, align them to ^21.2 (npm ls apache-arrow) or pass IPC bytes`,
      { cause: e },
    )
  }
  return { kind: 'ipc', bytes, rows: table.numRows, columns: table.numCols }
}

const schemaMessages = new WeakMap<Schema, Uint8Array>()

/** The IPC schema message of `schema`, encoded once per Schema object. */
function schemaMessage(schema: Schema): Uint8Array {
  let bytes = schemaMessages.get(schema)
  if (bytes === undefined) {
    bytes = tableToIPC(new Table(schema), 'stream')
    schemaMessages.set(schema, bytes)
  }
  return bytes
}

function view(a: ArrayBufferView): Uint8Array {
  return a instanceof Uint8Array ? a : new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

/**
 * Appends `data`'s node and buffers in the order `columns.rs` reads them. Returns false for
 * a type the fast path does not carry (the caller then encodes IPC instead).
 */
function pushNode(data: Data, nodes: number[], buffers: Uint8Array[]): boolean {
  const bitmap = data.nullBitmap as Uint8Array | undefined
  const hasValidity = data.nullCount !== 0 && bitmap !== undefined && bitmap.byteLength > 0
  nodes.push(data.length, data.offset, hasValidity ? 1 : 0)
  if (hasValidity) buffers.push(bitmap)
  const children = data.children as Data[]
  switch (data.type.typeId) {
    case Type.Null:
      return true
    case Type.Int:
    case Type.Float:
    case Type.Bool:
    case Type.Decimal:
    case Type.Date:
    case Type.Time:
    case Type.Timestamp:
    case Type.Interval:
    case Type.Duration:
    case Type.FixedSizeBinary:
      buffers.push(view(data.values))
      return true
    case Type.Utf8:
    case Type.Binary:
    case Type.LargeUtf8:
    case Type.LargeBinary:
      buffers.push(view(data.valueOffsets), view(data.values))
      return true
    case Type.List:
    case Type.LargeList:
    case Type.Map:
      buffers.push(view(data.valueOffsets))
      return pushNode(children[0]!, nodes, buffers)
    case Type.FixedSizeList:
      return pushNode(children[0]!, nodes, buffers)
    case Type.Struct:
      return children.every((c) => pushNode(c, nodes, buffers))
    case Type.Dictionary: {
      const dictionary = data.dictionary?.data
      if (dictionary === undefined || dictionary.length !== 1) return false
      buffers.push(view(data.values))
      return pushNode(dictionary[0]!, nodes, buffers)
    }
    default:
      return false
  }
}

function columnsOf(schema: Schema, batches: RecordBatch[]): ColumnData | null {
  const nodes: number[] = []
  const buffers: Uint8Array[] = []
  for (const b of batches) {
    for (const child of b.data.children) {
      if (!pushNode(child, nodes, buffers)) return null
    }
  }
  return {
    kind: 'columns',
    schema: schemaMessage(schema),
    batches: Float64Array.from(batches, (b) => b.numRows),
    nodes: Float64Array.from(nodes),
    buffers,
  }
}

/**
 * Puts up to this many bytes are decoded and inserted on the JavaScript thread (a few
 * microseconds); larger ones are decoded off the event loop.
 */
const SYNC_INSERT_LIMIT = 256 * 1024

/**
 * A put that inserts synchronously (`#tryInsert`) settles without an event-loop turn, so a
 * tight `for (;;) await writer.put(rows)` would starve timers, I/O and the durability
 * acknowledgements of other writers. Such puts let the event loop run once per this interval.
 */
const YIELD_INTERVAL_MS = 1
let lastYield = performance.now()

/** A macrotask to await if synchronous inserts have held the event loop for an interval. */
function yieldIfDue(): Promise<void> | null {
  const now = performance.now()
  if (now - lastYield < YIELD_INTERVAL_MS) return null
  lastYield = now
  return new Promise((resolve) => setImmediate(resolve))
}

/**
 * Durable puts that inserted on this thread wait here, by id, for the binding to report their
 * WAL append (`relayDurable`): one callback per append settles all of its puts, where a native
 * promise per put cost more than the insert itself.
 */
interface DurableWaiter {
  resolve: () => void
  reject: (e: unknown) => void
}
const durableWaiters = new Map<number, DurableWaiter>()
let nextDurableId = 1
/** Holds the event loop open while a put waits in `durableWaiters` (the binding's does not). */
const durableKeepAlive = setInterval(() => undefined, 2 ** 31 - 1)
durableKeepAlive.unref()

function durable(id: number): Promise<void> {
  if (durableWaiters.size === 0) durableKeepAlive.ref()
  return new Promise((resolve, reject) => durableWaiters.set(id, { resolve, reject }))
}

function takeDurable(id: number): DurableWaiter | undefined {
  const w = durableWaiters.get(id)
  if (w !== undefined) durableWaiters.delete(id)
  return w
}

function settleDurable(ok: number[], failed: number[], messages: string[]): void {
  for (const id of ok) takeDurable(id)?.resolve()
  failed.forEach((id, i) => takeDurable(id)?.reject(translate(new Error(messages[i]))))
  if (durableWaiters.size === 0) durableKeepAlive.unref()
}

function encodedBytes(e: Encoded): number {
  return e.kind === 'ipc' ? e.bytes.byteLength : e.buffers.reduce((n, b) => n + b.byteLength, 0)
}

function schemaText(s: Schema): string {
  return s.fields.map((f) => `${f.name}: ${String(f.type)}${f.nullable ? '' : ' not null'}`).join(', ')
}

function encode(data: unknown): Encoded {
  if (data instanceof Uint8Array) {
    return { kind: 'ipc', bytes: data, rows: null, columns: null }
  }
  if (data instanceof Table) {
    return encodeTable(data)
  }
  if (data instanceof RecordBatch) {
    return encodeTable(new Table(data))
  }
  if (Array.isArray(data)) {
    if (data.length === 0) {
      throw new InvalidArgumentError('Cannot write empty batch list; pass at least one RecordBatch')
    }
    // An index loop, not forEach: forEach skips the holes of a sparse array.
    for (let i = 0; i < data.length; i++) {
      if (!(data[i] instanceof RecordBatch)) {
        throw new InvalidArgumentError(`put expects RecordBatch elements, but element ${i} is ${describe(data[i])}`)
      }
    }
    const batches = data as RecordBatch[]
    const first = batches[0]!.schema
    batches.forEach((b, i) => {
      if (schemaText(b.schema) !== schemaText(first)) {
        throw new SchemaMismatchError(
          `batch ${i} has schema (${schemaText(b.schema)}) but batch 0 has (${schemaText(first)}); every batch of a put needs the shard's schema`,
        )
      }
    })
    return encodeTable(new Table(batches))
  }
  throw new InvalidArgumentError(
    `put expects an apache-arrow Table, RecordBatch, RecordBatch[] or Arrow IPC stream bytes (Uint8Array), got ${describe(data)}`,
  )
}

function schemaBytes(schema: unknown): Uint8Array {
  if (!(schema instanceof Schema)) {
    throw new InvalidArgumentError(`options.schema must be an apache-arrow Schema, got ${describe(schema)}`)
  }
  return tableToIPC(new Table(schema), 'stream')
}

// ---------------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------------

/** Options of {@link ShardWriter.open}. Sizes are bytes, durations milliseconds. */
export interface ShardWriterOptions {
  /** The shard's schema. Every put must match it (field names, types, nullability). */
  schema: Schema
  /**
   * The shard to write (a UUID). Reopening an existing shard takes it over from its previous
   * writer and replays its WAL.
   * @defaultValue a new random UUID (a new shard)
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
   * positions are writer-lifetime.
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
   * Retries of a failing WAL put at the same position before the writer fences itself with
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
   * Backpressure: puts wait (never fail) while unflushed MemTables hold more than this.
   * @defaultValue 1073741824 (1 GiB)
   */
  maxUnflushedMemtableBytes?: number
  /**
   * Options of an object store location given as a string (`s3://`, `gs://`, `az://`):
   * region, endpoint, credentials… See {@link StorageOptions}.
   * @defaultValue none (configuration from the environment)
   */
  storage?: StorageOptions
}

const NUMBER_OPTIONS = [
  'maxWalBufferSize',
  'maxWalPersistRetries',
  'walPersistRetryBaseDelayMs',
  'maxMemtableSize',
  'maxMemtableBatches',
  'maxUnflushedMemtableBytes',
] as const
const BOOLEAN_OPTIONS = ['durableWrite', 'enableMemtable'] as const
const KNOWN_OPTIONS = new Set<string>([
  'schema',
  'shardId',
  'storage',
  'maxWalFlushIntervalMs',
  ...NUMBER_OPTIONS,
  ...BOOLEAN_OPTIONS,
])

function nativeOptions(options: unknown): {
  schema: Uint8Array
  native: NativeWriterOptions
  storage: Record<string, string> | undefined
} {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`ShardWriter.open needs an options object with a schema, got ${describe(options)}`)
  }
  const o = options as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (!KNOWN_OPTIONS.has(key)) {
      throw new InvalidArgumentError(`unknown option \`${key}\`; known options: ${[...KNOWN_OPTIONS].join(', ')}`)
    }
  }
  const native: NativeWriterOptions = {}
  if (o.shardId !== undefined) {
    requireString('options.shardId', o.shardId)
    native.shardId = o.shardId
  }
  for (const key of BOOLEAN_OPTIONS) {
    const v = o[key]
    if (v === undefined) continue
    if (typeof v !== 'boolean') {
      throw new InvalidArgumentError(`invalid option ${key}: expected a boolean, got ${describe(v)}`)
    }
    native[key] = v
  }
  for (const key of NUMBER_OPTIONS) {
    const v = o[key]
    if (v === undefined) continue
    if (typeof v !== 'number') {
      throw new InvalidArgumentError(`invalid option ${key}: expected a number, got ${describe(v)}`)
    }
    native[key] = v
  }
  const interval = o.maxWalFlushIntervalMs
  if (interval === null) {
    native.disableWalFlushInterval = true
  } else if (interval !== undefined) {
    if (typeof interval !== 'number') {
      throw new InvalidArgumentError(
        `invalid option maxWalFlushIntervalMs: expected a number or null, got ${describe(interval)}`,
      )
    }
    native.maxWalFlushIntervalMs = interval
  }
  return { schema: schemaBytes(o.schema), native, storage: storageOf('ShardWriter.open', o.storage) }
}

/** Where a put's rows went. */
export interface WriteResult {
  /** The MemTable generation that accepted the rows; `null` in WAL-only mode. */
  generation: number | null
  /**
   * Batch positions `[start, end)`, local to `generation` (the first put after a rotation is
   * `0..1` again); writer-lifetime in WAL-only mode.
   */
  batchPositions: {
    /** First batch position of the put (inclusive). */
    start: number
    /** One past the put's last batch position (exclusive). */
    end: number
  }
}

/** What {@link ShardWriter.putNoWait} returns. */
export interface PutNoWaitResult {
  /** Where the rows went (they are in memory already). */
  result: WriteResult
  /** Resolves when the rows are durable; `null` in non-durable mode. */
  durable: Promise<void> | null
}

/** Statistics of the active MemTable and the frozen ones awaiting their generation flush. */
export interface MemTableStats {
  /** Generation of the active MemTable (the one its flush will produce). */
  generation: number
  /** Rows in the active MemTable. */
  rowCount: number
  /** Record batches in the active MemTable. */
  batchCount: number
  /** Estimated in-memory bytes of the active MemTable; it freezes at `maxMemtableSize`. */
  estimatedSize: number
  /** Batches of the active MemTable not yet in the WAL. */
  pendingWalBatchCount: number
  /** Rows of the active MemTable not yet in the WAL. */
  pendingWalRowCount: number
  /** Estimated bytes of the active MemTable not yet in the WAL. */
  pendingWalEstimatedBytes: number
  /** Frozen MemTables waiting for their generation flush (still visible to `scan()`). */
  frozenMemtableCount: number
  /** Estimated bytes of those frozen MemTables; counts towards `maxUnflushedMemtableBytes`. */
  frozenEstimatedBytes: number
}

/** The writer's view of its WAL. */
export interface WalStats {
  /** Where the next WAL entry goes. */
  nextWalEntryPosition: number
  /** Where this writer's fence sentinel went (epoch ≥ 2). */
  fenceSentinelPosition: number | null
  /** WAL entries this writer appended. */
  entriesAppended: number
  /** Their encoded bytes. */
  bytesAppended: number
}

/**
 * Where {@link ShardWriter.open} spent its time. The claim ends once the previous writer is
 * fenced (its next append fails); replay then rebuilds the MemTables from the WAL tail the
 * previous writer left, so it grows with that tail.
 */
export interface OpenStats {
  /** Milliseconds spent claiming the shard: the epoch CAS, finding the WAL tip, the fence sentinel. */
  claimMs: number
  /** Milliseconds spent replaying the WAL tail into MemTables (0 in WAL-only mode). */
  replayMs: number
  /** WAL entries replayed, fence sentinels included. */
  replayedEntries: number
  /** Rows replayed. */
  replayedRows: number
}

/** Write counters. `putsPerWalEntry` is the group-commit factor of durable puts. */
export interface WriteStats {
  /** Successful `put` and `putNoWait` calls. */
  putCount: number
  /** Rows those calls inserted. */
  putRows: number
  /** Milliseconds spent in the in-memory part of puts (validation, backpressure, insert). */
  putTimeMs: number
  /** WAL entries appended (not counting the fence sentinel). */
  walFlushCount: number
  /** Encoded bytes of those WAL entries. */
  walFlushBytes: number
  /** Record batches in those WAL entries. */
  walFlushBatches: number
  /** Milliseconds spent appending them (object-store puts, fsync included). */
  walFlushTimeMs: number
  /** Durable-put completions reported (successes and failures). */
  durableRequests: number
  /** Mean durable puts per WAL entry: the group-commit factor (grows with concurrency). */
  putsPerWalEntry: number
  /** MemTable generations flushed as Parquet files. */
  memtableFlushCount: number
  /** Rows in those generations. */
  memtableFlushRows: number
  /** Milliseconds spent flushing generations. */
  memtableFlushTimeMs: number
  /** Puts that waited for backpressure (see `maxUnflushedMemtableBytes`). */
  backpressureEvents: number
  /** Total milliseconds puts waited for backpressure. */
  backpressureWaitMs: number
}

/** One flushed generation (an immutable Parquet file). */
export interface FlushedGeneration {
  /** Generation number (1 for the first MemTable of a shard). */
  generation: number
  /** Directory relative to the shard directory; the data is `<path>/data.parquet`. */
  path: string
  /** Rows in the generation; `null` if the manifest does not record it. */
  rows: number | null
  /**
   * Estimated in-memory bytes of its rows (not the Parquet file size, which is compressed);
   * `null` if the manifest does not record it.
   */
  bytes: number | null
}

/** A shard manifest version. */
export interface ShardManifest {
  /** The shard id (a UUID); `null` if the manifest does not record one. */
  shardId: string | null
  /** Manifest version: 1 for the first, +1 for every commit. */
  version: number
  /** The fencing token: the epoch of the latest writer to claim the shard. */
  writerEpoch: number
  /** WAL entries at or below this position are in flushed generations. */
  replayAfterWalEntryPosition: number
  /** A hint of the WAL tip when the manifest was written; not authoritative. */
  walEntryPositionLastSeen: number
  /** The generation number the next flushed MemTable gets. */
  currentGeneration: number
  /** Flushed generations, oldest first. */
  flushedGenerations: FlushedGeneration[]
  /** Id of the writer handle that wrote this version. */
  writerId: string
}

function writeResult(r: { generation?: number | null; batchPositions: { start: number; end: number } }): WriteResult {
  return { generation: r.generation ?? null, batchPositions: { start: r.batchPositions.start, end: r.batchPositions.end } }
}

function manifestOf(m: {
  shardId?: string | null
  version: number
  writerEpoch: number
  replayAfterWalEntryPosition: number
  walEntryPositionLastSeen: number
  currentGeneration: number
  flushedGenerations: Array<{ generation: number; path: string; rows?: number | null; bytes?: number | null }>
  writerId: string
}): ShardManifest {
  return {
    ...m,
    shardId: m.shardId ?? null,
    flushedGenerations: m.flushedGenerations.map((g) => ({ ...g, rows: g.rows ?? null, bytes: g.bytes ?? null })),
  }
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

  private constructor(native: NativeShardWriter) {
    this.#native = native
    callSync(() => native.relayDurable(settleDurable))
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
   * @throws {SchemaMismatchError} if the shard was written with another schema
   * @throws {FencedError} if another writer claimed the shard at the same time
   * @throws {CorruptError} if a manifest or WAL entry cannot be decoded
   * @throws {IoError} if the store fails (e.g. a read-only directory)
   */
  static async open(location: Location, options: ShardWriterOptions): Promise<ShardWriter> {
    const { schema, native, storage } = nativeOptions(options)
    const store = nativeStore(location, storage)
    return new ShardWriter(await call(() => NativeShardWriter.open(store, schema, native)))
  }

  /** The shard id (a UUID). Pass it as `shardId` to reopen the shard. */
  get shardId(): string {
    return this.#native.shardId
  }

  /** The epoch this writer claimed (higher than every previous writer's). */
  get epoch(): number {
    return this.#native.epoch
  }

  /**
   * Inserts rows atomically. In durable mode it resolves only once the WAL entry holding
   * exactly these rows is persisted; in non-durable mode, once they are in memory.
   *
   * @param data - a Table, a RecordBatch, RecordBatch[], or Arrow IPC stream bytes
   * @returns the generation and the generation-local batch positions
   * @throws {InvalidArgumentError} for empty input, an empty batch, or bad bytes
   * @throws {SchemaMismatchError} if the data's schema is not the shard's
   * @throws {FencedError} if this put's WAL append failed or the writer was already fenced
   * @throws {ClosedError} after `close()`/`abort()`
   */
  async put(data: PutData): Promise<WriteResult> {
    const e = encode(data)
    const id = nextDurableId++
    const ticket = this.#tryInsert(e, false, id)
    if (ticket !== null) {
      if (!ticket.hasDurable) await yieldIfDue()
      else if (ticket.relayed) await durable(id)
      else await call(() => ticket.wait())
      return writeResult(ticket.result)
    }
    return writeResult(
      await call(() =>
        e.kind === 'columns'
          ? this.#native.putColumns(e.schema, e.batches, e.nodes, e.buffers)
          : this.#native.put(e.bytes, e.rows, e.columns),
      ),
    )
  }

  /**
   * Inserts a small put synchronously (two thread hops cheaper than the async path); `null`
   * for a large put, which is decoded off the event loop, or when backpressure would wait.
   */
  #tryInsert(e: Encoded, noWait: boolean, durableId?: number): NativeWriteTicket | null {
    if (encodedBytes(e) > SYNC_INSERT_LIMIT) return null
    return callSync(() =>
      e.kind === 'columns'
        ? this.#native.tryInsertColumns(e.schema, e.batches, e.nodes, e.buffers, noWait, durableId)
        : this.#native.tryInsert(e.bytes, e.rows, e.columns, noWait, durableId),
    )
  }

  /**
   * Inserts rows and resolves once they are in memory, with a promise of their durability
   * (`null` in non-durable mode). MemTable mode only.
   *
   * @throws like {@link ShardWriter.put}; `durable` rejects like a durable `put` would
   */
  async putNoWait(data: PutData): Promise<PutNoWaitResult> {
    const e = encode(data)
    const inserted = this.#tryInsert(e, true)
    if (inserted !== null) await yieldIfDue()
    const ticket =
      inserted ??
      (await call(() =>
        e.kind === 'columns'
          ? this.#native.putNoWaitColumns(e.schema, e.batches, e.nodes, e.buffers)
          : this.#native.putNoWait(e.bytes, e.rows, e.columns),
      ))
    let durable: Promise<void> | null = null
    if (ticket.hasDurable) {
      durable = call(() => ticket.wait())
      // Callers may ignore `durable`; its rejection must not crash the process.
      durable.catch(() => undefined)
    }
    return { result: writeResult(ticket.result), durable }
  }

  /**
   * Makes every row written so far durable; resolves when it is.
   * @throws {FencedError} if the WAL append fails
   */
  async flush(): Promise<void> {
    return call(() => this.#native.flush())
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
    const s = callSync(() => this.#native.walStats())
    return { ...s, fenceSentinelPosition: s.fenceSentinelPosition ?? null }
  }

  /** Where {@link ShardWriter.open} spent its time: claiming the shard, then replaying the WAL. */
  openStats(): OpenStats {
    return callSync(() => this.#native.openStats())
  }

  /** Write counters (puts, WAL entries, group-commit factor, generation flushes). */
  stats(): WriteStats {
    return callSync(() => this.#native.stats())
  }

  /** The shard's latest manifest, read from the store. */
  async manifest(): Promise<ShardManifest | null> {
    const m = await call(() => this.#native.manifest())
    return m === null || m === undefined ? null : manifestOf(m)
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
   * reports the first error. Later calls reject with {@link ClosedError}.
   */
  async close(): Promise<void> {
    return call(() => this.#native.close())
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
    return call(() => this.#native.abort())
  }

  /** `await using w = await ShardWriter.open(...)` closes the writer at scope exit. */
  async [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

// ---------------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------------

/** Options of {@link ShardReader.open} and {@link WalTailer.open}. */
export interface ShardOptions {
  /** The shard to read. */
  shardId: string
  /**
   * Options of an object store location given as a string (`s3://`, `gs://`, `az://`). See
   * {@link StorageOptions}.
   * @defaultValue none (configuration from the environment)
   */
  storage?: StorageOptions
}

function shardOptionsOf(
  what: string,
  options: unknown,
): { shardId: string; storage: Record<string, string> | undefined } {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`expected an options object with a shardId, got ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (key !== 'shardId' && key !== 'storage') {
      throw new InvalidArgumentError(`unknown option \`${key}\`; known options: shardId, storage`)
    }
  }
  const o = options as { shardId?: unknown; storage?: unknown }
  requireString('options.shardId', o.shardId)
  return { shardId: o.shardId, storage: storageOf(what, o.storage) }
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
   */
  static async open(location: Location, options: ShardOptions): Promise<ShardReader> {
    const { shardId, storage } = shardOptionsOf('ShardReader.open', options)
    const store = nativeStore(location, storage)
    return new ShardReader(await call(() => NativeShardReader.open(store, shardId)))
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

/** One WAL entry, as read by a {@link WalTailer}. */
export interface WalEntry {
  /** 1-based position. */
  position: number
  /** Epoch of the writer that appended it. */
  writerEpoch: number
  /** A fence sentinel (written by a new writer; no rows). */
  isSentinel: boolean
  /** The entry's rows; `null` for a sentinel. */
  table: Table | null
}

/** Reads a shard's WAL entries by position, for change-data capture. Never writes. */
export class WalTailer {
  readonly #native: NativeWalTailer

  private constructor(native: NativeWalTailer) {
    this.#native = native
  }

  /** A tailer over a shard's WAL. */
  static async open(location: Location, options: ShardOptions): Promise<WalTailer> {
    const { shardId, storage } = shardOptionsOf('WalTailer.open', options)
    const store = nativeStore(location, storage)
    return new WalTailer(await call(() => NativeWalTailer.open(store, shardId)))
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
