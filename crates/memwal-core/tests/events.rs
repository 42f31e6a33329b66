//! Writer events (`docs/operations.md`, "Events"): each fires with its fields, right after what it
//! describes, and a background failure is reported at once, with no call waiting.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memwal_core::{ErrorCode, FenceReason, ShardWriter, WriterEvent};
use support::*;

/// A sink that keeps every event, and the events kept so far.
fn recorder(w: &ShardWriter) -> Arc<Mutex<Vec<WriterEvent>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = events.clone();
    w.on_event(Arc::new(move |e| kept.lock().unwrap().push(e)))
        .unwrap();
    events
}

/// Waits for the `Fenced` event in `events`; returns its error.
async fn fence_event(events: &Arc<Mutex<Vec<WriterEvent>>>) -> memwal_core::Error {
    match next_matching(events, "the fence", |e| {
        matches!(e, WriterEvent::Fenced { .. })
    })
    .await
    {
        WriterEvent::Fenced { error } => error,
        e => unreachable!("{e:?}"),
    }
}

/// Waits until `events` holds one that `matches`; returns it.
async fn next_matching(
    events: &Arc<Mutex<Vec<WriterEvent>>>,
    what: &str,
    matches: impl Fn(&WriterEvent) -> bool,
) -> WriterEvent {
    within_hang_guard(what, async {
        loop {
            if let Some(e) = events.lock().unwrap().iter().find(|e| matches(e)) {
                return e.clone();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
}

#[tokio::test]
async fn appends_flushes_compactions_and_collections_are_reported() {
    for (backend, shard) in each_backend() {
        let w = shard
            .open(durable().with(|c| {
                c.max_memtable_batches = 1;
                c.compaction_max_generations = 2;
                c.gc_interval_ms = 5;
            }))
            .await;
        let events = recorder(&w);
        w.put(vec![rows(0, 3)]).await.unwrap();
        match next_matching(&events, "a WAL append", |e| {
            matches!(e, WriterEvent::WalAppend { .. })
        })
        .await
        {
            WriterEvent::WalAppend {
                position,
                puts,
                batches,
                rows,
                bytes,
                ..
            } => {
                assert_eq!(
                    (position, puts, batches, rows),
                    (1, 1, 1, 3),
                    "{}",
                    backend.name
                );
                assert!(bytes > 0);
            }
            e => unreachable!("{e:?}"),
        }
        match next_matching(&events, "a generation flush", |e| {
            matches!(e, WriterEvent::GenerationFlushed { .. })
        })
        .await
        {
            WriterEvent::GenerationFlushed {
                generation,
                rows,
                file,
                ..
            } => {
                assert_eq!((generation, rows), (1, 3));
                assert!(file.ends_with("_gen_1/data.parquet"), "{file}");
            }
            e => unreachable!("{e:?}"),
        }
        w.put(vec![rows(3, 1)]).await.unwrap();
        w.put(vec![rows(4, 1)]).await.unwrap();
        match next_matching(&events, "a compaction", |e| {
            matches!(e, WriterEvent::Compaction { .. })
        })
        .await
        {
            WriterEvent::Compaction { merged, rows, .. } => {
                assert_eq!((merged, rows), (3, 5), "{}", backend.name);
            }
            e => unreachable!("{e:?}"),
        }
        match next_matching(
            &events,
            "a collection that removed entries",
            |e| matches!(e, WriterEvent::Gc(r) if r.wal_entries_removed > 0),
        )
        .await
        {
            WriterEvent::Gc(report) => assert!(report.low_water >= 1),
            e => unreachable!("{e:?}"),
        }
        assert!(
            !events
                .lock()
                .unwrap()
                .iter()
                .any(|e| matches!(e, WriterEvent::Fenced { .. } | WriterEvent::Error { .. }))
        );
        shard.close_and_assert_recovered(w, 0..5).await;
    }
}

/// Non-durable puts resolve before their WAL append: when the append then fails, the fence is
/// reported at once, with no call waiting (before: only the next call found out).
#[tokio::test]
async fn a_background_wal_failure_is_reported_at_once() {
    for (backend, shard) in each_backend() {
        let w = shard
            .open(non_durable().with(|c| {
                c.max_wal_flush_interval_ms = Some(10);
                c.max_wal_persist_retries = 0;
            }))
            .await;
        let events = recorder(&w);
        backend.store.faults().fail_wal_puts(u64::MAX);
        w.put(vec![rows(0, 2)]).await.unwrap();
        let error = fence_event(&events).await;
        assert_eq!(
            error.fence_reason(),
            Some(FenceReason::PersistenceFailure),
            "{}",
            backend.name
        );
        assert!(
            error.to_string().contains("WAL persistence failed"),
            "{error}"
        );
        backend.store.faults().recover();
        let e = w.put(vec![rows(2, 1)]).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Fenced);
        let fences = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, WriterEvent::Fenced { .. }))
            .count();
        assert_eq!(fences, 1, "the fence is news once");
        w.abort().await.unwrap();
    }
}

#[tokio::test]
async fn a_successor_fences_a_non_durable_writer_and_the_event_names_it() {
    for (backend, shard) in each_backend() {
        let a = shard
            .open(non_durable().with(|c| c.max_wal_flush_interval_ms = Some(10)))
            .await;
        let events = recorder(&a);
        let b = shard.open(durable()).await;
        a.put(vec![rows(0, 1)]).await.unwrap();
        let error = fence_event(&events).await;
        assert_eq!(
            error.fence_reason(),
            Some(FenceReason::PeerClaimedEpoch),
            "{}",
            backend.name
        );
        assert_eq!(error.holder().map(|h| h.epoch), Some(b.epoch()));
        a.abort().await.unwrap();
        b.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_writer_has_one_sink_and_a_late_one_still_hears_of_its_fence() {
    let (backend, shard) = each_backend().remove(0);
    let w = shard
        .open(non_durable().with(|c| {
            c.max_wal_flush_interval_ms = Some(10);
            c.max_wal_persist_retries = 0;
        }))
        .await;
    backend.store.faults().fail_wal_puts(u64::MAX);
    w.put(vec![rows(0, 1)]).await.unwrap();
    // The flush fails the append, and with it the writer, before any sink is installed.
    let e = w.flush().await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Fenced, "{e}");
    let events = recorder(&w);
    assert!(matches!(
        events.lock().unwrap().as_slice(),
        [WriterEvent::Fenced { .. }]
    ));
    let e = w.on_event(Arc::new(|_| {})).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    w.abort().await.unwrap();
}

#[tokio::test]
async fn each_retry_of_a_failed_wal_append_is_reported() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        let events = recorder(&w);
        backend.store.faults().fail_wal_puts(2);
        w.put(vec![rows(0, 1)]).await.unwrap();
        let retries: Vec<_> = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                WriterEvent::Retry {
                    operation,
                    attempt,
                    error,
                    delay,
                } => Some((*operation, *attempt, error.clone(), *delay)),
                _ => None,
            })
            .collect();
        assert_eq!(retries.len(), 2, "{}: {retries:?}", backend.name);
        for (i, (operation, attempt, error, delay)) in retries.into_iter().enumerate() {
            assert_eq!(operation, "wal append");
            assert_eq!(attempt, i as u32 + 1);
            assert!(
                error.contains("injected transient WAL put failure"),
                "{error}"
            );
            // `durable()` sets a 1 ms base delay, doubled per retry.
            assert_eq!(delay, Duration::from_millis(1 << i));
        }
        w.close().await.unwrap();
    }
}

#[tokio::test]
async fn backpressure_is_reported_when_puts_start_and_stop_waiting() {
    let (backend, shard) = each_backend().remove(0);
    let w = Arc::new(
        shard
            .open(non_durable().with(|c| c.max_unflushed_memtable_bytes = 100))
            .await,
    );
    let events = recorder(&w);
    let backpressure = |events: &Arc<Mutex<Vec<WriterEvent>>>| -> Vec<(bool, u64)> {
        events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                WriterEvent::Backpressure {
                    waiting,
                    bytes_waiting,
                } => Some((*waiting, *bytes_waiting)),
                _ => None,
            })
            .collect()
    };
    // The generation flush that would relieve the pressure stops before its commit.
    let paused = backend.store.faults().pause_at("generation-before-commit");
    w.put(vec![rows(0, 10)]).await.unwrap();
    assert!(backpressure(&events).is_empty(), "under the limit");
    let puts: Vec<_> = (1..4)
        .map(|i| spawn_put(&w, vec![rows(i * 10, 10)]))
        .collect();
    next_matching(&events, "backpressure start", |e| {
        matches!(e, WriterEvent::Backpressure { waiting: true, .. })
    })
    .await;
    paused.reached().await;
    let started = backpressure(&events);
    assert_eq!(
        started.len(),
        1,
        "one start for all waiting puts: {started:?}"
    );
    assert!(started[0].1 >= 100, "over the limit: {started:?}");
    paused.release();
    for put in puts {
        put.await.unwrap().unwrap();
    }
    let all = backpressure(&events);
    assert_eq!(all.first().map(|e| e.0), Some(true), "{all:?}");
    assert_eq!(all.last().map(|e| e.0), Some(false), "{all:?}");
    // Episodes alternate: each start is followed by its end.
    for pair in all.windows(2) {
        assert_ne!(pair[0].0, pair[1].0, "{all:?}");
    }
    Arc::try_unwrap(w).unwrap().close().await.unwrap();
}

#[tokio::test]
async fn a_wal_append_counts_the_puts_that_shared_its_entry() {
    for enable_memtable in [true, false] {
        for (backend, shard) in each_backend() {
            let w = shard
                .open(non_durable().with(|c| {
                    c.max_wal_flush_interval_ms = None;
                    c.enable_memtable = enable_memtable;
                }))
                .await;
            let events = recorder(&w);
            w.put(vec![rows(0, 2), rows(2, 1)]).await.unwrap();
            w.put(vec![rows(3, 1)]).await.unwrap();
            w.put(vec![rows(4, 3)]).await.unwrap();
            w.flush().await.unwrap();
            match next_matching(&events, "a WAL append", |e| {
                matches!(e, WriterEvent::WalAppend { .. })
            })
            .await
            {
                WriterEvent::WalAppend {
                    puts,
                    batches,
                    rows,
                    ..
                } => assert_eq!(
                    (puts, batches, rows),
                    (3, 4, 7),
                    "{} memtable {enable_memtable}",
                    backend.name
                ),
                e => unreachable!("{e:?}"),
            }
            w.close().await.unwrap();
        }
    }
}

// A writer that idles after a successor's claim learns it is fenced at its next background
// collection (which reads the manifest anyway): the `fenced` event fires with no call made,
// and every later call fails with the same fence.
#[tokio::test]
async fn an_idle_writer_is_fenced_at_its_next_background_collection() {
    for (backend, shard) in each_backend() {
        let a = shard
            .open(durable().with(|c| {
                c.gc = true;
                c.gc_interval_ms = 5;
            }))
            .await;
        let events = recorder(&a);
        a.put(vec![batch([1])]).await.unwrap();
        let b = shard.open(durable()).await;
        let e = fence_event(&events).await;
        assert_eq!(
            e.fence_reason(),
            Some(FenceReason::PeerClaimedEpoch),
            "{}: {e}",
            backend.name
        );
        let later = a.put(vec![batch([2])]).await.unwrap_err();
        assert_eq!(later.fence_reason(), Some(FenceReason::PeerClaimedEpoch));
        assert!(
            !events
                .lock()
                .unwrap()
                .iter()
                .any(|e| matches!(e, WriterEvent::Error { .. })),
            "the fence is reported once, as a fence"
        );
        b.close().await.unwrap();
    }
}
