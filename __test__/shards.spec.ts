// Shards by name, as a user meets them: reopening a location reopens its
// shard, a name reaches the same shard from any process, listings give names and ids, and a
// shard folder without a manifest (a first open cut off) is skipped by readers and noted by
// `memwal inspect`.

import { createHash, randomUUID } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { memwalCli as memwal } from './support/child-process'
import {
  DEFAULT_SHARD_NAME,
  InvalidArgumentError,
  ObjectStore,
  ShardReader,
  ShardWriter,
  WalTailer,
  collectGarbage,
} from '../index'
import { ids, rows, schema, tempDir } from './support/helpers'

/** RFC 4122 version-5 UUID of `name` in `namespace`, computed independently of the library. */
function uuidV5(namespace: string, name: string): string {
  const hash = createHash('sha1')
    .update(Buffer.from(namespace.replace(/-/g, ''), 'hex'))
    .update(name, 'utf8')
    .digest()
  hash[6] = (hash[6]! & 0x0f) | 0x50
  hash[8] = (hash[8]! & 0x3f) | 0x80
  const h = hash.subarray(0, 16).toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}
const NAMESPACE = 'ca2ec0ef-b7f4-4339-afc0-58ef2006c8a6'

test('opening a location twice, as the Quick start does, reopens the same shard', async (t) => {
  const dir = tempDir(t)
  for (const batch of [[1, 2], [3]]) {
    const w = await ShardWriter.open(dir, { schema })
    t.is(w.shardName, DEFAULT_SHARD_NAME)
    t.is(w.shardId, uuidV5(NAMESPACE, 'default'), 'a standard version-5 UUID of the name')
    await w.put(rows(batch))
    await w.close()
  }
  t.deepEqual(await ObjectStore.local(dir).listShards(), [{ id: uuidV5(NAMESPACE, 'default'), name: 'default' }])
  const r = await ShardReader.open(dir)
  t.deepEqual(ids(await r.scan()), [1, 2, 3])
  t.is(r.shardName, 'default')
  t.is((await r.manifest()).shardName, 'default')
  t.is(await (await WalTailer.open(dir)).nextPosition(), 4, 'two entries and a fence sentinel, from one shard')
})

test('a name reaches the same shard every time; another name is another shard', async (t) => {
  const dir = tempDir(t)
  const events = await ShardWriter.open(dir, { schema, shard: 'events' })
  await events.put(rows([1]))
  await events.close()
  const audit = await ShardWriter.open(dir, { schema, shard: 'audit' })
  await audit.put(rows([100]))
  await audit.close()
  const again = await ShardWriter.open(dir, { schema, shard: 'events' })
  t.is(again.shardId, events.shardId)
  t.is(again.epoch, 2)
  t.deepEqual(ids(await again.scan()), [1])
  await again.close()
  t.deepEqual(ids(await (await ShardReader.open(dir, { shard: 'audit' })).scan()), [100])
  t.deepEqual(ids(await (await ShardReader.open(dir, { shardId: events.shardId })).scan()), [1])
  const listed = await ObjectStore.local(dir).listShards()
  t.deepEqual(
    listed,
    [
      { id: events.shardId, name: 'events' },
      { id: audit.shardId, name: 'audit' },
    ].sort((a, b) => a.id.localeCompare(b.id)),
  )
})

test('a shard by id (Lance-style) still works, and has no name', async (t) => {
  const dir = tempDir(t)
  const shardId = randomUUID()
  const w = await ShardWriter.open(dir, { schema, shardId })
  t.is(w.shardId, shardId)
  t.is(w.shardName, null)
  await w.close()
  const r = await ShardReader.open(dir, { shardId })
  t.is(r.shardName, null)
  t.deepEqual(await ObjectStore.local(dir).listShards(), [{ id: shardId, name: null }])
})

test('shard and shardId are checked: one at most, a name that is not a UUID, an id that is', async (t) => {
  const dir = tempDir(t)
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ shard: 'a', shardId: randomUUID() }, /pass either shard \(a name\) or shardId \(a UUID\), not both/],
    [{ shard: randomUUID() }, /is a UUID; pass a shard's id as shardId/],
    [{ shard: '' }, /shard name "" is empty/],
    [{ shard: 'a\nb' }, /control character/],
    [{ shard: 'x'.repeat(5000) }, /is 5000 bytes long; the limit is 200/],
    [{ shard: 7 }, /options\.shard expects a string, got number 7/],
    [{ shardId: 'events' }, /not a UUID; .* or a name as shard/],
  ]
  for (const [options, message] of cases) {
    const e = await t.throwsAsync(ShardWriter.open(dir, { schema, ...options }), { instanceOf: InvalidArgumentError, message })
    t.true((e?.message.length ?? 0) < 300, 'a long name is not echoed in full')
    await t.throwsAsync(ShardReader.open(dir, options), { instanceOf: InvalidArgumentError, message })
  }
  await t.throwsAsync(ShardReader.open(dir, { shard: 'never-written' }), {
    instanceOf: InvalidArgumentError,
    message: /no shard `never-written` \([0-9a-f-]{36}\) at .*: it has no manifest/,
  })
  t.deepEqual(await ObjectStore.local(dir).listShards(), [], 'nothing was created')
})

test('a shard folder without a manifest is skipped by listShards and noted by inspect', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, shard: 'events' })
  await w.put(rows([1]))
  await w.close()
  // What a first open killed before its manifest leaves behind.
  const stub = randomUUID()
  mkdirSync(join(dir, '_mem_wal', stub, 'wal'), { recursive: true })
  writeFileSync(join(dir, '_mem_wal', stub, 'wal', 'stray'), '')
  const store = ObjectStore.local(dir)
  t.deepEqual(await store.listShards(), [{ id: w.shardId, name: 'events' }])
  t.deepEqual(await store.listIncompleteShards(), [stub])

  const text = await memwal('inspect', dir)
  t.is(text.code, 0, text.stderr)
  t.regex(text.stdout, /: 1 shard\n/)
  t.regex(text.stdout, new RegExp(`^shard events \\(${w.shardId}\\)$`, 'm'))
  t.regex(text.stdout, new RegExp(`^incomplete shard folder ${stub}: it has no manifest`, 'm'))
  const json = JSON.parse((await memwal('inspect', dir, '--json')).stdout) as {
    shards: Array<{ shardName: string }>
    incompleteShards: string[]
  }
  t.deepEqual(json.shards.map((s) => s.shardName), ['events'])
  t.deepEqual(json.incompleteShards, [stub])

  // `--shard` takes a name or an id; without it, scan and wal read the shard named `default`.
  for (const shard of ['events', w.shardId]) {
    const scan = await memwal('scan', dir, '--shard', shard, '--format', 'json')
    t.is(scan.code, 0, scan.stderr)
    t.deepEqual(
      (JSON.parse(scan.stdout) as Array<{ id: number }>).map((r) => r.id),
      [1],
    )
  }
  const none = await memwal('scan', dir)
  t.is(none.code, 3)
  t.regex(none.stderr, /no shard default at .*; shards there: events \(/)
})

test('a shard name not in Unicode NFC is refused everywhere, saying to normalize it; the NFC spelling is the one shard', async (t) => {
  const dir = tempDir(t)
  const composed = 'caf\u00e9'
  const decomposed = 'cafe\u0301'
  t.is(decomposed.normalize('NFC'), composed)
  const message = /shard name "cafe\\u\{301\}" is not in Unicode NFC .*name\.normalize\('NFC'\).*opened by its id/
  await t.throwsAsync(ShardWriter.open(dir, { schema, shard: decomposed }), { instanceOf: InvalidArgumentError, message })
  const w = await ShardWriter.open(dir, { schema, shard: composed })
  await w.put(rows([1]))
  await w.close()
  await t.throwsAsync(ShardReader.open(dir, { shard: decomposed }), { instanceOf: InvalidArgumentError, message })
  await t.throwsAsync(WalTailer.open(dir, { shard: decomposed }), { instanceOf: InvalidArgumentError, message })
  await t.throwsAsync(collectGarbage(dir, { shard: decomposed }), { instanceOf: InvalidArgumentError, message })
  // What the user is told to do works, and reaches the one shard there is.
  const r = await ShardReader.open(dir, { shard: decomposed.normalize('NFC') })
  t.deepEqual(ids(await r.scan()), [1])
  t.deepEqual(await ObjectStore.local(dir).listShards(), [{ id: w.shardId, name: composed }])
})

test('the CLI refuses a --shard name not in Unicode NFC, naming its NFC spelling', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, shard: 'caf\u00e9' })
  await w.put(rows([1]))
  await w.close()
  const run = await memwal('scan', dir, '--shard', 'cafe\u0301')
  t.is(run.code, 2, run.stderr)
  t.regex(run.stderr, /not in Unicode NFC/)
  t.regex(run.stderr, /café/)
})

test('a shard name with a lone surrogate is refused before anything is written, so two such names never reach one shard', async (t) => {
  const dir = tempDir(t)
  for (const name of ['orders-\ud800', 'orders-\udbff', 'orders-\udc00x']) {
    const message = /shard name has a lone surrogate \(0xd[89abc]\w\w\) at index 7; a name must be well-formed Unicode/
    await t.throwsAsync(ShardWriter.open(dir, { schema, shard: name }), { instanceOf: InvalidArgumentError, message })
    await t.throwsAsync(ShardReader.open(dir, { shard: name }), { instanceOf: InvalidArgumentError, message })
  }
  t.deepEqual(await ObjectStore.local(dir).listShards(), [])
  // A surrogate pair (an emoji) is well formed.
  const w = await ShardWriter.open(dir, { schema, shard: 'orders-\u{1F600}' })
  await w.close()
  t.deepEqual((await ObjectStore.local(dir).listShards()).map((s) => s.name), ['orders-\u{1F600}'])
})
