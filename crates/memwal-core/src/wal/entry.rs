//! The WAL entry codec: one Arrow IPC **stream** per entry (reference §1.4).
//!
//! - The schema's metadata carries `writer_epoch` (decimal), as Lance writes it.
//! - A *fence sentinel* has an empty schema, metadata `writer_epoch` and `fence_sentinel=true`,
//!   and no batches.
//! - memwal adds `memwal_checksum` = `v2:<8 hex digits>`: the CRC32C of the whole entry, its
//!   schema message included (with these 8 digits read as `00000000`). A torn or bit-flipped
//!   entry is then reported as corrupt instead of being decoded into wrong rows, or into the
//!   right values under another field name, type or nullability. Entries of earlier memwal
//!   builds hold `<8 hex digits>`, the CRC32C of the `writer_epoch` text and the bytes after the
//!   schema message only; they are still checked that way. Entries without the key (written by
//!   Lance) are decoded without the check; readers ignore metadata they do not know.
//! - memwal adds `memwal_shard` (the shard's UUID) and `memwal_position` (decimal) to every
//!   data entry: where it belongs. A copy of an entry in another slot or another shard's WAL is
//!   then reported as corrupt rather than replayed twice (the checksum covers the content, and
//!   these make the slot part of it). Sentinels carry neither: one is staged before its slot
//!   is known, and a misplaced sentinel holds no rows. Entries without the keys (earlier memwal
//!   builds, Lance) are decoded without the check.
//! - memwal adds `memwal_request_ids` when the entry holds rows of puts that carried a request
//!   id: the JSON document of [`crate::request_id`] listing each such put with its original
//!   result. It is part of the schema message, so the checksum covers it; its value starts
//!   with `{`, so it can never be taken for the checksum value.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::request_id::{self, PutRecord};

/// Schema metadata key holding the writer's epoch.
pub const WRITER_EPOCH_KEY: &str = "writer_epoch";
/// Schema metadata key marking a fence sentinel.
pub const FENCE_SENTINEL_KEY: &str = "fence_sentinel";
/// Schema metadata key holding memwal's CRC32C of the entry body.
pub const CHECKSUM_KEY: &str = "memwal_checksum";
/// Schema metadata key listing the request ids of the puts whose rows the entry holds.
pub const REQUEST_IDS_KEY: &str = "memwal_request_ids";
/// Schema metadata key holding the UUID of the shard whose WAL the entry belongs to.
pub const SHARD_KEY: &str = "memwal_shard";
/// Schema metadata key holding the WAL position the entry belongs at.
pub const POSITION_KEY: &str = "memwal_position";

/// Where a WAL entry belongs: a shard and a position in its WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryPlace {
    /// The shard's id.
    pub shard: uuid::Uuid,
    /// The 1-based WAL position.
    pub position: u64,
}

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
    /// The puts with a request id whose rows the entry holds, with their original results.
    pub requests: Vec<PutRecord>,
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

/// Encodes `batches` (non-empty, one schema) as a WAL entry of `epoch` that records no place
/// (as entries of earlier builds: decoded anywhere without the place check).
pub fn encode_entry(epoch: u64, batches: &[RecordBatch]) -> Result<Bytes> {
    encode_entry_with(epoch, batches, &[], None)
}

/// Encodes `batches` (non-empty, one schema) as a WAL entry of `epoch` that records
/// `requests`, the request-id records of the puts whose rows they are, and `place`, where it is
/// written.
pub fn encode_entry_with(
    epoch: u64,
    batches: &[RecordBatch],
    requests: &[PutRecord],
    place: Option<EntryPlace>,
) -> Result<Bytes> {
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
    let requests = (!requests.is_empty()).then(|| request_id::encode_records(requests));
    let meta = EntryMeta {
        epoch,
        sentinel: false,
        requests: requests.as_deref(),
        place,
    };
    encode(schema.as_ref(), meta, batches)
}

/// Encodes a fence sentinel of `epoch`.
pub fn encode_sentinel(epoch: u64) -> Result<Bytes> {
    let meta = EntryMeta {
        epoch,
        sentinel: true,
        requests: None,
        place: None,
    };
    encode(&Schema::empty(), meta, &[])
}

/// The prefix of a whole-entry checksum value; 8 hex digits follow.
const CHECKSUM_V2: &str = "v2:";
/// The 8 digits as they count in the checksum of their own entry.
const CHECKSUM_PLACEHOLDER: &[u8; 8] = b"00000000";

/// What memwal adds to an entry's schema metadata.
#[derive(Clone, Copy)]
struct EntryMeta<'a> {
    epoch: u64,
    sentinel: bool,
    /// The request-id document, if the entry holds puts with request ids.
    requests: Option<&'a str>,
    /// Where the entry is written, for a data entry.
    place: Option<EntryPlace>,
}

fn entry_schema(base: &Schema, meta: EntryMeta<'_>, checksum: Option<&str>) -> Schema {
    let mut md = base.metadata().clone();
    md.insert(WRITER_EPOCH_KEY.to_string(), meta.epoch.to_string());
    if meta.sentinel {
        md.insert(FENCE_SENTINEL_KEY.to_string(), "true".to_string());
    }
    if let Some(r) = meta.requests {
        md.insert(REQUEST_IDS_KEY.to_string(), r.to_string());
    }
    if let Some(place) = meta.place {
        md.insert(SHARD_KEY.to_string(), place.shard.to_string());
        md.insert(POSITION_KEY.to_string(), place.position.to_string());
    }
    if let Some(c) = checksum {
        md.insert(CHECKSUM_KEY.to_string(), c.to_string());
    }
    Schema::new_with_metadata(base.fields().clone(), md)
}

/// The checksum of an entry of an earlier build: `writer_epoch` text, then the body.
fn checksum_v1(epoch_text: &str, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(epoch_text.as_bytes()), body)
}

/// The checksum of an entry whose schema message is `header` (its checksum digits as the
/// placeholder) and whose remaining bytes are `body`.
fn checksum_v2(header: &[u8], body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(header), body)
}

/// Checksums are written in lowercase hex; anything else is damage (an upper-case digit
/// would parse to the same number).
fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// Where the 8 digits of the `v2:` checksum value sit in `bytes` (an entry, or its schema
/// message alone), found through the flatbuffer itself: the value's bytes lie inside `bytes`.
/// The value is recognised by its form (`v2:` and 8 hex digits) rather than by its key, so a
/// damaged key (or key offset) cannot switch the check off. `None` if there is none.
fn checksum_digits_at(bytes: &[u8]) -> Option<usize> {
    let (prefix, end) = schema_message_len(bytes)?;
    let message = arrow_ipc::root_as_message(&bytes[prefix..end]).ok()?;
    let digits = message
        .header_as_schema()?
        .custom_metadata()?
        .iter()
        .filter_map(|kv| kv.value()?.strip_prefix(CHECKSUM_V2))
        .find(|d| d.len() == 8 && d.bytes().all(is_lower_hex))?;
    let at = (digits.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
    (at + 8 <= end).then_some(at)
}

fn encode(base: &Schema, meta: EntryMeta<'_>, batches: &[RecordBatch]) -> Result<Bytes> {
    // Pass 1: the body (batch messages + end-of-stream), after a schema message we drop.
    let capacity: usize = batches
        .iter()
        .map(|b| b.get_array_memory_size())
        .sum::<usize>()
        + 1024;
    let schema = entry_schema(base, meta, None);
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
    // Pass 2: the schema message with a placeholder checksum, which is then overwritten in
    // place with the checksum of the whole entry (the same number of bytes).
    let placeholder = format!(
        "{CHECKSUM_V2}{}",
        std::str::from_utf8(CHECKSUM_PLACEHOLDER).expect("ASCII")
    );
    let schema = entry_schema(base, meta, Some(&placeholder));
    let header = StreamWriter::try_new(Vec::new(), &schema).map_err(encode_err)?;
    let mut out = Vec::with_capacity(header.get_ref().len() + body.len());
    out.extend_from_slice(header.get_ref());
    let at = checksum_digits_at(&out)
        .ok_or_else(|| Error::io_msg("encoding a WAL entry: its checksum field was not found"))?;
    let sum = checksum_v2(&out, body);
    out[at..at + 8].copy_from_slice(format!("{sum:08x}").as_bytes());
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

/// Decodes the entry stored at `object`, the slot of `place`; any inconsistency, including an
/// entry that records another place (a misplaced copy), is [`Error::Corrupt`] naming `object`.
pub fn decode_entry(place: EntryPlace, object: &str, bytes: Bytes) -> Result<WalEntry> {
    let position = place.position;
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
    let hex = |digits: &[u8]| {
        std::str::from_utf8(digits)
            .ok()
            .filter(|d| d.len() == 8 && d.bytes().all(is_lower_hex))
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| {
                corrupt(
                    format!("malformed checksum {:?}", String::from_utf8_lossy(digits)),
                    None,
                )
            })
    };
    let v2_at = guarded(|| Ok(checksum_digits_at(&bytes))).ok().flatten();
    let checked = if let Some(at) = v2_at {
        let expected = hex(&bytes[at..at + 8])?;
        let mut header = bytes[..schema_end].to_vec();
        header[at..at + 8].copy_from_slice(CHECKSUM_PLACEHOLDER);
        Some((expected, checksum_v2(&header, &bytes[schema_end..])))
    } else if let Some(stored) = md.get(CHECKSUM_KEY) {
        let expected = hex(stored.as_bytes())?;
        Some((expected, checksum_v1(epoch_text, &bytes[schema_end..])))
    } else if bytes[..schema_end]
        .windows(CHECKSUM_KEY.len())
        .any(|w| w == CHECKSUM_KEY.as_bytes())
    {
        // The key's text is there but no metadata entry leads to it: a damaged offset.
        return Err(corrupt("its checksum metadata is damaged".into(), None));
    } else {
        None
    };
    if let Some((expected, actual)) = checked {
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
    let recorded = (md.get(SHARD_KEY), md.get(POSITION_KEY));
    if recorded != (None, None) {
        let (shard, at) = (
            recorded.0.map(String::as_str),
            recorded.1.map(String::as_str),
        );
        let expected_shard = place.shard.to_string();
        let expected_at = position.to_string();
        if shard != Some(expected_shard.as_str()) || at != Some(expected_at.as_str()) {
            return Err(corrupt(
                format!(
                    "the entry belongs at position {} of shard {}, not here: a copy in the wrong place (it is not replayed)",
                    at.unwrap_or("?"),
                    shard.unwrap_or("?")
                ),
                None,
            ));
        }
    }
    let requests = match md.get(REQUEST_IDS_KEY) {
        Some(text) => request_id::decode_records(object, text.as_bytes())?,
        None => Vec::new(),
    };
    let mut clean = md.clone();
    for k in [
        WRITER_EPOCH_KEY,
        FENCE_SENTINEL_KEY,
        CHECKSUM_KEY,
        REQUEST_IDS_KEY,
        SHARD_KEY,
        POSITION_KEY,
    ] {
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
        requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slot `position` of a shard that none of these entries names.
    fn at(position: u64) -> EntryPlace {
        EntryPlace {
            shard: uuid::Uuid::nil(),
            position,
        }
    }
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
        let e = decode_entry(at(1), "wal/1", bytes).unwrap();
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
        let e = decode_entry(at(2), "wal/2", encode_sentinel(7).unwrap()).unwrap();
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
            let e = decode_entry(at(9), "wal/9", bytes.slice(..cut)).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::Corrupt, "cut at {cut}: {e}");
            assert!(e.to_string().contains("wal/9"), "{e}");
        }
    }

    #[test]
    fn every_flipped_bit_is_reported_as_corrupt() {
        let bytes = encode_entry(3, &[batch(&[10, 20, 30])]).unwrap();
        for i in 0..bytes.len() {
            for bit in 0..8u8 {
                let mut v = bytes.to_vec();
                v[i] ^= 1 << bit;
                let e = decode_entry(at(1), "wal/1", Bytes::from(v)).unwrap_err();
                assert_eq!(e.code(), crate::ErrorCode::Corrupt, "byte {i} bit {bit}");
                assert!(e.to_string().contains("wal/1"), "{e}");
            }
        }
    }

    // The checksum covers the schema message too, so a flip there cannot hand a reader
    // the right values under another field name, type or nullability.
    #[test]
    fn flipped_bits_in_the_schema_message_are_corrupt() {
        assert_every_schema_bit_flip_is_corrupt(encode_entry(3, &[batch(&[10, 20, 30])]).unwrap());
    }

    /// Flips each bit of `bytes`' schema message in turn: every one must decode as `Corrupt`.
    fn assert_every_schema_bit_flip_is_corrupt(bytes: Bytes) {
        let (_, schema_end) = schema_message_len(&bytes).unwrap();
        for i in 0..schema_end {
            for bit in 0..8u8 {
                let mut v = bytes.to_vec();
                v[i] ^= 1 << bit;
                let e = decode_entry(at(1), "wal/1", Bytes::from(v)).unwrap_err();
                assert_eq!(e.code(), crate::ErrorCode::Corrupt, "byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn an_entry_records_its_place_and_is_refused_anywhere_else() {
        let shard = uuid::Uuid::new_v4();
        let here = EntryPlace { shard, position: 7 };
        let bytes = encode_entry_with(3, &[batch(&[1])], &[], Some(here)).unwrap();
        let e = decode_entry(here, "wal/7", bytes.clone()).unwrap();
        assert_eq!(e.batches[0], batch(&[1]));
        assert!(e.schema.metadata().is_empty(), "{:?}", e.schema.metadata());
        for elsewhere in [
            EntryPlace { shard, position: 8 },
            EntryPlace {
                shard: uuid::Uuid::new_v4(),
                position: 7,
            },
        ] {
            let err = decode_entry(elsewhere, "wal/x", bytes.clone()).unwrap_err();
            assert_eq!(err.code(), crate::ErrorCode::Corrupt);
            assert!(
                err.to_string()
                    .contains(&format!("belongs at position 7 of shard {shard}")),
                "{err}"
            );
        }
        // The place is covered by the checksum: editing it is damage, not a move.
        let text = bytes.to_vec();
        let at = text
            .windows(shard.to_string().len())
            .position(|w| w == shard.to_string().as_bytes())
            .unwrap();
        let mut moved = text.clone();
        moved[at] = if moved[at] == b'0' { b'1' } else { b'0' };
        let err = decode_entry(here, "wal/7", Bytes::from(moved)).unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        // Entries of earlier builds (and Lance's) record no place and decode anywhere.
        let old = encode_entry(3, &[batch(&[1])]).unwrap();
        assert!(decode_entry(at_any(9), "wal/9", old).is_ok());
    }

    fn at_any(position: u64) -> EntryPlace {
        EntryPlace {
            shard: uuid::Uuid::new_v4(),
            position,
        }
    }

    fn meta(epoch: u64) -> EntryMeta<'static> {
        EntryMeta {
            epoch,
            sentinel: false,
            requests: None,
            place: None,
        }
    }

    fn records() -> Vec<PutRecord> {
        use crate::request_id::RequestId;
        use crate::write_result::{BatchRange, WriteResult};
        ["retry-1", "retry-2"]
            .iter()
            .enumerate()
            .map(|(i, id)| PutRecord {
                id: RequestId::new(*id).unwrap(),
                result: WriteResult {
                    generation: Some(2),
                    batch_positions: BatchRange {
                        start: i,
                        end: i + 1,
                    },
                },
                put_at_ms: 1_700_000_000_000 + i as u64,
            })
            .collect()
    }

    #[test]
    fn request_ids_round_trip_in_metadata_and_stay_out_of_the_schema() {
        let bytes = encode_entry_with(3, &[batch(&[1]), batch(&[2])], &records(), None).unwrap();
        let e = decode_entry(at(5), "wal/5", bytes).unwrap();
        assert_eq!(e.requests, records());
        assert!(!e.schema.metadata().contains_key(REQUEST_IDS_KEY));
        assert_eq!(e.batches[1], batch(&[2]));
        let plain = decode_entry(at(5), "wal/5", encode_entry(3, &[batch(&[1])]).unwrap()).unwrap();
        assert!(plain.requests.is_empty());
    }

    // The request ids are in the schema message, which the checksum covers: a flip in them
    // is damage, never another id or result.
    #[test]
    fn flipped_bits_in_request_ids_are_corrupt() {
        assert_every_schema_bit_flip_is_corrupt(
            encode_entry_with(3, &[batch(&[10])], &records(), None).unwrap(),
        );
    }

    // Lance reads a WAL entry as a plain Arrow IPC stream: the ids must not change that.
    #[test]
    fn an_entry_with_request_ids_is_a_plain_arrow_stream() {
        let bytes = encode_entry_with(3, &[batch(&[1, 2])], &records(), None).unwrap();
        let r =
            arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
        assert_eq!(r.schema().fields(), batch(&[1]).schema().fields());
        assert!(r.schema().metadata().contains_key(REQUEST_IDS_KEY));
        let rows: usize = r.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 2);
    }

    #[test]
    fn entries_of_earlier_builds_are_checked_over_their_body() {
        let b = batch(&[1, 2]);
        let body = {
            let schema = entry_schema(b.schema().as_ref(), meta(4), None);
            let mut w = StreamWriter::try_new(Vec::new(), &schema).unwrap();
            let start = w.get_ref().len();
            w.write(&b).unwrap();
            w.into_inner().unwrap()[start..].to_vec()
        };
        let v1 = |sum: u32| {
            let schema = entry_schema(b.schema().as_ref(), meta(4), Some(&format!("{sum:08x}")));
            let w = StreamWriter::try_new(Vec::new(), &schema).unwrap();
            let mut out = w.get_ref().clone();
            out.extend_from_slice(&body);
            Bytes::from(out)
        };
        let e = decode_entry(at(2), "wal/2", v1(checksum_v1("4", &body))).unwrap();
        assert_eq!((e.writer_epoch, e.batches), (4, vec![b.clone()]));
        let e = decode_entry(at(2), "wal/2", v1(checksum_v1("4", &body) ^ 1)).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
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
        let e = decode_entry(at(4), "wal/4", bytes).unwrap();
        assert_eq!((e.writer_epoch, e.num_rows()), (5, 2));
    }

    #[test]
    fn missing_epoch_is_corrupt() {
        let mut w = StreamWriter::try_new(Vec::new(), batch(&[1]).schema().as_ref()).unwrap();
        w.write(&batch(&[1])).unwrap();
        let e = decode_entry(at(1), "wal/1", Bytes::from(w.into_inner().unwrap())).unwrap_err();
        assert!(e.to_string().contains("missing writer_epoch"), "{e}");
    }
}
