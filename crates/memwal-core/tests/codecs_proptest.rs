//! Property tests of the codecs: they round-trip, and their decoders never panic on any input.
//! - WAL entries (`encode_entry` / `encode_sentinel` / `decode_entry`) over random batches of
//!   Int32, Int64 and Utf8 columns, nullable or not, and random epochs; arbitrary bytes and
//!   damaged encodings decode to `Ok` or to `Corrupt` naming the object.
//! - Manifest versions (`ManifestStore::write` / `read_version` on an in-memory store) over
//!   random fields, flushed generations included; arbitrary and damaged bytes likewise.
//! - Bit-reversed file names (`bitrev64_name` / `parse_bitrev64_name`).
//!
//! CI (256 cases per property, or `PROPTEST_CASES`; a few seconds):
//!   cargo test -p memwal-core --test codecs_proptest
//! Long (50,000 cases per property, about 20 s):
//!   MEMWAL_PROPTEST_LONG=1 cargo test -p memwal-core --release --test codecs_proptest

use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use memwal_core::ErrorCode;
use memwal_core::manifest::{FlushedGeneration, ManifestStore, ProtoUuid, ShardManifest};
use memwal_core::store::{CreateOutcome, Store, bitrev64_name, parse_bitrev64_name};
use memwal_core::wal::entry::{EntryPlace, decode_entry, encode_entry, encode_sentinel};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use proptest::collection::vec;
use proptest::prelude::*;
use uuid::Uuid;

/// Slot `position` of a shard none of these entries names (they are encoded without a place).
fn anywhere(position: u64) -> EntryPlace {
    EntryPlace {
        shard: Uuid::nil(),
        position,
    }
}

fn config() -> ProptestConfig {
    let cases = if std::env::var("MEMWAL_PROPTEST_LONG").is_ok_and(|v| v == "1") {
        50_000
    } else {
        ProptestConfig::default().cases
    };
    ProptestConfig {
        cases,
        // A failure prints its minimal input; nothing is written into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const OBJECT: &str = "_mem_wal/shard/wal/entry.arrow";

#[derive(Debug, Clone, Copy)]
enum Kind {
    Int32,
    Int64,
    Utf8,
}

/// A value, or (in a nullable column) now and then a null.
fn maybe<S: Strategy + 'static>(nullable: bool, s: S) -> BoxedStrategy<Option<S::Value>>
where
    S::Value: 'static,
{
    if nullable {
        proptest::option::weighted(0.8, s).boxed()
    } else {
        s.prop_map(Some).boxed()
    }
}

fn column(kind: Kind, nullable: bool, rows: usize) -> BoxedStrategy<ArrayRef> {
    match kind {
        Kind::Int32 => vec(maybe(nullable, any::<i32>()), rows)
            .prop_map(|v| Arc::new(Int32Array::from(v)) as ArrayRef)
            .boxed(),
        Kind::Int64 => vec(maybe(nullable, any::<i64>()), rows)
            .prop_map(|v| Arc::new(Int64Array::from(v)) as ArrayRef)
            .boxed(),
        Kind::Utf8 => vec(maybe(nullable, "\\PC{0,12}"), rows)
            .prop_map(|v| Arc::new(StringArray::from(v)) as ArrayRef)
            .boxed(),
    }
}

/// 1-3 batches of 1-20 rows each, sharing a random schema of 1-4 columns.
fn batches() -> impl Strategy<Value = Vec<RecordBatch>> {
    let kind = prop_oneof![Just(Kind::Int32), Just(Kind::Int64), Just(Kind::Utf8)];
    vec((kind, any::<bool>()), 1..5).prop_flat_map(|cols| {
        let schema: SchemaRef = Arc::new(Schema::new(
            cols.iter()
                .enumerate()
                .map(|(i, (kind, nullable))| {
                    let t = match kind {
                        Kind::Int32 => DataType::Int32,
                        Kind::Int64 => DataType::Int64,
                        Kind::Utf8 => DataType::Utf8,
                    };
                    Field::new(format!("c{i}"), t, *nullable)
                })
                .collect::<Vec<_>>(),
        ));
        vec(1usize..21, 1..4).prop_flat_map(move |sizes| {
            sizes
                .into_iter()
                .map(|rows| {
                    let schema = schema.clone();
                    cols.iter()
                        .map(|(kind, nullable)| column(*kind, *nullable, rows))
                        .collect::<Vec<_>>()
                        .prop_map(move |columns| {
                            RecordBatch::try_new(schema.clone(), columns).unwrap()
                        })
                })
                .collect::<Vec<_>>()
        })
    })
}

/// An edit of an encoding: flip bits of a byte, cut it short, or insert a byte.
#[derive(Debug, Clone)]
enum Edit {
    Xor(prop::sample::Index, u8),
    Truncate(prop::sample::Index),
    Insert(prop::sample::Index, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<prop::sample::Index>(), 1u8..).prop_map(|(i, x)| Edit::Xor(i, x)),
        any::<prop::sample::Index>().prop_map(Edit::Truncate),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
    ]
}

fn apply(bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    for e in edits {
        if v.is_empty() {
            break;
        }
        match e {
            Edit::Xor(i, x) => {
                let i = i.index(v.len());
                v[i] ^= x;
            }
            Edit::Truncate(i) => v.truncate(i.index(v.len())),
            Edit::Insert(i, b) => {
                let i = i.index(v.len());
                v.insert(i, *b)
            }
        }
    }
    v
}

/// Decoding `bytes` as a WAL entry returns `Ok` or `Corrupt` naming the object.
fn decodes_or_is_corrupt(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    if let Err(e) = decode_entry(anywhere(7), OBJECT, Bytes::from(bytes)) {
        prop_assert_eq!(e.code(), ErrorCode::Corrupt, "{}", e);
        prop_assert!(e.to_string().contains(OBJECT), "{}", e);
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn generation() -> impl Strategy<Value = FlushedGeneration> {
    (
        any::<u64>(),
        "[0-9a-f]{8}_gen_[0-9]{1,6}",
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(
            |(
                generation,
                path,
                in_memory_bytes,
                physical_rows,
                primary_key_bytes,
                checksum,
                request_ids_newest_ms,
                request_ids_checksum,
            )| {
                FlushedGeneration {
                    generation,
                    path,
                    in_memory_bytes,
                    physical_rows,
                    primary_key_bytes,
                    checksum,
                    request_ids_newest_ms,
                    request_ids_checksum,
                }
            },
        )
}

fn manifest() -> impl Strategy<Value = ShardManifest> {
    (
        (
            1u64..,
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        ),
        vec(generation(), 0..6),
        (
            any::<u32>(),
            proptest::option::of(any::<[u8; 16]>()),
            0i32..2,
            proptest::option::of(vec(any::<u8>(), 0..64)),
            "\\PC{0,40}",
        ),
        (
            proptest::option::of("\\PC{0,40}"),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of("\\PC{0,40}"),
            any::<u64>(),
            proptest::option::of(0i32..2),
        ),
    )
        .prop_map(
            |(
                (version, writer_epoch, replay, last_seen, current_generation),
                flushed_generations,
                (shard_spec_id, shard_id, status, arrow_schema, writer_id),
                (writer_host, writer_pid, claimed_at_ms, shard_name, wal_low_water, wal_layout),
            )| ShardManifest {
                shard_id: shard_id.map(|u| ProtoUuid { uuid: u.to_vec() }),
                version,
                shard_spec_id,
                shard_field_entries: Vec::new(),
                writer_epoch,
                replay_after_wal_entry_position: replay,
                wal_entry_position_last_seen: last_seen,
                current_generation,
                flushed_generations,
                status,
                arrow_schema,
                writer_id,
                checksum: None,
                writer_host,
                writer_pid,
                claimed_at_ms,
                shard_name,
                wal_low_water,
                wal_layout,
            },
        )
}

/// A manifest store of a fresh shard over `raw` (so tests can plant raw bytes).
fn manifests(raw: &Arc<InMemory>) -> (ManifestStore, memwal_core::store::ShardPaths) {
    let store = Store::from_object_store(raw.clone(), Path::default(), "memory://proptest");
    let paths = store.shard_paths(Uuid::new_v4());
    (ManifestStore::new(store, paths.clone()), paths)
}

/// Reading `bytes` stored as manifest version `version` returns that version or `Corrupt`
/// naming the object; never a panic, never another version.
fn read_planted(version: u64, bytes: Vec<u8>) -> Result<Option<ShardManifest>, TestCaseError> {
    let raw = Arc::new(InMemory::new());
    let (ms, paths) = manifests(&raw);
    let path = paths.manifest(version);
    runtime().block_on(async {
        raw.put(&path, PutPayload::from(bytes)).await.unwrap();
        match ms.read_version(version).await {
            Ok(m) => {
                let m = m.expect("planted");
                prop_assert_eq!(m.version, version);
                Ok(Some(m))
            }
            Err(e) => {
                prop_assert_eq!(e.code(), ErrorCode::Corrupt, "{}", e);
                prop_assert!(e.to_string().contains(path.as_ref()), "{}", e);
                Ok(None)
            }
        }
    })
}

proptest! {
    #![proptest_config(config())]

    /// Every WAL entry decodes to exactly its epoch and batches.
    #[test]
    fn wal_entries_round_trip(epoch in any::<u64>(), position in 1u64.., batches in batches()) {
        let bytes = encode_entry(epoch, &batches).unwrap();
        let e = decode_entry(anywhere(position), OBJECT, bytes).unwrap();
        prop_assert_eq!(e.position, position);
        prop_assert_eq!(e.writer_epoch, epoch);
        prop_assert!(!e.is_sentinel);
        let schema = batches[0].schema();
        prop_assert_eq!(e.schema.as_ref(), schema.as_ref());
        prop_assert_eq!(&e.batches, &batches);
    }

    /// Every fence sentinel decodes to its epoch and no batches.
    #[test]
    fn fence_sentinels_round_trip(epoch in any::<u64>()) {
        let e = decode_entry(anywhere(3), OBJECT, encode_sentinel(epoch).unwrap()).unwrap();
        prop_assert!(e.is_sentinel);
        prop_assert_eq!(e.writer_epoch, epoch);
        prop_assert!(e.batches.is_empty());
    }

    /// Arbitrary bytes (with or without a plausible IPC prefix) never panic the decoder.
    #[test]
    fn arbitrary_bytes_decode_to_ok_or_corrupt(
        prefix in any::<bool>(),
        len in 0u32..600,
        body in vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = Vec::new();
        if prefix {
            bytes.extend([0xFF; 4]);
            bytes.extend(len.to_le_bytes());
        }
        bytes.extend(body);
        decodes_or_is_corrupt(bytes)?;
    }

    /// A damaged entry (bits flipped, cut short, bytes inserted) decodes to `Corrupt`, or
    /// to rows that are exactly the ones encoded; the decoder never panics.
    #[test]
    fn damaged_entries_decode_to_their_rows_or_corrupt(
        epoch in any::<u64>(),
        batches in batches(),
        edits in vec(edit(), 1..4),
    ) {
        let bytes = encode_entry(epoch, &batches).unwrap();
        let damaged = apply(&bytes, &edits);
        match decode_entry(anywhere(7), OBJECT, Bytes::from(damaged)) {
            Ok(e) => {
                // Only the schema message may be hit harmlessly (say, a field name): the
                // checksum covers the epoch text and every byte after the schema message.
                prop_assert_eq!(e.writer_epoch, epoch);
                prop_assert_eq!(e.batches.len(), batches.len());
                for (got, want) in e.batches.iter().zip(&batches) {
                    prop_assert_eq!(got.columns(), want.columns());
                }
            }
            Err(e) => {
                prop_assert_eq!(e.code(), ErrorCode::Corrupt, "{}", e);
                prop_assert!(e.to_string().contains(OBJECT), "{}", e);
            }
        }
    }

    /// One damaged byte anywhere in an entry (schema message included) is always
    /// reported as corrupt.
    #[test]
    fn one_damaged_byte_is_always_corrupt(
        epoch in any::<u64>(),
        batches in batches(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
    ) {
        let bytes = encode_entry(epoch, &batches).unwrap();
        let damaged = apply(&bytes, &[Edit::Xor(at, xor)]);
        let e = decode_entry(anywhere(7), OBJECT, Bytes::from(damaged)).unwrap_err();
        prop_assert_eq!(e.code(), ErrorCode::Corrupt, "{}", e);
    }

    /// Every manifest version reads back exactly as written.
    #[test]
    fn manifests_round_trip(m in manifest()) {
        let raw = Arc::new(InMemory::new());
        let (ms, _) = manifests(&raw);
        runtime().block_on(async {
            prop_assert_eq!(ms.write(&m).await.unwrap(), CreateOutcome::Created);
            let mut read = ms.read_version(m.version).await.unwrap().expect("written");
            prop_assert!(read.checksum.is_some(), "memwal writes a checksum");
            read.checksum = None;
            prop_assert_eq!(&read, &m);
            Ok(())
        })?;
    }

    /// Arbitrary bytes at a manifest path read as that version or as `Corrupt`.
    #[test]
    fn arbitrary_manifest_bytes_read_as_that_version_or_corrupt(
        version in 1u64..,
        bytes in vec(any::<u8>(), 0..400),
    ) {
        read_planted(version, bytes)?;
    }

    /// A damaged manifest reads as `Corrupt`, or as exactly what was written (one byte
    /// damaged) or a version of its own name (several edits); never a panic.
    #[test]
    fn damaged_manifests_read_as_written_or_corrupt(
        m in manifest(),
        edits in vec(edit(), 1..4),
    ) {
        let raw = Arc::new(InMemory::new());
        let (ms, paths) = manifests(&raw);
        let good = runtime().block_on(async {
            ms.write(&m).await.unwrap();
            raw.get(&paths.manifest(m.version)).await.unwrap().bytes().await.unwrap()
        });
        let single_flip = matches!(edits.as_slice(), [Edit::Xor(..)]);
        if let Some(mut read) = read_planted(m.version, apply(&good, &edits))?
            && single_flip
        {
            read.checksum = None;
            prop_assert_eq!(&read, &m);
        }
    }

    /// Bit-reversed names round-trip for every number and extension.
    #[test]
    fn bitrev64_names_round_trip(n in any::<u64>(), ext in "[a-z0-9]{1,8}") {
        let name = bitrev64_name(n, &ext);
        prop_assert_eq!(name.len(), 65 + ext.len());
        prop_assert_eq!(parse_bitrev64_name(&name), Some(n));
    }

    /// Parsing any name never panics, and accepts only `<64 binary digits>.<alnum ext>`,
    /// exactly as `bitrev64_name` would print that number.
    #[test]
    fn only_bitrev64_names_parse(name in "[01]{60,66}(\\.[a-z0-9#%.]{0,6})?|\\PC{0,80}") {
        if let Some(n) = parse_bitrev64_name(&name) {
            let (_, ext) = name.split_once('.').expect("an extension");
            prop_assert!(ext.bytes().all(|b| b.is_ascii_alphanumeric()), "{}", name);
            prop_assert_eq!(bitrev64_name(n, ext), name);
        }
    }
}
