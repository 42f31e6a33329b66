// Bad input to put and putNoWait: data of the wrong type, a Table from a second copy of
// apache-arrow, empty input, too many batches, the wrong schema; and huge but valid input,
// which must round-trip. Part of the bad-input matrix (its
// shared shard and intact check are in seeded-shard.ts).
//
// Cells already covered in errors.spec.ts are not repeated here: put of an empty batch list
// and an empty batch, put of an Int64 `id` and put of seven wrong types.

import test, { type ExecutionContext } from 'ava'
import { Field, Int32, Schema, Table, Utf8, makeVector, tableToIPC, vectorFromArray } from 'apache-arrow'

import {
  InvalidArgumentError,
  ObjectStore,
  SchemaMismatchError,
  ShardReader,
  ShardWriter,
  type PutData,
} from '../index'
import { ids, memoryLocation, nullableId, rows, schema, tableOf, tempDir } from './helpers'
import { SEEDED, assertIntact, seed } from './seeded-shard'

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
