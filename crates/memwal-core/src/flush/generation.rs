//! Generation flush: a frozen MemTable becomes an immutable Parquet file and a manifest commit.
//!
//! One task per writer handles frozen MemTables strictly in generation order:
//! 1. wait for the MemTable's own WAL completion (the freeze queued its whole store), which
//!    names the highest WAL position holding any of its batches;
//! 2. check the manifest (a fenced writer must not publish);
//! 3. encode every batch, in insertion order, as Parquet and create
//!    `<random8hex>_gen_<g>/data.parquet` (put-if-not-exists; fsynced on a local store);
//! 4. if its puts carried request ids (and `request_id_retention_ms` > 0), create
//!    `request_ids.json` beside the data file (put-if-not-exists, synced), so the ids outlive
//!    the replay cursor for their retention window (see [`crate::request_id`]);
//! 5. commit a manifest version: replay cursor = that WAL position, `current_generation =
//!    g + 1`, the generation appended to the list (with the request-id file's newest put time
//!    and checksum);
//! 6. report the commit to the writer ([`Report::GenerationCommitted`]), which moves the
//!    MemTable from its frozen list to its flushed list, atomically for scans.
//!
//! The task owns what it needs to do this (store, paths, manifests, epoch, schema) and never
//! touches the writer's state.
//!
//! A transient failure is retried with a fresh directory name (never reusing a partially
//! written one). A failure that persists, or a fence, poisons the writer: generations after a
//! failed one are never flushed, because moving the cursor past them would drop the failed
//! generation's rows from replay.

pub(crate) mod schema;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::batch_store::BatchRange;
use crate::claim::Claim;
use crate::config::RetryPolicy;
use crate::error::{Error, Result};
use crate::events::WriterEvent;
use crate::flush::compaction::Compactor;
use crate::flush::completion::Watcher;
use crate::flush::parquet::{create_generation_file, encode_parquet};
use crate::flush::{Feedback, Report};
use crate::manifest::{FlushedGeneration, ShardManifest};
use crate::memtable::MemTable;
use crate::request_id::encode_records;
use crate::stats::{Operation, WalEntryCost};
use crate::store::CreateOutcome;
use crate::wal::WalPosition;

/// A frozen MemTable and the completion of its WAL append.
#[derive(Debug)]
pub(crate) struct FrozenMemTable {
    /// The frozen MemTable (no longer takes puts).
    pub memtable: Arc<MemTable>,
    /// Resolves, with the highest WAL position holding any of its batches, when its whole
    /// store is in the WAL.
    pub wal_done: Watcher<WalEntryCost>,
}

/// Messages to the generation flusher.
#[derive(Debug)]
pub(crate) enum GenerationMsg {
    /// Flush this frozen MemTable (they arrive in generation order).
    Flush(FrozenMemTable),
    /// Stop after everything queued before this message.
    Shutdown,
}

/// The task. See the module docs.
pub(crate) struct GenerationFlusher {
    pub claim: Arc<Claim>,
    pub retry: RetryPolicy,
    pub feedback: Arc<Feedback>,
    /// `WriterConfig::request_id_retention_ms`: 0 persists no request ids.
    pub request_id_retention_ms: u64,
    /// Merges small generations after a commit; `None` with `WriterConfig::compaction` off.
    pub compactor: Option<Compactor>,
}

impl GenerationFlusher {
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<GenerationMsg>) {
        while let Some(msg) = rx.recv().await {
            let frozen = match msg {
                GenerationMsg::Flush(f) => f,
                GenerationMsg::Shutdown => return,
            };
            if self.feedback.latched().is_some() {
                continue;
            }
            let covered = match frozen.wal_done.wait().await {
                Ok(entry) => WalPosition::new(entry.position).expect("WAL positions start at 1"),
                Err(Error::HandlerExited { .. }) => return,
                Err(e) => {
                    self.feedback.poison(e);
                    continue;
                }
            };
            let flushing = Instant::now();
            let stats = &self.feedback.stats;
            let flush = self.flush_with_retries(&frozen.memtable, covered);
            let (flushed, _, _) = stats.scoped(Operation::GenerationFlush, flush).await;
            if flushed.is_ok() {
                stats.record_generation_flush_latency(flushing.elapsed());
            }
            let committed = match flushed {
                Ok(m) => m,
                Err(e) => {
                    self.feedback.poison(e);
                    continue;
                }
            };
            if let Some(compactor) = &self.compactor
                && let (Err(e), _, _) = stats
                    .scoped(Operation::Compaction, compactor.compact_if_due(&committed))
                    .await
            {
                // Compaction is optional: a failed one leaves the generations as they were
                // (its file is collected later), except that a fence is final (and stays the
                // fence it is, with its reason and holder, as for any other fenced write), and
                // a commit whose sync failed may have left a version that is readable but not
                // durable, which the next commit would build on (fsyncgate).
                if e.is_terminal() {
                    self.feedback.poison(e);
                } else if crate::store::caused_by_sync_failure(&e) {
                    self.feedback.poison(Error::persistence_failure(
                        format!(
                            "compacting generations of shard {}: {e}; reopen to replay",
                            self.claim.paths.shard_id()
                        ),
                        Some(Arc::new(e)),
                    ));
                }
            }
        }
    }

    async fn flush_with_retries(
        &self,
        memtable: &Arc<MemTable>,
        covered: WalPosition,
    ) -> Result<ShardManifest> {
        let mut failures = 0u32;
        loop {
            match self.flush_one(memtable, covered).await {
                Ok(m) => return Ok(m),
                Err(e) if e.is_terminal() => return Err(e),
                // A retry would find the version our failed sync left readable and build on
                // it, though it may not be durable (fsyncgate): never retried and trusted.
                Err(e) if crate::store::caused_by_sync_failure(&e) => {
                    return Err(Error::persistence_failure(
                        format!(
                            "flushing generation {} of shard {}: a sync failed, so the flush may or may not be durable and is not retried; its rows stay in the WAL, reopen to replay: {e}",
                            memtable.generation(),
                            self.claim.paths.shard_id()
                        ),
                        Some(Arc::new(e)),
                    ));
                }
                Err(e) => {
                    if !self
                        .retry
                        .wait_before_retry(&mut failures, "generation flush", &e)
                        .await
                    {
                        return Err(Error::persistence_failure(
                            format!(
                                "flushing generation {} of shard {} failed after {failures} retries; its rows stay in the WAL, reopen to replay: {e}",
                                memtable.generation(),
                                self.claim.paths.shard_id()
                            ),
                            Some(Arc::new(e)),
                        ));
                    }
                }
            }
        }
    }

    /// Creates `request_ids.json` in the generation directory `dir` if `memtable`'s puts carried
    /// request ids; returns the newest put time among them and the file's CRC32C. Before the
    /// manifest commit: once the commit moves the replay cursor past their WAL entries, this
    /// file is where the next writer finds them.
    async fn write_request_ids(
        &self,
        memtable: &MemTable,
        dir: &str,
    ) -> Result<Option<(u64, u32)>> {
        if self.request_id_retention_ms == 0 {
            return Ok(None);
        }
        let batch_store = memtable.batch_store();
        let records = batch_store.requests(BatchRange {
            start: 0,
            end: batch_store.len(),
        });
        let Some(newest) = records.iter().map(|r| r.put_at_ms).max() else {
            return Ok(None);
        };
        let text = Bytes::from(encode_records(&records));
        let checksum = crc32c::crc32c(&text);
        let path = self.claim.paths.generation_request_ids(dir);
        match self.claim.store.put_if_absent(&path, text).await {
            Ok(CreateOutcome::Created) => Ok(Some((newest, checksum))),
            // The directory is new to this attempt: nobody else writes in it.
            Ok(CreateOutcome::AlreadyExists) => Err(Error::io_msg(format!(
                "writing {path}: it already exists in a generation directory this flush created"
            ))),
            Err(e) => Err(Error::io(format!("writing {path}"), e)),
        }
    }

    /// Writes `memtable` as a generation file and commits it, with the replay cursor at
    /// `covered` (the highest WAL position holding any of its batches): steps 2 to 6 of the
    /// module docs.
    async fn flush_one(
        &self,
        memtable: &Arc<MemTable>,
        covered: WalPosition,
    ) -> Result<ShardManifest> {
        let started = Instant::now();
        let generation = memtable.generation();
        if memtable.batch_store().is_empty() {
            return Err(Error::invalid(format!(
                "Cannot flush empty MemTable (generation {generation})"
            )));
        }
        self.claim.check_fenced().await?;
        let entry = self.write_generation(memtable).await?;
        self.claim
            .store
            .faults()
            .pause_point("generation-before-commit")
            .await;
        let committed = self.commit_generation(&entry, covered.get()).await?;
        // The committed entry, if an earlier attempt of ours is what the manifest lists.
        let entry = committed
            .flushed_generations
            .iter()
            .find(|g| g.generation == generation)
            .cloned()
            .unwrap_or(entry);
        self.announce(memtable, entry, started.elapsed());
        Ok(committed)
    }

    /// Writes `memtable`'s batches, in insertion order, as the Parquet file of a new
    /// generation directory, and its request ids beside it; the manifest entry that lists them.
    async fn write_generation(&self, memtable: &MemTable) -> Result<FlushedGeneration> {
        let generation = memtable.generation();
        let batch_store = memtable.batch_store();
        let batches = batch_store.batches(BatchRange {
            start: 0,
            end: batch_store.len(),
        });
        let schema = self.claim.schema.clone();
        let parquet = tokio::task::spawn_blocking(move || encode_parquet(&schema, &batches))
            .await
            .map_err(|e| Error::io("the Parquet encoding task failed", e))??;
        let parquet = Bytes::from(parquet);
        let dir =
            create_generation_file(&self.claim.store, &self.claim.paths, generation, &parquet)
                .await?;
        let requests = self.write_request_ids(memtable, &dir).await?;
        Ok(FlushedGeneration {
            generation,
            path: dir,
            in_memory_bytes: Some(batch_store.estimated_bytes()),
            physical_rows: Some(batch_store.total_rows()),
            primary_key_bytes: None,
            checksum: Some(crc32c::crc32c(&parquet)),
            request_ids_newest_ms: requests.map(|(newest, _)| newest),
            request_ids_checksum: requests.map(|(_, checksum)| checksum),
        })
    }

    /// Commits a manifest version listing `entry`, with the replay cursor (and the low-water
    /// mark) at `covered`; the version committed, or the latest if it lists `entry`'s
    /// generation already.
    async fn commit_generation(
        &self,
        entry: &FlushedGeneration,
        covered: u64,
    ) -> Result<ShardManifest> {
        let generation = entry.generation;
        // Only this epoch can commit generation `g` (a claim starts at `current_generation`),
        // so finding `g` listed means an earlier attempt of ours committed it and lost the ack.
        self.claim
            .commit(|latest| {
                if latest
                    .flushed_generations
                    .iter()
                    .any(|g| g.generation == generation)
                {
                    return None;
                }
                let mut next = latest.clone();
                next.replay_after_wal_entry_position =
                    latest.replay_after_wal_entry_position.max(covered);
                // Every row up to the cursor is in a committed generation, so its entries may
                // go (`crate::gc`).
                next.wal_low_water = next.replay_after_wal_entry_position;
                next.wal_entry_position_last_seen =
                    latest.wal_entry_position_last_seen.max(covered);
                next.current_generation = latest.current_generation.max(generation + 1);
                next.flushed_generations.push(entry.clone());
                Some(next)
            })
            .await
    }

    /// Counts, logs and reports the committed generation `entry` of `memtable`, flushed in
    /// `latency`: the writer moves the MemTable to its flushed list on the report.
    fn announce(&self, memtable: &Arc<MemTable>, entry: FlushedGeneration, latency: Duration) {
        let generation = memtable.generation();
        let rows = memtable.batch_store().total_rows();
        self.feedback.stats.record_memtable_flush(rows, latency);
        crate::events::log_flush(
            self.claim.paths.shard_id(),
            generation,
            rows,
            entry.in_memory_bytes,
            latency,
        );
        self.feedback
            .events
            .send(|| WriterEvent::GenerationFlushed {
                generation,
                rows,
                bytes: entry.in_memory_bytes.unwrap_or(0),
                file: self.claim.paths.generation_file(&entry.path).to_string(),
                latency,
            });
        self.feedback.report(Report::GenerationCommitted {
            memtable: memtable.clone(),
            generation: entry,
        });
    }
}
