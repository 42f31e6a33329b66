import test from 'ava'
import {
  Binary,
  Bool,
  DateDay,
  Dictionary,
  Field,
  FixedSizeBinary,
  Float32,
  Float64,
  Int8,
  Int16,
  Int32,
  Int64,
  LargeUtf8,
  List,
  Schema,
  Struct,
  Table,
  TimestampMillisecond,
  Uint8,
  Uint64,
  Utf8,
  tableFromArrays,
  tableToIPC,
  vectorFromArray,
} from 'apache-arrow'

import { ShardWriter } from '../index'
import { memoryLocation } from './helpers'

// Tables travel to Rust as column buffers (no IPC encoding in JavaScript). These tests check
// that every supported type, with nulls and slices, arrives exactly as the IPC path delivers it.

function tableOf(fields: Field[], columns: Record<string, unknown[]>): Table {
  const vectors = Object.fromEntries(fields.map((f) => [f.name, vectorFromArray(columns[f.name]!, f.type)]))
  return new Table(vectors as never)
}

const json = (t: Table) => JSON.stringify(t.toArray(), (_, v) => (typeof v === 'bigint' ? `${v}n` : v))

async function roundTrip(t: import('ava').ExecutionContext, table: Table) {
  const schema = new Schema(table.schema.fields)
  const a = await ShardWriter.open(memoryLocation(), { schema })
  await a.put(table)
  const viaColumns = await a.scan()
  await a.close()
  const b = await ShardWriter.open(memoryLocation(), { schema })
  await b.put(tableToIPC(table, 'stream'))
  const viaIpc = await b.scan()
  await b.close()
  t.is(viaColumns.numRows, table.numRows)
  t.is(json(viaColumns), json(viaIpc))
  t.is(json(viaColumns), json(table))
}

test('primitive, boolean and temporal columns with nulls arrive intact', async (t) => {
  const fields = [
    new Field('i8', new Int8(), true),
    new Field('i16', new Int16(), true),
    new Field('i32', new Int32(), true),
    new Field('i64', new Int64(), true),
    new Field('u8', new Uint8(), true),
    new Field('u64', new Uint64(), true),
    new Field('f32', new Float32(), true),
    new Field('f64', new Float64(), true),
    new Field('b', new Bool(), true),
    new Field('d', new DateDay(), true),
    new Field('ts', new TimestampMillisecond(), true),
  ]
  const n = 37
  const cols: Record<string, unknown[]> = {
    i8: Array.from({ length: n }, (_, i) => (i % 5 === 0 ? null : i - 20)),
    i16: Array.from({ length: n }, (_, i) => i * 300),
    i32: Array.from({ length: n }, (_, i) => (i % 3 === 0 ? null : i * 70000)),
    i64: Array.from({ length: n }, (_, i) => (i % 4 === 0 ? null : BigInt(i) * 10_000_000_000n)),
    u8: Array.from({ length: n }, (_, i) => i),
    u64: Array.from({ length: n }, (_, i) => BigInt(i)),
    f32: Array.from({ length: n }, (_, i) => i / 2),
    f64: Array.from({ length: n }, (_, i) => (i % 7 === 0 ? null : i / 3)),
    b: Array.from({ length: n }, (_, i) => (i % 6 === 0 ? null : i % 2 === 0)),
    d: Array.from({ length: n }, (_, i) => new Date(86_400_000 * i)),
    ts: Array.from({ length: n }, (_, i) => (i % 2 ? null : new Date(1_700_000_000_000 + i))),
  }
  await roundTrip(t, tableOf(fields, cols))
})

test('string, binary and fixed-size columns arrive intact', async (t) => {
  const fields = [
    new Field('s', new Utf8(), true),
    new Field('ls', new LargeUtf8(), true),
    new Field('bin', new Binary(), true),
    new Field('fsb', new FixedSizeBinary(3), true),
  ]
  const n = 25
  await roundTrip(
    t,
    tableOf(fields, {
      s: Array.from({ length: n }, (_, i) => (i % 4 === 0 ? null : `row ${i} ${'é'.repeat(i % 3)}`)),
      ls: Array.from({ length: n }, (_, i) => `large ${i}`),
      bin: Array.from({ length: n }, (_, i) => (i % 5 === 0 ? null : Uint8Array.from({ length: i }, (_, j) => j))),
      fsb: Array.from({ length: n }, (_, i) => Uint8Array.from([i, i + 1, i + 2])),
    }),
  )
})

test('nested list and struct columns arrive intact', async (t) => {
  const fields = [
    new Field('l', new List(new Field('item', new Int32(), true)), true),
    new Field(
      'st',
      new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]),
      true,
    ),
  ]
  const n = 20
  await roundTrip(
    t,
    tableOf(fields, {
      l: Array.from({ length: n }, (_, i) => (i % 6 === 0 ? null : Array.from({ length: i % 4 }, (_, j) => (j === 1 ? null : i + j)))),
      st: Array.from({ length: n }, (_, i) => (i % 5 === 0 ? null : { a: i, b: i % 2 ? `x${i}` : null })),
    }),
  )
})

test('sliced tables send only their rows', async (t) => {
  const base = tableOf(
    [
      new Field('i', new Int32(), true),
      new Field('s', new Utf8(), true),
      new Field('b', new Bool(), true),
      new Field('l', new List(new Field('item', new Int32(), true)), true),
    ],
    {
      i: Array.from({ length: 100 }, (_, i) => (i % 3 === 0 ? null : i)),
      s: Array.from({ length: 100 }, (_, i) => (i % 4 === 0 ? null : `s${i}`)),
      b: Array.from({ length: 100 }, (_, i) => (i % 5 === 0 ? null : i % 2 === 0)),
      l: Array.from({ length: 100 }, (_, i) => [i, i + 1]),
    },
  )
  for (const [start, end] of [
    [1, 9],
    [13, 14],
    [37, 100],
    [3, 77],
  ] as const) {
    await roundTrip(t, base.slice(start, end))
  }
})

test('dictionary-encoded strings from tableFromArrays go to a Utf8 shard field', async (t) => {
  const schema = new Schema([new Field('id', new Int32(), true), new Field('name', new Utf8(), true)])
  const w = await ShardWriter.open(memoryLocation(), { schema })
  const table = tableFromArrays({ id: Int32Array.from([1, 2, 3]), name: ['a', 'b', 'a'] })
  t.true(table.schema.fields[1]!.type instanceof Dictionary)
  await w.put(table)
  await w.put(table.slice(1, 3))
  const out = await w.scan()
  t.deepEqual(out.getChild('name')?.toArray(), ['a', 'b', 'a', 'b', 'a'])
  await w.close()
})

test('a table of several batches arrives in order', async (t) => {
  const schema = new Schema([new Field('i', new Int32(), true)])
  const parts = [0, 1, 2].map((k) => tableOf([new Field('i', new Int32(), true)], { i: [k * 10, k * 10 + 1] }))
  const table = parts[0]!.concat(parts[1]!, parts[2]!)
  t.is(table.batches.length, 3)
  const w = await ShardWriter.open(memoryLocation(), { schema })
  const r = await w.put(table)
  t.deepEqual(r.batchPositions, { start: 0, end: 3 })
  t.deepEqual(Array.from((await w.scan()).getChild('i')!.toArray()), [0, 1, 10, 11, 20, 21])
  await w.close()
})
