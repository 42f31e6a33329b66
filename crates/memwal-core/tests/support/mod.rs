//! Shared harness for memwal-core integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use memwal_core::{ShardReader, ShardWriter, Store, WalTailer, WriterConfig};
use uuid::Uuid;

/// `id: Int32 not null, name: Utf8` (the reference's test schema).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// A batch with the given ids and names `n<id>`.
pub fn batch(ids: impl IntoIterator<Item = i32>) -> RecordBatch {
    let ids: Vec<i32> = ids.into_iter().collect();
    let names: Vec<Option<String>> = ids.iter().map(|i| Some(format!("n{i}"))).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int32Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

/// A batch of `rows` rows with ids starting at `start`.
pub fn rows(start: i32, rows: usize) -> RecordBatch {
    batch(start..start + rows as i32)
}

/// The `id` column of every batch, concatenated.
pub fn ids(batches: &[RecordBatch]) -> Vec<i32> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b
                .column(0)
                .as_any()
                .downcast_ref::<Int32Array>()
                .expect("id column");
            (0..a.len()).map(|i| a.value(i)).collect::<Vec<_>>()
        })
        .collect()
}

/// A named store kind, for running one test on every backend.
pub struct Backend {
    pub name: &'static str,
    pub store: Store,
    _dir: Option<tempfile::TempDir>,
}

impl Backend {
    pub fn memory() -> Self {
        Backend {
            name: "memory",
            store: Store::memory(),
            _dir: None,
        }
    }

    pub fn local() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::local(dir.path()).unwrap();
        Backend {
            name: "local",
            store,
            _dir: Some(dir),
        }
    }

    /// One of each.
    pub fn all() -> Vec<Backend> {
        vec![Backend::local(), Backend::memory()]
    }

    pub fn path(&self) -> Option<&std::path::Path> {
        self._dir.as_ref().map(|d| d.path())
    }
}

/// Durable config with no ticker and big limits (reference §8 "durable cfg").
pub fn durable() -> WriterConfig {
    WriterConfig {
        durable_write: true,
        max_wal_buffer_size: 64 << 20,
        max_wal_flush_interval_ms: None,
        max_memtable_size: 64 << 20,
        wal_persist_retry_base_delay_ms: 1,
        ..Default::default()
    }
}

/// Non-durable config with no ticker and big limits.
pub fn non_durable() -> WriterConfig {
    WriterConfig {
        durable_write: false,
        ..durable()
    }
}

/// `config` bound to `shard`.
pub fn on(shard: Uuid, config: WriterConfig) -> WriterConfig {
    WriterConfig {
        shard_id: Some(shard),
        ..config
    }
}

pub async fn open(store: &Store, shard: Uuid, config: WriterConfig) -> ShardWriter {
    ShardWriter::open(store.clone(), schema(), on(shard, config))
        .await
        .unwrap()
}

/// Number of WAL entries (including sentinels) of a shard.
pub async fn wal_len(store: &Store, shard: Uuid) -> u64 {
    WalTailer::open(store.clone(), shard)
        .await
        .unwrap()
        .next_position()
        .await
        .unwrap()
        - 1
}

/// Non-sentinel WAL entries of a shard, as (position, epoch, rows).
pub async fn wal_entries(store: &Store, shard: Uuid) -> Vec<(u64, u64, usize)> {
    let t = WalTailer::open(store.clone(), shard).await.unwrap();
    let n = t.next_position().await.unwrap();
    let mut out = Vec::new();
    for p in 1..n {
        let e = t.read(p).await.unwrap().expect("gap-free WAL");
        if !e.is_sentinel {
            out.push((p, e.writer_epoch, e.num_rows()));
        }
    }
    out
}

/// Ids a fresh reader recovers.
pub async fn recovered_ids(store: &Store, shard: Uuid) -> Vec<i32> {
    let r = ShardReader::open(store.clone(), shard).await.unwrap();
    ids(&r.scan().await.unwrap().batches)
}
