// Writer events, as a service wires them: `writer.on(...)` fires with the
// fields each event documents, and a background failure arrives at once, with no call waiting.

import test from 'ava'

import {
  FencedError,
  type BackpressureEvent,
  type GenerationFlushedEvent,
  InvalidArgumentError,
  ObjectStore,
  type RetryEvent,
  ShardWriter,
  type WalAppendEvent,
} from '../index'
import { memoryLocation, rows, schema, tempDir } from './support/helpers'

/**
 * The next `event` of `w`, as a promise. Events do not keep the process alive (a service has
 * its own handles; a test waiting on nothing else would end): a timer does, until it comes.
 */
function next<T>(
  w: ShardWriter,
  event: 'walAppend' | 'generationFlushed' | 'compaction' | 'gc' | 'fenced' | 'retry' | 'backpressure',
  matches: (e: T) => boolean = () => true,
): Promise<T> {
  const alive = setInterval(() => undefined, 1000)
  return new Promise<T>((resolve) => {
    const listener = (e: T): void => {
      if (!matches(e)) return
      w.off(event, listener as never)
      resolve(e)
    }
    w.on(event, listener as never)
  }).finally(() => clearInterval(alive))
}

test('walAppend, generationFlushed, compaction and gc fire with their fields', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, maxMemtableBatches: 1, compactionMaxGenerations: 2, gcIntervalMs: 5 })
  const append = next<WalAppendEvent>(w, 'walAppend')
  const flushed = next<GenerationFlushedEvent>(w, 'generationFlushed')
  const compaction = next<{ merged: number; rows: number; file: string }>(w, 'compaction')
  const collected: Array<{ walEntriesRemoved: number }> = []
  w.on('gc', (r) => collected.push(r))
  await w.put(rows([0, 1, 2]))
  t.like(await append, { position: 1, puts: 1, batches: 1, rows: 3 })
  t.true((await append).latencyMs >= 0)
  const f = await flushed
  t.like(f, { generation: 1, rows: 3 })
  t.regex(f.file, /_gen_1\/data\.parquet$/)
  await w.put(rows([3]))
  await w.put(rows([4]))
  t.like(await compaction, { merged: 3, rows: 5 })
  while (!collected.some((r) => r.walEntriesRemoved > 0)) await new Promise((r) => setTimeout(r, 5))
  await w.close()
})

test('a background WAL failure in non-durable mode is emitted as fenced at once', async (t) => {
  const store = ObjectStore.memory()
  const w = await ShardWriter.open(store, {
    schema,
    durableWrite: false,
    maxWalFlushIntervalMs: 10,
    maxWalPersistRetries: 0,
  })
  const fenced = next<FencedError>(w, 'fenced')
  store.faults.failWalPuts(Infinity)
  await w.put(rows([1]))
  const e = await fenced
  t.true(e instanceof FencedError)
  t.is(e.fenceReason, 'PersistenceFailure')
  t.regex(e.message, /WAL persistence failed/)
  t.is(e.message.split('injected transient WAL put failure').length, 2, `the cause is said once: ${e.message}`)
  store.faults.recover()
  const later = await t.throwsAsync(w.put(rows([2])), { instanceOf: FencedError })
  t.is(later?.message.split('injected transient WAL put failure').length, 2, `the cause is said once: ${later?.message}`)
  await w.abort()
})

test('a successor fences a writer: the event names the holder', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema, durableWrite: false, maxWalFlushIntervalMs: 10 })
  const fenced = next<FencedError>(a, 'fenced')
  const b = await ShardWriter.open(dir, { schema })
  await a.put(rows([1]))
  const e = await fenced
  t.is(e.fenceReason, 'PeerClaimedEpoch')
  t.is(e.holder?.epoch, b.epoch)
  await a.abort()
  await b.close()
})

test('with no error listener a background failure is not thrown; bad listeners are refused', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, gcIntervalMs: 5 })
  // Listening to something else starts the events; a failed collection would be an `error`.
  w.on('walAppend', () => undefined)
  await w.put(rows([1]))
  t.throws(() => w.on('nope' as never, () => undefined), { instanceOf: InvalidArgumentError, message: /unknown event string "nope"; events: fenced, walAppend/ })
  t.throws(() => w.on('gc', 42 as never), { instanceOf: InvalidArgumentError, message: /listener must be a function/ })
  const listener = (): void => undefined
  t.is(w.on('gc', listener).off('gc', listener), w)
  await w.close()
})

test('each retry of a failed WAL append is emitted with its attempt, error and delay', async (t) => {
  const store = ObjectStore.memory()
  const w = await ShardWriter.open(store, { schema, walPersistRetryBaseDelayMs: 1 })
  const retries: RetryEvent[] = []
  w.on('retry', (e) => retries.push(e))
  // Events arrive in order: the append's comes after its retries'.
  const appended = next<WalAppendEvent>(w, 'walAppend')
  store.faults.failWalPuts(2)
  await w.put(rows([1]))
  await appended
  t.deepEqual(
    retries.map(({ operation, attempt, delayMs }) => ({ operation, attempt, delayMs })),
    [
      { operation: 'wal append', attempt: 1, delayMs: 1 },
      { operation: 'wal append', attempt: 2, delayMs: 2 },
    ],
  )
  for (const r of retries) t.regex(r.error, /injected transient WAL put failure/)
  await w.close()
})

test('backpressure is emitted once when puts start waiting and once when they stop', async (t) => {
  const w = await ShardWriter.open(ObjectStore.memory(), { schema, maxUnflushedMemtableBytes: 100 })
  const phases: BackpressureEvent[] = []
  w.on('backpressure', (e) => phases.push(e))
  const ended = next<BackpressureEvent>(w, 'backpressure', (e) => e.phase === 'end')
  // Each put after the first finds the previous one's bytes unflushed and waits for its flush.
  for (let i = 0; i < 5; i++) await w.put(rows([i * 10, i * 10 + 1, i * 10 + 2]))
  await ended
  await w.close()
  // Every episode's end was sent before its put resolved; events arrive on their own turn of
  // the event loop, so wait for the last of them.
  while (phases.length % 2 !== 0) await new Promise((r) => setTimeout(r, 5))
  t.true(phases.length >= 2, JSON.stringify(phases))
  phases.forEach((e, i) => t.is(e.phase, i % 2 === 0 ? 'start' : 'end', JSON.stringify(phases)))
  t.true((phases[0]?.bytesWaiting ?? 0) >= 100, JSON.stringify(phases))
})

/** Resolves once `done()` holds, checking at every turn of the event loop (which it keeps alive). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 1))
}

test('a listener that throws or rejects is reported as an error event; the event\'s other listeners still run', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  const errors: Error[] = []
  const positions: number[] = []
  w.on('error', (e) => errors.push(e))
  w.on('walAppend', () => {
    throw new Error('boom')
  })
  w.on('walAppend', async () => {
    throw new Error('async boom')
  })
  w.on('walAppend', (e) => positions.push(e.position))
  await w.put(rows([1]))
  await until(() => errors.length === 2 && positions.length === 1)
  t.deepEqual(positions, [1])
  t.deepEqual(
    errors.map((e) => e.message),
    ["a ShardWriter 'walAppend' listener threw: boom", "a ShardWriter 'walAppend' listener threw: async boom"],
  )
  t.is((errors[0]!.cause as Error).message, 'boom')
  // The writer goes on.
  await w.put(rows([2]))
  await until(() => positions.length === 2)
  t.deepEqual(positions, [1, 2])
  await w.close()
})

test('with no error listener (or one that throws), a listener\'s error becomes a process warning, not a crash', async (t) => {
  const warnings: Error[] = []
  const onWarning = (warning: Error): void => {
    if (warning.name === 'MemWalListenerWarning') warnings.push(warning)
  }
  process.on('warning', onWarning)
  t.teardown(() => process.off('warning', onWarning))
  const w = await ShardWriter.open(memoryLocation(), { schema })
  w.on('walAppend', () => {
    throw new Error('boom')
  })
  await w.put(rows([1]))
  await until(() => warnings.length === 1)
  t.regex(warnings[0]!.message, /^a ShardWriter 'walAppend' listener threw: boom\. memwal went on; .*listen for 'error'/)
  // An `error` listener that throws itself is reported the same way, once.
  w.on('error', () => {
    throw new Error('the error listener broke')
  })
  await w.put(rows([2]))
  await until(() => warnings.length === 2)
  t.regex(warnings[1]!.message, /^a ShardWriter 'error' listener threw: the error listener broke/)
  await w.close()
})
