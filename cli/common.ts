// Shared by the `memwal` commands: exit codes, the error type that carries one, argument
// parsers, location checks and plain-text tables. The commands use only the public API
// (`../index.js`), like any other program would.

import { existsSync, statSync } from 'node:fs'

import { InvalidArgumentError as OptionError } from 'commander'

import { MemWalError, ObjectStore } from '../index.js'

/**
 * Exit codes of every `memwal` command (README "CLI" lists them; keep the two in sync).
 * A `MemWalError` maps by its stable `code` (see {@link exitCodeOf}).
 */
export const Exit = {
  /** Success. */
  OK: 0,
  /** An unexpected failure: a bug, not bad input. `MEMWAL_DEBUG=1` prints the stack. */
  UNEXPECTED: 1,
  /** Bad command line: unknown command or option, missing or malformed argument, bad location. */
  USAGE: 2,
  /** Nothing there: no shard at the location, or no shard with that id. */
  NOT_FOUND: 3,
  /** Stored data cannot be decoded (`CORRUPT`). */
  CORRUPT: 4,
  /** The store failed: permissions, disk, network (`IO`). */
  IO: 5,
  /** The writer was fenced or closed under the command (`FENCED`, `CLOSED`). */
  FENCED: 6,
  /** `memwal demo` could not verify its acknowledged rows. */
  VERIFY_FAILED: 7,
} as const

/** An error the CLI reports as one line, with the exit code it chose. */
export class CliError extends Error {
  /** The process exit code. */
  readonly exitCode: number

  constructor(exitCode: number, message: string) {
    super(message)
    this.name = 'CliError'
    this.exitCode = exitCode
  }
}

/** The exit code for a memwal error, by its stable code. */
export function exitCodeOf(e: MemWalError): number {
  switch (e.code) {
    case 'INVALID_ARGUMENT':
    case 'SCHEMA_MISMATCH':
      return Exit.USAGE
    case 'CORRUPT':
      return Exit.CORRUPT
    case 'IO':
      return Exit.IO
    case 'FENCED':
    case 'CLOSED':
      return Exit.FENCED
  }
}

/** A commander option parser for an integer ≥ `min`. */
export function integerAtLeast(min: number): (value: string) => number {
  return (value) => {
    const n = Number(value)
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min) {
      throw new OptionError(`expected an integer ≥ ${min}`)
    }
    return n
  }
}

/** A commander option parser for one of `choices`. */
export function oneOf<T extends string>(choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) {
      throw new OptionError(`expected one of ${choices.join(', ')}`)
    }
    return value as T
  }
}

/**
 * The store at `location` (a directory, `file:///abs/path`, or `memory://NAME`), checked to
 * exist: a missing directory is a clear NOT_FOUND rather than an empty listing.
 */
export function openStore(location: string): ObjectStore {
  const path = localPath(location)
  if (path !== null) {
    if (!existsSync(path)) {
      throw new CliError(Exit.NOT_FOUND, `no such directory: ${path}`)
    }
    if (!statSync(path).isDirectory()) {
      throw new CliError(Exit.USAGE, `not a directory: ${path} (a location is the directory that holds _mem_wal/)`)
    }
  }
  return ObjectStore.fromUri(location)
}

function localPath(location: string): string | null {
  if (location.startsWith('file://')) return decodeURIComponent(new URL(location).pathname)
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location)) return null
  return location
}

/** The ids of the shards at `location`; NOT_FOUND if there are none. */
export async function shardsAt(store: ObjectStore, location: string): Promise<string[]> {
  const ids = await store.listShards()
  if (ids.length === 0) {
    throw new CliError(Exit.NOT_FOUND, `no memwal shards at ${location} (expected ${location}/_mem_wal/<shard-id>/)`)
  }
  return ids.sort()
}

/** Checks that shard `id` exists at `location`, naming the shards that do if it does not. */
export async function requireShard(store: ObjectStore, location: string, id: string): Promise<void> {
  const ids = await shardsAt(store, location)
  if (!ids.includes(id)) {
    throw new CliError(Exit.NOT_FOUND, `no shard ${id} at ${location}; shards there: ${ids.join(', ')}`)
  }
}

/** `1536` → `1.5 KiB`. */
export function formatBytes(n: number | null): string {
  if (n === null) return '?'
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = n
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`
}

/** `1234567` → `1,234,567`. */
export function formatCount(n: number | null): string {
  return n === null ? '?' : n.toLocaleString('en-US')
}

/**
 * Left-aligned text columns under a header, two spaces apart. Cells longer than `maxWidth`
 * are cut with `…`.
 */
export function textTable(header: string[], rows: string[][], maxWidth = 60): string {
  const cut = (s: string): string => (s.length > maxWidth ? `${s.slice(0, maxWidth - 1)}…` : s)
  const all = [header, ...rows].map((r) => r.map(cut))
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)))
  return all
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}

/** Writes to stdout; resolves once the chunk is handed off (so large outputs keep memory flat). */
export function out(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve()
    else process.stdout.once('drain', resolve)
  })
}
