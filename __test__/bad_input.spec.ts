// The bad-input matrix: every public entry point against a wrong type, empty input, huge
// input, the wrong schema, bad config values, a closed writer, a missing path, a read-only
// directory and a corrupt manifest. Each bad call must fail with a typed MemWalError (class,
// code and a message that says what was wrong), and the shard must be intact afterwards: a
// reader and a new writer see exactly the rows they saw before.
//
// Cells already covered in errors.spec.ts are not repeated here: put of an empty batch list
// and an empty batch, put of an Int64 `id`, put of seven wrong types, a reopen with an Int64
// schema, the first bad-config cases, put/flush/scan/forceSealActive/close after close(), a
// corrupt manifest at ShardWriter.open and ShardReader.open, a location under a regular file,
// a missing shard for readers, failWalPuts(-1) and failWalPuts(NaN).

import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'

import test, { type ExecutionContext } from 'ava'
import { Field, Int32, RecordBatch, Schema, Table, Utf8, makeVector, tableToIPC, vectorFromArray } from 'apache-arrow'

import {
  ClosedError,
  CorruptError,
  FencedError,
  InvalidArgumentError,
  IoError,
  MemWalError,
  ObjectStore,
  SchemaMismatchError,
  ShardReader,
  ShardWriter,
  WalTailer,
  type Location,
  type PutData,
} from '../index'
import { ids, memoryLocation, rows, schema, tableOf, tempDir } from './helpers'

const SEEDED = [1, 2, 3, 4, 5]

/** A shard holding rows 1..3 in a flushed generation and 4..5 only in the WAL. */
async function seed(location: Location): Promise<string> {
  const w = await ShardWriter.open(location, { schema, maxWalFlushIntervalMs: null })
  await w.put(rows([1, 2]))
  await w.put(rows([3]))
  await w.forceSealActive()
  await w.waitForFlushDrain()
  await w.put(rows([4, 5]))
  await w.abort()
  return w.shardId
}

/** The shard's current epoch, read without claiming anything. */
async function epochOf(location: Location, shardId: string): Promise<number> {
  return (await (await ShardReader.open(location, { shardId })).manifest()).writerEpoch
}

/** A reader and then a new writer both see exactly `expected`. */
async function assertIntact(
  t: ExecutionContext,
  location: Location,
  shardId: string,
  expected = SEEDED,
): Promise<void> {
  const r = await ShardReader.open(location, { shardId })
  t.deepEqual(ids(await r.scan()), expected, 'a reader sees the rows from before the bad call')
  const w = await ShardWriter.open(location, { schema, shardId, maxWalFlushIntervalMs: null })
  t.deepEqual(ids(await w.scan()), expected, 'a new writer recovers the rows from before the bad call')
  await w.abort()
}

/** `schema` with `id` nullable: differs from the shard's only in nullability. */
const nullableId = new Schema([new Field('id', new Int32(), true), new Field('name', new Utf8(), true)])

function tableWith(s: Schema, idsOf: number[]): Table {
  const columns = s.fields.map((f) =>
    f.typeId === new Utf8().typeId
      ? vectorFromArray(
          idsOf.map((i) => `n${i}`),
          new Utf8(),
        )
      : makeVector(Int32Array.from(idsOf)),
  )
  return tableOf(s, columns)
}

// ---------------------------------------------------------------------------------------------
// Object stores and fault hooks
// ---------------------------------------------------------------------------------------------

test('ObjectStore factories reject a wrong type or an empty location with INVALID_ARGUMENT', (t) => {
  for (const bad of [42, undefined, null, {}, ['a'], Symbol.iterator]) {
    t.throws(() => ObjectStore.local(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /ObjectStore\.local\(dir\) expects a string/,
    })
    t.throws(() => ObjectStore.fromUri(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /ObjectStore\.fromUri\(uri\) expects a string/,
    })
  }
  t.throws(() => ObjectStore.local(''), { instanceOf: InvalidArgumentError, message: /path is empty/ })
  t.throws(() => ObjectStore.fromUri(''), { instanceOf: InvalidArgumentError, message: /location is empty/ })
  t.throws(() => ObjectStore.fromUri('ftp://host/x'), {
    instanceOf: InvalidArgumentError,
    message: /unsupported location scheme `ftp:\/\/`/,
  })
  t.throws(() => ObjectStore.fromUri('file://'), { instanceOf: InvalidArgumentError, message: /must be absolute/ })
  // memory() takes no input: extra arguments are ignored, and each store is still private.
  const memory = ObjectStore.memory as (...args: unknown[]) => ObjectStore
  t.is(memory(42, 'x').location, 'memory://')
})

test('ObjectStore.local of a regular file is INVALID_ARGUMENT, and a store under one fails with IO', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'a-file')
  writeFileSync(file, 'x')
  t.throws(() => ObjectStore.local(file), {
    instanceOf: InvalidArgumentError,
    code: 'INVALID_ARGUMENT',
    message: /exists but is not a directory/,
  })
  await t.throwsAsync(ObjectStore.local(join(file, 'x')).listShards(), {
    instanceOf: IoError,
    code: 'IO',
    message: /Not a directory/,
  })
  t.is(readFileSync(file, 'utf8'), 'x')
})

test('a store at a path that does not exist lists no shards, its readers find none, and nothing is created', async (t) => {
  const missing = join(tempDir(t), 'no', 'such', 'dir')
  t.deepEqual(await ObjectStore.local(missing).listShards(), [])
  await t.throwsAsync(ShardReader.open(missing, { shardId: randomUUID() }), {
    instanceOf: InvalidArgumentError,
    code: 'INVALID_ARGUMENT',
    message: /no shard/,
  })
  const tailer = await WalTailer.open(missing, { shardId: randomUUID() })
  t.is(await tailer.nextPosition(), 1)
  t.is(await tailer.read(1), null)
  t.false(existsSync(missing), 'readers never create the directory')
  // A writer creates it on its first write (documented).
  const shardId = await seed(missing)
  await assertIntact(t, missing, shardId)
})

test('a location name too long for the file system, or with a NUL byte, is IO and writes nothing', async (t) => {
  const dir = tempDir(t)
  await t.throwsAsync(ShardWriter.open(join(dir, 'a'.repeat(300)), { schema }), {
    instanceOf: IoError,
    code: 'IO',
    message: /File name too long/,
  })
  await t.throwsAsync(ShardWriter.open(join(dir, 'a\0b'), { schema }), {
    instanceOf: IoError,
    code: 'IO',
    message: /NUL/,
  })
  t.deepEqual(readdirSync(dir), [])
  // A huge memory:// name is only a name.
  const huge = `memory://${'x'.repeat(1 << 20)}`
  const shardId = await seed(huge)
  await assertIntact(t, huge, shardId)
})

test('store.faults rejects a wrong type, NaN, a negative, a fraction or a giant count with INVALID_ARGUMENT and stays off', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  for (const bad of ['3', undefined, null, {}, true]) {
    t.throws(() => store.faults.failWalPuts(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /failWalPuts\(n\) expects a number/,
    })
  }
  for (const bad of [1.5, -Infinity, 2 ** 53, 1e300]) {
    t.throws(() => store.faults.failWalPuts(bad), {
      instanceOf: InvalidArgumentError,
      message: /n must be a non-negative integer or Infinity/,
    })
  }
  for (const bad of ['yes', 1, undefined, null]) {
    t.throws(() => store.faults.setLostAck(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /setLostAck\(on\) expects a boolean/,
    })
  }
  // No fault was switched on: a durable put succeeds at its first attempt.
  const attempts = store.faults.walPutAttempts()
  const w = await ShardWriter.open(store, { schema, shardId, maxWalFlushIntervalMs: null, maxWalPersistRetries: 0 })
  await w.put(rows([6]))
  t.is(store.faults.walPutAttempts(), attempts + 2, 'the fence sentinel and the put, each at the first attempt')
  await w.abort()
  await assertIntact(t, store, shardId, [...SEEDED, 6])
})

// ---------------------------------------------------------------------------------------------
// ShardWriter.open
// ---------------------------------------------------------------------------------------------

test('ShardWriter.open rejects a wrong location, options or schema type with INVALID_ARGUMENT and claims nothing', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  const epoch = await epochOf(store, shardId)
  for (const bad of [null, undefined, 42, {}, [], new Uint8Array(1)]) {
    await t.throwsAsync(ShardWriter.open(bad as never, { schema, shardId }), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /location must be a path, a URI .* or an ObjectStore/,
    })
  }
  for (const bad of [undefined, null, 'x', 42, [schema]]) {
    await t.throwsAsync(ShardWriter.open(store, bad as never), {
      instanceOf: InvalidArgumentError,
      message: /ShardWriter\.open needs an options object with a schema/,
    })
  }
  for (const bad of [undefined, 'id int', {}, schema.fields[0], rows([1]), tableToIPC(rows([1]), 'stream')]) {
    await t.throwsAsync(ShardWriter.open(store, { schema: bad as never, shardId }), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /options\.schema must be an apache-arrow Schema/,
    })
  }
  await t.throwsAsync(ShardWriter.open(store, { schema: new Schema([]), shardId }), {
    instanceOf: InvalidArgumentError,
    message: /schema has no fields/,
  })
  t.is(await epochOf(store, shardId), epoch, 'no epoch was claimed')
  await assertIntact(t, store, shardId)
})

test('every option rejects NaN, a negative, Infinity, a fraction, a string or a giant value with INVALID_ARGUMENT naming it, and claims nothing', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  const epoch = await epochOf(store, shardId)
  const numeric = [
    'maxWalBufferSize',
    'maxWalFlushIntervalMs',
    'maxWalPersistRetries',
    'walPersistRetryBaseDelayMs',
    'maxMemtableSize',
    'maxMemtableBatches',
    'maxUnflushedMemtableBytes',
  ]
  for (const option of numeric) {
    for (const bad of [Number.NaN, -1, Number.POSITIVE_INFINITY, 1.5, '5', 2 ** 60, true]) {
      await t.throwsAsync(
        ShardWriter.open(store, { schema, shardId, [option]: bad } as never),
        { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message: new RegExp(`invalid option ${option}`) },
        `${option}: ${String(bad)}`,
      )
    }
  }
  const zeros: Array<[string, RegExp]> = [
    ['maxMemtableSize', /max_memtable_size must be at least 1 byte/],
    ['maxMemtableBatches', /max_memtable_batches must be between 1 and/],
    ['maxUnflushedMemtableBytes', /max_unflushed_memtable_bytes must be at least 1 byte/],
    ['maxWalFlushIntervalMs', /max_wal_flush_interval_ms must be between 1 and \d+ \(or null to disable the ticker\)/],
  ]
  for (const [option, message] of zeros) {
    await t.throwsAsync(ShardWriter.open(store, { schema, shardId, [option]: 0 } as never), {
      instanceOf: InvalidArgumentError,
      message,
    })
  }
  await t.throwsAsync(ShardWriter.open(store, { schema, shardId, maxWalPersistRetries: 2 ** 40 }), {
    instanceOf: InvalidArgumentError,
    message: /maxWalPersistRetries: 1099511627776 is too large/,
  })
  for (const option of ['durableWrite', 'enableMemtable']) {
    for (const bad of ['yes', 1, null, Number.NaN]) {
      await t.throwsAsync(ShardWriter.open(store, { schema, shardId, [option]: bad } as never), {
        instanceOf: InvalidArgumentError,
        message: new RegExp(`invalid option ${option}: expected a boolean`),
      })
    }
  }
  for (const bad of [42, null, { id: shardId }]) {
    await t.throwsAsync(ShardWriter.open(store, { schema, shardId: bad } as never), {
      instanceOf: InvalidArgumentError,
      message: /options\.shardId expects a string/,
    })
  }
  for (const bad of ['', 'not-a-uuid', `${shardId}x`, 'x'.repeat(100_000)]) {
    await t.throwsAsync(ShardWriter.open(store, { schema, shardId: bad }), {
      instanceOf: InvalidArgumentError,
      message: /is not a UUID/,
    })
  }
  for (const unknown of ['shardID', 'durable', 'maxMemTableSize', '']) {
    await t.throwsAsync(ShardWriter.open(store, { schema, shardId, [unknown]: 1 } as never), {
      instanceOf: InvalidArgumentError,
      message: new RegExp(`unknown option \`${unknown}\`; known options: schema, shardId`),
    })
  }
  t.is(await epochOf(store, shardId), epoch, 'no epoch was claimed')
  await assertIntact(t, store, shardId)
})

test('reopening with a schema that differs only in nullability is SCHEMA_MISMATCH and claims nothing', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  const epoch = await epochOf(store, shardId)
  await t.throwsAsync(ShardWriter.open(store, { schema: nullableId, shardId }), {
    instanceOf: SchemaMismatchError,
    code: 'SCHEMA_MISMATCH',
    message: /`id`/,
  })
  t.is(await epochOf(store, shardId), epoch)
  await assertIntact(t, store, shardId)
})

// ---------------------------------------------------------------------------------------------
// put and putNoWait
// ---------------------------------------------------------------------------------------------

/** A writer on a seeded shard: runs `bad` calls, then checks that nothing was written. */
async function withWriter(
  t: ExecutionContext,
  options: { maxMemtableBatches?: number },
  body: (w: ShardWriter) => Promise<void>,
): Promise<void> {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  const w = await ShardWriter.open(store, { schema, shardId, maxWalFlushIntervalMs: null, ...options })
  const before = await w.walStats()
  await body(w)
  t.deepEqual(ids(await w.scan()), SEEDED, 'the writer holds no rows of the bad calls')
  t.is((await w.walStats()).entriesAppended, before.entriesAppended, 'nothing was appended to the WAL')
  await w.abort()
  await assertIntact(t, store, shardId)
}

const PUTS = ['put', 'putNoWait'] as const
const putOf = (w: ShardWriter, method: (typeof PUTS)[number], data: unknown): Promise<unknown> =>
  method === 'put' ? w.put(data as PutData) : w.putNoWait(data as PutData)

/** A bad put: what it is, the data, and the message it must be rejected with. */
type BadPut = [what: string, data: unknown, message: RegExp]

/**
 * Every case rejects with `error` and its own message, through put and through putNoWait, on
 * one writer that ends up holding and having written nothing of them (see {@link withWriter}).
 */
async function assertPutsReject(
  t: ExecutionContext,
  error: { instanceOf: typeof InvalidArgumentError | typeof SchemaMismatchError; code: string },
  cases: BadPut[],
): Promise<void> {
  await withWriter(t, {}, async (w) => {
    for (const method of PUTS) {
      for (const [what, data, message] of cases) {
        await t.throwsAsync(putOf(w, method, data), { ...error, message }, `${method}(${what})`)
      }
    }
  })
}

test('data of the wrong type is INVALID_ARGUMENT for put and putNoWait, and nothing is written', async (t) => {
  const sparse: unknown[] = []
  sparse.length = 2
  const ipc = tableToIPC(rows([9]), 'stream')
  const cases: BadPut[] = [
    ['a string', 'hello', /put expects an apache-arrow Table, RecordBatch, RecordBatch\[\] or Arrow IPC stream bytes/],
    ['a number', 42, /put expects an apache-arrow Table/],
    ['null', null, /put expects an apache-arrow Table/],
    ['a Schema', schema, /put expects an apache-arrow Table/],
    ['a Vector', makeVector(Int32Array.from([1])), /put expects an apache-arrow Table/],
    ['an ArrayBuffer', new ArrayBuffer(8), /put expects an apache-arrow Table/],
    ['an array of numbers', [1, 2], /element 0 is number 1/],
    ['an array with a non-batch', [rows([1]).batches[0], 'x'], /element 1 is string x/],
    ['a sparse array', sparse, /element 0 is undefined/],
    ['an array of Tables', [rows([1])], /element 0 is an object \(Table\)/],
    ['garbage bytes', new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]), /not a valid Arrow IPC stream/],
    ['truncated IPC bytes', ipc.slice(0, ipc.length - 24), /not a valid Arrow IPC stream/],
  ]
  await assertPutsReject(t, { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' }, cases)
})

test('a Table from a second copy of apache-arrow is INVALID_ARGUMENT saying how to fix it, and nothing is written', async (t) => {
  // The ESM build of apache-arrow, loaded beside the CommonJS build this file and index.js
  // use: two copies in one process, as in an application with two apache-arrow versions.
  const other = (await import('apache-arrow')) as typeof import('apache-arrow')
  t.not(other.Table, Table, 'a second copy of apache-arrow')
  const foreign = other.tableFromArrays({ id: Int32Array.from([1]), name: ['a'] })
  await withWriter(t, {}, async (w) => {
    for (const method of PUTS) {
      await t.throwsAsync(putOf(w, method, foreign), {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /two copies of apache-arrow .*npm ls apache-arrow/,
      })
    }
  })
  const foreignSchema = new other.Schema([new other.Field('id', new other.Int32(), false)])
  await t.throwsAsync(ShardWriter.open(memoryLocation(), { schema: foreignSchema as never }), {
    instanceOf: InvalidArgumentError,
    message: /two copies of apache-arrow/,
  })
})

test('empty input is INVALID_ARGUMENT for put and putNoWait, and nothing is written', async (t) => {
  const empty = rows([]).batches[0]!
  const cases: BadPut[] = [
    ['an empty batch list', [], /empty batch list/],
    ['an empty Table', rows([]), /Batch 0 is empty/],
    ['an empty batch', empty, /Batch 0 is empty/],
    ['an empty batch after a full one', [rows([1]).batches[0]!, empty], /Batch 1 is empty/],
    ['empty bytes', new Uint8Array(), /no Arrow IPC schema message/],
    ['IPC bytes of an empty Table', tableToIPC(rows([]), 'stream'), /Batch 0 is empty/],
  ]
  await assertPutsReject(t, { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' }, cases)
})

test('a put with more batches than maxMemtableBatches is INVALID_ARGUMENT for put and putNoWait, and nothing is written', async (t) => {
  const five = [1, 2, 3, 4, 5].map((i) => rows([i]).batches[0]!)
  await withWriter(t, { maxMemtableBatches: 4 }, async (w) => {
    for (const method of PUTS) {
      await t.throwsAsync(putOf(w, method, five), {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /a put of 5 batches exceeds max_memtable_batches \(4\); split it into several puts/,
      })
    }
  })
})

/** A batch whose `id` holds a null: its schema says nullable, the shard's does not. */
function nullInId(): Table {
  return tableOf(nullableId, [vectorFromArray([1, null], new Int32()), vectorFromArray(['a', 'b'], new Utf8())])
}

test('data with the wrong schema is SCHEMA_MISMATCH naming the field for put and putNoWait, and nothing is written', async (t) => {
  // (A nullable field without nulls is accepted and stored with the shard's not-null field.)
  const renamed = tableWith(new Schema([new Field('ident', new Int32(), false), schema.fields[1]!]), [1])
  const cases: BadPut[] = [
    ['a null in the not-null id', nullInId(), /field `id` is not nullable in the shard but batch 0 has 1 nulls/],
    [
      'an extra column',
      tableWith(new Schema([...schema.fields, new Field('x', new Int32(), true)]), [1]),
      /has 3 fields/,
    ],
    ['a missing column', tableWith(new Schema([schema.fields[0]!]), [1]), /has 1 fields \(id\) but the shard has 2/],
    ['a renamed column', renamed, /field 0 of batch 0 is `ident` but the shard's field 0 is `id`/],
    [
      'swapped columns',
      tableWith(new Schema([schema.fields[1]!, schema.fields[0]!]), [1]),
      /field 0 of batch 0 is `name`/,
    ],
    ['batches of two schemas', [rows([1]).batches[0]!, renamed.batches[0]!], /batch 1 has schema \(ident: /],
    ['IPC bytes of another schema', tableToIPC(renamed, 'stream'), /`ident`/],
  ]
  await assertPutsReject(t, { instanceOf: SchemaMismatchError, code: 'SCHEMA_MISMATCH' }, cases)
})

test('huge but valid input round-trips: 2,000 columns, an 8 MiB string and 4,000 batches in one put', async (t) => {
  const dir = tempDir(t)
  const wide = new Schema(Array.from({ length: 2000 }, (_, i) => new Field(`c${i}`, new Int32(), true)))
  const w = await ShardWriter.open(dir, { schema: wide })
  await w.put(
    tableOf(
      wide,
      wide.fields.map((_, i) => makeVector(Int32Array.from([i, -i]))),
    ),
  )
  await w.abort()
  const r = await ShardReader.open(dir, { shardId: w.shardId })
  const back = await r.scan()
  t.is(back.numCols, 2000)
  t.deepEqual(Array.from(back.getChild('c1999')!.toArray() as Int32Array), [1999, -1999])

  const big = 'y'.repeat(8 << 20)
  const shardId = await seed(dir)
  const w2 = await ShardWriter.open(dir, { schema, shardId })
  await w2.put(tableOf(schema, [makeVector(Int32Array.from([6])), vectorFromArray([big], new Utf8())]))
  const batches = Array.from({ length: 4000 }, (_, i) => rows([7 + i]).batches[0]!)
  await w2.put(batches)
  await w2.abort()
  const all = await (await ShardReader.open(dir, { shardId })).scan()
  t.deepEqual(ids(all), [...SEEDED, 6, ...batches.map((_, i) => 7 + i)])
  t.is(all.getChild('name')!.get(5), big)
})

// ---------------------------------------------------------------------------------------------
// Closed writers and WAL-only writers
// ---------------------------------------------------------------------------------------------

test('every method of a closed or aborted writer rejects with CLOSED, and abort stays idempotent', async (t) => {
  for (const end of ['close', 'abort'] as const) {
    const store = ObjectStore.memory()
    const shardId = await seed(store)
    const w = await ShardWriter.open(store, { schema, shardId, maxWalFlushIntervalMs: null })
    await w[end]()
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['put', () => w.put(rows([9]))],
      ['putNoWait', () => w.putNoWait(rows([9]))],
      ['flush', () => w.flush()],
      ['forceSealActive', () => w.forceSealActive()],
      ['waitForFlushDrain', () => w.waitForFlushDrain()],
      ['checkFenced', () => w.checkFenced()],
      ['memtableStats', () => w.memtableStats()],
      ['scan', () => w.scan()],
      ['close', () => w.close()],
      ['asyncDispose', () => w[Symbol.asyncDispose]()],
    ]
    for (const [name, call] of calls) {
      await t.throwsAsync(
        call(),
        { instanceOf: ClosedError, code: 'CLOSED', message: /is closed; open a new writer/ },
        `${name} after ${end}`,
      )
    }
    await t.notThrowsAsync(w.abort(), `abort after ${end}`)
    await assertIntact(t, store, shardId)
  }
})

test('MemTable-only methods of a WAL-only writer are INVALID_ARGUMENT', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, enableMemtable: false })
  const calls: Array<[string, () => Promise<unknown>]> = [
    ['putNoWait', () => w.putNoWait(rows([1]))],
    ['forceSealActive', () => w.forceSealActive()],
    ['waitForFlushDrain', () => w.waitForFlushDrain()],
    ['memtableStats', () => w.memtableStats()],
    ['scan', () => w.scan()],
  ]
  for (const [name, call] of calls) {
    await t.throwsAsync(
      call(),
      { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message: /WAL-only mode/ },
      name,
    )
  }
  await w.close()
})

// ---------------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------------

test('ShardReader.open and WalTailer.open reject a wrong location, options or shard id with INVALID_ARGUMENT', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  for (const open of [ShardReader.open, WalTailer.open] as const) {
    for (const bad of [null, 42, {}, []]) {
      await t.throwsAsync(open(bad as never, { shardId }), {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /location must be a path/,
      })
    }
    for (const bad of [undefined, null, shardId, 42]) {
      await t.throwsAsync(open(store, bad as never), {
        instanceOf: InvalidArgumentError,
        message: /expected an options object with a shardId/,
      })
    }
    for (const bad of [{}, { shardId: 42 }]) {
      await t.throwsAsync(open(store, bad as never), {
        instanceOf: InvalidArgumentError,
        message: /options\.shardId expects a string/,
      })
    }
    for (const bad of ['', 'not-a-uuid', 'x'.repeat(100_000)]) {
      await t.throwsAsync(open(store, { shardId: bad }), { instanceOf: InvalidArgumentError, message: /is not a UUID/ })
    }
    for (const unknown of ['limit', 'shardID']) {
      await t.throwsAsync(open(store, { shardId, [unknown]: shardId } as never), {
        instanceOf: InvalidArgumentError,
        message: new RegExp(`unknown option \`${unknown}\`; known options: shardId`),
      })
    }
  }
  await assertIntact(t, store, shardId)
})

test('WalTailer.read rejects a wrong type, zero, a negative, a fraction, NaN and a position past 2^53 with INVALID_ARGUMENT', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  const tailer = await WalTailer.open(store, { shardId })
  for (const bad of ['1', undefined, null, 1n, {}]) {
    await t.throwsAsync(tailer.read(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /read\(position\) expects a number/,
    })
  }
  for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 2 ** 53, 1e300]) {
    await t.throwsAsync(
      tailer.read(bad),
      {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /position must be an integer from 1 to 9007199254740991/,
      },
      String(bad),
    )
  }
  t.is(await tailer.read(Number.MAX_SAFE_INTEGER), null, 'the largest exact position simply holds no entry')
  t.deepEqual(ids((await tailer.read(3))!.table!), [4, 5])
  await assertIntact(t, store, shardId)
})

// ---------------------------------------------------------------------------------------------
// Read-only directories
// ---------------------------------------------------------------------------------------------

type ReadOnlyMode = 'chmod' | 'immutable' | 'not-a-directory'

/**
 * Makes `dirs` refuse new entries until the returned function (also run at teardown) undoes
 * it. As a regular user, `chmod a-w`. Tests run as root in CI, where mode bits do not deny
 * writes, so there the directories get the ext4 immutable attribute (`chattr +i`: nothing is
 * created or removed in them, reads still work). Where chattr is not available, the first
 * directory is moved away and replaced by a regular file, so writes (and reads) under it fail
 * with ENOTDIR: a write error, though not a read-only directory.
 */
function makeReadOnly(t: ExecutionContext, dirs: string[]): { mode: ReadOnlyMode; restore: () => void } {
  let mode: ReadOnlyMode = 'chmod'
  if (process.getuid?.() === 0) {
    try {
      execFileSync('chattr', ['+i', ...dirs], { stdio: 'ignore' })
      mode = 'immutable'
    } catch {
      // Undo whatever part of it took effect (if chattr exists at all) before falling back.
      try {
        execFileSync('chattr', ['-f', '-i', ...dirs], { stdio: 'ignore' })
      } catch {
        // nothing was set
      }
      mode = 'not-a-directory'
    }
  }
  const top = dirs[0]!
  if (mode === 'chmod') for (const d of dirs) chmodSync(d, 0o555)
  if (mode === 'not-a-directory') {
    renameSync(top, `${top}.moved`)
    writeFileSync(top, '')
  }
  let done = false
  const restore = () => {
    if (done) return
    done = true
    if (mode === 'chmod') for (const d of dirs) chmodSync(d, 0o755)
    if (mode === 'immutable') execFileSync('chattr', ['-i', ...dirs], { stdio: 'ignore' })
    if (mode === 'not-a-directory') {
      rmSync(top)
      renameSync(`${top}.moved`, top)
    }
  }
  t.teardown(restore)
  return { mode, restore }
}

const WRITE_DENIED = /Permission denied|Operation not permitted|Not a directory/

/** Every directory of a local store holding one shard (`_mem_wal` first: see makeReadOnly). */
function storeDirs(dir: string, shardId: string): string[] {
  const shard = join(dir, '_mem_wal', shardId)
  return [join(dir, '_mem_wal'), shard, join(shard, 'manifest'), join(shard, 'wal'), dir]
}

test('in a read-only directory a writer cannot open (IO) and claims nothing, while readers still read', async (t) => {
  const dir = tempDir(t)
  const shardId = await seed(dir)
  const epoch = await epochOf(dir, shardId)
  const { mode, restore } = makeReadOnly(t, storeDirs(dir, shardId))
  t.log(`read-only by ${mode}`)
  await t.throwsAsync(ShardWriter.open(dir, { schema, shardId }), {
    instanceOf: IoError,
    code: 'IO',
    message: WRITE_DENIED,
  })
  await t.throwsAsync(ShardWriter.open(dir, { schema }), { instanceOf: IoError, code: 'IO', message: WRITE_DENIED })
  if (mode !== 'not-a-directory') {
    // Readers never write, so a read-only directory is no obstacle.
    t.deepEqual(await ObjectStore.local(dir).listShards(), [shardId])
    const r = await ShardReader.open(dir, { shardId })
    t.deepEqual(ids(await r.scan()), SEEDED)
    t.is((await r.manifest()).writerEpoch, epoch)
    const tailer = await WalTailer.open(dir, { shardId })
    t.is(await tailer.nextPosition(), 4)
    t.deepEqual(ids((await tailer.read(3))!.table!), [4, 5])
  }
  restore()
  t.is(await epochOf(dir, shardId), epoch, 'no epoch was claimed')
  await assertIntact(t, dir, shardId)
})

test('a WAL directory that turns read-only fails durable puts and flushes with FENCED PersistenceFailure, and a reopen finds the shard intact', async (t) => {
  for (const durableWrite of [true, false]) {
    const dir = tempDir(t)
    const shardId = await seed(dir)
    const w = await ShardWriter.open(dir, {
      schema,
      shardId,
      durableWrite,
      maxWalFlushIntervalMs: null,
      maxWalPersistRetries: 1,
      walPersistRetryBaseDelayMs: 1,
    })
    const { mode, restore } = makeReadOnly(t, [join(dir, '_mem_wal', shardId, 'wal')])
    const write = durableWrite ? w.put(rows([6])) : w.put(rows([6])).then(() => w.flush())
    const e = await t.throwsAsync(
      write,
      { instanceOf: FencedError, code: 'FENCED', message: /WAL persistence failed/ },
      mode,
    )
    t.is(e?.fenceReason, 'PersistenceFailure')
    t.regex(e?.message ?? '', WRITE_DENIED)
    await t.throwsAsync(w.put(rows([7])), { instanceOf: FencedError }, 'the writer is poisoned')
    await w.abort()
    restore()
    await assertIntact(t, dir, shardId)
  }
})

// ---------------------------------------------------------------------------------------------
// Corrupt manifests
// ---------------------------------------------------------------------------------------------

test('a corrupt manifest is CORRUPT naming the object at every entry point that needs it, a tailer still finds the tip, and restoring it restores the shard', async (t) => {
  const dir = tempDir(t)
  const shardId = await seed(dir)
  const manifestDir = join(dir, '_mem_wal', shardId, 'manifest')
  const saved = new Map(readdirSync(manifestDir).map((f) => [f, readFileSync(join(manifestDir, f))]))
  const reader = await ShardReader.open(dir, { shardId })
  const tailer = await WalTailer.open(dir, { shardId })
  const w = await ShardWriter.open(dir, { schema, shardId, maxWalFlushIntervalMs: null })
  // The writer's claim added a version: keep it too.
  for (const f of readdirSync(manifestDir)) if (!saved.has(f)) saved.set(f, readFileSync(join(manifestDir, f)))
  const tip = await tailer.nextPosition()
  const corrupt: Array<[string, Buffer]> = [
    ['garbage', Buffer.from('not a protobuf at all, definitely corrupt')],
    ['an empty file', Buffer.alloc(0)],
    ['a truncated manifest', saved.get([...saved.keys()].find((f) => f.endsWith('.binpb'))!)!.subarray(0, 5)],
  ]
  for (const [what, bytes] of corrupt) {
    for (const f of saved.keys()) if (f.endsWith('.binpb')) writeFileSync(join(manifestDir, f), bytes)
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['ShardWriter.open', () => ShardWriter.open(dir, { schema, shardId })],
      ['ShardReader.open', () => ShardReader.open(dir, { shardId })],
      ['reader.manifest', () => reader.manifest()],
      ['reader.scan', () => reader.scan()],
      ['writer.manifest', () => w.manifest()],
      ['writer.checkFenced', () => w.checkFenced()],
      ['writer.forceSealActive', () => w.forceSealActive()],
    ]
    for (const [name, call] of calls) {
      const e = await t.throwsAsync(
        call(),
        { instanceOf: CorruptError, code: 'CORRUPT', message: /Corrupt object .*manifest\/[01]{64}\.binpb/ },
        `${name} with ${what}`,
      )
      t.true(e instanceof MemWalError)
    }
    // A tailer does not need the manifest: the hint is only where its search for the tip
    // starts, so it still finds the tip and reads entries by position.
    t.is(await (await WalTailer.open(dir, { shardId })).nextPosition(), tip, `WalTailer.open + nextPosition with ${what}`)
    t.is(await tailer.nextPosition(), tip, `tailer.nextPosition with ${what}`)
    t.deepEqual(ids((await tailer.read(3))!.table!), [4, 5])
  }
  await w.abort()
  // A damaged version hint is only a hint.
  writeFileSync(join(manifestDir, 'version_hint.json'), '{"version": "garbage')
  for (const [f, bytes] of saved) if (f.endsWith('.binpb')) writeFileSync(join(manifestDir, f), bytes)
  t.deepEqual(
    readdirSync(manifestDir)
      .filter((f) => f.endsWith('.binpb'))
      .sort(),
    [...saved.keys()].filter((f) => f.endsWith('.binpb')).sort(),
    'no manifest version was written while the manifest was corrupt',
  )
  await assertIntact(t, dir, shardId)
})

test('readers never write: a reader and a tailer leave every file of the store as it was', async (t) => {
  const dir = tempDir(t)
  const shardId = await seed(dir)
  const snapshot = () => {
    const out: string[] = []
    const walk = (d: string) => {
      for (const f of readdirSync(d, { withFileTypes: true })) {
        const p = join(d, f.name)
        if (f.isDirectory()) walk(p)
        else out.push(`${p} ${statSync(p).size} ${statSync(p).mtimeMs}`)
      }
    }
    walk(dir)
    return out.sort()
  }
  const before = snapshot()
  const r = await ShardReader.open(dir, { shardId })
  await r.scan()
  await r.manifest()
  const tailer = await WalTailer.open(dir, { shardId })
  for (let p = 1; p <= (await tailer.nextPosition()); p++) await tailer.read(p)
  await ObjectStore.local(dir).listShards()
  await t.throwsAsync(ShardReader.open(dir, { shardId: randomUUID() }), { instanceOf: InvalidArgumentError })
  t.deepEqual(snapshot(), before)
})
