// Arrow data at the edge: what `put` accepts, encoded for the binding, and the shard schema of
// `ShardWriter.open`. Tables and RecordBatches, from any copy of apache-arrow (version 15 or
// newer, CommonJS or ESM), are read by their structure (`arrow-schema.ts` for the schema,
// `arrow-columns.ts` for the column buffers) and never re-encoded as IPC here; Arrow IPC stream
// bytes go to the binding as they are, and an array of plain objects goes as it is (`rows.rs` in
// the binding converts it against the shard's schema). Each input is one `kind` of data object
// for the binding (`put_data.rs`); another input is one more kind.

import { describeValue } from './arguments.js'
import { type ColumnData, columnsOf } from './arrow-columns.js'
import { type ArrowSchema, schemaPlan } from './arrow-schema.js'
import { InvalidArgumentError, MemWalError, SchemaMismatchError } from './errors.js'

/**
 * The parts of an apache-arrow `RecordBatch` that memwal reads. A RecordBatch of any copy of
 * apache-arrow (version 15 or newer) fits.
 */
export interface ArrowRecordBatch {
  /** The batch's schema. */
  readonly schema: ArrowSchema
  /** The batch's rows as one struct array (apache-arrow `Data`). */
  readonly data: object
  /** The number of rows. */
  readonly numRows: number
}

/**
 * The parts of an apache-arrow `Table` that memwal reads. A Table of any copy of apache-arrow
 * (version 15 or newer) fits.
 */
export interface ArrowTable {
  /** The table's schema. */
  readonly schema: ArrowSchema
  /** The table's batches (chunks), in row order. */
  readonly batches: readonly ArrowRecordBatch[]
  /** The number of rows. */
  readonly numRows: number
}

/**
 * What `put` accepts: an array of plain objects (one per row, converted in Rust against the
 * shard's schema), an apache-arrow Table, a RecordBatch, an array of RecordBatches (from any
 * copy of apache-arrow, version 15 or newer), or Arrow IPC stream bytes.
 * (`readonly object[]` lets rows typed by an interface, which has no index signature, through.)
 */
export type PutData =
  | Record<string, unknown>[]
  | readonly object[]
  | ArrowTable
  | ArrowRecordBatch
  | readonly ArrowRecordBatch[]
  | Uint8Array

/** A put's data as Arrow IPC stream bytes, passed by the caller. */
export interface IpcData {
  kind: 'ipc'
  bytes: Uint8Array
}

export type { ColumnData }

/**
 * Plain-object rows, handed over as they are: the binding reads them against the shard's
 * schema (see `rows.rs`). `keyCounts` holds each row's number of enumerable keys, which the
 * binding compares with the fields it found to detect an unknown key: counted here with
 * `for...in` (a few nanoseconds a row), since Node-API can only list an object's keys into a
 * new array (hundreds). One row's count is a plain number.
 */
export interface RowsData {
  kind: 'rows'
  rows: unknown[]
  keyCounts: Uint32Array | number
}

/** A put's data as the binding takes it: column buffers, IPC bytes, or rows. */
export type Encoded = IpcData | ColumnData | RowsData

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null

/** A Table of any apache-arrow copy: a schema and an array of batches. */
const isTable = (v: unknown): v is ArrowTable => isObject(v) && isObject(v.schema) && Array.isArray(v.batches)

/** A RecordBatch of any apache-arrow copy: a schema and its rows as one struct array. */
const isRecordBatch = (v: unknown): v is ArrowRecordBatch =>
  isObject(v) && !Array.isArray(v) && isObject(v.schema) && isObject(v.data) && !Array.isArray(v.data)

/**
 * True for an array of rows: one whose first element is not a RecordBatch. Only the first is
 * looked at, so a put of rows costs JavaScript nothing per row; the binding checks that every
 * element is a plain object and names the first that is not.
 */
const isRows = (data: unknown[]): boolean => data.length > 0 && !isRecordBatch(data[0])

/**
 * An array of rows for the binding, with each row's key count (see {@link RowsData}); the count
 * of a lone row is a number, which spares the put a typed array.
 */
function rowsData(rows: unknown[]): RowsData {
  // `for...in` runs the row's code, if it has any: a Proxy's `ownKeys` trap, for one. One try
  // around the whole loop costs the happy path nothing, and `i` still names the row that threw.
  let i = 0
  try {
    if (rows.length === 1) {
      let n = 0
      for (const _ in rows[0] as object) n++
      return { kind: 'rows', rows, keyCounts: n }
    }
    const keyCounts = new Uint32Array(rows.length)
    for (; i < rows.length; i++) {
      let n = 0
      for (const _ in rows[i] as object) n++
      keyCounts[i] = n
    }
    return { kind: 'rows', rows, keyCounts }
  } catch (e) {
    throw new InvalidArgumentError(
      `row ${i}: the row object threw while its keys were read: ${messageOf(e)}; pass plain objects (a Proxy's ownKeys trap must not throw)`,
      { cause: e },
    )
  }
}

/** What `e` says, for a message; never throws. */
function messageOf(e: unknown): string {
  try {
    return e instanceof Error ? e.message : String(e)
  } catch {
    return describeValue(e)
  }
}

/** The `numRows` of a batch or Table, checked to be a count. */
function rowsOf(data: { numRows: unknown }, what: string): number {
  const rows = data.numRows
  if (typeof rows !== 'number' || !Number.isSafeInteger(rows) || rows < 0) {
    throw new InvalidArgumentError(`${what} has ${describeValue(rows)} rows; pass an apache-arrow Table or RecordBatch`)
  }
  return rows
}

/**
 * A Table's batches as column buffers. Its empty batches are skipped: how apache-arrow chunks
 * a Table is not the caller's choice, and they hold nothing to write.
 */
function encodeTable(table: ArrowTable): ColumnData {
  const plan = schemaPlan(table.schema, "the Table's schema")
  const datas: object[] = []
  table.batches.forEach((b, i) => {
    if (!isRecordBatch(b)) {
      throw new InvalidArgumentError(`batch ${i} of the Table is ${describeValue(b)}, not a RecordBatch; pass an apache-arrow Table`)
    }
    if (rowsOf(b, `batch ${i} of the Table`) > 0) datas.push(b.data)
  })
  // The Table's own count, which the binding checks against what it decoded from the batches.
  const rows = rowsOf(table, 'the Table')
  if (datas.length === 0 || rows === 0) {
    throw new InvalidArgumentError('the Table has 0 rows: there is nothing to write; put a Table with at least one row')
  }
  return columnsOf(plan, datas, rows)
}

/**
 * Batches of one put as column buffers. They must share one schema (as memwal describes it:
 * dictionary ids do not count). An empty batch is refused unless every batch is empty (then
 * there is nothing to write): `batchPositions` count the caller's batches.
 */
function encodeBatches(batches: readonly unknown[]): ColumnData {
  if (batches.length === 0) {
    throw new InvalidArgumentError(
      'Cannot write empty batch list or row array: nothing to write; pass at least one row (a plain object) or RecordBatch',
    )
  }
  // An index loop, not forEach: forEach skips the holes of a sparse array.
  for (let i = 0; i < batches.length; i++) {
    if (!isRecordBatch(batches[i])) {
      throw new InvalidArgumentError(`put expects RecordBatch elements, but element ${i} is ${describeValue(batches[i])}`)
    }
  }
  const list = batches as readonly ArrowRecordBatch[]
  const plan = schemaPlan(list[0]!.schema, "batch 0's schema")
  const rows = list.map((b, i) => rowsOf(b, `batch ${i}`))
  const total = rows.reduce((a, b) => a + b, 0)
  if (total === 0) {
    const what = list.length === 1 ? 'the RecordBatch has 0 rows' : `all ${list.length} batches have 0 rows`
    throw new InvalidArgumentError(`${what}: there is nothing to write; put at least one row`)
  }
  list.forEach((b, i) => {
    const p = b.schema === list[0]!.schema ? plan : schemaPlan(b.schema, `batch ${i}'s schema`)
    if (p.json !== plan.json) {
      throw new SchemaMismatchError(
        `batch ${i} has schema (${p.text}) but batch 0 has (${plan.text}); every batch of a put needs the shard's schema`,
      )
    }
    if (rows[i] === 0) {
      throw new InvalidArgumentError(
        `Batch ${i} is empty (0 rows); remove empty batches before put (a Table's empty batches are skipped)`,
      )
    }
  })
  return columnsOf(
    plan,
    list.map((b) => b.data),
    total,
  )
}

/**
 * Encodes a put's data (checked to be {@link PutData}) for the binding.
 *
 * @throws {InvalidArgumentError} for anything else, for no rows, or for a Table or RecordBatch
 * whose structure is not apache-arrow's
 * @throws {SchemaMismatchError} for batches of different schemas
 */
export function encode(data: unknown): Encoded {
  if (data instanceof Uint8Array) {
    return { kind: 'ipc', bytes: data }
  }
  try {
    if (isTable(data)) return encodeTable(data)
    if (isRecordBatch(data)) return encodeBatches([data])
    if (Array.isArray(data)) return isRows(data) ? rowsData(data) : encodeBatches(data)
  } catch (e) {
    // A getter of a malformed object (a Table-like whose parts throw) must not surface as a
    // raw TypeError: what was passed is not a put input.
    if (e instanceof MemWalError) throw e
    throw new InvalidArgumentError(
      `put could not read ${describeValue(data)} as apache-arrow data (${(e as Error)?.message ?? String(e)}); pass an apache-arrow Table, RecordBatch or RecordBatch[] (apache-arrow 15 or newer), or Arrow IPC stream bytes`,
      { cause: e },
    )
  }
  throw new InvalidArgumentError(
    `put expects an apache-arrow Table, RecordBatch, RecordBatch[] or Arrow IPC stream bytes (Uint8Array), or an array of plain objects (rows), got ${describeValue(data)}`,
  )
}

/**
 * The shard schema of `ShardWriter.open` (any apache-arrow copy's Schema) as the JSON
 * description the binding parses.
 *
 * @throws {InvalidArgumentError} if `schema` is not structured as an apache-arrow Schema
 */
export function schemaBytes(schema: unknown): Uint8Array {
  if (!isObject(schema) || !Array.isArray(schema.fields)) {
    throw new InvalidArgumentError(`options.schema must be an apache-arrow Schema, got ${describeValue(schema)}`)
  }
  try {
    return schemaPlan(schema, 'options.schema').bytes
  } catch (e) {
    if (e instanceof MemWalError) throw e
    throw new InvalidArgumentError(`options.schema could not be read as an apache-arrow Schema (${(e as Error)?.message ?? String(e)})`, {
      cause: e,
    })
  }
}
