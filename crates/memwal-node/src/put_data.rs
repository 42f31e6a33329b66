//! A put's data as `lib/encoding.ts` hands it over, and its decoding into record batches.
//!
//! The data is one object with a `kind`, read by hand so that a put reads only the fields its
//! kind has: `{ kind: 'ipc', bytes, rows, columns }` (an Arrow IPC stream, checked against the
//! row and column counts the caller saw), `{ kind: 'columns', schema, batches, nodes,
//! buffers }` (column buffers, see `columns.rs`) or `{ kind: 'rows', rows, keyCounts }` (plain
//! objects and each one's key count, see `rows.rs`). Rows are converted as they are read, on the JavaScript thread, since their
//! values cannot be read anywhere else; the other kinds are decoded by [`PutDecoder`], off the
//! JavaScript thread when they are large.

use std::sync::Mutex;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use napi::bindgen_prelude::{Float64Array, JsValue, Object, Uint8Array, Uint32Array};

use crate::error::invalid;
use crate::rows::RowReader;
use crate::{columns, ipc};

/// See the module docs.
pub enum PutData {
    /// Arrow IPC stream bytes, with the rows and columns the caller passed, if it knows them.
    Ipc {
        bytes: Uint8Array,
        rows: Option<f64>,
        columns: Option<f64>,
    },
    /// Column buffers: the schema as an IPC schema message, each batch's row count, three
    /// words per array node (depth-first), and the nodes' buffers.
    Columns {
        schema: Uint8Array,
        batches: Float64Array,
        nodes: Float64Array,
        buffers: Vec<Uint8Array>,
    },
    /// Plain-object rows, already converted into a batch of the shard's schema.
    Rows(RecordBatch),
}

fn field<T: napi::bindgen_prelude::FromNapiValue>(
    o: &Object,
    kind: &str,
    name: &str,
) -> napi::Result<T> {
    o.get::<T>(name)?
        .ok_or_else(|| invalid(format!("put data of kind '{kind}' has no `{name}`")))
}

impl PutData {
    /// Reads the object `lib/encoding.ts` built; `rows` converts rows.
    pub fn from_object(o: &Object, rows: &RowReader) -> napi::Result<PutData> {
        let kind: String = field(o, "?", "kind")?;
        match kind.as_str() {
            "ipc" => Ok(PutData::Ipc {
                bytes: field(o, "ipc", "bytes")?,
                rows: o.get::<Option<f64>>("rows")?.flatten(),
                columns: o.get::<Option<f64>>("columns")?.flatten(),
            }),
            "columns" => Ok(PutData::Columns {
                schema: field(o, "columns", "schema")?,
                batches: field(o, "columns", "batches")?,
                nodes: field(o, "columns", "nodes")?,
                buffers: field(o, "columns", "buffers")?,
            }),
            "rows" => {
                let array: Object = field(o, "rows", "rows")?;
                let key_counts: Option<Uint32Array> = o.get("keyCounts")?;
                let value = array.value();
                let batch = rows.read(value.env, value.value, key_counts.as_deref())?;
                Ok(PutData::Rows(batch))
            }
            other => Err(invalid(format!(
                "put data has unknown kind '{other}'; expected 'ipc', 'columns' or 'rows'"
            ))),
        }
    }

    /// The bytes left to decode (what decoding it costs; rows are decoded already).
    pub fn byte_len(&self) -> usize {
        match self {
            PutData::Ipc { bytes, .. } => bytes.len(),
            PutData::Columns { buffers, .. } => buffers.iter().map(|b| b.len()).sum(),
            PutData::Rows(_) => 0,
        }
    }
}

/// Decodes a writer's puts. Callers send the same schema with every column put, so the last
/// one is kept decoded.
#[derive(Default)]
pub struct PutDecoder {
    schema: Mutex<Option<(Vec<u8>, SchemaRef)>>,
}

impl PutDecoder {
    /// The batches `data` holds.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for bytes that are not an IPC stream, malformed column data, or an IPC
    /// stream whose rows or columns differ from what the caller passed (a `Table` from a second
    /// copy of apache-arrow can encode into a stream that silently lacks data).
    pub fn decode(&self, data: PutData) -> napi::Result<Vec<RecordBatch>> {
        match data {
            PutData::Ipc {
                bytes,
                rows,
                columns,
            } => decode_ipc(&bytes, rows, columns),
            PutData::Columns {
                schema,
                batches,
                nodes,
                buffers,
            } => columns::decode(&self.schema(&schema)?, &batches, &nodes, &buffers),
            PutData::Rows(batch) => Ok(vec![batch]),
        }
    }

    fn schema(&self, message: &[u8]) -> napi::Result<SchemaRef> {
        let mut cache = self.schema.lock().unwrap_or_else(|e| e.into_inner());
        match cache.as_ref() {
            Some((bytes, s)) if bytes.as_slice() == message => Ok(s.clone()),
            _ => {
                let s = ipc::decode_schema(message)?;
                *cache = Some((message.to_vec(), s.clone()));
                Ok(s)
            }
        }
    }
}

fn decode_ipc(
    data: &[u8],
    expected_rows: Option<f64>,
    expected_columns: Option<f64>,
) -> napi::Result<Vec<RecordBatch>> {
    let (schema, batches) = ipc::decode_stream(bytes::Bytes::copy_from_slice(data))?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let columns = schema.fields().len();
    let rows_ok = expected_rows.is_none_or(|r| r == rows as f64);
    let cols_ok = expected_columns.is_none_or(|c| c == columns as f64);
    if !rows_ok || !cols_ok {
        return Err(invalid(format!(
            "the data passed to put has {} rows and {} columns, but memwal decoded {rows} rows and {columns} columns from its Arrow IPC encoding. This happens when two copies of apache-arrow are installed and the Table comes from the other one. Align apache-arrow to ^21.2 (`npm ls apache-arrow`), or pass IPC bytes from the caller's own tableToIPC(table, 'stream')",
            expected_rows.map_or("?".into(), |r| r.to_string()),
            expected_columns.map_or("?".into(), |c| c.to_string()),
        )));
    }
    Ok(batches)
}
