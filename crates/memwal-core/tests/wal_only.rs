//! WAL-only mode (`enable_memtable = false`): puts go straight to the WAL, with writer-lifetime
//! positions, no MemTable, no generations and no replay. Lance's MemWAL has the same mode
//! (`docs/format.md`, "Compatibility with Lance").

mod support;

use std::sync::Arc;

use memwal_core::{ErrorCode, WriterConfig};
use support::*;

fn wal_only(config: WriterConfig) -> WriterConfig {
    config.with(|c| c.enable_memtable = false)
}

// Durable puts take writer-lifetime batch positions and no generation; a tailer reads each put's
// entry back, with the writer's epoch.
#[tokio::test]
async fn durable_puts_round_trip_through_the_tailer() {
    for (backend, shard) in each_backend() {
        let w = shard.open(wal_only(durable())).await;
        let r = w.put(vec![rows(0, 4)]).await.unwrap();
        assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 1));
        assert_eq!(r.generation, None);
        let r = w.put(vec![rows(4, 2)]).await.unwrap();
        assert_eq!((r.batch_positions.start, r.batch_positions.end), (1, 2));
        w.close().await.unwrap();

        let t = shard.tailer().await;
        assert_eq!(t.next_position().await.unwrap(), 3, "{}", backend.name);
        let e1 = t.read(1).await.unwrap().unwrap();
        let e2 = t.read(2).await.unwrap().unwrap();
        assert_eq!(e1.batches.len(), 1);
        assert_eq!(ids(&e1.batches), vec![0, 1, 2, 3]);
        assert_eq!(e2.batches.len(), 1);
        assert_eq!(ids(&e2.batches), vec![4, 5]);
        assert_eq!(e1.writer_epoch, e2.writer_epoch);
        assert!(e1.writer_epoch >= 1);
    }
}

// An empty batch list and an empty batch are rejected, and the writer goes on.
#[tokio::test]
async fn empty_batch_lists_and_empty_batches_are_rejected() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(wal_only(durable())).await;
    let e = w.put(vec![]).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "empty batch list");
    let e = w.put(vec![rows(0, 0)]).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "Batch 0 is empty");
    // Rejected input is not terminal.
    w.put(vec![rows(0, 1)]).await.unwrap();
    shard.close_and_assert_recovered(w, [0]).await;
}

// The MemTable's calls fail with a message naming WAL-only mode, and write nothing.
#[tokio::test]
async fn memtable_accessors_fail_naming_wal_only_mode() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(wal_only(durable())).await;
    let errors = [
        w.memtable_stats().unwrap_err(),
        w.scan().await.unwrap_err(),
        w.put_no_wait(vec![rows(0, 1)]).await.unwrap_err(),
        w.force_seal_active().await.unwrap_err(),
        w.wait_for_flush_drain().await.unwrap_err(),
    ];
    for e in errors {
        assert_error(&e, ErrorCode::InvalidArgument, "WAL-only mode");
    }
    // put_no_wait inserted nothing.
    w.close().await.unwrap();
    assert_eq!(shard.wal_len().await, 0);
}

// Non-durable puts wait in memory, below the size trigger and without a ticker, and close writes
// them as one entry.
#[tokio::test]
async fn non_durable_puts_are_batched_into_one_entry_at_close() {
    for (backend, shard) in each_backend() {
        let config = wal_only(non_durable()).with(|c| c.max_wal_buffer_size = 100 << 20);
        let w = shard.open(config).await;
        for i in 0..3 {
            let r = w.put(vec![rows(i * 10, 10)]).await.unwrap();
            assert_eq!(r.batch_positions.start, i as usize);
        }
        assert_eq!(shard.wal_len().await, 0, "nothing written before close");
        w.close().await.unwrap();
        let t = shard.tailer().await;
        assert_eq!(t.next_position().await.unwrap(), 2, "{}", backend.name);
        let e = t.read(1).await.unwrap().unwrap();
        assert_eq!(e.batches.len(), 3);
        assert!(e.batches.iter().all(|b| b.num_rows() == 10));
        shard.assert_recovered(0..30).await;
    }
}

// A successor fences the stale writer; each of its puts, also concurrent ones, fails with the
// fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_fences_every_put_of_the_stale_writer() {
    for (_backend, shard) in each_backend() {
        let a = Arc::new(shard.open_and_put(wal_only(durable()), [batch([1])]).await);
        let b = shard.open(wal_only(durable())).await;
        assert!(b.epoch() > a.epoch());
        b.put(vec![batch([2])]).await.unwrap();
        for r in put_concurrently(&a, [vec![batch([3])], vec![batch([4])]]).await {
            assert_peer_claimed(&r.unwrap_err());
        }
        assert_peer_claimed(&a.put(vec![batch([5])]).await.unwrap_err());
        shard.close_and_assert_recovered(b, [1, 2]).await;
    }
}

// The size trigger, checked by waiting on its effect instead of sleeping. With a 1-byte buffer
// every put crosses it, so every put gets an entry of its own, also after the first drain; with a
// buffer of two puts, every second put crosses it: the size trigger keeps firing after a drain also
// when each put is smaller than the buffer.
#[tokio::test]
async fn the_size_trigger_keeps_firing_after_a_drain() {
    let one = memwal_core::batch_store::estimated_batch_bytes(&rows(0, 10));
    for (buffer, puts_per_entry, puts) in [(1, 1, 3), (2 * one, 2, 6)] {
        for (backend, shard) in each_backend() {
            let config = wal_only(non_durable()).with(|c| c.max_wal_buffer_size = buffer);
            let w = shard.open(config).await;
            for i in 0..puts {
                w.put(vec![rows(i * 10, 10)]).await.unwrap();
                if (i + 1) % puts_per_entry == 0 {
                    let want = ((i + 1) / puts_per_entry) as u64;
                    wait_until(&format!("{want} entries are appended"), || {
                        w.wal_stats().entries_appended >= want
                    })
                    .await;
                }
            }
            let appended = w.wal_stats().entries_appended;
            assert_eq!(appended, (puts / puts_per_entry) as u64, "{}", backend.name);
            w.close().await.unwrap();
            let rows_per_entry = vec![10 * puts_per_entry as usize; appended as usize];
            assert_eq!(shard.wal_rows().await, rows_per_entry, "{}", backend.name);
        }
    }
}

// Statistics count puts and WAL appends, and no generation flush.
#[tokio::test]
async fn stats_count_puts_and_wal_flushes_but_no_memtable_flush() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open_and_put(wal_only(durable()), [rows(0, 3)]).await;
    w.close().await.unwrap();
    let s = w.stats();
    assert_eq!((s.put_count, s.put_rows), (1, 3));
    assert_eq!(s.wal_flush_count, 1);
    assert!(s.wal_flush_bytes > 0);
    assert_eq!((s.memtable_flush_count, s.backpressure_events), (0, 0));
}

// memwal's WAL-only close hint: close records the tip in the manifest (nothing else would move it),
// and the reopened writer's next position is seeded past its own fence sentinel before any put.
#[tokio::test]
async fn reopen_seeds_the_next_wal_position_from_the_close_hint() {
    for (backend, shard) in each_backend() {
        shard.close_after(wal_only(durable()), [batch([1])]).await;
        let m = shard.manifest().await;
        assert_eq!(m.wal_entry_position_last_seen, 1, "{}", backend.name);
        assert_eq!(m.flushed_generations.len(), 0);

        let w = shard.open(wal_only(durable())).await;
        let s = w.wal_stats();
        assert_eq!(s.fence_sentinel_position, Some(2));
        assert_eq!(s.next_wal_entry_position, 3);
        w.put(vec![batch([2])]).await.unwrap();
        w.close().await.unwrap();
        assert_eq!(shard.manifest().await.wal_entry_position_last_seen, 3);
        let entries = shard.wal_entries().await;
        assert_eq!(entries, vec![(1, 1, 1), (3, 2, 1)], "{}", backend.name);
    }
}

// A close whose final WAL append fails reports the `PersistenceFailure`, commits no tip hint and
// leaves the writer closed.
#[tokio::test]
async fn close_reports_a_final_wal_persistence_failure() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = wal_only(non_durable()).with(|c| {
        c.max_wal_buffer_size = 100 << 20;
        c.max_wal_persist_retries = 0;
    });
    let w = shard.open_and_put(config, [rows(0, 10)]).await;
    backend.store.faults().fail_wal_puts(u64::MAX);
    let e = w.close().await.unwrap_err();
    assert_persistence_failure(&e);
    assert!(
        e.to_string().contains("injected transient WAL put failure"),
        "{e}"
    );
    assert_eq!(backend.store.faults().wal_put_attempts(), 1);
    // The failed close committed no tip hint and left the writer closed.
    assert_eq!(shard.manifest().await.wal_entry_position_last_seen, 0);
    let e = w.put(vec![rows(0, 1)]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
}

// Durable WAL-only writes need no ticker; each durable put triggers its own append, and positions
// stay writer-lifetime monotonic across appends.
#[tokio::test]
async fn durable_puts_need_no_ticker_and_positions_are_lifetime_monotonic() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(wal_only(durable())).await;
    for i in 0..5 {
        let r = w.put(vec![batch([i]), batch([100 + i])]).await.unwrap();
        assert_eq!(r.batch_positions.start, 2 * i as usize);
        assert_eq!(r.batch_positions.end, 2 * i as usize + 2);
        assert_eq!(shard.wal_len().await, i as u64 + 1, "appended before Ok");
    }
    w.close().await.unwrap();
}

// Group commit in WAL-only mode: concurrent durable puts share entries and each completes only when
// its own batches are appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_durable_puts_share_entries() {
    let (_backend, shard) = Backend::local().with_shard();
    let w = Arc::new(shard.open(wal_only(durable())).await);
    for r in put_concurrently(&w, (0..64).map(|i| vec![batch([i])])).await {
        r.unwrap();
    }
    let entries = shard.wal_len().await;
    assert!(entries < 64, "{entries} entries for 64 puts");
    let mut got = shard.recovered_ids().await;
    got.sort();
    assert_eq!(got, (0..64).collect::<Vec<_>>());
    w.close().await.unwrap();
}

// A WAL-only shard is recovered by a MemTable-mode writer: it replays every entry.
#[tokio::test]
async fn a_memtable_writer_replays_what_a_wal_only_writer_wrote() {
    for (_backend, shard) in each_backend() {
        shard
            .crash_after(wal_only(durable()), [batch([1, 2]), batch([3])])
            .await;
        let m = shard.open(durable()).await;
        assert_eq!(scanned_ids(&m).await, vec![1, 2, 3]);
        assert_eq!(m.memtable_stats().unwrap().row_count, 3);
        shard.close_and_assert_recovered(m, [1, 2, 3]).await;
        // The replayed rows were not appended a second time.
        assert_eq!(shard.wal_rows().await.iter().sum::<usize>(), 3);
    }
}

// A WAL-only writer does not replay: it opens empty and appends after the tip.
#[tokio::test]
async fn open_does_not_replay_and_appends_after_the_tip() {
    let (_backend, shard) = Backend::memory().with_shard();
    shard.crash_after(wal_only(durable()), [batch([1])]).await;
    let w = shard.open(wal_only(durable())).await;
    let r = w.put(vec![batch([2])]).await.unwrap();
    assert_eq!(r.batch_positions.start, 0, "lifetime positions restart");
    shard.close_and_assert_recovered(w, [1, 2]).await;
}

// Abort while a durable put waits on its append fails the put with the handler-exited error; it
// never hangs or succeeds.
#[tokio::test]
async fn abort_while_a_durable_put_waits_fails_the_put() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = wal_only(durable()).with(|c| {
        c.max_wal_persist_retries = 10;
        c.wal_persist_retry_base_delay_ms = 1000;
    });
    let w = Arc::new(shard.open_failing_wal_puts(config, u64::MAX).await);
    let put = spawn_put(&w, vec![batch([1])]);
    wait_until("the append is being retried", || {
        backend.store.faults().wal_put_attempts() > 0
    })
    .await;
    w.abort().await.unwrap();
    let e = within_hang_guard("the put", put)
        .await
        .unwrap()
        .unwrap_err();
    let exited = "WAL flush handler exited before reporting durability";
    assert_error(&e, ErrorCode::Closed, exited);
}
