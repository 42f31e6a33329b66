// Tables, RecordBatches and Schemas from any apache-arrow copy of version 15 or newer, loaded
// through CommonJS or ESM, are read by their structure: every common way of building a Table
// round-trips through a writer opened with that copy's Schema. The copies sit side by side as
// npm aliases (package.json devDependencies); apache-arrow 21 is loaded twice, through
// `require` (memwal's own copy here) and through `import` (a second copy of the same version).

import { createRequire } from 'node:module'

import test, { type ExecutionContext } from 'ava'

import { InvalidArgumentError, SchemaMismatchError, ShardReader, ShardWriter } from '../index'
import { encode } from '../lib/encoding'
import { memoryLocation } from './support/helpers'

type Arrow = typeof import('apache-arrow')
type AnyTable = import('apache-arrow').Table

const load = createRequire(__filename)

/** Each copy under test: its name and how it is loaded. */
const COPIES: [name: string, load: () => Promise<Arrow>][] = [
  ['apache-arrow 15.0.2 (require)', async () => load('apache-arrow-15') as Arrow],
  ['apache-arrow 17.0.0 (require)', async () => load('apache-arrow-17') as Arrow],
  ['apache-arrow 18.1.0 (require)', async () => load('apache-arrow-18') as Arrow],
  ['apache-arrow 21.2.0 (require)', async () => load('apache-arrow') as Arrow],
  ['apache-arrow 21.2.0 (import)', async () => (await import('apache-arrow')) as Arrow],
]

/** Rows as plain JSON (bigints as `<n>n`), to compare what went in with what came back. */
const json = (t: { toArray(): unknown[] }) =>
  JSON.stringify(t.toArray(), (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))

/**
 * Puts `table` into a writer opened with `schema` (the copy's own Schema object), checks that it
 * crosses as column buffers (there is no IPC fallback for Tables), and that the rows come back
 * equal, in order, nulls included.
 */
async function roundTrip(t: ExecutionContext, what: string, schema: unknown, table: AnyTable, expected = json(table)) {
  t.is(encode(table).kind, 'columns', `${what}: crosses as column buffers`)
  const w = await ShardWriter.open(memoryLocation(), { schema: schema as never, durableWrite: false })
  try {
    await w.put(table)
    const back = await w.scan()
    t.is(back.numRows, table.numRows, `${what}: row count`)
    t.is(json(back), expected, `${what}: rows`)
  } finally {
    await w.abort()
  }
}

/**
 * As {@link roundTrip}, in WAL-only mode (read back through a reader), for columns a Parquet
 * generation cannot store: a MemTable-mode writer refuses them at open.
 */
async function walOnlyRoundTrip(t: ExecutionContext, what: string, schema: unknown, table: AnyTable) {
  t.is(encode(table).kind, 'columns', `${what}: crosses as column buffers`)
  const loc = memoryLocation()
  const w = await ShardWriter.open(loc, { schema: schema as never, enableMemtable: false })
  await w.put(table)
  await w.close()
  const r = await ShardReader.open(loc, { shardId: w.shardId })
  try {
    const back = await r.scan()
    t.is(back.numRows, table.numRows, `${what}: row count`)
    t.is(json(back), json(table), `${what}: rows`)
  } finally {
    await r.close()
  }
}

for (const [name, loadCopy] of COPIES) {
  test(`${name}: Tables built every common way round-trip through a writer opened with its Schema`, async (t) => {
    const A = await loadCopy()

    // tableFromArrays: typed arrays, and strings as a dictionary.
    const fromArrays = A.tableFromArrays({
      i: Int32Array.from([1, 2, 3, 4]),
      f: Float64Array.from([0.5, 1.5, 2.5, 3.5]),
      big: BigInt64Array.from([1n, -2n, 3n, 1n << 40n]),
      s: ['a', null, 'b', 'a'],
    })
    await roundTrip(t, 'tableFromArrays', fromArrays.schema, fromArrays)
    await roundTrip(t, 'tableFromArrays, sliced', fromArrays.schema, fromArrays.slice(1, 3))

    // tableFromJSON: inferred Float64, Bool, dictionary strings, nulls.
    const fromJSON = A.tableFromJSON([
      { n: 1, b: true, s: 'x' },
      { n: null, b: false, s: null },
      { n: 3, b: null, s: 'y' },
    ])
    await roundTrip(t, 'tableFromJSON', fromJSON.schema, fromJSON)

    // vectorFromArray with explicit, nullable types, nested ones included.
    const fields = [
      new A.Field('u', new A.Utf8(), true),
      new A.Field('bin', new A.Binary(), true),
      new A.Field('lu', new A.LargeUtf8(), true),
      new A.Field('lb', new A.LargeBinary(), true),
      new A.Field('l', new A.List(new A.Field('item', new A.Int32(), true)), true),
      new A.Field('fsl', new A.FixedSizeList(2, new A.Field('item', new A.Int16(), true)), true),
      new A.Field('st', new A.Struct([new A.Field('a', new A.Int32(), true), new A.Field('b', new A.Utf8(), true)]), true),
      new A.Field(
        'm',
        new A.Map_(
          new A.Field('entries', new A.Struct([new A.Field('key', new A.Utf8(), false), new A.Field('value', new A.Int32(), true)]), false) as never,
        ),
        true,
      ),
      new A.Field('ts', new A.TimestampMillisecond(), true),
      new A.Field('u64', new A.Uint64(), true),
      new A.Field('bool', new A.Bool(), true),
    ]
    const n = 23
    const values: Record<string, unknown[]> = {
      u: Array.from({ length: n }, (_, i) => (i % 4 === 0 ? null : `row ${i} ${'é'.repeat(i % 3)}`)),
      bin: Array.from({ length: n }, (_, i) => (i % 5 === 0 ? null : Uint8Array.from({ length: i % 4 }, (_, j) => j + i))),
      lu: Array.from({ length: n }, (_, i) => (i % 3 === 0 ? null : `large ${i}`)),
      lb: Array.from({ length: n }, (_, i) => (i % 6 === 0 ? null : Uint8Array.of(i, 255 - i))),
      l: Array.from({ length: n }, (_, i) => (i % 7 === 0 ? null : Array.from({ length: i % 4 }, (_, j) => (j === 1 ? null : i + j)))),
      fsl: Array.from({ length: n }, (_, i) => (i % 5 === 1 ? null : [i, i % 3 === 0 ? null : -i])),
      st: Array.from({ length: n }, (_, i) => (i % 8 === 0 ? null : { a: i, b: i % 2 ? `x${i}` : null })),
      m: Array.from({ length: n }, (_, i) => (i % 9 === 0 ? null : new Map([[`k${i}`, i], ['z', i % 2 ? null : 0]]))),
      ts: Array.from({ length: n }, (_, i) => (i % 2 ? null : 1_700_000_000_000 + i)),
      u64: Array.from({ length: n }, (_, i) => (i % 5 === 2 ? null : BigInt(i) << 50n)),
      bool: Array.from({ length: n }, (_, i) => (i % 6 === 3 ? null : i % 2 === 0)),
    }
    const schema = new A.Schema(fields)
    const vectors = Object.fromEntries(fields.map((f) => [f.name, A.vectorFromArray(values[f.name]!, f.type)]))
    const fromVectors = new A.Table(vectors as never)
    await roundTrip(t, 'vectorFromArray', schema, fromVectors)
    for (const [start, end] of [
      [1, 9],
      [13, 14],
      [5, 23],
    ] as const) {
      await roundTrip(t, `vectorFromArray, sliced ${start}..${end}`, schema, fromVectors.slice(start, end))
    }
    const multiChunk = fromVectors.slice(0, 10).concat(fromVectors.slice(10, 11), fromVectors.slice(11))
    t.is(multiChunk.batches.length, 3)
    await roundTrip(t, 'vectorFromArray, three chunks', schema, multiChunk, json(fromVectors))

    // makeVector and makeData: a RecordBatch over prebuilt buffers, the benchmark's shape.
    const idName = new A.Schema([new A.Field('id', new A.Int32(), false), new A.Field('name', new A.Utf8(), true)])
    const data = A.makeData({
      type: new A.Struct(idName.fields),
      length: 3,
      nullCount: 0,
      children: [A.makeVector(Int32Array.from([7, 8, 9])).data[0]!, A.vectorFromArray(['a', null, 'c'], new A.Utf8()).data[0]!],
    })
    const batch = new A.RecordBatch(idName, data)
    await roundTrip(t, 'makeData', idName, new A.Table([batch]))

    // A dictionary of two chunks (as a dictionary delta leaves it): the keys index both.
    const dictType = new A.Dictionary(new A.Utf8(), new A.Int32())
    const dictionary = A.vectorFromArray(['p', 'q'], new A.Utf8()).concat(A.vectorFromArray(['r'], new A.Utf8()))
    t.is(dictionary.data.length, 2)
    const keys = A.makeData({ type: dictType, length: 4, nullCount: 0, data: Int32Array.from([2, 0, 1, 2]), dictionary })
    const dictSchema = new A.Schema([new A.Field('d', dictType, true)])
    const dictTable = new A.Table([new A.RecordBatch(dictSchema, A.makeData({ type: new A.Struct(dictSchema.fields), length: 4, nullCount: 0, children: [keys] }))])
    await roundTrip(t, 'a dictionary of two chunks', dictSchema, dictTable)
  })

  test(`${name}: union columns, and the LargeList and view columns of copies that have them, round-trip`, async (t) => {
    const A = await loadCopy()
    const unionFields = () => [new A.Field('i', new A.Int32(), true), new A.Field('s', new A.Utf8(), true)]
    // Built with makeData: apache-arrow's union builders differ between versions (15's leaves
    // the vector empty; 21's sparse one leaves a child shorter than the union).
    const dense = new A.DenseUnion([0, 1], unionFields())
    const denseData = A.makeData({
      type: dense,
      length: 5,
      nullCount: 0,
      typeIds: Int8Array.from([0, 1, 1, 0, 1]),
      valueOffsets: Int32Array.from([0, 0, 1, 1, 2]),
      children: [A.vectorFromArray([1, null], new A.Int32()).data[0]!, A.vectorFromArray(['a', 'b', null], new A.Utf8()).data[0]!],
    })
    const sparse = new A.SparseUnion([0, 1], unionFields())
    const sparseData = A.makeData({
      type: sparse,
      length: 4,
      nullCount: 0,
      typeIds: Int8Array.from([1, 0, 0, 1]),
      children: [
        A.vectorFromArray([null, 7, 8, null], new A.Int32()).data[0]!,
        A.vectorFromArray(['p', null, null, 'q'], new A.Utf8()).data[0]!,
      ],
    })
    for (const [what, type, data] of [
      ['a dense union', dense, denseData],
      ['a sparse union', sparse, sparseData],
    ] as const) {
      const s = new A.Schema([new A.Field('u', type, true)])
      const table = new A.Table([new A.RecordBatch(s, A.makeData({ type: new A.Struct(s.fields), length: data.length, nullCount: 0, children: [data] }))])
      await t.throwsAsync(ShardWriter.open(memoryLocation(), { schema: s as never }), {
        instanceOf: InvalidArgumentError,
        message: /`u`/,
      }, `${what}: a MemTable-mode writer refuses a union at open`)
      await walOnlyRoundTrip(t, what, s, table)
      await walOnlyRoundTrip(t, `${what}, sliced`, s, table.slice(1, 3))
    }

    const late = A as unknown as Record<string, (new (...args: never[]) => import('apache-arrow').DataType) | undefined>
    const largeList = late.LargeList
    if (largeList !== undefined) {
      const type = new largeList(new A.Field('item', new A.Int32(), true) as never)
      const s = new A.Schema([new A.Field('l', type, true)])
      const table = new A.Table({ l: A.vectorFromArray([[1, 2], null, [3], [], [null, 4]], type) })
      await roundTrip(t, 'LargeList', s, table)
      await roundTrip(t, 'LargeList, sliced', s, table.slice(2, 5))
    } else {
      t.log(`${name} has no LargeList`)
    }
    for (const [view, values] of [
      ['Utf8View', ['a', null, 'a string longer than twelve bytes', 'b']],
      ['BinaryView', [Uint8Array.of(1), null, new Uint8Array(20).fill(9), Uint8Array.of()]],
    ] as const) {
      const ctor = late[view]
      if (ctor === undefined) {
        t.log(`${name} has no ${view}`)
        continue
      }
      const type = new ctor()
      const s = new A.Schema([new A.Field('v', type, true)])
      const table = new A.Table({ v: A.vectorFromArray([...values] as unknown[], type) })
      await roundTrip(t, view, s, table)
      await roundTrip(t, `${view}, sliced`, s, table.slice(1, 3))
    }
  })

  test(`${name}: RecordBatches whose dictionaries differ are one put, and a RecordBatch alone is one`, async (t) => {
    const A = await loadCopy()
    const one = A.tableFromArrays({ id: Int32Array.from([1, 2]), name: ['x', 'y'] })
    const two = A.tableFromArrays({ id: Int32Array.from([3]), name: ['z'] })
    const w = await ShardWriter.open(memoryLocation(), { schema: one.schema as never, durableWrite: false })
    try {
      const r = await w.put([one.batches[0]!, two.batches[0]!])
      t.deepEqual(r.batchPositions, { start: 0, end: 2 })
      await w.put(two.batches[0]!)
      const back = await w.scan()
      t.deepEqual(Array.from(back.getChild('id')!.toArray() as Int32Array), [1, 2, 3, 3])
      t.deepEqual(Array.from(back.getChild('name')!.toArray()), ['x', 'y', 'z', 'z'])
    } finally {
      await w.abort()
    }
  })

  test(`${name}: 0-row input is INVALID_ARGUMENT saying there is nothing to write`, async (t) => {
    const A = await loadCopy()
    const full = A.tableFromArrays({ id: Int32Array.from([1]), name: ['a'] })
    const empty = new A.Table([full.batches[0]!.slice(0, 0)])
    t.is(empty.batches.length, 1)
    const w = await ShardWriter.open(memoryLocation(), { schema: full.schema as never, durableWrite: false })
    try {
      const nothing = { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message: /nothing to write/ }
      await t.throwsAsync(w.put(empty as never), nothing, 'a 0-row Table')
      await t.throwsAsync(w.put(A.tableFromArrays({ id: Int32Array.from([]) }) as never), nothing, 'a 0-row Table of tableFromArrays')
      await t.throwsAsync(w.put(new A.Table(full.schema) as never), nothing, 'a Table of no batches')
      await t.throwsAsync(w.put(empty.batches[0]! as never), nothing, 'a 0-row RecordBatch')
      await t.throwsAsync(w.put([empty.batches[0]!, empty.batches[0]!] as never), nothing, 'only 0-row batches')
      await t.throwsAsync(w.put([full.batches[0]!, empty.batches[0]!] as never), {
        instanceOf: InvalidArgumentError,
        message: /Batch 1 is empty \(0 rows\); remove empty batches/,
      })
      // A Table's empty chunks are skipped: how apache-arrow chunks a Table is not the caller's choice.
      const r = await w.put(empty.concat(full) as never)
      t.deepEqual(r.batchPositions, { start: 0, end: 1 })
    } finally {
      await w.abort()
    }
  })

  test(`${name}: a Table whose schema differs from the shard's is SCHEMA_MISMATCH naming the field`, async (t) => {
    const A = await loadCopy()
    const shard = new A.Schema([new A.Field('id', new A.Int32(), false), new A.Field('name', new A.Utf8(), true)])
    const w = await ShardWriter.open(memoryLocation(), { schema: shard as never, durableWrite: false })
    try {
      await t.throwsAsync(w.put(A.tableFromArrays({ id: BigInt64Array.from([1n]), name: ['a'] }) as never), {
        instanceOf: SchemaMismatchError,
        code: 'SCHEMA_MISMATCH',
        message: /`id`/,
      })
    } finally {
      await w.abort()
    }
  })
}
