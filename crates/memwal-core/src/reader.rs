//! Read-only access to a shard: [`ShardReader`], [`WalTailer`], and the generation reading
//! that [`crate::ShardWriter::scan`] shares.
//!
//! Readers claim no epoch and never write anything: not a manifest, not a hint. A
//! `ShardReader` sees what a new writer would recover: the flushed generations listed in the
//! latest manifest, then every WAL entry after the replay cursor up to the first missing
//! position (fence sentinels skipped).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use uuid::Uuid;

use crate::error::{Error, ErrorCode, Result};
use crate::manifest::{FlushedGeneration, ManifestStore, ShardManifest};
use crate::store::{ShardPaths, Store};
use crate::wal::{self, WalEntry};

/// Rebuilds `batch` with exactly `schema` (same field names and types; nullability may be
/// looser in the batch if its data has no nulls where the schema forbids them).
pub(crate) fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if Arc::ptr_eq(&batch.schema(), schema) {
        return Ok(batch.clone());
    }
    RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).map_err(|e| {
        Error::SchemaMismatch {
            message: format!("batch does not fit the shard schema: {e}"),
        }
    })
}

/// Reads one flushed generation's Parquet file, with the shard's `schema` if given.
pub(crate) async fn read_generation(
    store: &Store,
    paths: &ShardPaths,
    generation: &FlushedGeneration,
    schema: Option<&SchemaRef>,
) -> Result<Vec<RecordBatch>> {
    let path = paths.generation_file(&generation.path);
    let bytes = store
        .get(&path)
        .await
        .map_err(|e| Error::io(format!("reading generation file {path}"), e))?
        .ok_or_else(|| {
            Error::corrupt(
                path.as_ref(),
                format!(
                    "generation {} is listed in the manifest but its file is missing",
                    generation.generation
                ),
                None,
            )
        })?;
    if let Some(stored) = generation.checksum {
        let actual = crc32c::crc32c(&bytes);
        if actual != stored {
            return Err(Error::corrupt(
                path.as_ref(),
                format!(
                    "generation {} checksum mismatch (stored {stored:08x}, computed {actual:08x}); the file is damaged",
                    generation.generation
                ),
                None,
            ));
        }
    }
    let corrupt = |e: parquet::errors::ParquetError| {
        Error::corrupt(
            path.as_ref(),
            format!(
                "generation {} is not a readable Parquet file",
                generation.generation
            ),
            Some(Arc::new(e)),
        )
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(corrupt)?
        .with_batch_size(64 * 1024)
        .build()
        .map_err(corrupt)?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| {
            Error::corrupt(
                path.as_ref(),
                format!("generation {} could not be decoded", generation.generation),
                Some(Arc::new(e)),
            )
        })?;
        out.push(match schema {
            Some(s) => {
                conform(&b, s).map_err(|e| Error::corrupt(path.as_ref(), e.to_string(), None))?
            }
            None => b,
        });
    }
    Ok(out)
}

/// A read-only view of one shard. See the module docs.
#[derive(Debug, Clone)]
pub struct ShardReader {
    store: Store,
    paths: ShardPaths,
    manifests: ManifestStore,
}

/// What a [`ShardReader::scan`] returns.
#[derive(Debug, Clone)]
pub struct ScanResult {
    /// The shard's schema (empty if the shard holds no schema and no rows).
    pub schema: SchemaRef,
    /// Every row, in insertion order.
    pub batches: Vec<RecordBatch>,
}

impl ShardReader {
    /// Opens shard `shard_id` in `store`. Fails if it has no manifest.
    pub async fn open(store: Store, shard_id: Uuid) -> Result<Self> {
        let paths = store.shard_paths(shard_id);
        let manifests = ManifestStore::new(store.clone(), paths.clone());
        if manifests.read_latest().await?.is_none() {
            return Err(Error::invalid(format!(
                "no shard {shard_id} at {}: it has no manifest. Check the location and the shard id",
                store.location()
            )));
        }
        Ok(ShardReader {
            store,
            paths,
            manifests,
        })
    }

    /// The shard id.
    pub fn shard_id(&self) -> Uuid {
        self.paths.shard_id()
    }

    /// The latest manifest.
    pub async fn manifest(&self) -> Result<ShardManifest> {
        self.manifests.read_latest().await?.ok_or_else(|| {
            Error::io_msg(format!(
                "shard {} lost its manifest while being read",
                self.shard_id()
            ))
        })
    }

    /// Every row a new writer would recover, in insertion order: the flushed generations of
    /// the latest manifest, then the WAL entries after its replay cursor.
    pub async fn scan(&self) -> Result<ScanResult> {
        let manifest = self.manifest().await?;
        let mut schema = manifest.schema()?;
        let mut batches = Vec::new();
        for g in &manifest.flushed_generations {
            let part = read_generation(&self.store, &self.paths, g, schema.as_ref()).await?;
            if schema.is_none() {
                schema = part.first().map(|b| b.schema());
            }
            batches.extend(part);
        }
        let start = manifest.replay_after_wal_entry_position + 1;
        let mut wal_batches = Vec::new();
        wal::read_run(&self.store, &self.paths, start, |entry| {
            if !entry.is_sentinel {
                wal_batches.push(entry);
            }
            Ok(())
        })
        .await?;
        for entry in wal_batches {
            let s = schema.get_or_insert_with(|| entry.schema.clone()).clone();
            for b in &entry.batches {
                batches.push(conform(b, &s).map_err(|e| {
                    Error::corrupt(
                        self.paths.wal_entry(entry.position).as_ref(),
                        e.to_string(),
                        None,
                    )
                })?);
            }
        }
        Ok(ScanResult {
            schema: schema.unwrap_or_else(|| Arc::new(Schema::empty())),
            batches,
        })
    }
}

/// Reads a shard's WAL entries by position, for change-data capture. Never writes.
#[derive(Debug, Clone)]
pub struct WalTailer {
    store: Store,
    paths: ShardPaths,
    manifests: ManifestStore,
}

impl WalTailer {
    /// A tailer over shard `shard_id` in `store` (which need not have any entry yet).
    pub async fn open(store: Store, shard_id: Uuid) -> Result<Self> {
        let paths = store.shard_paths(shard_id);
        let manifests = ManifestStore::new(store.clone(), paths.clone());
        Ok(WalTailer {
            store,
            paths,
            manifests,
        })
    }

    /// The first position with no entry (the tip). Positions below it all hold entries.
    pub async fn next_position(&self) -> Result<u64> {
        // The manifest is only a hint here: a damaged one must not stop a tailer from finding
        // the tip (it then probes from the start).
        let hint = match self.manifests.read_latest().await {
            Ok(Some(m)) => m
                .wal_entry_position_last_seen
                .max(m.replay_after_wal_entry_position),
            Ok(None) => 0,
            Err(e) if e.code() == ErrorCode::Corrupt => 0,
            Err(e) => return Err(e),
        };
        wal::discover_tip(&self.store, &self.paths, hint).await
    }

    /// The entry at `position` (1-based), or `None` if there is none.
    pub async fn read(&self, position: u64) -> Result<Option<WalEntry>> {
        if position == 0 {
            return Err(Error::invalid(
                "WAL positions start at 1; position 0 holds no entry",
            ));
        }
        wal::read_entry(&self.store, &self.paths, position).await
    }
}
