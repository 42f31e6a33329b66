//! A writer or claimant that stalls while another writer commits and garbage collection runs
//! must never bring a collected manifest version back as the shard's latest (see
//! `docs/fencing.md`, "Manifest versions and collection"). Each test holds one store call of
//! the stalled actor with `Faults::stall`, lets the others run to completion, then releases it.

mod support;

use memwal_core::gc::{self, GcOptions};
use memwal_core::store::call::{Actor, ObjectKind, StoreOp};
use memwal_core::store::faults::Stall;
use memwal_core::{ShardReader, WriterConfig};
use support::*;

/// Durable, with collection only when a test asks for it, keeping as few versions as allowed.
fn config() -> WriterConfig {
    durable().with(|c| {
        c.gc = false;
        c.gc_keep_manifest_versions = 2;
        c.compaction = false;
    })
}

/// Puts `ids` in one durable put and commits them as a generation.
async fn put_and_flush(w: &memwal_core::ShardWriter, ids: impl IntoIterator<Item = i32>) {
    w.put(vec![batch(ids)]).await.unwrap();
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
}

/// Collects with the fewest manifest versions kept.
async fn collect(shard: &Shard) {
    let options = GcOptions {
        keep_manifest_versions: 2,
        ..GcOptions::default()
    };
    gc::collect(&shard.store, shard.id, &options).await.unwrap();
}

/// Every row a fresh reader sees, in order.
async fn read_ids(shard: &Shard) -> Vec<i32> {
    let reader = ShardReader::open(shard.store.clone(), shard.id)
        .await
        .unwrap();
    ids(&reader.scan().await.unwrap().batches)
}

// Writer Y's generation commit read the latest manifest, then stalled before creating the next
// version. Meanwhile X claimed, committed generations and collected the version number Y is
// about to create. Y's create then finds the name free: Y must learn it is fenced, and the
// shard's latest must stay X's, with every row either writer acknowledged.
#[tokio::test]
async fn a_commit_stalled_across_a_claim_and_collection_is_fenced_and_loses_nothing() {
    for (backend, shard) in each_backend() {
        let y = shard
            .through(shard.store.with_label("Y"))
            .open(config())
            .await;
        y.put(vec![batch([1, 2])]).await.unwrap();
        let stall = shard.store.faults().stall(
            Stall::before()
                .label("Y")
                .actor(Actor::Commit)
                .op(StoreOp::Create)
                .kind(ObjectKind::Manifest),
        );
        y.force_seal_active().await.unwrap();
        stall.reached().await;

        let x = shard.open(config()).await;
        for i in 0..6 {
            put_and_flush(&x, [10 + i]).await;
        }
        collect(&shard).await;
        stall.release();

        let e = y.close().await.unwrap_err();
        assert_peer_claimed(&e);
        assert_eq!(
            read_ids(&shard).await,
            vec![1, 2, 10, 11, 12, 13, 14, 15],
            "{}",
            backend.name
        );
        put_and_flush(&x, [20]).await;
        shard
            .close_and_assert_recovered(x, [1, 2, 10, 11, 12, 13, 14, 15, 20])
            .await;
    }
}

// The same stall after Y's create landed, before Y sees it: the version is Y's legitimately,
// X's claim follows it, and Y is fenced at its next step.
#[tokio::test]
async fn a_commit_whose_answer_stalls_across_a_claim_and_collection_keeps_every_row() {
    for (_backend, shard) in each_backend() {
        let y = shard
            .through(shard.store.with_label("Y"))
            .open(config())
            .await;
        y.put(vec![batch([1, 2])]).await.unwrap();
        let stall = shard.store.faults().stall(
            Stall::after()
                .label("Y")
                .actor(Actor::Commit)
                .op(StoreOp::Create)
                .kind(ObjectKind::Manifest),
        );
        y.force_seal_active().await.unwrap();
        stall.reached().await;
        let x = shard.open(config()).await;
        for i in 0..6 {
            put_and_flush(&x, [10 + i]).await;
        }
        collect(&shard).await;
        stall.release();
        // Y's generation did land before X's claim, so Y's close may succeed or be fenced; its
        // rows are in the shard either way, once.
        let _ = y.close().await;
        put_and_flush(&x, [20]).await;
        shard
            .close_and_assert_recovered(x, [1, 2, 10, 11, 12, 13, 14, 15, 20])
            .await;
    }
}

// Claimant C read the latest manifest and stalled before creating its claim. Meanwhile B
// claimed, committed and collected the version number C targets. C's create then finds the
// name free: C must not become a second owner with B's epoch (it claims above B's versions or
// fails), and no put either acknowledges is lost.
#[tokio::test]
async fn a_claim_stalled_across_commits_and_collection_never_makes_two_owners() {
    for (backend, shard) in each_backend() {
        shard.close_after(config(), [batch([1])]).await;
        let stall = shard.store.faults().stall(
            Stall::before()
                .label("C")
                .actor(Actor::Claim)
                .op(StoreOp::Create)
                .kind(ObjectKind::Manifest),
        );
        let c_open = {
            let c_shard = shard.through(shard.store.with_label("C"));
            tokio::spawn(async move { c_shard.try_open(config()).await })
        };
        stall.reached().await;
        let b = shard.open(config()).await;
        for i in 0..4 {
            put_and_flush(&b, [10 + i]).await;
        }
        collect(&shard).await;
        stall.release();

        let mut acknowledged = vec![1, 10, 11, 12, 13];
        match c_open.await.unwrap() {
            Ok(c) => {
                // C claimed above B: B is fenced, C acknowledges.
                c.put(vec![batch([100])]).await.unwrap();
                acknowledged.push(100);
                let e = b.put(vec![batch([200])]).await.unwrap_err();
                assert_peer_claimed(&e);
                c.close().await.unwrap();
            }
            Err(e) => {
                assert_peer_claimed(&e);
                b.put(vec![batch([200])]).await.unwrap();
                acknowledged.push(200);
                b.close().await.unwrap();
            }
        }
        assert_eq!(read_ids(&shard).await, acknowledged, "{}", backend.name);
        shard.assert_recovered(acknowledged).await;
    }
}

// Claimant C wrote its claim and stalled before its fence sentinel. Meanwhile B claimed above
// it, committed generations and collected both the versions and the WAL slots up to its
// low-water mark, including the slot C's sentinel is about to take. C must find itself fenced
// once its sentinel lands, and acknowledge nothing.
#[tokio::test]
async fn a_claim_stalled_before_its_sentinel_across_a_claim_and_collection_is_fenced() {
    for (backend, shard) in each_backend() {
        shard.close_after(config(), [batch([1])]).await;
        let stall = shard.store.faults().stall(
            Stall::before()
                .label("C")
                .actor(Actor::Claim)
                .op(StoreOp::Create)
                .kind(ObjectKind::WalEntry),
        );
        let c_open = {
            let c_shard = shard.through(shard.store.with_label("C"));
            tokio::spawn(async move { c_shard.try_open(config()).await })
        };
        stall.reached().await;
        let b = shard.open(config()).await;
        for i in 0..4 {
            put_and_flush(&b, [10 + i]).await;
        }
        collect(&shard).await;
        stall.release();
        let e = c_open.await.unwrap().unwrap_err();
        assert_peer_claimed(&e);
        b.put(vec![batch([20])]).await.unwrap();
        assert_eq!(
            read_ids(&shard).await,
            vec![1, 10, 11, 12, 13, 20],
            "{}",
            backend.name
        );
        shard
            .close_and_assert_recovered(b, [1, 10, 11, 12, 13, 20])
            .await;
    }
}

// A reader read the manifest, then stalled before reading the WAL entries after its replay
// cursor. Meanwhile the writer committed those rows as a generation and collection removed
// the entries. The scan must not resolve without them, nor call the collected entries a hole
// (the WAL entries of a newer manifest's generations are gone on purpose).
#[tokio::test]
async fn a_scan_stalled_across_a_flush_and_collection_returns_every_row() {
    for (backend, shard) in each_backend() {
        let w = shard.open(config()).await;
        put_and_flush(&w, [1]).await;
        w.put(vec![batch([2, 3])]).await.unwrap();
        w.put(vec![batch([4])]).await.unwrap();
        let mut expected = vec![1, 2, 3, 4];
        for stalled_at in [StoreOp::Get, StoreOp::List] {
            let reader_store = shard.store.with_label("R");
            let reader = ShardReader::open(reader_store, shard.id).await.unwrap();
            let stall = shard.store.faults().stall(
                Stall::before()
                    .label("R")
                    .actor(Actor::Reader)
                    .op(stalled_at)
                    .kind(ObjectKind::WalEntry),
            );
            let scan = tokio::spawn(async move { reader.scan().await });
            stall.reached().await;
            w.force_seal_active().await.unwrap();
            w.wait_for_flush_drain().await.unwrap();
            collect(&shard).await;
            stall.release();
            let scanned = scan.await.unwrap().unwrap();
            assert_eq!(
                ids(&scanned.batches),
                expected,
                "{} stalled at {stalled_at:?}",
                backend.name
            );
            w.put(vec![batch([5])]).await.unwrap();
            w.put(vec![batch([6])]).await.unwrap();
            put_and_flush(&w, [7]).await;
            w.put(vec![batch([8])]).await.unwrap();
            expected.extend([5, 6, 7, 8]);
        }
        w.close().await.unwrap();
    }
}
