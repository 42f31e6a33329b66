// Arrow data at the edge: what `put` accepts, encoded for the binding. A Table's batches go as
// column buffers where every column type allows it (no copy into an IPC stream; `columns.rs`
// in the binding reads them), otherwise as Arrow IPC stream bytes. An array of plain objects
// goes as it is (`rows.rs` in the binding converts it). Also the schema bytes of
// `ShardWriter.open`.

import { type Data, RecordBatch, Schema, Table, Type, tableToIPC } from 'apache-arrow'

import { InvalidArgumentError, SchemaMismatchError, describe } from './errors.js'

/**
 * What `put` accepts: an array of plain objects (one per row, converted in Rust against the
 * shard's schema), a Table, a RecordBatch, an array of RecordBatches, or Arrow IPC stream bytes.
 * (`readonly object[]` lets rows typed by an interface, which has no index signature, through.)
 */
export type PutData =
  | Record<string, unknown>[]
  | readonly object[]
  | Table
  | RecordBatch
  | RecordBatch[]
  | Uint8Array

/** A put's data as Arrow IPC stream bytes (any input), checked against `rows`/`columns`. */
export interface IpcData {
  kind: 'ipc'
  bytes: Uint8Array
  rows: number | null
  columns: number | null
}

/**
 * A put's batches as column buffers (the fast path for Tables; see `columns.rs` in the
 * binding): the schema as an IPC schema message, each batch's row count, three words per array
 * node in depth-first order (length, offset, has-validity), and the nodes' buffers.
 */
export interface ColumnData {
  kind: 'columns'
  schema: Uint8Array
  batches: Float64Array
  nodes: Float64Array
  buffers: Uint8Array[]
}

/**
 * Plain-object rows, handed over as they are: the binding reads them against the shard's
 * schema (see `rows.rs`). `keyCounts` holds each row's number of enumerable keys, which the
 * binding compares with the fields it found to detect an unknown key: counted here with
 * `for...in` (a few nanoseconds a row), since Node-API can only list an object's keys into a
 * new array (hundreds).
 */
export interface RowsData {
  kind: 'rows'
  rows: unknown[]
  keyCounts: Uint32Array
}

/** A put's data as the binding takes it: column buffers, IPC bytes, or rows. */
export type Encoded = IpcData | ColumnData | RowsData

/**
 * True for an array of rows: one whose first element is not a RecordBatch. Only the first is
 * looked at, so a put of rows costs JavaScript nothing per row; the binding checks that every
 * element is a plain object and names the first that is not.
 */
function isRows(data: unknown[]): boolean {
  return data.length > 0 && !(data[0] instanceof RecordBatch)
}

/** An array of rows for the binding, with each row's key count (see {@link RowsData}). */
function rowsOf(rows: unknown[]): RowsData {
  const keyCounts = new Uint32Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    let n = 0
    for (const _ in rows[i] as object) n++
    keyCounts[i] = n
  }
  return { kind: 'rows', rows, keyCounts }
}

/** A Table as column buffers if every column type allows it, else as IPC bytes. */
function encodeTable(table: Table): Encoded {
  return columnsOf(table.schema, table.batches) ?? ipcOf(table)
}

/** A Table as IPC stream bytes, with its row and column counts for the binding to check. */
function ipcOf(table: Table): IpcData {
  let bytes: Uint8Array
  try {
    bytes = tableToIPC(table, 'stream')
  } catch (e) {
    throw new InvalidArgumentError(
      `the Table could not be encoded as Arrow IPC (${(e as Error).message}). If two copies of apache-arrow are installed, align them to ^21.2 (npm ls apache-arrow) or pass IPC bytes`,
      { cause: e },
    )
  }
  return { kind: 'ipc', bytes, rows: table.numRows, columns: table.numCols }
}

/** Encoded schema messages, by Schema object: a put's Table usually shares its schema with many. */
const schemaMessages = new WeakMap<Schema, Uint8Array>()

/** The IPC schema message of `schema`, encoded once per Schema object. */
function schemaMessage(schema: Schema): Uint8Array {
  let bytes = schemaMessages.get(schema)
  if (bytes === undefined) {
    bytes = tableToIPC(new Table(schema), 'stream')
    schemaMessages.set(schema, bytes)
  }
  return bytes
}

/** The bytes of a typed array, without a copy. */
function view(a: ArrayBufferView): Uint8Array {
  return a instanceof Uint8Array ? a : new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

/**
 * Appends `data`'s node and buffers in the order `columns.rs` reads them. Returns false for
 * a type the fast path does not carry (the caller then encodes IPC instead).
 */
function pushNode(data: Data, nodes: number[], buffers: Uint8Array[]): boolean {
  const bitmap = data.nullBitmap as Uint8Array | undefined
  const hasValidity = data.nullCount !== 0 && bitmap !== undefined && bitmap.byteLength > 0
  nodes.push(data.length, data.offset, hasValidity ? 1 : 0)
  if (hasValidity) buffers.push(bitmap)
  const children = data.children as Data[]
  switch (data.type.typeId) {
    case Type.Null:
      return true
    case Type.Int:
    case Type.Float:
    case Type.Bool:
    case Type.Decimal:
    case Type.Date:
    case Type.Time:
    case Type.Timestamp:
    case Type.Interval:
    case Type.Duration:
    case Type.FixedSizeBinary:
      buffers.push(view(data.values))
      return true
    case Type.Utf8:
    case Type.Binary:
    case Type.LargeUtf8:
    case Type.LargeBinary:
      buffers.push(view(data.valueOffsets), view(data.values))
      return true
    case Type.List:
    case Type.LargeList:
    case Type.Map:
      buffers.push(view(data.valueOffsets))
      return pushNode(children[0]!, nodes, buffers)
    case Type.FixedSizeList:
      return pushNode(children[0]!, nodes, buffers)
    case Type.Struct:
      return children.every((c) => pushNode(c, nodes, buffers))
    case Type.Dictionary: {
      const dictionary = data.dictionary?.data
      if (dictionary === undefined || dictionary.length !== 1) return false
      buffers.push(view(data.values))
      return pushNode(dictionary[0]!, nodes, buffers)
    }
    default:
      return false
  }
}

/** The batches as column buffers; `null` if a column's type needs IPC. */
function columnsOf(schema: Schema, batches: RecordBatch[]): ColumnData | null {
  const nodes: number[] = []
  const buffers: Uint8Array[] = []
  for (const b of batches) {
    for (const child of b.data.children) {
      if (!pushNode(child, nodes, buffers)) return null
    }
  }
  return {
    kind: 'columns',
    schema: schemaMessage(schema),
    batches: Float64Array.from(batches, (b) => b.numRows),
    nodes: Float64Array.from(nodes),
    buffers,
  }
}

/** The bytes a put carries (what decides whether it is inserted on the JavaScript thread). */
export function encodedBytes(e: Encoded): number {
  if (e.kind === 'rows') return 0
  return e.kind === 'ipc' ? e.bytes.byteLength : e.buffers.reduce((n, b) => n + b.byteLength, 0)
}

/** A schema as error messages show it: `name: type [not null]`, comma-separated. */
function schemaText(s: Schema): string {
  return s.fields.map((f) => `${f.name}: ${String(f.type)}${f.nullable ? '' : ' not null'}`).join(', ')
}

/**
 * Encodes a put's data (checked to be {@link PutData}, whose batches must share one schema)
 * for the binding.
 */
export function encode(data: unknown): Encoded {
  if (data instanceof Uint8Array) {
    return { kind: 'ipc', bytes: data, rows: null, columns: null }
  }
  if (data instanceof Table) {
    return encodeTable(data)
  }
  if (data instanceof RecordBatch) {
    return encodeTable(new Table(data))
  }
  if (Array.isArray(data)) {
    if (isRows(data)) {
      return rowsOf(data)
    }
    if (data.length === 0) {
      throw new InvalidArgumentError(
        'Cannot write empty batch list or row array: nothing to write; pass at least one row (a plain object) or RecordBatch',
      )
    }
    // An index loop, not forEach: forEach skips the holes of a sparse array.
    for (let i = 0; i < data.length; i++) {
      if (!(data[i] instanceof RecordBatch)) {
        throw new InvalidArgumentError(`put expects RecordBatch elements, but element ${i} is ${describe(data[i])}`)
      }
    }
    const batches = data as RecordBatch[]
    const first = batches[0]!.schema
    batches.forEach((b, i) => {
      if (schemaText(b.schema) !== schemaText(first)) {
        throw new SchemaMismatchError(
          `batch ${i} has schema (${schemaText(b.schema)}) but batch 0 has (${schemaText(first)}); every batch of a put needs the shard's schema`,
        )
      }
    })
    return encodeTable(new Table(batches))
  }
  throw new InvalidArgumentError(
    `put expects an apache-arrow Table, RecordBatch, RecordBatch[] or Arrow IPC stream bytes (Uint8Array), or an array of plain objects (rows), got ${describe(data)}`,
  )
}

/** The shard schema of `ShardWriter.open` (checked to be a Schema) as an IPC schema message. */
export function schemaBytes(schema: unknown): Uint8Array {
  if (!(schema instanceof Schema)) {
    throw new InvalidArgumentError(`options.schema must be an apache-arrow Schema, got ${describe(schema)}`)
  }
  return schemaMessage(schema)
}
