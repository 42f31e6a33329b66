//! Replay on open: a new writer rebuilds its MemTables from the WAL entries after the manifest's
//! replay cursor, skipping fence sentinels; what it replays is never appended again. `ShardReader`
//! sees the same rows without claiming anything. Lance's MemWAL replays the same way
//! (`docs/format.md`, "Compatibility with Lance").

mod support;

use bytes::Bytes;
use memwal_core::wal::entry::encode_entry;
use memwal_core::{ErrorCode, ShardReader};
use support::*;

// A crashed writer's durable rows come back on the next open, already counted as in the WAL.
#[tokio::test]
async fn replay_recovers_unflushed_durable_writes() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [rows(0, 5), rows(5, 3)]).await;
        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count), (8, 2), "{}", backend.name);
        let pending = s.pending_wal_batch_count;
        assert_eq!(pending, 0, "replayed rows are already in the WAL");
        assert_eq!(scanned_ids(&b).await, (0..8).collect::<Vec<_>>());
        shard.close_and_assert_recovered(b, 0..8).await;
    }
}

// A put of several small batches makes one WAL entry, written as one record batch with the
// batches' row counts (`memwal_batch_rows`): replay slices it back, so the MemTable has the same
// batches at the same positions, and the next put's positions follow them.
#[tokio::test]
async fn replay_rebuilds_the_batches_of_a_merged_entry_at_their_positions() {
    for (backend, shard) in each_backend() {
        let a = shard.open(durable()).await;
        let first = a
            .put(vec![rows(0, 1), rows(1, 2), rows(3, 1), rows(4, 3)])
            .await
            .unwrap();
        assert_eq!(
            (first.batch_positions.start, first.batch_positions.end),
            (0, 4)
        );
        drop(a);
        let entries = shard.wal_entries().await;
        assert_eq!(entries.len(), 1, "one entry: {entries:?}");
        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count), (7, 4), "{}", backend.name);
        let next = b.put(vec![rows(7, 1)]).await.unwrap();
        assert_eq!(
            (next.batch_positions.start, next.batch_positions.end),
            (4, 5),
            "{}",
            backend.name
        );
        assert_eq!(scanned_ids(&b).await, (0..8).collect::<Vec<_>>());
        shard.close_and_assert_recovered(b, 0..8).await;
    }
}

// Opening a fresh shard replays nothing and writes no WAL entry.
#[tokio::test]
async fn replay_is_a_no_op_on_a_fresh_shard() {
    for (_backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        let s = w.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count, s.generation), (0, 0, 1));
        assert!(w.scan().await.unwrap().is_empty());
        w.close().await.unwrap();
        assert_eq!(shard.wal_len().await, 0);
    }
}

// An external compactor drains the generation list without moving the cursor; replay follows the
// cursor, not the list.
#[tokio::test]
async fn replay_follows_the_cursor_after_an_external_compaction() {
    for (backend, shard) in each_backend() {
        shard.close_after(durable(), [rows(0, 5)]).await;
        let m = shard.manifest().await;
        assert!(m.replay_after_wal_entry_position >= 1);
        assert_eq!(m.flushed_generations.len(), 1);

        let compactor = shard.manifests();
        let claimed = compactor
            .claim_epoch(&schema(), "external-compactor")
            .await
            .unwrap();
        compactor
            .commit_update(claimed.writer_epoch, "external-compactor", |latest| {
                let mut next = latest.clone();
                next.flushed_generations.clear();
                Some(next)
            })
            .await
            .unwrap();

        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count), (0, 0), "{}", backend.name);
        assert!(b.scan().await.unwrap().is_empty());
        shard.close_and_assert_recovered(b, []).await;
        let cursor = shard.manifest().await.replay_after_wal_entry_position;
        assert_eq!(cursor, m.replay_after_wal_entry_position);
    }
}

// An entry with an epoch above the opener's means a successor claimed the shard during the open;
// the open aborts with `PeerClaimedEpoch`.
#[tokio::test]
async fn an_entry_from_a_higher_epoch_aborts_open() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1])]).await;
        let entry = encode_entry(100, &[batch([2])]).unwrap();
        backend.plant_wal_entry(shard.id, 2, entry).await;
        let e = shard.try_open(durable()).await.unwrap_err();
        assert_peer_claimed(&e);
        for text in ["WAL replay aborted", "fenced", "writer_epoch 100"] {
            assert!(e.to_string().contains(text), "{e}");
        }
    }
}

// Replayed batches count as appended. Reopening twice without writes gives the same rows, and
// closing a replayed writer adds no data entry to the WAL.
#[tokio::test]
async fn replayed_rows_are_never_appended_again() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [rows(0, 2), rows(2, 2)]).await;
        for _ in 0..2 {
            let w = shard.open(durable()).await;
            assert_eq!(scanned_ids(&w).await, vec![0, 1, 2, 3]);
        }
        let data_entries = shard.wal_entries().await;
        assert_eq!(data_entries.len(), 2, "only sentinels were added");
        shard.close_after(durable(), []).await;
        assert_eq!(shard.wal_entries().await, data_entries, "{}", backend.name);
        shard.assert_recovered(0..4).await;
        // The close flushed the replayed rows as a generation covering both entries.
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), 1);
        assert!(m.replay_after_wal_entry_position >= 2);
    }
}

// A fully flushed close followed by a reopen replays nothing.
#[tokio::test]
async fn a_clean_close_leaves_nothing_to_replay() {
    for (backend, shard) in each_backend() {
        shard.close_after(durable(), [rows(0, 3)]).await;
        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.frozen_memtable_count), (0, 0));
        assert_eq!(s.generation, 2, "{}", backend.name);
        assert_eq!(scanned_ids(&b).await, vec![0, 1, 2]);
        shard.close_and_assert_recovered(b, 0..3).await;
    }
}

// Replay starts after the cursor: rows in a flushed generation come from its file, later rows
// from the WAL.
#[tokio::test]
async fn replay_starts_after_the_last_flushed_generation() {
    for (backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), [batch([1])]).await;
        a.force_seal_active().await.unwrap();
        a.wait_for_flush_drain().await.unwrap();
        a.put(vec![batch([2])]).await.unwrap();
        drop(a);
        assert_eq!(shard.manifest().await.replay_after_wal_entry_position, 1);
        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.generation), (1, 2), "{}", backend.name);
        assert_eq!(scanned_ids(&b).await, vec![1, 2]);
        shard.close_and_assert_recovered(b, [1, 2]).await;
    }
}

// Replay takes every entry after the cursor whatever epoch wrote it, and skips every sentinel.
#[tokio::test]
async fn replay_spans_entries_of_several_epochs() {
    for (backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), [batch([1])]).await;
        shard.crash_after(durable(), [batch([2])]).await;
        drop(a);
        let c = shard.open(durable()).await;
        assert_eq!(c.epoch(), 3);
        assert_eq!(scanned_ids(&c).await, vec![1, 2]);
        c.put(vec![batch([3])]).await.unwrap();
        c.close().await.unwrap();
        let epochs: Vec<u64> = shard.wal_entries().await.iter().map(|e| e.1).collect();
        assert_eq!(epochs, vec![1, 2, 3], "{}", backend.name);
        shard.assert_recovered([1, 2, 3]).await;
    }
}

// Replay rotates MemTables when they fill up instead of failing, and an entry larger than a whole
// MemTable (written with a larger capacity) still replays.
#[tokio::test]
async fn replay_rotates_when_memtables_fill_up() {
    for (backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), batch_per_id(0..5)).await;
        // One entry of 4 batches.
        a.put(batch_per_id(10..14).collect()).await.unwrap();
        drop(a);
        let small = durable().with(|c| c.max_memtable_batches = 2);
        let b = shard.open(small).await;
        let s = b.memtable_stats().unwrap();
        assert!(s.generation > 1, "{}: replay rotated ({s:?})", backend.name);
        let expected: Vec<i32> = (0..5).chain(10..14).collect();
        assert_eq!(scanned_ids(&b).await, expected);
        b.put(vec![batch([20])]).await.unwrap();
        b.close().await.unwrap();
        let m = shard.manifest().await;
        assert!(m.flushed_generations.len() >= 4, "{m:?}");
        shard
            .assert_recovered(expected.into_iter().chain([20]))
            .await;
        assert_eq!(shard.wal_entries().await.len(), 7, "nothing re-appended");
    }
}

// Replay respects `max_memtable_size` too: the replayed rows are spread over MemTables no
// larger than it (an entry is never split).
#[tokio::test]
async fn replay_rotates_at_the_size_limit() {
    let (_backend, shard) = Backend::memory().with_shard();
    let puts = (0..6).map(|i| rows(i * 10, 10));
    shard.crash_after(durable(), puts).await;
    let one = memwal_core::batch_store::estimated_batch_bytes(&rows(0, 10));
    let limit = 2 * one + one / 2;
    let b = shard
        .open(durable().with(|c| c.max_memtable_size = limit))
        .await;
    let s = b.memtable_stats().unwrap();
    assert!(s.generation >= 3, "{s:?}");
    assert!(s.estimated_size <= limit + 64, "{s:?}");
    assert_eq!(scanned_ids(&b).await, (0..60).collect::<Vec<_>>());
    shard.close_and_assert_recovered(b, 0..60).await;
}

// A crash loses exactly the rows that were not yet durable.
#[tokio::test]
async fn a_crash_keeps_durable_rows_and_loses_the_rest() {
    let (_backend, shard) = Backend::memory().with_shard();
    let a = shard.open_and_put(non_durable(), [batch([1])]).await;
    a.flush().await.unwrap();
    a.put(vec![batch([2])]).await.unwrap();
    drop(a);
    let b = shard.open(durable()).await;
    assert_eq!(scanned_ids(&b).await, vec![1]);
    b.close().await.unwrap();
}

// A damaged WAL entry is reported as corrupt, naming the object, by the opener and by a reader;
// it is never replayed as different rows.
#[tokio::test]
async fn a_corrupt_entry_fails_open_and_scan_naming_the_object() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1]), batch([2])]).await;
        let mut bad = encode_entry(1, &[batch([2])]).unwrap().to_vec();
        let last = bad.len() - 20;
        bad[last] ^= 0xff;
        let path = backend.plant_wal_entry(shard.id, 2, Bytes::from(bad)).await;
        let e = shard.try_open(durable()).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Corrupt, "{}: {e}", backend.name);
        assert!(e.to_string().contains(path.as_ref()), "{e}");
        let r = ShardReader::open(shard.store.clone(), shard.id)
            .await
            .unwrap();
        assert_eq!(r.scan().await.unwrap_err().code(), ErrorCode::Corrupt);
    }
}

// Readers ignore files they do not know (reference DESIGN: "Readers ignore unknown metadata
// and files"), including in the WAL directory.
#[tokio::test]
async fn foreign_files_in_the_shard_are_ignored() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1])]).await;
        let readme = backend
            .store
            .shard_paths(shard.id)
            .wal_dir()
            .join("README.txt");
        backend.plant(&readme, Bytes::from_static(b"hi")).await;
        let b = shard.open(durable()).await;
        assert_eq!(scanned_ids(&b).await, vec![1]);
        b.put(vec![batch([2])]).await.unwrap();
        shard.close_and_assert_recovered(b, [1, 2]).await;
    }
}

// WAL metadata memwal does not write (such as a newer Lance's `generation` key) is ignored on
// replay and by readers.
#[tokio::test]
async fn unknown_entry_metadata_is_ignored() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1])]).await;
        let b = batch([2]);
        let tagged = std::sync::Arc::new(arrow_schema::Schema::new_with_metadata(
            b.schema().fields().clone(),
            std::collections::HashMap::from([("generation".to_string(), "7".to_string())]),
        ));
        let b = arrow_array::RecordBatch::try_new(tagged, b.columns().to_vec()).unwrap();
        let entry = encode_entry(1, &[b]).unwrap();
        backend.plant_wal_entry(shard.id, 2, entry).await;
        let w = shard.open(durable()).await;
        assert_eq!(scanned_ids(&w).await, vec![1, 2], "{}", backend.name);
        shard.close_and_assert_recovered(w, [1, 2]).await;
    }
}
