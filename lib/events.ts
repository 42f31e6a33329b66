// Writer events: what a writer reports as it happens, through Node's `on(event, listener)`
// convention. The binding sends each event as a JSON object (`crates/memwal-node/src/events.rs`);
// a fence or a background failure carries the tagged message every later call would reject
// with, turned here into the same typed error.

import { EventEmitter } from 'node:events'

import type { GcReport } from '../native.js'
import { describeValue } from './arguments.js'
import { type FencedError, InvalidArgumentError, type MemWalError } from './errors.js'
import { translate } from './native-call.js'

/** A WAL entry was appended: its rows are durable. */
export interface WalAppendEvent {
  /** The entry's WAL position. */
  position: number
  /** Puts in it: how many puts shared this entry. */
  puts: number
  /** Batches in it (one or more per put). */
  batches: number
  /** Rows in it. */
  rows: number
  /** Its size in bytes. */
  bytes: number
  /** How long the append took, retries included, in milliseconds. */
  latencyMs: number
}

/** A MemTable was flushed as a Parquet generation file and committed in the manifest. */
export interface GenerationFlushedEvent {
  /** The generation number. */
  generation: number
  /** Rows in it. */
  rows: number
  /** Its estimated in-memory bytes (the Parquet file is smaller). */
  bytes: number
  /** Its file, as an object path in the store. */
  file: string
  /** How long the flush took (encode, write, commit), in milliseconds. */
  latencyMs: number
}

/** Compaction merged small generations into one, committed in the manifest. */
export interface CompactionEvent {
  /** How many generations were merged. */
  merged: number
  /** The merged generation's number (the last merged one's). */
  generation: number
  /** Rows in it. */
  rows: number
  /** Its file, as an object path in the store. */
  file: string
}

/** A failed object-store or WAL operation is retried after a backoff. */
export interface RetryEvent {
  /** What is retried: `wal append`, `wal read-back`, `fence sentinel` or `generation flush`. */
  operation: string
  /** Which retry this is (1 for the first). */
  attempt: number
  /** The message of the failure that is retried, with any credentials it quotes masked (`***`). */
  error: string
  /** The backoff before the retry, in milliseconds. */
  delayMs: number
}

/**
 * Puts started or stopped waiting for backpressure (`maxUnflushedMemtableBytes`): `start` when
 * the first put has to wait, `end` when the last waiting put goes in.
 */
export interface BackpressureEvent {
  /** Whether puts started (`start`) or stopped (`end`) waiting. */
  phase: 'start' | 'end'
  /** The unflushed bytes the limit counts (active and frozen MemTables, or queued WAL-only batches), at that moment. */
  bytesWaiting: number
}

/**
 * The events a {@link ShardWriter} emits, and their listeners' arguments.
 *
 * - `fenced`: the writer was fenced; every later call rejects with this error. Emitted once, as
 *   soon as it is found, also when no call is waiting (a background WAL append that failed in
 *   non-durable mode, a successor's claim).
 * - `walAppend`, `generationFlushed`, `compaction`: after each took effect.
 * - `gc`: after each background garbage collection, with what it removed.
 * - `retry`: before each retry of a failed WAL append or generation flush.
 * - `backpressure`: when puts start, and stop, waiting for `maxUnflushedMemtableBytes`.
 * - `error`: a background task failed without fencing the writer (a garbage collection); puts
 *   go on. With no `error` listener it is dropped, never thrown: unlike a plain
 *   `EventEmitter`, a writer does not crash the process over it.
 *
 * A listener that throws (or an `async` listener whose promise rejects) does not crash the
 * process either, and the event's other listeners still run: events come from memwal's
 * background tasks, where no caller of yours could catch it. What it threw is reported as an
 * `error` event, an `Error` whose message names the event and whose `cause` is what was thrown,
 * if the writer has an `error` listener; otherwise (or if an `error` listener threw) as a
 * process warning (`process.emitWarning`, type `MemWalListenerWarning`), which Node prints to
 * stderr and `process.on('warning')` receives. Catch errors inside a listener to handle them
 * yourself.
 */
export interface ShardWriterEvents {
  /** The writer was fenced: the error every later call rejects with. */
  fenced: [error: FencedError]
  /** A WAL entry was appended. */
  walAppend: [event: WalAppendEvent]
  /** A MemTable became a committed generation file. */
  generationFlushed: [event: GenerationFlushedEvent]
  /** Small generations were merged. */
  compaction: [event: CompactionEvent]
  /** A background garbage collection ran: what it removed. */
  gc: [report: GcReport]
  /** A failed operation is retried. */
  retry: [event: RetryEvent]
  /** Puts started or stopped waiting for backpressure. */
  backpressure: [event: BackpressureEvent]
  /**
   * A background task failed without fencing the writer (a {@link MemWalError}), or a listener
   * of another event threw (an `Error` naming the event, with what was thrown as `cause`).
   */
  error: [error: MemWalError | Error]
}

const EVENT_NAMES: ReadonlyArray<keyof ShardWriterEvents> = ['fenced', 'walAppend', 'generationFlushed', 'compaction', 'gc', 'retry', 'backpressure', 'error']

/** Throws an {@link InvalidArgumentError} unless `event` names an event and `listener` is a function. */
export function checkListener(what: string, event: unknown, listener: unknown): asserts event is keyof ShardWriterEvents {
  if (!EVENT_NAMES.includes(event as keyof ShardWriterEvents)) {
    throw new InvalidArgumentError(`${what}: unknown event ${describeValue(event)}; events: ${EVENT_NAMES.join(', ')}`)
  }
  if (typeof listener !== 'function') {
    throw new InvalidArgumentError(`${what}: the listener must be a function, got ${describeValue(listener)}`)
  }
}

/** Emits the binding's event `json` (one JSON object) on `emitter`. */
export function emitNativeEvent(emitter: EventEmitter, json: string): void {
  const { type, ...fields } = JSON.parse(json) as { type: string; error?: string } & Record<string, unknown>
  switch (type) {
    case 'fenced':
      emitSafely(emitter, 'fenced', translate(new Error(fields.error)))
      return
    case 'error':
      // An `error` with no listener would throw out of the binding's callback and end the
      // process; the failure is not the writer's end, so it is dropped instead.
      if (emitter.listenerCount('error') > 0) emitSafely(emitter, 'error', translate(new Error(fields.error)))
      return
    case 'walAppend':
    case 'generationFlushed':
    case 'compaction':
    case 'gc':
    case 'retry':
    case 'backpressure':
      emitSafely(emitter, type, fields)
      return
    default:
      // An event of a newer binding: nobody can listen for it yet.
      return
  }
}

/**
 * Calls each listener of `event` as `emitter.emit` would, but a listener that throws, or
 * returns a promise that rejects, is reported (see {@link reportListenerError}) instead of
 * thrown: this runs in the binding's callback, where a throw would be an uncaught exception
 * that ends the process, and it would also skip the event's later listeners.
 */
function emitSafely(emitter: EventEmitter, event: keyof ShardWriterEvents, arg: unknown): void {
  // `rawListeners` is a copy, and holds `once` wrappers, which remove themselves when called.
  for (const listener of emitter.rawListeners(event)) {
    try {
      const result: unknown = Reflect.apply(listener, emitter, [arg])
      if (isPromiseLike(result)) {
        result.then(undefined, (e: unknown) => reportListenerError(emitter, event, e))
      }
    } catch (e) {
      reportListenerError(emitter, event, e)
    }
  }
}

const isPromiseLike = (v: unknown): v is PromiseLike<unknown> =>
  (typeof v === 'object' || typeof v === 'function') && v !== null && typeof (v as { then?: unknown }).then === 'function'

/**
 * Reports what a listener of `event` threw: as an `error` event if there is an `error`
 * listener (and the thrower was not one), else as a process warning. Never throws.
 */
function reportListenerError(emitter: EventEmitter, event: keyof ShardWriterEvents, thrown: unknown): void {
  let message: string
  try {
    message = thrown instanceof Error ? thrown.message : String(thrown)
  } catch {
    message = describeValue(thrown)
  }
  const error = new Error(`a ShardWriter '${event}' listener threw: ${message}`, { cause: thrown })
  if (event !== 'error' && emitter.listenerCount('error') > 0) {
    emitSafely(emitter, 'error', error)
    return
  }
  process.emitWarning(
    `${error.message}. memwal went on; catch errors inside the listener, or listen for 'error' on the writer to receive them there`,
    { type: 'MemWalListenerWarning', detail: thrown instanceof Error ? thrown.stack : undefined },
  )
}

export { EventEmitter }
