import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'

import test, { type ExecutionContext } from 'ava'

import {
  FencedError,
  InvalidArgumentError,
  ObjectStore,
  ShardReader,
  ShardWriter,
  WalTailer,
  type StorageOptions,
} from '../index'
import { ids, rows, schema, tempDir } from './support/helpers'
import { startS3Server } from './support/s3-server'

const config = { maxWalFlushIntervalMs: null, maxMemtableSize: 64 << 20 }

test('a stale writer’s first durable put after a rotation rejects with FENCED on S3', async (t) => {
  const s3 = await startS3Server(t)
  const location = s3.location('seed')
  const storage = s3.storage
  const a = await ShardWriter.open(location, { schema, storage, ...config })
  await a.put(rows([1]))
  const g = (await a.memtableStats()).generation
  await a.forceSealActive()
  await a.waitForFlushDrain()
  t.is((await a.memtableStats()).generation, g + 1)

  const b = await ShardWriter.open(location, { schema, storage, shardId: a.shardId, ...config })
  t.true(b.epoch > a.epoch)
  // Local range 0..1 again, like the flushed generation's: it must fail with its own append's
  // fence, not be acknowledged by the old generation's.
  const e = await t.throwsAsync(a.put(rows([2])), { instanceOf: FencedError, code: 'FENCED' })
  t.is(e?.fenceReason, 'PeerClaimedEpoch')
  t.regex(e?.message ?? '', /^Writer fenced \(peer claimed epoch\)/)
  await b.close()
  const r = await ShardReader.open(location, { shardId: a.shardId, storage })
  t.deepEqual(ids(await r.scan()), [1])
})

test('an S3 location serves writers, readers, tailers and ObjectStore.fromUri', async (t) => {
  const s3 = await startS3Server(t)
  const location = s3.location('roundtrip')
  const w = await ShardWriter.open(location, { schema, storage: s3.storage })
  await w.put(rows([1, 2]))
  await w.put(rows([3]))
  await w.close()
  const store = ObjectStore.fromUri(location, s3.storage)
  t.is(store.location, location)
  t.deepEqual(await store.listShards(), [{ id: w.shardId, name: w.shardName }])
  t.deepEqual(ids(await (await ShardReader.open(store, { shardId: w.shardId })).scan()), [1, 2, 3])
  const tailer = await WalTailer.open(location, { shardId: w.shardId, storage: s3.storage })
  t.is(await tailer.nextPosition(), 3)
  t.deepEqual(ids((await tailer.read(1))!.table!), [1, 2])
  // snake_case object_store keys work as well as camelCase ones.
  const snake: StorageOptions = {
    endpoint: s3.endpoint,
    allow_http: true,
    region: 'us-east-1',
    aws_access_key_id: s3.storage.accessKeyId,
    aws_secret_access_key: s3.storage.secretAccessKey,
  }
  t.deepEqual(ids(await (await ShardReader.open(location, { shardId: w.shardId, storage: snake })).scan()), [1, 2, 3])
})

test('an S3 server without conditional writes is refused when a writer opens', async (t) => {
  const s3 = await startS3Server(t, { conditionalWrites: false })
  const location = s3.location('unsafe')
  const e = await t.throwsAsync(ShardWriter.open(location, { schema, storage: s3.storage }), {
    instanceOf: InvalidArgumentError,
    code: 'INVALID_ARGUMENT',
  })
  t.regex(e?.message ?? '', /conditional create/)
  t.true(e?.message.includes(location))
  t.deepEqual(await ObjectStore.fromUri(location, s3.storage).listShards(), [])
})

test('bad storage options reject with INVALID_ARGUMENT before anything is contacted', async (t) => {
  const keys = { accessKeyId: 'k', secretAccessKey: 's', endpoint: 'http://127.0.0.1:9', allowHttp: true }
  const bad = async (p: Promise<unknown> | (() => unknown), pattern: RegExp) => {
    const e =
      typeof p === 'function'
        ? t.throws(p, { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' })
        : await t.throwsAsync(p, { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' })
    t.regex(e?.message ?? '', pattern)
  }
  await bad(
    () => ObjectStore.fromUri('s3://bucket/p', { ...keys, noSuchOption: 'x' }),
    /unknown storage option `noSuchOption`/,
  )
  await bad(
    () => ObjectStore.fromUri('s3://bucket/p', { ...keys, allowHttp: 'yes' as unknown as boolean }),
    /allowHttp: expected a boolean/,
  )
  await bad(
    () => ObjectStore.fromUri('s3://bucket/p', { ...keys, region: 7 as unknown as string }),
    /region: expected a string/,
  )
  await bad(
    () => ObjectStore.fromUri('s3://bucket/p', { ...keys, clientMaxRetries: Number.NaN }),
    /clientMaxRetries: expected a number/,
  )
  await bad(
    () => ObjectStore.fromUri('s3://bucket/p', { ...keys, other: {} as unknown as string }),
    /other: expected a string, number or boolean/,
  )
  await bad(
    () => ObjectStore.fromUri('s3://bucket/p', 'region' as unknown as StorageOptions),
    /storage must be an object/,
  )
  await bad(
    ShardWriter.open(tempDir(t), { schema, storage: { region: 'x' } }),
    /storage options apply to object stores/,
  )
  await bad(ShardWriter.open(ObjectStore.memory(), { schema, storage: keys }), /pass them to ObjectStore.fromUri/)
  await bad(
    ShardReader.open('s3://bucket/p', { shardId: '00000000-0000-0000-0000-000000000000', storage: { nope: 1 } }),
    /`nope`/,
  )
  await bad(
    WalTailer.open('s3://bucket/p', {
      shardId: '00000000-0000-0000-0000-000000000000',
      storage: null as unknown as StorageOptions,
    }),
    /storage must be an object/,
  )
})

test('s3://, gs:// and az:// locations without credentials fail at once with what to set', async (t) => {
  const env = [
    'AWS_ACCESS_KEY_ID',
    'GOOGLE_SERVICE_ACCOUNT',
    'GOOGLE_APPLICATION_CREDENTIALS',
    'AZURE_STORAGE_ACCOUNT_KEY',
  ]
  if (env.some((v) => process.env[v] !== undefined)) {
    t.pass('the environment supplies credentials')
    return
  }
  for (const [location, storage, hint] of [
    ['s3://bucket/prefix', { region: 'us-east-1' }, /accessKeyId/],
    ['gs://bucket/prefix', {}, /serviceAccount/],
    ['az://container/prefix', { accountName: 'acct' }, /accountName and accessKey/],
  ] as const) {
    const e = await t.throwsAsync(ShardWriter.open(location, { schema, storage }), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
    })
    t.true(e?.message.startsWith(`no credentials for ${location}`), e?.message)
    t.regex(e?.message ?? '', hint)
    t.regex(e?.message ?? '', /instanceCredentials: true/)
  }
  // With credentials they parse; nothing is contacted until the store is used.
  t.is(
    ObjectStore.fromUri('az://container/prefix', { accountName: 'acct', accessKey: 'a2V5' }).location,
    'az://container/prefix',
  )
  t.is(ObjectStore.fromUri('gs://bucket/prefix', { instanceCredentials: true }).location, 'gs://bucket/prefix')
})

// ---------------------------------------------------------------------------------------------
// Two writer processes on one S3 location
// ---------------------------------------------------------------------------------------------

const CHILD = join(__dirname, 'support', 's3-child.ts')

interface Reply {
  id?: number
  ok?: boolean
  event?: string
  name?: string
  shardId?: string
  epoch?: number
  acked?: number[]
  error?: { code: string; fenceReason?: string; message: string } | null
}

/** A writer process (`support/s3-child.ts`), driven by JSON-line commands. */
class WriterProcess {
  readonly #child: ChildProcess
  readonly #messages: Reply[] = []
  readonly #waiters: Array<() => void> = []
  #next = 1

  constructor(t: ExecutionContext, location: string, storage: StorageOptions, env: Record<string, string> = {}) {
    this.#child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify({ location, storage })], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    })
    t.teardown(() => this.#child.kill())
    createInterface({ input: this.#child.stdout! }).on('line', (line) => {
      this.#messages.push(JSON.parse(line) as Reply)
      for (const w of this.#waiters.splice(0)) w()
    })
  }

  /** Waits (at most 60 s) for a message matching `pred`. */
  async waitFor(pred: (m: Reply) => boolean): Promise<Reply> {
    const deadline = Date.now() + 60_000
    for (;;) {
      const m = this.#messages.find(pred)
      if (m !== undefined) return m
      if (Date.now() > deadline || this.#child.exitCode !== null) throw new Error('writer process did not answer')
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve)
        setTimeout(resolve, 1000)
      })
    }
  }

  /** Sends a command and waits for its reply. */
  async request(cmd: object): Promise<Reply> {
    const id = this.#next++
    this.#child.stdin!.write(`${JSON.stringify({ id, ...cmd })}\n`)
    return this.waitFor((m) => m.id === id)
  }

  /** Like `request`, failing the test if the command failed. */
  async ok(t: ExecutionContext, cmd: object): Promise<Reply> {
    const r = await this.request(cmd)
    if (r.ok !== true) t.fail(`${JSON.stringify(cmd)} failed: ${JSON.stringify(r.error)}`)
    return r
  }

  /** Acknowledged ids of the stream on `name` so far. */
  ackedCount(name: string): number {
    return this.#messages.filter((m) => m.event === 'acked' && m.name === name).length
  }

  /** Closes stdin and waits for the process to exit. */
  async exit(): Promise<void> {
    if (this.#child.exitCode !== null) return
    const done = new Promise((resolve) => this.#child.once('exit', resolve))
    this.#child.stdin!.end()
    await done
  }
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i)

test('two processes on S3: one takes over a shard of the other, which is fenced, and every acknowledged row is recovered once', async (t) => {
  t.timeout(120_000)
  const s3 = await startS3Server(t)
  const location = s3.location('failover')
  const a = new WriterProcess(t, location, s3.storage)
  const b = new WriterProcess(t, location, s3.storage)

  // Each process owns its own shards.
  const [a1, a2, b1, b2] = await Promise.all([
    a.ok(t, { cmd: 'open', name: 'a1' }),
    a.ok(t, { cmd: 'open', name: 'a2' }),
    b.ok(t, { cmd: 'open', name: 'b1' }),
    b.ok(t, { cmd: 'open', name: 'b2' }),
  ])
  await Promise.all([
    a.ok(t, { cmd: 'put', name: 'a2', ids: range(2000, 16) }),
    b.ok(t, { cmd: 'put', name: 'b1', ids: range(3000, 16) }),
    b.ok(t, { cmd: 'put', name: 'b2', ids: range(4000, 16) }),
  ])

  // A streams durable puts into a1; once some are acknowledged, B takes a1 over. The stream is
  // far longer than any takeover takes, however slow the machine, so only the fence can end it.
  const STREAM = 1_000_000
  await a.ok(t, { cmd: 'stream', name: 'a1', start: 10_000, count: STREAM })
  await a.waitFor((m) => m.event === 'acked' && m.name === 'a1' && (m as { id?: number }).id === 10_009)
  const takeover = await b.ok(t, { cmd: 'open', name: 'a1', shardId: a1.shardId })
  t.is(takeover.shardId, a1.shardId)
  t.true(takeover.epoch! > a1.epoch!)

  // A's stream stops at its first put after the takeover, with its own append's fence.
  const end = await a.waitFor((m) => m.event === 'streamEnd' && m.name === 'a1')
  t.is(end.error?.code, 'FENCED', JSON.stringify(end.error))
  t.is(end.error?.fenceReason, 'PeerClaimedEpoch')
  t.true(end.acked!.length >= 10)
  t.true(end.acked!.length < STREAM, 'the takeover happened mid-stream')
  const stale = await a.request({ cmd: 'put', name: 'a1', ids: [19_999] })
  t.is(stale.error?.fenceReason, 'PeerClaimedEpoch', 'the fence is latched')

  // A keeps its other shard; B writes to the shard it took over.
  await a.ok(t, { cmd: 'put', name: 'a2', ids: range(2100, 8) })
  await b.ok(t, { cmd: 'put', name: 'a1', ids: range(20_000, 8) })
  const closeStale = await a.request({ cmd: 'close', name: 'a1' })
  t.is(closeStale.error?.code, 'FENCED')
  await a.ok(t, { cmd: 'close', name: 'a2' })
  await b.ok(t, { cmd: 'close', name: 'b1' })
  await b.ok(t, { cmd: 'close', name: 'a1' })
  // b2 is not closed: its rows come back from the WAL.
  await Promise.all([a.exit(), b.exit()])

  const recovered = async (shardId: string) =>
    ids(await (await ShardReader.open(location, { shardId, storage: s3.storage })).scan())
  const exactlyOnce = (got: number[], want: number[]) => {
    t.is(new Set(got).size, got.length, 'no row twice')
    t.deepEqual(
      [...got].sort((x, y) => x - y),
      [...want].sort((x, y) => x - y),
    )
  }
  const a1Rows = await recovered(a1.shardId!)
  exactlyOnce(a1Rows, [...end.acked!, ...range(20_000, 8)])
  t.deepEqual(a1Rows.slice(0, end.acked!.length), end.acked!, 'A’s acknowledged rows first, in order')
  exactlyOnce(await recovered(a2.shardId!), [...range(2000, 16), ...range(2100, 8)])
  exactlyOnce(await recovered(b1.shardId!), range(3000, 16))
  exactlyOnce(await recovered(b2.shardId!), range(4000, 16))
  t.is(a.ackedCount('a1'), end.acked!.length)
})

test('a process configured only by AWS_* environment variables reaches S3', async (t) => {
  const s3 = await startS3Server(t)
  const location = s3.location('env')
  const child = new WriterProcess(
    t,
    location,
    {},
    {
      AWS_ENDPOINT: s3.endpoint,
      AWS_ALLOW_HTTP: 'true',
      AWS_REGION: String(s3.storage.region),
      AWS_ACCESS_KEY_ID: String(s3.storage.accessKeyId),
      AWS_SECRET_ACCESS_KEY: String(s3.storage.secretAccessKey),
    },
  )
  const w = await child.ok(t, { cmd: 'open', name: 'w' })
  await child.ok(t, { cmd: 'put', name: 'w', ids: [1, 2, 3] })
  await child.ok(t, { cmd: 'close', name: 'w' })
  await child.exit()
  const r = await ShardReader.open(location, { shardId: w.shardId!, storage: s3.storage })
  t.deepEqual(
    ids(await r.scan()).sort((x, y) => x - y),
    [1, 2, 3],
  )
})
