// A caller's arguments as error messages describe them, and the checks shared by several calls.

import { InvalidArgumentError } from './errors.js'

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
