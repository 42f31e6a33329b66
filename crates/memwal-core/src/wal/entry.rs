//! The WAL entry codec: one Arrow IPC **stream** per entry (a schema message, the batches, an
//! end-of-stream marker), as Lance's MemWAL writes it, so either can read the other's entries.
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
//! - memwal writes the batches of a data entry as **one** record batch when there are several
//!   and they are small (the usual group commit: one batch per put, often one row each), with
//!   `memwal_batch_rows` listing each original batch's row count (decimal, comma-separated).
//!   The decoder slices the batch back into those batches, so replay rebuilds a MemTable with
//!   the same batch positions (request ids' recorded results and WAL progress count them).
//!   Why: an IPC message costs a flatbuffer header and padding per batch (about 670 bytes for
//!   a 4-column event of 100), so 30 one-row puts made a 23.6 KiB entry instead of 4.2 KiB;
//!   a smaller entry is less to write and sync on every append. Entries without the key (one
//!   batch, earlier builds, Lance) decode batch by batch as before. The key is part of the
//!   schema message, so the checksum covers it.

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
/// Schema metadata key listing the row counts of the batches merged into the entry's one batch.
pub const BATCH_ROWS_KEY: &str = "memwal_batch_rows";

/// Batches are merged into one (module docs) only up to this many bytes in all: above it the
/// per-message overhead is negligible and the copy would not be.
const MERGE_LIMIT_BYTES: usize = 4 << 20;

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
    let bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    let merged = if batches.len() > 1 && bytes <= MERGE_LIMIT_BYTES {
        let rows = batches.iter().map(|b| b.num_rows().to_string());
        let batch = arrow_select::concat::concat_batches(&schema, batches).map_err(encode_err)?;
        Some((rows.collect::<Vec<_>>().join(","), batch))
    } else {
        None
    };
    let meta = EntryMeta {
        epoch,
        sentinel: false,
        requests: requests.as_deref(),
        place,
        batch_rows: merged.as_ref().map(|(rows, _)| rows.as_str()),
    };
    match &merged {
        Some((_, batch)) => encode(schema.as_ref(), meta, std::slice::from_ref(batch)),
        None => encode(schema.as_ref(), meta, batches),
    }
}

/// Encodes a fence sentinel of `epoch`.
pub fn encode_sentinel(epoch: u64) -> Result<Bytes> {
    let meta = EntryMeta {
        epoch,
        sentinel: true,
        requests: None,
        place: None,
        batch_rows: None,
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
    /// The row counts of the batches merged into the entry's one batch, if merged.
    batch_rows: Option<&'a str>,
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
    // Only memwal sets the key: one in the shard schema's own metadata would otherwise make
    // every entry of one batch look merged, and unreadable.
    match meta.batch_rows {
        Some(rows) => md.insert(BATCH_ROWS_KEY.to_string(), rows.to_string()),
        None => md.remove(BATCH_ROWS_KEY),
    };
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
///
/// In the order that keeps damage from reaching arrow's decoder: the schema message, the
/// checksum it holds (over the whole entry), the batches; then what the metadata says of them.
pub fn decode_entry(place: EntryPlace, object: &str, bytes: Bytes) -> Result<WalEntry> {
    let damaged = Damaged {
        object,
        position: place.position,
    };
    let (schema, schema_end) = damaged.schema_message(&bytes)?;
    let md = schema.metadata();
    let epoch_text = md
        .get(WRITER_EPOCH_KEY)
        .ok_or_else(|| damaged.says("WAL entry missing writer_epoch metadata"))?;
    let writer_epoch: u64 = epoch_text
        .parse()
        .map_err(|_| damaged.says(format!("malformed writer_epoch metadata {epoch_text:?}")))?;
    damaged.check_checksum(&bytes, schema_end, md, epoch_text)?;
    let batches = damaged.batches(&bytes)?;
    let is_sentinel = md.get(FENCE_SENTINEL_KEY).is_some_and(|v| v == "true");
    if is_sentinel && !batches.is_empty() {
        return Err(damaged.says("fence sentinel holds batches"));
    }
    damaged.check_place(md, place)?;
    let requests = match md.get(REQUEST_IDS_KEY) {
        Some(text) => request_id::decode_records(object, text.as_bytes())?,
        None => Vec::new(),
    };
    let (schema, batches) = damaged.without_entry_metadata(&schema, batches)?;
    let batches = match md.get(BATCH_ROWS_KEY) {
        Some(rows) => split_merged(batches, rows).map_err(|msg| damaged.says(msg))?,
        None => batches,
    };
    Ok(WalEntry {
        position: place.position,
        writer_epoch,
        is_sentinel,
        schema,
        batches,
        requests,
    })
}

/// The entry being decoded, as its errors name it: every step of [`decode_entry`] is a method,
/// so each reports damage the same way.
struct Damaged<'a> {
    object: &'a str,
    position: u64,
}

impl Damaged<'_> {
    /// [`Error::Corrupt`] naming the entry, saying `msg`, caused by `src`.
    fn error(&self, msg: String, src: Option<arrow_schema::ArrowError>) -> Error {
        Error::corrupt(
            self.object,
            format!("WAL entry {}: {msg}", self.position),
            src.map(|e| Arc::new(e) as _),
        )
    }

    /// [`Damaged::error`] with no cause.
    fn says(&self, msg: impl Into<String>) -> Error {
        self.error(msg.into(), None)
    }

    /// The entry's schema (metadata included) and where its schema message ends. Read alone,
    /// before any batch: arrow's decoder trusts lengths in the message headers and can panic on
    /// damaged ones, so the checksum is verified first, and it sits in this message.
    fn schema_message(&self, bytes: &[u8]) -> Result<(Schema, usize)> {
        let (prefix, schema_end) = schema_message_len(bytes)
            .ok_or_else(|| self.says("truncated before the end of its schema message"))?;
        let schema = guarded(|| {
            let message = arrow_ipc::root_as_message(&bytes[prefix..schema_end])
                .map_err(|e| arrow_schema::ArrowError::IpcError(e.to_string()))?;
            let fb = message.header_as_schema().ok_or_else(|| {
                arrow_schema::ArrowError::IpcError("first message is not a schema".into())
            })?;
            arrow_ipc::convert::try_fb_to_schema(fb)
        })
        .map_err(|e| self.error("its schema message is not valid Arrow IPC".into(), Some(e)))?;
        Ok((schema, schema_end))
    }

    /// Checks the entry against the checksum it carries: a `v2` one (the whole entry), one of
    /// an earlier build (`epoch_text` and the bytes after the schema message), or none (an entry
    /// of Lance), which must then at least end with the end-of-stream marker.
    fn check_checksum(
        &self,
        bytes: &[u8],
        schema_end: usize,
        md: &arrow_schema::Metadata,
        epoch_text: &str,
    ) -> Result<()> {
        let hex = |digits: &[u8]| {
            std::str::from_utf8(digits)
                .ok()
                .filter(|d| d.len() == 8 && d.bytes().all(is_lower_hex))
                .and_then(|d| u32::from_str_radix(d, 16).ok())
                .ok_or_else(|| {
                    self.says(format!(
                        "malformed checksum {:?}",
                        String::from_utf8_lossy(digits)
                    ))
                })
        };
        let v2_at = guarded(|| Ok(checksum_digits_at(bytes))).ok().flatten();
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
            return Err(self.says("its checksum metadata is damaged"));
        } else {
            None
        };
        match checked {
            Some((expected, actual)) if actual != expected => Err(self.says(format!(
                "checksum mismatch (stored {expected:08x}, computed {actual:08x}); the entry is torn or damaged"
            ))),
            Some(_) => Ok(()),
            None if !bytes.ends_with(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]) => {
                Err(self.says("no end-of-stream marker"))
            }
            None => Ok(()),
        }
    }

    /// The record batches of the stream, as written (under the schema with entry metadata).
    fn batches(&self, bytes: &Bytes) -> Result<Vec<RecordBatch>> {
        let mut decoder = StreamDecoder::new();
        let mut buf = Buffer::from(bytes.clone());
        let mut batches = Vec::new();
        loop {
            match guarded(|| decoder.decode(&mut buf)) {
                Ok(Some(b)) => batches.push(b),
                Ok(None) => break,
                Err(e) => return Err(self.error("not a valid Arrow IPC stream".into(), Some(e))),
            }
        }
        decoder
            .finish()
            .map_err(|e| self.error("truncated Arrow IPC stream".into(), Some(e)))?;
        Ok(batches)
    }

    /// Checks that an entry that records its place records `place`: a copy in another slot or
    /// another shard's WAL would otherwise be replayed twice. Entries that record none (earlier
    /// builds, Lance, sentinels) pass.
    fn check_place(&self, md: &arrow_schema::Metadata, place: EntryPlace) -> Result<()> {
        let recorded = (md.get(SHARD_KEY), md.get(POSITION_KEY));
        if recorded == (None, None) {
            return Ok(());
        }
        let (shard, at) = (
            recorded.0.map(String::as_str),
            recorded.1.map(String::as_str),
        );
        let expected_shard = place.shard.to_string();
        let expected_at = place.position.to_string();
        if shard != Some(expected_shard.as_str()) || at != Some(expected_at.as_str()) {
            return Err(self.says(format!(
                "the entry belongs at position {} of shard {}, not here: a copy in the wrong place (it is not replayed)",
                at.unwrap_or("?"),
                shard.unwrap_or("?")
            )));
        }
        Ok(())
    }

    /// `schema` without the entry metadata keys (memwal's and Lance's), and `batches` under it:
    /// what the entry holds, as the shard's rows.
    fn without_entry_metadata(
        &self,
        schema: &Schema,
        batches: Vec<RecordBatch>,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let mut clean = schema.metadata().clone();
        for k in [
            WRITER_EPOCH_KEY,
            FENCE_SENTINEL_KEY,
            CHECKSUM_KEY,
            REQUEST_IDS_KEY,
            SHARD_KEY,
            POSITION_KEY,
            BATCH_ROWS_KEY,
        ] {
            clean.remove(k);
        }
        let schema = Arc::new(Schema::new_with_metadata(schema.fields().clone(), clean));
        let batches = batches
            .into_iter()
            .map(|b| {
                RecordBatch::try_new(schema.clone(), b.columns().to_vec())
                    .map_err(|e| self.error("batch does not match its schema".into(), Some(e)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((schema, batches))
    }
}

/// The batches merged into `batches` (one batch), sliced back by their row counts `rows`
/// (the `memwal_batch_rows` value); the message of what is wrong otherwise.
fn split_merged(
    batches: Vec<RecordBatch>,
    rows: &str,
) -> std::result::Result<Vec<RecordBatch>, String> {
    let counts = rows
        .split(',')
        .map(|n| n.parse::<usize>().ok().filter(|n| *n > 0))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("malformed {BATCH_ROWS_KEY} metadata {rows:?}"))?;
    let [batch] = <[RecordBatch; 1]>::try_from(batches).map_err(|b| {
        format!(
            "{BATCH_ROWS_KEY} says its batches were merged into one, but it holds {}",
            b.len()
        )
    })?;
    let total = counts.iter().try_fold(0usize, |sum, n| sum.checked_add(*n));
    if total != Some(batch.num_rows()) {
        return Err(format!(
            "{BATCH_ROWS_KEY} lists {} rows in all, but its batch holds {}",
            total.map_or_else(|| "too many".to_string(), |t| t.to_string()),
            batch.num_rows()
        ));
    }
    let mut offset = 0;
    Ok(counts
        .into_iter()
        .map(|n| {
            let part = batch.slice(offset, n);
            offset += n;
            part
        })
        .collect())
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

    // The epoch and the batches come back as written, and the schema without entry metadata.
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

    /// Batches of nested and dictionary columns, with nulls, each with its own dictionary.
    fn nested_batches() -> Vec<RecordBatch> {
        use arrow_array::builder::{Int32Builder, ListBuilder, StringDictionaryBuilder};
        use arrow_array::types::Int32Type;
        use arrow_array::{Array, ArrayRef, StructArray};
        let struct_field =
            Field::new_struct("s", vec![Field::new("a", DataType::Int32, true)], true);
        let make = |rows: &[Option<i32>], words: &[&str]| {
            let mut list = ListBuilder::new(Int32Builder::new());
            let mut dict = StringDictionaryBuilder::<Int32Type>::new();
            for (i, r) in rows.iter().enumerate() {
                match r {
                    Some(v) => list.append_value([Some(*v), None]),
                    None => list.append_null(),
                }
                dict.append_value(words[i % words.len()]);
            }
            let a: ArrayRef = Arc::new(Int32Array::from(rows.to_vec()));
            let s = StructArray::try_new(
                vec![Field::new("a", DataType::Int32, true)].into(),
                vec![a],
                Some(rows.iter().map(|r| r.is_some()).collect()),
            )
            .unwrap();
            let list = list.finish();
            let dict = dict.finish();
            let schema = Arc::new(Schema::new(vec![
                Field::new("l", list.data_type().clone(), true),
                Field::new("d", dict.data_type().clone(), false),
                struct_field.clone(),
            ]));
            RecordBatch::try_new(schema, vec![Arc::new(list), Arc::new(dict), Arc::new(s)]).unwrap()
        };
        vec![
            make(&[Some(1)], &["x"]),
            make(&[None, Some(2), Some(3)], &["y", "z"]),
            make(&[Some(4), None], &["x", "w"]),
        ]
    }

    #[test]
    fn small_batches_are_written_as_one_and_read_back_as_they_were() {
        for batches in [
            vec![
                batch(&[1]),
                batch(&[2, 3]),
                batch(&[4, 5, 6, 7]),
                batch(&[8]),
            ],
            nested_batches(),
        ] {
            let bytes = encode_entry(5, &batches).unwrap();
            let e = decode_entry(at(1), "wal/1", bytes.clone()).unwrap();
            assert_eq!(e.batches, batches);
            assert!(!e.schema.metadata().contains_key(BATCH_ROWS_KEY));
            // One batch message: the merged entry is smaller than the batches one by one.
            let separate = encode(batches[0].schema().as_ref(), meta(5), &batches).unwrap();
            assert!(
                bytes.len() < separate.len(),
                "merged {} bytes, separate {}",
                bytes.len(),
                separate.len()
            );
            let again = decode_entry(at(1), "wal/1", separate).unwrap();
            assert_eq!(again.batches, batches);
        }
    }

    #[test]
    fn the_row_counts_key_in_the_shards_own_schema_metadata_is_not_taken_for_a_merge() {
        let b = batch(&[1, 2, 3]);
        let mut md = b.schema().metadata().clone();
        md.insert(BATCH_ROWS_KEY.to_string(), "not counts".to_string());
        let schema = Arc::new(b.schema().as_ref().clone().with_metadata(md));
        let b = RecordBatch::try_new(schema, b.columns().to_vec()).unwrap();
        let e = decode_entry(
            at(1),
            "wal/1",
            encode_entry(5, std::slice::from_ref(&b)).unwrap(),
        );
        assert_eq!(e.unwrap().batches[0].columns(), b.columns());
    }

    #[test]
    fn large_batches_are_written_one_by_one() {
        let ids: Vec<i32> = (0..300_000).collect();
        let batches = vec![batch(&ids), batch(&ids)];
        assert!(
            batches
                .iter()
                .map(|b| b.get_array_memory_size())
                .sum::<usize>()
                > MERGE_LIMIT_BYTES
        );
        let bytes = encode_entry(5, &batches).unwrap();
        let key = BATCH_ROWS_KEY.as_bytes();
        assert!(!bytes.windows(key.len()).any(|w| w == key));
        assert_eq!(
            decode_entry(at(1), "wal/1", bytes).unwrap().batches,
            batches
        );
    }

    #[test]
    fn merged_row_counts_that_do_not_fit_the_batch_are_corrupt() {
        let three = batch(&[1, 2, 3]);
        for (rows, batches, says) in [
            (
                "1,5",
                vec![three.clone()],
                "lists 6 rows in all, but its batch holds 3",
            ),
            ("1,0,2", vec![three.clone()], "malformed memwal_batch_rows"),
            ("1,x", vec![three.clone()], "malformed memwal_batch_rows"),
            ("", vec![three.clone()], "malformed memwal_batch_rows"),
            (
                "3,3",
                vec![three.clone(), three.clone()],
                "merged into one, but it holds 2",
            ),
        ] {
            let meta = EntryMeta {
                batch_rows: Some(rows),
                ..meta(5)
            };
            let bytes = encode(three.schema().as_ref(), meta, &batches).unwrap();
            let e = decode_entry(at(1), "wal/1", bytes).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::Corrupt, "{rows}: {e}");
            assert!(e.to_string().contains(says), "{rows}: {e}");
        }
    }

    #[test]
    fn sentinel_round_trips_without_batches() {
        let e = decode_entry(at(2), "wal/2", encode_sentinel(7).unwrap()).unwrap();
        assert!(e.is_sentinel);
        assert_eq!(e.writer_epoch, 7);
        assert!(e.batches.is_empty());
        assert!(e.schema.fields().is_empty());
    }

    // An append of no batches, or with an empty batch, is refused before anything is encoded.
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
            batch_rows: None,
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
