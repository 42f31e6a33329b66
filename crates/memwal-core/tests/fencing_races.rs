//! A peer claims the shard at the worst moments, ordered with named pause points (never
//! with sleeps): mid-stream, during replay, between encoding an entry and its PUT, and across
//! a rotation. The old writer's in-flight durable puts reject, no row it appended after the
//! fence is replayed, and every row it acknowledged survives exactly once.

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use memwal_core::{FenceReason, WriterConfig};
use support::*;

fn peer_claimed(e: &memwal_core::Error) -> bool {
    e.fence_reason() == Some(FenceReason::PeerClaimedEpoch)
}

// Between encoding an entry and its PUT: the peer's fence sentinel takes the slot the old
// writer is about to write; its put must reject and its row must not appear.
#[tokio::test]
async fn a_claim_between_encoding_and_put_rejects_the_in_flight_append() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = Arc::new(shard.open(durable()).await);
        a.put(vec![batch([1])]).await.unwrap();
        let pause = backend.store.faults().pause_at("wal-append-before-put");
        let put = {
            let a = a.clone();
            tokio::spawn(async move { a.put(vec![batch([2])]).await })
        };
        pause.reached().await;
        let b = shard.open(durable()).await;
        pause.release();
        let e = put.await.unwrap().unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        assert_eq!(ids(&b.scan().await.unwrap()), vec![1]);
        // The old writer wrote nothing at or after the sentinel.
        let sentinel = b.wal_stats().fence_sentinel_position.unwrap();
        for (pos, epoch, _) in shard.wal_entries().await {
            assert!(
                epoch == b.epoch() || pos < sentinel,
                "entry {pos} of epoch {epoch}"
            );
        }
        b.close().await.unwrap();
        shard.assert_recovered([1]).await;
    }
}

// During replay: a writer that claimed its epoch and wrote its sentinel is overtaken by a
// third writer before it replays. The slower one finds the newer sentinel and aborts its open;
// the newest writer holds every row.
#[tokio::test]
async fn a_claim_during_replay_aborts_the_slower_open() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1, 2])]).await.unwrap();
        a.put(vec![batch([3])]).await.unwrap();
        drop(a);
        let pause = backend.store.faults().pause_at("open-before-replay");
        let slow = {
            let shard_id = shard.id;
            let store = backend.store.clone();
            tokio::spawn(async move { open_result(&store, shard_id, durable()).await })
        };
        pause.reached().await;
        let fast = shard.open(durable()).await;
        pause.release();
        let e = slow.await.unwrap().unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        assert!(e.to_string().contains("WAL replay aborted"), "{e}");
        assert_eq!(ids(&fast.scan().await.unwrap()), vec![1, 2, 3]);
        fast.put(vec![batch([4])]).await.unwrap();
        fast.close().await.unwrap();
        shard.assert_recovered([1, 2, 3, 4]).await;
    }
}

async fn open_result(
    store: &memwal_core::Store,
    shard: uuid::Uuid,
    config: WriterConfig,
) -> memwal_core::Result<memwal_core::ShardWriter> {
    memwal_core::ShardWriter::open(store.clone(), schema(), on(shard, config)).await
}

// Across a rotation: the old writer wrote a generation file but had not committed it when the
// peer claimed. Its commit must fail (fenced), the orphan file must not be listed, and the
// peer recovers the rows from the WAL exactly once.
#[tokio::test]
async fn a_claim_across_a_rotation_keeps_rows_exactly_once() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([1])]).await.unwrap();
        a.put(vec![batch([2])]).await.unwrap();
        let pause = backend.store.faults().pause_at("generation-before-commit");
        a.force_seal_active().await.unwrap();
        pause.reached().await;
        let b = shard.open(durable()).await;
        pause.release();
        let e = a.wait_for_flush_drain().await.unwrap_err();
        assert!(peer_claimed(&e), "{}: {e}", backend.name);
        assert!(
            b.manifest()
                .await
                .unwrap()
                .unwrap()
                .flushed_generations
                .is_empty()
        );
        assert_eq!(ids(&b.scan().await.unwrap()), vec![1, 2]);
        // The new writer's own rotation and flush work on top.
        b.put(vec![batch([3])]).await.unwrap();
        b.force_seal_active().await.unwrap();
        b.wait_for_flush_drain().await.unwrap();
        assert_eq!(ids(&b.scan().await.unwrap()), vec![1, 2, 3]);
        b.close().await.unwrap();
        shard.assert_recovered([1, 2, 3]).await;
    }
}

// Mid-stream: many concurrent durable puts, with rotations, while a peer claims the shard.
// Every acknowledged row survives once; every put issued after the claim returned rejects;
// the old writer's entries all precede the peer's sentinel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_mid_stream_rejects_later_puts_and_keeps_acknowledged_ones() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let config = WriterConfig {
            max_memtable_batches: 7,
            ..durable()
        };
        let a = Arc::new(shard.open(config.clone()).await);
        let claimed_flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let a = a.clone();
                let claimed_flag = claimed_flag.clone();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for i in 0..40 {
                        let id = t * 1000 + i;
                        let after_claim = claimed_flag.load(std::sync::atomic::Ordering::SeqCst);
                        let r = a.put(vec![batch([id])]).await;
                        out.push((id, after_claim, r));
                        tokio::task::yield_now().await;
                    }
                    out
                })
            })
            .collect();
        // Let some puts land, then claim.
        wait_until("some puts acknowledged", || a.stats().put_count >= 40).await;
        let b = shard.open(config).await;
        claimed_flag.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut acked = HashSet::new();
        for t in tasks {
            for (id, after_claim, r) in t.await.unwrap() {
                match r {
                    Ok(_) => {
                        assert!(!after_claim, "put {id} issued after the claim succeeded");
                        acked.insert(id);
                    }
                    Err(e) => assert_eq!(e.code(), memwal_core::ErrorCode::Fenced, "{e}"),
                }
            }
        }
        assert!(!acked.is_empty());
        let sentinel = b.wal_stats().fence_sentinel_position.unwrap();
        for (pos, epoch, _) in shard.wal_entries().await {
            assert!(
                epoch == b.epoch() || pos < sentinel,
                "entry {pos} of epoch {epoch} after the sentinel"
            );
        }
        b.close().await.unwrap();
        let got = shard.assert_no_duplicates().await;
        for id in &acked {
            assert!(got.contains(id), "{}: acknowledged {id} lost", backend.name);
        }
    }
}
