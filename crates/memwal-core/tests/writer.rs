//! The writer's put path and reads: positions, `put_no_wait`, what `scan` sees, and the errors for
//! bad input. Most of these behaviours are Lance MemWAL's too (`docs/format.md`, "Compatibility
//! with Lance").

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use memwal_core::{ErrorCode, ShardReader, ShardWriter};
use support::*;

// A put lands in the active MemTable of generation 1, at batch positions 0..1.
#[tokio::test]
async fn a_basic_put_lands_in_the_active_memtable() {
    for (_backend, shard) in each_backend() {
        let w = shard.open(non_durable()).await;
        let r = w.put(vec![rows(0, 10)]).await.unwrap();
        assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 1));
        assert_eq!(r.generation, Some(1));
        let s = w.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count), (10, 1));
        assert!(s.estimated_size > 0);
        shard.close_and_assert_recovered(w, 0..10).await;
    }
}

// In durable mode, `put_no_wait` makes the rows visible in memory at once and returns a watcher
// that resolves once their WAL entry is written.
#[tokio::test]
async fn put_no_wait_is_visible_in_memory_then_durable() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        let (r, watcher) = w.put_no_wait(vec![rows(0, 10)]).await.unwrap();
        assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 1));
        let watcher = watcher.expect("durable mode returns a watcher");
        assert_eq!(w.memtable_stats().unwrap().row_count, 10);
        watcher.wait().await.unwrap();
        let entries = shard.wal_entries().await;
        assert_eq!(entries, vec![(1, 1, 10)], "{}", backend.name);
        w.close().await.unwrap();
    }
}

// In non-durable mode, `put_no_wait` returns no watcher.
#[tokio::test]
async fn put_no_wait_in_non_durable_mode_returns_no_watcher() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(non_durable()).await;
    let (r, watcher) = w.put_no_wait(vec![rows(0, 10)]).await.unwrap();
    assert!(watcher.is_none());
    assert_eq!(r.batch_positions.end, 1);
    assert_eq!(w.memtable_stats().unwrap().row_count, 10);
    w.close().await.unwrap();
}

// A multi-batch put is appended atomically, at consecutive positions, and lands in one WAL entry.
#[tokio::test]
async fn a_multi_batch_put_takes_consecutive_positions() {
    for (backend, shard) in each_backend() {
        let w = shard.open(durable()).await;
        let batches: Vec<RecordBatch> = (0..5).map(|i| rows(i * 10, 10)).collect();
        let r = w.put(batches).await.unwrap();
        assert_eq!((r.batch_positions.start, r.batch_positions.end), (0, 5));
        assert_eq!(r.batch_positions.len(), 5);
        let s = w.memtable_stats().unwrap();
        assert_eq!((s.row_count, s.batch_count), (50, 5));
        let entries = shard.wal_entries().await;
        assert_eq!(entries, vec![(1, 1, 50)], "{}", backend.name);
        let r = w.put(vec![rows(50, 1)]).await.unwrap();
        assert_eq!((r.batch_positions.start, r.batch_positions.end), (5, 6));
        shard.close_and_assert_recovered(w, 0..51).await;
    }
}

// Rejected input is `InvalidArgument` or `SchemaMismatch`, names what was wrong, inserts nothing,
// and is not terminal.
#[tokio::test]
async fn bad_input_is_rejected_without_side_effects() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;

    let e = w.put(vec![]).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "empty batch list");
    let e = w.put(vec![rows(0, 1), rows(1, 0)]).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "Batch 1 is empty");

    let wrong_type = Field::new("id", DataType::Int64, false);
    let b = batch_with(wrong_type, Arc::new(Int64Array::from(vec![1i64])), &["x"]);
    let e = w.put(vec![b]).await.unwrap_err();
    assert_error(&e, ErrorCode::SchemaMismatch, "`id`");
    assert!(e.to_string().contains("Int64"), "{e}");

    let renamed = Field::new("key", DataType::Int32, false);
    let b = batch_with(renamed, Arc::new(Int32Array::from(vec![1])), &["x"]);
    let e = w.put(vec![b]).await.unwrap_err();
    assert_error(&e, ErrorCode::SchemaMismatch, "`key`");

    let one_field = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
    let b = RecordBatch::try_new(one_field, vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
    let e = w.put(vec![rows(0, 1), b]).await.unwrap_err();
    assert_error(&e, ErrorCode::SchemaMismatch, "batch 1 has 1 fields");

    // A nullable `id` is accepted when it holds no nulls, rejected when it does.
    let loose = Field::new("id", DataType::Int32, true);
    let with_null = Arc::new(Int32Array::from(vec![Some(1), None]));
    let e = w
        .put(vec![batch_with(loose.clone(), with_null, &["a", "b"])])
        .await
        .unwrap_err();
    assert_error(&e, ErrorCode::SchemaMismatch, "not nullable");

    let s = w.memtable_stats().unwrap();
    assert_eq!((s.row_count, s.batch_count), (0, 0), "nothing was inserted");
    assert_eq!(shard.wal_len().await, 0);
    assert_eq!(w.stats().put_count, 0);

    let no_nulls = batch_with(loose, Arc::new(Int32Array::from(vec![7])), &["a"]);
    w.put(vec![no_nulls]).await.unwrap();
    let scanned = w.scan().await.unwrap();
    assert_eq!(ids(&scanned), vec![7]);
    let stored = scanned[0].schema();
    assert_eq!(stored, schema(), "stored with the shard's schema");
    shard.close_and_assert_recovered(w, [7]).await;
}

/// A batch of the columns `ids` (declared as `id`) and `names` (`name: Utf8`).
fn batch_with(id: Field, ids: ArrayRef, names: &[&str]) -> RecordBatch {
    let name = Field::new("name", DataType::Utf8, true);
    let schema = Arc::new(Schema::new(vec![id, name]));
    let names = Arc::new(StringArray::from(names.to_vec()));
    RecordBatch::try_new(schema, vec![ids, names]).unwrap()
}

// Batches carrying schema metadata of their own are accepted; rows come back with the shard's
// schema.
#[tokio::test]
async fn batch_schema_metadata_does_not_matter() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;
    let b = rows(0, 2);
    let tagged = Arc::new(Schema::new_with_metadata(
        schema().fields().clone(),
        HashMap::from([("origin".to_string(), "test".to_string())]),
    ));
    let b = RecordBatch::try_new(tagged, b.columns().to_vec()).unwrap();
    w.put(vec![b]).await.unwrap();
    let scanned = w.scan().await.unwrap();
    assert_eq!(ids(&scanned), vec![0, 1]);
    assert_eq!(scanned[0].schema(), schema());
    shard.close_and_assert_recovered(w, [0, 1]).await;
}

// Reopening a shard with a different schema fails before claiming anything.
#[tokio::test]
async fn reopening_with_another_schema_is_a_schema_mismatch() {
    for (backend, shard) in each_backend() {
        shard.close_after(durable(), [batch([1])]).await;
        let before = shard.manifest().await;
        let other = Arc::new(Schema::new(vec![Field::new("x", DataType::Utf8, true)]));
        let config = on(shard.id, durable());
        let e = ShardWriter::open(shard.store.clone(), other, config)
            .await
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::SchemaMismatch, "{e}");
        assert_eq!(shard.manifest().await, before, "{}", backend.name);
    }
}

// In durable mode `scan` shows what a crash would keep, so a row waiting for its append is not
// visible yet; after the append it is.
#[tokio::test(start_paused = true)]
async fn a_durable_scan_shows_only_appended_rows() {
    let (backend, shard) = Backend::memory().with_shard();
    let config = durable().with(|c| c.wal_persist_retry_base_delay_ms = 1000);
    let w = shard.open_and_put(config, [batch([1])]).await;
    backend.store.faults().fail_wal_puts(1);
    let (_, watcher) = w.put_no_wait(vec![batch([2])]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(scanned_ids(&w).await, vec![1]);
    assert_eq!(w.memtable_stats().unwrap().row_count, 2);
    watcher.unwrap().wait().await.unwrap();
    assert_eq!(scanned_ids(&w).await, vec![1, 2]);
    w.close().await.unwrap();
}

// In non-durable mode `scan` reads its own writes.
#[tokio::test]
async fn a_non_durable_scan_reads_its_own_writes() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open_and_put(non_durable(), [batch([1, 2])]).await;
    assert_eq!(scanned_ids(&w).await, vec![1, 2]);
    assert_eq!(shard.wal_len().await, 0);
    w.close().await.unwrap();
}

// `scan` returns every row the writer holds in insertion order: flushed generations, then
// frozen MemTables, then the active one.
#[tokio::test]
async fn scan_spans_generations_frozen_and_active_memtables_in_order() {
    for (backend, shard) in each_backend() {
        let config = non_durable().with(|c| {
            c.max_wal_persist_retries = 10;
            c.wal_persist_retry_base_delay_ms = 20;
        });
        let w = shard.open_and_put(config, [batch([1, 2])]).await;
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        // Generation 2 stays frozen while its WAL append is being retried.
        backend.store.faults().fail_wal_puts(u64::MAX);
        w.put(vec![batch([3])]).await.unwrap();
        w.force_seal_active().await.unwrap();
        w.put(vec![batch([4, 5])]).await.unwrap();
        let s = w.memtable_stats().unwrap();
        assert_eq!(s.frozen_memtable_count, 1, "{}", backend.name);
        assert_eq!(scanned_ids(&w).await, vec![1, 2, 3, 4, 5]);
        backend.store.faults().recover();
        w.wait_for_flush_drain().await.unwrap();
        assert_eq!(w.memtable_stats().unwrap().frozen_memtable_count, 0);
        assert_eq!(scanned_ids(&w).await, vec![1, 2, 3, 4, 5]);
        shard.close_and_assert_recovered(w, 1..6).await;
    }
}

// Concurrent puts get disjoint position ranges, and every row is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_puts_get_disjoint_positions() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = Arc::new(shard.open(non_durable()).await);
    let puts = (0..32).map(|i| vec![batch([2 * i]), batch([2 * i + 1])]);
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for r in put_concurrently(&w, puts).await {
        let r = r.unwrap();
        assert_eq!(r.generation, Some(1));
        ranges.push((r.batch_positions.start, r.batch_positions.end));
    }
    ranges.sort();
    for (i, (start, end)) in ranges.iter().enumerate() {
        assert_eq!((*start, *end), (2 * i, 2 * i + 2));
    }
    let mut got = scanned_ids(&w).await;
    got.sort();
    assert_eq!(got, (0..64).collect::<Vec<_>>());
    w.close().await.unwrap();
}

// The reader's scan carries the shard's schema even for a shard without rows.
#[tokio::test]
async fn the_reader_reports_the_shard_schema() {
    let (backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;
    let r = ShardReader::open(backend.store.clone(), shard.id)
        .await
        .unwrap();
    let scanned = r.scan().await.unwrap();
    assert!(scanned.batches.is_empty());
    assert_eq!(scanned.schema.fields(), schema().fields());
    assert_eq!(r.shard_id(), shard.id);
    w.close().await.unwrap();
    let missing = ShardReader::open(backend.store.clone(), uuid::Uuid::new_v4())
        .await
        .unwrap_err();
    assert_error(&missing, ErrorCode::InvalidArgument, "no manifest");
}
