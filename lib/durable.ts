// The durable-acknowledgement registry. A durable put is inserted with a durable id (the
// binding's one `put`) and then waits here, by id, until the writer's relay
// (`NativeShardWriter.relayDurable`, registered once per writer) reports the WAL append that
// covers it: one callback per append settles all of its puts, where a native promise per put
// cost more than the insert itself. Which rows an id covers, and when an append counts, is the
// core's durability contract (`flush.rs`); this file only routes the outcome to the waiter.

import { translate } from './native-call.js'
import type { WalEntryCost } from './types.js'

/** A put waiting for its WAL append: its promise's settle functions. */
interface DurableWaiter {
  resolve: (cost?: WalEntryCost) => void
  reject: (e: unknown) => void
}

const durableWaiters = new Map<number, DurableWaiter>()
let nextDurableId = 1

/**
 * Holds the event loop open while a put waits in `durableWaiters`: the relay's threadsafe
 * function is weak (it must not keep a process with an idle writer alive), so without this a
 * script whose last act is `await writer.put(...)` could exit before the put resolves.
 */
const durableKeepAlive = setInterval(() => undefined, 2 ** 31 - 1)
durableKeepAlive.unref()

/** A fresh id to insert a durable put under (never reused, so no two waiters share one). */
export function newDurableId(): number {
  return nextDurableId++
}

/**
 * Resolves when the relay reports put `id` durable (with its WAL entry's cost, if the put was
 * inserted asking for it); rejects with its typed error if it failed.
 */
export function awaitDurable(id: number): Promise<WalEntryCost | undefined> {
  if (durableWaiters.size === 0) durableKeepAlive.ref()
  return new Promise((resolve, reject) => durableWaiters.set(id, { resolve, reject }))
}

/** Forgets put `id`'s waiter (its insert failed, or nothing will be relayed for it). */
export function cancelDurable(id: number): void {
  durableWaiters.delete(id)
  if (durableWaiters.size === 0) durableKeepAlive.unref()
}

function takeDurable(id: number): DurableWaiter | undefined {
  const w = durableWaiters.get(id)
  if (w !== undefined) durableWaiters.delete(id)
  return w
}

/**
 * The relay callback: settles the puts that are durable (`ok`), those whose append failed
 * (`failed`, with the tagged message of each failure, in order), and the durable puts that
 * asked for their cost (`costs`: id, position, requests, bytes, puts for each; `null` if none).
 */
export function settleDurable(ok: number[], failed: number[], messages: string[], costs: number[] | null): void {
  for (const id of ok) takeDurable(id)?.resolve()
  if (costs !== null) {
    for (let i = 0; i + 4 < costs.length; i += 5) {
      const [id, position, requests, bytes, puts] = costs.slice(i, i + 5) as [number, number, number, number, number]
      takeDurable(id)?.resolve({ position, requests, bytes, puts })
    }
  }
  failed.forEach((id, i) => takeDurable(id)?.reject(translate(new Error(messages[i]))))
  if (durableWaiters.size === 0) durableKeepAlive.unref()
}
