// The one place native errors become memwal's typed errors (`errors.ts`).
//
// The binding (`crates/memwal-node/src/error.rs`) tags each message with its code and fence
// reason, `[memwal:FENCED:PeerClaimedEpoch] …`. `translate` reads the tag, strips it, and builds
// the code's MemWalError subclass (`errorOfCode`, `errors.ts`'s default export) with the native
// error as `cause`. Every native call goes through `call` or `callSync`, so no other file catches
// a native error. A fence that names the shard's holder carries it in the tag as JSON
// (`…:PeerClaimedEpoch:holder={…}] `), whose `]`s the binding escapes, so the tag ends at its
// first `]`. A `TRUNCATED` error carries the first available WAL position
// (`[memwal:TRUNCATED:first=6] `).

import errorOfCode, { InvalidArgumentError, IoError, MemWalError, type MemWalErrorCode } from './errors.js'
import { parseHolder } from './holder.js'
import { redactLocation } from './redact.js'

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
    const [tag, code, fenceReason, holder, first] = m
    const details = {
      fenceReason: fenceReason === 'PersistenceFailure' ? 'PersistenceFailure' : 'PeerClaimedEpoch',
      holder: holder === undefined ? undefined : parseHolder(holder),
      firstAvailable: Number(first),
    } as const
    return errorOfCode[code as MemWalErrorCode](jsOptionNames(message.slice(tag.length)), details, e)
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
