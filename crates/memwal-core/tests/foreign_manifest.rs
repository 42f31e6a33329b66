//! A shard whose latest manifest another implementation wrote. Lance, taking a shard over,
//! rewrites the manifest with its own fields only: memwal's (numbers 1001 and up: the Arrow
//! schema, the holder, the name, the WAL low-water mark) are gone. memwal must still refuse a
//! wrong schema before writing anything, and still tell collected WAL entries from holes.

mod support;

use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use memwal_core::gc::{self, GcOptions};
use memwal_core::manifest::ShardManifest;
use memwal_core::store::CreateOutcome;
use memwal_core::{ErrorCode, ShardWriter, WriterConfig};
use support::*;

/// The test schema with the `_tombstone` column Lance adds to its WAL entries.
fn lance_schema() -> SchemaRef {
    let mut fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("_tombstone", DataType::Boolean, true));
    Arc::new(Schema::new(fields))
}

/// Rows `ids` with the `_tombstone` column, unset.
fn lance_batch(ids: impl IntoIterator<Item = i32>) -> RecordBatch {
    let b = batch(ids);
    let mut columns = b.columns().to_vec();
    columns.push(Arc::new(BooleanArray::from(vec![None; b.num_rows()])));
    RecordBatch::try_new(lance_schema(), columns).unwrap()
}

/// Durable, no background collection (tests collect when they choose).
fn manual_gc() -> WriterConfig {
    durable().with(|c| c.gc = false)
}

/// Writes the next manifest version as Lance writes it when it takes `shard` over: the next
/// epoch, and none of memwal's fields.
async fn rewrite_as_lance(shard: &Shard) -> ShardManifest {
    let mut m = shard.manifest().await;
    m.version += 1;
    m.writer_epoch += 1;
    m.arrow_schema = None;
    m.writer_id = String::new();
    m.checksum = None;
    m.writer_host = None;
    m.writer_pid = None;
    m.claimed_at_ms = None;
    m.shard_name = None;
    m.wal_low_water = 0;
    for g in &mut m.flushed_generations {
        g.checksum = None;
        g.request_ids_newest_ms = None;
        g.request_ids_checksum = None;
    }
    assert_eq!(
        shard.manifests().write(&m).await.unwrap(),
        CreateOutcome::Created
    );
    m
}

/// Opens `shard` with `schema`.
async fn open_with(
    shard: &Shard,
    schema: SchemaRef,
    config: WriterConfig,
) -> memwal_core::Result<ShardWriter> {
    ShardWriter::open(shard.store.clone(), schema, on(shard.id, config)).await
}

/// An open with a schema the shard's WAL entries (or, with none to replay, its newest
/// generation) do not have fails before writing anything, and the next open with the right
/// schema takes the shard as if the wrong one had never been tried.
#[tokio::test]
async fn a_wrong_schema_is_refused_before_anything_is_written_when_the_manifest_records_none() {
    for with_entries in [true, false] {
        for (backend, shard) in each_backend() {
            // Rows 0-1 in a generation; with entries, row 2 only in the WAL, after the
            // sentinel of the writer that put it.
            let w = open_with(&shard, lance_schema(), manual_gc())
                .await
                .unwrap();
            w.put(vec![lance_batch([0, 1])]).await.unwrap();
            w.close().await.unwrap();
            if with_entries {
                let w = open_with(&shard, lance_schema(), manual_gc())
                    .await
                    .unwrap();
                w.put(vec![lance_batch([2])]).await.unwrap();
                drop(w);
            }
            rewrite_as_lance(&shard).await;
            let before = backend.shard_objects(shard.id).await;

            let e = open_with(&shard, schema(), manual_gc())
                .await
                .err()
                .unwrap();
            assert_error(&e, ErrorCode::SchemaMismatch, "_tombstone");
            let wal_only = manual_gc().with(|c| c.enable_memtable = false);
            let e = open_with(&shard, schema(), wal_only).await.err().unwrap();
            assert_error(&e, ErrorCode::SchemaMismatch, "_tombstone");
            assert_eq!(
                backend.shard_objects(shard.id).await,
                before,
                "{}: a refused open wrote something",
                backend.name
            );

            let w = open_with(&shard, lance_schema(), manual_gc())
                .await
                .unwrap();
            let expected: Vec<i32> = if with_entries {
                vec![0, 1, 2]
            } else {
                vec![0, 1]
            };
            assert_eq!(scanned_ids(&w).await, expected, "{}", backend.name);
            w.close().await.unwrap();
            assert_eq!(
                shard.manifest().await.schema().unwrap().as_deref(),
                Some(lance_schema().as_ref()),
                "{}",
                backend.name
            );
        }
    }
}

/// WAL entries 1..=3 written and flushed, then collected; a writer of the next epoch left its
/// sentinel at 4 and entries 5 and 6 (crashed); then the manifest was rewritten without the
/// low-water mark. Returns the backend and the shard.
async fn collected_then_rewritten() -> Vec<(Backend, Shard)> {
    let mut out = Vec::new();
    for (backend, shard) in each_backend() {
        shard.close_after(manual_gc(), batch_per_id(0..3)).await;
        assert_eq!(shard.manifest().await.wal_low_water, 3);
        gc::collect(&shard.store, shard.id, &GcOptions::default())
            .await
            .unwrap();
        shard.crash_after(manual_gc(), batch_per_id(3..5)).await;
        assert_eq!(rewrite_as_lance(&shard).await.wal_low_water, 0);
        out.push((backend, shard));
    }
    out
}

#[tokio::test]
async fn collected_entries_stay_truncated_after_the_manifest_loses_its_low_water_mark() {
    for (backend, shard) in collected_then_rewritten().await {
        let t = shard.tailer().await;
        for p in 1..=3 {
            let e = t.read(p).await.unwrap_err();
            assert_error(&e, ErrorCode::Truncated, "removed by garbage collection");
            assert_eq!(e.first_available(), Some(4), "{}", backend.name);
        }
        assert_eq!(t.first_position().await.unwrap(), 4, "{}", backend.name);
        t.verify().await.unwrap();
        assert_eq!(t.next_position().await.unwrap(), 7, "{}", backend.name);
        assert!(t.read(4).await.unwrap().unwrap().is_sentinel);
        assert_eq!(t.read(7).await.unwrap().map(|e| e.position), None);
        shard.assert_recovered(0..5).await;
    }
}

/// A hole above the replay cursor is damage, whatever the manifest lacks.
#[tokio::test]
async fn a_hole_above_the_cursor_is_still_corrupt_after_the_manifest_loses_its_mark() {
    for (backend, shard) in collected_then_rewritten().await {
        let hole = shard.store.shard_paths(shard.id).wal_entry(5);
        backend.take(&hole).await;
        let t = shard.tailer().await;
        assert_error(
            &t.read(5).await.unwrap_err(),
            ErrorCode::Corrupt,
            hole.as_ref(),
        );
        assert_error(
            &t.verify().await.unwrap_err(),
            ErrorCode::Corrupt,
            hole.as_ref(),
        );
        let e = shard.try_open(manual_gc()).await.err().unwrap();
        assert_error(&e, ErrorCode::Corrupt, hole.as_ref());
    }
}

/// Garbage collection keeps a fence sentinel and the entry before it below the mark; they do
/// not make the entries between them and the cursor look like holes.
#[tokio::test]
async fn entries_kept_to_fence_below_the_mark_do_not_lower_it() {
    for (backend, shard) in each_backend() {
        // Epoch 1: entries 1-2 (crashed). Epoch 2: sentinel 3, entries 4-5, flushed at close.
        shard.crash_after(manual_gc(), batch_per_id(0..2)).await;
        shard.close_after(manual_gc(), batch_per_id(2..4)).await;
        gc::collect(&shard.store, shard.id, &GcOptions::default())
            .await
            .unwrap();
        rewrite_as_lance(&shard).await;
        let t = shard.tailer().await;
        assert!(t.read(3).await.unwrap().unwrap().is_sentinel);
        let e = t.read(4).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Truncated, "{}: {e}", backend.name);
        assert_eq!(e.first_available(), Some(6), "{}", backend.name);
        assert_eq!(t.first_position().await.unwrap(), 6, "{}", backend.name);
        t.verify().await.unwrap();
        assert_eq!(t.next_position().await.unwrap(), 6, "{}", backend.name);
    }
}

/// With every entry collected, the tip is above the cursor: a writer puts its fence sentinel
/// there, where its predecessor would append next, never in a collected slot below.
#[tokio::test]
async fn a_writer_fences_above_the_cursor_when_every_entry_was_collected() {
    for (backend, shard) in each_backend() {
        shard.close_after(manual_gc(), batch_per_id(0..3)).await;
        gc::collect(&shard.store, shard.id, &GcOptions::default())
            .await
            .unwrap();
        rewrite_as_lance(&shard).await;
        assert_eq!(shard.tailer().await.next_position().await.unwrap(), 4);
        let w = shard.open(manual_gc()).await;
        assert_eq!(
            w.wal_stats().fence_sentinel_position,
            Some(4),
            "{}",
            backend.name
        );
        w.put(vec![batch([3])]).await.unwrap();
        shard.close_and_assert_recovered(w, 0..4).await;
        let paths = shard.store.shard_paths(shard.id);
        for p in 1..=3 {
            assert_eq!(backend.raw_get(&paths.wal_entry(p)).await, None);
        }
    }
}
