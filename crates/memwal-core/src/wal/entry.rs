//! The WAL entry codec: one Arrow IPC **stream** per entry (reference §1.4).
//!
//! - The schema's metadata carries `writer_epoch` (decimal), as Lance writes it.
//! - A *fence sentinel* has an empty schema, metadata `writer_epoch` and `fence_sentinel=true`,
//!   and no batches.
//! - memwal adds `memwal_checksum`: the CRC32C of the `writer_epoch` text followed by every byte
//!   after the schema message (the batch messages and the end-of-stream marker). A torn or
//!   bit-flipped entry is then reported as corrupt instead of being decoded into wrong rows.
//!   Entries without the key (written by Lance) are decoded without the check; readers ignore
//!   metadata they do not know.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;

use crate::error::{Error, Result};

/// Schema metadata key holding the writer's epoch.
pub const WRITER_EPOCH_KEY: &str = "writer_epoch";
/// Schema metadata key marking a fence sentinel.
pub const FENCE_SENTINEL_KEY: &str = "fence_sentinel";
/// Schema metadata key holding memwal's CRC32C of the entry body.
pub const CHECKSUM_KEY: &str = "memwal_checksum";

/// One decoded WAL entry.
#[derive(Debug, Clone)]
pub struct WalEntry {
    /// 1-based position in the shard's WAL.
    pub position: u64,
    /// Epoch of the writer that appended it.
    pub writer_epoch: u64,
    /// True for a fence sentinel (no batches).
    pub is_sentinel: bool,
    /// The batches' schema, without memwal's and Lance's entry metadata keys.
    pub schema: SchemaRef,
    /// The batches, in append order.
    pub batches: Vec<RecordBatch>,
}

impl WalEntry {
    /// Rows in all batches.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}

fn encode_err(e: arrow_schema::ArrowError) -> Error {
    Error::io("encoding a WAL entry as Arrow IPC failed", e)
}

/// Encodes `batches` (non-empty, one schema) as a WAL entry of `epoch`.
pub fn encode_entry(epoch: u64, batches: &[RecordBatch]) -> Result<Bytes> {
    let first = batches
        .first()
        .ok_or_else(|| Error::invalid("cannot append an empty batch list to WAL"))?;
    let schema = first.schema();
    for (i, b) in batches.iter().enumerate() {
        if b.num_rows() == 0 {
            return Err(Error::invalid(format!(
                "cannot append empty batch at index {i} to WAL"
            )));
        }
        if b.schema().fields() != schema.fields() {
            return Err(Error::invalid(format!(
                "batch at index {i} has a different schema from the first batch"
            )));
        }
    }
    encode(schema.as_ref(), epoch, false, batches)
}

/// Encodes a fence sentinel of `epoch`.
pub fn encode_sentinel(epoch: u64) -> Result<Bytes> {
    encode(&Schema::empty(), epoch, true, &[])
}

fn entry_schema(base: &Schema, epoch: u64, sentinel: bool, checksum: Option<u32>) -> Schema {
    let mut md = base.metadata().clone();
    md.insert(WRITER_EPOCH_KEY.to_string(), epoch.to_string());
    if sentinel {
        md.insert(FENCE_SENTINEL_KEY.to_string(), "true".to_string());
    }
    if let Some(c) = checksum {
        md.insert(CHECKSUM_KEY.to_string(), format!("{c:08x}"));
    }
    Schema::new_with_metadata(base.fields().clone(), md)
}

fn checksum(epoch_text: &str, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(epoch_text.as_bytes()), body)
}

fn encode(base: &Schema, epoch: u64, sentinel: bool, batches: &[RecordBatch]) -> Result<Bytes> {
    // Pass 1: the body (batch messages + end-of-stream), after a schema message we drop.
    let capacity: usize = batches
        .iter()
        .map(|b| b.get_array_memory_size())
        .sum::<usize>()
        + 1024;
    let schema = entry_schema(base, epoch, sentinel, None);
    let mut w = StreamWriter::try_new(Vec::with_capacity(capacity), &schema).map_err(encode_err)?;
    let schema_len = w.get_ref().len();
    debug_assert_eq!(
        schema_message_len(w.get_ref()).map(|(_, end)| end),
        Some(schema_len)
    );
    for b in batches {
        w.write(b).map_err(encode_err)?;
    }
    let stream = w.into_inner().map_err(encode_err)?;
    let body = &stream[schema_len..];
    // Pass 2: the schema message with the checksum of that body.
    let sum = checksum(&epoch.to_string(), body);
    let schema = entry_schema(base, epoch, sentinel, Some(sum));
    let header = StreamWriter::try_new(Vec::new(), &schema).map_err(encode_err)?;
    let mut out = Vec::with_capacity(header.get_ref().len() + body.len());
    out.extend_from_slice(header.get_ref());
    out.extend_from_slice(body);
    Ok(Bytes::from(out))
}

/// Runs a decoder step, turning a panic on malformed input into an error.
fn guarded<T>(
    f: impl FnOnce() -> Result<T, arrow_schema::ArrowError>,
) -> Result<T, arrow_schema::ArrowError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(arrow_schema::ArrowError::IpcError(
            "decoder panicked on malformed input".into(),
        ))
    })
}

/// The prefix length and end offset of the first IPC message (the schema), or `None` if
/// `bytes` is too short to hold it.
fn schema_message_len(bytes: &[u8]) -> Option<(usize, usize)> {
    let word = |at: usize| -> Option<u32> {
        bytes
            .get(at..at + 4)
            .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
    };
    let (prefix, len) = match word(0)? {
        0xFFFF_FFFF => (8usize, word(4)? as usize),
        legacy => (4, legacy as usize),
    };
    let end = prefix.checked_add(len)?;
    (end <= bytes.len()).then_some((prefix, end))
}

/// Decodes the entry at `position` stored at `object`; any inconsistency is
/// [`Error::Corrupt`] naming `object`.
pub fn decode_entry(position: u64, object: &str, bytes: Bytes) -> Result<WalEntry> {
    let corrupt = |msg: String, src: Option<arrow_schema::ArrowError>| {
        Error::corrupt(
            object,
            format!("WAL entry {position}: {msg}"),
            src.map(|e| Arc::new(e) as _),
        )
    };
    let (prefix, schema_end) = schema_message_len(&bytes).ok_or_else(|| {
        corrupt(
            "truncated before the end of its schema message".into(),
            None,
        )
    })?;
    // Read the schema and verify the checksum before decoding any batch: arrow's decoder
    // trusts lengths in the message headers and can panic on damaged ones.
    let schema = guarded(|| {
        let message = arrow_ipc::root_as_message(&bytes[prefix..schema_end])
            .map_err(|e| arrow_schema::ArrowError::IpcError(e.to_string()))?;
        let fb = message.header_as_schema().ok_or_else(|| {
            arrow_schema::ArrowError::IpcError("first message is not a schema".into())
        })?;
        arrow_ipc::convert::try_fb_to_schema(fb)
    })
    .map_err(|e| corrupt("its schema message is not valid Arrow IPC".into(), Some(e)))?;
    let md = schema.metadata();
    let epoch_text = md
        .get(WRITER_EPOCH_KEY)
        .ok_or_else(|| corrupt("WAL entry missing writer_epoch metadata".into(), None))?;
    let writer_epoch: u64 = epoch_text.parse().map_err(|_| {
        corrupt(
            format!("malformed writer_epoch metadata {epoch_text:?}"),
            None,
        )
    })?;
    if let Some(expected) = md.get(CHECKSUM_KEY) {
        let expected = u32::from_str_radix(expected, 16)
            .map_err(|_| corrupt(format!("malformed checksum {expected:?}"), None))?;
        let actual = checksum(epoch_text, &bytes[schema_end..]);
        if actual != expected {
            return Err(corrupt(
                format!(
                    "checksum mismatch (stored {expected:08x}, computed {actual:08x}); the entry is torn or damaged"
                ),
                None,
            ));
        }
    } else if !bytes.ends_with(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]) {
        return Err(corrupt("no end-of-stream marker".into(), None));
    }
    let mut decoder = StreamDecoder::new();
    let mut buf = Buffer::from(bytes.clone());
    let mut batches = Vec::new();
    loop {
        match guarded(|| decoder.decode(&mut buf)) {
            Ok(Some(b)) => batches.push(b),
            Ok(None) => break,
            Err(e) => return Err(corrupt("not a valid Arrow IPC stream".into(), Some(e))),
        }
    }
    decoder
        .finish()
        .map_err(|e| corrupt("truncated Arrow IPC stream".into(), Some(e)))?;
    let is_sentinel = md.get(FENCE_SENTINEL_KEY).is_some_and(|v| v == "true");
    if is_sentinel && !batches.is_empty() {
        return Err(corrupt("fence sentinel holds batches".into(), None));
    }
    let mut clean = md.clone();
    for k in [WRITER_EPOCH_KEY, FENCE_SENTINEL_KEY, CHECKSUM_KEY] {
        clean.remove(k);
    }
    let schema = Arc::new(Schema::new_with_metadata(schema.fields().clone(), clean));
    let batches = batches
        .into_iter()
        .map(|b| {
            RecordBatch::try_new(schema.clone(), b.columns().to_vec())
                .map_err(|e| corrupt("batch does not match its schema".into(), Some(e)))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(WalEntry {
        position,
        writer_epoch,
        is_sentinel,
        schema,
        batches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, StringArray};
    use arrow_schema::{DataType, Field};

    fn batch(ids: &[i32]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let names: Vec<Option<String>> = ids.iter().map(|i| Some(format!("n{i}"))).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(ids.to_vec())),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap()
    }

    // Reference §8.3 scenario 55.
    #[test]
    fn entry_round_trips_with_epoch_and_batches() {
        let bytes = encode_entry(42, &[batch(&[1, 2, 3]), batch(&[4, 5])]).unwrap();
        let e = decode_entry(1, "wal/1", bytes).unwrap();
        assert_eq!(e.writer_epoch, 42);
        assert!(!e.is_sentinel);
        assert_eq!(e.batches.len(), 2);
        assert_eq!(e.batches[0].num_rows(), 3);
        assert_eq!(e.batches[1], batch(&[4, 5]));
        assert!(!e.schema.metadata().contains_key(WRITER_EPOCH_KEY));
        assert!(!e.schema.metadata().contains_key(CHECKSUM_KEY));
    }

    #[test]
    fn sentinel_round_trips_without_batches() {
        let e = decode_entry(2, "wal/2", encode_sentinel(7).unwrap()).unwrap();
        assert!(e.is_sentinel);
        assert_eq!(e.writer_epoch, 7);
        assert!(e.batches.is_empty());
        assert!(e.schema.fields().is_empty());
    }

    // Reference §8.3 scenario 60.
    #[test]
    fn invalid_appends_are_rejected() {
        let e = encode_entry(1, &[]).unwrap_err();
        assert!(e.to_string().contains("empty batch list"));
        let e = encode_entry(1, &[batch(&[1]), batch(&[])]).unwrap_err();
        assert!(e.to_string().contains("empty batch at index 1"), "{e}");
    }

    #[test]
    fn every_truncation_is_reported_as_corrupt() {
        let bytes = encode_entry(3, &[batch(&[1, 2, 3])]).unwrap();
        for cut in 0..bytes.len() {
            let e = decode_entry(9, "wal/9", bytes.slice(..cut)).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::Corrupt, "cut at {cut}: {e}");
            assert!(e.to_string().contains("wal/9"), "{e}");
        }
    }

    #[test]
    fn flipped_bits_never_decode_into_different_rows() {
        let original = batch(&[10, 20, 30]);
        let bytes = encode_entry(3, std::slice::from_ref(&original)).unwrap();
        for i in 0..bytes.len() {
            for bit in [0u8, 3, 7] {
                let mut v = bytes.to_vec();
                v[i] ^= 1 << bit;
                match decode_entry(1, "wal/1", Bytes::from(v)) {
                    Err(e) => assert_eq!(e.code(), crate::ErrorCode::Corrupt),
                    // A flip in schema metadata padding or field-name bytes can still decode;
                    // the rows themselves must then be unchanged or the schema must differ.
                    Ok(e) => assert!(
                        e.batches.first().map(|b| b.columns()) == Some(original.columns())
                            || e.schema.fields() != original.schema().fields()
                            || e.writer_epoch != 3,
                        "byte {i} bit {bit} decoded into different rows"
                    ),
                }
            }
        }
    }

    #[test]
    fn lance_entries_without_checksum_still_decode() {
        let schema = Schema::new_with_metadata(
            batch(&[1]).schema().fields().clone(),
            std::collections::HashMap::from([(WRITER_EPOCH_KEY.to_string(), "5".to_string())]),
        );
        let mut w = StreamWriter::try_new(Vec::new(), &schema).unwrap();
        w.write(&batch(&[1, 2])).unwrap();
        let bytes = Bytes::from(w.into_inner().unwrap());
        let e = decode_entry(4, "wal/4", bytes).unwrap();
        assert_eq!((e.writer_epoch, e.num_rows()), (5, 2));
    }

    #[test]
    fn missing_epoch_is_corrupt() {
        let mut w = StreamWriter::try_new(Vec::new(), batch(&[1]).schema().as_ref()).unwrap();
        w.write(&batch(&[1])).unwrap();
        let e = decode_entry(1, "wal/1", Bytes::from(w.into_inner().unwrap())).unwrap_err();
        assert!(e.to_string().contains("missing writer_epoch"), "{e}");
    }
}
