//! The WAL through the public API: appends, retries at one slot, poisoning, lost acknowledgements,
//! fence sentinels, and the read-only `WalTailer` (`docs/durability.md`, "When a WAL append
//! fails"). Most of these behaviours are Lance MemWAL's too; where memwal differs, `docs/format.md`
//! ("Compatibility with Lance") says so.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use memwal_core::wal::entry::encode_entry;
use memwal_core::{ErrorCode, WriterConfig};
use object_store::{ObjectStore, PutResult};
use support::forwarding::{Forwarding, Hooks, Put, StoreResult, is_wal};
use support::*;

// Appends land at 1, 2, …; the tailer reads them back with their epoch, without memwal's entry
// metadata in the batches' schema.
#[tokio::test]
async fn appends_and_tailer_round_trip() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        assert_eq!(w.epoch(), 1);
        assert_eq!(w.wal_stats().fence_sentinel_position, None);
        w.put(vec![rows(0, 4)]).await.unwrap();
        let s = w.wal_stats();
        assert_eq!(s.next_wal_entry_position, 2);
        assert_eq!(s.entries_appended, 1);
        assert!(s.bytes_appended > 0);
        w.put(vec![rows(4, 2)]).await.unwrap();
        assert_eq!(w.wal_stats().next_wal_entry_position, 3);

        let t = shard.tailer().await;
        assert_eq!(t.next_position().await.unwrap(), 3, "{}", backend.name);
        let e = t.read(1).await.unwrap().unwrap();
        assert_eq!(e.position, 1);
        assert_eq!(e.writer_epoch, 1);
        assert!(!e.is_sentinel);
        assert_eq!(e.batches.len(), 1);
        assert_eq!(e.num_rows(), 4);
        for b in &e.batches {
            assert!(
                !b.schema().metadata().contains_key("writer_epoch"),
                "{:?}",
                b.schema().metadata()
            );
        }
        assert_eq!(e.schema.fields(), schema().fields());
        assert_eq!(t.read(2).await.unwrap().unwrap().num_rows(), 2);
        assert!(t.read(999).await.unwrap().is_none());
        let e = t.read(0).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        w.close().await.unwrap();
    }
}

// The successor's sentinel and data take the stale writer's next slot; its check and its next
// append both report `PeerClaimedEpoch`.
#[tokio::test]
async fn a_newer_writer_fences_the_older_one() {
    for (backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), [batch([1])]).await;
        let b = shard.open(durable()).await;
        assert_eq!(b.epoch(), 2);
        assert_eq!(b.wal_stats().fence_sentinel_position, Some(2));
        b.put(vec![batch([2])]).await.unwrap();
        assert_eq!(b.wal_stats().next_wal_entry_position, 4);

        assert_peer_claimed(&a.check_fenced().await.unwrap_err());
        assert_peer_claimed(&a.put(vec![batch([3])]).await.unwrap_err());
        b.check_fenced().await.unwrap();
        shard.close_and_assert_recovered(b, [1, 2]).await;
        let entries = shard.wal_entries().await;
        assert_eq!(entries, vec![(1, 1, 1), (3, 2, 1)], "{}", backend.name);
    }
}

// The successor only opens (no put of its own); its sentinel alone fences the predecessor, and the
// successor's first append goes after the sentinel.
#[tokio::test]
async fn the_fence_sentinel_alone_fences_the_predecessor() {
    for (_backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), [batch([1])]).await;
        let b = shard.open(durable()).await;
        assert_peer_claimed(&a.put(vec![batch([2])]).await.unwrap_err());

        let t = shard.tailer().await;
        let s = t.read(2).await.unwrap().unwrap();
        assert!(s.is_sentinel);
        assert_eq!(s.writer_epoch, 2);
        assert!(s.batches.is_empty());

        b.put(vec![batch([3])]).await.unwrap();
        let e = t.read(3).await.unwrap().unwrap();
        assert_eq!((e.writer_epoch, ids(&e.batches)), (2, vec![3]));
        shard.close_and_assert_recovered(b, [1, 3]).await;
    }
}

// A durable watcher whose append hits the successor's sentinel resolves with the fence error
// instead of hanging.
#[tokio::test]
async fn a_durable_watcher_fails_on_the_fence_instead_of_hanging() {
    for (_backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), [batch([1])]).await;
        let _b = shard.open(durable()).await;
        let (r, watcher) = a.put_no_wait(vec![batch([2])]).await.unwrap();
        assert_eq!(r.batch_positions.start, 1);
        let waited = within_hang_guard("the watcher", watcher.unwrap().wait()).await;
        assert_peer_claimed(&waited.unwrap_err());
    }
}

// Through `put_no_wait`: a durable watcher stays pending while its append is being retried, and
// resolves once the append lands.
#[tokio::test(start_paused = true)]
async fn a_durable_watcher_waits_for_its_own_append() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.wal_persist_retry_base_delay_ms = 1000);
    let w = shard.open_failing_wal_puts(config, 1).await;
    let (_, watcher) = w.put_no_wait(vec![batch([7])]).await.unwrap();
    let mut wait = Box::pin(watcher.unwrap().wait());
    assert_pending_for(500, &mut wait).await;
    assert_eq!(backend.store.faults().wal_put_attempts(), 1);
    assert_eq!(shard.wal_len().await, 0);
    assert!(scanned_ids(&w).await.is_empty(), "not yet durable");
    wait.await.unwrap();
    assert_eq!(backend.store.faults().wal_put_attempts(), 2);
    assert_eq!(shard.wal_entries().await, vec![(1, 1, 1)]);
    assert_eq!(scanned_ids(&w).await, vec![7]);
    w.close().await.unwrap();
}

// Tailers and readers never write. The manifest version is unchanged after reads, and the tip comes
// from probing, not a hint.
#[tokio::test]
async fn the_tailer_and_reader_never_write() {
    for (backend, shard) in each_backend() {
        let w = shard.open_and_put(durable(), batch_per_id(0..3)).await;
        let before = shard.manifest().await;
        let t = shard.tailer().await;
        assert_eq!(t.read(1).await.unwrap().unwrap().num_rows(), 1);
        assert_eq!(t.next_position().await.unwrap(), 4);
        assert_eq!(shard.recovered_ids().await, vec![0, 1, 2]);
        let after = shard.manifest().await;
        assert_eq!(after.version, before.version, "{}", backend.name);
        assert_eq!(after.wal_entry_position_last_seen, 0);
        assert_eq!(shard.wal_len().await, 3);
        w.close().await.unwrap();
    }
}

// A tailer may be opened on a shard that has nothing yet; it sees entries as they land.
#[tokio::test]
async fn a_tailer_follows_a_shard_from_its_start() {
    let (_backend, shard) = Backend::memory().with_shard();
    let t = shard.tailer().await;
    assert_eq!(t.next_position().await.unwrap(), 1);
    assert!(t.read(1).await.unwrap().is_none());
    let w = shard.open_and_put(durable(), [batch([1])]).await;
    assert_eq!(t.next_position().await.unwrap(), 2);
    assert_eq!(ids(&t.read(1).await.unwrap().unwrap().batches), vec![1]);
    w.close().await.unwrap();
}

// Two transient failures with the default 3 retries; the append succeeds at position 1 on the third
// attempt.
#[tokio::test]
async fn a_transient_failure_is_retried_at_the_same_slot() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        assert_eq!(WriterConfig::default().max_wal_persist_retries, 3);
        backend.store.faults().fail_wal_puts(2);
        w.put(vec![batch([1])]).await.unwrap();
        assert_eq!(backend.store.faults().wal_put_attempts(), 3);
        let entries = shard.wal_entries().await;
        assert_eq!(entries, vec![(1, 1, 1)], "{}", backend.name);
        w.put(vec![batch([2])]).await.unwrap();
        assert_eq!(shard.wal_entries().await, vec![(1, 1, 1), (2, 1, 1)]);
        w.close().await.unwrap();
    }
}

// Retries exhausted (2 retries, 3 attempts) poison the writer.
#[tokio::test]
async fn exhausted_retries_poison_the_writer() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.max_wal_persist_retries = 2);
    let w = shard.open_failing_wal_puts(config, u64::MAX).await;
    let e = w.put(vec![batch([1])]).await.unwrap_err();
    assert_persistence_failure(&e);
    for text in ["WAL persistence failed", "after 2 retries"] {
        assert!(e.to_string().contains(text), "{e}");
    }
    assert_eq!(backend.store.faults().wal_put_attempts(), 3);
    assert_eq!(shard.wal_len().await, 0);
}

// A put that lands but reports an error makes the retry find the slot taken. memwal reads the slot
// back: it holds exactly our bytes, so the append succeeded (Lance poisons the writer here).
// Position 1 holds the row once, position 2 is empty.
#[tokio::test]
async fn a_lost_acknowledgement_is_recognised_without_a_duplicate() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        backend.store.faults().set_lost_ack(true);
        backend.store.faults().fail_wal_puts(1);
        w.put(vec![batch([1])]).await.unwrap();
        assert_eq!(backend.store.faults().wal_put_attempts(), 2);
        let t = shard.tailer().await;
        assert!(t.read(1).await.unwrap().is_some(), "{}", backend.name);
        assert!(t.read(2).await.unwrap().is_none());
        backend.store.faults().recover();
        w.put(vec![batch([2])]).await.unwrap();
        drop(w);
        let w = shard.open(durable()).await;
        assert_eq!(scanned_ids(&w).await, vec![1, 2]);
        shard.close_and_assert_recovered(w, [1, 2]).await;
    }
}

// The other side of the ambiguity: after a failed PUT the slot holds *different* bytes and no
// writer claimed a higher epoch. The writer cannot tell what happened, so it poisons itself
// ("taken after a failed PUT") instead of writing its rows again at the next slot.
#[tokio::test]
async fn a_slot_taken_by_other_bytes_after_a_failed_put_poisons_the_writer() {
    for (backend, shard) in each_backend() {
        let config = durable().with(|c| c.wal_persist_retry_base_delay_ms = 500);
        let w = Arc::new(shard.open_failing_wal_puts(config, 1).await);
        let put = spawn_put(&w, vec![batch([1])]);
        while backend.store.faults().wal_put_attempts() == 0 {
            tokio::task::yield_now().await;
        }
        let other = encode_entry(w.epoch(), &[batch([9])]).unwrap();
        backend.plant_wal_entry(shard.id, 1, other).await;
        let e = put.await.unwrap().unwrap_err();
        assert_persistence_failure(&e);
        assert!(e.to_string().contains("taken after a failed PUT"), "{e}");
        assert!(shard.tailer().await.read(2).await.unwrap().is_none());
    }
}

// A persistence failure wakes the waiting watcher with the typed error and latches it, so the
// writer's checks and later calls fail fast.
#[tokio::test]
async fn a_persistence_failure_wakes_the_waiter_and_latches() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.max_wal_persist_retries = 1);
    let w = shard.open_failing_wal_puts(config, u64::MAX).await;
    let (_, watcher) = w.put_no_wait(vec![batch([1])]).await.unwrap();
    let waited = within_hang_guard("the watcher", watcher.unwrap().wait()).await;
    assert_persistence_failure(&waited.unwrap_err());
    assert_eq!(backend.store.faults().wal_put_attempts(), 2);
    assert_persistence_failure(&w.check_fenced().await.unwrap_err());
    assert_persistence_failure(&w.put_no_wait(vec![batch([2])]).await.unwrap_err());
    assert_persistence_failure(&w.flush().await.unwrap_err());
    assert_eq!(backend.store.faults().wal_put_attempts(), 2, "no more I/O");
}

// WAL entries hold exactly the batches of one append, in insert order, across rotations.
#[tokio::test]
async fn wal_order_is_insert_order_across_rotations() {
    for (backend, shard) in each_backend() {
        let config = non_durable().with(|c| c.max_memtable_batches = 2);
        let w = shard.open_and_put(config, batch_per_id(0..7)).await;
        w.flush().await.unwrap();
        let t = shard.tailer().await;
        let n = t.next_position().await.unwrap();
        let mut got = Vec::new();
        for p in 1..n {
            got.extend(ids(&t.read(p).await.unwrap().unwrap().batches));
        }
        assert_eq!(got, (0..7).collect::<Vec<_>>(), "{}", backend.name);
        shard.close_and_assert_recovered(w, 0..7).await;
    }
}

// A poisoned writer's waiters all get the first latched error, even ones queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_queued_waiter_gets_the_latched_error() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.max_wal_persist_retries = 0);
    let w = Arc::new(shard.open_failing_wal_puts(config, u64::MAX).await);
    for r in put_concurrently(&w, (0..16).map(|i| vec![batch([i])])).await {
        assert_persistence_failure(&r.unwrap_err());
    }
    assert_eq!(backend.store.faults().wal_put_attempts(), 1);
}

// Retries at one slot back off exponentially from the base delay.
#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.wal_persist_retry_base_delay_ms = 100);
    let w = shard.open_failing_wal_puts(config, 3).await;
    let started = tokio::time::Instant::now();
    w.put(vec![batch([1])]).await.unwrap();
    // 100 + 200 + 400 ms of backoff before the fourth attempt.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_millis(800),
        "{took:?}"
    );
    assert_eq!(backend.store.faults().wal_put_attempts(), 4);
    assert_eq!(shard.wal_entries().await, vec![(1, 1, 1)]);
    w.close().await.unwrap();
}

// After a failed put the appender checks the manifest before spending its retries; a successor's
// claim is terminal at once.
#[tokio::test(start_paused = true)]
async fn a_failed_put_checks_for_a_successor_before_retrying() {
    for (backend, shard) in each_backend() {
        let config = durable().with(|c| {
            c.max_wal_persist_retries = 10;
            c.wal_persist_retry_base_delay_ms = 1000;
        });
        let a = shard.open_and_put(config, [batch([1])]).await;
        // The successor writes through a handle of its own, without faults.
        let peer = shard.through(backend.second_handle());
        let b = peer.open(durable()).await;
        backend.store.faults().fail_wal_puts(u64::MAX);
        let started = tokio::time::Instant::now();
        assert_peer_claimed(&a.put(vec![batch([2])]).await.unwrap_err());
        let attempts = backend.store.faults().wal_put_attempts();
        assert_eq!(attempts, 2, "{}", backend.name);
        let waited = started.elapsed();
        assert!(waited < Duration::from_millis(1000), "no backoff");
        peer.close_and_assert_recovered(b, [1]).await;
    }
}

// A fence sentinel whose acknowledgement was lost is recognised as ours on the retry; the open
// succeeds and the sentinel is not written twice.
#[tokio::test]
async fn a_lost_acknowledgement_of_the_fence_sentinel_is_recognised() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1])]).await;
        backend.store.faults().set_lost_ack(true);
        backend.store.faults().fail_wal_puts(1);
        let b = shard.open(durable()).await;
        backend.store.faults().recover();
        let s = b.wal_stats();
        let positions = (s.fence_sentinel_position, s.next_wal_entry_position);
        assert_eq!(positions, (Some(2), 3), "{}", backend.name);
        b.put(vec![batch([2])]).await.unwrap();
        shard.close_and_assert_recovered(b, [1, 2]).await;
        assert_eq!(shard.wal_len().await, 3);
    }
}

// A sentinel that cannot be written fails the open with an I/O error; the rows stay
// recoverable by the next open.
#[tokio::test]
async fn a_sentinel_that_cannot_be_written_fails_the_open() {
    let (backend, shard) = Backend::memory().with_shard();
    shard.crash_after(durable(), [batch([1])]).await;
    backend.store.faults().fail_wal_puts(u64::MAX);
    let config = durable().with(|c| c.max_wal_persist_retries = 1);
    let e = shard.try_open(config).await.unwrap_err();
    assert_error(&e, ErrorCode::Io, "fence sentinel");
    backend.store.faults().recover();
    let c = shard.open(durable()).await;
    assert_eq!(scanned_ids(&c).await, vec![1]);
    c.close().await.unwrap();
}

/// A store whose client retries a WAL put internally after losing the first response: the put
/// lands, and the retry reports the slot as taken (S3's 412 on `If-None-Match: *`). Does this
/// to the next `n` WAL puts.
struct RetriedInsideTheClient(AtomicU32);

#[async_trait::async_trait]
impl Hooks for RetriedInsideTheClient {
    async fn put(&self, inner: &dyn ObjectStore, put: Put<'_>) -> StoreResult<PutResult> {
        let location = put.location;
        let take = is_wal(location)
            && self
                .0
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        let r = put.forward(inner).await?;
        if take {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "412 Precondition Failed on the client's retry".into(),
            });
        }
        Ok(r)
    }
}

// A lost response hidden by the object store client's own retry shows up as "slot taken" on
// the first attempt we see. Reading the slot back recognises our own entry: the puts succeed,
// nothing is duplicated, and the writer is not poisoned.
#[tokio::test]
async fn a_put_retried_inside_the_client_is_recognised_as_ours() {
    let store =
        Forwarding::in_memory(RetriedInsideTheClient(AtomicU32::new(2))).store("retrying-client");
    let shard = Shard::new(&store);
    let w = shard.open_and_put(durable(), batch_per_id(1..4)).await;
    assert_eq!(shard.wal_len().await, 3);
    shard.close_and_assert_recovered(w, 1..4).await;
}

// The manifest is only a hint for a tailer: a damaged one must not hide the WAL tip.
#[tokio::test]
async fn a_tailer_finds_the_tip_past_a_corrupt_manifest() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1]), batch([2])]).await;
        let manifest = backend.store.shard_paths(shard.id).manifest(2);
        backend
            .plant(&manifest, bytes::Bytes::from_static(b"not a manifest"))
            .await;
        let t = shard.tailer().await;
        assert_eq!(t.next_position().await.unwrap(), 3, "{}", backend.name);
        assert!(t.read(2).await.unwrap().is_some());
    }
}

// The manifest's tip hint lags (it moves only at generation flushes), so a new writer or a
// tailer often starts far behind the tip. Finding it must take a few round trips whatever
// the distance, not one per entry: probing one by one made claiming a live shard cost tens of
// milliseconds locally and one S3 round trip per unflushed entry. Every HEAD here takes 10 ms
// of (paused) time, so elapsed time counts the sequential rounds.
#[tokio::test(start_paused = true)]
async fn the_tip_is_found_in_a_few_rounds_of_heads() {
    let backend = Backend::memory();
    let store = &backend.store;
    let paths = store.shard_paths(uuid::Uuid::new_v4());
    let rtt = std::time::Duration::from_millis(10);
    store
        .faults()
        .set_chaos(Some(memwal_core::store::faults::Chaos {
            seed: 1,
            fail_before: 0.0,
            fail_after: 0.0,
            latency: rtt,
            jitter: std::time::Duration::ZERO,
        }));
    let mut planted = 0;
    for n in [
        0u64, 1, 2, 3, 16, 17, 18, 33, 100, 255, 256, 257, 300, 4097, 40_000,
    ] {
        while planted < n {
            planted += 1;
            backend
                .plant(&paths.wal_entry(planted), bytes::Bytes::from_static(b"x"))
                .await;
        }
        for hint in [0, 1, n / 3, n.saturating_sub(1), n] {
            let heads = store.faults().wal_heads();
            let started = tokio::time::Instant::now();
            let tip = memwal_core::wal::discover_tip(store, &paths, hint, 0)
                .await
                .unwrap();
            assert_eq!(tip, n + 1, "tip of a {n}-entry WAL from hint {hint}");
            let rounds = started.elapsed().as_millis() / rtt.as_millis();
            let heads = store.faults().wal_heads() - heads;
            // One HEAD of the hint, one or two gallops, then ⌈log17(bracket)⌉ narrowing rounds.
            assert!(
                rounds <= 6,
                "{rounds} rounds for a {n}-entry WAL from hint {hint}"
            );
            assert!(
                heads <= 1 + 16 * rounds as u64,
                "{heads} HEADs in {rounds} rounds"
            );
        }
    }
}
