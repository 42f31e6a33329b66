// Stalls of store calls through the public API (`ObjectStore.faults.stall`): one actor held at
// an exact store call while others run to completion. The core's stall suites
// (crates/memwal-core/tests/collected_versions.rs) cover the interleavings; these check that
// JavaScript can set up the same ones, with one `ObjectStore` handle per actor to tell them
// apart, and that the names and argument checks are right.

import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'

import {
  FencedError,
  InvalidArgumentError,
  IoError,
  ObjectStore,
  ShardReader,
  ShardWriter,
  type ShardWriterOptions,
  type StoreStall,
  collectGarbage,
} from '../index'
import { runProcess } from './support/child-process'
import { ids, rows, schema, tempDir } from './support/helpers'

/** Durable, collecting only when a test asks, keeping as few manifest versions as allowed. */
const config: ShardWriterOptions = { schema, gc: false, compaction: false, gcKeepManifestVersions: 2 }

/** Puts `rowIds` in one durable put and commits them as a generation. */
async function putAndFlush(w: ShardWriter, rowIds: number[]): Promise<void> {
  await w.put(rows(rowIds))
  await w.forceSealActive()
  await w.waitForFlushDrain()
}

/** A writer on `location`, aborted when the test ends if it is still open (a failed test). */
async function openWriter(t: ExecutionContext, location: string | ObjectStore): Promise<ShardWriter> {
  const w = await ShardWriter.open(location, config)
  t.teardown(() => w.abort().catch(() => undefined))
  return w
}

/** Releases `stall` when the test ends, so a failed test leaves no call held. */
function releasedAtEnd<S extends StoreStall>(t: ExecutionContext, stall: S): S {
  t.teardown(() => stall.release())
  return stall
}

test('a scan stalled before its first WAL read, across a flush and a collection, returns every row once', async (t) => {
  const dir = tempDir(t)
  const w = await openWriter(t, ObjectStore.local(dir))
  await putAndFlush(w, [1])
  await w.put(rows([2, 3]))
  await w.put(rows([4]))

  const readerStore = ObjectStore.local(dir)
  const reader = await ShardReader.open(readerStore)
  const stall = releasedAtEnd(t, readerStore.faults.stall({ actor: 'reader', op: 'get', object: 'wal' }))
  const scan = reader.scan()
  await stall.reached()
  // The scan has read a manifest whose WAL tail holds rows 2-4; they move into a generation
  // and their entries are collected before it reads them.
  await w.forceSealActive()
  await w.waitForFlushDrain()
  const report = await collectGarbage(dir, { keepManifestVersions: 2 })
  t.true(report.walEntriesRemoved >= 2, `collection removed ${report.walEntriesRemoved} WAL entries`)
  stall.release()

  t.deepEqual(ids(await scan), [1, 2, 3, 4])
  await reader.close()
  await w.close()
})

test("a commit stalled before its manifest create, across another writer's claim and a collection, is fenced and loses nothing", async (t) => {
  const dir = tempDir(t)
  // Y and X are on separate handles, so the stall holds Y's commit and none of X's calls.
  const storeY = ObjectStore.local(dir)
  const y = await openWriter(t, storeY)
  await y.put(rows([1, 2]))
  const stall = releasedAtEnd(t, storeY.faults.stall({ actor: 'commit', op: 'create', object: 'manifest' }))
  await y.forceSealActive()
  // Y's commit has read the latest manifest and is about to create the next version.
  await stall.reached()

  const x = await openWriter(t, ObjectStore.local(dir))
  for (let i = 0; i < 6; i++) await putAndFlush(x, [10 + i])
  // Removes the version number Y is about to create, so Y's create finds the name free.
  const report = await collectGarbage(dir, { keepManifestVersions: 2 })
  t.true(report.manifestVersionsRemoved > 0, `collection removed ${report.manifestVersionsRemoved} manifest versions`)
  stall.release()

  await t.throwsAsync(y.close(), { instanceOf: FencedError })
  const reader = await ShardReader.open(dir)
  t.deepEqual(ids(await reader.scan()), [1, 2, 10, 11, 12, 13, 14, 15])
  await reader.close()
  await putAndFlush(x, [20])
  await x.close()
  const reopened = await openWriter(t, dir)
  t.deepEqual(ids(await reopened.scan()), [1, 2, 10, 11, 12, 13, 14, 15, 20])
  await reopened.close()
})

test("recordCalls lists an open's, a put's and a close's store calls by actor, op and object", async (t) => {
  const dir = tempDir(t)
  const store = ObjectStore.local(dir)
  store.faults.recordCalls()
  const w = await openWriter(t, store)
  await w.put(rows([1]))
  await w.close()

  const calls = store.faults.calls()
  const seen = new Set(calls.map((c) => `${c.actor} ${c.op} ${c.object}`))
  for (const expected of [
    'claim list manifest', // the latest version
    'claim create manifest', // the epoch claim
    'put create wal', // the put's WAL entry
    'commit create generation', // close's Parquet file
    'commit create manifest', // and its commit
  ]) {
    t.true(seen.has(expected), `${expected} in ${[...seen].join('; ')}`)
  }
  const shardFolder = `_mem_wal/${w.shardId}`
  for (const c of calls.filter((c) => c.object !== 'other')) {
    t.true(c.path.startsWith(shardFolder), `${c.path} is under ${shardFolder}`)
  }
  t.true(
    calls.some((c) => c.object === 'wal' && c.path.startsWith(`${shardFolder}/wal/`)),
    'a WAL entry is named by its path',
  )

  // A reader on another handle goes through another controller: nothing more is listed here.
  const before = store.faults.calls().length
  const reader = await ShardReader.open(dir)
  await reader.scan()
  await reader.close()
  t.is(store.faults.calls().length, before)
  // The same reader on this handle is listed, as the reader.
  const own = await ShardReader.open(store)
  await own.scan()
  await own.close()
  t.true(
    store.faults
      .calls()
      .slice(before)
      .every((c) => c.actor === 'reader'),
  )
  t.true(store.faults.calls().length > before)

  store.faults.recordCalls()
  t.deepEqual(store.faults.calls(), [], 'recordCalls starts a new list')
})

test('stall rejects unknown names and bad arguments, naming what it takes', (t) => {
  const faults = ObjectStore.memory().faults
  const bad = (options: unknown, ...named: string[]): void => {
    const e = t.throws(() => faults.stall(options as never), { instanceOf: InvalidArgumentError })
    for (const n of named) t.true(e?.message.includes(n), `${JSON.stringify(e?.message)} names ${n}`)
  }
  const actors = ['claim', 'put', 'commit', 'compaction', 'gc', 'reader', 'tailer', 'other']
  const ops = ['get', 'head', 'list', 'create', 'stage', 'overwrite', 'delete', 'sync']
  const objects = ['manifest', 'version-hint', 'wal', 'generation', 'request-ids', 'other']
  bad({ actor: 'writer' }, 'actor must be one of', ...actors.map((a) => `'${a}'`), '"writer"')
  bad({ op: 'put' }, 'op must be one of', ...ops.map((o) => `'${o}'`), '"put"')
  bad({ object: 'wal-entry' }, 'object must be one of', ...objects.map((o) => `'${o}'`), '"wal-entry"')
  bad({ when: 'during' }, "when must be one of 'before', 'after'", '"during"')
  bad({ actor: 3 }, 'actor must be a string', 'number 3')
  bad({ kind: 'manifest' }, 'unknown option "kind"', 'actor, op, object, when, skip')
  bad({ skip: -1 }, 'skip must be a non-negative integer', '-1')
  bad({ skip: 1.5 }, 'skip must be a non-negative integer', '1.5')
  bad({ skip: '1' }, 'skip must be a non-negative integer', 'string "1"')
  bad('commit', 'stall(options) expects an object', 'string "commit"')
  bad(null, 'stall(options) expects an object', 'null')

  // Every name the types list is one the core takes.
  for (const actor of actors) t.notThrows(() => faults.stall({ actor: actor as never }).release())
  for (const op of ops) t.notThrows(() => faults.stall({ op: op as never }).release())
  for (const object of objects) t.notThrows(() => faults.stall({ object: object as never }).release())
  t.notThrows(() => faults.stall({ when: 'after', skip: 2 })[Symbol.dispose]())
})

test('an awaited stall holds the process open while a writer may still make its call, and not once the writer closed', async (t) => {
  const child = join(__dirname, 'support', 'stall-child.ts')
  const run = await runProcess(process.execPath, ['--import', 'tsx', child, tempDir(t)], { cwd: __dirname })
  t.is(run.stderr, '')
  t.is(run.stdout, 'reached\nreleased and closed\n')
  t.is(run.code, 0)
})

test('fail() fails the next matching calls of any actor: a generation flush retries, a reader gets IoError once', async (t) => {
  const dir = tempDir(t)
  const store = ObjectStore.local(dir)
  const writer = await ShardWriter.open(store, { schema, gc: false })
  await writer.put(rows([1, 2]))
  store.faults.fail({ actor: 'commit', op: 'create', object: 'generation' }, 2)
  await writer.forceSealActive()
  await writer.waitForFlushDrain()
  t.is((await writer.manifest())?.flushedGenerations.length, 1)
  await writer.close()

  const readerStore = ObjectStore.local(dir)
  const reader = await ShardReader.open(readerStore)
  readerStore.faults.fail({ actor: 'reader', op: 'get', object: 'generation', when: 'after' })
  const e = await t.throwsAsync(reader.scan(), { instanceOf: IoError })
  t.regex(String(e?.cause ?? e?.message), /injected failure|data\.parquet/)
  t.deepEqual(ids(await reader.scan()), [1, 2])
})

test('delay() holds only the matching calls, and recover() disarms failures and delays not yet used', async (t) => {
  const dir = tempDir(t)
  const store = ObjectStore.local(dir)
  const writer = await ShardWriter.open(store, { schema, gc: false })
  store.faults.recordCalls()
  store.faults.delay({ actor: 'put', object: 'wal', op: 'create' }, 50)
  await writer.put(rows([1]))
  t.true(store.faults.calls().some((c) => c.actor === 'put' && c.op === 'create' && c.object === 'wal'))
  store.faults.fail({ actor: 'put' }, 1000)
  store.faults.recover()
  await writer.put(rows([2]))
  await writer.close()
  const reader = await ShardReader.open(dir)
  t.deepEqual(ids(await reader.scan()), [1, 2])
})

test('fail() and delay() reject bad counts naming them', (t) => {
  const store = ObjectStore.memory()
  for (const [f, message] of [
    [() => store.faults.fail({}, -1), /fail: times must be a non-negative integer, got number -1/],
    [() => store.faults.fail({ actor: 'nobody' as never }), /nobody/],
    [() => store.faults.delay({}, 1.5), /delay: ms must be a non-negative integer, got number 1\.5/],
    [() => store.faults.delay({ op: 'create' }, 10, Number.NaN), /delay: times must be a non-negative integer/],
  ] as const) {
    t.throws(f, { instanceOf: InvalidArgumentError, message })
  }
})
