//! The writer's lifecycle: close, abort, force_seal_active, wait_for_flush_drain, flush, the
//! background ticker, backpressure, statistics and configuration. Most of these behaviours are
//! Lance MemWAL's too (`docs/format.md`, "Compatibility with Lance").

mod support;

use std::sync::Arc;
use std::time::Duration;

use arrow_schema::Schema;
use memwal_core::{ErrorCode, PutMode, PutOptions, ShardWriter, Submitted};
use support::*;

// Close freezes and flushes the active MemTable.
#[tokio::test]
async fn close_flushes_the_active_memtable() {
    for (backend, shard) in each_backend() {
        let config = durable().with(|c| {
            c.max_memtable_size = u64::MAX;
            c.max_unflushed_memtable_bytes = u64::MAX;
        });
        let w = shard.open(config.clone()).await;
        let initial = w.memtable_stats().unwrap().generation;
        for i in 0..50 {
            w.put(vec![batch([i])]).await.unwrap();
        }
        let s = w.memtable_stats().unwrap();
        assert_eq!((s.generation, s.row_count), (initial, 50));
        w.close().await.unwrap();
        let m = shard.manifest().await;
        assert!(m.current_generation > initial, "{}", backend.name);
        let w = shard.open(config).await;
        let replayed = w.memtable_stats().unwrap().row_count;
        assert_eq!(replayed, 0, "nothing to replay");
        assert_eq!(scanned_ids(&w).await, (0..50).collect::<Vec<_>>());
        w.close().await.unwrap();
    }
}

// In MemTable mode, when the final WAL append fails, close reports that first failure (typed, with
// the store's message), after joining the tasks.
#[tokio::test(start_paused = true)]
async fn close_reports_the_first_failure_and_joins_the_tasks() {
    let (backend, shard) = Backend::memory().with_shard();
    let faults = backend.store.faults();
    let config = non_durable().with(|c| {
        c.max_wal_buffer_size = u64::MAX;
        c.max_memtable_size = u64::MAX;
        c.max_wal_persist_retries = 2;
    });
    let w = shard.open_and_put(config, [rows(0, 10)]).await;
    faults.fail_wal_puts(u64::MAX);
    let e = w.close().await.unwrap_err();
    assert_persistence_failure(&e);
    for text in [
        "WAL persistence failed",
        "injected transient WAL put failure",
    ] {
        assert!(e.to_string().contains(text), "{e}");
    }
    assert_eq!(faults.wal_put_attempts(), 3);
    // Nothing is left running: no retry happens later, and the writer is closed.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(faults.wal_put_attempts(), 3);
    let e = w.put(vec![rows(0, 1)]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
    w.abort().await.unwrap();
    assert_eq!(shard.manifest().await.flushed_generations.len(), 0);
}

// `force_seal_active` starts a new generation at once; `wait_for_flush_drain` returns once the
// sealed one is a committed generation.
#[tokio::test]
async fn force_seal_and_drain_flush_one_generation() {
    for (backend, shard) in each_backend() {
        let w = shard.open(non_durable()).await;
        let initial = w.memtable_stats().unwrap().generation;
        let before = shard.manifest().await.flushed_generations.len();
        w.put(vec![rows(0, 10)]).await.unwrap();
        w.force_seal_active().await.unwrap();
        // Sealing does not wait; the generation is active at once.
        assert_eq!(w.memtable_stats().unwrap().generation, initial + 1);
        w.wait_for_flush_drain().await.unwrap();
        let s = w.memtable_stats().unwrap();
        assert_eq!((s.generation, s.batch_count), (initial + 1, 0));
        assert_eq!(s.frozen_memtable_count, 0, "{}", backend.name);
        assert_eq!(shard.manifest().await.flushed_generations.len(), before + 1);
        shard.close_and_assert_recovered(w, 0..10).await;
    }
}

// Sealing an empty MemTable does nothing: no new generation, no manifest version.
#[tokio::test]
async fn force_seal_of_an_empty_memtable_is_a_no_op() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;
    let before = shard.manifest().await;
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
    assert_eq!(w.memtable_stats().unwrap().generation, 1);
    assert_eq!(shard.manifest().await, before);
    w.close().await.unwrap();
}

// Abort discards unflushed rows without any I/O, and is idempotent.
#[tokio::test]
async fn abort_discards_without_flushing_and_is_idempotent() {
    for (backend, shard) in each_backend() {
        let w = shard.open_and_put(non_durable(), [rows(0, 10)]).await;
        let before = shard.manifest().await;
        w.abort().await.unwrap();
        w.abort().await.unwrap();
        assert_eq!(shard.manifest().await, before, "{}", backend.name);
        assert_eq!(shard.wal_len().await, 0);
        let e = w.put(vec![batch([1])]).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Closed);
        assert_eq!(w.close().await.unwrap_err().code(), ErrorCode::Closed);
        shard.assert_recovered([]).await;
    }
}

// Every call after close rejects with `Closed` (abort stays a no-op).
#[tokio::test]
async fn every_call_after_close_is_rejected_as_closed() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open_and_put(durable(), [batch([1])]).await;
    w.close().await.unwrap();
    let errors = [
        w.put(vec![batch([2])]).await.unwrap_err(),
        w.put_no_wait(vec![batch([2])]).await.unwrap_err(),
        w.flush().await.unwrap_err(),
        w.scan().await.unwrap_err(),
        w.force_seal_active().await.unwrap_err(),
        w.wait_for_flush_drain().await.unwrap_err(),
        w.check_fenced().await.unwrap_err(),
        w.memtable_stats().unwrap_err(),
        w.close().await.unwrap_err(),
    ];
    for e in errors {
        assert_error(&e, ErrorCode::Closed, "is closed");
    }
    w.abort().await.unwrap();
    // Accessors that read no writer state still work.
    assert_eq!((w.epoch(), w.stats().put_count), (1, 1));
    shard.assert_recovered([1]).await;
}

// Dropping a writer without close is an abort (a crash): durable rows survive, buffered
// non-durable rows do not, and nothing else is written.
#[tokio::test]
async fn dropping_an_open_writer_aborts_it() {
    let (_backend, shard) = Backend::memory().with_shard();
    shard.crash_after(non_durable(), [batch([1])]).await;
    tokio::task::yield_now().await;
    assert_eq!(shard.wal_len().await, 0);
    assert_eq!(shard.manifest().await.version, 1);
}

// A put blocked by backpressure outlives the handle it was submitted through; once the handle
// is dropped (an abort) nothing will relieve the pressure, so the put fails instead of waiting.
#[tokio::test(start_paused = true)]
async fn a_put_blocked_by_backpressure_fails_when_the_writer_is_dropped_unclosed() {
    let (backend, shard) = Backend::memory().with_shard();
    let w = shard
        .open(non_durable().with(|c| c.max_unflushed_memtable_bytes = 100))
        .await;
    // The flush that would relieve the pressure stops short of its commit.
    let pause = backend.store.faults().pause_at("generation-before-commit");
    w.put(vec![rows(0, 10)]).await.unwrap();
    let Submitted::Blocked(blocked) = w
        .submit(vec![rows(10, 10)], PutMode::Put, PutOptions::default())
        .unwrap()
    else {
        panic!("the second put must wait for backpressure");
    };
    pause.reached().await;
    drop(w);
    let e = within_hang_guard("the blocked put", blocked.inserted())
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed, "{e}");
    shard.assert_recovered(0..10).await;
}

// The flush handler has no per-message error path to survive, but it must survive requests whose
// waiters went away (dropped watchers, cancelled puts) and keep serving later ones.
#[tokio::test]
async fn the_flush_handler_survives_waiters_that_went_away() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        let (_, watcher) = w.put_no_wait(vec![batch([1])]).await.unwrap();
        drop(watcher);
        // A put future dropped at its first poll: its rows are in, its request queued.
        let mut cancelled = Box::pin(w.put(vec![batch([2])]));
        let _ = futures::poll!(cancelled.as_mut());
        drop(cancelled);
        for i in 3..6 {
            w.put(vec![batch([i])]).await.unwrap();
        }
        assert_eq!(
            scanned_ids(&w).await,
            vec![1, 2, 3, 4, 5],
            "{}",
            backend.name
        );
        shard.close_and_assert_recovered(w, 1..6).await;
    }
}

/// `n` concurrent `wait_for_flush_drain` calls on `w`; their outcomes.
async fn concurrent_drains(w: &Arc<ShardWriter>, n: usize) -> Vec<memwal_core::Result<()>> {
    let drains = (0..n).map(|_| {
        let w = w.clone();
        tokio::spawn(async move { w.wait_for_flush_drain().await })
    });
    let done = futures::future::join_all(drains).await;
    done.into_iter().map(|r| r.unwrap()).collect()
}

// A generation flush's completion is reported once, to every waiter alike; concurrent drains all
// see the same outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_drains_all_see_the_same_outcome() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = non_durable().with(|c| c.max_wal_persist_retries = 0);
    let w = Arc::new(shard.open_and_put(config, [batch([1])]).await);
    w.force_seal_active().await.unwrap();
    for r in concurrent_drains(&w, 4).await {
        r.unwrap();
    }
    assert_eq!(shard.manifest().await.flushed_generations.len(), 1);

    w.put(vec![batch([2])]).await.unwrap();
    backend.store.faults().fail_wal_puts(u64::MAX);
    w.force_seal_active().await.unwrap();
    let mut errors = Vec::new();
    for r in concurrent_drains(&w, 4).await {
        let e = r.unwrap_err();
        assert_persistence_failure(&e);
        errors.push(e.to_string());
    }
    assert!(errors.windows(2).all(|p| p[0] == p[1]), "{errors:?}");
    assert_eq!(shard.manifest().await.flushed_generations.len(), 1);
}

// The ticker makes non-durable rows durable with no further call.
#[tokio::test(start_paused = true)]
async fn the_ticker_appends_non_durable_rows_on_its_own() {
    let (_backend, shard) = Backend::memory().with_shard();
    let config = non_durable().with(|c| c.max_wal_flush_interval_ms = Some(100));
    let w = shard.open_and_put(config, [batch([1])]).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(shard.wal_len().await, 0, "not before the tick");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(shard.wal_entries().await, vec![(1, 1, 1)]);
    // Nothing pending: later ticks write nothing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(shard.wal_len().await, 1);
    w.put(vec![batch([2])]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(shard.wal_entries().await, vec![(1, 1, 1), (2, 1, 1)]);
    drop(w);
    shard.assert_recovered([1, 2]).await;
}

// With the ticker off and no size trigger, non-durable rows stay in memory until `flush()`, which
// makes everything written so far durable.
#[tokio::test(start_paused = true)]
async fn flush_makes_everything_written_so_far_durable() {
    for (backend, shard) in each_backend() {
        let w = shard
            .open_and_put(non_durable(), [batch([1]), batch([2])])
            .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(shard.wal_len().await, 0, "{}", backend.name);
        w.flush().await.unwrap();
        assert_eq!(shard.wal_entries().await, vec![(1, 1, 2)]);
        w.flush().await.unwrap();
        assert_eq!(shard.wal_len().await, 1, "an empty flush writes nothing");
        drop(w);
        shard.assert_recovered([1, 2]).await;
    }
}

// Under `max_unflushed_memtable_bytes`, no put waits and nothing is frozen.
#[tokio::test]
async fn no_backpressure_under_the_threshold() {
    let (_backend, shard) = Backend::memory().with_shard();
    let config = non_durable().with(|c| c.max_unflushed_memtable_bytes = 1 << 20);
    let w = shard.open_and_put(config, batch_per_id(0..10)).await;
    let s = w.stats();
    assert_eq!(
        (s.backpressure_events, s.backpressure_wait),
        (0, Duration::ZERO)
    );
    assert_eq!(w.memtable_stats().unwrap().frozen_memtable_count, 0);
    w.close().await.unwrap();
}

// Over the threshold, a put waits (it never fails for pressure) until generation flushes bring the
// unflushed bytes back under it; and in WAL-only mode, backpressure on the pending queue triggers
// an append and waits for it.
#[tokio::test]
async fn backpressure_waits_for_flushes_and_never_fails() {
    let wal_only = |c: &mut memwal_core::WriterConfig| {
        c.enable_memtable = false;
        c.max_wal_buffer_size = u64::MAX;
    };
    for (backend, config, puts, generations, wal_entries) in [
        (Backend::local(), non_durable(), 5, 4, None),
        (Backend::memory(), durable(), 5, 4, None),
        (
            Backend::memory(),
            non_durable().with(wal_only),
            4,
            0,
            Some(3),
        ),
    ] {
        let shard = Shard::new(&backend.store);
        let config = config.with(|c| c.max_unflushed_memtable_bytes = 100);
        let w = shard
            .open_and_put(config, (0..puts).map(|i| rows(i * 10, 10)))
            .await;
        // Every put after the first found the previous one's bytes unflushed.
        assert_eq!(
            w.stats().backpressure_events,
            puts as u64 - 1,
            "{}",
            backend.name
        );
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), generations);
        if let Some(n) = wal_entries {
            assert_eq!(shard.wal_len().await, n);
        }
        shard.close_and_assert_recovered(w, 0..puts * 10).await;
    }
}

// Close waits for every generation frozen before it, in order.
#[tokio::test]
async fn close_waits_for_every_frozen_generation() {
    let (_backend, shard) = Backend::local().with_shard();
    // Compaction off: the test counts the generations the freezes made.
    let config = non_durable().with(|c| {
        c.max_memtable_batches = 1;
        c.compaction = false;
    });
    shard.close_after(config, batch_per_id(0..20)).await;
    let m = shard.manifest().await;
    let gens: Vec<u64> = m.flushed_generations.iter().map(|g| g.generation).collect();
    assert_eq!(gens, (1..=20).collect::<Vec<_>>());
    assert_eq!(m.current_generation, 21);
    shard.assert_recovered(0..20).await;
}

// Statistics after a mixed workload.
#[tokio::test]
async fn stats_count_puts_appends_and_generation_flushes() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open_and_put(durable(), [rows(0, 3)]).await;
    w.put(vec![rows(3, 2), rows(5, 1)]).await.unwrap();
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
    let s = w.stats();
    assert_eq!((s.put_count, s.put_rows), (2, 6));
    assert_eq!((s.wal_flush_count, s.wal_flush_batches), (2, 3));
    assert!(s.wal_flush_bytes > 0);
    assert_eq!((s.memtable_flush_count, s.memtable_flush_rows), (1, 6));
    // Only durable puts count; the freeze's request does not.
    assert_eq!(s.durable_requests, 2);
    assert_eq!(s.puts_per_wal_entry(), 1.0);
    let ws = w.wal_stats();
    assert_eq!(ws.entries_appended, 2);
    assert_eq!(ws.bytes_appended, s.wal_flush_bytes);
    assert_eq!(ws.next_wal_entry_position, 3);
    w.close().await.unwrap();
}

// Config and schema are checked before anything is written.
#[tokio::test]
async fn an_invalid_config_or_schema_fails_open_without_writing() {
    let (backend, shard) = Backend::memory().with_shard();
    let cases = [
        durable().with(|c| c.max_memtable_batches = 0),
        durable().with(|c| c.max_wal_flush_interval_ms = Some(0)),
        durable().with(|c| c.max_unflushed_memtable_bytes = 0),
    ];
    for config in cases {
        let e = shard.try_open(config).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    }
    let empty = Arc::new(Schema::empty());
    let e = ShardWriter::open(backend.store.clone(), empty, on(shard.id, durable()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(backend.store.list_shards().await.unwrap().is_empty());
}
