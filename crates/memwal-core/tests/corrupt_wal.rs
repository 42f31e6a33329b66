//! Recovery from torn and corrupt WAL entries, leftover staging files, and damaged generation
//! files and manifest versions. Recovery (`ShardWriter::open` + `scan`, `ShardReader::open` +
//! `scan`, `WalTailer`) must either ignore what was never published, or fail loudly with
//! `ErrorCode::Corrupt` naming the damaged object. It must never return a row that was not
//! put, and never silently drop an acknowledged one: when it succeeds, it returns exactly the
//! acknowledged rows.
//!
//! Every damaged shard is a fresh copy of one baseline shard (written by a durable writer that
//! then crashed), on the local store and in memory; the damage is planted through the raw
//! store, bypassing memwal.
//!
//! CI samples offsets and bits with a stride, and recovers at most 16 damaged copies per test
//! on the local store, whose writer opens cost several fsyncs (a few seconds):
//!   cargo test -p memwal-core --test corrupt_wal
//! The long variant truncates at every offset and flips every bit of every byte, on both
//! stores (several minutes, most of them fsyncs):
//!   MEMWAL_CORRUPT_LONG=1 cargo test -p memwal-core --release --test corrupt_wal

mod support;

use std::io::Cursor;

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use bytes::Bytes;
use futures::StreamExt;
use memwal_core::manifest::ShardManifest;
use memwal_core::store::bitrev64_name;
use memwal_core::wal::entry::encode_entry;
use memwal_core::{Error, ErrorCode, ShardReader, ShardWriter, WalTailer};
use object_store::path::Path;
use support::*;
use uuid::Uuid;

/// Damaged copies recovered concurrently (each is a separate shard copy).
const PARALLEL: usize = 8;
/// Variants per damage test on the local store in CI (see `Baseline::thin`).
const LOCAL_CI_VARIANTS: usize = 16;

fn long() -> bool {
    long_run("MEMWAL_CORRUPT_LONG")
}

type Row = (i32, Option<String>);

/// Every row of `batches` as (id, name), in order; a batch of another schema (as a damaged
/// schema message could produce) becomes one row describing it, which matches nothing put.
fn contents(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let id = b.column(0).as_any().downcast_ref::<Int32Array>();
        let name = b.column(1).as_any().downcast_ref::<StringArray>();
        let (Some(id), Some(name), 2) = (id, name, b.num_columns()) else {
            out.push((
                i32::MIN,
                Some(format!("a batch of schema {:?}", b.schema())),
            ));
            continue;
        };
        if b.schema().fields() != schema().fields() {
            out.push((
                i32::MIN,
                Some(format!("a batch of schema {:?}", b.schema())),
            ));
        }
        for i in 0..b.num_rows() {
            out.push((
                id.value(i),
                (!name.is_null(i)).then(|| name.value(i).to_string()),
            ));
        }
    }
    out
}

fn rows_of(ids: impl IntoIterator<Item = i32>) -> Vec<Row> {
    ids.into_iter()
        .map(|i| (i, Some(format!("n{i}"))))
        .collect()
}

/// `None` if `e` is `Corrupt` and names `object`; otherwise the violation.
fn loud(what: &str, e: &Error, object: &str) -> Option<String> {
    (e.code() != ErrorCode::Corrupt || !e.to_string().contains(object)).then(|| {
        format!(
            "{what}: expected CORRUPT naming {object}, got {:?}: {e}",
            e.code()
        )
    })
}

/// A shard written by one durable writer that then crashed: WAL entries 1-5 (entries 1-3 also
/// flushed as generations 1 and 2, so the replay cursor is 3), manifest version 3.
struct Baseline {
    backend: Backend,
    shard: Uuid,
    objects: Vec<(Path, Bytes)>,
    /// The rows of every acknowledged put, in order.
    expected: Vec<Row>,
    /// WAL entries and their rows.
    entries: Vec<(u64, Vec<Row>)>,
    /// The first empty WAL position.
    tip: u64,
}

impl Baseline {
    async fn new(backend: Backend) -> Self {
        let shard = Shard::new(&backend.store);
        let w = shard.open(durable()).await;
        w.put(vec![batch([0, 1])]).await.unwrap();
        w.put(vec![batch([2, 3])]).await.unwrap();
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        w.put(vec![batch([4, 5])]).await.unwrap();
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        w.put(vec![batch([6, 7])]).await.unwrap();
        w.put(vec![batch([8]), batch([9, 10])]).await.unwrap();
        w.abort().await.unwrap();
        let m = shard.manifest().await;
        assert_eq!(
            (m.version, m.replay_after_wal_entry_position),
            (3, 3),
            "baseline layout"
        );
        let entries = vec![
            (1, rows_of([0, 1])),
            (2, rows_of([2, 3])),
            (3, rows_of([4, 5])),
            (4, rows_of([6, 7])),
            (5, rows_of(8..=10)),
        ];
        let prefix = backend.store.shard_paths(shard.id).shard_dir().clone();
        let objects = backend.snapshot(&prefix).await;
        let base = Baseline {
            shard: shard.id,
            objects,
            expected: rows_of(0..=10),
            entries,
            tip: 6,
            backend,
        };
        // The undamaged copy recovers exactly the acknowledged rows.
        let copy = base.restore().await;
        let v = base.recover(&copy, "<nothing damaged>").await;
        assert!(v.is_empty(), "undamaged baseline: {v:?}");
        base
    }

    fn paths(&self) -> memwal_core::store::ShardPaths {
        self.backend.store.shard_paths(self.shard)
    }

    fn bytes_of(&self, path: &Path) -> Bytes {
        self.objects
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .unwrap_or_else(|| panic!("{path} is not in the baseline"))
    }

    /// The path of generation `i` (0-based) of the latest manifest.
    fn generation_file(&self, i: usize) -> Path {
        let m = self.bytes_of(&self.paths().manifest(3));
        let m = <ShardManifest as prost::Message>::decode(m).unwrap();
        self.paths().generation_file(&m.flushed_generations[i].path)
    }

    /// A fresh copy of the baseline shard.
    async fn restore(&self) -> Backend {
        let b = self.backend.fresh();
        for (path, bytes) in &self.objects {
            b.plant(path, bytes.clone()).await;
        }
        b
    }

    /// Every way a reader, a tailer and a writer can recover `b`, checked: each returns the
    /// acknowledged rows exactly, or fails with `Corrupt` naming `damaged`.
    async fn recover(&self, b: &Backend, damaged: &str) -> Vec<String> {
        let mut v = Vec::new();
        let mut same = |what: &str, got: Vec<Row>, want: &[Row]| {
            if got != want {
                v.push(format!("{what} returned {got:?}, expected {want:?}"));
            }
        };
        let mut found = Vec::new();
        match ShardReader::open(b.store.clone(), self.shard).await {
            Ok(r) => match r.scan().await {
                Ok(s) => same("reader scan", contents(&s.batches), &self.expected),
                Err(e) => found.extend(loud("reader scan", &e, damaged)),
            },
            Err(e) => found.extend(loud("reader open", &e, damaged)),
        }
        let t = WalTailer::open(b.store.clone(), self.shard).await.unwrap();
        match t.next_position().await {
            Ok(n) if n == self.tip => {}
            Ok(n) => found.push(format!("tailer tip is {n}, expected {}", self.tip)),
            Err(e) => found.extend(loud("tailer tip", &e, damaged)),
        }
        for (position, rows) in &self.entries {
            match t.read(*position).await {
                Ok(Some(e)) => same(
                    &format!("tailer entry {position}"),
                    contents(&e.batches),
                    rows,
                ),
                Ok(None) => found.push(format!("tailer lost entry {position}")),
                Err(e) => found.extend(loud(&format!("tailer entry {position}"), &e, damaged)),
            }
        }
        match ShardWriter::open(b.store.clone(), schema(), on(self.shard, durable())).await {
            Ok(w) => {
                match w.scan().await {
                    Ok(batches) => same("writer scan", contents(&batches), &self.expected),
                    Err(e) => found.extend(loud("writer scan", &e, damaged)),
                }
                w.abort().await.unwrap();
            }
            Err(e) => found.extend(loud("writer open", &e, damaged)),
        }
        v.extend(found);
        v
    }

    /// On the local store, whose every writer open costs several fsyncs, CI recovers an
    /// evenly spaced sample of the variants (the decoders are the same as in memory, which
    /// gets them all); the long variant recovers all of them.
    fn thin(&self, variants: Vec<(String, Bytes)>) -> Vec<(String, Bytes)> {
        if long() || self.backend.path().is_none() || variants.len() <= LOCAL_CI_VARIANTS {
            return variants;
        }
        let step = variants.len().div_ceil(LOCAL_CI_VARIANTS);
        variants.into_iter().step_by(step).collect()
    }

    /// Plants each variant of `target` in a fresh copy and recovers it.
    async fn damage(&self, target: &Path, variants: Vec<(String, Bytes)>) -> Vec<String> {
        assert!(!variants.is_empty());
        let variants = self.thin(variants);
        let started = tokio::time::Instant::now();
        let n = variants.len();
        let found: Vec<String> = futures::stream::iter(variants)
            .map(|(label, bytes)| async move {
                let b = self.restore().await;
                b.plant(target, bytes).await;
                self.recover(&b, target.as_ref())
                    .await
                    .into_iter()
                    .map(|v| format!("{} {target} {label}: {v}", b.name))
                    .collect::<Vec<_>>()
            })
            .buffer_unordered(PARALLEL)
            .flat_map(futures::stream::iter)
            .collect()
            .await;
        eprintln!(
            "{}: {n} variants of {target} in {:?}",
            self.backend.name,
            started.elapsed()
        );
        found
    }
}

/// Truncations of `bytes`: every offset (long), or every `stride`-th plus the last 16 (CI).
fn truncations(bytes: &Bytes, stride: usize) -> Vec<(String, Bytes)> {
    let n = bytes.len();
    let mut cuts: Vec<usize> = if long() {
        (0..n).collect()
    } else {
        (0..n)
            .step_by(stride)
            .chain(n.saturating_sub(16)..n)
            .collect()
    };
    cuts.sort();
    cuts.dedup();
    cuts.into_iter()
        .map(|c| (format!("cut at {c}/{n}"), bytes.slice(..c)))
        .collect()
}

/// `bytes` with one bit flipped, at each `(byte, bit)`.
fn flips(bytes: &Bytes, at: impl IntoIterator<Item = (usize, u8)>) -> Vec<(String, Bytes)> {
    at.into_iter()
        .map(|(i, bit)| {
            let mut v = bytes.to_vec();
            v[i] ^= 1 << bit;
            (format!("bit {bit} of byte {i} flipped"), Bytes::from(v))
        })
        .collect()
}

/// Every bit of every byte in `range` (long), or one bit of every `stride`-th byte (CI).
fn sample(range: std::ops::Range<usize>, stride: usize) -> Vec<(usize, u8)> {
    if long() {
        range.flat_map(|i| (0..8).map(move |b| (i, b))).collect()
    } else {
        range.step_by(stride).map(|i| (i, (i % 8) as u8)).collect()
    }
}

/// Every bit of every byte in `range`.
fn every_bit(range: std::ops::Range<usize>) -> Vec<(usize, u8)> {
    range.flat_map(|i| (0..8).map(move |b| (i, b))).collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> std::ops::Range<usize> {
    let at = haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(needle)));
    at..at + needle.len()
}

/// The byte ranges of the newest entry: its schema message (with the checksum metadata key and
/// value, and the epoch value), its body, its end-of-stream marker.
struct EntryLayout {
    schema: std::ops::Range<usize>,
    checksum_key: std::ops::Range<usize>,
    checksum_value: std::ops::Range<usize>,
    epoch_key: std::ops::Range<usize>,
    body: std::ops::Range<usize>,
    eos: std::ops::Range<usize>,
}

fn layout(bytes: &[u8]) -> EntryLayout {
    assert_eq!(&bytes[..4], &[0xFF; 4], "continuation marker");
    let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let schema_end = 8 + len;
    let reader = arrow_ipc::reader::StreamReader::try_new(Cursor::new(bytes), None).unwrap();
    let sum = reader.schema().metadata()["memwal_checksum"].clone();
    EntryLayout {
        schema: 0..schema_end,
        checksum_key: find(bytes, b"memwal_checksum"),
        checksum_value: find(bytes, sum.as_bytes()),
        epoch_key: find(bytes, b"writer_epoch"),
        body: schema_end..bytes.len() - 8,
        eos: bytes.len() - 8..bytes.len(),
    }
}

/// On every backend: the baseline with `target` (picked from it) replaced by each of the
/// `variants` of its bytes recovers exactly the acknowledged rows or fails loudly.
async fn assert_damage_is_loud(
    target: impl Fn(&Baseline) -> Path,
    variants: impl Fn(&Bytes) -> Vec<(String, Bytes)>,
) {
    for backend in Backend::all() {
        let base = Baseline::new(backend).await;
        let target = target(&base);
        let variants = variants(&base.bytes_of(&target));
        assert_no_violations(base.damage(&target, variants).await);
    }
}

/// A torn newest WAL entry, cut at many offsets, fails recovery loudly and never loses or
/// invents a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_newest_wal_entry_fails_loudly_at_every_offset() {
    assert_damage_is_loud(|b| b.paths().wal_entry(5), |bytes| truncations(bytes, 23)).await;
}

/// Bit flips in the newest WAL entry (its length prefix, schema message, checksum and
/// epoch metadata, body and end-of-stream marker) are reported as corrupt, or are harmless and
/// recover exactly the acknowledged rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_in_the_newest_wal_entry_never_change_recovered_rows() {
    assert_damage_is_loud(
        |b| b.paths().wal_entry(5),
        |bytes| {
            let l = layout(bytes);
            let mut at = sample(0..bytes.len(), 13);
            at.extend(every_bit(0..8));
            at.extend(every_bit(l.checksum_value.clone()));
            at.extend(sample(l.checksum_key.clone(), 1));
            at.extend(sample(l.epoch_key.clone(), 1));
            at.extend(every_bit(l.epoch_key.end..l.epoch_key.end + 8));
            at.extend(every_bit(l.eos.clone()));
            at.sort();
            at.dedup();
            for (what, range) in [("schema message", &l.schema), ("body", &l.body)] {
                assert!(
                    at.iter().filter(|(i, _)| range.contains(i)).count() >= 8,
                    "too few flips in the {what}"
                );
            }
            flips(bytes, at)
        },
    )
    .await;
}

/// A damaged entry in the middle of the WAL fails recovery instead of silently ending the
/// WAL there (which would drop the acknowledged entry after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_entry_mid_wal_fails_loudly_instead_of_ending_the_wal() {
    assert_damage_is_loud(
        |b| b.paths().wal_entry(4),
        |bytes| {
            let mut variants = truncations(bytes, bytes.len() / 5);
            variants.extend(flips(bytes, sample(layout(bytes).body, 17)));
            variants
        },
    )
    .await;
}

/// A damaged generation Parquet file fails every scan that reads it with `Corrupt` naming
/// the file, or leaves the rows intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_generation_file_fails_loudly() {
    assert_damage_is_loud(|b| b.generation_file(0), cuts_and_flips(97, 11)).await;
}

/// A damaged latest manifest version (cut anywhere, or any bit flipped) fails recovery
/// with `Corrupt` naming it, or is harmless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_manifest_version_fails_loudly() {
    assert_damage_is_loud(|b| b.paths().manifest(3), cuts_and_flips(3, 3)).await;
}

/// Cuts every `cut_stride` bytes, and flips at every `flip_stride`-th byte.
fn cuts_and_flips(
    cut_stride: usize,
    flip_stride: usize,
) -> impl Fn(&Bytes) -> Vec<(String, Bytes)> {
    move |bytes| {
        let mut variants = truncations(bytes, cut_stride);
        variants.extend(flips(bytes, sample(0..bytes.len(), flip_stride)));
        variants
    }
}

/// Staging files a crashed process could leave: memwal's own (`.staging-<hex>-<name>`) and
/// `object_store`'s (`<name>#<n>`), holding complete or torn entries and manifests that were
/// never published, at and past the WAL tip and the latest manifest version.
async fn plant_staging_files(b: &Backend, base: &Baseline) {
    let paths = base.paths();
    let wal = paths.wal_dir();
    let manifest_dir = paths.manifest_dir();
    let phantom = encode_entry(1, &[batch([100, 101])]).unwrap();
    let other = encode_entry(7, &[batch([102])]).unwrap();
    let wal_name = |p: u64| bitrev64_name(p, "arrow");
    let files: Vec<(&Path, String, Bytes)> = vec![
        (
            &wal,
            format!(".staging-00000000deadbeef-{}", wal_name(6)),
            phantom.clone(),
        ),
        (
            &wal,
            format!(".staging-0000000000c0ffee-{}", wal_name(7)),
            phantom.slice(..phantom.len() / 2),
        ),
        (&wal, format!("{}#1", wal_name(6)), other.clone()),
        (&wal, format!("{}#2", wal_name(9)), phantom.clone()),
        (&wal, format!("{}#3", wal_name(2)), other),
    ];
    let fake = ShardManifest {
        version: 4,
        writer_epoch: 9,
        replay_after_wal_entry_position: 5,
        current_generation: 7,
        ..Default::default()
    };
    let fake = Bytes::from(prost::Message::encode_to_vec(&fake));
    let manifest_name = bitrev64_name(4, "binpb");
    let files = files.into_iter().chain([
        (
            &manifest_dir,
            format!(".staging-00000000deadbeef-{manifest_name}"),
            fake.clone(),
        ),
        (&manifest_dir, format!("{manifest_name}#1"), fake.clone()),
        (
            &manifest_dir,
            format!("{}#1", bitrev64_name(3, "binpb")),
            fake.slice(..3),
        ),
    ]);
    for (dir, name, bytes) in files {
        b.plant_file(dir, &name, &bytes).await;
    }
}

/// Staging files left behind in the WAL and manifest directories are ignored by readers,
/// tailers and writers, and a writer that opens over them keeps appending where the WAL really
/// ends, so a later recovery finds its acknowledged rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_staging_files_are_ignored() {
    for backend in Backend::all() {
        let base = Baseline::new(backend).await;
        let b = base.restore().await;
        plant_staging_files(&b, &base).await;
        assert_no_violations(base.recover(&b, "<nothing published is damaged>").await);

        let shard = Shard::at(&b.store, base.shard);
        let w = shard.open(durable()).await;
        assert_eq!(w.epoch(), 3, "the recover() writer took epoch 2");
        w.put(vec![batch([20, 21])]).await.unwrap();
        w.abort().await.unwrap();
        let mut expected: Vec<i32> = (0..=10).collect();
        expected.extend([20, 21]);
        shard.assert_recovered(expected.clone()).await;
        let w = shard.open(durable()).await;
        assert_eq!(ids(&w.scan().await.unwrap()), expected, "{}", b.name);
        w.close().await.unwrap();
    }
}

/// With more WAL entries than tip discovery probes one by one (so it lists the WAL), an
/// `object_store` staging file at the tip (`<tip>.arrow#1`, an append that never completed)
/// must not be taken for an entry: the next writer would leave a hole there and every entry
/// it appends after the hole would be invisible to recovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_file_at_the_tip_of_a_long_wal_is_not_taken_for_an_entry() {
    const ENTRIES: i32 = 4100; // > the 4096 HEAD probes of tip discovery
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let w = shard.open(durable()).await;
        w.put(vec![batch([0])]).await.unwrap();
        w.abort().await.unwrap();
        // Entries 2..=ENTRIES as the crashed writer (epoch 1) appended them.
        let paths = backend.store.shard_paths(shard.id);
        for id in 1..ENTRIES {
            let bytes = encode_entry(1, &[batch([id])]).unwrap();
            backend.plant(&paths.wal_entry(id as u64 + 1), bytes).await;
        }
        let torn = encode_entry(1, &[batch([-1])]).unwrap();
        let name = format!("{}#1", bitrev64_name(ENTRIES as u64 + 1, "arrow"));
        backend.plant_file(&paths.wal_dir(), &name, &torn).await;

        let w = shard.open(durable()).await;
        w.put(vec![batch([ENTRIES, ENTRIES + 1])]).await.unwrap();
        w.abort().await.unwrap();
        let expected: Vec<i32> = (0..ENTRIES + 2).collect();
        let differ = |what: &str, got: Vec<i32>| {
            let missing: Vec<_> = expected.iter().filter(|i| !got.contains(i)).collect();
            assert!(
                got == expected,
                "{} {what}: {} rows instead of {}; missing {missing:?}",
                backend.name,
                got.len(),
                expected.len()
            );
        };
        differ("reader", shard.recovered_ids().await);
        let w = shard.open(durable()).await;
        differ("writer", ids(&w.scan().await.unwrap()));
        w.abort().await.unwrap();
        let tailer = shard.tailer().await;
        let tip = tailer.next_position().await.unwrap();
        for p in 1..tip {
            assert!(
                tailer.read(p).await.unwrap().is_some(),
                "{}: hole at WAL position {p} below the tip {tip}",
                backend.name
            );
        }
    }
}
