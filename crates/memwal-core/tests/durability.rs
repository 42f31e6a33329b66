//! The durability contract (src/flush.rs) through the public API: the seed bug report's
//! regression and its acceptance criteria.

mod support;

use memwal_core::{ErrorCode, FenceReason, WriterConfig};
use support::*;
use uuid::Uuid;

/// The seed report's public regression (reference §8.1 scenarios 1-2). Writer A's first
/// durable put after a rotation must fail with its own append's `PeerClaimedEpoch`, not be
/// acknowledged by generation N's earlier flush. See `flush.rs`, "Durability contract".
#[tokio::test]
async fn durable_put_does_not_alias_across_memtable_generations() {
    for (backend, interval) in [(Backend::local(), None), (Backend::memory(), Some(10))] {
        let store = &backend.store;
        let shard = Uuid::new_v4();
        let config = WriterConfig {
            max_wal_flush_interval_ms: interval,
            ..durable()
        };
        let a = open(store, shard, config.clone()).await;
        a.put(vec![batch([1])]).await.unwrap();
        let g = a.memtable_stats().unwrap().generation;
        a.force_seal_active().await.unwrap();
        a.wait_for_flush_drain().await.unwrap();
        assert_eq!(a.memtable_stats().unwrap().generation, g + 1);

        let b = open(store, shard, config).await;
        assert!(b.epoch() > a.epoch());

        let e = a.put(vec![batch([2])]).await.unwrap_err();
        assert_eq!(
            e.fence_reason(),
            Some(FenceReason::PeerClaimedEpoch),
            "{}: {e}",
            backend.name
        );
        assert!(e.to_string().contains("Writer fenced"), "{e}");
        // Nothing A put after the fence reached the WAL or B's view.
        assert_eq!(ids(&b.scan().await.unwrap()), vec![1]);
        b.close().await.unwrap();
        assert_eq!(recovered_ids(store, shard).await, vec![1]);
    }
}

/// Reference §8.2 scenario 4: an injected persistence failure after a rotation is reported as
/// this put's own `PersistenceFailure`, not acknowledged by the previous generation's flush.
#[tokio::test]
async fn persistence_failure_after_rotation_is_reported_to_the_put() {
    let backend = Backend::memory();
    let store = &backend.store;
    let shard = Uuid::new_v4();
    let config = WriterConfig {
        max_wal_persist_retries: 0,
        ..durable()
    };
    let w = open(store, shard, config).await;
    w.put(vec![batch([0])]).await.unwrap();
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
    store.faults().fail_wal_puts(u64::MAX);
    let e = w.put(vec![batch([1])]).await.unwrap_err();
    assert_eq!(e.fence_reason(), Some(FenceReason::PersistenceFailure));
    assert!(e.to_string().contains("WAL persistence failed"), "{e}");
    // Latched: the next put fails fast with the same typed error, without a WAL attempt.
    let attempts = store.faults().wal_put_attempts();
    let e = w.put(vec![batch([2])]).await.unwrap_err();
    assert_eq!(e.fence_reason(), Some(FenceReason::PersistenceFailure));
    assert_eq!(store.faults().wal_put_attempts(), attempts);
    // A poisoned writer serves no snapshot.
    assert_eq!(
        w.scan().await.unwrap_err().fence_reason(),
        Some(FenceReason::PersistenceFailure)
    );
}

/// Reference §8.2 scenario 6: abort while a durable put waits on its append. The put fails
/// with the handler-exited error: never success, never a hang.
#[tokio::test]
async fn abort_while_a_durable_put_waits_fails_the_put() {
    let backend = Backend::memory();
    let store = &backend.store;
    let shard = Uuid::new_v4();
    let config = WriterConfig {
        max_wal_persist_retries: 10,
        wal_persist_retry_base_delay_ms: 1000,
        ..durable()
    };
    let w = std::sync::Arc::new(open(store, shard, config).await);
    store.faults().fail_wal_puts(u64::MAX);
    let (_, watcher) = w.put_no_wait(vec![batch([1])]).await.unwrap();
    // Wait until the handler is inside its retry loop.
    while store.faults().wal_put_attempts() == 0 {
        tokio::task::yield_now().await;
    }
    w.abort().await.unwrap();
    let e = tokio::time::timeout(HANG_GUARD, watcher.unwrap().wait())
        .await
        .expect("must not hang")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("WAL flush handler exited before reporting durability"),
        "{e}"
    );
    // And a put after the abort is rejected as closed.
    let e = w.put(vec![batch([2])]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
}

/// Reference §8.2 scenario 5, through the public API: the freeze's flush request for a range a
/// durable put already appended completes with no I/O; no extra WAL entry is written.
#[tokio::test]
async fn already_covered_flush_completes_without_a_new_entry() {
    for backend in Backend::all() {
        let store = &backend.store;
        let shard = Uuid::new_v4();
        let w = open(store, shard, durable()).await;
        w.put(vec![batch([1])]).await.unwrap();
        assert_eq!(wal_len(store, shard).await, 1);
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        assert_eq!(wal_len(store, shard).await, 1, "{}", backend.name);
        assert_eq!(w.stats().wal_flush_count, 1);
        w.close().await.unwrap();
    }
}

/// Reference §8.1 scenario 3.
#[tokio::test]
async fn durable_put_is_readable_through_scan() {
    let backend = Backend::memory();
    let w = open(
        &backend.store,
        Uuid::new_v4(),
        WriterConfig {
            max_wal_flush_interval_ms: Some(10),
            ..durable()
        },
    )
    .await;
    w.put(vec![batch([1, 2, 3])]).await.unwrap();
    assert_eq!(ids(&w.scan().await.unwrap()), vec![1, 2, 3]);
    w.close().await.unwrap();
}

/// Group commit: concurrent durable puts share WAL entries, and all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_durable_puts_share_wal_entries() {
    let backend = Backend::local();
    let store = &backend.store;
    let shard = Uuid::new_v4();
    let w = std::sync::Arc::new(open(store, shard, durable()).await);
    let puts = (0..100).map(|i| {
        let w = w.clone();
        tokio::spawn(async move { w.put(vec![batch([i])]).await })
    });
    for r in futures::future::join_all(puts).await {
        r.unwrap().unwrap();
    }
    let entries = wal_len(store, shard).await;
    assert!(entries < 100, "{entries} entries for 100 puts");
    let mut got = ids(&w.scan().await.unwrap());
    got.sort();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    assert_eq!(w.stats().durable_requests, 100);
    w.close().await.unwrap();
}
