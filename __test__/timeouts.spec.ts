// Deadlines: a store that accepts connections and never answers fails in
// time with a TimeoutError naming the operation, and a call's `signal` rejects it with Node's
// AbortError shape. The silent store is a TCP server on 127.0.0.1 that accepts and holds every
// connection; no test here waits for a store's default budget.

import { randomUUID } from 'node:crypto'
import { type Server, type Socket, createServer } from 'node:net'

import test, { type ExecutionContext } from 'ava'

import {
  AbortError,
  InvalidArgumentError,
  ObjectStore,
  ShardReader,
  ShardWriter,
  type StorageOptions,
  TimeoutError,
  WalTailer,
} from '../index'
import { ids, inMemoryWriter, rows, schema, tempDir } from './support/helpers'

/**
 * A server that accepts connections and never answers, and storage options that reach it;
 * `connected` resolves on the first connection.
 */
async function silentStore(t: ExecutionContext): Promise<{ storage: StorageOptions; connected: Promise<void> }> {
  const sockets: Socket[] = []
  let onFirst = (): void => undefined
  const connected = new Promise<void>((resolve) => {
    onFirst = resolve
  })
  const server: Server = createServer((socket) => {
    sockets.push(socket)
    onFirst()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const s of sockets) s.destroy()
    server.close()
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return {
    storage: {
      endpoint: `http://127.0.0.1:${address.port}`,
      allowHttp: true,
      region: 'us-east-1',
      accessKeyId: 'k',
      secretAccessKey: 's',
      // Short client budgets, so that work a test stopped waiting for ends soon after it.
      timeout: '1s',
      connectTimeout: '1s',
      clientRetryTimeout: 1,
    },
    connected,
  }
}

const location = (): string => `s3://bucket/${randomUUID()}`

test('ShardReader.open with a short timeoutMs on a store that never answers rejects with TimeoutError naming the open', async (t) => {
  const { storage } = await silentStore(t)
  const e = await t.throwsAsync(ShardReader.open(location(), { shardId: randomUUID(), storage, timeoutMs: 200 }), {
    instanceOf: TimeoutError,
    code: 'TIMEOUT',
  })
  t.regex(e?.message ?? '', /^Timed out: ShardReader\.open did not finish within 200 ms/)
})

test('ShardWriter.open and WalTailer.open take timeoutMs too', async (t) => {
  const { storage } = await silentStore(t)
  const w = await t.throwsAsync(ShardWriter.open(location(), { schema, storage, timeoutMs: 100 }), { instanceOf: TimeoutError })
  t.regex(w?.message ?? '', /ShardWriter\.open did not finish within 100 ms/)
  // A tailer's open reads nothing, so it is done before any deadline: the option is accepted.
  await t.notThrowsAsync(WalTailer.open(location(), { shardId: randomUUID(), storage, timeoutMs: 100 }))
})

test("a store that never answers fails a writer's open with TimeoutError from its own budget, not a conditional-writes error", async (t) => {
  const { storage } = await silentStore(t)
  const short = { ...storage, timeout: '300ms', connectTimeout: '300ms' }
  const e = await t.throwsAsync(ShardWriter.open(location(), { schema, storage: short }), {
    instanceOf: TimeoutError,
    code: 'TIMEOUT',
  })
  t.regex(e?.message ?? '', /^Timed out probing conditional create at s3:\/\/bucket\//)
  t.notRegex(e?.message ?? '', /conditional writes/)
})

test('an already-aborted signal rejects the open at once with AbortError and claims nothing', async (t) => {
  const dir = tempDir(t)
  const reason = new Error('shutting down')
  const e = await t.throwsAsync(ShardWriter.open(dir, { schema, signal: AbortSignal.abort(reason) }), { instanceOf: AbortError })
  t.is(e?.name, 'AbortError')
  t.is(e?.code, 'ABORT_ERR')
  t.is(e?.cause, reason)
  t.regex(e?.message ?? '', /ShardWriter\.open was aborted/)
  t.deepEqual(await ObjectStore.local(dir).listShards(), [], 'nothing was claimed')
  await t.throwsAsync(ShardReader.open(dir, { shardId: randomUUID(), signal: AbortSignal.abort() }), { name: 'AbortError' })
})

test('aborting while the open waits on a silent store rejects it with AbortError', async (t) => {
  const { storage, connected } = await silentStore(t)
  for (const open of [
    (signal: AbortSignal) => ShardWriter.open(location(), { schema, storage, signal }),
    (signal: AbortSignal) => ShardReader.open(location(), { shardId: randomUUID(), storage, signal }),
  ]) {
    const controller = new AbortController()
    const pending = open(controller.signal)
    await connected
    const reason = new Error('user cancelled')
    controller.abort(reason)
    const e = await t.throwsAsync(pending, { instanceOf: AbortError })
    t.is(e?.cause, reason)
  }
})

test('a put whose signal aborts rejects with AbortError, and its rows may still become durable', async (t) => {
  const { store, w } = await inMemoryWriter({ maxWalPersistRetries: 20, walPersistRetryBaseDelayMs: 20 })
  t.teardown(() => w.abort())
  await t.throwsAsync(w.put(rows([0]), { signal: AbortSignal.abort() }), { instanceOf: AbortError })
  store.faults.failWalPuts(Infinity)
  const controller = new AbortController()
  const pending = w.put(rows([1]), { signal: controller.signal })
  while (store.faults.walPutAttempts() === 0) {
    await new Promise((r) => setTimeout(r, 1))
  }
  controller.abort()
  await t.throwsAsync(pending, { instanceOf: AbortError })
  store.faults.recover()
  await w.flush()
  t.deepEqual(ids(await w.scan()), [1], 'the aborted put was written; the one aborted before it began was not')
})

test('flush and close stop waiting on their signal or timeoutMs; abort then stops the writer', async (t) => {
  const { store, w } = await inMemoryWriter({ maxWalPersistRetries: 20, walPersistRetryBaseDelayMs: 1000 })
  await w.put(rows([1]), { requestId: 'r1' })
  store.faults.failWalPuts(Infinity)
  void w.putNoWait(rows([2])).then(({ durable }) => durable?.catch(() => undefined))
  const controller = new AbortController()
  const flushing = w.flush({ signal: controller.signal })
  controller.abort()
  await t.throwsAsync(flushing, { instanceOf: AbortError })
  const e = await t.throwsAsync(w.close({ timeoutMs: 50 }), { instanceOf: TimeoutError, code: 'TIMEOUT' })
  t.regex(e?.message ?? '', /^Timed out: close did not finish within 50 ms/)
  await w.abort()
})

test('a signal that is not an AbortSignal, a bad timeoutMs, or a timeoutMs where none is taken is INVALID_ARGUMENT', async (t) => {
  const dir = tempDir(t)
  const bad = 'soon' as unknown as AbortSignal
  await t.throwsAsync(ShardWriter.open(dir, { schema, signal: bad }), { instanceOf: InvalidArgumentError, message: /signal must be an AbortSignal/ })
  await t.throwsAsync(ShardWriter.open(dir, { schema, timeoutMs: -1 }), { instanceOf: InvalidArgumentError, message: /timeoutMs/ })
  await t.throwsAsync(ShardReader.open(dir, { shardId: randomUUID(), timeoutMs: Number.NaN }), { instanceOf: InvalidArgumentError })
  const { w } = await inMemoryWriter()
  t.teardown(() => w.abort())
  await t.throwsAsync(w.put(rows([1]), { signal: bad }), { instanceOf: InvalidArgumentError })
  await t.throwsAsync(w.flush({ timeoutMs: 5 } as unknown as { signal?: AbortSignal }), { instanceOf: InvalidArgumentError, message: /timeoutMs/ })
  await t.throwsAsync(w.close({ signal: bad }), { instanceOf: InvalidArgumentError })
  t.deepEqual(ids(await w.scan()), [], 'nothing was written')
})
