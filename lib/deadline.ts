// Deadlines of one call: the caller's `signal` (an AbortSignal) and, where a call takes one,
// its `timeoutMs`. A deadline stops the caller's wait, not the native work: that work has no
// cancellation point it could stop at safely (a WAL append in flight may land, as with
// `abort()`), and the object store's own budgets bound it. So the call's promise rejects at
// once, and whatever the work yields later is handed to `late` to be released.

import { describeValue } from './arguments.js'
import { AbortError, InvalidArgumentError, TimeoutError } from './errors.js'

/** When a call stops waiting: aborted through `signal`, or after `timeoutMs`. */
export interface Deadline {
  /** The caller's signal. */
  signal?: AbortSignal
  /** Milliseconds, counted from the call. */
  timeoutMs?: number
}

/**
 * Checks the `signal` and `timeoutMs` options of call `what` (`timeoutMs` only if `withTimeout`).
 * @throws {InvalidArgumentError} for a signal that is not an AbortSignal, or a timeout that is
 * not a finite number >= 0
 */
export function deadlineOf(what: string, options: { signal?: unknown; timeoutMs?: unknown }, withTimeout: boolean): Deadline {
  const { signal, timeoutMs } = options
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`${what}: signal must be an AbortSignal, got ${describeValue(signal)}`)
  }
  if (timeoutMs !== undefined) {
    if (!withTimeout) {
      throw new InvalidArgumentError(`${what} takes no timeoutMs; pass signal: AbortSignal.timeout(ms) instead`)
    }
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw new InvalidArgumentError(`${what}: timeoutMs must be a finite number of milliseconds >= 0, got ${describeValue(timeoutMs)}`)
    }
  }
  return { signal, timeoutMs }
}

/**
 * Runs `start` and settles like it, unless the deadline comes first: then rejects with an
 * {@link AbortError} (the caller's signal, `cause` its reason) or a {@link TimeoutError} naming
 * `what` (`timeoutMs`). An already-aborted signal rejects before `start` runs, so nothing is done.
 * A result that arrives after the rejection goes to `late`, which releases it.
 */
export function withDeadline<T>(what: string, deadline: Deadline, start: () => Promise<T>, late?: (value: T) => void): Promise<T> {
  const { signal, timeoutMs } = deadline
  if (signal === undefined && timeoutMs === undefined) return start()
  const timer = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)
  const stop = signal === undefined ? timer : timer === undefined ? signal : AbortSignal.any([signal, timer])
  if (stop === undefined) return start()
  const stopped = (): Error =>
    signal?.aborted === true
      ? new AbortError(`${what} was aborted`, { cause: signal.reason })
      : new TimeoutError(
          `Timed out: ${what} did not finish within ${timeoutMs} ms. What it was doing may still take effect; raise timeoutMs, or check the object store's endpoint and network`,
          { cause: timer?.reason },
        )
  if (stop.aborted) return Promise.reject(stopped())
  const work = start()
  return new Promise<T>((resolve, reject) => {
    let settled = false
    const onStop = (): void => {
      if (settled) return
      settled = true
      reject(stopped())
    }
    stop.addEventListener('abort', onStop, { once: true })
    work.then(
      (v) => {
        stop.removeEventListener('abort', onStop)
        if (settled) return late?.(v)
        settled = true
        resolve(v)
      },
      (e: unknown) => {
        stop.removeEventListener('abort', onStop)
        if (settled) return
        settled = true
        reject(e)
      },
    )
  })
}
