import { mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'

import test from 'ava'
import { Field, Int64, Schema, Utf8, makeVector, vectorFromArray } from 'apache-arrow'

import {
  ClosedError,
  CorruptError,
  InvalidArgumentError,
  IoError,
  MemWalError,
  SchemaMismatchError,
  ShardReader,
  ShardWriter,
  WalTailer,
  ObjectStore,
} from '../index'
import * as memwal from '../index'
import * as argumentChecks from '../lib/arguments'
import * as errors from '../lib/errors'
import * as nativeCall from '../lib/native-call'
import * as redact from '../lib/redact'
import { ids, memoryLocation, rows, schema, tableOf, tempDir } from './support/helpers'

test('an empty batch list is INVALID_ARGUMENT and leaves the shard intact', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  await w.put(rows([1]))
  const e = await t.throwsAsync(w.put([]), { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' })
  t.regex(e?.message ?? '', /empty batch list/)
  t.true(e instanceof MemWalError)
  t.deepEqual(ids(await w.scan()), [1])
  await w.close()
})

test('an empty Table is INVALID_ARGUMENT saying there is nothing to write', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  await t.throwsAsync(w.put(rows([])), { instanceOf: InvalidArgumentError, message: /0 rows: there is nothing to write/ })
  await w.close()
})

test('a batch with the wrong schema is SCHEMA_MISMATCH naming the field', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  const wrongSchema = new Schema([new Field('id', new Int64(), false), new Field('name', new Utf8(), true)])
  const wrong = tableOf(wrongSchema, [makeVector(BigInt64Array.from([1n])), vectorFromArray(['a'], new Utf8())])
  const e = await t.throwsAsync(w.put(wrong), { instanceOf: SchemaMismatchError, code: 'SCHEMA_MISMATCH' })
  t.regex(e?.message ?? '', /`id`/)
  await w.put(rows([2]))
  t.deepEqual(ids(await w.scan()), [2])
  await w.close()
})

test('reopening a shard with another schema is SCHEMA_MISMATCH before any claim', async (t) => {
  const loc = memoryLocation()
  const w = await ShardWriter.open(loc, { schema })
  await w.put(rows([1]))
  await w.close()
  const other = new Schema([new Field('id', new Int64(), false), new Field('name', new Utf8(), true)])
  await t.throwsAsync(ShardWriter.open(loc, { schema: other, shardId: w.shardId }), {
    instanceOf: SchemaMismatchError,
    message: /`id`/,
  })
  const r = await ShardReader.open(loc, { shardId: w.shardId })
  t.is((await r.manifest()).writerEpoch, 1)
})

test('data of the wrong type is INVALID_ARGUMENT', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  for (const bad of ['hello', 42, {}, null, undefined, [1, 2], new Uint8Array([1, 2, 3])]) {
    await t.throwsAsync(w.put(bad as never), { instanceOf: InvalidArgumentError }, `put(${String(bad)})`)
  }
  await w.close()
})

test('a bad location is INVALID_ARGUMENT', async (t) => {
  await t.throwsAsync(ShardWriter.open('gopher://host/x', { schema }), {
    instanceOf: InvalidArgumentError,
    message: /unsupported location scheme/,
  })
  await t.throwsAsync(ShardWriter.open('', { schema }), { instanceOf: InvalidArgumentError })
  await t.throwsAsync(ShardWriter.open(42 as never, { schema }), { instanceOf: InvalidArgumentError })
  t.throws(() => ObjectStore.fromUri('file://relative'), { instanceOf: InvalidArgumentError, message: /absolute/ })
})

test('calls on a closed writer are CLOSED', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema })
  await w.close()
  await t.throwsAsync(w.put(rows([1])), { instanceOf: ClosedError, code: 'CLOSED' })
  await t.throwsAsync(w.flush(), { instanceOf: ClosedError })
  await t.throwsAsync(w.scan(), { instanceOf: ClosedError })
  await t.throwsAsync(w.forceSealActive(), { instanceOf: ClosedError })
  // close() is idempotent: a second close settles like the first.
  await t.notThrowsAsync(w.close())
})

test('invalid config values are INVALID_ARGUMENT', async (t) => {
  const loc = memoryLocation()
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ maxWalBufferSize: Number.NaN }, /maxWalBufferSize/],
    [{ maxMemtableSize: -1 }, /maxMemtableSize/],
    [{ maxMemtableBatches: 0 }, /invalid config: maxMemtableBatches must be between 1 and/],
    [{ maxMemtableBatches: 1.5 }, /maxMemtableBatches/],
    [{ maxWalFlushIntervalMs: 0 }, /invalid config: maxWalFlushIntervalMs must be between 1 and/],
    [{ maxWalFlushIntervalMs: 'soon' }, /maxWalFlushIntervalMs/],
    [{ durableWrite: 'yes' }, /durableWrite/],
    [{ maxWalPersistRetries: Number.POSITIVE_INFINITY }, /maxWalPersistRetries/],
    [{ shardId: 'not-a-uuid' }, /not a UUID/],
    [{ maxWalBufferSise: 10 }, /unknown option `maxWalBufferSise`/],
  ]
  for (const [extra, message] of cases) {
    await t.throwsAsync(ShardWriter.open(loc, { schema, ...extra } as never), { instanceOf: InvalidArgumentError, message }, JSON.stringify(extra))
  }
  await t.throwsAsync(ShardWriter.open(loc, undefined as never), { instanceOf: InvalidArgumentError })
  await t.throwsAsync(ShardWriter.open(loc, { schema: 'id int' } as never), {
    instanceOf: InvalidArgumentError,
    message: /apache-arrow Schema/,
  })
})

test('a corrupt manifest is CORRUPT and names the object', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema })
  await w.put(rows([1]))
  await w.close()
  const manifestDir = join(dir, '_mem_wal', w.shardId, 'manifest')
  const latest = readdirSync(manifestDir)
    .filter((f) => f.endsWith('.binpb'))
    .sort()
    .at(0)!
  // Bit-reversed names: the lexically smallest is not necessarily the latest, so damage all.
  for (const f of readdirSync(manifestDir).filter((f) => f.endsWith('.binpb'))) {
    writeFileSync(join(manifestDir, f), Buffer.from('not a protobuf at all, definitely corrupt'))
  }
  const e = await t.throwsAsync(ShardWriter.open(dir, { schema, shardId: w.shardId }), {
    instanceOf: CorruptError,
    code: 'CORRUPT',
  })
  t.true((e?.message ?? '').includes('.binpb'), e?.message)
  t.truthy(latest)
  await t.throwsAsync(ShardReader.open(dir, { shardId: w.shardId }), { instanceOf: CorruptError })
})

test('a location under a regular file is IO', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'a-file')
  writeFileSync(file, 'x')
  const e = await t.throwsAsync(ShardWriter.open(join(file, 'data'), { schema }), { instanceOf: IoError, code: 'IO' })
  t.truthy(e?.message)
})

test('a shard that does not exist is INVALID_ARGUMENT for readers, and tailers see an empty WAL', async (t) => {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'empty'))
  await t.throwsAsync(ShardReader.open(join(dir, 'empty'), { shardId: randomUUID() }), {
    instanceOf: InvalidArgumentError,
    message: /no shard/,
  })
  await t.throwsAsync(ShardReader.open(join(dir, 'missing'), { shardId: randomUUID() }), {
    instanceOf: InvalidArgumentError,
  })
  await t.throwsAsync(ShardReader.open(dir, { shardId: 'nope' }), { instanceOf: InvalidArgumentError })
  const tailer = await WalTailer.open(dir, { shardId: randomUUID() })
  t.is(await tailer.nextPosition(), 1)
})

test('failWalPuts rejects a bad count', (t) => {
  const s = ObjectStore.memory()
  t.throws(() => s.faults.failWalPuts(-1), { instanceOf: InvalidArgumentError })
  t.throws(() => s.faults.failWalPuts(Number.NaN), { instanceOf: InvalidArgumentError })
  s.faults.failWalPuts(Number.POSITIVE_INFINITY)
  s.faults.recover()
  t.is(s.faults.walPutAttempts(), 0)
})

// index.ts re-exports lib/errors.ts whole (`export *`), so every name that module exports is
// public: it may export error classes only (its code → class table is its default export, which
// `export *` leaves out), and no name of the internal modules may reach index.ts.
test('index.ts exports the error classes of lib/errors.ts and no internal helper', (t) => {
  const exported = memwal as Record<string, unknown>
  const names = Object.keys(errors).filter((name) => name !== 'default')
  t.true(names.length > 0)
  for (const name of names) {
    const value = (errors as Record<string, unknown>)[name]
    t.true(typeof value === 'function' && value.prototype instanceof Error, `${name} is an error class`)
    t.is(exported[name], value, `index.ts exports ${name}`)
  }
  t.false('default' in exported)
  for (const internal of [argumentChecks, nativeCall, redact]) {
    const helpers = Object.keys(internal).filter((name) => name !== 'default')
    t.true(helpers.length > 0)
    for (const name of helpers) t.false(name in exported, `${name} stays internal`)
  }
})
