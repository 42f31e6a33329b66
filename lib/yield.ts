// Lets the event loop run during a tight loop of puts. A put that the binding inserts at once
// (a small one) settles without an event-loop turn, so `for (;;) await writer.put(rows)` would
// starve timers, I/O and the durability acknowledgements of other writers; such puts await
// `yieldIfDue()`, which gives the event loop one macrotask per interval.

/** How long synchronous inserts may hold the event loop before a put yields, in milliseconds. */
const YIELD_INTERVAL_MS = 1
let lastYield = performance.now()

/** A macrotask to await if synchronous inserts have held the event loop for an interval. */
export function yieldIfDue(): Promise<void> | null {
  const now = performance.now()
  if (now - lastYield < YIELD_INTERVAL_MS) return null
  lastYield = now
  return new Promise((resolve) => setImmediate(resolve))
}
