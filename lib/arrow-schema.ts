// An apache-arrow Schema read by its structure, from any copy of apache-arrow (version 15 or
// newer, CommonJS or ESM): field names, nullability, metadata, and each type's type id and
// attributes. Never `instanceof`, never the copy's visitors or its IPC writer, so a Schema from
// another copy (a second version in the tree, or the same version loaded once through `import`
// and once through `require`) reads the same as one of memwal's own.
//
// The result goes to the binding as JSON (`crates/memwal-node/src/schema.rs` rebuilds the
// `arrow_schema::Schema`) and drives the column walk of `arrow-columns.ts`. It is built once per
// Schema object (a put's Table usually shares its Schema with many others). Dictionary ids are
// left out: apache-arrow gives every Dictionary type it creates a new id, and arrow-rs types
// carry none, so two Tables built alike describe the same.

import { describeValue } from './arguments.js'
import { InvalidArgumentError } from './errors.js'

/**
 * The parts of an apache-arrow `DataType` that memwal reads. Any copy of apache-arrow (version
 * 15 or newer) fits.
 */
export interface ArrowDataType {
  /** apache-arrow's `Type` of the data type (`Type.Int`, `Type.Utf8`, …). */
  readonly typeId: number
}

/** The parts of an apache-arrow `Field` that memwal reads (any copy, version 15 or newer). */
export interface ArrowField {
  /** The field's name. */
  readonly name: string
  /** The field's data type. */
  readonly type: ArrowDataType
  /** Whether the field may hold nulls. */
  readonly nullable: boolean
  /** Custom metadata of the field. */
  readonly metadata?: ReadonlyMap<string, string>
}

/** The parts of an apache-arrow `Schema` that memwal reads (any copy, version 15 or newer). */
export interface ArrowSchema {
  /** The fields, in column order. */
  readonly fields: readonly ArrowField[]
  /** Custom metadata of the schema. */
  readonly metadata?: ReadonlyMap<string, string>
}

/**
 * How one type's arrays are walked (`arrow-columns.ts`): its type id, the plans of its
 * children, and for a dictionary the plan of its values. Mirrors the JSON description.
 */
export interface TypePlan {
  readonly typeId: number
  /** The type as apache-arrow prints it, for error messages. */
  readonly text: string
  readonly children: readonly TypePlan[]
  /** The value type of a dictionary. */
  readonly values: TypePlan | null
  /** A dense union (its arrays carry value offsets). */
  readonly dense: boolean
}

/** A Schema as the binding and the column walk take it. */
export interface SchemaPlan {
  /** The JSON description (UTF-8) that `schema.rs` in the binding parses. */
  readonly bytes: Uint8Array
  /** The same JSON as a string: two Schemas are the same to memwal if these are equal. */
  readonly json: string
  /** One plan per field, in column order. */
  readonly columns: readonly TypePlan[]
  /** The field names, in column order. */
  readonly names: readonly string[]
  /** The schema as error messages show it: `name: type [not null]`, comma-separated. */
  readonly text: string
}

/**
 * apache-arrow's `Type` ids (the Arrow format's, plus -1 for a dictionary), named as the
 * binding's description names them. The same in every apache-arrow version.
 */
const KINDS: ReadonlyMap<number, string> = new Map([
  [1, 'Null'],
  [2, 'Int'],
  [3, 'Float'],
  [4, 'Binary'],
  [5, 'Utf8'],
  [6, 'Bool'],
  [7, 'Decimal'],
  [8, 'Date'],
  [9, 'Time'],
  [10, 'Timestamp'],
  [11, 'Interval'],
  [12, 'List'],
  [13, 'Struct'],
  [14, 'Union'],
  [15, 'FixedSizeBinary'],
  [16, 'FixedSizeList'],
  [17, 'Map'],
  [18, 'Duration'],
  [19, 'LargeBinary'],
  [20, 'LargeUtf8'],
  [21, 'LargeList'],
  [23, 'BinaryView'],
  [24, 'Utf8View'],
  [-1, 'Dictionary'],
])

/** The type ids that the column walk reads. */
export const TYPE = {
  Null: 1,
  Int: 2,
  Float: 3,
  Binary: 4,
  Utf8: 5,
  Bool: 6,
  Decimal: 7,
  Date: 8,
  Time: 9,
  Timestamp: 10,
  Interval: 11,
  List: 12,
  Struct: 13,
  Union: 14,
  FixedSizeBinary: 15,
  FixedSizeList: 16,
  Map: 17,
  Duration: 18,
  LargeBinary: 19,
  LargeUtf8: 20,
  LargeList: 21,
  BinaryView: 23,
  Utf8View: 24,
  Dictionary: -1,
} as const

/** apache-arrow's `UnionMode.Dense` (the Arrow format's). */
const UNION_DENSE = 1

/** A described field: what `schema.rs` parses as `FieldDescription`. */
interface FieldDescription {
  name: string
  nullable: boolean
  metadata: Record<string, string>
  type: TypeDescription
}

/** A described type: `kind` plus that kind's attributes. */
type TypeDescription = { kind: string } & Record<string, unknown>

/** Thrown for a Schema whose structure is not an apache-arrow Schema's; `where` names the spot. */
function notArrow(where: string, what: string): InvalidArgumentError {
  return new InvalidArgumentError(
    `${where} is not an apache-arrow Schema: ${what}. Pass a Schema (or Table, RecordBatch) built with apache-arrow 15 or newer`,
  )
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null

/** Metadata (a Map of strings, or absent) as a plain object. */
function metadataOf(v: unknown, where: string): Record<string, string> {
  const out: Record<string, string> = {}
  if (v === undefined || v === null) return out
  if (!(v instanceof Map)) throw notArrow(where, `its metadata is ${describeValue(v)}, not a Map`)
  for (const [k, value] of v) {
    if (typeof k !== 'string' || typeof value !== 'string') {
      throw notArrow(where, 'its metadata holds a key or value that is not a string')
    }
    out[k] = value
  }
  return out
}

/** Reads a Field: its description and its column plan. */
function fieldOf(f: unknown, where: string): { description: FieldDescription; plan: TypePlan } {
  if (!isObject(f) || typeof f.name !== 'string') throw notArrow(where, `it is ${describeValue(f)}, not a Field`)
  const here = `${where} (\`${f.name}\`)`
  const { description, plan } = typeOf(f.type, here)
  return {
    description: { name: f.name, nullable: f.nullable === true, metadata: metadataOf(f.metadata, here), type: description },
    plan,
  }
}

/** The `children` of a nested type, as fields. */
function childrenOf(t: Record<string, unknown>, where: string, count?: number) {
  const children = t.children
  if (!Array.isArray(children) || (count !== undefined && children.length !== count)) {
    throw notArrow(where, `its ${textOf(t, '?')} type has ${Array.isArray(children) ? children.length : 'no'} child fields`)
  }
  return children.map((c, i) => fieldOf(c, `${where} child ${i}`))
}

/** Reads a DataType: its description and its column plan. */
function typeOf(t: unknown, where: string): { description: TypeDescription; plan: TypePlan } {
  if (!isObject(t) || typeof t.typeId !== 'number') throw notArrow(where, `its type is ${describeValue(t)}`)
  const typeId = t.typeId
  const kind = KINDS.get(typeId)
  if (kind === undefined) throw notArrow(where, `its type ${textOf(t, '?')} has the unknown type id ${typeId}`)
  const description: TypeDescription = { kind }
  let children: { description: FieldDescription; plan: TypePlan }[] = []
  let values: TypePlan | null = null
  switch (typeId) {
    case TYPE.Int:
      Object.assign(description, { bitWidth: t.bitWidth, signed: t.isSigned })
      break
    case TYPE.Float:
      description.precision = t.precision
      break
    case TYPE.Decimal:
      Object.assign(description, { precision: t.precision, scale: t.scale, bitWidth: t.bitWidth ?? 128 })
      break
    case TYPE.Date:
    case TYPE.Interval:
    case TYPE.Duration:
      description.unit = t.unit
      break
    case TYPE.Time:
      Object.assign(description, { unit: t.unit, bitWidth: t.bitWidth })
      break
    case TYPE.Timestamp:
      Object.assign(description, { unit: t.unit, timezone: t.timezone ?? null })
      break
    case TYPE.FixedSizeBinary:
      description.byteWidth = t.byteWidth
      break
    case TYPE.List:
    case TYPE.LargeList:
      children = childrenOf(t, where, 1)
      description.child = children[0]!.description
      break
    case TYPE.FixedSizeList:
      children = childrenOf(t, where, 1)
      Object.assign(description, { listSize: t.listSize, child: children[0]!.description })
      break
    case TYPE.Map:
      children = childrenOf(t, where, 1)
      Object.assign(description, { entries: children[0]!.description, keysSorted: t.keysSorted === true })
      break
    case TYPE.Struct:
      children = childrenOf(t, where)
      description.children = children.map((c) => c.description)
      break
    case TYPE.Union: {
      children = childrenOf(t, where)
      const typeIds = t.typeIds
      Object.assign(description, {
        mode: t.mode,
        typeIds: ArrayBuffer.isView(typeIds) || Array.isArray(typeIds) ? Array.from(typeIds as ArrayLike<number>) : null,
        children: children.map((c) => c.description),
      })
      break
    }
    case TYPE.Dictionary: {
      const indices = typeOf(t.indices, `${where} dictionary indices`)
      const dictionary = typeOf(t.dictionary, `${where} dictionary values`)
      Object.assign(description, {
        indices: indices.description,
        values: dictionary.description,
        ordered: t.isOrdered === true,
      })
      values = dictionary.plan
      break
    }
  }
  return { description, plan: {
      typeId,
      text: textOf(t, kind),
      children: children.map((c) => c.plan),
      values,
      dense: typeId === TYPE.Union && t.mode === UNION_DENSE,
    },
  }
}

/** A type as apache-arrow prints it (its own `toString`), or its kind if that fails. */
function textOf(t: object, kind: string): string {
  try {
    return String(t)
  } catch {
    return kind
  }
}

/** Described Schemas, by Schema object. */
const plans = new WeakMap<object, SchemaPlan>()

/**
 * The plan of `schema`, read once per Schema object. `where` names the schema in error
 * messages (`options.schema`, `the Table's schema`).
 *
 * @throws {InvalidArgumentError} if `schema` is not structured as an apache-arrow Schema, or
 * holds a type id memwal does not know
 */
export function schemaPlan(schema: unknown, where: string): SchemaPlan {
  if (!isObject(schema)) throw notArrow(where, `it is ${describeValue(schema)}`)
  let plan = plans.get(schema)
  if (plan === undefined) {
    if (!Array.isArray(schema.fields)) throw notArrow(where, `it is ${describeValue(schema)} with no fields array`)
    const fields = schema.fields.map((f, i) => fieldOf(f, `${where} field ${i}`))
    const json = JSON.stringify({
      fields: fields.map((f) => f.description),
      metadata: metadataOf(schema.metadata, where),
    })
    plan = {
      bytes: new TextEncoder().encode(json),
      json,
      columns: fields.map((f) => f.plan),
      names: fields.map((f) => f.description.name),
      text: fields
        .map((f) => `${f.description.name}: ${f.plan.text}${f.description.nullable ? '' : ' not null'}`)
        .join(', '),
    }
    plans.set(schema, plan)
  }
  return plan
}
