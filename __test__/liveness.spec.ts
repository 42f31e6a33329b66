// Liveness of the event loop under a put loop. A non-durable put completes in memory, but its
// promise must still settle through the event loop: if it resolved within the same macrotask
// (microtasks only), `for (;;) await writer.put(rows)` would never let timers, I/O or the
// durability acknowledgements of other writers run. The crash loop (crash_loop.spec.ts) depends
// on this too (its flush loop is timer-driven and its durable writer shares the process).

import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

import test from 'ava'

import { ShardWriter } from '../index'
import { memoryLocation, rows, schema, tempDir } from './support/helpers'

const ROOT = join(__dirname, '..')

test('a tight loop of non-durable puts lets timers fire and another writer’s durable puts resolve', async (t) => {
  const n = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  const d = await ShardWriter.open(memoryLocation(), { schema })
  // The loops stop at a wall-clock deadline (Date.now() needs no event loop), so a starved
  // event loop fails this test instead of hanging it. The deadline only bounds a failure: a
  // healthy run ends as soon as both events happened, so a slow machine cannot fail it.
  const deadline = Date.now() + 60_000
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

// The native side must hold the process open exactly while a put waits for durability: a
// script whose only work is an `await put()` (here with its WAL append retried for ~1 s) must
// see it settle, not exit with the promise unsettled, and a script that leaves an idle writer
// open (background ticker and all) must still exit by itself.
function runScript(body: string): Promise<{ code: number | null; signal: string | null; out: string; ms: number }> {
  const script = `
    import { ShardWriter, ObjectStore } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'index.mjs')).href)}
    import { tableFromArrays, Schema, Field, Int32 } from 'apache-arrow'
    const schema = new Schema([new Field('id', new Int32(), false)])
    const one = () => tableFromArrays({ id: Int32Array.from([1]) })
    ${body}
  `
  const started = Date.now()
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 60_000,
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.on('close', (code, signal) => resolve({ code, signal, out, ms: Date.now() - started }))
  })
}

test('a pending durable put keeps the process alive until it settles; an idle open writer does not', async (t) => {
  const dir = tempDir(t)
  const retried = await runScript(`
    const store = ObjectStore.local(${JSON.stringify(dir)})
    const w = await ShardWriter.open(store, { schema, walPersistRetryBaseDelayMs: 300, maxWalPersistRetries: 5 })
    store.faults.failWalPuts(2)
    await w.put(one())
    console.log('durable after ' + store.faults.walPutAttempts() + ' attempts')
  `)
  t.is(retried.code, 0, 'exit code 13 means the durable put was left unsettled when the loop emptied')
  t.regex(retried.out, /durable after 3 attempts/)
  const idle = await runScript(`
    const w = await ShardWriter.open(${JSON.stringify(join(dir, 'idle'))}, { schema })
    await w.put(one())
    console.log('left open')
  `)
  t.is(idle.signal, null, 'the script exited by itself')
  t.is(idle.code, 0)
  t.regex(idle.out, /left open/)
})
