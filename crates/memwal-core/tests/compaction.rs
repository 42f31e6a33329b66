//! Compaction (`docs/operations.md`, "Compaction"): small generations are merged into larger ones,
//! committed atomically, so a reader never sees a row twice or zero times; what it replaced is left
//! to garbage collection, which never removes a compaction in progress.

mod support;

use std::sync::Arc;
use std::time::Duration;

use memwal_core::gc::{self, GcOptions};
use memwal_core::{FenceReason, ShardReader, WriterConfig, WriterEvent};
use support::*;

/// Every put fills a MemTable (one generation per put); compaction past 4 generations; no
/// background collection.
fn small_generations() -> WriterConfig {
    durable().with(|c| {
        c.max_memtable_batches = 1;
        c.compaction_max_generations = 4;
        c.gc = false;
    })
}

fn eager_gc() -> GcOptions {
    GcOptions {
        grace: Duration::ZERO,
        ..GcOptions::default()
    }
}

#[tokio::test]
async fn small_generations_are_merged_and_every_row_is_read_once_in_order() {
    for (backend, shard) in each_layout() {
        let w = shard.open(small_generations()).await;
        for i in 0..10 {
            w.put(vec![batch([i])]).await.unwrap();
        }
        w.close().await.unwrap();
        let m = shard.manifest().await;
        assert!(
            m.flushed_generations.len() <= 4,
            "{}: {} generations",
            backend.name,
            m.flushed_generations.len()
        );
        let rows: u64 = m
            .flushed_generations
            .iter()
            .map(|g| g.physical_rows.unwrap())
            .sum();
        assert_eq!(rows, 10);
        // Generation numbers stay increasing: the list is still oldest first.
        let numbers: Vec<u64> = m.flushed_generations.iter().map(|g| g.generation).collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
        shard.assert_recovered(0..10).await;

        // The replaced files are left for collection, which keeps every row readable.
        let reader = ShardReader::open(shard.store.clone(), shard.id)
            .await
            .unwrap();
        let replaced = reader.uncommitted_generations().await.unwrap();
        assert!(!replaced.is_empty(), "{}", backend.name);
        // Collection times an unlisted folder by its newest file: each replaced folder got one
        // at its replacement, so a reader of the older manifest has the grace period from then,
        // however old the data file is.
        let shard_dir = shard.store.shard_paths(shard.id).shard_dir().clone();
        for dir in &replaced {
            let names = backend
                .object_names(&shard_dir.clone().join(dir.as_str()))
                .await;
            assert!(
                names.iter().any(|n| n.ends_with("/replaced.json")),
                "{}: {names:?}",
                backend.name
            );
        }
        let report = gc::collect(&shard.store, shard.id, &eager_gc())
            .await
            .unwrap();
        assert_eq!(report.generation_dirs_removed, replaced);
        assert!(reader.uncommitted_generations().await.unwrap().is_empty());
        shard.assert_recovered(0..10).await;
        let next = shard.open(small_generations()).await;
        assert_eq!(scanned_ids(&next).await, (0..10).collect::<Vec<_>>());
        shard.close_and_assert_recovered(next, 0..10).await;
    }
}

#[tokio::test]
async fn the_writer_scans_the_compacted_list_while_it_runs() {
    for (backend, shard) in each_layout() {
        let w = shard.open(small_generations()).await;
        let reported = backend.store.faults().pause_at("compaction-reported");
        let mut i = 0;
        loop {
            w.put(vec![batch([i])]).await.unwrap();
            i += 1;
            tokio::select! {
                r = w.wait_for_flush_drain() => r.unwrap(),
                _ = reported.reached() => break,
            }
            assert_eq!(scanned_ids(&w).await, (0..i).collect::<Vec<_>>());
        }
        // The compaction committed and told the writer; its replaced files go at once (no
        // grace), so a scan still reading the old list would fail.
        reported.release();
        w.wait_for_flush_drain().await.unwrap();
        let report = gc::collect(&shard.store, shard.id, &eager_gc())
            .await
            .unwrap();
        assert!(
            !report.generation_dirs_removed.is_empty(),
            "{}: {report:?}",
            backend.name
        );
        assert_eq!(scanned_ids(&w).await, (0..i).collect::<Vec<_>>());
        shard.close_and_assert_recovered(w, 0..i).await;
    }
}

#[tokio::test]
async fn compaction_off_or_request_ids_in_their_window_leave_generations_alone() {
    for (backend, shard) in each_layout() {
        shard
            .close_after(
                small_generations().with(|c| c.compaction = false),
                batch_per_id(0..6),
            )
            .await;
        assert_eq!(
            shard.manifest().await.flushed_generations.len(),
            6,
            "{}",
            backend.name
        );

        // Puts with request ids whose retention window is open: their generations keep their
        // request_ids.json, which a reopened writer reads to answer retries.
        let w = shard.open(small_generations()).await;
        for i in 6..12 {
            w.put_with(
                vec![batch([i])],
                memwal_core::PutOptions::with_request_id(
                    memwal_core::RequestId::new(format!("r{i}")).unwrap(),
                ),
            )
            .await
            .unwrap();
        }
        w.close().await.unwrap();
        let m = shard.manifest().await;
        // The six old generations (no ids) were merged at the first commit past the bound;
        // the six with ids are kept apart.
        let with_ids = m
            .flushed_generations
            .iter()
            .filter(|g| g.request_ids_newest_ms.is_some())
            .count();
        assert_eq!(with_ids, 6, "{}", backend.name);
        assert_eq!(m.flushed_generations.len(), 7, "{}", backend.name);
        shard.assert_recovered(0..12).await;
    }
}

/// A writer of `shard` with five one-row generations (ids 0-4) whose compaction, started by
/// the fifth commit, is paused after writing its file and before its commit.
async fn compaction_paused_before_commit(
    backend: &Backend,
    shard: &Shard,
) -> (
    Arc<memwal_core::ShardWriter>,
    memwal_core::store::faults::PauseHandle,
) {
    let w = Arc::new(shard.open(small_generations()).await);
    for i in 0..4 {
        w.put(vec![batch([i])]).await.unwrap();
    }
    w.wait_for_flush_drain().await.unwrap();
    let pause = backend.store.faults().pause_at("compaction-before-commit");
    w.put(vec![batch([4])]).await.unwrap();
    pause.reached().await;
    (w, pause)
}

/// Collection running while a compaction has written its file but not committed it must not
/// remove that file: the commit would then list a missing generation, and its rows (already
/// out of the WAL's replay range) would be lost.
#[tokio::test]
async fn collection_never_removes_a_compaction_in_progress() {
    for (backend, shard) in each_layout() {
        let (w, pause) = compaction_paused_before_commit(&backend, &shard).await;
        let report = gc::collect(&shard.store, shard.id, &eager_gc())
            .await
            .unwrap();
        assert!(
            report.generation_dirs_removed.is_empty(),
            "{}: {report:?}",
            backend.name
        );
        assert_eq!(report.generation_dirs_kept.len(), 1, "{report:?}");
        // Once the compaction has committed and told the writer, its replaced files may go.
        let reported = backend.store.faults().pause_at("compaction-reported");
        pause.release();
        within_hang_guard("the compaction commit", reported.reached()).await;
        reported.release();
        assert_eq!(shard.manifest().await.flushed_generations.len(), 1);
        gc::collect(&shard.store, shard.id, &eager_gc())
            .await
            .unwrap();
        shard.assert_recovered(0..5).await;
        assert_eq!(scanned_ids(&w).await, (0..5).collect::<Vec<_>>());
        Arc::try_unwrap(w).ok().unwrap().close().await.unwrap();
        shard.assert_recovered(0..5).await;
    }
}

/// A writer that dies between a compaction's file and its commit leaves a folder that nothing
/// lists; its rows are still in the generations it would have replaced, and collection removes
/// it once the shard's generations have moved past its number.
#[tokio::test]
async fn an_abandoned_compaction_loses_nothing_and_is_collected_later() {
    for (backend, shard) in each_layout() {
        let (w, pause) = compaction_paused_before_commit(&backend, &shard).await;
        w.abort().await.unwrap();
        drop(pause);

        let next = shard
            .open(small_generations().with(|c| c.compaction = false))
            .await;
        assert_eq!(scanned_ids(&next).await, (0..5).collect::<Vec<_>>());
        let report = gc::collect(&shard.store, shard.id, &eager_gc())
            .await
            .unwrap();
        assert_eq!(
            report.generation_dirs_kept.len(),
            1,
            "{}: {report:?}",
            backend.name
        );
        // One more generation moves current_generation past the abandoned folder's number.
        next.put(vec![batch([5])]).await.unwrap();
        next.wait_for_flush_drain().await.unwrap();
        let report = gc::collect(&shard.store, shard.id, &eager_gc())
            .await
            .unwrap();
        assert_eq!(report.generation_dirs_removed.len(), 1, "{report:?}");
        shard.close_and_assert_recovered(next, 0..6).await;
    }
}

/// A successor claiming the shard while a compaction is about to commit fences the compaction's
/// commit: the writer is fenced with the successor's claim (`PeerClaimedEpoch`, naming the
/// holder), as for any other fenced write, not with a persistence failure.
#[tokio::test]
async fn a_compaction_overtaken_by_a_successor_fences_its_writer_with_the_claim() {
    for (backend, shard) in each_layout() {
        let (w, pause) = compaction_paused_before_commit(&backend, &shard).await;
        let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = fences.clone();
        w.on_event(Arc::new(move |e| {
            if let WriterEvent::Fenced { error } = e {
                kept.lock().unwrap().push(error);
            }
        }))
        .unwrap();
        let successor = shard
            .open(small_generations().with(|c| c.compaction = false))
            .await;
        pause.release();
        let fence = within_hang_guard("the compaction's fence", async {
            loop {
                if let Some(e) = fences.lock().unwrap().first().cloned() {
                    return e;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert_eq!(
            fence.fence_reason(),
            Some(FenceReason::PeerClaimedEpoch),
            "{}: {fence}",
            backend.name
        );
        assert!(fence.holder().is_some(), "{fence}");
        let e = w.put(vec![batch([5])]).await.unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch), "{e}");
        w.abort().await.unwrap();
        shard.close_and_assert_recovered(successor, 0..5).await;
    }
}
