// Plain-object rows that do not fit the shard's schema: every rejection is INVALID_ARGUMENT,
// names the row, the field (a dotted path for nested fields) and what was expected and got,
// rejects the whole put (nothing is written) and leaves the writer working. Also the arrays
// that are not rows, unknown keys, and schema types plain objects cannot fill.

import test, { type ExecutionContext } from 'ava'
import {
  Binary,
  Bool,
  type DataType,
  DateDay,
  DateMillisecond,
  Decimal,
  Dictionary,
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
  IntervalDayTime,
  List,
  Map_,
  Schema,
  Struct,
  TimestampMillisecond,
  TimestampNanosecond,
  Uint8,
  Uint16,
  Uint32,
  Uint64,
  Utf8,
  tableFromArrays,
} from 'apache-arrow'

import { InvalidArgumentError, ShardWriter } from '../index'
import { memoryLocation } from './support/helpers'

const f = (name: string, type: DataType, nullable = true) => new Field(name, type, nullable)

const PUTS = ['put', 'putNoWait'] as const

/**
 * A bad put: the fields of the shard, the rows, the message the put must reject with, and a
 * row that fits (`null`: none does; by default `{}` if every field is nullable).
 */
type BadRows = [fields: Field[], rows: unknown[], message: RegExp | string, good?: object | null]

/** Escapes `s` for a RegExp matching it literally. */
const literal = (s: string) => new RegExp(s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))

/**
 * Each case rejects with INVALID_ARGUMENT and its message through put and putNoWait, on a
 * writer of its fields holding one good row, which still holds just that row afterwards and
 * takes another good row.
 */
async function assertRejected(t: ExecutionContext, cases: BadRows[], durableWrite = false): Promise<void> {
  for (const [fields, rows, message, goodRow] of cases) {
    // No ticker: the WAL is appended only by flush() (and durable puts), so a count can be exact.
    const schema = new Schema(fields)
    const w = await ShardWriter.open(memoryLocation(), { schema, durableWrite, maxWalFlushIntervalMs: null })
    try {
      const good = goodRow === undefined ? (fields.every((x) => x.nullable) ? {} : null) : goodRow
      if (good !== null) await w.put([good])
      await w.flush()
      const before = (await w.scan()).numRows
      const appended = (await w.walStats()).entriesAppended
      for (const method of PUTS) {
        const p = method === 'put' ? w.put(rows as never) : w.putNoWait(rows as never)
        await t.throwsAsync(
          p,
          { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message: typeof message === 'string' ? literal(message) : message },
          `${method}: ${String(message)}`,
        )
      }
      t.is((await w.scan()).numRows, before, `nothing of ${String(message)} was written`)
      t.is((await w.walStats()).entriesAppended, appended, 'nothing was appended to the WAL')
      if (good !== null) {
        await w.put([good])
        t.is((await w.scan()).numRows, before + 1, 'the writer keeps working')
      }
    } finally {
      await w.abort()
    }
  }
}

test('integers out of range, fractional, NaN or not numbers are rejected naming row, field, expected and got', async (t) => {
  const widths: Array<[DataType, string, string]> = [
    [new Int8(), '-128', '127'],
    [new Int16(), '-32768', '32767'],
    [new Int32(), '-2147483648', '2147483647'],
    [new Int64(), '-9223372036854775808', '9223372036854775807'],
    [new Uint8(), '0', '255'],
    [new Uint16(), '0', '65535'],
    [new Uint32(), '0', '4294967295'],
    [new Uint64(), '0', '18446744073709551615'],
  ]
  const cases: BadRows[] = []
  for (const [type, min, max] of widths) {
    const expected = `expected ${String(type).startsWith('Int') ? 'an' : 'a'} ${String(type).replace('Uint', 'UInt')} as an integer number or a bigint`
    const fields = [f('n', type)]
    const range = `(out of range: ${min} to ${max})`
    const above = BigInt(max) + 1n
    const below = BigInt(min) - 1n
    cases.push(
      // (Past Int64's minimum and UInt64's maximum, a bigint is out of every 64-bit range.)
      [fields, [{ n: 1 }, { n: above }], `row 1, field "n": ${expected}; got bigint ${above}n ${above >= 2n ** 64n ? '(out of the 64-bit range)' : range}`],
      [fields, [{ n: below }], `row 0, field "n": ${expected}; got bigint ${below}n ${below < -(2n ** 63n) ? '(out of the 64-bit range)' : range}`],
      [fields, [{ n: 1.5 }], `row 0, field "n": ${expected}; got number 1.5 (not an integer)`],
      [fields, [{ n: Number.NaN }], `got number NaN (not an integer)`],
      [fields, [{ n: Number.POSITIVE_INFINITY }], `got number Infinity (not an integer)`],
      [fields, [{ n: '5' }], `row 0, field "n": ${expected}; got "5"`],
      [fields, [{ n: true }], `got boolean true`],
    )
    if (Number(above) <= 2 ** 53) cases.push([fields, [{ n: Number(above) }], `got number ${above} ${range}`])
  }
  await assertRejected(t, cases)
})

test('floats that overflow their width, and values of the wrong kind, are rejected', async (t) => {
  await assertRejected(t, [
    [[f('x', new Float32())], [{ x: 1e39 }], 'row 0, field "x": expected a Float32 as a number or a bigint; got number 1e+39 (out of the range of 32-bit floats)'],
    [[f('x', new Float16())], [{ x: 70000 }], 'got number 70000 (out of the range of 16-bit floats (±65504))'],
    [[f('x', new Float64())], [{ x: '1.5' }], 'expected a Float64 as a number or a bigint; got "1.5"'],
    [[f('b', new Bool())], [{ b: 1 }], 'row 0, field "b": expected a Boolean as a boolean; got number 1'],
    [[f('s', new Utf8())], [{ s: 5 }], 'row 0, field "s": expected a Utf8 as a string; got number 5'],
    [[f('s', new Utf8())], [{ s: Buffer.from('x') }], 'got a Buffer of 1 bytes'],
    [[f('s', new Dictionary(new Utf8(), new Int32()))], [{ s: null }, { s: {} }], 'row 1, field "s": expected a Dictionary(Int32, Utf8) as a string; got an object (Object)'],
  ])
})

test('timestamps and dates that cannot be read are rejected, naming the unit and what was got', async (t) => {
  const ts = [f('ts', new TimestampMillisecond())]
  const expected = 'expected a Timestamp(ms) as a Date, an epoch number of milliseconds or an ISO-8601 string'
  await assertRejected(t, [
    [ts, [{ ts: 1 }, { ts: 2 }, { ts: 3 }, { ts: 'abc' }], `row 3, field "ts": ${expected}; got "abc" (not an ISO-8601 date-time)`],
    [ts, [{ ts: new Date(Number.NaN) }], `got an invalid Date (an invalid Date)`],
    [ts, [{ ts: 1.5 }], `${expected}; got number 1.5 (not an integer)`],
    [ts, [{ ts: {} }], `${expected}; got an object (Object)`],
    [ts, [{ ts: '2024-13-01T00:00:00Z' }], 'not an ISO-8601 date-time'],
    [
      [f('ts', new TimestampNanosecond())],
      [{ ts: new Date('2300-01-01T00:00:00Z') }],
      /got a Date \(10413792000000 ms since the epoch\) \(out of the range of nanoseconds since the epoch in 64 bits\)/,
    ],
    [
      [f('ts', new TimestampMillisecond('Europe/Paris'))],
      [{ ts: '2024-05-01T12:00:00' }],
      /a time without an offset, which memwal cannot place in the zone "Europe\/Paris"; add the offset/,
    ],
    [[f('d', new DateDay())], [{ d: '2024-02-30' }], 'row 0, field "d": expected a Date32 as a Date, a number of days since 1970-01-01 or an ISO-8601 date string; got "2024-02-30" (not an ISO-8601 date)'],
    [[f('d', new DateMillisecond())], [{ d: true }], 'expected a Date64 as a Date, an epoch number of milliseconds or an ISO-8601 date string; got boolean true'],
  ])
})

test('bytes, embeddings and lists of the wrong kind or length are rejected, naming the element', async (t) => {
  const e = [f('e', new FixedSizeList(4, new Field('item', new Float32(), false)))]
  const expectedE = 'expected a FixedSizeList(4 x non-null Float32) as an array or a typed array of 4 elements'
  await assertRejected(t, [
    [[f('b', new Binary())], [{ b: 'text' }], 'row 0, field "b": expected a Binary as a Buffer or Uint8Array; got "text"'],
    [[f('b', new Binary())], [{ b: Uint16Array.of(1) }], 'got a Uint16Array of length 1'],
    [[f('b', new FixedSizeBinary(16))], [{ b: Buffer.alloc(3) }], 'expected a FixedSizeBinary(16) as a Buffer or Uint8Array of 16 bytes; got a Buffer of 3 bytes (3 bytes, not 16)'],
    [e, [{ e: Float32Array.of(1, 2, 3) }], `row 0, field "e": ${expectedE}; got a Float32Array of length 3 (3 elements, not 4)`],
    [e, [{ e: [1, 2, 3, 4, 5] }], 'got an array of length 5 (5 elements, not 4)'],
    [e, [{ e: 'abcd' }], `${expectedE}; got "abcd"`],
    [e, [{ e: [1, 2, 'x', 4] }], 'row 0, field "e[2]": expected a Float32 as a number or a bigint; got "x"'],
    [e, [{ e: [1, null, 3, 4] }], 'row 0, field "e[1]": expected a Float32 as a number or a bigint; got null (the field is not nullable)'],
    [e, [{ e: Float64Array.of(1, 1e39, 3, 4) }], 'field "e[1]": expected a Float32 as a number or a bigint; got Float64Array element 1e+39 (out of the range of 32-bit floats)'],
    [[f('l', new List(new Field('item', new Int8(), true)))], [{ l: Int32Array.of(1, 300) }], 'field "l[1]": expected an Int8 as an integer number or a bigint; got Int32Array element 300 (out of range: -128 to 127)'],
    [[f('l', new List(new Field('item', new Utf8(), true)))], [{ l: Float32Array.of(1) }], 'field "l[0]": expected a Utf8 as a string; got number 1'],
  ])
})

test('nested values are rejected with the dotted path of their field, and non-nullable fields refuse null, undefined and missing keys', async (t) => {
  const inner = new Struct([f('x', new Int32(), false)])
  const nested = [f('id', new Int32(), false), f('meta', new Struct([f('inner', inner), f('points', new List(new Field('item', inner, true)))]))]
  const notNull = 'expected an Int32 as an integer number or a bigint; got'
  await assertRejected(t, [
    [nested, [{ id: 1, meta: { inner: { x: 'a' } } }], 'row 0, field "meta.inner.x": expected an Int32 as an integer number or a bigint; got "a"', { id: 1 }],
    [nested, [{ id: 1, meta: { inner: {} } }], `row 0, field "meta.inner.x": ${notNull} undefined (the field is not nullable)`, { id: 1 }],
    [nested, [{ id: 1, meta: { points: [{ x: 1 }, { x: null }] } }], `row 0, field "meta.points[1].x": ${notNull} null (the field is not nullable)`, { id: 1 }],
    [nested, [{ id: 1, meta: 5 }], 'row 0, field "meta": expected a Struct as a plain object (fields: inner, points); got number 5', { id: 1 }],
    [nested, [{ id: 1, meta: [] }], 'got an array of length 0', { id: 1 }],
    [nested, [{ id: 1, meta: new Date(0) }], 'got a Date (0 ms since the epoch)', { id: 1 }],
    [nested, [{ id: 1, meta: new (class Meta {})() }], 'got an object (Meta)', { id: 1 }],
    [nested, [{ id: 1 }, { id: null }], `row 1, field "id": ${notNull} null (the field is not nullable)`, { id: 1 }],
    [nested, [{ id: 1 }, { id: undefined }], `row 1, field "id": ${notNull} undefined (the field is not nullable)`, { id: 1 }],
    [nested, [{ id: 1 }, {}], `row 1, field "id": ${notNull} undefined (the field is not nullable)`, { id: 1 }],
  ])
})

test('a key that is not a field is rejected naming it, at any depth, unless ignoreUnknownFields', async (t) => {
  const fields = [f('id', new Int32()), f('meta', new Struct([f('a', new Int32())]))]
  await assertRejected(t, [
    [fields, [{ id: 1 }, { id: 2, ident: 3 }], /^row 1: unknown key "ident": the shard's schema has no such field \(its fields: id, meta\)\. Fix the key, or open the writer with ignoreUnknownFields: true/],
    [fields, [{ meta: { a: 1, b: 2 } }], 'row 0: unknown key "meta.b": the struct "meta" has no such field (its fields: a)'],
    [fields, [{ id: 1, 7: 'x' }], 'row 0: unknown key "7"'],
  ])
})

test('more distinct strings than a dictionary key numbers are rejected at the first that does not fit', async (t) => {
  const rows = Array.from({ length: 200 }, (_, i) => ({ s: `v${i}` }))
  await assertRejected(t, [
    [[f('s', new Dictionary(new Utf8(), new Int8()))], rows, 'row 128, field "s": more distinct strings than a Int8 key can number; widen the dictionary\'s key type'],
  ])
})

test('a getter that throws rejects the put with its message', async (t) => {
  const row = Object.defineProperty({}, 'id', {
    enumerable: true,
    get() {
      throw new Error('boom')
    },
  })
  await assertRejected(t, [[[f('id', new Int32())], [{ id: 1 }, row], 'row 1, field "id": reading the value threw: boom']])
})

test('a row (or struct value) whose keys cannot be read rejects the put naming the row and what was thrown', async (t) => {
  const keysThrow = (target: object) =>
    new Proxy(target, {
      ownKeys() {
        throw new Error('no keys for you')
      },
    })
  await assertRejected(t, [
    [[f('id', new Int32())], [keysThrow({ id: 1 })], 'row 0: the row object threw while its keys were read: no keys for you'],
    [[f('id', new Int32())], [{ id: 1 }, { id: 2 }, keysThrow({ id: 3 })], 'row 2: the row object threw while its keys were read: no keys for you'],
    [
      [f('s', new Struct([f('a', new Int32())]))],
      [{ s: { a: 1 } }, { s: keysThrow({ a: 2 }) }],
      'row 1, field "s": the object threw while its keys were read: no keys for you',
    ],
  ])
})

test('rows are rejected in durable mode too, and nothing reaches the WAL', async (t) => {
  await assertRejected(t, [[[f('id', new Int32())], [{ id: 1 }, { id: 'x' }], 'row 1, field "id"']], true)
})

test('an empty array, and an array whose elements are not all plain objects, are rejected naming the element', async (t) => {
  const fields = [f('id', new Int32())]
  const batch = tableFromArrays({ id: Int32Array.of(1) }).batches[0]!
  const notRows: Array<[unknown, string]> = [
    [5, 'number 5'],
    ['x', '"x"'],
    [null, 'null'],
    [undefined, 'undefined'],
    [[], 'an array of length 0'],
    [new Date(0), 'a Date (0 ms since the epoch)'],
    [Buffer.from('x'), 'a Buffer of 1 bytes'],
    [new Map(), 'an object (Map)'],
    [new (class Row {})(), 'an object (Row)'],
  ]
  const cases: BadRows[] = [[fields, [], 'Cannot write empty batch list or row array: nothing to write']]
  for (const [v, got] of notRows) {
    cases.push([fields, [v], `put expects an array of plain objects (one per row) or of RecordBatches, but element 0 is ${got}`])
    cases.push([fields, [{ id: 1 }, { id: 2 }, v], `put got an array of rows (element 0 is a plain object), but element 2 is ${got}; every element must be a plain object (rows and RecordBatches cannot be mixed in one put)`])
  }
  cases.push([fields, [{ id: 1 }, batch], 'but element 1 is an object (RecordBatch); every element must be a plain object (rows and RecordBatches cannot be mixed'])
  cases.push([fields, [batch, { id: 1 }], 'put expects RecordBatch elements, but element 1 is an object (Object)'])
  await assertRejected(t, cases)
})

test('a field of a type plain objects cannot fill is rejected naming it and pointing to Tables', async (t) => {
  const entries = new Field('entries', new Struct([f('key', new Utf8(), false), f('value', new Int32())]), false)
  const table = 'which memwal cannot fill from plain objects; put an apache-arrow Table or RecordBatch of the shard\'s schema instead'
  await assertRejected(t, [
    [[f('id', new Int32()), f('iv', new IntervalDayTime())], [{ id: 1 }], `field "iv" has type Interval(DayTime), ${table}`, null],
    [[f('d', new Decimal(2, 10, 128))], [{ d: 1 }], `field "d" has type Decimal128(10, 2), ${table}`, null],
    [[f('m', new Map_(entries))], [{ m: {} }], /field "m" has type Map\(.*\), which memwal cannot fill from plain objects/, null],
    [[f('s', new Struct([f('deep', new Struct([f('iv', new IntervalDayTime())]))]))], [{}], /field "s\.deep\.iv" has type Interval\(DayTime\)/, null],
    [[f('l', new List(new Field('item', new IntervalDayTime(), true)))], [{}], /field "l" has type Interval\(DayTime\)/, null],
    [[f('k', new Dictionary(new Int32(), new Int8()))], [{}], `field "k" has type Dictionary(Int8, Int32), which memwal cannot fill from plain objects (only dictionaries of Utf8 or LargeUtf8 values are filled, not of Int32)`, null],
  ])
})
