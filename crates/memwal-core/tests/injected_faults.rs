//! Failures and delays injected at any store call (`Faults::fail`, `Faults::delay`), not only at
//! WAL puts: a generation flush, a manifest commit, a reader's read. What memwal does with each
//! is what it does with the same failure from a real store: retry what may be retried, report
//! the rest with a typed error, and lose nothing acknowledged.

mod support;

use std::time::Duration;

use memwal_core::store::call::{Actor, ObjectKind, StoreOp};
use memwal_core::store::faults::{INJECTED_CALL_FAILURE, Stall};
use memwal_core::{ErrorCode, ShardReader};
use support::*;

// A generation file's create fails twice before reaching the store: the flush retries with a
// new file and commits once.
#[tokio::test]
async fn a_generation_flush_whose_file_create_fails_is_retried() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        w.put(vec![batch([1, 2])]).await.unwrap();
        shard.store.faults().fail(
            Stall::before()
                .actor(Actor::Commit)
                .op(StoreOp::Create)
                .kind(ObjectKind::Generation),
            2,
        );
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), 1, "{}", backend.name);
        let retries = w.stats().operations.generation_flush.retries;
        assert_eq!(retries, 2, "{}", backend.name);
        shard.close_and_assert_recovered(w, [1, 2]).await;
    }
}

// A manifest commit lands but its answer is lost: the retry finds its own version and the
// generation is listed once.
#[tokio::test]
async fn a_manifest_commit_whose_answer_is_lost_is_recognised_as_landed() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        w.put(vec![batch([1])]).await.unwrap();
        shard.store.faults().fail(
            Stall::after()
                .actor(Actor::Commit)
                .op(StoreOp::Create)
                .kind(ObjectKind::Manifest),
            1,
        );
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), 1, "{}", backend.name);
        shard.close_and_assert_recovered(w, [1]).await;
    }
}

// A reader's read of a generation file fails: the scan rejects with `IO` naming it (and the
// injected cause); the next scan reads it.
#[tokio::test]
async fn a_readers_failed_read_is_an_io_error_and_the_next_read_succeeds() {
    for (backend, shard) in each_backend() {
        shard.close_after(durable(), [batch([1]), batch([2])]).await;
        let reader = ShardReader::open(shard.store.clone(), shard.id)
            .await
            .unwrap();
        shard.store.faults().fail(
            Stall::before()
                .actor(Actor::Reader)
                .op(StoreOp::Get)
                .kind(ObjectKind::Generation),
            1,
        );
        let e = reader.scan().await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Io, "{}: {e}", backend.name);
        assert!(e.to_string().contains("data.parquet"), "{e}");
        assert!(
            e.causes().iter().any(|c| c.contains(INJECTED_CALL_FAILURE)),
            "{:?}",
            e.causes()
        );
        assert_eq!(ids(&reader.scan().await.unwrap().batches), vec![1, 2]);
    }
}

// Delays hold the matching calls and nothing else; `recover` disarms failures and delays not
// yet used.
#[tokio::test(start_paused = true)]
async fn delays_hold_matching_calls_and_recover_disarms_what_is_left() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;
    let faults = shard.store.faults();
    faults.delay(
        Stall::before().actor(Actor::Put).kind(ObjectKind::WalEntry),
        Duration::from_secs(30),
        1,
    );
    let started = tokio::time::Instant::now();
    w.put(vec![batch([1])]).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(30));
    faults.fail(Stall::before().actor(Actor::Put), 5);
    faults.delay(
        Stall::before().actor(Actor::Put),
        Duration::from_secs(30),
        5,
    );
    faults.recover();
    let started = tokio::time::Instant::now();
    w.put(vec![batch([2])]).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
    shard.close_and_assert_recovered(w, [1, 2]).await;
}
