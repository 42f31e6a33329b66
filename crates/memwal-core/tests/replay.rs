//! Replay on open (reference §5): a new writer rebuilds its MemTables from the WAL entries after
//! the manifest's replay cursor, skipping fence sentinels; what it replays is never appended
//! again. `ShardReader` sees the same rows without claiming anything.

mod support;

use bytes::Bytes;
use memwal_core::wal::entry::encode_entry;
use memwal_core::{ErrorCode, FenceReason, WriterConfig};
use support::*;

// Reference §8.2 scenario 27.
#[tokio::test]
async fn replay_recovers_unflushed_durable_writes() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![rows(0, 5)]).await.unwrap();
        a.put(vec![rows(5, 3)]).await.unwrap();
        drop(a); // a crash: no close
        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count), (8, 2), "{}", backend.name);
        assert_eq!(
            s.pending_wal_batch_count, 0,
            "replayed rows are already in the WAL"
        );
        assert_eq!(ids(&b.scan().await.unwrap()), (0..8).collect::<Vec<_>>());
        b.close().await.unwrap();
        shard.assert_recovered(0..8).await;
    }
}

// Reference §8.2 scenario 28.
#[tokio::test]
async fn replay_is_a_no_op_on_a_fresh_shard() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let w = shard.open(durable()).await;
        let s = w.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count, s.generation), (0, 0, 1));
        assert!(w.scan().await.unwrap().is_empty());
        w.close().await.unwrap();
        assert_eq!(shard.wal_len().await, 0);
    }
}

// Reference §8.2 scenario 29: an external compactor drains the generation list without moving
// the cursor; replay follows the cursor, not the list.
#[tokio::test]
async fn replay_follows_the_cursor_after_an_external_compaction() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![rows(0, 5)]).await.unwrap();
        a.close().await.unwrap();
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
        b.close().await.unwrap();
        assert_eq!(
            shard.manifest().await.replay_after_wal_entry_position,
            m.replay_after_wal_entry_position
        );
        shard.assert_recovered([]).await;
    }
}

// Reference §8.2 scenario 30: an entry with an epoch above the opener's means a successor
// claimed the shard during the open; the open aborts with `PeerClaimedEpoch`.
#[tokio::test]
async fn an_entry_from_a_higher_epoch_aborts_open() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1])]).await.unwrap();
        drop(a);
        let path = backend.store.shard_paths(shard.id).wal_entry(2);
        backend
            .plant(&path, encode_entry(100, &[batch([2])]).unwrap())
            .await;
        let e = shard.try_open(durable()).await.unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch), "{e}");
        let text = e.to_string();
        assert!(text.contains("WAL replay aborted"), "{text}");
        assert!(text.contains("fenced"), "{text}");
        assert!(text.contains("writer_epoch 100"), "{text}");
    }
}

// Reference §5 and §10.3: replayed batches count as appended. Reopening twice without writes
// gives the same rows, and closing a replayed writer adds no data entry to the WAL.
#[tokio::test]
async fn replayed_rows_are_never_appended_again() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![rows(0, 2)]).await.unwrap();
        a.put(vec![rows(2, 2)]).await.unwrap();
        drop(a);
        for _ in 0..2 {
            let w = shard.open(durable()).await;
            assert_eq!(ids(&w.scan().await.unwrap()), vec![0, 1, 2, 3]);
            drop(w);
        }
        let data_entries = shard.wal_entries().await;
        assert_eq!(data_entries.len(), 2, "only sentinels were added");
        let w = shard.open(durable()).await;
        w.close().await.unwrap();
        assert_eq!(shard.wal_entries().await, data_entries, "{}", backend.name);
        shard.assert_recovered(0..4).await;
        // The close flushed the replayed rows as a generation covering both entries.
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), 1);
        assert!(m.replay_after_wal_entry_position >= 2);
    }
}

// Reference §5: a fully flushed close followed by a reopen replays nothing.
#[tokio::test]
async fn a_clean_close_leaves_nothing_to_replay() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![rows(0, 3)]).await.unwrap();
        a.close().await.unwrap();
        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.frozen_memtable_count), (0, 0));
        assert_eq!(s.generation, 2, "{}", backend.name);
        assert_eq!(ids(&b.scan().await.unwrap()), vec![0, 1, 2]);
        b.close().await.unwrap();
        shard.assert_recovered(0..3).await;
    }
}

// Replay starts after the cursor: rows in a flushed generation come from its file, later rows
// from the WAL.
#[tokio::test]
async fn replay_starts_after_the_last_flushed_generation() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1])]).await.unwrap();
        a.force_seal_active().await.unwrap();
        a.wait_for_flush_drain().await.unwrap();
        a.put(vec![batch([2])]).await.unwrap();
        drop(a);
        assert_eq!(shard.manifest().await.replay_after_wal_entry_position, 1);
        let b = shard.open(durable()).await;
        let s = b.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.generation), (1, 2), "{}", backend.name);
        assert_eq!(ids(&b.scan().await.unwrap()), vec![1, 2]);
        b.close().await.unwrap();
        shard.assert_recovered([1, 2]).await;
    }
}

// Reference §5 (and its Appendix 1): replay takes every entry after the cursor whatever epoch
// wrote it, and skips every sentinel.
#[tokio::test]
async fn replay_spans_entries_of_several_epochs() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1])]).await.unwrap();
        let b = shard.open(durable()).await;
        b.put(vec![batch([2])]).await.unwrap();
        drop(a);
        drop(b);
        let c = shard.open(durable()).await;
        assert_eq!(c.epoch(), 3);
        assert_eq!(ids(&c.scan().await.unwrap()), vec![1, 2]);
        c.put(vec![batch([3])]).await.unwrap();
        c.close().await.unwrap();
        let epochs: Vec<u64> = shard.wal_entries().await.iter().map(|e| e.1).collect();
        assert_eq!(epochs, vec![1, 2, 3], "{}", backend.name);
        shard.assert_recovered([1, 2, 3]).await;
    }
}

// Reference §5 (recommended): replay rotates MemTables when they fill up instead of failing,
// and an entry larger than a whole MemTable (written with a larger capacity) still replays.
#[tokio::test]
async fn replay_rotates_when_memtables_fill_up() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        for i in 0..5 {
            a.put(vec![batch([i])]).await.unwrap();
        }
        // One entry of 4 batches.
        a.put((10..14).map(|i| batch([i])).collect()).await.unwrap();
        drop(a);
        let small = WriterConfig {
            max_memtable_batches: 2,
            ..durable()
        };
        let b = shard.open(small).await;
        let s = b.memtable_stats().unwrap();
        assert!(s.generation > 1, "{}: replay rotated ({s:?})", backend.name);
        let expected: Vec<i32> = (0..5).chain(10..14).collect();
        assert_eq!(ids(&b.scan().await.unwrap()), expected);
        b.put(vec![batch([20])]).await.unwrap();
        b.close().await.unwrap();
        let m = shard.manifest().await;
        assert!(m.flushed_generations.len() >= 4, "{m:?}");
        let mut all = expected.clone();
        all.push(20);
        shard.assert_recovered(all).await;
        assert_eq!(shard.wal_entries().await.len(), 7, "nothing re-appended");
    }
}

// Replay respects `max_memtable_size` too: the replayed rows are spread over MemTables no
// larger than it (an entry is never split).
#[tokio::test]
async fn replay_rotates_at_the_size_limit() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let a = shard.open(durable()).await;
    for i in 0..6 {
        a.put(vec![rows(i * 10, 10)]).await.unwrap();
    }
    drop(a);
    let one = memwal_core::batch_store::estimated_batch_bytes(&rows(0, 10));
    let b = shard
        .open(WriterConfig {
            max_memtable_size: 2 * one + one / 2,
            ..durable()
        })
        .await;
    let s = b.memtable_stats().unwrap();
    assert!(s.generation >= 3, "{s:?}");
    assert!(s.estimated_size <= 2 * one + one / 2 + 64, "{s:?}");
    assert_eq!(ids(&b.scan().await.unwrap()), (0..60).collect::<Vec<_>>());
    b.close().await.unwrap();
    shard.assert_recovered(0..60).await;
}

// A crash loses exactly the rows that were not yet durable.
#[tokio::test]
async fn a_crash_keeps_durable_rows_and_loses_the_rest() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let a = shard.open(non_durable()).await;
    a.put(vec![batch([1])]).await.unwrap();
    a.flush().await.unwrap();
    a.put(vec![batch([2])]).await.unwrap();
    drop(a);
    let b = shard.open(durable()).await;
    assert_eq!(ids(&b.scan().await.unwrap()), vec![1]);
    b.close().await.unwrap();
}

// A damaged WAL entry is reported as corrupt, naming the object, by the opener and by a reader;
// it is never replayed as different rows.
#[tokio::test]
async fn a_corrupt_entry_fails_open_and_scan_naming_the_object() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1])]).await.unwrap();
        a.put(vec![batch([2])]).await.unwrap();
        drop(a);
        let path = backend.store.shard_paths(shard.id).wal_entry(2);
        let good = encode_entry(1, &[batch([2])]).unwrap();
        let mut bad = good.to_vec();
        let last = bad.len() - 20;
        bad[last] ^= 0xff;
        backend.plant(&path, Bytes::from(bad)).await;
        let e = shard.try_open(durable()).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Corrupt, "{}: {e}", backend.name);
        assert!(e.to_string().contains(path.as_ref()), "{e}");
        let r = memwal_core::ShardReader::open(backend.store.clone(), shard.id)
            .await
            .unwrap();
        assert_eq!(r.scan().await.unwrap_err().code(), ErrorCode::Corrupt);
    }
}

// Readers ignore files they do not know (reference DESIGN: "Readers ignore unknown metadata
// and files"), including in the WAL directory.
#[tokio::test]
async fn foreign_files_in_the_shard_are_ignored() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1])]).await.unwrap();
        drop(a);
        let wal_dir = backend.store.shard_paths(shard.id).wal_dir();
        backend
            .plant(
                &wal_dir.clone().join("README.txt"),
                Bytes::from_static(b"hi"),
            )
            .await;
        let b = shard.open(durable()).await;
        assert_eq!(ids(&b.scan().await.unwrap()), vec![1]);
        b.put(vec![batch([2])]).await.unwrap();
        b.close().await.unwrap();
        shard.assert_recovered([1, 2]).await;
    }
}

// Reference §10.13: WAL metadata memwal does not write (such as a newer Lance's `generation`
// key) is ignored on replay and by readers.
#[tokio::test]
async fn unknown_entry_metadata_is_ignored() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1])]).await.unwrap();
        drop(a);
        let b = batch([2]);
        let tagged = std::sync::Arc::new(arrow_schema::Schema::new_with_metadata(
            b.schema().fields().clone(),
            std::collections::HashMap::from([("generation".to_string(), "7".to_string())]),
        ));
        let b = arrow_array::RecordBatch::try_new(tagged, b.columns().to_vec()).unwrap();
        let path = backend.store.shard_paths(shard.id).wal_entry(2);
        backend.plant(&path, encode_entry(1, &[b]).unwrap()).await;
        let w = shard.open(durable()).await;
        assert_eq!(
            ids(&w.scan().await.unwrap()),
            vec![1, 2],
            "{}",
            backend.name
        );
        w.close().await.unwrap();
        shard.assert_recovered([1, 2]).await;
    }
}
