// Record batches as their column buffers, read by structure from any copy of apache-arrow
// (version 15 or newer): the way Tables and RecordBatches cross to the binding, with no IPC
// encoding in JavaScript (`columns.rs` in the binding rebuilds and validates the arrays).
//
// The walk is guided by the schema's plan (`arrow-schema.ts`), and each array's own type id
// must agree with it. Per array node it sends three words, length, offset and has-validity,
// and the node's buffers in a fixed order per type; a dictionary adds one word-triple holding
// its number of dictionary chunks (then the chunks), a view type one holding its number of
// data buffers. apache-arrow's layout, the same in versions 15 to 21 (its `Data.slice`): a
// node's offset applies to its validity bitmap (and a boolean's value bitmap); its other
// buffers are already sliced, its offsets holding `length + 1` entries from the slice; the
// children of variable-width nodes (lists, maps, dense unions) are not sliced, those of
// structs, fixed-size lists and sparse unions are. A missing buffer is sent empty: the
// binding's validation then rejects the array if its length needs one.
//
// Small buffers (up to PACK_LIMIT bytes, which is every buffer of a put of a few rows) are
// copied into one packed byte array, each at a 64-byte aligned offset, and the binding copies
// that once: V8 keeps typed arrays of up to 64 bytes (apache-arrow's usual buffer size for a
// few rows) on its heap, and handing each to Node-API made V8 move it to a new off-heap
// backing store first; with a reference and an allocation per buffer in Rust besides, that
// was about a fifth of a one-row Table put (13.8 µs before, 11.0 after). Larger buffers go as
// they are. The words and the packed bytes are written into arrays reused from put to put,
// which the binding copies before the put call returns.

import { describeValue } from './arguments.js'
import { type SchemaPlan, TYPE, type TypePlan } from './arrow-schema.js'
import { InvalidArgumentError } from './errors.js'

/**
 * A put's batches as column buffers (see the module comment): the schema's JSON description;
 * `words`, holding each batch's row count (`batches` of them), then three words per array node
 * in depth-first order (`nodes` words), then two per buffer in the nodes' order: its offset in
 * `packed` and its length, or `-(i + 1)` for `large[i]` and its length; the packed small
 * buffers; the large ones; and the rows and columns the caller passed (which the binding checks
 * it decoded). `words` and `packed` are views of arrays the next put reuses.
 */
export interface ColumnData {
  kind: 'columns'
  schema: Uint8Array
  words: Float64Array
  batches: number
  nodes: number
  packed: Uint8Array
  large: Uint8Array[]
  rows: number
  columns: number
}

/** Buffers up to this many bytes are packed (see the module comment). */
const PACK_LIMIT = 4096
/** The alignment of each packed buffer: Arrow's, enough for every value type. */
const PACK_ALIGN = 64

/**
 * Where a put's words and buffers gather: `number[]` arrays for the words (cheap to push to),
 * then one reused Float64Array and one reused byte array that grow as needed. Reused across
 * puts: `columnsOf` is synchronous and the binding copies both before the put call returns.
 */
class Gather {
  nodes: number[] = []
  spans: number[] = []
  large: Uint8Array[] = []
  packed = new Uint8Array(16 * 1024)
  used = 0

  /** Adds buffer `b`: packed if small, else passed as it is. */
  buffer(b: Uint8Array): void {
    const len = b.byteLength
    if (len > PACK_LIMIT) {
      this.large.push(b)
      this.spans.push(-this.large.length, len)
      return
    }
    const at = Math.ceil(this.used / PACK_ALIGN) * PACK_ALIGN
    if (at + len > this.packed.byteLength) {
      const grown = new Uint8Array(Math.max(this.packed.byteLength * 2, at + len))
      grown.set(this.packed.subarray(0, this.used))
      this.packed = grown
    }
    this.packed.set(b, at)
    this.used = at + len
    this.spans.push(at, len)
  }
}

let scratchWords = new Float64Array(256)

/** The fields of an apache-arrow `Data` that the walk reads (any version). */
interface DataLike {
  type?: { typeId?: unknown }
  length?: unknown
  offset?: unknown
  nullCount?: unknown
  nullBitmap?: unknown
  values?: unknown
  valueOffsets?: unknown
  typeIds?: unknown
  children?: unknown
  dictionary?: { data?: unknown }
  variadicBuffers?: unknown
}

const EMPTY = new Uint8Array(0)

/** The bytes of a typed array without a copy; empty for a missing buffer. */
function bytesOf(v: unknown): Uint8Array {
  if (v instanceof Uint8Array) return v
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
  return EMPTY
}

/** The error for a column whose arrays are not what its schema says. */
function badColumn(column: string, what: string): InvalidArgumentError {
  return new InvalidArgumentError(
    `column \`${column}\` ${what}; build the Table or RecordBatch with apache-arrow (tableFromArrays, vectorFromArray, makeData) or pass Arrow IPC bytes`,
  )
}

/** The child arrays of `d`, checked to be as many as `count`. */
function childrenOf(d: DataLike, count: number, column: string): unknown[] {
  const children = d.children
  if (!Array.isArray(children) || children.length < count) {
    throw badColumn(column, `has a nested array with ${Array.isArray(children) ? children.length : 'no'} children where ${count} are needed`)
  }
  return children
}

/** Appends the node of `data` (of type `plan`), its buffers and its descendants. */
function pushNode(plan: TypePlan, data: unknown, g: Gather, column: string): void {
  if (typeof data !== 'object' || data === null) {
    throw badColumn(column, `holds ${describeValue(data)} where apache-arrow Data was expected`)
  }
  const d = data as DataLike
  const typeId = plan.typeId
  if (d.type?.typeId !== typeId) {
    throw badColumn(column, `holds data of type id ${String(d.type?.typeId)} but its schema says ${plan.text}`)
  }
  // apache-arrow ignores the bitmap of an array whose null count is 0; unions have none.
  const bitmap = d.nullBitmap
  const validity =
    typeId !== TYPE.Union && ArrayBuffer.isView(bitmap) && bitmap.byteLength > 0 && d.nullCount !== 0
  g.nodes.push(Number(d.length), Number(d.offset), validity ? 1 : 0)
  if (validity) g.buffer(bytesOf(bitmap))
  switch (typeId) {
    case TYPE.Null:
      return
    case TYPE.Utf8:
    case TYPE.Binary:
    case TYPE.LargeUtf8:
    case TYPE.LargeBinary:
      g.buffer(bytesOf(d.valueOffsets))
      g.buffer(bytesOf(d.values))
      return
    case TYPE.Utf8View:
    case TYPE.BinaryView: {
      const variadic = Array.isArray(d.variadicBuffers) ? d.variadicBuffers : []
      g.buffer(bytesOf(d.values))
      g.nodes.push(variadic.length, 0, 0)
      for (const b of variadic) g.buffer(bytesOf(b))
      return
    }
    case TYPE.List:
    case TYPE.LargeList:
    case TYPE.Map:
      g.buffer(bytesOf(d.valueOffsets))
      pushNode(plan.children[0]!, childrenOf(d, 1, column)[0], g, column)
      return
    case TYPE.FixedSizeList:
      pushNode(plan.children[0]!, childrenOf(d, 1, column)[0], g, column)
      return
    case TYPE.Struct: {
      const children = childrenOf(d, plan.children.length, column)
      for (let i = 0; i < plan.children.length; i++) pushNode(plan.children[i]!, children[i], g, column)
      return
    }
    case TYPE.Union: {
      g.buffer(bytesOf(d.typeIds))
      if (plan.dense) g.buffer(bytesOf(d.valueOffsets))
      const children = childrenOf(d, plan.children.length, column)
      for (let i = 0; i < plan.children.length; i++) pushNode(plan.children[i]!, children[i], g, column)
      return
    }
    case TYPE.Dictionary: {
      // The dictionary is a Vector: one or more chunks, which the keys index as one.
      const chunks = d.dictionary?.data
      if (!Array.isArray(chunks) || chunks.length === 0) {
        throw badColumn(column, 'is dictionary-encoded but its array has no dictionary')
      }
      g.buffer(bytesOf(d.values))
      g.nodes.push(chunks.length, 0, 0)
      for (const chunk of chunks) pushNode(plan.values!, chunk, g, column)
      return
    }
    default:
      // Fixed-width values: Bool (a bitmap at the node's offset), Int, Float, Decimal, Date,
      // Time, Timestamp, Interval, Duration, FixedSizeBinary.
      g.buffer(bytesOf(d.values))
  }
}

/**
 * The column buffers of `batches` (each the struct `Data` of a RecordBatch whose schema is
 * `plan`; its length is the batch's row count). `rows` is the row count the caller's Table or
 * batches report, which the binding checks against the rows it decoded.
 *
 * @throws {InvalidArgumentError} if an array is not structured as apache-arrow Data of its
 * schema's type
 */
export function columnsOf(plan: SchemaPlan, batches: readonly object[], rows: number): ColumnData {
  // A fresh one if a getter of the data being read put again (the shared one is in use).
  const nested = gathering
  const g = nested ? new Gather() : gather
  g.nodes.length = 0
  g.spans.length = 0
  g.large = []
  g.used = 0
  gathering = true
  try {
    return gatherColumns(plan, batches, rows, g)
  } finally {
    gathering = nested
  }
}

function gatherColumns(plan: SchemaPlan, batches: readonly object[], rows: number, g: Gather): ColumnData {
  const width = plan.columns.length
  for (let b = 0; b < batches.length; b++) {
    const children = (batches[b] as DataLike).children
    if (!Array.isArray(children) || children.length !== width) {
      throw new InvalidArgumentError(
        `batch ${b} holds ${Array.isArray(children) ? children.length : 'no'} columns but its schema has ${width} fields (${plan.text}); build it with apache-arrow or pass Arrow IPC bytes`,
      )
    }
    for (let c = 0; c < width; c++) pushNode(plan.columns[c]!, children[c], g, plan.names[c]!)
  }
  const count = batches.length + g.nodes.length + g.spans.length
  let words = g === gather ? scratchWords : new Float64Array(count)
  if (words.length < count) words = scratchWords = new Float64Array(Math.max(words.length * 2, count))
  for (let b = 0; b < batches.length; b++) words[b] = Number((batches[b] as DataLike).length)
  words.set(g.nodes, batches.length)
  words.set(g.spans, batches.length + g.nodes.length)
  return {
    kind: 'columns',
    schema: plan.bytes,
    words: words.subarray(0, count),
    batches: batches.length,
    nodes: g.nodes.length,
    packed: g.packed.subarray(0, g.used),
    large: g.large,
    rows,
    columns: width,
  }
}

const gather = new Gather()
let gathering = false
