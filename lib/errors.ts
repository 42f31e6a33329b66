// The errors memwal throws, and the one place native errors become them.
//
// The binding (`crates/memwal-node/src/error.rs`) tags each message with its code and fence
// reason, `[memwal:FENCED:PeerClaimedEpoch] …`. `translate` reads the tag, strips it, and builds
// the matching MemWalError subclass with the native error as `cause`. Every native call goes
// through `call` or `callSync`, so no other file catches a native error. A fence that names the
// shard's holder carries it in the tag as JSON (`…:PeerClaimedEpoch:holder={…}] `), whose `]`s
// the binding escapes, so the tag ends at its first `]`. A `TRUNCATED` error carries the first
// available WAL position (`[memwal:TRUNCATED:first=6] `).

import { redactSecrets } from '../native.js'
import { type ShardHolder, parseHolder } from './holder.js'

/** Stable error codes. Branch on these, not on messages. */
export type MemWalErrorCode =
  | 'FENCED'
  | 'INVALID_ARGUMENT'
  | 'SCHEMA_MISMATCH'
  | 'CLOSED'
  | 'CORRUPT'
  | 'IO'
  | 'TIMEOUT'
  | 'TRUNCATED'

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
    super(redactLocation(message), options)
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

  /**
   * For `PeerClaimedEpoch`: the writer that holds the shard now (writer id, host, pid, epoch
   * and claim time, as the manifest that fenced this writer records them), also named in the
   * message. `undefined` when it is unknown: a `PersistenceFailure`, a manifest written before
   * memwal recorded holders, or a manifest that could not be read when the fence was found.
   */
  readonly holder?: ShardHolder

  /** @hidden */
  constructor(fenceReason: FenceReason, message: string, options?: { cause?: unknown; holder?: ShardHolder }) {
    super('FENCED', message, options)
    this.name = 'FencedError'
    this.fenceReason = fenceReason
    if (options?.holder !== undefined) this.holder = options.holder
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

/**
 * An operation ran out of time: the object store did not answer within its budget (storage
 * options `connectTimeout`, `timeout`, `clientRetryTimeout`), or the call's `timeoutMs`
 * passed. The message names the operation. What it was doing may still take effect (a put's
 * rows may still become durable): treat it as "maybe done", like an {@link IoError}.
 */
export class TimeoutError extends MemWalError {
  /** @hidden */
  constructor(message: string, options?: { cause?: unknown }) {
    super('TIMEOUT', message, options)
    this.name = 'TimeoutError'
  }
}

/**
 * A WAL position that garbage collection removed was read (its rows are in flushed
 * generations). Resume from {@link TruncatedError.firstAvailable}, the first position still
 * available: `WalTailer.read`, and `follow()` from there, see every later entry.
 */
export class TruncatedError extends MemWalError {
  /** The first WAL position still available (the shard's low-water mark plus one). */
  readonly firstAvailable: number

  /** @hidden */
  constructor(message: string, firstAvailable: number, options?: { cause?: unknown }) {
    super('TRUNCATED', message, options)
    this.name = 'TruncatedError'
    this.firstAvailable = firstAvailable
  }
}

/**
 * The caller aborted the call through its `signal`. Node's shape for it, as `fs`, `events` and
 * `timers/promises` reject: `name` `'AbortError'`, `code` `'ABORT_ERR'`, and `cause` the
 * signal's `reason`. Not a {@link MemWalError}: memwal did not fail, the caller stopped
 * waiting. Work already handed to the store may still take effect.
 */
export class AbortError extends Error {
  /** Node's code for an aborted operation. */
  readonly code = 'ABORT_ERR'

  /** @hidden */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'AbortError'
  }
}

/** The tag the binding's `error.rs` puts ahead of a message: code, then fence reason. */
const TAG = /^\[memwal:([A-Z_]+)(?::([A-Za-z]+))?(?::holder=(\{[^\]]*\}))?(?::first=(\d+))?\] /

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

function errorOf(
  code: MemWalErrorCode,
  message: string,
  fenceReason: string | undefined,
  holder: string | undefined,
  first: string | undefined,
  cause: unknown,
): MemWalError {
  const options = { cause }
  switch (code) {
    case 'FENCED':
      return new FencedError(fenceReason === 'PersistenceFailure' ? 'PersistenceFailure' : 'PeerClaimedEpoch', message, {
        cause,
        holder: holder === undefined ? undefined : parseHolder(holder),
      })
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
    case 'TIMEOUT':
      return new TimeoutError(message, options)
    case 'TRUNCATED':
      return new TruncatedError(message, Number(first), options)
  }
}

/**
 * `message` with the core's option name in an "invalid config:" message spelt as JavaScript
 * spells it (`max_memtable_size` → `maxMemtableSize`): the caller passed the camelCase name and
 * must be able to find it in the message.
 */
function jsOptionNames(message: string): string {
  return message.replace(/^invalid config: ([a-z0-9]+(?:_[a-z0-9]+)+)/, (_, name: string) =>
    `invalid config: ${name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase())}`,
  )
}

/** The one place native errors become typed errors. */
export function translate(e: unknown): unknown {
  if (e instanceof MemWalError || !(e instanceof Error)) {
    return e
  }
  // The native error stays as `cause`; its own message (and stack) must not keep a secret.
  const message = redactLocation(e.message)
  if (message !== e.message) {
    e.message = message
    if (typeof e.stack === 'string') e.stack = redactLocation(e.stack)
  }
  const m = TAG.exec(message)
  if (m !== null) {
    return errorOf(m[1] as MemWalErrorCode, jsOptionNames(message.slice(m[0].length)), m[2], m[3], m[4], e)
  }
  const status = (e as { code?: unknown }).code
  if (typeof status === 'string' && ARGUMENT_STATUSES.has(status)) {
    return new InvalidArgumentError(message, { cause: e })
  }
  return new IoError(message, { cause: e })
}

/** Awaits a native call, rejecting with its error translated. */
export async function call<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f()
  } catch (e) {
    throw translate(e)
  }
}

/** Makes a synchronous native call, throwing its error translated. */
export function callSync<T>(f: () => T): T {
  try {
    return f()
  } catch (e) {
    throw translate(e)
  }
}

/** How many characters of a caller's value (an id, a path, a string) a message echoes. */
const ECHO_LIMIT = 100

/**
 * `s` cut to {@link ECHO_LIMIT} characters, with its length, so that a message never echoes a
 * huge argument in full.
 */
export function truncate(s: string): string {
  return s.length <= ECHO_LIMIT ? s : `${s.slice(0, ECHO_LIMIT)}… (${s.length} chars)`
}

/**
 * A value as error messages name it: its type and a short rendering (`undefined`, `null`,
 * `an array of 3`, `an object (Map)`, `number NaN`, `string "abc"`), truncated to ~100
 * characters.
 */
export function describeValue(v: unknown): string {
  if (v === undefined) return 'undefined'
  if (v === null) return 'null'
  if (Array.isArray(v)) return `an array of ${v.length}`
  if (typeof v === 'string') return `string ${truncate(JSON.stringify(v))}`
  if (typeof v === 'function') return `a function${v.name === '' ? '' : ` (${truncate(v.name)})`}`
  if (typeof v === 'symbol') return `symbol ${truncate(String(v))}`
  if (typeof v === 'bigint') return `bigint ${truncate(String(v))}n`
  if (typeof v === 'object') {
    const name = (v as object).constructor?.name
    return `an object (${typeof name === 'string' && name !== '' ? truncate(name) : 'Object'})`
  }
  return `${typeof v} ${truncate(String(v))}`
}

/**
 * `text` with the secrets a location can carry replaced by `***`: the userinfo of a URI
 * (`s3://KEY:SECRET@bucket` → `s3://***@bucket`) and the values of query parameters that hold
 * credentials (`?secret=`, `sig=`, `token=`, `key=`, `signature=`, `password=`, …). Every error
 * that leaves memwal passes through it, and so does every location the CLI prints, so a
 * location echoed by any layer (core, binding, CLI) never leaks a credential.
 *
 * It is the core's masking (`crates/memwal-core/src/redact.rs`), which the log sinks use too,
 * so errors, the CLI and logs cannot disagree on what is a secret. Called directly rather than
 * through `callSync`: `translate` itself needs it, and it cannot fail for a string.
 */
export function redactLocation(text: string): string {
  return redactSecrets(text)
}

/** Throws an {@link InvalidArgumentError} naming `what` unless `v` is a string. */
export function requireString(what: string, v: unknown): asserts v is string {
  if (typeof v !== 'string') {
    throw new InvalidArgumentError(`${what} expects a string, got ${describeValue(v)}`)
  }
}

/**
 * Throws an {@link InvalidArgumentError} naming `what` unless `v` is a path or URI string
 * without a NUL byte (no file system accepts one; the OS would fail it as an I/O error).
 */
export function requireLocation(what: string, v: unknown): asserts v is string {
  requireString(what, v)
  if (v.includes('\0')) {
    throw new InvalidArgumentError(`${what}: the location ${describeValue(v)} contains a NUL byte; pass a path or URI without one`)
  }
}
