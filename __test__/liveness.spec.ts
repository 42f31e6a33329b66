// Liveness of the event loop under a put loop. A non-durable put completes in memory, but its
// promise must still settle through the event loop: if it resolved within the same macrotask
// (microtasks only), `for (;;) await writer.put(rows)` would never let timers, I/O or the
// durability acknowledgements of other writers run. The R1 crash loop depends on this too (its
// flush loop is timer-driven and its durable writer shares the process).

import test from 'ava'

import { ShardWriter } from '../index'
import { memoryLocation, rows, schema } from './helpers'

test('a tight loop of non-durable puts lets timers fire and another writer’s durable puts resolve', async (t) => {
  const n = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  const d = await ShardWriter.open(memoryLocation(), { schema })
  // The loops stop at a wall-clock deadline (Date.now() needs no event loop), so a starved
  // event loop fails this test in seconds instead of hanging it.
  const deadline = Date.now() + 3000
  let running = true
  let timerFired = false
  let durableResolved = false
  let puts = 0
  const loop = async () => {
    const data = rows([1])
    while (Date.now() < deadline && !(timerFired && durableResolved)) {
      await n.put(data)
      puts++
    }
  }
  setTimeout(() => {
    timerFired = running
  }, 20)
  const durable = d.put(rows([2])).then(() => {
    durableResolved = running
  })
  await Promise.all([loop(), loop()])
  running = false
  await durable
  t.log(`${puts} non-durable puts ran before the timer and the durable put got through`)
  t.true(timerFired, 'a 20 ms timer fired while the put loops ran')
  t.true(durableResolved, 'another writer’s durable put resolved while the put loops ran')
  await Promise.all([n.close(), d.close()])
})
