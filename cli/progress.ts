// The progress bar every command draws on stderr (`demo`'s ingest, the reads of `scan`,
// `inspect` and `stats`): one look, set up in one place. The read-only commands draw it only
// when stderr is a terminal (or `--progress` asks for it), so that pipes, scripts and tests get
// their output without a bar in it.

import { SingleBar } from 'cli-progress'

/** The `--progress` option of the commands that may draw a bar while they read. */
export const PROGRESS_OPTION = [
  '--progress',
  'draw a progress bar on stderr even when it is not a terminal (by default only a terminal gets one)',
] as const

/** A bar that can be drawn or not: a hidden one accepts every call and prints nothing. */
export interface Progress {
  /** Moves the bar to `value` (of its total), with new values for the format's `{fields}`. */
  update(value: number, payload?: Record<string, unknown>): void
  /** Moves the bar by `step`. */
  increment(step?: number, payload?: Record<string, unknown>): void
  /** A new total (once what is left to do is known). */
  setTotal(total: number): void
  /** Draws the bar a last time and releases the terminal. Safe to call twice. */
  stop(): void
}

/** How a bar is drawn. */
export interface ProgressOptions {
  /**
   * Whether to draw it at all: `'tty'` (the read-only commands' default) only when stderr is a
   * terminal; `'always'` also into a pipe or file, as one line each `notTtyEveryMs`.
   */
  show: 'tty' | 'always'
  /** In a pipe or file, one line this often (default 1000 ms). */
  notTtyEveryMs?: number
  /** Clears the bar once it is stopped (default: it stays, as the last line of the stage). */
  clearOnStop?: boolean
}

/** A bar that prints nothing. */
export const NO_PROGRESS: Progress = {
  update: () => undefined,
  increment: () => undefined,
  setTotal: () => undefined,
  stop: () => undefined,
}

/** Whether a read-only command draws a bar: stderr is a terminal, or `--progress` forced it. */
export function progressShown(forced: boolean | undefined): ProgressOptions['show'] | null {
  if (forced === true) return 'always'
  return process.stderr.isTTY === true ? 'tty' : null
}

/**
 * Starts a bar on stderr: `  {bar} {percentage}% | {value}/{total} <what>` (`what` may use
 * `{fields}` of `payload`). With `show` `null`, or `'tty'` and stderr not a terminal, it is
 * a bar that prints nothing.
 */
export function startProgress(
  what: string,
  total: number,
  show: ProgressOptions['show'] | null,
  options: Omit<ProgressOptions, 'show'> = {},
  payload: Record<string, unknown> = {},
): Progress {
  if (show === null || (show === 'tty' && process.stderr.isTTY !== true)) return NO_PROGRESS
  const bar = new SingleBar({
    format: `  {bar} {percentage}% | {value}/{total} ${what}`,
    barsize: 30,
    hideCursor: true,
    noTTYOutput: show === 'always',
    notTTYSchedule: options.notTtyEveryMs ?? 1000,
    etaBuffer: 50,
    clearOnComplete: options.clearOnStop === true,
    stream: process.stderr,
  })
  bar.start(total, 0, payload)
  let stopped = false
  return {
    update: (value, p) => bar.update(value, p ?? {}),
    increment: (step = 1, p) => bar.increment(step, p ?? {}),
    setTotal: (n) => bar.setTotal(n),
    stop: () => {
      if (stopped) return
      stopped = true
      bar.stop()
    },
  }
}
