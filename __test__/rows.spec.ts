// put and putNoWait of plain objects (one per row), converted in the binding against the
// shard's schema: every conversion, through the public API. What each type takes is checked by
// reading the stored values back (raw, in the column's unit); the rejections of values that do
// not fit are in rows_errors.spec.ts.

import test, { type ExecutionContext } from 'ava'
import {
  Binary,
  Bool,
  type DataType,
  DateDay,
  DateMillisecond,
  Dictionary,
  DurationMillisecond,
  Field,
  FixedSizeBinary,
  FixedSizeList,
  Float16,
  Float32,
  Float64,
  Int8,
  Int16,
  Int32,
  Int64,
  LargeBinary,
  LargeList,
  LargeUtf8,
  List,
  Null,
  Schema,
  Struct,
  Table,
  TimeMillisecond,
  TimestampMicrosecond,
  TimestampMillisecond,
  TimestampNanosecond,
  TimestampSecond,
  Uint8,
  Uint16,
  Uint32,
  Uint64,
  Utf8,
  vectorFromArray,
} from 'apache-arrow'

import { ShardReader, ShardWriter } from '../index'
import { memoryLocation, tempDir } from './support/helpers'

/** A nullable field. */
const f = (name: string, type: DataType, nullable = true) => new Field(name, type, nullable)

/** Puts `rows` in one put to a fresh shard of `fields` and returns what the shard holds. */
async function roundTrip(fields: Field[], rows: object[], options: { ignoreUnknownFields?: boolean } = {}): Promise<Table> {
  const w = await ShardWriter.open(memoryLocation(), { schema: new Schema(fields), ...options })
  try {
    await w.put(rows)
    return await w.scan()
  } finally {
    await w.close()
  }
}

/** Column `name` as stored: raw values in the column's unit (`null` for a null). */
function raw(t: Table, name: string): unknown[] {
  const out: unknown[] = []
  for (const d of t.getChild(name)!.data) {
    for (let i = 0; i < d.length; i++) out.push(d.getValid(i) ? (d.values as ArrayLike<unknown>)[d.offset + i] : null)
  }
  return out
}

/** A value as apache-arrow reads it, with structs as plain objects and lists as arrays. */
function plain(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v
  if (v instanceof Uint8Array) return v
  const json = (v as { toJSON?: () => unknown }).toJSON
  const x = typeof json === 'function' ? json.call(v) : v
  if (Array.isArray(x)) return x.map(plain)
  if (ArrayBuffer.isView(x)) return Array.from(x as unknown as ArrayLike<unknown>)
  return Object.fromEntries(Object.entries(x as object).map(([k, e]) => [k, plain(e)]))
}

/** Column `name` as apache-arrow reads it (structs as objects, lists as arrays). */
function values(t: Table, name: string): unknown[] {
  return Array.from(t.getChild(name)!, plain)
}

test('numbers and bigints fill every integer width, up to its bounds', async (t) => {
  const widths: Array<[string, DataType, bigint, bigint]> = [
    ['i8', new Int8(), -128n, 127n],
    ['i16', new Int16(), -32768n, 32767n],
    ['i32', new Int32(), -(2n ** 31n), 2n ** 31n - 1n],
    ['i64', new Int64(), -(2n ** 63n), 2n ** 63n - 1n],
    ['u8', new Uint8(), 0n, 255n],
    ['u16', new Uint16(), 0n, 65535n],
    ['u32', new Uint32(), 0n, 2n ** 32n - 1n],
    ['u64', new Uint64(), 0n, 2n ** 64n - 1n],
  ]
  const fields = widths.map(([name, type]) => f(name, type))
  // Row 0: the bounds as bigints; row 1: as numbers where exact; row 2: small numbers.
  const exact = (b: bigint) => (b >= -(2n ** 53n) && b <= 2n ** 53n ? Number(b) : b)
  const rows = [
    Object.fromEntries(widths.map(([name, , min]) => [name, min])),
    Object.fromEntries(widths.map(([name, , , max]) => [name, exact(max)])),
    Object.fromEntries(widths.map(([name]) => [name, 7])),
  ]
  const table = await roundTrip(fields, rows)
  for (const [name, , min, max] of widths) {
    const got = raw(table, name).map((v) => BigInt(v as number | bigint))
    t.deepEqual(got, [min, max, 7n], name)
  }
})

test('numbers and bigints fill Float16, Float32 and Float64, NaN and infinities included', async (t) => {
  const fields = [f('h', new Float16()), f('s', new Float32()), f('d', new Float64())]
  const rows = [
    { h: 1.5, s: 0.1, d: 0.1 },
    { h: -65504, s: 3.4e38, d: 1e300 },
    { h: Number.NaN, s: Number.NEGATIVE_INFINITY, d: Number.POSITIVE_INFINITY },
    { h: 2n, s: 2n ** 40n, d: -(2n ** 60n) },
  ]
  const table = await roundTrip(fields, rows)
  t.deepEqual(values(table, 'h'), [1.5, -65504, Number.NaN, 2])
  t.deepEqual(values(table, 's'), [Math.fround(0.1), Math.fround(3.4e38), Number.NEGATIVE_INFINITY, 2 ** 40])
  t.deepEqual(values(table, 'd'), [0.1, 1e300, Number.POSITIVE_INFINITY, -(2 ** 60)])
})

test('booleans fill Boolean, and Null fields take null and undefined', async (t) => {
  const table = await roundTrip(
    [f('b', new Bool(), false), f('n', new Null())],
    [{ b: true, n: null }, { b: false }, { b: true, n: undefined }],
  )
  t.deepEqual(values(table, 'b'), [true, false, true])
  t.deepEqual(values(table, 'n'), [null, null, null])
})

test('strings fill Utf8, LargeUtf8 and dictionaries of every integer key type, long and non-ASCII ones too', async (t) => {
  const keys = [new Int8(), new Int16(), new Int32(), new Int64(), new Uint8(), new Uint16(), new Uint32(), new Uint64()]
  const fields = [
    f('s', new Utf8()),
    f('large', new LargeUtf8()),
    ...keys.map((k, i) => f(`d${i}`, new Dictionary(new Utf8(), k as Int32))),
    f('dl', new Dictionary(new LargeUtf8(), new Int32())),
  ]
  // Longer than the binding's first read (256 bytes), and a multi-byte character at the cut.
  const long = `${'é'.repeat(127)}🙂${'x'.repeat(1000)}`
  const texts = ['a', '', 'ünïcödé 🙂', long, 'a', null]
  const rows = texts.map((s) => Object.fromEntries(fields.map((fd) => [fd.name, s])))
  const table = await roundTrip(fields, rows)
  // apache-arrow cannot read back dictionaries with 64-bit keys or LargeUtf8 values: their keys
  // are checked instead (each distinct string numbered once, in order).
  const keysOnly = ['d3', 'd7', 'dl']
  for (const fd of fields) {
    if (keysOnly.includes(fd.name)) {
      t.deepEqual(raw(table, fd.name).map((k) => (k === null ? null : Number(k))), [0, 1, 2, 3, 0, null], fd.name)
    } else {
      t.deepEqual(values(table, fd.name), texts, fd.name)
    }
  }
  for (const name of ['d2', 'd3', 'd7']) {
    t.deepEqual([...table.getChild(name)!.data[0]!.dictionary!], ['a', '', 'ünïcödé 🙂', long], `${name} holds each distinct string once`)
  }
})

// Kept, not refused: the README ("What a row may hold") and put's TSDoc say so.
test('a lone surrogate in a string is stored as U+FFFD, in every string type and from a Table too', async (t) => {
  const given = ['a\uD800b', '\uDC00', 'x\uD83D', '\uD83D\uDE42'] // lone high, lone low, at the end, a pair
  const stored = ['a\uFFFDb', '\uFFFD', 'x\uFFFD', '\uD83D\uDE42']
  const types = [new Utf8(), new LargeUtf8(), new Dictionary(new Utf8(), new Int32())]
  const fromRows = await roundTrip(
    types.map((type, i) => f(`s${i}`, type)),
    given.map((s) => ({ s0: s, s1: s, s2: s })),
  )
  for (let i = 0; i < types.length; i++) t.deepEqual(values(fromRows, `s${i}`), stored, String(types[i]))
  const w = await ShardWriter.open(memoryLocation(), { schema: new Schema([f('s', new Utf8())]) })
  await w.put(new Table({ s: vectorFromArray(given, new Utf8()) }))
  t.deepEqual(values(await w.scan(), 's'), stored, 'a Table of apache-arrow')
  await w.close()
})

const MS = 1_700_000_000_123 // 2023-11-14T22:13:20.123Z

test('Dates, epoch numbers in the column unit and ISO-8601 strings fill Timestamp of every unit', async (t) => {
  const fields = [
    f('s', new TimestampSecond()),
    f('ms', new TimestampMillisecond()),
    f('us', new TimestampMicrosecond()),
    f('ns', new TimestampNanosecond()),
  ]
  const inUnit = { s: 1_700_000_000n, ms: BigInt(MS), us: BigInt(MS) * 1000n, ns: BigInt(MS) * 1_000_000n }
  const rows = [
    { s: new Date(MS), ms: new Date(MS), us: new Date(MS), ns: new Date(MS) },
    { s: 1_700_000_000, ms: MS, us: MS * 1000, ns: inUnit.ns },
    { s: 1_700_000_000n, ms: BigInt(MS), us: inUnit.us, ns: inUnit.ns },
    ...['2023-11-14T22:13:20.123Z', '2023-11-15T00:13:20.123+02:00', '2023-11-14 22:13:20.123', ' 2023-11-14T22:13:20.123Z '].map(
      (s) => ({ s, ms: s, us: s, ns: s }),
    ),
    { s: new Date(-1), ms: new Date(-1), us: new Date(-1), ns: new Date(-1) },
    { s: null },
  ]
  const table = await roundTrip(fields, rows)
  const seconds = inUnit.s
  t.deepEqual(raw(table, 's'), [seconds, seconds, seconds, seconds, seconds, seconds, seconds, -1n, null], 'a Date is floored to whole seconds')
  for (const unit of ['ms', 'us', 'ns'] as const) {
    const v = inUnit[unit]
    const minusOneMs = { ms: -1n, us: -1000n, ns: -1_000_000n }[unit]
    t.deepEqual(raw(table, unit), [v, v, v, v, v, v, v, minusOneMs, null], unit)
  }
})

test('a string without an offset is read in the column time zone, with or without one', async (t) => {
  const fields = [
    f('none', new TimestampMillisecond()),
    f('utc', new TimestampMillisecond('UTC')),
    f('plus2', new TimestampMillisecond('+02:00')),
    f('paris', new TimestampMillisecond('Europe/Paris')),
  ]
  const table = await roundTrip(fields, [
    { none: '2023-11-14T22:13:20.123', utc: '2023-11-14T22:13:20.123', plus2: '2023-11-14T22:13:20.123', paris: '2023-11-14T22:13:20.123Z' },
    { none: new Date(MS), utc: new Date(MS), plus2: new Date(MS), paris: new Date(MS) },
    { none: MS, utc: MS, plus2: MS, paris: '2023-11-14T23:13:20.123+01:00' },
  ])
  t.deepEqual(raw(table, 'none'), [BigInt(MS), BigInt(MS), BigInt(MS)])
  t.deepEqual(raw(table, 'utc'), [BigInt(MS), BigInt(MS), BigInt(MS)])
  t.deepEqual(raw(table, 'plus2'), [BigInt(MS - 7_200_000), BigInt(MS), BigInt(MS)], 'wall-clock time at +02:00')
  t.deepEqual(raw(table, 'paris'), [BigInt(MS), BigInt(MS), BigInt(MS)], 'an instant is an instant in any zone')
  t.is((table.schema.fields[3]!.type as TimestampMillisecond).timezone, 'Europe/Paris')
})

test('Dates, numbers and ISO-8601 strings fill Date32 (days) and Date64 (milliseconds)', async (t) => {
  const day = Date.UTC(2024, 0, 2) // 2024-01-02, day 19724
  const table = await roundTrip(
    [f('d32', new DateDay()), f('d64', new DateMillisecond())],
    [
      { d32: new Date(day + 23 * 3600_000), d64: new Date(day) },
      { d32: 19724, d64: day },
      { d32: '2024-01-02', d64: '2024-01-02' },
      { d32: new Date(Date.UTC(1969, 11, 31, 12)), d64: BigInt(day) },
      { d32: 19724n, d64: null },
    ],
  )
  t.deepEqual(raw(table, 'd32'), [19724, 19724, 19724, -1, 19724], 'a Date is its UTC day')
  t.deepEqual(raw(table, 'd64').map((v) => (v === null ? null : Number(v))), [day, day, day, day, null])
})

test('numbers, bigints and time strings fill Time, and numbers Duration', async (t) => {
  const table = await roundTrip(
    [f('t', new TimeMillisecond()), f('d', new DurationMillisecond())],
    [
      { t: 49_530_250, d: 1500 },
      { t: '13:45:30.250', d: 2n },
    ],
  )
  t.deepEqual(raw(table, 't'), [49_530_250, 49_530_250])
  t.deepEqual(raw(table, 'd'), [1500n, 2n])
})

test('Buffers and Uint8Arrays (views included) fill Binary, LargeBinary and FixedSizeBinary', async (t) => {
  const backing = Uint8Array.from({ length: 40 }, (_, i) => i)
  const view = backing.subarray(3, 19) // 16 bytes at an offset
  const table = await roundTrip(
    [f('b', new Binary()), f('lb', new LargeBinary()), f('fb', new FixedSizeBinary(16))],
    [
      { b: Buffer.from('hello'), lb: Buffer.from('world'), fb: view },
      { b: new Uint8Array(0), lb: view, fb: Buffer.alloc(16, 7) },
      { b: null },
    ],
  )
  const bytes = (name: string) => values(table, name).map((v) => (v === null ? null : Array.from(v as Uint8Array)))
  t.deepEqual(bytes('b'), [[...Buffer.from('hello')], [], null])
  t.deepEqual(bytes('lb'), [[...Buffer.from('world')], Array.from(view), null])
  t.deepEqual(bytes('fb'), [Array.from(view), Array(16).fill(7), null])
})

test('a Float32Array or a number[] fills a FixedSizeList<Float32> embedding of 768 or 1536', async (t) => {
  const e768 = Float32Array.from({ length: 768 }, (_, i) => Math.sin(i))
  const e1536 = Float32Array.from({ length: 1536 }, (_, i) => Math.cos(i))
  const fields = [
    f('e768', new FixedSizeList(768, new Field('item', new Float32(), false))),
    f('e1536', new FixedSizeList(1536, new Field('item', new Float32(), true))),
  ]
  // A view at an offset into a larger buffer, too.
  const big = new Float32Array(2000).fill(9)
  big.set(e768, 100)
  const table = await roundTrip(fields, [
    { e768, e1536 },
    { e768: Array.from(e768), e1536: Array.from(e1536) },
    { e768: big.subarray(100, 868), e1536: null },
  ])
  const lists = (name: string) => values(table, name).map((v) => (v === null ? null : Array.from(v as Iterable<number>)))
  t.deepEqual(lists('e768'), [Array.from(e768), Array.from(e768), Array.from(e768)])
  t.deepEqual(lists('e1536'), [Array.from(e1536), Array.from(e1536), null])
})

test('arrays and typed arrays fill List and LargeList of numbers, strings and structs; typed arrays of another type are converted', async (t) => {
  const item = (type: DataType) => new Field('item', type, true)
  const fields = [
    f('f64', new List(item(new Float64()))),
    f('i32', new LargeList(item(new Int32()))),
    f('i64', new List(item(new Int64()))),
    f('u8', new List(item(new Uint8()))),
    f('f32', new List(item(new Float32()))),
    f('tags', new List(item(new Utf8()))),
    f('points', new List(item(new Struct([f('x', new Int32()), f('y', new Int32())])))),
  ]
  const table = await roundTrip(fields, [
    {
      f64: Float64Array.of(1.5, -2),
      i32: Int32Array.of(1, -2, 3),
      i64: BigInt64Array.of(-(2n ** 63n), 5n),
      u8: Uint8Array.of(1, 255),
      f32: Float64Array.of(0.5, 1e10), // converted element by element
      tags: ['a', null, 'b'],
      points: [{ x: 1, y: 2 }, null, { x: 3 }],
    },
    { f64: [1, 2], i32: [], i64: [1n, 2], u8: Int16Array.of(7), f32: Int32Array.of(3), tags: [], points: [] },
    {},
  ])
  const lists = (name: string) => values(table, name).map((v) => (v === null ? null : Array.from(v as Iterable<unknown>)))
  t.deepEqual(lists('f64'), [[1.5, -2], [1, 2], null])
  t.deepEqual(lists('i32'), [[1, -2, 3], [], null])
  t.deepEqual(lists('i64'), [[-(2n ** 63n), 5n], [1n, 2n], null])
  t.deepEqual(lists('u8'), [[1, 255], [7], null])
  t.deepEqual(lists('f32'), [[0.5, Math.fround(1e10)], [3], null])
  t.deepEqual(lists('tags'), [['a', null, 'b'], [], null])
  t.deepEqual(values(table, 'points'), [[{ x: 1, y: 2 }, null, { x: 3, y: null }], [], null])
})

test('nested objects fill structs recursively; null, undefined and missing keys are nulls at any depth', async (t) => {
  const inner = new Struct([f('x', new Int32(), false), f('label', new Utf8())])
  const fields = [
    f('id', new Int32(), false),
    f('meta', new Struct([f('source', new Utf8()), f('inner', inner), f('at', new TimestampMillisecond())])),
  ]
  const table = await roundTrip(fields, [
    { id: 1, meta: { source: 's', inner: { x: 1, label: 'l' }, at: new Date(MS) } },
    { id: 2, meta: { inner: { x: 2 } } },
    { id: 3, meta: { source: null, inner: null } },
    { id: 4, meta: null },
    { id: 5 },
    { id: 6, meta: Object.assign(Object.create(null) as object, { source: 'no prototype' }) },
  ])
  t.deepEqual(values(table, 'meta'), [
    { source: 's', inner: { x: 1, label: 'l' }, at: MS },
    { source: null, inner: { x: 2, label: null }, at: null },
    { source: null, inner: null, at: null },
    null,
    null,
    { source: 'no prototype', inner: null, at: null },
  ])
})

test('a field named like an Object.prototype member is null when the row lacks it', async (t) => {
  const table = await roundTrip(
    [f('toString', new Utf8()), f('constructor', new Int32()), f('valueOf', new Int32())],
    [{ toString: 'own' }, { constructor: 3 }, {}],
  )
  t.deepEqual(values(table, 'toString'), ['own', null, null])
  t.deepEqual(values(table, 'constructor'), [null, 3, null])
  t.deepEqual(values(table, 'valueOf'), [null, null, null])
})

test('ignoreUnknownFields: true skips keys that are not fields, at any depth', async (t) => {
  const fields = [f('id', new Int32(), false), f('meta', new Struct([f('a', new Int32())]))]
  const table = await roundTrip(fields, [{ id: 1, extra: 'x', meta: { a: 2, b: 3 } }], { ignoreUnknownFields: true })
  t.deepEqual(values(table, 'id'), [1])
  t.deepEqual(values(table, 'meta'), [{ a: 2 }])
})

test('a known key set to undefined is a null, not an unknown key', async (t) => {
  const table = await roundTrip([f('id', new Int32(), false), f('name', new Utf8())], [{ id: 1, name: undefined }])
  t.deepEqual(values(table, 'name'), [null])
})

test('a row whose getter puts to the same writer: both puts land with their own values, and later puts still read keys right', async (t) => {
  // The binding keeps the writer's field keys between puts; a put made while another reads its
  // rows must neither wait for it nor share its half-made keys.
  const schema = new Schema([f('id', new Int32(), false), f('name', new Utf8()), f('meta', new Struct([f('a', new Int32())]))])
  const w = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  let inner: Promise<unknown> | undefined
  const row = {
    id: 1,
    get name() {
      inner = w.put([{ id: 2, name: 'inner', meta: { a: 20 } }])
      return 'outer'
    },
    meta: { a: 10 },
  }
  await w.put([row])
  await inner
  await w.put([{ id: 3, name: 'after', meta: { a: 30 } }])
  const table = await w.scan()
  await w.close()
  const byId = new Map(Array.from(table, (r) => [r.id, [r.name, plain(r.meta)]]))
  t.deepEqual(Object.fromEntries(byId), { 1: ['outer', { a: 10 }], 2: ['inner', { a: 20 }], 3: ['after', { a: 30 }] })
})

test('an Array.prototype setter does not run while the binding makes its keys, and the keys stay right', async (t) => {
  // Pathological, but the binding keeps a writer's field keys in an array: a plain set of an
  // element would call a setter that Array.prototype has for that index (user code in the
  // middle of a put, here one that puts again) and leave the key undefined (a field read as
  // null). The binding defines its elements instead.
  const schema = new Schema([f('id', new Int32(), false), f('name', new Utf8())])
  const w = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  let inner: Promise<unknown> | undefined
  let backing: unknown
  Object.defineProperty(Array.prototype, '2', {
    configurable: true,
    get: () => backing,
    set(v: unknown) {
      backing = v
      inner ??= w.put([{ id: 2, name: 'inner' }])
    },
  })
  try {
    await w.put([{ id: 1, name: 'outer' }])
  } finally {
    delete (Array.prototype as unknown as Record<string, unknown>)['2']
  }
  await inner
  await w.put([{ id: 3, name: 'after' }])
  const table = await w.scan()
  await w.close()
  t.is(inner, undefined, 'no setter ran during the put')
  t.deepEqual(Object.fromEntries(Array.from(table, (r) => [r.id, r.name])), { 1: 'outer', 3: 'after' })
})

test('a put of 1,000 rows is one batch, in order, through put and putNoWait', async (t) => {
  const schema = new Schema([f('id', new Int32(), false), f('name', new Utf8())])
  const w = await ShardWriter.open(memoryLocation(), { schema, durableWrite: false })
  const rows = Array.from({ length: 1000 }, (_, i) => ({ id: i, name: `n${i}` }))
  const a = await w.put(rows)
  const b = await w.putNoWait(rows.slice(0, 10))
  t.deepEqual([a.batchPositions, b.result.batchPositions], [
    { start: 0, end: 1 },
    { start: 1, end: 2 },
  ])
  const table = await w.scan()
  t.deepEqual(values(table, 'id'), [...rows, ...rows.slice(0, 10)].map((r) => r.id))
  await w.close()
})

async function durableRowsSurviveReopen(t: ExecutionContext, method: 'put' | 'putNoWait') {
  const dir = tempDir(t)
  const schema = new Schema([f('id', new Int32(), false), f('ts', new TimestampMillisecond())])
  const w = await ShardWriter.open(dir, { schema })
  if (method === 'put') await w.put([{ id: 1, ts: new Date(MS) }, { id: 2 }])
  else await (await w.putNoWait([{ id: 1, ts: new Date(MS) }, { id: 2 }])).durable
  await w.abort() // as in a crash: only the WAL has the rows
  const back = await (await ShardReader.open(dir, { shardId: w.shardId })).scan()
  t.deepEqual(values(back, 'id'), [1, 2])
  t.deepEqual(raw(back, 'ts'), [BigInt(MS), null])
}

test('durable rows put with put are in the WAL when it resolves', durableRowsSurviveReopen, 'put')
test('durable rows put with putNoWait are in the WAL when durable resolves', durableRowsSurviveReopen, 'putNoWait')

test('rows typed by an interface type-check as put data', async (t) => {
  interface Event {
    id: number
    name?: string
  }
  const rows: readonly Event[] = [{ id: 1, name: 'a' }]
  const w = await ShardWriter.open(memoryLocation(), { schema: new Schema([f('id', new Int32(), false), f('name', new Utf8())]) })
  await w.put(rows) // (`npm run typecheck` is the check that matters here)
  await (await w.putNoWait(rows)).durable // (scan shows durable rows only, in durable mode)
  t.deepEqual(values(await w.scan(), 'name'), ['a', 'a'])
  await w.close()
})
