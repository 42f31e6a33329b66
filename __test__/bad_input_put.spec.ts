// Bad input to put and putNoWait: data of the wrong type, objects that look like apache-arrow
// data but are not, empty input, too many batches, the wrong schema; and huge but valid input,
// which must round-trip. (Tables from other copies of apache-arrow are valid input:
// arrow_copies.spec.ts.) Part of the bad-input matrix (its
// shared shard and intact check are in support/seeded-shard.ts).
//
// Cells already covered in errors.spec.ts are not repeated here: put of an empty batch list
// and an empty batch, put of an Int64 `id` and put of seven wrong types.

import test, { type ExecutionContext } from 'ava'
import { Field, Int32, Schema, Table, Utf8, makeVector, tableFromArrays, tableToIPC, vectorFromArray } from 'apache-arrow'

import {
  InvalidArgumentError,
  ObjectStore,
  SchemaMismatchError,
  ShardReader,
  ShardWriter,
  type PutData,
} from '../index'
import { ids, memoryLocation, nullableId, rows, schema, tableOf, tempDir } from './support/helpers'
import { SEEDED, assertIntact, seed } from './support/seeded-shard'

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
    ['an array with a non-batch', [rows([1]).batches[0], 'x'], /element 1 is string "x"/],
    ['a sparse array', sparse, /element 0 is undefined/],
    ['an array of Tables', [rows([1])], /element 0 is an object \(Table\)/],
    ['garbage bytes', new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]), /not a valid Arrow IPC stream/],
    ['truncated IPC bytes', ipc.slice(0, ipc.length - 24), /not a valid Arrow IPC stream/],
  ]
  await assertPutsReject(t, { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' }, cases)
})

/** `d` (an apache-arrow Data) with some fields replaced, keeping its prototype's getters. */
function patched(d: object, patch: Record<string, unknown>): object {
  return Object.assign(Object.create(Object.getPrototypeOf(d) as object) as object, d, patch)
}

/** A RecordBatch look-alike of the shard schema `s` whose columns are `children`. */
function batchLike(s: unknown, children: unknown[], numRows = 1): object {
  return { schema: s, data: { children, length: numRows }, numRows }
}

test('objects that look like apache-arrow data but are not are INVALID_ARGUMENT, never a raw TypeError, and nothing is written', async (t) => {
  const [id, name] = rows([1]).batches[0]!.data.children as object[]
  const utf8 = (offsets: number[], bytes: number[]) =>
    patched(name!, { valueOffsets: Int32Array.from(offsets), values: Uint8Array.from(bytes), length: offsets.length - 1 })
  const dictionary = tableFromArrays({ id: Int32Array.from([1]), name: ['a'] }).batches[0]!
  const [dictId, dictName] = dictionary.data.children as object[]
  const throwing = {
    schema,
    get batches(): never {
      throw new TypeError('boom')
    },
  }
  const withType = (type: object) =>
    batchLike({ fields: [{ name: 'id', nullable: false, type }, schema.fields[1]] }, [patched(id!, { type }), name])
  const cases: BadPut[] = [
    ['a Table-like holding a plain object', { schema, batches: [{}] }, /batch 0 of the Table is an object \(Object\), not a RecordBatch/],
    ['a Table-like with no schema fields', { schema: {}, batches: [] }, /the Table's schema is not an apache-arrow Schema: .*no fields array/],
    ['a batch-like without columns', { schema, data: {}, numRows: 1 }, /batch 0 holds no columns but its schema has 2 fields/],
    ['a batch-like with a negative row count', batchLike(schema, [id, name], -1), /batch 0 has number -1 rows/],
    ['a batch-like with a row count that is not a number', { schema, data: {}, numRows: '1' }, /batch 0 has string "1" rows/],
    ['a Utf8 column where the schema says Int32', batchLike(schema, [name, name]), /column `id` holds data of type id 5 but its schema says Int32/],
    ['a column that is not Data', batchLike(schema, [42, name]), /column `id` holds number 42 where apache-arrow Data was expected/],
    ['a column with no values buffer', batchLike(schema, [patched(id!, { values: undefined }), name]), /column `id`: column data does not form a valid Int32 array/],
    ['a column with a negative length', batchLike(schema, [patched(id!, { length: -1 }), name]), /column `id`: column data: invalid length -1/],
    ['a column longer than its buffer', batchLike(schema, [patched(id!, { length: 1000 }), utf8(Array.from({ length: 1001 }, () => 0), [])], 1000), /column `id`: column data does not form a valid Int32 array/],
    ['string offsets past the values', batchLike(schema, [id, utf8([0, 1000], [97])]), /column `name`: column data does not form a valid Utf8 array/],
    ['strings that are not UTF-8', batchLike(schema, [id, utf8([0, 2], [0xff, 0xfe])]), /column `name`: column data does not form a valid Utf8 array/],
    ['a validity bitmap shorter than the column', batchLike(schema, [patched(id!, { nullBitmap: Uint8Array.of(1), offset: 100, _nullCount: 1 }), name]), /column `id`: column data: validity bitmap too short/],
    ['a dictionary key past its dictionary', batchLike(dictionary.schema, [dictId, patched(dictName!, { values: Int32Array.of(7) })]), /column `name`: column data does not form a valid Dictionary/],
    ['a dictionary without a dictionary', batchLike(dictionary.schema, [dictId, patched(dictName!, { dictionary: undefined })]), /column `name` is dictionary-encoded but its array has no dictionary/],
    ['a schema type of an unknown type id', withType({ typeId: 99 }), /batch 0's schema field 0 \(`id`\) is not an apache-arrow Schema: its type .* has the unknown type id 99/],
    ['an integer type 12 bits wide', withType({ typeId: 2, bitWidth: 12, isSigned: true }), /field `id`: an integer cannot be 12 bits wide/],
    ['a schema type with a BigInt attribute', withType({ typeId: 2, bitWidth: 32n, isSigned: true }), /put could not read an object \(Object\) as apache-arrow data/],
    ['a Table-like whose numRows is not its batches\'', { schema, batches: rows([1]).batches, numRows: 5 }, /the data passed to put has 5 rows and 2 columns, but memwal decoded 1 rows and 2 columns/],
    ['a batch-like whose numRows is not its length', { schema, data: rows([1]).batches[0]!.data, numRows: 2 }, /the data passed to put has 2 rows and 2 columns, but memwal decoded 1 rows/],
    ['a Table-like whose batches getter throws', throwing, /put could not read an object \(Object\) as apache-arrow data \(boom\)/],
  ]
  await assertPutsReject(t, { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' }, cases)
})

test('empty input is INVALID_ARGUMENT for put and putNoWait, and nothing is written', async (t) => {
  const empty = rows([]).batches[0]!
  const cases: BadPut[] = [
    ['an empty batch list', [], /empty batch list/],
    ['an empty Table', rows([]), /^the Table has 0 rows: there is nothing to write/],
    ['a Table without batches', new Table(schema), /^the Table has 0 rows: there is nothing to write/],
    ['an empty batch', empty, /^the RecordBatch has 0 rows: there is nothing to write/],
    ['a list of empty batches', [empty, empty], /^all 2 batches have 0 rows: there is nothing to write/],
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
  const w = await ShardWriter.open(dir, { schema: wide, shard: 'wide' })
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
