//! Fencing: one writer per shard. A new writer claims a higher epoch and writes a fence sentinel;
//! the stale writer's next WAL append, generation flush, seal or check fails with
//! `Fenced(PeerClaimedEpoch)`, and a writer that cannot vouch for its WAL poisons itself with
//! `Fenced(PersistenceFailure)` (`docs/durability.md`, "When a WAL append fails";
//! `docs/fencing.md`). Most of these behaviours are Lance MemWAL's too (`docs/format.md`,
//! "Compatibility with Lance").

mod support;

use memwal_core::Store;
use memwal_core::wal::entry::{encode_entry, encode_sentinel};
use support::*;

// `check_fenced` tells a writer whose shard a successor claimed (in WAL-only mode).
#[tokio::test]
async fn check_fenced_detects_a_successor_claim() {
    for (_backend, shard) in each_backend() {
        let config = durable().with(|c| c.enable_memtable = false);
        let a = shard.open(config.clone()).await;
        a.check_fenced().await.unwrap();
        let b = shard.open(config).await;
        assert_peer_claimed(&a.check_fenced().await.unwrap_err());
        b.check_fenced().await.unwrap();
        b.close().await.unwrap();
    }
}

// memwal keeps no manifest cache, so a writer that just read the manifest still sees a peer's later
// claim.
#[tokio::test]
async fn check_fenced_reads_storage_even_after_a_recent_manifest_read() {
    let (_backend, shard) = Backend::memory().with_shard();
    let a = shard.open(durable()).await;
    let warm = a.manifest().await.unwrap().unwrap();
    assert_eq!(warm.writer_epoch, a.epoch());
    a.check_fenced().await.unwrap();
    let b = shard.open(durable()).await;
    assert_peer_claimed(&a.check_fenced().await.unwrap_err());
    let seen = a.manifest().await.unwrap().unwrap().writer_epoch;
    assert_eq!(
        seen,
        b.epoch(),
        "the writer's manifest read is not cached either"
    );
}

// Closing a stale writer publishes nothing, and the fence stays typed through the generation flush:
// close reports `PeerClaimedEpoch`, not a flattened I/O error.
#[tokio::test]
async fn close_of_a_stale_writer_reports_the_fence() {
    for (backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), [rows(0, 10)]).await;
        let b = shard.open(durable()).await;
        assert_peer_claimed(&a.close().await.unwrap_err());
        // The stale writer published nothing; the successor owns A's durable rows.
        assert!(shard.manifest().await.flushed_generations.is_empty());
        assert_eq!(scanned_ids(&b).await, (0..10).collect::<Vec<_>>());
        shard.close_and_assert_recovered(b, 0..10).await;
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), 1, "{}", backend.name);
        assert_eq!(m.writer_epoch, 2);
    }
}

// A stale writer's frozen MemTable is never published, even when a size-triggered freeze skips
// `force_seal_active`'s up-front fence check: the stale writer's generation flush fails its
// manifest check, so the frozen MemTable is kept in memory, unpublished, and the drain reports the
// fence.
#[tokio::test]
async fn a_frozen_memtable_of_a_stale_writer_is_kept_and_not_published() {
    for (backend, shard) in each_backend() {
        let one = memwal_core::batch_store::estimated_batch_bytes(&rows(0, 10));
        let config = durable().with(|c| c.max_memtable_size = 2 * one - 1);
        let a = shard.open(config).await;
        let initial = a.memtable_stats().unwrap().generation;
        a.put(vec![rows(0, 10)]).await.unwrap();
        let b = shard.open(durable()).await;
        // This put freezes generation `initial` first (it would not fit), then fails on its
        // own append, which hits B's sentinel.
        assert_peer_claimed(&a.put(vec![rows(10, 10)]).await.unwrap_err());
        assert_peer_claimed(&a.wait_for_flush_drain().await.unwrap_err());
        let s = a.memtable_stats().unwrap();
        assert_eq!(s.generation, initial + 1);
        assert_eq!(s.frozen_memtable_count, 1, "{}", backend.name);
        assert!(s.frozen_estimated_bytes > 0);
        assert!(shard.manifest().await.flushed_generations.is_empty());
        shard.close_and_assert_recovered(b, 0..10).await;
    }
}

// `force_seal_active` checks the manifest first: a stale writer freezes nothing.
#[tokio::test]
async fn force_seal_of_a_stale_writer_fails_without_freezing() {
    let (_backend, shard) = Backend::memory().with_shard();
    let a = shard.open_and_put(non_durable(), [rows(0, 3)]).await;
    let _b = shard.open(durable()).await;
    assert_peer_claimed(&a.force_seal_active().await.unwrap_err());
    let s = a.memtable_stats().unwrap();
    assert_eq!((s.frozen_memtable_count, s.row_count), (0, 3));
}

// A concurrent writer's claim between a stale writer's puts is seen by the very next durable put,
// whichever MemTable generation it lands in (the seed bug's hazard, `docs/durability.md`, with a
// rotation caused by the batch limit rather than `force_seal_active`).
#[tokio::test]
async fn the_first_put_after_a_batch_limit_rotation_sees_the_fence() {
    for (_backend, shard) in each_backend() {
        let config = durable().with(|c| c.max_memtable_batches = 1);
        let a = shard.open(config).await;
        let r = a.put(vec![batch([1])]).await.unwrap();
        assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 1));
        a.wait_for_flush_drain().await.unwrap();
        let b = shard.open(durable()).await;
        assert_peer_claimed(&a.put(vec![batch([2])]).await.unwrap_err());
        shard.close_and_assert_recovered(b, [1]).await;
    }
}

// A fence seen by `check_fenced` or `force_seal_active` is latched like one seen by an
// append: a non-durable stale writer that was told stops accepting rows it cannot make durable.
#[tokio::test]
async fn a_fence_seen_by_check_fenced_or_force_seal_is_latched() {
    for seal in [false, true] {
        let (_backend, shard) = Backend::memory().with_shard();
        let a = shard.open_and_put(non_durable(), [batch([1])]).await;
        let b = shard.open(durable()).await;
        let seen = if seal {
            a.force_seal_active().await.unwrap_err()
        } else {
            a.check_fenced().await.unwrap_err()
        };
        assert_peer_claimed(&seen);
        assert_peer_claimed(&a.put(vec![batch([2])]).await.unwrap_err());
        assert_peer_claimed(&a.put_no_wait(vec![batch([3])]).await.unwrap_err());
        assert_peer_claimed(&a.scan().await.unwrap_err());
        assert_peer_claimed(&a.flush().await.unwrap_err());
        shard.close_and_assert_recovered(b, []).await;
    }
}

// A non-durable stale writer accepts rows in memory (it cannot know better), but making them
// durable fails with the fence, and none of them reaches the successor.
#[tokio::test]
async fn a_stale_non_durable_writer_cannot_make_rows_durable() {
    for (_backend, shard) in each_backend() {
        let a = shard.open_and_put(non_durable(), [batch([1])]).await;
        a.flush().await.unwrap();
        let b = shard.open(durable()).await;
        a.put(vec![batch([2])]).await.unwrap();
        assert_peer_claimed(&a.flush().await.unwrap_err());
        // Latched: reads and writes now fail fast.
        assert_peer_claimed(&a.scan().await.unwrap_err());
        assert_peer_claimed(&a.put(vec![batch([3])]).await.unwrap_err());
        b.put(vec![batch([4])]).await.unwrap();
        shard.close_and_assert_recovered(b, [1, 4]).await;
    }
}

// A persistence failure poisons the writer (later puts fail fast with the same reason, with no
// I/O); after the store heals, a reopened writer works.
#[tokio::test]
async fn a_poisoned_writer_recovers_by_reopening() {
    for (backend, shard) in each_backend() {
        let faults = backend.store.faults();
        let config = durable().with(|c| c.max_wal_persist_retries = 1);
        let a = shard.open_and_put(config.clone(), [batch([1])]).await;
        faults.fail_wal_puts(u64::MAX);
        assert_persistence_failure(&a.put(vec![batch([2])]).await.unwrap_err());
        let attempts = faults.wal_put_attempts();
        assert_persistence_failure(&a.put(vec![batch([3])]).await.unwrap_err());
        assert_eq!(faults.wal_put_attempts(), attempts, "failed fast");
        drop(a);
        faults.recover();
        let b = shard.open(config).await;
        assert_eq!(scanned_ids(&b).await, vec![1], "{}", backend.name);
        b.put(vec![batch([4])]).await.unwrap();
        shard.close_and_assert_recovered(b, [1, 4]).await;
    }
}

// Ownership hands over along a chain of writers; each one's durable rows survive, and every
// writer but the last is fenced.
#[tokio::test]
async fn ownership_hands_over_along_a_chain_of_writers() {
    for (_backend, shard) in each_backend() {
        let mut writers = Vec::new();
        for i in 0..4 {
            let w = shard.open_and_put(durable(), [batch([i])]).await;
            assert_eq!(w.epoch(), i as u64 + 1);
            writers.push(w);
        }
        let last = writers.pop().unwrap();
        for w in &writers {
            assert_peer_claimed(&w.put(vec![batch([100])]).await.unwrap_err());
        }
        assert_eq!(scanned_ids(&last).await, vec![0, 1, 2, 3]);
        shard.close_and_assert_recovered(last, 0..4).await;
    }
}

// Concurrent opens: every writer that opened holds a distinct epoch, a losing claim fails with
// `PeerClaimedEpoch`, and only the highest epoch can write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_opens_claim_distinct_epochs() {
    for (_backend, shard) in each_backend() {
        let seed = shard.open_and_put(durable(), [batch([0])]).await;
        let opens = (0..6).map(|_| {
            let shard = shard.clone();
            tokio::spawn(async move { shard.try_open(durable()).await })
        });
        let mut opened = Vec::new();
        for r in futures::future::join_all(opens).await {
            match r.unwrap() {
                Ok(w) => opened.push(w),
                Err(e) => assert_peer_claimed(&e),
            }
        }
        assert!(!opened.is_empty());
        let mut epochs: Vec<u64> = opened.iter().map(|w| w.epoch()).collect();
        epochs.sort();
        epochs.dedup();
        assert_eq!(epochs.len(), opened.len(), "epochs are distinct");
        let top = epochs.last().copied().unwrap();
        assert_eq!(shard.manifest().await.writer_epoch, top);
        for (i, w) in opened.iter().enumerate() {
            let r = w.put(vec![batch([1 + i as i32])]).await;
            if w.epoch() == top {
                r.unwrap();
            } else {
                assert_peer_claimed(&r.unwrap_err());
            }
        }
        assert_peer_claimed(&seed.put(vec![batch([99])]).await.unwrap_err());
        let winner = opened.into_iter().find(|w| w.epoch() == top).unwrap();
        let got = scanned_ids(&winner).await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], 0);
        shard.close_and_assert_recovered(winner, got).await;
    }
}

// Writers share fencing through any handle on the same store, e.g. two `memory://NAME`
// handles.
#[tokio::test]
async fn named_memory_stores_are_shared_between_writers() {
    let name = format!("fencing-{}", uuid::Uuid::new_v4());
    let shard = Shard::new(&Store::named_memory(&name));
    let a = shard.open_and_put(durable(), [batch([1])]).await;
    let b = shard
        .through(Store::from_uri(&format!("memory://{name}")).unwrap())
        .open(durable())
        .await;
    assert_peer_claimed(&a.put(vec![batch([2])]).await.unwrap_err());
    assert_eq!(scanned_ids(&b).await, vec![1]);
    b.close().await.unwrap();
}

// Two opens race: the one with the lower epoch finds the WAL tip after the winner has written
// its sentinel and replayed, so its own (stale) sentinel lands right after the winner's; its
// open then aborts on the winner's sentinel. The winner's next append finds that slot taken by
// a data-less sentinel of a lower epoch. That is not a lost write of ours nor a successor: the
// winner skips it instead of poisoning itself. (Seen as a flaky `concurrent_opens_...`.)
#[tokio::test]
async fn a_stale_openers_late_sentinel_does_not_poison_the_winner() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1])]).await;
        // The loser claims epoch 2 but is slow to write its sentinel.
        let loser = shard
            .manifests()
            .claim_epoch(&schema(), "loser")
            .await
            .unwrap();
        let winner = shard.open(durable()).await;
        assert_eq!(winner.epoch(), loser.writer_epoch + 1);
        let next = winner.wal_stats().next_wal_entry_position;
        let sentinel = encode_sentinel(loser.writer_epoch).unwrap();
        backend.plant_wal_entry(shard.id, next, sentinel).await;
        winner.put(vec![batch([2])]).await.unwrap();
        assert_eq!(winner.wal_stats().next_wal_entry_position, next + 2);
        winner.put(vec![batch([3])]).await.unwrap();
        shard.close_and_assert_recovered(winner, [1, 2, 3]).await;
        // The next owner replays past both sentinels.
        let c = shard.open(durable()).await;
        assert_eq!(scanned_ids(&c).await, vec![1, 2, 3], "{}", backend.name);
        c.close().await.unwrap();
    }
}

// The exception is narrow: a slot taken by a lower epoch's *data* (which a correct deployment
// never produces behind a successor's sentinel) still poisons the writer rather than leaving
// our rows behind someone else's.
#[tokio::test]
async fn a_slot_taken_by_lower_epoch_data_still_poisons() {
    let (backend, shard) = Backend::memory().with_shard();
    shard.crash_after(durable(), [batch([1])]).await;
    let w = shard.open(durable()).await;
    let next = w.wal_stats().next_wal_entry_position;
    let data = encode_entry(1, &[batch([9])]).unwrap();
    backend.plant_wal_entry(shard.id, next, data).await;
    let e = w.put(vec![batch([2])]).await.unwrap_err();
    assert_persistence_failure(&e);
    assert!(e.to_string().contains("already taken"), "{e}");
}

// Open reports its phases: the claim (after which the predecessor is fenced) and the replay
// of what the predecessor left, counted in entries (its own fence sentinel included) and rows.
#[tokio::test]
async fn open_stats_split_the_claim_from_the_replay() {
    for (backend, shard) in each_backend() {
        let a = shard.open(durable()).await;
        let fresh = a.open_stats();
        assert_eq!((fresh.replayed_entries, fresh.replayed_rows), (0, 0));
        a.put(vec![batch([1, 2])]).await.unwrap();
        a.put(vec![batch([3])]).await.unwrap();
        let b = shard.open(durable()).await;
        let s = b.open_stats();
        assert_eq!(b.wal_stats().fence_sentinel_position, Some(3));
        let replayed = (s.replayed_entries, s.replayed_rows);
        assert_eq!(replayed, (3, 3), "{}", backend.name);
        assert!(s.claim > std::time::Duration::ZERO, "{s:?}");
        b.close().await.unwrap();
    }
}
