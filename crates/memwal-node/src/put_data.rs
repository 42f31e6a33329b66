//! A put's data as `lib/encoding.ts` hands it over, and its decoding into record batches.
//!
//! The data is one object with a `kind`, read by hand so that a put reads only the fields its
//! kind has: `{ kind: 'ipc', bytes }` (an Arrow IPC stream the caller passed) or `{ kind:
//! 'columns', schema, words, batches, nodes, packed, large, rows, columns }` (the column buffers
//! of a Table or RecordBatches of any apache-arrow copy, see `columns.rs`, with the schema
//! described as in `schema.rs`; `words` and `packed` are copied at once, since the caller
//! reuses their memory for its next put), or the array of plain-object rows itself, with each row's key count beside it
//! (see `rows.rs`: a put of rows, the most frequent kind, reads no property of a wrapper). Rows are converted as they are read, on the JavaScript thread, since
//! their values cannot be read anywhere else; the other kinds are decoded by [`PutDecoder`],
//! off the JavaScript thread when they are large. A new input is one more kind here, not
//! another put method.

use std::sync::Mutex;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::SchemaRef;
use napi::bindgen_prelude::{Float64Array, JsValue, Object, Uint8Array};

use crate::error::invalid;
use crate::rows::RowReader;
use crate::{columns, ipc, schema};

/// See the module docs.
pub enum PutData {
    /// Arrow IPC stream bytes, as the caller passed them.
    Ipc { bytes: Uint8Array },
    /// Column buffers (`lib/arrow-columns.ts`): the schema's JSON description (`schema.rs`),
    /// the words (each batch's row count, three per array node in depth-first order, then two
    /// per buffer saying where it is), the packed small buffers, the large ones, and the rows
    /// and columns the caller passed (checked against what is decoded).
    Columns {
        schema: Uint8Array,
        words: columns::Words,
        packed: Buffer,
        large: Vec<Uint8Array>,
        rows: f64,
        columns: f64,
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
    /// Reads what `lib/encoding.ts` built: an array is rows (`key_counts` are theirs), which
    /// `rows` converts; anything else is an object with a `kind`.
    pub fn from_object(
        o: &Object,
        key_counts: Option<&[u32]>,
        rows: &RowReader,
    ) -> napi::Result<PutData> {
        if o.is_array()? {
            let value = o.value();
            return Ok(PutData::Rows(rows.read(
                value.env,
                value.value,
                key_counts,
            )?));
        }
        let kind: String = field(o, "?", "kind")?;
        match kind.as_str() {
            "ipc" => Ok(PutData::Ipc {
                bytes: field(o, "ipc", "bytes")?,
            }),
            "columns" => {
                // Copied now: the caller reuses these arrays for its next put.
                let words: Float64Array = field(o, "columns", "words")?;
                let packed: Uint8Array = field(o, "columns", "packed")?;
                Ok(PutData::Columns {
                    schema: field(o, "columns", "schema")?,
                    words: columns::Words::new(
                        &words,
                        field(o, "columns", "batches")?,
                        field(o, "columns", "nodes")?,
                    )?,
                    packed: Buffer::from_slice_ref(packed.as_ref()),
                    large: field(o, "columns", "large")?,
                    rows: field(o, "columns", "rows")?,
                    columns: field(o, "columns", "columns")?,
                })
            }
            other => Err(invalid(format!(
                "put data has unknown kind '{other}'; expected 'ipc' or 'columns' (or an array of rows)"
            ))),
        }
    }

    /// The bytes left to decode (what decoding it costs; rows are decoded already).
    pub fn byte_len(&self) -> usize {
        match self {
            PutData::Ipc { bytes, .. } => bytes.len(),
            PutData::Columns { packed, large, .. } => {
                packed.len() + large.iter().map(|b| b.len()).sum::<usize>()
            }
            PutData::Rows(_) => 0,
        }
    }
}

/// Decodes a writer's puts. Callers send the same schema description with every column put,
/// so the last one is kept decoded.
#[derive(Default)]
pub struct PutDecoder {
    schema: Mutex<Option<(Vec<u8>, SchemaRef)>>,
}

impl PutDecoder {
    /// The batches `data` holds.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for bytes that are not an IPC stream, or malformed column data, or
    /// column data that does not decode into the rows and columns the caller passed.
    pub fn decode(&self, data: PutData) -> napi::Result<Vec<RecordBatch>> {
        match data {
            PutData::Ipc { bytes } => {
                Ok(ipc::decode_stream(bytes::Bytes::copy_from_slice(&bytes))?.1)
            }
            PutData::Columns {
                schema,
                words,
                packed,
                large,
                rows,
                columns,
            } => columns::decode(
                &self.schema(&schema)?,
                &words,
                &packed,
                &large,
                rows,
                columns,
            ),
            PutData::Rows(batch) => Ok(vec![batch]),
        }
    }

    fn schema(&self, message: &[u8]) -> napi::Result<SchemaRef> {
        let mut cache = self.schema.lock().unwrap_or_else(|e| e.into_inner());
        match cache.as_ref() {
            Some((bytes, s)) if bytes.as_slice() == message => Ok(s.clone()),
            _ => {
                let s = schema::decode_schema(message)?;
                *cache = Some((message.to_vec(), s.clone()));
                Ok(s)
            }
        }
    }
}
