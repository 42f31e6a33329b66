//! A shard whose latest manifest another implementation wrote. Lance, taking a shard over,
//! rewrites the manifest with its own fields only: memwal's (numbers 1001 and up: the Arrow
//! schema, the holder, the name, the WAL low-water mark) are gone. memwal must still refuse a
//! wrong schema before writing anything, and still tell collected WAL entries from holes.

mod support;

use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
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
