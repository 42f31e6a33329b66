//! A peer claims the shard at the worst moments, ordered with named pause points (never
//! with sleeps): mid-stream, during replay, between encoding an entry and its PUT, and across
//! a rotation. The old writer's in-flight durable puts reject, no row it appended after the
//! fence is replayed, and every row it acknowledged survives exactly once.

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memwal_core::{FenceReason, ShardWriter};
use support::*;

fn peer_claimed(e: &memwal_core::Error) -> bool {
    e.fence_reason() == Some(FenceReason::PeerClaimedEpoch)
}

// Between encoding an entry and its PUT: the peer's fence sentinel takes the slot the old
// writer is about to write; its put must reject and its row must not appear.
#[tokio::test]
async fn a_claim_between_encoding_and_put_rejects_the_in_flight_append() {
    for (backend, shard) in each_backend() {
        let a = Arc::new(shard.open_and_put(durable(), [batch([1])]).await);
        let pause = backend.store.faults().pause_at("wal-append-before-put");
        let put = spawn_put(&a, vec![batch([2])]);
        pause.reached().await;
        let b = shard.open(durable()).await;
        pause.release();
        let e = put.await.unwrap().unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        assert_eq!(scanned_ids(&b).await, vec![1]);
        // The old writer wrote nothing at or after the sentinel.
        assert_no_stale_entry_after_the_sentinel(&shard, &b).await;
        shard.close_and_assert_recovered(b, [1]).await;
    }
}

// During replay: a writer that claimed its epoch and wrote its sentinel is overtaken by a
// third writer before it replays. The slower one finds the newer sentinel and aborts its open;
// the newest writer holds every row.
#[tokio::test]
async fn a_claim_during_replay_aborts_the_slower_open() {
    for (backend, shard) in each_backend() {
        shard
            .crash_after(durable(), [batch([1, 2]), batch([3])])
            .await;
        let pause = backend.store.faults().pause_at("open-before-replay");
        let slow = {
            let shard = shard.clone();
            tokio::spawn(async move { shard.try_open(durable()).await })
        };
        pause.reached().await;
        let fast = shard.open(durable()).await;
        pause.release();
        let e = slow.await.unwrap().unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        assert!(e.to_string().contains("WAL replay aborted"), "{e}");
        assert_eq!(scanned_ids(&fast).await, vec![1, 2, 3]);
        fast.put(vec![batch([4])]).await.unwrap();
        shard.close_and_assert_recovered(fast, [1, 2, 3, 4]).await;
    }
}

/// No entry of a writer older than `b` lies at or after `b`'s fence sentinel.
async fn assert_no_stale_entry_after_the_sentinel(shard: &Shard, b: &ShardWriter) {
    let sentinel = b.wal_stats().fence_sentinel_position.unwrap();
    for (pos, epoch, _) in shard.wal_entries().await {
        let after = pos >= sentinel;
        assert!(
            epoch == b.epoch() || !after,
            "entry {pos} of epoch {epoch} after the sentinel"
        );
    }
}

// Across a rotation: the old writer wrote a generation file but had not committed it when the
// peer claimed. Its commit must fail (fenced), the orphan file must not be listed, and the
// peer recovers the rows from the WAL exactly once.
#[tokio::test]
async fn a_claim_across_a_rotation_keeps_rows_exactly_once() {
    for (backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), batch_per_id(1..3)).await;
        let pause = backend.store.faults().pause_at("generation-before-commit");
        a.force_seal_active().await.unwrap();
        pause.reached().await;
        let b = shard.open(durable()).await;
        pause.release();
        let e = a.wait_for_flush_drain().await.unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        assert!(shard.manifest().await.flushed_generations.is_empty());
        assert_eq!(scanned_ids(&b).await, vec![1, 2]);
        // The new writer's own rotation and flush work on top.
        b.put(vec![batch([3])]).await.unwrap();
        b.force_seal_active().await.unwrap();
        b.wait_for_flush_drain().await.unwrap();
        assert_eq!(scanned_ids(&b).await, vec![1, 2, 3]);
        shard.close_and_assert_recovered(b, [1, 2, 3]).await;
    }
}

// Mid-stream: many concurrent durable puts, with rotations, while a peer claims the shard.
// Every acknowledged row survives once; every put issued after the claim returned rejects;
// the old writer's entries all precede the peer's sentinel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_mid_stream_rejects_later_puts_and_keeps_acknowledged_ones() {
    for (backend, shard) in each_backend() {
        let config = durable().with(|c| c.max_memtable_batches = 7);
        let a = Arc::new(shard.open(config.clone()).await);
        let claimed = Arc::new(AtomicBool::new(false));
        let (writer, flag) = (a.clone(), claimed.clone());
        let callers = run_callers(8, 40, move |id| {
            let (a, flag) = (writer.clone(), flag.clone());
            async move {
                let after_claim = flag.load(Ordering::SeqCst);
                let r = a.put(vec![batch([id])]).await;
                tokio::task::yield_now().await;
                (id, after_claim, r)
            }
        });
        let puts = tokio::spawn(callers);
        // Let some puts land, then claim.
        wait_until("some puts acknowledged", || a.stats().put_count >= 40).await;
        let b = shard.open(config).await;
        claimed.store(true, Ordering::SeqCst);
        let mut acked = HashSet::new();
        for (id, after_claim, r) in puts.await.unwrap() {
            match r {
                Ok(_) => {
                    assert!(!after_claim, "put {id} issued after the claim succeeded");
                    acked.insert(id);
                }
                Err(e) => assert_eq!(e.code(), memwal_core::ErrorCode::Fenced, "{e}"),
            }
        }
        assert!(!acked.is_empty());
        assert_no_stale_entry_after_the_sentinel(&shard, &b).await;
        b.close().await.unwrap();
        let got = shard.assert_no_duplicates().await;
        for id in &acked {
            assert!(got.contains(id), "{}: acknowledged {id} lost", backend.name);
        }
    }
}
