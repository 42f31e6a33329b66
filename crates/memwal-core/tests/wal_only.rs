//! WAL-only mode (`enable_memtable = false`, reference §6): puts go straight to the WAL, with
//! writer-lifetime positions, no MemTable, no generations and no replay.

mod support;

use std::sync::Arc;

use memwal_core::{ErrorCode, FenceReason, ShardWriter, WriterConfig};
use support::*;

fn wal_only(config: WriterConfig) -> WriterConfig {
    WriterConfig {
        enable_memtable: false,
        ..config
    }
}

// Reference §8.2 scenario 32.
#[tokio::test]
async fn durable_puts_round_trip_through_the_tailer() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
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

// Reference §8.2 scenario 34.
#[tokio::test]
async fn empty_batch_lists_and_empty_batches_are_rejected() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let w = shard.open(wal_only(durable())).await;
    let e = w.put(vec![]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(e.to_string().contains("empty batch list"), "{e}");
    let e = w.put(vec![rows(0, 0)]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(e.to_string().contains("Batch 0 is empty"), "{e}");
    // Rejected input is not terminal.
    w.put(vec![rows(0, 1)]).await.unwrap();
    w.close().await.unwrap();
    shard.assert_recovered([0]).await;
}

// Reference §8.2 scenario 35.
#[tokio::test]
async fn memtable_accessors_fail_naming_wal_only_mode() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let w = shard.open(wal_only(durable())).await;
    let errors = [
        w.memtable_stats().unwrap_err(),
        w.scan().await.unwrap_err(),
        w.put_no_wait(vec![rows(0, 1)]).await.unwrap_err(),
        w.force_seal_active().await.unwrap_err(),
        w.wait_for_flush_drain().await.unwrap_err(),
    ];
    for e in errors {
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
        assert!(e.to_string().contains("WAL-only mode"), "{e}");
    }
    // put_no_wait inserted nothing.
    w.close().await.unwrap();
    assert_eq!(shard.wal_len().await, 0);
}

// Reference §8.2 scenario 36.
#[tokio::test]
async fn non_durable_puts_are_batched_into_one_entry_at_close() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let config = WriterConfig {
            max_wal_buffer_size: 100 << 20,
            ..wal_only(non_durable())
        };
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

// Reference §8.2 scenario 37.
#[tokio::test]
async fn a_successor_fences_the_stale_writer() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = shard.open(wal_only(durable())).await;
        a.put(vec![batch([1])]).await.unwrap();
        let b = shard.open(wal_only(durable())).await;
        assert!(b.epoch() > a.epoch());
        b.put(vec![batch([2])]).await.unwrap();
        let e = a.put(vec![batch([3])]).await.unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch), "{e}");
        assert!(e.to_string().contains("Writer fenced"), "{e}");
        b.close().await.unwrap();
        shard.assert_recovered([1, 2]).await;
    }
}

// Reference §8.2 scenario 38, with waits on the trigger's effect instead of sleeps. Every put
// crosses the 1-byte buffer, so every put gets an entry of its own, also after the first drain.
#[tokio::test]
async fn size_trigger_fires_for_every_put_that_crosses_the_buffer() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let config = WriterConfig {
            max_wal_buffer_size: 1,
            ..wal_only(non_durable())
        };
        let w = shard.open(config).await;
        for i in 0..3 {
            w.put(vec![rows(i * 10, 10)]).await.unwrap();
            let want = i as u64 + 1;
            wait_until(&format!("{want} entries are appended"), || {
                w.wal_stats().entries_appended >= want
            })
            .await;
        }
        w.close().await.unwrap();
        let entries = shard.wal_entries().await;
        assert_eq!(
            entries.iter().map(|e| e.2).collect::<Vec<_>>(),
            vec![10, 10, 10],
            "{}",
            backend.name
        );
    }
}

// Reference §8.2 scenario 38: the size trigger keeps firing after a drain also when each put is
// smaller than the buffer; here every second put crosses it.
#[tokio::test]
async fn size_trigger_keeps_firing_after_a_drain() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let one = memwal_core::batch_store::estimated_batch_bytes(&rows(0, 10));
    let config = WriterConfig {
        max_wal_buffer_size: one * 2,
        ..wal_only(non_durable())
    };
    let w = shard.open(config).await;
    for i in 0..6 {
        w.put(vec![rows(i * 10, 10)]).await.unwrap();
        if i % 2 == 1 {
            let want = (i as u64).div_ceil(2);
            wait_until(&format!("{want} entries are appended"), || {
                w.wal_stats().entries_appended >= want
            })
            .await;
        }
    }
    assert_eq!(w.wal_stats().entries_appended, 3);
    w.close().await.unwrap();
    assert_eq!(
        shard
            .wal_entries()
            .await
            .iter()
            .map(|e| e.2)
            .collect::<Vec<_>>(),
        vec![20, 20, 20]
    );
}

// Reference §8.2 scenario 39.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_of_a_fenced_writer_all_fail() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let a = Arc::new(shard.open(wal_only(durable())).await);
        a.put(vec![batch([1])]).await.unwrap();
        let b = shard.open(wal_only(durable())).await;
        b.put(vec![batch([2])]).await.unwrap();
        let puts = [3, 4].map(|i| {
            let a = a.clone();
            tokio::spawn(async move { a.put(vec![batch([i])]).await })
        });
        for r in futures::future::join_all(puts).await {
            let e = r.unwrap().unwrap_err();
            assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch), "{e}");
        }
        b.close().await.unwrap();
        shard.assert_recovered([1, 2]).await;
    }
}

// Reference §8.2 scenario 40.
#[tokio::test]
async fn stats_count_puts_and_wal_flushes_but_no_memtable_flush() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let w = shard.open(wal_only(durable())).await;
    w.put(vec![rows(0, 3)]).await.unwrap();
    w.close().await.unwrap();
    let s = w.stats();
    assert_eq!(s.put_count, 1);
    assert_eq!(s.put_rows, 3);
    assert_eq!(s.wal_flush_count, 1);
    assert!(s.wal_flush_bytes > 0);
    assert_eq!(s.memtable_flush_count, 0);
    assert_eq!(s.backpressure_events, 0);
}

// Reference §8.2 scenario 31, and memwal's WAL-only close hint: close records the tip in the
// manifest (nothing else would move it), and the reopened writer's next position is seeded
// past its own fence sentinel before any put.
#[tokio::test]
async fn reopen_seeds_the_next_wal_position_from_the_close_hint() {
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let w = shard.open(wal_only(durable())).await;
        w.put(vec![batch([1])]).await.unwrap();
        w.close().await.unwrap();
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
        assert_eq!(
            shard.wal_entries().await,
            vec![(1, 1, 1), (3, 2, 1)],
            "{}",
            backend.name
        );
    }
}

// Reference §8.2 scenario 17 (WAL-only variant).
#[tokio::test]
async fn close_reports_a_final_wal_persistence_failure() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let config = WriterConfig {
        max_wal_buffer_size: 100 << 20,
        max_wal_persist_retries: 0,
        ..wal_only(non_durable())
    };
    let w = shard.open(config).await;
    w.put(vec![rows(0, 10)]).await.unwrap();
    backend.store.faults().fail_wal_puts(u64::MAX);
    let e = w.close().await.unwrap_err();
    assert_eq!(
        e.fence_reason(),
        Some(FenceReason::PersistenceFailure),
        "{e}"
    );
    assert!(
        e.to_string().contains("injected transient WAL put failure"),
        "{e}"
    );
    assert_eq!(backend.store.faults().wal_put_attempts(), 1);
    // The failed close committed no tip hint and left the writer closed.
    assert_eq!(shard.manifest().await.wal_entry_position_last_seen, 0);
    assert_eq!(
        w.put(vec![rows(0, 1)]).await.unwrap_err().code(),
        ErrorCode::Closed
    );
}

// Reference §10.20: durable WAL-only writes need no ticker; each durable put triggers its own
// append, and positions stay writer-lifetime monotonic across appends.
#[tokio::test]
async fn durable_puts_need_no_ticker_and_positions_are_lifetime_monotonic() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let w = shard.open(wal_only(durable())).await;
    for i in 0..5 {
        let r = w.put(vec![batch([i]), batch([100 + i])]).await.unwrap();
        assert_eq!(r.batch_positions.start, 2 * i as usize);
        assert_eq!(r.batch_positions.end, 2 * i as usize + 2);
        assert_eq!(shard.wal_len().await, i as u64 + 1, "appended before Ok");
    }
    w.close().await.unwrap();
}

// Group commit in WAL-only mode (reference §6): concurrent durable puts share entries and each
// completes only when its own batches are appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_durable_puts_share_entries() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let w = Arc::new(shard.open(wal_only(durable())).await);
    let puts = (0..64).map(|i| {
        let w = w.clone();
        tokio::spawn(async move { w.put(vec![batch([i])]).await })
    });
    for r in futures::future::join_all(puts).await {
        r.unwrap().unwrap();
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
    for backend in Backend::all() {
        let shard = Shard::new(&backend.store);
        let w = shard.open(wal_only(durable())).await;
        w.put(vec![batch([1, 2])]).await.unwrap();
        w.put(vec![batch([3])]).await.unwrap();
        drop(w);
        let m = shard.open(durable()).await;
        assert_eq!(ids(&m.scan().await.unwrap()), vec![1, 2, 3]);
        assert_eq!(m.memtable_stats().unwrap().row_count, 3);
        m.close().await.unwrap();
        shard.assert_recovered([1, 2, 3]).await;
        // The replayed rows were not appended a second time.
        assert_eq!(
            shard.wal_entries().await.iter().map(|e| e.2).sum::<usize>(),
            3
        );
    }
}

// A WAL-only writer does not replay: it opens empty and appends after the tip.
#[tokio::test]
async fn open_does_not_replay_and_appends_after_the_tip() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let w = shard.open(wal_only(durable())).await;
    w.put(vec![batch([1])]).await.unwrap();
    drop(w);
    let w: ShardWriter = shard.open(wal_only(durable())).await;
    let r = w.put(vec![batch([2])]).await.unwrap();
    assert_eq!(r.batch_positions.start, 0, "lifetime positions restart");
    w.close().await.unwrap();
    shard.assert_recovered([1, 2]).await;
}

// Reference §8.2 scenario 6 (WAL-only variant): abort while a durable put waits on its append
// fails the put with the handler-exited error; it never hangs or succeeds.
#[tokio::test]
async fn abort_while_a_durable_put_waits_fails_the_put() {
    let backend = Backend::memory();
    let shard = Shard::new(&backend.store);
    let config = WriterConfig {
        max_wal_persist_retries: 10,
        wal_persist_retry_base_delay_ms: 1000,
        ..wal_only(durable())
    };
    let w = Arc::new(shard.open(config).await);
    backend.store.faults().fail_wal_puts(u64::MAX);
    let put = {
        let w = w.clone();
        tokio::spawn(async move { w.put(vec![batch([1])]).await })
    };
    wait_until("the append is being retried", || {
        backend.store.faults().wal_put_attempts() > 0
    })
    .await;
    w.abort().await.unwrap();
    let e = tokio::time::timeout(HANG_GUARD, put)
        .await
        .expect("must not hang")
        .unwrap()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("WAL flush handler exited before reporting durability"),
        "{e}"
    );
    assert_eq!(e.code(), ErrorCode::Closed);
}
