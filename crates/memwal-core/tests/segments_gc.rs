//! Garbage collection of segment-layout shards (`memwal_core::wal::segments::collect`): what
//! it takes out of the log and what it keeps, and the races with readers, claimants and stale
//! writers that must never cost a row, driven deterministically with pause points.

mod support;

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use memwal_core::gc::{self, GcOptions, GcReport};
use memwal_core::wal::WalLayout;
use memwal_core::wal::segments::format::SegmentHeader;
use memwal_core::{ErrorCode, ShardReader, ShardWriter, WriterConfig};
use support::*;

/// Rows per put: a few puts fill a 64 KiB segment.
const ROWS: usize = 4000;

/// Durable, segment layout, small segments so that tests rotate, and collection only when a
/// test runs it.
fn segments() -> WriterConfig {
    durable().with(|c| {
        c.wal_layout = Some(WalLayout::Segments);
        c.wal_segment_bytes = 64 << 10;
        c.gc = false;
    })
}

/// Collection that removes all it may: no grace period for leftovers.
fn eager() -> GcOptions {
    GcOptions {
        keep_manifest_versions: 2,
        grace: Duration::ZERO,
        dry_run: false,
    }
}

async fn collect(shard: &Shard, options: &GcOptions) -> GcReport {
    gc::collect(&shard.store, shard.id, options).await.unwrap()
}

/// `puts` puts of [`ROWS`] rows each, ids from `from` on; the ids put.
async fn put_rows(w: &ShardWriter, from: i32, puts: i32) -> Vec<i32> {
    for i in 0..puts {
        w.put(vec![rows(from + i * ROWS as i32, ROWS)])
            .await
            .unwrap();
    }
    (from..from + puts * ROWS as i32).collect()
}

/// Commits every row `w` holds as a generation: the low-water mark reaches its last entry.
async fn flush_generation(w: &ShardWriter) {
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
}

/// The segments folder of `shard` in the local `backend`.
fn folder(backend: &Backend, shard: &Shard) -> PathBuf {
    backend
        .path()
        .unwrap()
        .join(format!("_mem_wal/{}/segments", shard.id))
}

/// The files in `dir` whose names start with `prefix` and end in `.seg` (segments: a digit),
/// with their inodes, by name.
fn files_in(dir: &std::path::Path, prefix: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().ino(),
            )
        })
        .filter(|(name, _)| name.ends_with(".seg"))
        .filter(|(name, _)| match prefix {
            "" => name.starts_with(|c: char| c.is_ascii_digit()),
            p => name.starts_with(p),
        })
        .collect();
    out.sort();
    out
}

fn segments_in(dir: &std::path::Path) -> Vec<(String, u64)> {
    files_in(dir, "")
}

fn spares_in(dir: &std::path::Path) -> Vec<(String, u64)> {
    files_in(dir, ".spare-")
}

// A flushed log leaves its segments but the last: a dry run only reports them, collection
// recycles them as spares (two at most; the rest are removed) and counts their positions as
// entries removed, and the writer's next rotations reuse the spares. Every row reads back.
#[tokio::test]
async fn collection_recycles_flushed_segments_for_the_writers_next_rotations() {
    let (backend, shard) = Backend::local().with_shard();
    let dir = folder(&backend, &shard);
    let w = shard.open(segments()).await;
    let mut ids = put_rows(&w, 0, 12).await;
    flush_generation(&w).await;
    let before = segments_in(&dir);
    assert!(before.len() >= 4, "the log rotated: {before:?}");
    std::fs::write(dir.join(".filling-crashed.seg"), [0u8; 64]).unwrap();

    let dry = collect(
        &shard,
        &GcOptions {
            dry_run: true,
            ..eager()
        },
    )
    .await;
    assert_eq!(dry.wal_segments_removed as usize, before.len() - 1);
    let (last, _) = before.last().unwrap();
    let last = SegmentHeader::decode(&std::fs::read(dir.join(last)).unwrap()).unwrap();
    assert_eq!(dry.wal_entries_removed, last.first_position - 1);
    assert_eq!(segments_in(&dir), before, "a dry run removes nothing");

    let report = collect(&shard, &eager()).await;
    assert_eq!(
        (report.wal_segments_removed, report.wal_entries_removed),
        (dry.wal_segments_removed, dry.wal_entries_removed)
    );
    assert_eq!(segments_in(&dir), before[before.len() - 1..].to_vec());
    assert!(
        !dir.join(".filling-crashed.seg").exists(),
        "a crashed allocation's leftover"
    );
    let spares = spares_in(&dir);
    assert_eq!(spares.len(), 2, "{spares:?}");
    let recycled: HashSet<u64> = before.iter().map(|(_, ino)| *ino).collect();
    assert!(spares.iter().any(|(_, ino)| recycled.contains(ino)));

    // Two rotations take both spares (the writer allocates no other while one is ready).
    ids.extend(put_rows(&w, 100_000, 8).await);
    let reused = segments_in(&dir)
        .iter()
        .filter(|(_, ino)| recycled.contains(ino))
        .count();
    assert!(reused >= 1, "a rotation reused a recycled segment");
    let reader = ShardReader::open(shard.store.clone(), shard.id)
        .await
        .unwrap();
    assert_eq!(support::ids(&reader.scan().await.unwrap().batches), ids);
    drop(w);
    let again = shard.open(segments()).await;
    assert_eq!(scanned_ids(&again).await, ids, "replay after a crash");
    // The segment that was last at the first collection is now below the mark too.
    let report = again.collect_garbage().await.unwrap();
    assert_eq!(report.wal_segments_removed, 1, "{report:?}");
    assert_eq!(scanned_ids(&again).await, ids);
}

// A scan paused between its listing of the segments and its reads, while the writer commits
// their rows as a generation and collection takes the segments: the scan reads again as of the
// newer manifest and returns every row once, never a hole or damage.
#[tokio::test]
async fn a_scan_overtaken_by_collection_reads_again_as_of_the_newer_manifest() {
    let (_backend, shard) = Backend::local().with_shard();
    let w = shard.open(segments()).await;
    let ids = put_rows(&w, 0, 12).await;
    let reader = ShardReader::open(shard.store.clone(), shard.id)
        .await
        .unwrap();
    let pause = shard.store.faults().pause_at("wal-segments-listed");
    let scan = tokio::spawn(async move { reader.scan().await });
    pause.reached().await;
    flush_generation(&w).await;
    let report = collect(&shard, &eager()).await;
    assert!(report.wal_segments_removed >= 3, "{report:?}");
    pause.release();
    let scanned = scan.await.unwrap().expect("no hole, no damage");
    assert_eq!(support::ids(&scanned.batches), ids);
}

// The same, where a collected number is back for a moment when the scan reads again (as a
// stale writer's rotation brings it back before it gives it up): a segment with no records
// where the log needs some, which is damage to the scan, but below a newer manifest's mark.
// The scan reads again as of that manifest.
#[tokio::test]
async fn a_scan_that_meets_a_collected_number_back_for_a_moment_reads_again() {
    let (backend, shard) = Backend::local().with_shard();
    let dir = folder(&backend, &shard);
    let w = shard.open(segments()).await;
    let ids = put_rows(&w, 0, 12).await;
    let reader = ShardReader::open(shard.store.clone(), shard.id)
        .await
        .unwrap();
    let pause = shard.store.faults().pause_at("wal-segments-listed");
    let scan = tokio::spawn(async move { reader.scan().await });
    pause.reached().await;
    flush_generation(&w).await;
    collect(&shard, &eager()).await;
    let back = SegmentHeader {
        seq: 1,
        epoch: 1,
        first_position: 1,
        salt: 7,
        writer_id: uuid::Uuid::new_v4(),
    };
    let mut bytes = back.encode().to_vec();
    bytes.resize(64 << 10, 0);
    std::fs::write(dir.join(format!("{:020}.seg", 1)), bytes).unwrap();
    pause.release();
    let scanned = scan
        .await
        .unwrap()
        .expect("damage below a newer mark is no damage");
    assert_eq!(support::ids(&scanned.batches), ids);
}

// A claim paused between its listing of the segments and its reads while collection takes the
// segments below its replay cursor: the open succeeds and replays every row.
#[tokio::test]
async fn a_claim_overtaken_by_collection_opens_and_replays_every_row() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = shard.open(segments()).await;
    let mut ids = put_rows(&a, 0, 12).await;
    flush_generation(&a).await;
    ids.extend(put_rows(&a, 100_000, 2).await);
    drop(a);
    let pause = backend.store.faults().pause_at("wal-segments-listed");
    let claimant = Shard::at(&backend.store, shard.id);
    let open = tokio::spawn(async move { claimant.try_open(segments()).await });
    pause.reached().await;
    let report = collect(&shard, &eager()).await;
    assert!(report.wal_segments_removed >= 3, "{report:?}");
    pause.release();
    let b = open
        .await
        .unwrap()
        .expect("the claim reads the log as it now is");
    assert_eq!(scanned_ids(&b).await, ids);
    shard.close_and_assert_recovered(b, ids).await;
}

// A stale writer stalled before an append while its successor flushes and collection runs:
// its segment, the last of its epoch, is removed rather than recycled, so the append it then
// makes lands in no segment the successor reuses. Were it recycled, the successor's next
// segment would be that file, and the stale append would overwrite its records.
#[tokio::test]
async fn a_stale_writers_append_after_collection_lands_in_no_segment() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let dir = folder(&backend, &shard);
    let a = std::sync::Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let (_, stale_inode) = segments_in(&dir).pop().unwrap();
    let pause = backend.store.faults().pause_at("wal-append-before-put");
    let stale_put = spawn_put(&a, vec![rows(1, 1)]);
    pause.reached().await;
    let other = shard.through(backend.second_handle());
    let b = other.open(segments()).await;
    let mut ids = vec![0];
    ids.extend(put_rows(&b, 1000, 8).await);
    flush_generation(&b).await;
    collect(&other, &eager()).await;
    // Only a spare that is the stale writer's file stays, so that the next rotation takes it
    // if collection recycled it.
    for (name, ino) in spares_in(&dir) {
        assert_ne!(ino, stale_inode, "the stale writer's segment is no spare");
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    ids.extend(put_rows(&b, 100_000, 6).await);
    pause.release();
    let e = stale_put.await.unwrap().unwrap_err();
    assert_eq!(e.code(), ErrorCode::Fenced, "{e}");
    drop(b);
    other.assert_recovered(ids).await;
}

// A stale writer stalled between its append and its commit, past its successor's claim, a
// generation flush and a collection of the successor's first segment: that segment said where
// the successor's replay ended, so the stale put's outcome is unknown, and it fails as such. It
// is never acknowledged: its row was written past that point, and no reader ever sees it.
#[tokio::test]
async fn a_stale_writer_whose_successors_first_segment_was_collected_never_acknowledges() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = std::sync::Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let before_append = backend.store.faults().pause_at("wal-append-before-put");
    let stale_put = spawn_put(&a, vec![rows(1, 1)]);
    before_append.reached().await;
    let other = shard.through(backend.second_handle());
    let b = other.open(segments()).await;
    // The claimant read the log before the stale record: it starts at that record's position.
    let before_recheck = backend
        .store
        .faults()
        .pause_at("wal-segments-before-recheck");
    before_append.release();
    before_recheck.reached().await;
    let mut ids = vec![0];
    ids.extend(put_rows(&b, 1000, 8).await);
    flush_generation(&b).await;
    let report = collect(&other, &eager()).await;
    assert!(report.wal_segments_removed >= 2, "{report:?}");
    before_recheck.release();
    let e = stale_put.await.unwrap().unwrap_err();
    assert_persistence_failure(&e);
    assert!(e.to_string().contains("garbage collection"), "{e}");
    drop(b);
    other.assert_recovered(ids).await;
}

// A stale writer stalled before an append that rotates, while its successor's first segment
// (numbered right after the stale writer's last) is collected: the rotation must not take that
// number again. Were it taken, the stale writer would find the successor's second segment
// after its own, read its first position as the successor's start, and acknowledge a record
// the successor never replayed.
#[tokio::test]
async fn a_stale_writers_rotation_never_takes_a_collected_number() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let dir = folder(&backend, &shard);
    let a = std::sync::Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let pause = backend.store.faults().pause_at("wal-append-before-put");
    // Larger than what is left of a 64 KiB segment: its append rotates.
    let stale_put = spawn_put(&a, vec![rows(1, 20_000)]);
    pause.reached().await;
    let other = shard.through(backend.second_handle());
    let b = other.open(segments()).await;
    let mut ids = vec![0];
    // Into a second segment of its own, not a third.
    ids.extend(put_rows(&b, 100_000, 2).await);
    flush_generation(&b).await;
    let report = collect(&other, &eager()).await;
    assert_eq!(report.wal_segments_removed, 2, "{report:?}");
    let numbers_before = segments_in(&dir);
    assert_eq!(numbers_before.len(), 1);
    pause.release();
    let e = stale_put.await.unwrap().unwrap_err();
    assert_peer_claimed(&e);
    assert_eq!(segments_in(&dir), numbers_before, "no number came back");
    drop(b);
    other.assert_recovered(ids).await;
}

// On an object-layout shard collection works as before, and reports no segments.
#[tokio::test]
async fn an_object_layout_shard_is_collected_as_before() {
    let (_backend, shard) = Backend::local().with_shard();
    let objects = segments().with(|c| c.wal_layout = Some(WalLayout::Objects));
    shard.close_after(objects, batch_per_id(0..5)).await;
    let report = collect(&shard, &eager()).await;
    assert_eq!(
        (report.wal_entries_removed, report.wal_segments_removed),
        (5, 0)
    );
    shard.assert_recovered(0..5).await;
}
