// Object stores: where shards live. `ObjectStore` wraps the binding's store handle;
// `StorageOptions` configure a cloud location and are type-checked here, before the binding
// checks their keys; `nativeStore` turns any `Location` into the handle the binding opens
// shards on.

import { NativeObjectStore, type NativeStoreStall } from '../native.js'
import { describeValue, requireLocation, requireString, truncate } from './arguments.js'
import { InvalidArgumentError } from './errors.js'
import { call, callSync } from './native-call.js'

/**
 * Who made a store call: a writer's `'claim'` (opening: the epoch claim, the fence sentinel,
 * the WAL replay), its `'put'` (WAL appends), its `'commit'` (a generation's Parquet file,
 * request ids and manifest commit), its `'compaction'`, `'gc'` (collection, in a writer's
 * background or {@link collectGarbage}), a {@link ShardReader}'s `'reader'` (and
 * {@link ObjectStore.listShards}), a {@link WalTailer}'s `'tailer'`, or `'other'` (a writer's
 * own reads such as {@link ShardWriter.manifest}).
 */
export type StoreActor = 'claim' | 'put' | 'commit' | 'compaction' | 'gc' | 'reader' | 'tailer' | 'other'

/**
 * What a store call does: read (`'get'`), probe (`'head'`) or list (`'list'`) objects, create
 * one if absent (`'create'`), stage its data ahead of the create (`'stage'`), overwrite the
 * version hint (`'overwrite'`), delete (`'delete'`), or make written objects durable (`'sync'`,
 * a local directory's file and folder syncs).
 */
export type StoreOp = 'get' | 'head' | 'list' | 'create' | 'stage' | 'overwrite' | 'delete' | 'sync'

/**
 * The kind of object a store call touches: a manifest version (or the manifest folder),
 * `version_hint.json`, a WAL entry (or the WAL folder), a generation's file or folder, a
 * generation's `request_ids.json`, or anything else.
 */
export type StoreObject = 'manifest' | 'version-hint' | 'wal' | 'generation' | 'request-ids' | 'other'

/** Which store call {@link StoreFaults.stall} holds. Every field left out matches anything. */
export interface StallOptions {
  /** Only calls made by this actor. */
  actor?: StoreActor
  /** Only this operation. */
  op?: StoreOp
  /** Only calls on this kind of object. */
  object?: StoreObject
  /**
   * `'before'`: hold the call before it reaches the store. `'after'`: once the store has
   * answered (the call has taken effect), before its caller sees the answer.
   * @defaultValue 'before'
   */
  when?: 'before' | 'after'
  /**
   * Matching calls to let through before the one held.
   * @defaultValue 0
   */
  skip?: number
}

/** A store call, as {@link StoreFaults.calls} lists it. */
export interface StoreCall {
  /** Who made it. */
  actor: StoreActor
  /** What it did. */
  op: StoreOp
  /** On what kind of object. */
  object: StoreObject
  /** The object's (or folder's) path, relative to the store's root. */
  path: string
}

/**
 * What a pending {@link StoreStall.reached} holds open, per fault controller. A stalled call may
 * come from a writer's background work (a generation commit, a compaction, a collection), which
 * does not hold the process open itself (an idle writer must not): without this, a test awaiting
 * such a stall could end as "never resolved" while the call was on its way. So an awaited stall
 * holds the process open while a writer is open on its controller; with none, nothing can make
 * such a call except another awaited call (an open, a scan, a collection), which holds the
 * process open itself, and a stall that is never reached leaves a plain pending promise.
 */
class StallLiveness {
  #writers = 0
  #awaited = 0
  #timer: ReturnType<typeof setInterval> | undefined

  /** Counts one open writer until the returned function is called. */
  writerOpened(): () => void {
    return this.#count(1, 0)
  }

  /** Counts one awaited stall until the returned function is called. */
  stallAwaited(): () => void {
    return this.#count(0, 1)
  }

  get idle(): boolean {
    return this.#writers === 0 && this.#awaited === 0
  }

  #count(writers: number, awaited: number): () => void {
    this.#writers += writers
    this.#awaited += awaited
    this.#update()
    let counted = true
    return () => {
      if (!counted) return
      counted = false
      this.#writers -= writers
      this.#awaited -= awaited
      this.#update()
    }
  }

  #update(): void {
    const hold = this.#writers > 0 && this.#awaited > 0
    if (hold && this.#timer === undefined) {
      // Any referenced handle keeps the event loop running; this one never fires.
      this.#timer = setInterval(() => undefined, 2 ** 30)
    } else if (!hold && this.#timer !== undefined) {
      clearInterval(this.#timer)
      this.#timer = undefined
    }
  }
}

/** Each handle's liveness: a handle has a fault controller of its own, … */
const livenessOfHandle = new WeakMap<NativeObjectStore, StallLiveness>()
/** … but every handle on one `memory://NAME` shares that store's (see `Store::named_memory`). */
const livenessOfName = new Map<string, StallLiveness>()

/** The liveness of `native`'s fault controller; `release` it when done counting. */
function livenessOf(native: NativeObjectStore): { liveness: StallLiveness; release: () => void } {
  const location = native.location
  if (!location.startsWith('memory://') || location === 'memory://') {
    let liveness = livenessOfHandle.get(native)
    if (liveness === undefined) livenessOfHandle.set(native, (liveness = new StallLiveness()))
    return { liveness, release: () => undefined }
  }
  let liveness = livenessOfName.get(location)
  if (liveness === undefined) livenessOfName.set(location, (liveness = new StallLiveness()))
  const shared = liveness
  return { liveness, release: () => shared.idle && livenessOfName.delete(location) }
}

/**
 * Counts a writer opened on `native` as open until the returned function is called (at its
 * close or abort), so that a stall awaited on the same fault controller holds the process open.
 */
export function writerOpenedOn(native: NativeObjectStore): () => void {
  const { liveness, release } = livenessOf(native)
  const closed = liveness.writerOpened()
  return () => {
    closed()
    release()
  }
}

/** The keys {@link StallOptions} may have, so that a misspelt one is not taken for "any". */
const STALL_OPTIONS = ['actor', 'op', 'object', 'when', 'skip'] as const satisfies readonly (keyof StallOptions)[]

/**
 * One store call held by {@link StoreFaults.stall}: from the moment the call is reached until
 * {@link StoreStall.release}. `using stall = faults.stall(...)` releases it at scope exit.
 */
export class StoreStall {
  readonly #native: NativeStoreStall
  readonly #reached: Promise<void>
  readonly #store: NativeObjectStore
  #isReached = false
  #released = false
  /** Ends this stall's hold on the process (see {@link StoreStall.reached}). */
  #stopAwaiting: (() => void) | undefined

  /** @hidden */
  constructor(native: NativeStoreStall, reached: Promise<void>, store: NativeObjectStore) {
    this.#native = native
    this.#store = store
    this.#reached = reached.then(() => {
      this.#isReached = true
      this.#stopAwaiting?.()
    })
  }

  /**
   * Resolves once the matching call is held (the same promise at every call).
   *
   * While it is pending, and until the stall is released, it holds the process open as long as
   * a writer is open on the same fault controller: such a writer's background work (a
   * generation commit, a compaction, a collection) may still make the call. Otherwise it is a
   * plain pending promise: a stall never reached, with no writer open, does not keep the
   * process alive, and a test awaiting it ends as one whose promise never settled. Released
   * before it was reached, the stall lets the call pass straight through, which still
   * resolves this.
   */
  reached(): Promise<void> {
    if (!this.#isReached && !this.#released && this.#stopAwaiting === undefined) {
      const { liveness, release } = livenessOf(this.#store)
      const stop = liveness.stallAwaited()
      this.#stopAwaiting = () => {
        stop()
        release()
      }
    }
    return this.#reached
  }

  /**
   * Lets the held call continue; if it was not reached yet, it will pass straight through.
   * Idempotent. A stall that is never released holds its call until the JavaScript engine
   * reclaims this object, so release every stall (or arm it with `using`) before closing what
   * waits on it.
   */
  release(): void {
    this.#released = true
    this.#stopAwaiting?.()
    callSync(() => this.#native.release())
  }

  /** `using stall = store.faults.stall(...)` releases the stall at scope exit. */
  [Symbol.dispose](): void {
    this.release()
  }
}

/**
 * Test hooks that make an {@link ObjectStore} misbehave. All faults are off by default.
 *
 * Each controller is its handle's: two `ObjectStore.local(dir)` (or `fromUri` of a path) on
 * the same directory have separate ones, so a test can stall one writer's calls and not those
 * of a writer or collection opened on another handle (or on the location string). Every
 * handle on one `memory://NAME`, and every open of that location string, shares one.
 */
export class StoreFaults {
  readonly #native: NativeObjectStore

  /** @hidden */
  constructor(native: NativeObjectStore) {
    this.#native = native
  }

  /**
   * Fail the next `n` WAL appends (the creates of WAL entries) with a transient error;
   * `Infinity` fails every WAL append until {@link StoreFaults.recover}.
   */
  failWalPuts(n: number): void {
    if (typeof n !== 'number') {
      throw new InvalidArgumentError(`failWalPuts(n) expects a number (a count or Infinity), got ${describeValue(n)}`)
    }
    callSync(() => this.#native.failWalPuts(n))
  }

  /** When on, a failing WAL append lands in the store before its error is returned. */
  setLostAck(on: boolean): void {
    if (typeof on !== 'boolean') {
      throw new InvalidArgumentError(`setLostAck(on) expects a boolean, got ${describeValue(on)}`)
    }
    callSync(() => this.#native.setLostAck(on))
  }

  /**
   * Switches every fault off: WAL append failures, lost acknowledgements, and the failures and
   * delays armed by {@link StoreFaults.fail} and {@link StoreFaults.delay} not yet used. Armed
   * stalls stay until released.
   */
  recover(): void {
    callSync(() => this.#native.recover())
  }

  /** WAL appends attempted through this store so far (failed or not). */
  walPutAttempts(): number {
    return callSync(() => this.#native.walPutAttempts())
  }

  /**
   * Holds the next store call through this handle that matches `options` (after `skip` others)
   * until the returned stall is released. Any call of any actor can be held this way, so a
   * test can stop one actor at an exact step, run others to completion, then let it go on.
   * Several stalls may be armed at once; each holds one call. The call is held in the
   * background: the JavaScript thread stays free, and the call's caller (a `put`, a `scan`,
   * a `close`) simply does not settle meanwhile.
   *
   * Only calls through this {@link ObjectStore} handle are seen: open the actor to stall on
   * a handle of its own (see {@link StoreFaults}).
   *
   * @param options - which call to hold (by default the first call of any kind)
   * @returns the stall; await {@link StoreStall.reached}, then {@link StoreStall.release} it
   * @throws {InvalidArgumentError} for an unknown key, or a name that is not one of those
   * {@link StoreActor}, {@link StoreOp} and {@link StoreObject} list (the message lists them),
   * or a `skip` that is not a non-negative integer
   *
   * @example
   * A reader's scan held before its first WAL read while the writer flushes those rows into a
   * generation and collection removes their WAL entries: released, it still returns each row
   * once.
   * ```ts
   * const writer = await ShardWriter.open(ObjectStore.local(dir), { schema, gc: false })
   * await writer.put(rows)
   * const readerStore = ObjectStore.local(dir) // a fault controller of its own
   * const reader = await ShardReader.open(readerStore)
   * using stall = readerStore.faults.stall({ actor: 'reader', op: 'get', object: 'wal' })
   * const scan = reader.scan()
   * await stall.reached() // the scan read the manifest and waits before reading the WAL
   * await writer.forceSealActive()
   * await writer.waitForFlushDrain()
   * await collectGarbage(dir, { keepManifestVersions: 2 })
   * stall.release()
   * console.log((await scan).numRows) // every row put, once
   * ```
   */
  stall(options: StallOptions = {}): StoreStall {
    const spec = stallSpec('stall', options)
    let onReached!: () => void
    const reached = new Promise<void>((resolve) => (onReached = resolve))
    const native = callSync(() => this.#native.stall(spec, () => onReached()))
    return new StoreStall(native, reached, this.#native)
  }

  /**
   * Fails the next `times` store calls that match `options` (any actor, operation and object:
   * a generation flush, a manifest commit, a reader's read, not only WAL appends) with a transient
   * error whose message says `injected failure`. With `when: 'before'` (the default) the call
   * never reaches the store; with `'after'` it does, and its answer is lost (the ambiguous
   * "applied, response lost" case). memwal treats it as it treats the same failure from a real
   * store: a WAL append, a generation flush and a manifest commit are retried; a read rejects
   * with `IoError`. {@link StoreFaults.recover} disarms what is left.
   *
   * @param options - which calls, as {@link StoreFaults.stall} takes them
   * @param times - how many matching calls fail (after `options.skip` let through)
   * @defaultValue times: 1
   * @throws {InvalidArgumentError} for an unknown name or option, or a `times` that is not a
   * non-negative integer
   *
   * @example
   * ```ts
   * // The next generation flush's Parquet file fails twice to be created; the flush retries.
   * store.faults.fail({ actor: 'commit', op: 'create', object: 'generation' }, 2)
   * ```
   */
  fail(options: StallOptions = {}, times = 1): void {
    const spec = stallSpec('fail', options)
    callSync(() => this.#native.fail(spec, count('fail', 'times', times)))
  }

  /**
   * Delays the next `times` store calls that match `options` by `ms` milliseconds each: a slow
   * store for one kind of call (manifest commits, a reader's gets) without slowing the others.
   * {@link StoreFaults.recover} disarms what is left.
   *
   * @param options - which calls, as {@link StoreFaults.stall} takes them
   * @param ms - how long each waits, in milliseconds
   * @param times - how many matching calls wait
   * @defaultValue times: 1
   * @throws {InvalidArgumentError} for an unknown name or option, or an `ms` or `times` that is
   * not a non-negative integer
   */
  delay(options: StallOptions, ms: number, times = 1): void {
    const spec = stallSpec('delay', options)
    callSync(() => this.#native.delay(spec, count('delay', 'ms', ms), count('delay', 'times', times)))
  }

  /**
   * Starts listing every store call through this handle (before each reaches the store),
   * dropping any earlier list; {@link StoreFaults.calls} returns it. A suite can first learn
   * the calls an operation makes, then stall each in turn.
   */
  recordCalls(): void {
    callSync(() => this.#native.recordCalls())
  }

  /** The calls listed since {@link StoreFaults.recordCalls}, oldest first (empty if it was not called). */
  calls(): StoreCall[] {
    return callSync(() => this.#native.calls()) as StoreCall[]
  }
}

/** `options` of `what` (`stall`, `fail`, `delay`) checked and ready for the binding. */
function stallSpec(what: string, options: StallOptions): StallOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what}(options) expects an object, got ${describeValue(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (!(STALL_OPTIONS as readonly string[]).includes(key)) {
      throw new InvalidArgumentError(
        `${what}(options): unknown option ${truncate(JSON.stringify(key))}; the options are ${STALL_OPTIONS.join(', ')}`,
      )
    }
  }
  for (const key of ['actor', 'op', 'object', 'when'] as const) {
    const v = options[key]
    if (v !== undefined && typeof v !== 'string') {
      throw new InvalidArgumentError(`${what}: ${key} must be a string, got ${describeValue(v)}`)
    }
  }
  if (options.skip !== undefined) count(what, 'skip', options.skip)
  const { actor, op, object, when, skip } = options
  return { actor, op, object, when, skip }
}

/** `n` if it is a non-negative integer, else an `InvalidArgumentError` naming `what`'s `name`. */
function count(what: string, name: string, n: unknown): number {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError(`${what}: ${name} must be a non-negative integer, got ${describeValue(n)}`)
  }
  return n
}

/**
 * The native handle of each ObjectStore. A WeakMap rather than a getter, so the handle stays
 * out of the public class (its `#native` field is unreachable from the other files).
 */
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
  /**
   * Fault injection for tests: this handle's own controller (see {@link StoreFaults} for
   * which handles share one).
   */
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
   * @throws {InvalidArgumentError} if the path is empty, contains a NUL byte, or names a file.
   */
  static local(dir: string): ObjectStore {
    requireLocation('ObjectStore.local(dir)', dir)
    return new ObjectStore(callSync(() => NativeObjectStore.local(dir)))
  }

  /** A fresh, private in-memory store (nothing survives the process). */
  static memory(): ObjectStore {
    return new ObjectStore(callSync(() => NativeObjectStore.memory()))
  }

  /**
   * A store from a location string: `file:///abs/path` or a plain path (local directory),
   * `memory://NAME` (an in-process store shared by every open that uses the same name; it lives
   * until {@link dropMemoryStore} or the process exits), or an
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
    requireLocation('ObjectStore.fromUri(uri)', uri)
    const options = storageOf('ObjectStore.fromUri(uri, storage)', storage)
    return new ObjectStore(callSync(() => NativeObjectStore.fromUri(uri, options)))
  }

  /** Where the store lives. */
  get location(): string {
    return this.#native.location
  }

  /**
   * The shards in this store, sorted by id, each with its name (`null` for a shard only ever
   * opened by id, or one whose manifest cannot be read, such as a shard whose manifest folder
   * was deleted while its WAL or generations remain: opening it says why). An empty shard
   * folder (a first open cut off before it wrote anything) holds nothing and is not listed: see
   * {@link ObjectStore.listIncompleteShards}.
   */
  async listShards(): Promise<ShardInfo[]> {
    const listing = await call(() => this.#native.listShards())
    return listing.shards.map(({ id, name }) => ({ id, name: name ?? null }))
  }

  /**
   * Ids of the shard folders in this store that have no manifest and nothing else: a first open
   * cut off before it wrote one. They hold nothing acknowledged; readers skip them, and `memwal
   * inspect` notes them. (A folder with WAL entries or generations but no manifest is listed by
   * {@link ObjectStore.listShards}, and opening it fails with `CorruptError`.)
   */
  async listIncompleteShards(): Promise<string[]> {
    return (await call(() => this.#native.listShards())).incomplete
  }
}

/** A shard in an {@link ObjectStore}, from {@link ObjectStore.listShards}. */
export interface ShardInfo {
  /** The shard id (a UUID). */
  id: string
  /** The shard's name; `null` for a shard only ever opened by id. */
  name: string | null
}

/**
 * Drops the in-process store `memory://NAME`, so that its objects can be freed. A named memory
 * store otherwise lives until the process exits, however many writers and readers have closed.
 * The next open of `memory://NAME` starts from an empty store; handles still open on the
 * dropped one keep working on it until they are closed.
 *
 * @param name - the NAME of `memory://NAME` (or the whole `memory://NAME` location)
 * @returns whether such a store existed
 * @throws {InvalidArgumentError} if `name` is not a string
 *
 * @example
 * ```ts
 * t.teardown(() => dropMemoryStore('tests-1'))
 * ```
 */
export function dropMemoryStore(name: string): boolean {
  requireString('dropMemoryStore(name)', name)
  const bare = name.startsWith('memory://') ? name.slice('memory://'.length) : name
  return callSync(() => NativeObjectStore.dropMemoryStore(bare))
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
   * Seconds after which the client stops retrying one request. With `timeout`, it bounds how
   * long one request to a store that does not answer can take (the budget plus at most one
   * request); then the call fails with a `TimeoutError`.
   * @defaultValue 60
   */
  clientRetryTimeout?: number
  /**
   * Time allowed to connect, as a duration string (`'5s'`, `'500ms'`).
   * @defaultValue '5s'
   */
  connectTimeout?: string
  /**
   * Time allowed to one request, from connecting to its last byte, as a duration string.
   * @defaultValue '30s'
   */
  timeout?: string
  /** Any other object_store configuration key of the location's store. */
  [key: string]: string | number | boolean | undefined
}

/** The named fields of {@link StorageOptions}, without its index signature. */
type NamedStorageOption = keyof { [K in keyof StorageOptions as string extends K ? never : K]: unknown }

/**
 * The type of each named storage option; any other key takes a string, number or boolean. The
 * `satisfies` clause makes tsc fail on a named field that has no entry here.
 */
const STORAGE_OPTION_TYPES: Readonly<Record<string, 'string' | 'boolean' | 'number'>> = {
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
  connectTimeout: 'string',
  timeout: 'string',
} satisfies Record<NamedStorageOption, 'string' | 'boolean' | 'number'>

/** Type-checks storage options and turns their values into strings (core checks the keys). */
export function storageOf(what: string, storage: unknown): Record<string, string> | undefined {
  if (storage === undefined) return undefined
  if (typeof storage !== 'object' || storage === null || Array.isArray(storage)) {
    throw new InvalidArgumentError(`${what}: storage must be an object of options, got ${describeValue(storage)}`)
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
        `invalid storage option ${key}: expected ${expected === undefined ? 'a string, number or boolean' : `a ${expected}`}, got ${describeValue(v)}`,
      )
    }
    out[key] = String(v)
  }
  return out
}

/**
 * The binding's store for a location: an ObjectStore's own handle, or a new one opened from a
 * path or URI with `storage` (storage options given with an ObjectStore are an error: the store
 * was configured when it was made).
 */
export function nativeStore(location: Location, storage?: Record<string, string>): NativeObjectStore {
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
    requireLocation('location', location)
    return callSync(() => NativeObjectStore.fromUri(location, storage))
  }
  throw new InvalidArgumentError(
    `location must be a path, a URI (file:///abs/path, memory://NAME, s3://bucket/prefix) or an ObjectStore, got ${describeValue(location)}`,
  )
}
