//! MemTable rotation and generation flushes: size and batch-count triggers, generation-local
//! positions, and what a generation flush publishes (`docs/format.md`, "Generation folders"). Most
//! of these behaviours are Lance MemWAL's too (`docs/format.md`, "Compatibility with Lance").

mod support;

use memwal_core::ErrorCode;
use memwal_core::batch_store::estimated_batch_bytes;
use support::*;

// Puts rotate the MemTable at the size limit: non-durable ones (waiting for the drain instead of
// sleeping), and durable ones, repeatedly.
#[tokio::test]
async fn puts_rotate_at_the_size_limit() {
    for backend in Backend::all() {
        for (config, puts, per_put, min_rotations) in
            [(non_durable(), 20, 10, 1), (durable(), 100, 4, 3)]
        {
            let shard = Shard::new(&backend.store);
            let w = shard
                // Compaction off: the test counts the generations the rotations made.
                .open(config.with(|c| {
                    c.max_memtable_size = 1024;
                    c.compaction = false;
                }))
                .await;
            let initial = w.memtable_stats().unwrap().generation;
            for i in 0..puts {
                w.put(vec![rows(i * per_put, per_put as usize)])
                    .await
                    .unwrap();
            }
            w.wait_for_flush_drain().await.unwrap();
            let g = w.memtable_stats().unwrap().generation;
            assert!(
                g >= initial + min_rotations,
                "{}: generation {g}",
                backend.name
            );
            let m = shard.manifest().await;
            assert_eq!(m.flushed_generations.len() as u64, g - initial);
            assert_eq!(m.current_generation, g);
            let all = 0..puts * per_put;
            assert_eq!(scanned_ids(&w).await, all.clone().collect::<Vec<_>>());
            shard.close_and_assert_recovered(w, all).await;
        }
    }
}

// Every put freezes its MemTable; every generation flush writes a directory of its own
// (`<random8hex>_gen_<g>`), never "already exists".
#[tokio::test]
async fn every_put_freezing_writes_one_distinct_generation_each() {
    for (backend, shard) in each_backend() {
        let config = durable().with(|c| {
            c.max_memtable_size = 64;
            c.compaction = false;
        });
        let w = shard.open(config).await;
        let initial = w.memtable_stats().unwrap().generation;
        let n = 60;
        for i in 0..n {
            let r = w.put(vec![rows(i * 10, 10)]).await.unwrap();
            assert_eq!(r.generation, Some(initial + i as u64));
            assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 1));
        }
        let active = w.memtable_stats().unwrap().generation;
        assert_eq!(active, initial + n as u64, "{}", backend.name);
        w.close().await.unwrap();
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), n as usize);
        let gens: Vec<u64> = m.flushed_generations.iter().map(|g| g.generation).collect();
        assert_eq!(gens, (initial..initial + n as u64).collect::<Vec<_>>());
        let mut dirs: Vec<&str> = m
            .flushed_generations
            .iter()
            .map(|g| g.path.as_str())
            .collect();
        for (g, d) in m.flushed_generations.iter().zip(&dirs) {
            let (hex, rest) = d.split_at(8);
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{d}");
            assert_eq!(rest, format!("_gen_{}", g.generation));
        }
        dirs.sort();
        dirs.dedup();
        assert_eq!(dirs.len(), n as usize);
        assert_eq!(m.replay_after_wal_entry_position, n as u64);
        shard.assert_recovered(0..n * 10).await;
    }
}

// Batch positions are local to the generation; the first put after a rotation reports 0..1 again,
// with the new generation.
#[tokio::test]
async fn positions_restart_in_every_generation() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;
    let r = w.put(vec![batch([1]), batch([2])]).await.unwrap();
    assert_eq!(r.generation, Some(1));
    assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 2));
    let r = w.put(vec![batch([3])]).await.unwrap();
    assert_eq!((r.batch_positions.start, r.batch_positions.end), (2, 3));
    w.force_seal_active().await.unwrap();
    let r = w.put(vec![batch([4])]).await.unwrap();
    assert_eq!(r.generation, Some(2));
    assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 1));
    shard.close_and_assert_recovered(w, [1, 2, 3, 4]).await;
}

// A put whose batches do not fit in the active MemTable freezes it first (instead of failing "batch
// store is full"); a put larger than a whole MemTable is rejected.
#[tokio::test]
async fn a_put_that_does_not_fit_freezes_first_and_an_oversized_one_is_rejected() {
    let (_backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.max_memtable_batches = 4);
    let w = shard.open(config).await;
    let r = w.put(batch_per_id(0..3).collect()).await.unwrap();
    assert_eq!((r.generation, r.batch_positions.end), (Some(1), 3));
    let r = w.put(batch_per_id(3..5).collect()).await.unwrap();
    assert_eq!(r.generation, Some(2));
    assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 2));
    let e = w.put(batch_per_id(5..10).collect()).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "max_memtable_batches");
    // Exactly a whole MemTable is fine, and fills it: it freezes at once.
    let r = w.put(batch_per_id(10..14).collect()).await.unwrap();
    assert_eq!(r.generation, Some(3));
    assert_eq!(w.memtable_stats().unwrap().generation, 4);
    shard
        .close_and_assert_recovered(w, (0..5).chain(10..14))
        .await;
}

// A full BatchStore freezes the MemTable after the put that filled it.
#[tokio::test]
async fn a_full_batch_store_freezes() {
    let (_backend, shard) = Backend::memory().with_shard();
    let config = non_durable().with(|c| c.max_memtable_batches = 3);
    let w = shard.open(config).await;
    for i in 0..3 {
        w.put(vec![batch([i])]).await.unwrap();
        let s = w.memtable_stats().unwrap();
        if i < 2 {
            assert_eq!((s.generation, s.batch_count), (1, i as u64 + 1));
        } else {
            assert_eq!((s.generation, s.batch_count), (2, 0));
        }
    }
    w.wait_for_flush_drain().await.unwrap();
    assert_eq!(shard.manifest().await.flushed_generations.len(), 1);
    w.close().await.unwrap();
}

// The WAL size trigger counts from the start of each MemTable, so it fires in a new generation as
// soon as that generation crosses the buffer size.
#[tokio::test]
async fn the_wal_size_trigger_fires_again_after_a_rotation() {
    for (backend, shard) in each_backend() {
        // Ids 10..99 all have two-digit names, so these batches are the same size.
        let one = estimated_batch_bytes(&rows(10, 10));
        let w = shard
            .open(non_durable().with(|c| {
                c.max_wal_buffer_size = 2 * one;
                c.max_memtable_batches = 3;
            }))
            .await;
        let appended = |n| w.wal_stats().entries_appended == n;
        w.put(vec![rows(10, 10)]).await.unwrap();
        assert!(appended(0));
        w.put(vec![rows(20, 10)]).await.unwrap();
        wait_until("the size trigger appended", || appended(1)).await;
        // Fills the BatchStore: the freeze appends the rest of generation 1.
        w.put(vec![rows(30, 10)]).await.unwrap();
        wait_until("the freeze appended", || appended(2)).await;
        w.put(vec![rows(40, 10)]).await.unwrap();
        w.put(vec![rows(50, 10)]).await.unwrap();
        wait_until("the size trigger appended in generation 2", || appended(3)).await;
        assert_eq!(shard.wal_rows().await, vec![20, 10, 20], "{}", backend.name);
        shard.close_and_assert_recovered(w, 10..60).await;
    }
}

// What one generation flush publishes: its file, listed in a new manifest version that moves the
// replay cursor.
#[tokio::test]
async fn a_generation_flush_publishes_its_file_and_moves_the_cursor() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        assert_eq!(shard.manifest().await.version, 1);
        w.put(vec![rows(0, 10)]).await.unwrap();
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        let m = shard.manifest().await;
        assert_eq!(m.version, 2, "{}", backend.name);
        assert_eq!(m.writer_epoch, 1);
        assert_eq!(m.replay_after_wal_entry_position, 1);
        assert_eq!(m.wal_entry_position_last_seen, 1);
        assert_eq!(m.current_generation, 2);
        assert_eq!(m.flushed_generations.len(), 1);
        let g = &m.flushed_generations[0];
        assert_eq!(g.generation, 1);
        assert_eq!(g.physical_rows, Some(10));
        assert!(g.path.ends_with("_gen_1"), "{}", g.path);
        let file = backend.store.shard_paths(shard.id).generation_file(&g.path);
        assert!(
            backend
                .shard_objects(shard.id)
                .await
                .contains(&file.to_string()),
            "the generation file exists"
        );
        let s = w.stats();
        assert_eq!((s.memtable_flush_count, s.memtable_flush_rows), (1, 10));
        // The flushed rows now come from the generation file.
        assert_eq!(scanned_ids(&w).await, (0..10).collect::<Vec<_>>());
        shard.close_and_assert_recovered(w, 0..10).await;
    }
}

// A frozen MemTable whose WAL append failed is never written as a generation.
#[tokio::test]
async fn a_memtable_whose_wal_append_failed_is_never_flushed() {
    for (backend, shard) in each_backend() {
        let config = non_durable().with(|c| c.max_wal_persist_retries = 0);
        let w = shard.open(config).await;
        w.put(vec![rows(0, 10)]).await.unwrap();
        backend.store.faults().fail_wal_puts(u64::MAX);
        w.force_seal_active().await.unwrap();
        assert_persistence_failure(&w.wait_for_flush_drain().await.unwrap_err());
        let m = shard.manifest().await;
        assert_eq!((m.version, m.flushed_generations.len()), (1, 0));
        let names = backend.shard_objects(shard.id).await;
        assert!(names.iter().any(|n| n.contains("/manifest/")), "{names:?}");
        assert!(
            !names.iter().any(|n| n.contains("_gen_")),
            "{}: {names:?}",
            backend.name
        );
        assert_eq!(w.memtable_stats().unwrap().frozen_memtable_count, 1);
    }
}

// An empty MemTable is never flushed; a writer closed without rows publishes nothing.
#[tokio::test]
async fn an_empty_memtable_is_never_flushed() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        w.close().await.unwrap();
        let m = shard.manifest().await;
        let published = (m.version, m.current_generation);
        assert_eq!(published, (1, 1), "{}", backend.name);
        assert!(m.flushed_generations.is_empty());
        assert_eq!(shard.wal_len().await, 0);
    }
}

// The active MemTable's pending WAL counts fall to zero only once every committed batch is in the
// WAL.
#[tokio::test]
async fn pending_wal_counts_track_what_is_not_yet_appended() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(non_durable()).await;
    w.put(vec![rows(0, 10)]).await.unwrap();
    w.put(vec![rows(10, 5)]).await.unwrap();
    let s = w.memtable_stats().unwrap();
    let pending = (s.pending_wal_batch_count, s.pending_wal_row_count);
    assert_eq!(pending, (2, 15));
    assert_eq!(s.pending_wal_estimated_bytes, s.estimated_size);
    w.flush().await.unwrap();
    let s = w.memtable_stats().unwrap();
    assert_eq!((s.pending_wal_batch_count, s.pending_wal_row_count), (0, 0));
    assert_eq!(s.pending_wal_estimated_bytes, 0);
    w.put(vec![rows(15, 3)]).await.unwrap();
    let s = w.memtable_stats().unwrap();
    assert_eq!((s.pending_wal_batch_count, s.pending_wal_row_count), (1, 3));
    assert_eq!((s.row_count, s.batch_count), (18, 3));
    w.close().await.unwrap();
}

// A generation's replay cursor is the WAL entry that actually appended its rows, also when its
// freeze found them already appended (coalesced), so nothing flushed is replayed again.
#[tokio::test]
async fn the_cursor_covers_rows_appended_before_the_freeze_asked() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        let (_, first) = w.put_no_wait(vec![batch([1])]).await.unwrap();
        w.force_seal_active().await.unwrap();
        let (_, second) = w.put_no_wait(vec![batch([2])]).await.unwrap();
        first.unwrap().wait().await.unwrap();
        second.unwrap().wait().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        let m = shard.manifest().await;
        assert_eq!(m.flushed_generations.len(), 1);
        assert_eq!(m.replay_after_wal_entry_position, 1, "{}", backend.name);
        drop(w);
        let r = shard.open(durable()).await;
        let s = r.memtable_stats().unwrap();
        assert_eq!(s.row_count, 1, "only the unflushed row is replayed");
        assert_eq!(scanned_ids(&r).await, vec![1, 2]);
        shard.close_and_assert_recovered(r, [1, 2]).await;
    }
}
