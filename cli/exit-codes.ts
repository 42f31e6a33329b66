// The exit codes of every `memwal` command, the error that carries one to `main.ts`, and the
// code for each memwal error. `Exit`, `EXIT_CODES_HELP` (what `--help` prints) and the README's
// "CLI" section list the same codes: keep the three in sync.

import { MemWalError } from '../index.js'
import { redactLocation } from '../lib/redact.js'

/**
 * Exit codes of every `memwal` command. A `MemWalError` maps by its stable `code` (see
 * {@link exitCodeOf}).
 */
export const Exit = {
  /** Success. */
  OK: 0,
  /** An unexpected failure: a bug, not bad input. `MEMWAL_DEBUG=1` prints the stack. */
  UNEXPECTED: 1,
  /**
   * Bad command line or input: unknown command or option, missing or malformed argument, bad
   * location, or a WAL position garbage collection removed (`TRUNCATED`).
   */
  USAGE: 2,
  /** Nothing there: no shard at the location, or no shard with that id. */
  NOT_FOUND: 3,
  /** Stored data cannot be decoded (`CORRUPT`). */
  CORRUPT: 4,
  /** The store failed: permissions, disk, network (`IO`), or did not answer in time (`TIMEOUT`). */
  IO: 5,
  /** The writer was fenced or closed under the command (`FENCED`, `CLOSED`). */
  FENCED: 6,
  /** `memwal demo` could not verify its acknowledged rows. */
  VERIFY_FAILED: 7,
} as const

/** The exit codes as `--help` lists them after every command's usage. */
export const EXIT_CODES_HELP = `
Exit codes:
  0  success
  1  unexpected failure (a bug; MEMWAL_DEBUG=1 prints the stack)
  2  bad command line or input (INVALID_ARGUMENT, SCHEMA_MISMATCH), or a WAL position
     garbage collection removed (TRUNCATED)
  3  not found: no such directory, no shard at the location, no such shard
  4  stored data cannot be decoded (CORRUPT)
  5  the store failed or did not answer in time (IO, TIMEOUT)
  6  the writer was fenced or closed (FENCED, CLOSED)
  7  memwal demo could not verify its acknowledged rows`

/** An error the CLI reports as one line, with the exit code it chose. */
export class CliError extends Error {
  /** The process exit code. */
  readonly exitCode: number

  constructor(exitCode: number, message: string) {
    super(redactLocation(message))
    this.name = 'CliError'
    this.exitCode = exitCode
  }
}

/**
 * The exit code for a memwal error, by its stable code. A code not listed here exits 1, as any
 * error the CLI did not expect: an error code needs a case only if `memwal`'s users should tell
 * it apart by its exit code (then it goes in `EXIT_CODES_HELP` and the README's CLI section too).
 */
export function exitCodeOf(e: MemWalError): number {
  switch (e.code) {
    case 'INVALID_ARGUMENT':
    case 'SCHEMA_MISMATCH':
      return Exit.USAGE
    // The store answered and nothing failed: the position asked for is gone for good (its rows
    // are in generations), so retrying as for IO cannot help; asking for another position does.
    case 'TRUNCATED':
      return Exit.USAGE
    case 'CORRUPT':
      return Exit.CORRUPT
    case 'IO':
    case 'TIMEOUT':
      return Exit.IO
    case 'FENCED':
    case 'CLOSED':
      return Exit.FENCED
    default:
      return Exit.UNEXPECTED
  }
}
