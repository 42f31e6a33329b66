//! Arrow IPC stream bytes ↔ record batches: the format of scan and tail results, and of puts
//! given as IPC bytes. Tables and RecordBatches cross as column buffers instead (`columns.rs`,
//! dispatched by `put_data.rs`), their schemas as structural descriptions (`schema.rs`).

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
