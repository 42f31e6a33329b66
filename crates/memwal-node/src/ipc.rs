//! Arrow IPC stream bytes ↔ record batches: the format of schemas, of scan and tail results,
//! and of puts given as IPC bytes or holding a column type that cannot cross as buffers. Other
//! puts cross as column buffers instead (`columns.rs`, dispatched by `put_data.rs`).

use std::io::Cursor;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Schema, SchemaRef};

use crate::error::invalid;

/// Decodes an IPC stream: the schema and every batch. Zero-copy over `bytes` where aligned.
pub fn decode_stream(bytes: bytes::Bytes) -> napi::Result<(SchemaRef, Vec<RecordBatch>)> {
    let mut decoder = StreamDecoder::new();
    let mut buf = Buffer::from(bytes);
    let mut batches = Vec::new();
    let bad = |e: arrow_schema::ArrowError| {
        invalid(format!(
            "data is not a valid Arrow IPC stream ({e}); pass an apache-arrow Table or RecordBatch, or bytes from tableToIPC(table, 'stream')"
        ))
    };
    while !buf.is_empty() {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decoder.decode(&mut buf))) {
            Ok(Ok(Some(b))) => batches.push(b),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => return Err(bad(e)),
            Err(_) => {
                return Err(invalid(
                    "data is not a valid Arrow IPC stream (malformed message); pass an apache-arrow Table or RecordBatch",
                ));
            }
        }
    }
    decoder.finish().map_err(bad)?;
    let schema = decoder.schema().ok_or_else(|| {
        invalid("data holds no Arrow IPC schema message; it is not an Arrow IPC stream")
    })?;
    Ok((schema, batches))
}

/// Decodes a schema sent as an IPC stream (schema message, no batches needed).
///
/// `lib/encoding.ts` encodes these bytes from an apache-arrow `Schema` itself, so bytes that do
/// not decode mean the `Schema` (or the `Table` holding it) came from a second copy of
/// apache-arrow, whose type objects the first copy's encoder mis-encodes: say so.
pub fn decode_schema(bytes: &[u8]) -> napi::Result<SchemaRef> {
    arrow_ipc::reader::StreamReader::try_new(Cursor::new(bytes), None)
        .map(|r| r.schema())
        .map_err(|e| {
            invalid(format!(
                "schema is not a valid Arrow schema ({e}). This happens when two copies of apache-arrow are installed and the Schema or Table comes from the other one. Align apache-arrow to ^21.2 (`npm ls apache-arrow`), or pass IPC bytes from the caller's own tableToIPC(table, 'stream')"
            ))
        })
}

/// Encodes `batches` (possibly none) with `schema` as one IPC stream.
pub fn encode_stream(schema: &Schema, batches: &[RecordBatch]) -> napi::Result<Vec<u8>> {
    let size: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    let mut w = StreamWriter::try_new(Vec::with_capacity(size + 1024), schema)
        .map_err(|e| napi::Error::from_reason(format!("[memwal:IO] encoding Arrow IPC: {e}")))?;
    for b in batches {
        w.write(b).map_err(|e| {
            napi::Error::from_reason(format!("[memwal:IO] encoding Arrow IPC: {e}"))
        })?;
    }
    w.into_inner()
        .map_err(|e| napi::Error::from_reason(format!("[memwal:IO] encoding Arrow IPC: {e}")))
}
