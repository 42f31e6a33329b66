//! The durability contract (`docs/durability.md`; `src/flush.rs`) through the public API: the seed
//! bug's regression and what a durable put must never do instead of its own append.

mod support;

use std::sync::Arc;

use memwal_core::{ErrorCode, FenceReason};
use support::*;

/// The seed bug's regression (`docs/durability.md`, "Why it is subtle: the seed bug"). Writer A's
/// first durable put after a rotation must fail with its own append's `PeerClaimedEpoch`, not be
/// acknowledged by generation N's earlier flush. See `flush.rs`, "Durability contract".
#[tokio::test]
async fn durable_put_does_not_alias_across_memtable_generations() {
    for (backend, interval) in [(Backend::local(), None), (Backend::memory(), Some(10))] {
        let shard = Shard::new(&backend.store);
        let config = durable().with(|c| c.max_wal_flush_interval_ms = interval);
        let a = shard.open_and_put(config.clone(), [batch([1])]).await;
        let g = a.memtable_stats().unwrap().generation;
        a.force_seal_active().await.unwrap();
        a.wait_for_flush_drain().await.unwrap();
        assert_eq!(a.memtable_stats().unwrap().generation, g + 1);

        let b = shard.open(config).await;
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
        assert_eq!(scanned_ids(&b).await, vec![1]);
        shard.close_and_assert_recovered(b, [1]).await;
    }
}

/// An injected persistence failure after a rotation is reported as this put's own
/// `PersistenceFailure`, not acknowledged by the previous generation's flush.
#[tokio::test]
async fn persistence_failure_after_rotation_is_reported_to_the_put() {
    let (backend, shard) = Backend::memory().with_shard();
    let faults = backend.store.faults();
    let config = durable().with(|c| c.max_wal_persist_retries = 0);
    let w = shard.open_and_put(config, [batch([0])]).await;
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
    faults.fail_wal_puts(u64::MAX);
    let e = w.put(vec![batch([1])]).await.unwrap_err();
    assert_persistence_failure(&e);
    assert!(e.to_string().contains("WAL persistence failed"), "{e}");
    // Latched: the next put fails fast with the same typed error, without a WAL attempt.
    let attempts = faults.wal_put_attempts();
    assert_persistence_failure(&w.put(vec![batch([2])]).await.unwrap_err());
    assert_eq!(faults.wal_put_attempts(), attempts);
    // A poisoned writer serves no snapshot.
    assert_persistence_failure(&w.scan().await.unwrap_err());
}

/// Abort while a durable put waits on its append. The put fails with the handler-exited error:
/// never success, never a hang.
#[tokio::test]
async fn abort_while_a_durable_put_waits_fails_the_put() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| {
        c.max_wal_persist_retries = 10;
        c.wal_persist_retry_base_delay_ms = 1000;
    });
    let w = shard.open_failing_wal_puts(config, u64::MAX).await;
    let (_, watcher) = w.put_no_wait(vec![batch([1])]).await.unwrap();
    // Wait until the handler is inside its retry loop.
    while backend.store.faults().wal_put_attempts() == 0 {
        tokio::task::yield_now().await;
    }
    w.abort().await.unwrap();
    let waited = within_hang_guard("the watcher", watcher.unwrap().wait()).await;
    let exited = "WAL flush handler exited before reporting durability";
    let e = waited.unwrap_err();
    assert!(e.to_string().contains(exited), "{e}");
    // And a put after the abort is rejected as closed.
    let e = w.put(vec![batch([2])]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
}

/// The freeze's flush request for a range a durable put already appended completes with no I/O; no
/// extra WAL entry is written.
#[tokio::test]
async fn already_covered_flush_completes_without_a_new_entry() {
    for (backend, shard) in each_backend() {
        let w = shard.open_and_put(durable(), [batch([1])]).await;
        assert_eq!(shard.wal_len().await, 1);
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        assert_eq!(shard.wal_len().await, 1, "{}", backend.name);
        assert_eq!(w.stats().wal_flush_count, 1);
        w.close().await.unwrap();
    }
}

/// A durable put's rows are readable through `scan` once it resolved.
#[tokio::test]
async fn durable_put_is_readable_through_scan() {
    let (_backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.max_wal_flush_interval_ms = Some(10));
    let w = shard.open_and_put(config, [batch([1, 2, 3])]).await;
    assert_eq!(scanned_ids(&w).await, vec![1, 2, 3]);
    w.close().await.unwrap();
}

/// Group commit: concurrent durable puts share WAL entries, and all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_durable_puts_share_wal_entries() {
    let (_backend, shard) = Backend::local().with_shard();
    let w = Arc::new(shard.open(durable()).await);
    for r in put_concurrently(&w, (0..100).map(|i| vec![batch([i])])).await {
        r.unwrap();
    }
    let entries = shard.wal_len().await;
    assert!(entries < 100, "{entries} entries for 100 puts");
    let mut got = scanned_ids(&w).await;
    got.sort();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    assert_eq!(w.stats().durable_requests, 100);
    w.close().await.unwrap();
}
