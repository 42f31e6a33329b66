//! The shard manifest: versioned protobuf records, each created with put-if-not-exists.
//!
//! `ShardManifest` keeps the protobuf field numbers of Lance's MemWAL shard manifest (listed in
//! `docs/format.md`, "The shard manifest"), derived with prost so no `protoc` is needed. memwal
//! adds fields with high numbers, which Lance readers skip as unknown:
//! - `arrow_schema` (1001): the shard's Arrow schema as an IPC schema message, so a writer
//!   opened with another schema fails before claiming, and a reader of an empty shard knows
//!   its columns;
//! - `writer_id` (1002): a random id per writer handle, so a writer that lost the
//!   acknowledgement of its own manifest write can recognise it (two claimants never produce
//!   identical bytes);
//! - `checksum` (1003): CRC32C of the encoding with this field cleared, written first;
//! - `writer_host` (1004), `writer_pid` (1005), `claimed_at_ms` (1006): the host, process and
//!   time of the epoch's claim, with `writer_id` the [`ShardHolder`] a fence error names (see
//!   `holder`). Optional: a manifest written before them has no holder, reported as unknown;
//! - `shard_name` (1007): the shard's name, for a shard opened by name (its id is derived from
//!   the name: see [`crate::shard`]); absent for a shard opened by id;
//! - `wal_low_water` (1008): the WAL low-water mark. Entries at or below it may have been
//!   collected (see [`crate::gc`]); a missing one there is *truncated*, not a hole, and no
//!   writer ever writes there. Every generation commit raises it to the new replay cursor;
//!   it never moves down. 0 (absent): nothing may have been collected;
//! - in each `FlushedGeneration`, `checksum` (1001): CRC32C of the generation file;
//!   `request_ids_newest_ms` (1002) and `request_ids_checksum` (1003): present when the
//!   generation's directory holds `request_ids.json` (the request ids of its puts, see
//!   [`crate::request_id`]), the newest put time among them (so an open reads only the files
//!   of generations flushed within the retention window) and the file's CRC32C. Per
//!   generation, never per put: the manifest stays small.
//!
//! [`ManifestStore`] (in `versions`) implements finding the latest version (the highest listed),
//! `claim_epoch`, `check_fenced` and `commit_update` (`docs/fencing.md`, "Manifest versions and
//! collection").

use std::io::Cursor;
use std::sync::Arc;

use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use prost::Message;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::WalLayout;

mod holder;
mod versions;

pub use crate::holder::ShardHolder;
pub use versions::{LayoutChoice, ManifestStore};
pub(crate) use versions::{fenced_by, fences};

/// Protobuf `UUID { bytes uuid = 1; }`.
#[derive(Clone, PartialEq, Message)]
pub struct ProtoUuid {
    /// 16 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub uuid: Vec<u8>,
}

/// Protobuf `ShardFieldEntry` (kept for format compatibility; memwal writes none).
#[derive(Clone, PartialEq, Message)]
pub struct ShardFieldEntry {
    /// Shard field id.
    #[prost(string, tag = "1")]
    pub field_id: String,
    /// Raw little-endian Arrow scalar bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// Protobuf `SsTable`: one flushed generation.
#[derive(Clone, PartialEq, Message)]
pub struct FlushedGeneration {
    /// Generation number.
    #[prost(uint64, tag = "1")]
    pub generation: u64,
    /// Directory name relative to the shard directory (`<random8hex>_gen_<g>`).
    #[prost(string, tag = "2")]
    pub path: String,
    /// Estimated in-memory bytes of its rows.
    #[prost(uint64, optional, tag = "3")]
    pub in_memory_bytes: Option<u64>,
    /// Rows held.
    #[prost(uint64, optional, tag = "4")]
    pub physical_rows: Option<u64>,
    /// Primary-key bytes (Lance; memwal writes none).
    #[prost(uint64, optional, tag = "5")]
    pub primary_key_bytes: Option<u64>,
    /// memwal: CRC32C of the generation file, checked whenever it is read. Parquet as arrow-rs
    /// writes it has no page checksums, so a damaged data page would otherwise decode into
    /// values that were never put.
    #[prost(fixed32, optional, tag = "1001")]
    pub checksum: Option<u32>,
    /// memwal: when the generation's directory holds `request_ids.json`, the newest put time
    /// (Unix milliseconds) among its request ids; absent when it holds none.
    #[prost(uint64, optional, tag = "1002")]
    pub request_ids_newest_ms: Option<u64>,
    /// memwal: CRC32C of `request_ids.json`, checked whenever it is read.
    #[prost(fixed32, optional, tag = "1003")]
    pub request_ids_checksum: Option<u32>,
}

/// Protobuf `ShardStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ShardStatus {
    /// Accepts claims.
    Active = 0,
    /// A drop is in flight: claims are refused.
    Sealed = 1,
}

/// Protobuf `ShardManifest` (Lance field numbers, plus memwal's fields ≥ 1001).
#[derive(Clone, PartialEq, Message)]
pub struct ShardManifest {
    /// Shard identity.
    #[prost(message, optional, tag = "11")]
    pub shard_id: Option<ProtoUuid>,
    /// Manifest version; equals the version in the file name; starts at 1.
    #[prost(uint64, tag = "1")]
    pub version: u64,
    /// Spec id (0: a manual shard).
    #[prost(uint32, tag = "10")]
    pub shard_spec_id: u32,
    /// Computed shard field values (unused by memwal).
    #[prost(message, repeated, tag = "14")]
    pub shard_field_entries: Vec<ShardFieldEntry>,
    /// Fencing token; incremented by every claim.
    #[prost(uint64, tag = "2")]
    pub writer_epoch: u64,
    /// Highest WAL position whose rows are all in flushed generations; replay starts after it.
    #[prost(uint64, tag = "3")]
    pub replay_after_wal_entry_position: u64,
    /// A hint of the WAL tip; not authoritative.
    #[prost(uint64, tag = "4")]
    pub wal_entry_position_last_seen: u64,
    /// Generation number the next flush gets.
    #[prost(uint64, tag = "6")]
    pub current_generation: u64,
    /// Flushed generations, oldest first (Lance's `sstables`).
    #[prost(message, repeated, tag = "8")]
    pub flushed_generations: Vec<FlushedGeneration>,
    /// Lifecycle status.
    #[prost(enumeration = "ShardStatus", tag = "15")]
    pub status: i32,
    /// memwal: the shard's Arrow schema (an IPC stream holding only the schema message).
    #[prost(bytes = "vec", optional, tag = "1001")]
    pub arrow_schema: Option<Vec<u8>>,
    /// memwal: the id of the writer handle that wrote this version.
    #[prost(string, tag = "1002")]
    pub writer_id: String,
    /// memwal: CRC32C of this message encoded with `checksum` unset.
    #[prost(fixed32, optional, tag = "1003")]
    pub checksum: Option<u32>,
    /// memwal: the host name of the writer that claimed this epoch.
    #[prost(string, optional, tag = "1004")]
    pub writer_host: Option<String>,
    /// memwal: the process id of the writer that claimed this epoch.
    #[prost(uint32, optional, tag = "1005")]
    pub writer_pid: Option<u32>,
    /// memwal: when this epoch was claimed, in milliseconds since the Unix epoch.
    #[prost(uint64, optional, tag = "1006")]
    pub claimed_at_ms: Option<u64>,
    /// memwal: the shard's name, if it was opened by name.
    #[prost(string, optional, tag = "1007")]
    pub shard_name: Option<String>,
    /// memwal: the WAL low-water mark: entries at or below it may have been collected. It is
    /// at most `replay_after_wal_entry_position` and never decreases. See [`crate::gc`].
    #[prost(uint64, tag = "1008")]
    pub wal_low_water: u64,
    /// memwal: how the WAL is laid out ([`WalLayout`]); absent: objects.
    #[prost(enumeration = "crate::store::WalLayout", optional, tag = "1009")]
    pub wal_layout: Option<i32>,
}

impl WalLayout {
    /// The layout `manifest` records.
    pub fn of(manifest: &ShardManifest) -> WalLayout {
        manifest
            .wal_layout
            .and_then(|l| WalLayout::try_from(l).ok())
            .unwrap_or(WalLayout::Objects)
    }
}

impl ShardManifest {
    /// The shard id as a UUID, if present and well-formed.
    pub fn shard_uuid(&self) -> Option<Uuid> {
        self.shard_id
            .as_ref()
            .and_then(|u| Uuid::from_slice(&u.uuid).ok())
    }

    /// The shard's schema, if memwal recorded one.
    pub fn schema(&self) -> Result<Option<SchemaRef>> {
        match &self.arrow_schema {
            None => Ok(None),
            Some(bytes) => decode_schema(bytes).map(Some),
        }
    }

    /// The checksum field is written *first*, then the message without it (protobuf accepts
    /// fields in any order, and Lance readers skip it as unknown). prost would write it last,
    /// by tag, and a manifest cut at a field boundary before it would then decode as a valid,
    /// unchecked manifest that silently lacks its trailing fields (such as flushed
    /// generations, whose rows the replay cursor already skips).
    fn encode_with_checksum(&self) -> Bytes {
        let mut m = self.clone();
        m.checksum = None;
        let body = m.encode_to_vec();
        let head = ShardManifest {
            checksum: Some(crc32c::crc32c(&body)),
            ..Default::default()
        };
        let mut out = head.encode_to_vec();
        out.extend_from_slice(&body);
        Bytes::from(out)
    }

    /// Decodes version `version`, stored at `object`.
    fn decode_checked(object: &str, version: u64, bytes: &[u8]) -> Result<Self> {
        let m = ShardManifest::decode(bytes).map_err(|e| {
            Error::corrupt(
                object,
                "shard manifest is not a valid ShardManifest protobuf",
                Some(Arc::new(e)),
            )
        })?;
        if let Some(stored) = m.checksum {
            let mut copy = m.clone();
            copy.checksum = None;
            let actual = crc32c::crc32c(&copy.encode_to_vec());
            if actual != stored {
                return Err(Error::corrupt(
                    object,
                    format!(
                        "shard manifest checksum mismatch (stored {stored:08x}, computed {actual:08x})"
                    ),
                    None,
                ));
            }
        }
        if m.version != version {
            return Err(Error::corrupt(
                object,
                format!(
                    "shard manifest holds version {} but its name says version {version}; it is truncated or damaged",
                    m.version
                ),
                None,
            ));
        }
        Ok(m)
    }
}

/// Encodes `schema` as an IPC stream holding only the schema message.
pub fn encode_schema(schema: &Schema) -> Result<Vec<u8>> {
    let w = StreamWriter::try_new(Vec::new(), schema)
        .map_err(|e| Error::invalid(format!("schema cannot be encoded as Arrow IPC: {e}")))?;
    w.into_inner()
        .map_err(|e| Error::invalid(format!("schema cannot be encoded as Arrow IPC: {e}")))
}

/// Inverse of [`encode_schema`].
pub fn decode_schema(bytes: &[u8]) -> Result<SchemaRef> {
    StreamReader::try_new(Cursor::new(bytes), None)
        .map(|r| r.schema())
        .map_err(|e| {
            Error::corrupt(
                "shard manifest",
                "stored Arrow schema is invalid",
                Some(Arc::new(e)),
            )
        })
}

/// `SchemaMismatch` naming the first differing field, unless both have the same fields.
pub(crate) fn check_same_schema(shard: Uuid, stored: &Schema, given: &Schema) -> Result<()> {
    if stored.fields().len() != given.fields().len() {
        return Err(Error::SchemaMismatch {
            message: format!(
                "shard {shard} has {} fields ({}) but {} were given ({}); open it with the shard's schema",
                stored.fields().len(),
                field_names(stored),
                given.fields().len(),
                field_names(given)
            ),
        });
    }
    for (s, g) in stored.fields().iter().zip(given.fields().iter()) {
        if s.name() != g.name()
            || s.data_type() != g.data_type()
            || s.is_nullable() != g.is_nullable()
        {
            return Err(Error::SchemaMismatch {
                message: format!(
                    "field `{}` is {}{} in the given schema but shard {shard} has `{}` {}{}; open it with the shard's schema",
                    g.name(),
                    g.data_type(),
                    if g.is_nullable() { "" } else { " not null" },
                    s.name(),
                    s.data_type(),
                    if s.is_nullable() { "" } else { " not null" },
                ),
            });
        }
    }
    Ok(())
}

/// The first field names of `s`, for a message: a schema of thousands of fields must not make
/// one of thousands of names.
fn field_names(s: &Schema) -> String {
    const SHOWN: usize = 10;
    let names: Vec<&str> = s
        .fields()
        .iter()
        .take(SHOWN)
        .map(|f| f.name().as_str())
        .collect();
    match s.fields().len().saturating_sub(SHOWN) {
        0 => names.join(", "),
        more => format!("{}, and {more} more", names.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field};

    #[test]
    fn a_schema_mismatch_names_a_few_fields_not_thousands() {
        let wide = Schema::new(
            (0..2000)
                .map(|i| Field::new(format!("c{i}"), DataType::Int32, true))
                .collect::<Vec<_>>(),
        );
        let narrow = Schema::new(vec![Field::new("id", DataType::Int32, false)]);
        let e = check_same_schema(Uuid::nil(), &wide, &narrow)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, and 1990 more"),
            "{e}"
        );
        assert!(e.len() < 400, "{e}");
        assert!(e.contains("but 1 were given (id)"), "{e}");
    }

    #[test]
    fn schema_round_trips() {
        let s = Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("v", DataType::Utf8, true),
        ]);
        assert_eq!(
            decode_schema(&encode_schema(&s).unwrap()).unwrap().as_ref(),
            &s
        );
    }
}
