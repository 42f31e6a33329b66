// Error messages: bad values described, long values truncated,
// credentials in a location never echoed, the demo refusing a URI, and idempotent disposal.
import { join } from 'node:path'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { pathToFileURL } from 'node:url'
import { randomUUID } from 'node:crypto'

import test from 'ava'

import {
  ClosedError,
  InvalidArgumentError,
  MemWalError,
  ObjectStore,
  ShardReader,
  ShardWriter,
  WalTailer,
  dropMemoryStore,
} from '../index'
import { memwalCli as memwal, runProcess, type Run } from './support/child-process'
import { rows, schema, tempDir } from './support/helpers'

const root = join(__dirname, '..')
const SECRET = 'SUPERSECRETvalue42'
const CRED_URI = `s3://AKIAKEY:${SECRET}@bucket/prefix?sig=${SECRET}`


/** The error `p` rejects with (or `f` throws), as a MemWalError. */
async function errorOf(f: () => unknown): Promise<MemWalError> {
  try {
    await f()
  } catch (e) {
    if (e instanceof MemWalError) return e
    throw e
  }
  throw new Error('expected an error')
}

test('a missing value is described as undefined, not "undefined undefined"', async (t) => {
  const e = await errorOf(() => ObjectStore.fromUri(undefined as unknown as string))
  t.is(e.code, 'INVALID_ARGUMENT')
  t.notRegex(e.message, /undefined undefined/)
  t.regex(e.message, /got undefined$/)
})

test('a NUL byte in a path is INVALID_ARGUMENT, not IO', async (t) => {
  const dir = tempDir(t)
  const e = await errorOf(() => ShardWriter.open(join(dir, 'a\0b'), { schema }))
  t.true(e instanceof InvalidArgumentError, e.message)
  t.regex(e.message, /NUL byte/)
  t.is((await errorOf(() => ObjectStore.local('x\0y'))).code, 'INVALID_ARGUMENT')
})

test('a 10,000-character shard id is echoed truncated, with its length', async (t) => {
  const dir = tempDir(t)
  const id = 'x'.repeat(10_000)
  const e = await errorOf(() => ShardReader.open(dir, { shardId: id }))
  t.is(e.code, 'INVALID_ARGUMENT')
  t.true(e.message.length < 400, `${e.message.length} chars`)
  t.regex(e.message, /… \(10002 chars\)/)
  const w = await errorOf(() => ShardWriter.open(dir, { schema, shardId: id }))
  t.true(w.message.length < 400, `${w.message.length} chars`)
})

for (const [title, f] of [
  ['a bad S3 URI', () => ObjectStore.fromUri(`s3://AKIAKEY:${SECRET}@/?token=${SECRET}`)],
  ['an unknown storage option', () => ObjectStore.fromUri(CRED_URI, { noSuchOption: 'x' })],
  ['missing credentials', () => ShardWriter.open(CRED_URI, { schema })],
  [
    'an unreachable endpoint',
    () =>
      ShardWriter.open(CRED_URI, {
        schema,
        storage: {
          endpoint: 'http://127.0.0.1:9',
          allowHttp: true,
          accessKeyId: 'a',
          secretAccessKey: 'b',
          region: 'us-east-1',
          clientMaxRetries: 0,
        },
      }),
  ],
  ['a bad shard under a URI with credentials', () => ShardReader.open(CRED_URI, { shardId: 'nope' })],
  ['storage options with an ObjectStore', () => ShardWriter.open(ObjectStore.memory(), { schema, storage: {} })],
] as const) {
  test(`credentials in a location never appear in the error for ${title}`, async (t) => {
    const e = await errorOf(f)
    t.false(e.message.includes(SECRET), e.message)
    t.false(String(e.stack).includes(SECRET))
    t.false(e.cause instanceof Error && e.cause.message.includes(SECRET))
  })
}

for (const args of [['inspect'], ['scan', '--shard', '00000000-0000-4000-8000-000000000000'], ['demo']]) {
  test(`memwal ${args[0]} never prints credentials of a URI`, async (t) => {
    const r = await memwal(...args, CRED_URI)
    t.not(r.code, 0)
    t.false(r.stderr.includes(SECRET), r.stderr)
    t.false(r.stdout.includes(SECRET), r.stdout)
  })
}

test('memwal demo refuses an s3:// location instead of writing to ./s3:/…', async (t) => {
  const cwd = mkdtempSync(join(tmpdir(), 'memwal-demo-uri-'))
  t.teardown(() => rmSync(cwd, { recursive: true, force: true }))
  // An empty working directory, where `./s3:/bucket/p` would show; tsx is loaded by path from there.
  const tsx = pathToFileURL(join(root, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href
  const r = await runProcess(process.execPath, ['--import', tsx, join(root, 'cli', 'main.ts'), 'demo', 's3://bucket/p'], {
    cwd,
    env: { ...process.env, FORCE_COLOR: '0', MEMWAL_DEBUG: '' },
  })
  t.is(r.code, 2, r.stderr)
  t.regex(r.stderr, /local directory/)
  t.deepEqual(await import('node:fs').then((fs) => fs.readdirSync(cwd)), [])
})

test('close() after asyncDispose does not throw (Node 20: no await using)', async (t) => {
  const w = await ShardWriter.open(tempDir(t), { schema })
  await w.put(rows([1]))
  await w[Symbol.asyncDispose]()
  await t.notThrowsAsync(w.close())
  await t.throwsAsync(w.put(rows([2])), { instanceOf: ClosedError })
})

test('ShardReader and WalTailer close idempotently, then reject with CLOSED', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema })
  await w.put(rows([1, 2]))
  await w.close()
  const r = await ShardReader.open(dir, { shardId: w.shardId })
  t.is((await r.scan()).numRows, 2)
  await r[Symbol.asyncDispose]()
  await t.notThrowsAsync(r.close())
  await t.throwsAsync(r.scan(), { instanceOf: ClosedError, code: 'CLOSED' })
  await t.throwsAsync(r.manifest(), { instanceOf: ClosedError })
  const tl = await WalTailer.open(dir, { shardId: w.shardId })
  t.true((await tl.nextPosition()) > 1)
  await tl[Symbol.asyncDispose]()
  await t.notThrowsAsync(tl.close())
  await t.throwsAsync(tl.read(1), { instanceOf: ClosedError })
  await t.throwsAsync(tl.nextPosition(), { instanceOf: ClosedError })
})

test('disposal after abort() does not throw', async (t) => {
  const w = await ShardWriter.open(tempDir(t), { schema })
  await w.abort()
  await t.notThrowsAsync(w[Symbol.asyncDispose]())
  await t.notThrowsAsync(w.close())
})

test('dropMemoryStore forgets a memory:// store: its data is gone and a reopened writer sees an empty shard', async (t) => {
  const name = `drop-${randomUUID()}`
  const loc = `memory://${name}`
  const w = await ShardWriter.open(loc, { schema })
  await w.put(rows([1, 2, 3]))
  await w.close()
  t.deepEqual(await ObjectStore.fromUri(loc).listShards(), [{ id: w.shardId, name: 'default' }])
  t.true(dropMemoryStore(name))
  t.false(dropMemoryStore(loc), 'a second drop finds nothing')
  t.deepEqual(await ObjectStore.fromUri(loc).listShards(), [])
  const again = await ShardWriter.open(loc, { schema, shardId: w.shardId })
  t.is(again.epoch, 1)
  t.is((await again.scan()).numRows, 0)
  await again.close()
  t.true(dropMemoryStore(loc))
  t.throws(() => dropMemoryStore(7 as never), { instanceOf: InvalidArgumentError })
})
