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

import { type SchemaPlan, TYPE, type TypePlan } from './arrow-schema.js'
import { InvalidArgumentError, describeValue } from './errors.js'

/**
 * A put's batches as column buffers (see the module comment): the schema's JSON description,
 * each batch's row count, three words per array node in depth-first order, the nodes' buffers,
 * and the rows and columns the caller passed (which the binding checks it decoded).
 */
export interface ColumnData {
  kind: 'columns'
  schema: Uint8Array
  batches: Float64Array
  nodes: Float64Array
  buffers: Uint8Array[]
  rows: number
  columns: number
}

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
function pushNode(plan: TypePlan, data: unknown, nodes: number[], buffers: Uint8Array[], column: string): void {
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
  nodes.push(Number(d.length), Number(d.offset), validity ? 1 : 0)
  if (validity) buffers.push(bytesOf(bitmap))
  switch (typeId) {
    case TYPE.Null:
      return
    case TYPE.Utf8:
    case TYPE.Binary:
    case TYPE.LargeUtf8:
    case TYPE.LargeBinary:
      buffers.push(bytesOf(d.valueOffsets), bytesOf(d.values))
      return
    case TYPE.Utf8View:
    case TYPE.BinaryView: {
      const variadic = Array.isArray(d.variadicBuffers) ? d.variadicBuffers : []
      buffers.push(bytesOf(d.values))
      nodes.push(variadic.length, 0, 0)
      for (const b of variadic) buffers.push(bytesOf(b))
      return
    }
    case TYPE.List:
    case TYPE.LargeList:
    case TYPE.Map:
      buffers.push(bytesOf(d.valueOffsets))
      pushNode(plan.children[0]!, childrenOf(d, 1, column)[0], nodes, buffers, column)
      return
    case TYPE.FixedSizeList:
      pushNode(plan.children[0]!, childrenOf(d, 1, column)[0], nodes, buffers, column)
      return
    case TYPE.Struct: {
      const children = childrenOf(d, plan.children.length, column)
      for (let i = 0; i < plan.children.length; i++) pushNode(plan.children[i]!, children[i], nodes, buffers, column)
      return
    }
    case TYPE.Union: {
      buffers.push(bytesOf(d.typeIds))
      if (plan.dense) buffers.push(bytesOf(d.valueOffsets))
      const children = childrenOf(d, plan.children.length, column)
      for (let i = 0; i < plan.children.length; i++) pushNode(plan.children[i]!, children[i], nodes, buffers, column)
      return
    }
    case TYPE.Dictionary: {
      // The dictionary is a Vector: one or more chunks, which the keys index as one.
      const chunks = d.dictionary?.data
      if (!Array.isArray(chunks) || chunks.length === 0) {
        throw badColumn(column, 'is dictionary-encoded but its array has no dictionary')
      }
      buffers.push(bytesOf(d.values))
      nodes.push(chunks.length, 0, 0)
      for (const chunk of chunks) pushNode(plan.values!, chunk, nodes, buffers, column)
      return
    }
    default:
      // Fixed-width values: Bool (a bitmap at the node's offset), Int, Float, Decimal, Date,
      // Time, Timestamp, Interval, Duration, FixedSizeBinary.
      buffers.push(bytesOf(d.values))
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
  const nodes: number[] = []
  const buffers: Uint8Array[] = []
  const lengths = new Float64Array(batches.length)
  const width = plan.columns.length
  for (let b = 0; b < batches.length; b++) {
    lengths[b] = Number((batches[b] as DataLike).length)
    const children = (batches[b] as DataLike).children
    if (!Array.isArray(children) || children.length !== width) {
      throw new InvalidArgumentError(
        `batch ${b} holds ${Array.isArray(children) ? children.length : 'no'} columns but its schema has ${width} fields (${plan.text}); build it with apache-arrow or pass Arrow IPC bytes`,
      )
    }
    for (let c = 0; c < width; c++) pushNode(plan.columns[c]!, children[c], nodes, buffers, plan.names[c]!)
  }
  return {
    kind: 'columns',
    schema: plan.bytes,
    batches: lengths,
    nodes: Float64Array.from(nodes),
    buffers,
    rows,
    columns: width,
  }
}
