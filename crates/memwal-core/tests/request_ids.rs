//! Retry-safe puts: a put with a request id the writer remembers writes nothing and gets the
//! first put's result, on the same writer, while the first is in flight, after a reopen
//! (replay), after a generation flush (the generation's request_ids.json), after a failover,
//! and not after the retention window. Durability stays exactly as strong: a retry succeeds
//! only once the first put's rows are durable, or fails as the first put did.

mod support;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use tokio::task::JoinHandle;

use memwal_core::{
    BatchRange, ErrorCode, FenceReason, PutOptions, RequestId, ShardWriter, WriteResult,
    WriterConfig,
};
use support::*;

fn id(s: &str) -> PutOptions {
    PutOptions::with_request_id(RequestId::new(s).unwrap())
}

fn result(generation: u64, start: usize, end: usize) -> WriteResult {
    WriteResult {
        generation: Some(generation),
        batch_positions: BatchRange { start, end },
    }
}

/// A put of `batches` with request id `request_id`, on its own task.
fn spawn_put_with(
    w: &Arc<ShardWriter>,
    batches: Vec<RecordBatch>,
    request_id: &str,
) -> JoinHandle<memwal_core::Result<WriteResult>> {
    let (w, options) = (w.clone(), id(request_id));
    tokio::spawn(async move { w.put_with(batches, options).await })
}

/// The retry of put "a" (rows `[1]`) on `w`, a writer that never saw the first put land: it
/// writes the rows, a second retry is answered with its result, and the shard holds them once.
async fn assert_the_retry_writes_once(shard: &Shard, w: ShardWriter) {
    let written = w.put_with(vec![batch([1])], id("a")).await.unwrap();
    assert_eq!(w.stats().retried_puts, 0, "the first put never landed");
    assert_eq!(
        w.put_with(vec![batch([1])], id("a")).await.unwrap(),
        written
    );
    w.close().await.unwrap();
    shard.assert_recovered([1]).await;
}

async fn scanned(w: &ShardWriter) -> Vec<i32> {
    ids(&w.scan().await.unwrap())
}

/// A durable writer's config that remembers request ids for `ms` after their put.
/// With no age-based sealing: these tests advance the paused clock by up to an hour, which
/// would otherwise seal and flush the MemTable in the background (the default age is one hour)
/// and race the retries they check.
fn retaining_ids_for(ms: u64) -> WriterConfig {
    WriterConfig {
        request_id_retention_ms: ms,
        max_memtable_age_ms: None,
        ..durable()
    }
}

/// Freezes the active MemTable and waits until it is a committed generation.
async fn flush_generation(w: &ShardWriter) {
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
}

#[tokio::test]
async fn a_retry_on_the_same_writer_gets_the_first_result_and_writes_nothing() {
    for backend in Backend::every_layout() {
        let shard = Shard::new(&backend.store);
        let w = shard.open(durable()).await;
        w.put(vec![batch([0])]).await.unwrap();
        let first = w
            .put_with(vec![batch([1]), batch([2])], id("a"))
            .await
            .unwrap();
        assert_eq!(first, result(1, 1, 3));
        let entries = shard.wal_len().await;
        // The same id with other data: the first put wins, the new rows are not written.
        let again = w.put_with(vec![batch([9])], id("a")).await.unwrap();
        assert_eq!(again, first, "{}", backend.name);
        assert_eq!(shard.wal_len().await, entries, "no WAL entry for a retry");
        assert_eq!(w.stats().retried_puts, 1);
        // Another id is another put.
        assert_eq!(
            w.put_with(vec![batch([3])], id("b")).await.unwrap(),
            result(1, 3, 4)
        );
        assert_eq!(scanned(&w).await, vec![0, 1, 2, 3]);
        w.close().await.unwrap();
        shard.assert_recovered([0, 1, 2, 3]).await;
    }
}

#[tokio::test]
async fn the_wal_entry_records_each_put_it_covers_with_its_original_result() {
    let shard = Shard::new(&Backend::memory().store);
    let w = Arc::new(shard.open(durable()).await);
    // Hold the first append so the next puts share one entry (group commit).
    let pause = shard.store.faults().pause_at("wal-append-before-put");
    let first = spawn_put_with(&w, vec![batch([1])], "p1");
    pause.reached().await;
    let mut rest = Vec::new();
    for (i, name) in ["p2", "p3"].into_iter().enumerate() {
        rest.push(spawn_put_with(&w, vec![batch([10 + i as i32])], name));
    }
    wait_until("p2 and p3 are inserted", || {
        w.memtable_stats().unwrap().batch_count == 3
    })
    .await;
    pause.release();
    first.await.unwrap().unwrap();
    for r in rest {
        r.await.unwrap().unwrap();
    }
    let tailer = shard.tailer().await;
    let mut recorded = Vec::new();
    for (position, _, _) in shard.wal_entries().await {
        let e = tailer.read(position).await.unwrap().unwrap();
        recorded.extend(
            e.requests
                .iter()
                .map(|r| (r.id.as_str().to_string(), r.result, position)),
        );
    }
    let names: Vec<&str> = recorded.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, vec!["p1", "p2", "p3"]);
    assert_eq!(recorded[0].1, result(1, 0, 1));
    assert_eq!(
        recorded[1].2, recorded[2].2,
        "p2 and p3 share one entry, which records both"
    );
    w.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_retry_of_an_in_flight_put_waits_for_its_append() {
    let shard = Shard::new(&Backend::memory().store);
    let w = Arc::new(shard.open(durable()).await);
    let pause = shard.store.faults().pause_at("wal-append-before-put");
    let first = spawn_put_with(&w, vec![batch([1])], "a");
    pause.reached().await;
    let mut retry = Box::pin({
        let w = w.clone();
        async move { w.put_with(vec![batch([2])], id("a")).await }
    });
    assert_pending_for(1_000, &mut retry).await;
    assert_eq!(
        shard.wal_len().await,
        0,
        "the first put's entry has not landed"
    );
    pause.release();
    let first = first.await.unwrap().unwrap();
    assert_eq!(retry.await.unwrap(), first);
    assert_eq!(shard.wal_entries().await.len(), 1);
    assert_eq!(scanned(&w).await, vec![1]);
    w.close().await.unwrap();
}

#[tokio::test]
async fn a_retry_of_an_in_flight_put_that_fails_gets_the_same_typed_error() {
    for backend in Backend::every_layout() {
        let shard = Shard::new(&backend.store);
        let a = Arc::new(shard.open(durable()).await);
        let pause = backend.store.faults().pause_at("wal-append-before-put");
        let first = spawn_put_with(&a, vec![batch([1])], "a");
        pause.reached().await;
        let retry = spawn_put_with(&a, vec![batch([1])], "a");
        // A successor claims the shard: the first put's append finds its sentinel.
        let b = shard.open(durable()).await;
        pause.release();
        let e1 = first.await.unwrap().unwrap_err();
        let e2 = retry.await.unwrap().unwrap_err();
        assert_eq!(e1.fence_reason(), Some(FenceReason::PeerClaimedEpoch));
        assert_eq!(e2.fence_reason(), e1.fence_reason(), "{}", backend.name);
        assert_eq!(e2.to_string(), e1.to_string());
        // Nothing was written, so the retry on the new writer writes the rows, once.
        assert_the_retry_writes_once(&shard, b).await;
    }
}

#[tokio::test]
async fn a_retry_after_a_reopen_is_answered_from_the_replayed_entry() {
    for backend in Backend::every_layout() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        a.put(vec![batch([0])]).await.unwrap();
        let first = a.put_with(vec![batch([1, 2])], id("a")).await.unwrap();
        drop(a); // a crash: nothing flushed to a generation
        let b = shard.open(durable()).await;
        assert_eq!(
            b.put_with(vec![batch([7])], id("a")).await.unwrap(),
            first,
            "{}",
            backend.name
        );
        assert_eq!(b.stats().retried_puts, 1);
        assert_eq!(scanned(&b).await, vec![0, 1, 2]);
        // The replayed ids are flushed with their rows and persisted for the next writer.
        b.close().await.unwrap();
        let c = shard.open(durable()).await;
        assert_eq!(c.put_with(vec![batch([7])], id("a")).await.unwrap(), first);
        c.close().await.unwrap();
        shard.assert_recovered([0, 1, 2]).await;
    }
}

// Replay packs entries into MemTables its own way; a retry still gets what the first put
// returned, not where replay put the rows.
#[tokio::test]
async fn a_retry_gets_the_positions_the_first_put_returned_not_where_replay_put_the_rows() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let a = shard.open(durable()).await;
    a.put(vec![batch([0])]).await.unwrap();
    // Generation 1 is frozen but never committed: its flush waits here until the crash.
    let pause = backend.store.faults().pause_at("generation-before-commit");
    a.force_seal_active().await.unwrap();
    let first = a.put_with(vec![batch([1])], id("a")).await.unwrap();
    assert_eq!(first, result(2, 0, 1));
    pause.reached().await;
    drop(a);
    let b = shard.open(durable()).await;
    let stats = b.memtable_stats().unwrap();
    assert_eq!(
        (stats.generation, stats.batch_count),
        (1, 2),
        "replay put both entries into generation 1"
    );
    assert_eq!(b.put_with(vec![batch([1])], id("a")).await.unwrap(), first);
    assert_eq!(scanned(&b).await, vec![0, 1]);
    b.close().await.unwrap();
}

#[tokio::test]
async fn a_failover_writer_sees_the_ids_of_the_writer_it_fenced() {
    for backend in Backend::every_layout() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        let first = a.put_with(vec![batch([1])], id("a")).await.unwrap();
        // A is still alive when B takes over (another process, say).
        let b = ShardWriter::open(backend.second_handle(), schema(), on(shard.id, durable()))
            .await
            .unwrap();
        assert_eq!(b.put_with(vec![batch([1])], id("a")).await.unwrap(), first);
        let e = a.put(vec![batch([2])]).await.unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch));
        b.close().await.unwrap();
        shard.assert_recovered([1]).await;
    }
}

#[tokio::test]
async fn ids_of_a_flushed_generation_survive_a_reopen_within_the_retention() {
    for backend in Backend::every_layout() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(durable()).await;
        let first = a.put_with(vec![batch([1])], id("a")).await.unwrap();
        a.put(vec![batch([2])]).await.unwrap();
        flush_generation(&a).await;
        a.close().await.unwrap();
        let m = shard.manifest().await;
        let g = &m.flushed_generations[0];
        assert!(g.request_ids_newest_ms.is_some() && g.request_ids_checksum.is_some());
        assert!(
            m.replay_after_wal_entry_position >= 2,
            "the entries are not replayed"
        );
        let shard_dir = shard.store.shard_paths(shard.id).shard_dir().clone();
        let names = backend.object_names(&shard_dir).await;
        assert!(
            names
                .iter()
                .any(|n| n.ends_with(&format!("{}/request_ids.json", g.path))),
            "{names:?}"
        );
        let b = shard.open(durable()).await;
        assert_eq!(b.open_stats().replayed_rows, 0);
        assert_eq!(b.put_with(vec![batch([9])], id("a")).await.unwrap(), first);
        assert_eq!(b.stats().retried_puts, 1);
        b.close().await.unwrap();
        shard.assert_recovered([1, 2]).await;
    }
}

#[tokio::test(start_paused = true)]
async fn after_the_retention_a_retry_is_written_again() {
    let shard = Shard::new(&Backend::memory().store);
    let config = retaining_ids_for(600_000);
    let a = shard.open(config.clone()).await;
    let first = a.put_with(vec![batch([1])], id("a")).await.unwrap();
    flush_generation(&a).await;
    a.close().await.unwrap();
    let b = shard.open(config).await;
    // Within the window (counted from the put), the id comes from request_ids.json.
    tokio::time::advance(Duration::from_secs(300)).await;
    assert_eq!(b.put_with(vec![batch([1])], id("a")).await.unwrap(), first);
    // Past it the id is forgotten: the retry is a new put, as documented.
    tokio::time::advance(Duration::from_secs(301)).await;
    let again = b.put_with(vec![batch([2])], id("a")).await.unwrap();
    assert_ne!(again, first);
    assert_eq!(b.stats().retried_puts, 1);
    // ... and that put is remembered from now on.
    assert_eq!(b.put_with(vec![batch([3])], id("a")).await.unwrap(), again);
    assert_eq!(scanned(&b).await, vec![1, 2]);
    b.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_retention_of_zero_keeps_ids_only_until_their_generation_is_flushed() {
    let shard = Shard::new(&Backend::memory().store);
    let config = retaining_ids_for(0);
    let a = shard.open(config.clone()).await;
    let first = a.put_with(vec![batch([1])], id("a")).await.unwrap();
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(
        a.put_with(vec![batch([1])], id("a")).await.unwrap(),
        first,
        "window (a): its rows are not in a flushed generation"
    );
    a.put(vec![batch([2])]).await.unwrap();
    drop(a);
    // Replay brings the id back with its entry, whatever the time.
    let b = shard.open(config.clone()).await;
    assert_eq!(b.put_with(vec![batch([1])], id("a")).await.unwrap(), first);
    flush_generation(&b).await;
    let g = &shard.manifest().await.flushed_generations[0];
    assert_eq!(
        g.request_ids_newest_ms, None,
        "nothing persisted for retention 0"
    );
    let again = b.put_with(vec![batch([3])], id("a")).await.unwrap();
    assert_ne!(again, first);
    b.close().await.unwrap();
    shard.assert_recovered([1, 2, 3]).await;
}

// A retry's watcher is lazy: taken while the first put is in flight, it may first look after
// the first put's MemTable was committed as a generation and let go. It must then find the rows
// where they are now, not report them lost.
#[tokio::test]
async fn a_retry_watched_only_after_the_first_puts_generation_committed_is_durable() {
    for retention_ms in [600_000, 0] {
        let shard = Shard::new(&Backend::memory().store);
        let w = shard.open(retaining_ids_for(retention_ms)).await;
        let pause = shard.store.faults().pause_at("wal-append-before-put");
        let (first, watcher) = w.put_no_wait_with(vec![batch([1])], id("a")).await.unwrap();
        pause.reached().await;
        let (again, retry) = w.put_no_wait_with(vec![batch([1])], id("a")).await.unwrap();
        assert_eq!(again, first);
        pause.release();
        watcher.unwrap().wait().await.unwrap();
        flush_generation(&w).await;
        assert_eq!(shard.manifest().await.flushed_generations.len(), 1);
        if retention_ms == 0 {
            // Forgotten at its commit, the id is free for a new put, which the old watcher
            // must not take for the first one.
            let written = w.put_with(vec![batch([2])], id("a")).await.unwrap();
            assert_ne!(written, first);
        }
        within_hang_guard("the retry's watcher", retry.unwrap().wait())
            .await
            .unwrap_or_else(|e| panic!("retention {retention_ms} ms: {e}"));
        w.close().await.unwrap();
        let expected: &[i32] = if retention_ms == 0 { &[1, 2] } else { &[1] };
        shard.assert_recovered(expected.iter().copied()).await;
    }
}

// Dropping the writer (neither close() nor abort()) stops its tasks; a retry's watcher, which
// outlives the handle, must then fail as the first put's does, not wait for reports forever.
#[tokio::test(start_paused = true)]
async fn a_retrys_watcher_fails_when_the_writer_is_dropped_unclosed() {
    let shard = Shard::new(&Backend::memory().store);
    let w = shard.open(durable()).await;
    let pause = shard.store.faults().pause_at("wal-append-before-put");
    let (_, watcher) = w.put_no_wait_with(vec![batch([1])], id("a")).await.unwrap();
    pause.reached().await;
    let (_, retry) = w.put_no_wait_with(vec![batch([1])], id("a")).await.unwrap();
    drop(w);
    for (what, watcher) in [
        ("the first put's watcher", watcher),
        ("the retry's watcher", retry),
    ] {
        let e = within_hang_guard(what, watcher.unwrap().wait())
            .await
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Closed, "{what}: {e}");
        assert!(
            e.to_string()
                .contains("WAL flush handler exited before reporting durability"),
            "{what}: {e}"
        );
    }
}

// The put's WAL append never lands (the writer dies before it): the put was never
// acknowledged, so a retry on the next writer writes the rows, exactly once.
#[tokio::test]
async fn a_crash_before_the_entry_lands_lets_the_retry_write_the_rows_once() {
    for backend in Backend::every_layout() {
        let shard = Shard::new(&backend.store);
        let a = Arc::new(shard.open(durable()).await);
        let pause = backend.store.faults().pause_at("wal-append-before-put");
        let first = spawn_put_with(&a, vec![batch([1])], "a");
        pause.reached().await;
        a.abort().await.unwrap();
        let e = first.await.unwrap().unwrap_err();
        assert!(e.to_string().contains("WAL flush handler exited"), "{e}");
        let b = shard.open(durable()).await;
        assert_eq!(b.open_stats().replayed_rows, 0, "{}", backend.name);
        assert_the_retry_writes_once(&shard, b).await;
    }
}

#[tokio::test]
async fn in_non_durable_mode_a_retry_gets_the_first_result_at_once_and_only_the_wal_counts_after_a_crash()
 {
    let shard = Shard::new(&Backend::memory().store);
    let a = shard.open(non_durable()).await;
    let first = a.put_with(vec![batch([1])], id("a")).await.unwrap();
    assert_eq!(a.put_with(vec![batch([1])], id("a")).await.unwrap(), first);
    let (again, watcher) = a.put_no_wait_with(vec![batch([1])], id("a")).await.unwrap();
    assert_eq!((again, watcher.is_none()), (first, true));
    a.flush().await.unwrap(); // "a" reaches the WAL
    a.put_with(vec![batch([2])], id("b")).await.unwrap(); // "b" never does
    drop(a);
    let b = shard.open(non_durable()).await;
    assert_eq!(b.put_with(vec![batch([1])], id("a")).await.unwrap(), first);
    b.put_with(vec![batch([2])], id("b")).await.unwrap();
    assert_eq!(b.stats().retried_puts, 1, "only the id in the WAL is known");
    b.close().await.unwrap();
    shard.assert_recovered([1, 2]).await;
}

#[tokio::test]
async fn put_no_wait_answers_a_retry_with_the_first_result_and_its_durability() {
    let shard = Shard::new(&Backend::memory().store);
    let w = shard.open(durable()).await;
    let (first, watcher) = w.put_no_wait_with(vec![batch([1])], id("a")).await.unwrap();
    let (again, retry_watcher) = w.put_no_wait_with(vec![batch([1])], id("a")).await.unwrap();
    assert_eq!(again, first);
    watcher.unwrap().wait().await.unwrap();
    retry_watcher.unwrap().wait().await.unwrap();
    assert_eq!(scanned(&w).await, vec![1]);
    w.close().await.unwrap();
}

#[tokio::test]
async fn in_wal_only_mode_retries_are_answered_by_the_writer_that_took_the_put() {
    let shard = Shard::new(&Backend::memory().store);
    let config = WriterConfig {
        enable_memtable: false,
        ..durable()
    };
    let a = shard.open(config.clone()).await;
    let first = a.put_with(vec![batch([1])], id("a")).await.unwrap();
    assert_eq!(first.generation, None);
    assert_eq!(a.put_with(vec![batch([9])], id("a")).await.unwrap(), first);
    assert_eq!(shard.wal_entries().await.len(), 1);
    let e = shard
        .tailer()
        .await
        .read(shard.wal_entries().await[0].0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        e.requests[0].result, first,
        "the entry records it all the same"
    );
    a.close().await.unwrap();
    // A WAL-only writer reads no WAL on open, so a new one does not know the id (documented).
    let b = shard.open(config).await;
    b.put_with(vec![batch([1])], id("a")).await.unwrap();
    assert_eq!(b.stats().retried_puts, 0);
    b.close().await.unwrap();
    assert_eq!(shard.wal_entries().await.len(), 2);
}

#[tokio::test]
async fn a_damaged_request_id_file_fails_the_open_naming_it() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let a = shard.open(durable()).await;
    a.put_with(vec![batch([1])], id("a")).await.unwrap();
    flush_generation(&a).await;
    a.close().await.unwrap();
    let dir = &shard.manifest().await.flushed_generations[0].path;
    let path = shard
        .store
        .shard_paths(shard.id)
        .generation_request_ids(dir);
    backend
        .plant(
            &path,
            bytes::Bytes::from_static(br#"{"version":1,"puts":[]}"#),
        )
        .await;
    let e = shard.try_open(durable()).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Corrupt);
    assert!(e.to_string().contains("request_ids.json"), "{e}");
    // Without retention the file is not needed, and not read.
    let w = shard.try_open(retaining_ids_for(0)).await.unwrap();
    w.close().await.unwrap();
}
