// The errors memwal throws: the public error surface, which `index.ts` re-exports whole
// (`export *`), so a name exported here is public. Internals live elsewhere: native errors
// become these in `native-call.ts`, argument checks and descriptions are in `arguments.ts`, and
// the masking of credentials in messages is in `redact.ts`.
//
// Adding an error code touches this file alone on the TypeScript side: the code in
// `MemWalErrorCode`, its `MemWalError` subclass, and its row in `errorOfCode` (`tsc` fails
// until the code has one).

import type { ShardHolder } from './holder.js'
import { redactLocation } from './redact.js'

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

/**
 * What the binding's tag carries besides the code and the message, read by `native-call.ts`:
 * the fence reason, the shard's holder a fence names, and a `TRUNCATED` error's first available
 * WAL position.
 */
interface TagDetails {
  readonly fenceReason: FenceReason
  readonly holder: ShardHolder | undefined
  readonly firstAvailable: number
}

/**
 * The class of each code: how `native-call.ts` builds it from a tagged native error, with the
 * native error as `cause`. Its type lists every `MemWalErrorCode`, so `tsc` fails until a new
 * code has its row. It is this module's default export, which `index.ts`'s `export *` does not
 * re-export (no `export *` re-exports a default), so it stays internal.
 */
const errorOfCode: {
  readonly [C in MemWalErrorCode]: (message: string, tag: TagDetails, cause: unknown) => MemWalError
} = {
  FENCED: (message, { fenceReason, holder }, cause) => new FencedError(fenceReason, message, { cause, holder }),
  INVALID_ARGUMENT: (message, _, cause) => new InvalidArgumentError(message, { cause }),
  SCHEMA_MISMATCH: (message, _, cause) => new SchemaMismatchError(message, { cause }),
  CLOSED: (message, _, cause) => new ClosedError(message, { cause }),
  CORRUPT: (message, _, cause) => new CorruptError(message, { cause }),
  IO: (message, _, cause) => new IoError(message, { cause }),
  TIMEOUT: (message, _, cause) => new TimeoutError(message, { cause }),
  TRUNCATED: (message, { firstAvailable }, cause) => new TruncatedError(message, firstAvailable, { cause }),
}

export default errorOfCode
