//! Garbage collection (`docs/operations.md`, "Running a shard for months"): what it removes, what
//! it keeps, and why fencing stays sound. The invariant (see `memwal_core::gc`): no fence sentinel
//! and no entry just before one is ever collected, nothing is written at or below the low-water
//! mark, and an open whose claim was overtaken before its sentinel landed fails.

mod support;

use std::sync::Arc;
use std::time::Duration;

use memwal_core::gc::{self, GcOptions, GcReport};
use memwal_core::store::parse_bitrev64_name;
use memwal_core::{ErrorCode, FenceReason, ShardReader, WriterConfig};
use support::*;

/// The numbers of the bit-reversed object names in `dir` (WAL positions, manifest versions),
/// ascending.
async fn numbers_in(backend: &Backend, dir: &object_store::path::Path) -> Vec<u64> {
    let mut out: Vec<u64> = backend
        .object_names(dir)
        .await
        .iter()
        .filter_map(|n| n.rsplit('/').next().and_then(parse_bitrev64_name))
        .collect();
    out.sort_unstable();
    out
}

/// WAL positions present in `shard`, ascending.
async fn wal_positions(backend: &Backend, shard: &Shard) -> Vec<u64> {
    numbers_in(backend, &shard.store.shard_paths(shard.id).wal_dir()).await
}

/// Manifest versions present in `shard`, ascending.
async fn manifest_versions(backend: &Backend, shard: &Shard) -> Vec<u64> {
    numbers_in(backend, &shard.store.shard_paths(shard.id).manifest_dir()).await
}

/// Durable, no background collection (tests collect when they choose).
fn manual_gc() -> WriterConfig {
    durable().with(|c| c.gc = false)
}

fn peer_claimed(e: &memwal_core::Error) -> bool {
    e.fence_reason() == Some(FenceReason::PeerClaimedEpoch)
}

#[tokio::test]
async fn collection_removes_flushed_entries_but_keeps_fence_sentinels_and_their_predecessors() {
    for (backend, shard) in each_backend() {
        // Epoch 1: entries 1-5, flushed at close. Epoch 2: sentinel 6, entries 7-10, flushed.
        // Epoch 3: sentinel 11.
        shard.close_after(manual_gc(), batch_per_id(0..5)).await;
        shard.close_after(manual_gc(), batch_per_id(5..9)).await;
        let w = shard
            .open(manual_gc().with(|c| c.gc_keep_manifest_versions = 2))
            .await;
        assert_eq!(w.wal_stats().fence_sentinel_position, Some(11));
        assert_eq!(shard.manifest().await.wal_low_water, 10);
        let report = w.collect_garbage().await.unwrap();
        assert_eq!(
            (
                report.low_water,
                report.wal_entries_removed,
                report.wal_entries_kept
            ),
            (10, 7, 3),
            "{}: {report:?}",
            backend.name
        );
        // Kept: sentinel 6, entry 5 before it, and entry 10 before sentinel 11.
        assert_eq!(wal_positions(&backend, &shard).await, vec![5, 6, 10, 11]);
        // Versions: 1 claim, 2 commit, 3 claim, 4 commit, 5 claim; the newest two are kept.
        assert_eq!(report.manifest_versions_removed, 3);
        assert_eq!(manifest_versions(&backend, &shard).await, vec![4, 5]);
        assert!(report.bytes_removed > 0);
        assert_eq!(scanned_ids(&w).await, (0..9).collect::<Vec<_>>());

        // A second run finds nothing more to remove.
        let again = w.collect_garbage().await.unwrap();
        assert_eq!(
            (again.wal_entries_removed, again.manifest_versions_removed),
            (0, 0)
        );
        w.put(vec![batch([9])]).await.unwrap();
        w.abort().await.unwrap();

        // A damaged or stale version hint must not make the collected history look empty:
        // taken for an unclaimed shard, a claim would recreate version 1.
        let hint = shard.store.shard_paths(shard.id).version_hint();
        for stale in [&b"{\"version\":1}"[..], b"garbage"] {
            backend.plant(&hint, bytes::Bytes::from_static(stale)).await;
            assert_eq!(shard.manifests().latest_version().await.unwrap(), 5);
        }
        let next = shard.open(manual_gc()).await;
        assert_eq!(next.epoch(), 4);
        assert_eq!(scanned_ids(&next).await, (0..10).collect::<Vec<_>>());
        shard.close_and_assert_recovered(next, 0..10).await;
        assert!(!manifest_versions(&backend, &shard).await.contains(&1));
    }
}

/// The invariant's test: a writer paused in the middle of an append while three newer epochs
/// claim, write, flush and collect wakes up, and every one of its appends is rejected. Were a
/// fence sentinel collected, its append would land in the freed slot and be acknowledged,
/// below the replay cursor, where no reader looks.
#[tokio::test]
async fn a_writer_paused_across_collection_and_newer_epochs_has_every_append_rejected() {
    for (backend, shard) in each_backend() {
        let a = Arc::new(shard.open_and_put(manual_gc(), [batch([1])]).await);
        let pause = backend.store.faults().pause_at("wal-append-before-put");
        let first = spawn_put(&a, vec![batch([100])]);
        pause.reached().await;
        let queued = spawn_put(&a, vec![batch([101])]);

        // Epochs 2 and 3 write and flush; epoch 4 collects.
        shard
            .close_after(manual_gc(), [batch([2]), batch([3])])
            .await;
        shard.close_after(manual_gc(), [batch([4])]).await;
        let d = shard.open(manual_gc()).await;
        let report = d.collect_garbage().await.unwrap();
        assert!(
            report.wal_entries_removed > 0,
            "{}: {report:?}",
            backend.name
        );

        pause.release();
        for (what, put) in [("in-flight", first), ("queued", queued)] {
            let e = put.await.unwrap().unwrap_err();
            assert!(peer_claimed(&e), "{} {what} put: {e}", backend.name);
        }
        let e = a.put(vec![batch([102])]).await.unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        assert_eq!(scanned_ids(&d).await, vec![1, 2, 3, 4]);
        shard.close_and_assert_recovered(d, [1, 2, 3, 4]).await;
    }
}

/// An open whose claim is overtaken before its sentinel lands, while the newer writers flush
/// and collect: its sentinel can land in a collected slot, below the newest cursor, where it
/// fences nobody. It must fail, not acknowledge puts into slots no replay reads.
#[tokio::test]
async fn an_open_overtaken_before_its_sentinel_across_collection_fails() {
    for (backend, shard) in each_backend() {
        // Entry 1 flushed (cursor 1); epoch 2: sentinel 2, entries 3-4 unflushed.
        shard.close_after(manual_gc(), [batch([1])]).await;
        let a = shard
            .open_and_put(manual_gc(), [batch([2]), batch([3])])
            .await;
        let pause = backend.store.faults().pause_at("open-before-sentinel");
        let slow = {
            let shard = shard.clone();
            tokio::spawn(async move { shard.try_open(manual_gc()).await })
        };
        pause.reached().await;
        // Epoch 2 has not seen the claim yet: entry 5.
        a.put(vec![batch([4])]).await.unwrap();
        // Epoch 4: sentinel 6, entries 7-10, flushed (cursor 10); epoch 5 collects.
        shard.close_after(manual_gc(), batch_per_id(5..9)).await;
        let c = shard.open(manual_gc()).await;
        c.collect_garbage().await.unwrap();
        assert!(
            !wal_positions(&backend, &shard).await.contains(&7),
            "{}: slot 7 collected",
            backend.name
        );

        pause.release();
        let e = slow.await.unwrap().unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        let expected: Vec<i32> = (1..9).collect();
        assert_eq!(scanned_ids(&c).await, expected);
        shard.close_and_assert_recovered(c, expected).await;
        drop(a);
    }
}

#[tokio::test]
async fn a_tailer_reading_a_collected_position_is_told_where_to_resume() {
    for (backend, shard) in each_backend() {
        // One epoch, no sentinel: everything flushed is collected.
        shard.close_after(manual_gc(), batch_per_id(0..5)).await;
        let report = gc::collect(&shard.store, shard.id, &GcOptions::default())
            .await
            .unwrap();
        assert_eq!(
            report.wal_entries_removed, 5,
            "{}: {report:?}",
            backend.name
        );
        assert!(wal_positions(&backend, &shard).await.is_empty());

        let t = shard.tailer().await;
        let e = t.read(3).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Truncated, "{e}");
        assert_eq!(e.first_available(), Some(6));
        assert!(
            e.to_string().contains("first available position is 6"),
            "{e}"
        );
        assert_eq!(t.first_position().await.unwrap(), 6);
        // The tip is not taken for position 1 of an empty WAL.
        assert_eq!(t.next_position().await.unwrap(), 6);
        t.verify().await.unwrap();
        assert!(t.read(6).await.unwrap().is_none());

        // The next writer appends after the mark, and a tailer resumes there.
        let w = shard.open_and_put(manual_gc(), [batch([5])]).await;
        assert_eq!(w.wal_stats().fence_sentinel_position, Some(6));
        let entry = t.read(7).await.unwrap().expect("entry 7");
        assert_eq!(ids(&entry.batches), vec![5]);
        shard.close_and_assert_recovered(w, 0..6).await;
    }
}

#[tokio::test]
async fn unlisted_generation_folders_go_only_when_passed_and_old_enough() {
    for (backend, shard) in each_backend() {
        shard.close_after(manual_gc(), [batch([1])]).await;
        // current_generation is 2: a folder of generation 1 lost to the committed one; one of
        // generation 7 may be a flush in progress.
        let dir = shard.store.shard_paths(shard.id).shard_dir().clone();
        for name in ["deadbeef_gen_1", "cafebabe_gen_7"] {
            backend
                .plant_file(&dir.clone().join(name), "data.parquet", b"PAR1")
                .await;
        }
        let patient = GcOptions {
            grace: Duration::from_secs(3600),
            ..GcOptions::default()
        };
        let report = gc::collect(&shard.store, shard.id, &patient).await.unwrap();
        assert!(report.generation_dirs_removed.is_empty(), "{report:?}");
        let eager = GcOptions {
            grace: Duration::ZERO,
            ..GcOptions::default()
        };
        let dry = gc::collect(
            &shard.store,
            shard.id,
            &GcOptions {
                dry_run: true,
                ..eager.clone()
            },
        )
        .await
        .unwrap();
        assert_eq!(dry.generation_dirs_removed, vec!["deadbeef_gen_1"]);
        assert!(dry.dry_run);
        let report: GcReport = gc::collect(&shard.store, shard.id, &eager).await.unwrap();
        assert_eq!(
            report.generation_dirs_removed,
            vec!["deadbeef_gen_1"],
            "{}",
            backend.name
        );
        assert_eq!(report.generation_dirs_kept, vec!["cafebabe_gen_7"]);
        let r = ShardReader::open(shard.store.clone(), shard.id)
            .await
            .unwrap();
        assert_eq!(
            r.uncommitted_generations().await.unwrap(),
            vec!["cafebabe_gen_7"]
        );
        shard.assert_recovered([1]).await;
    }
}

#[tokio::test]
async fn a_dry_run_removes_nothing() {
    for (backend, shard) in each_backend() {
        shard.close_after(manual_gc(), batch_per_id(0..3)).await;
        let before = backend.shard_objects(shard.id).await;
        let options = GcOptions {
            dry_run: true,
            keep_manifest_versions: 2,
            ..GcOptions::default()
        };
        let report = gc::collect(&shard.store, shard.id, &options).await.unwrap();
        assert_eq!(report.wal_entries_removed, 3);
        assert_eq!(backend.shard_objects(shard.id).await, before);
    }
}

#[tokio::test]
async fn options_out_of_range_are_refused() {
    let (_, shard) = each_backend().remove(0);
    shard.close_after(manual_gc(), [batch([1])]).await;
    let e = gc::collect(
        &shard.store,
        shard.id,
        &GcOptions {
            keep_manifest_versions: 1,
            ..GcOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    assert!(
        e.to_string()
            .contains("keepManifestVersions must be at least 2"),
        "{e}"
    );
    let e = shard
        .try_open(durable().with(|c| c.gc_keep_manifest_versions = 1))
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("gc_keep_manifest_versions"), "{e}");
    let e = shard
        .try_open(durable().with(|c| c.gc_interval_ms = 0))
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("gc_interval_ms"), "{e}");
}

#[tokio::test]
async fn the_writer_collects_in_the_background() {
    for (backend, shard) in each_backend() {
        let config = durable().with(|c| {
            c.gc_interval_ms = 10;
            c.max_memtable_batches = 2;
        });
        let w = shard.open(config).await;
        for i in 0..6 {
            w.put(vec![batch([i])]).await.unwrap();
        }
        // Three rotations: the mark reaches 6 once the last flush commits, and collection
        // then removes entries 1-6 (there is no sentinel in epoch 1).
        within_hang_guard("background collection", async {
            loop {
                let positions = wal_positions(&backend, &shard).await;
                if shard.manifest().await.wal_low_water == 6 && positions.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert_eq!(scanned_ids(&w).await, (0..6).collect::<Vec<_>>());
        shard.close_and_assert_recovered(w, 0..6).await;
    }
}

/// Collection removes files while other processes list the same directory; a listing that
/// read a name just before its file was removed must skip it, as an object store's would,
/// not fail. (The soak test found a writer's open failing this way.)
#[tokio::test]
async fn a_listing_skips_a_file_removed_while_it_ran() {
    use memwal_core::Store;
    use memwal_core::store::fs::{FileInfo, Fs, StdFs};
    use std::io;
    use std::path::Path;

    /// The real file system, except that every directory also names a file that is gone.
    #[derive(Debug)]
    struct RemovedMidListing(StdFs);
    const GONE: &str = "0000000000000000000000000000000000000000000000000000000000000001.arrow";
    impl Fs for RemovedMidListing {
        fn create_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
            self.0.create_file(path, data, sync)
        }
        fn stage(
            &self,
            dir: &Path,
            data: &[u8],
            sync: bool,
        ) -> io::Result<memwal_core::store::fs::Staged> {
            self.0.stage(dir, data, sync)
        }
        fn publish_first_free(
            &self,
            staged: &memwal_core::store::fs::Staged,
            paths: &[std::path::PathBuf],
        ) -> io::Result<usize> {
            self.0.publish_first_free(staged, paths)
        }
        fn replace_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
            self.0.replace_file(path, data, sync)
        }
        fn sync_file(&self, path: &Path) -> io::Result<()> {
            self.0.sync_file(path)
        }
        fn create_dir(&self, path: &Path) -> io::Result<()> {
            self.0.create_dir(path)
        }
        fn sync_dir(&self, path: &Path) -> io::Result<()> {
            self.0.sync_dir(path)
        }
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.0.read(path)
        }
        fn stat(&self, path: &Path) -> io::Result<FileInfo> {
            self.0.stat(path)
        }
        fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
            let mut names = self.0.read_dir(path)?;
            names.push((GONE.to_string(), false));
            Ok(names)
        }
        fn remove_file(&self, path: &Path) -> io::Result<()> {
            self.0.remove_file(path)
        }
        fn remove_dir(&self, path: &Path) -> io::Result<()> {
            self.0.remove_dir(path)
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let store = Store::on_fs(
        std::sync::Arc::new(RemovedMidListing(StdFs)),
        dir.path().to_path_buf(),
        true,
    );
    let shard = Shard::new(&store);
    shard.close_after(manual_gc(), batch_per_id(0..3)).await;
    // A writer's open lists the WAL (the hole check), as do collection and the tailer.
    let w = shard.open(manual_gc()).await;
    w.collect_garbage().await.unwrap();
    shard.tailer().await.verify().await.unwrap();
    shard.close_and_assert_recovered(w, 0..3).await;
}
