// The core's logs, handed to the application's logger. The binding forwards each `tracing`
// record at or above the chosen level as one JSON object (`crates/memwal-node/src/logging.rs`),
// never blocking the writer: if the logger falls behind, records are dropped.

import { setNativeLogger } from '../native.js'
import { describeValue } from './arguments.js'
import { InvalidArgumentError } from './errors.js'

/** A log level, most severe first. */
export type LogLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace'

/** One log record of memwal's core. */
export interface LogRecord {
  /** Its level. */
  level: LogLevel
  /** Where it comes from, e.g. `memwal::writer`, `memwal::flush`, `memwal::retry`. */
  target: string
  /** What happened, e.g. `claimed shard`, `flushed generation`. */
  message: string
  /** Its structured fields, e.g. `{ shard, epoch, writer_id }` for a claim. */
  fields: Record<string, string | number | boolean>
  /** When it was logged, as an ISO-8601 UTC timestamp. */
  timestamp: string
}

/** Receives memwal's log records, on the JavaScript thread. */
export type Logger = (record: LogRecord) => void

/** Options of {@link setLogger}. */
export interface SetLoggerOptions {
  /** The most verbose level passed on; default `'info'` (state changes, retries, slow operations). */
  level?: LogLevel
}

const LEVELS: ReadonlyArray<LogLevel> = ['error', 'warn', 'info', 'debug', 'trace']

/**
 * Sends memwal's log records at `options.level` and above (default `'info'`) to `logger`, or
 * with `null`, stops. One logger per process; a new call replaces the previous one.
 *
 * Nothing is logged by default. At `info` a writer logs one record per state change: its
 * claim of a shard, a fence, a sealed MemTable, a flushed generation, a compaction, a garbage
 * collection, a retry; a slow operation (a WAL append or a flush over 1 s) at `warn`. Single
 * puts log at `trace` only. Records are queued to the JavaScript thread and dropped, never
 * waited for, if the logger falls behind; the logger never keeps the process alive.
 *
 * @example
 * ```ts
 * import pino from 'pino'
 * const log = pino()
 * setLogger(({ level, target, message, fields }) => log[level]({ target, ...fields }, message))
 * ```
 *
 * @throws {@link InvalidArgumentError} if `logger` is neither a function nor `null`, or the level is unknown.
 */
export function setLogger(logger: Logger | null, options?: SetLoggerOptions): void {
  if (logger !== null && typeof logger !== 'function') {
    throw new InvalidArgumentError(`setLogger: the logger must be a function or null, got ${describeValue(logger)}`)
  }
  const level = options?.level ?? 'info'
  if (!LEVELS.includes(level)) {
    throw new InvalidArgumentError(`setLogger: unknown level ${describeValue(level)}; levels: ${LEVELS.join(', ')}`)
  }
  if (logger === null) {
    setNativeLogger(null, level)
    return
  }
  setNativeLogger((json: string) => {
    logger(JSON.parse(json) as LogRecord)
  }, level)
}
