// Tables whose schema is exactly the one given. apache-arrow's own builders (`new Table({...})`,
// `tableFromArrays`) infer the fields from the vectors, and inferred fields are nullable; a
// shard's schema says which fields may hold nulls, so a table meant to match it must carry that
// schema as it is.

import { RecordBatch, type Schema, Struct, Table, type Vector, makeData } from 'apache-arrow'

/** A one-batch table of `columns` (one vector per field of `schema`, in order) with exactly `schema`. */
export function tableOf(schema: Schema, columns: Vector[]): Table {
  const data = makeData({
    type: new Struct(schema.fields),
    length: columns[0]?.length ?? 0,
    nullCount: 0,
    children: columns.map((c) => c.data[0]!),
  })
  return new Table([new RecordBatch(schema, data)])
}
