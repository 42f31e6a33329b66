//! [`ShardWriter`]: the one writer of a shard.
//!
//! `open` claims the next epoch, writes a fence sentinel at the WAL tip (epoch ≥ 2), replays
//! the WAL after the replay cursor, and starts two tasks: the WAL flush handler and the
//! generation flusher ([`crate::flush`]). `put` reads top to bottom: validate → fail fast if
//! closed or poisoned → backpressure wait (unlocked) → lock, insert, capture the accepting
//! MemTable, queue its flush request, run the triggers, unlock → await the completion.

pub(crate) mod replay;
pub(crate) mod shared;
mod validate;

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use futures::FutureExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use crate::batch_store::{BatchRange, estimated_batch_bytes};
use crate::config::WriterConfig;
use crate::error::{Error, Result};
use crate::flush::generation::{self, GenerationMsg};
use crate::flush::wal_handler::{FlushRequest, WalFlushHandler, WalMsg};
use crate::flush::{DurableWatcher, TerminalLatch, put_completion};
use crate::manifest::{ManifestStore, ShardManifest};
use crate::memtable::MemTable;
use crate::reader::read_generation;
use crate::stats::{MemTableStats, OpenStats, StatsRecorder, WalStats, WriteStats};
use crate::store::Store;
use crate::wal::{self, StagedSentinel, WalAppender};
use shared::{Lifecycle, MemTableState, Mode, WalOnlyState, WriterInner, WriterState};

/// Where a put's rows went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResult {
    /// The MemTable generation that accepted the rows (`None` in WAL-only mode).
    pub generation: Option<u64>,
    /// The batches' positions: local to `generation` in MemTable mode (the first put after a
    /// rotation is `0..1` again); writer-lifetime in WAL-only mode.
    pub batch_positions: BatchRange,
}

/// Batches that passed a put's validation (see [`ShardWriter::try_put`]).
#[derive(Debug)]
pub struct ValidatedBatches {
    batches: Vec<RecordBatch>,
    rows: u64,
    bytes: u64,
}

/// What [`ShardWriter::try_put`] did.
#[derive(Debug)]
pub enum TryPut {
    /// The rows are in memory; in durable mode the watcher resolves when they are durable.
    Inserted(WriteResult, Option<DurableWatcher>),
    /// Backpressure would make the put wait; nothing was inserted.
    WouldBlock(ValidatedBatches),
}

struct BackgroundTasks {
    wal_handler: JoinHandle<()>,
    generation_flusher: JoinHandle<()>,
}

/// The writer of one shard. See the module docs and [`crate::flush`] for the durability
/// contract. Methods take `&self` and may be called concurrently; share it with an `Arc`.
/// Dropping a writer that was not closed aborts it (unflushed non-durable rows are lost, as in
/// a crash).
pub struct ShardWriter {
    inner: Arc<WriterInner>,
    tasks: Mutex<Option<BackgroundTasks>>,
}

impl std::fmt::Debug for ShardWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardWriter")
            .field("shard_id", &self.inner.shard_id)
            .field("epoch", &self.inner.epoch)
            .finish()
    }
}

/// Spawns `fut` as a named background task; a panic poisons the writer with an error that
/// names the task instead of vanishing.
fn spawn_task(
    name: &'static str,
    inner: Arc<WriterInner>,
    fut: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(panic) = std::panic::AssertUnwindSafe(fut).catch_unwind().await {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            inner.poison(Error::persistence_failure(
                format!("background task {name} panicked: {what}; reopen the writer to replay"),
                None,
            ));
        }
    })
}

impl ShardWriter {
    /// Opens the writer of shard `config.shard_id` (a new shard if `None`) in `store`.
    ///
    /// Claims the next epoch (fencing any previous writer), writes a fence sentinel at the WAL
    /// tip when a previous writer may exist, replays the WAL into MemTables, and starts the
    /// background tasks. Must be called inside a Tokio runtime.
    ///
    /// # Errors
    /// - `InvalidArgument`: an invalid config value or an empty schema.
    /// - `SchemaMismatch`: the shard was written with another schema.
    /// - `Fenced(PeerClaimedEpoch)`: another writer claimed the shard concurrently.
    /// - `Corrupt`: a manifest or WAL entry cannot be decoded (the message names it).
    /// - `Io`: the store failed.
    pub async fn open(store: Store, schema: SchemaRef, config: WriterConfig) -> Result<Self> {
        config.validate()?;
        if schema.fields().is_empty() {
            return Err(Error::invalid(
                "schema has no fields; a shard needs at least one column",
            ));
        }
        let started = Instant::now();
        store.check_conditional_create().await?;
        let shard_id = config.shard_id.unwrap_or_else(Uuid::new_v4);
        let paths = store.shard_paths(shard_id);
        let manifests = ManifestStore::new(store.clone(), paths.clone());
        let writer_id = Uuid::new_v4().to_string();
        // While the epoch claim writes (a durable create), the WAL tip is searched and the
        // fence sentinel of the epoch it should win is staged (written and synced, unnamed),
        // so that only a link and a directory sync are left once the claim ends. A tip found
        // before the claim is still a safe start for the sentinel, which takes the first free
        // slot at or after it (the predecessor appends in order, so it cannot pass a slot it
        // has not reached). Nothing is visible until the sentinel is written, and a claim that
        // ends at another epoch restages (or fails, if a peer claimed).
        let latest = manifests.read_latest().await?;
        let hint = latest.as_ref().map_or(0, |m| {
            m.wal_entry_position_last_seen
                .max(m.replay_after_wal_entry_position)
        });
        let expected_epoch = latest.as_ref().map_or(1, |m| m.writer_epoch + 1);
        let (manifest, tip, staged) = tokio::try_join!(
            manifests.claim_epoch_after(latest, &schema, &writer_id),
            wal::discover_tip(&store, &paths, hint),
            async {
                // Epoch 1 is the first claim ever: no predecessor to fence. A staging error is
                // not final here: the sentinel write stages again and retries.
                Ok(if expected_epoch >= 2 {
                    StagedSentinel::stage(&store, &paths, expected_epoch)
                        .await
                        .ok()
                } else {
                    None
                })
            },
        )?;
        let epoch = manifest.writer_epoch;
        let mut appender = WalAppender::new(
            store.clone(),
            paths.clone(),
            manifests.clone(),
            epoch,
            tip,
            config.retry_policy(),
        );
        let fence_sentinel_position = if epoch >= 2 {
            Some(appender.write_fence_sentinel(tip, staged).await?)
        } else {
            None
        };
        let claimed = Instant::now();
        let mut open_stats = OpenStats {
            claim: claimed - started,
            ..OpenStats::default()
        };
        store.faults().pause_point("open-before-replay").await;
        let (wal_tx, wal_rx) = mpsc::unbounded_channel();
        let (gen_tx, gen_rx) = mpsc::unbounded_channel();
        let mut replayed_frozen = Vec::new();
        let mode = if config.enable_memtable {
            let r = replay::replay(
                &store,
                &paths,
                &schema,
                &config,
                epoch,
                manifest.replay_after_wal_entry_position,
                manifest.current_generation.max(1),
            )
            .await?;
            appender.set_next_position(r.next_position.max(appender.next_position()));
            replayed_frozen = r.frozen;
            open_stats.replay = claimed.elapsed();
            open_stats.replayed_entries = r.entries;
            open_stats.replayed_rows = r.rows;
            Mode::MemTable(MemTableState {
                active: r.active,
                frozen: VecDeque::new(),
                frozen_bytes: 0,
                flushed: manifest.flushed_generations.clone(),
                wal_size_triggers: 0,
            })
        } else {
            Mode::WalOnly(WalOnlyState::default())
        };
        let inner = Arc::new(WriterInner {
            shard_id,
            writer_id,
            epoch,
            schema,
            store,
            paths,
            manifests,
            state: Mutex::new(WriterState {
                lifecycle: Lifecycle::Open,
                mode,
            }),
            latch: TerminalLatch::default(),
            progress: watch::Sender::new(0),
            stats: StatsRecorder::default(),
            wal_tx,
            gen_tx,
            next_wal_position: AtomicU64::new(appender.next_position()),
            fence_sentinel_position,
            open_stats,
            config,
            #[cfg(feature = "legacy-watermark-bug")]
            legacy_watermark: watch::Sender::new(0),
        });
        {
            let mut st = inner.lock();
            if let Mode::MemTable(mt) = &mut st.mode {
                for m in replayed_frozen {
                    inner.enqueue_frozen(mt, m, DurableWatcher::ready(Ok(())));
                }
            }
        }
        let handler = WalFlushHandler::new(inner.clone(), appender, wal_rx);
        let tasks = BackgroundTasks {
            wal_handler: spawn_task("wal-flush-handler", inner.clone(), handler.run()),
            generation_flusher: spawn_task(
                "generation-flusher",
                inner.clone(),
                generation::run(inner.clone(), gen_rx),
            ),
        };
        Ok(ShardWriter {
            inner,
            tasks: Mutex::new(Some(tasks)),
        })
    }

    /// The shard this writer owns.
    pub fn shard_id(&self) -> Uuid {
        self.inner.shard_id
    }

    /// The epoch this writer claimed.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch
    }

    /// The writer's configuration (as validated on open).
    pub fn config(&self) -> &WriterConfig {
        &self.inner.config
    }

    /// The shard's schema.
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema.clone()
    }

    /// The store this writer writes to.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Inserts `batches` atomically and, in durable mode, resolves only when they are durable.
    ///
    /// # Durability
    /// In durable mode, `Ok` means the WAL entry holding exactly these rows is persisted; see
    /// the contract in [`crate::flush`]. In non-durable mode, `Ok` means the rows are in memory.
    ///
    /// # Errors
    /// `InvalidArgument` (empty list, empty batch, more batches than a MemTable holds),
    /// `SchemaMismatch`, `Closed`, `Fenced` (this put's append failed, or the writer was
    /// already poisoned), or "WAL flush handler exited before reporting durability".
    pub async fn put(&self, batches: Vec<RecordBatch>) -> Result<WriteResult> {
        let (result, durable) = self.insert(batches).await?;
        #[cfg(feature = "legacy-watermark-bug")]
        if durable.is_some() && self.inner.config.enable_memtable {
            // The seed report's watcher: wait for watermark >= our *local* end.
            let mut rx = self.inner.legacy_watermark.subscribe();
            loop {
                self.inner.latch.check()?;
                if *rx.borrow_and_update() >= result.batch_positions.end {
                    return Ok(result);
                }
                if rx.changed().await.is_err() {
                    return Err(Error::HandlerExited {
                        context: String::new(),
                    });
                }
            }
        }
        if let Some(w) = durable {
            w.wait().await?;
        }
        Ok(result)
    }

    /// Like [`ShardWriter::put`], but returns once the rows are in memory, with a watcher for
    /// their durability (`None` in non-durable mode). MemTable mode only.
    pub async fn put_no_wait(
        &self,
        batches: Vec<RecordBatch>,
    ) -> Result<(WriteResult, Option<DurableWatcher>)> {
        self.check_put_no_wait()?;
        self.insert(batches).await
    }

    /// `put_no_wait` is MemTable-mode only.
    pub fn check_put_no_wait(&self) -> Result<()> {
        if self.inner.config.enable_memtable {
            Ok(())
        } else {
            Err(Error::invalid(
                "put_no_wait is only supported in MemTable mode (enable_memtable = true); WAL-only mode has no in-memory rows",
            ))
        }
    }

    /// Inserts `batches` now, without ever waiting: for callers that must not block (the
    /// Node binding inserts small puts on the JavaScript thread). Validates like `put`. If
    /// backpressure would make the put wait, nothing is inserted and the validated batches are
    /// handed back in [`TryPut::WouldBlock`] for [`ShardWriter::put_validated`].
    ///
    /// # Errors
    /// As [`ShardWriter::put`], except durability errors, which the watcher reports.
    pub fn try_put(&self, batches: Vec<RecordBatch>) -> Result<TryPut> {
        let validated = self.validate_put(batches)?;
        self.insert_validated(validated, Instant::now())
    }

    /// Inserts batches that [`ShardWriter::try_put`] handed back, waiting for backpressure;
    /// returns the result and, in durable mode, the durability watcher.
    pub async fn put_validated(
        &self,
        batches: ValidatedBatches,
    ) -> Result<(WriteResult, Option<DurableWatcher>)> {
        self.insert_waiting(batches, Instant::now()).await
    }

    async fn insert(
        &self,
        batches: Vec<RecordBatch>,
    ) -> Result<(WriteResult, Option<DurableWatcher>)> {
        let started = Instant::now();
        let validated = self.validate_put(batches)?;
        self.insert_waiting(validated, started).await
    }

    fn validate_put(&self, batches: Vec<RecordBatch>) -> Result<ValidatedBatches> {
        let inner = &self.inner;
        let batches = validate::validate(&inner.schema, batches)?;
        if inner.config.enable_memtable && batches.len() > inner.config.max_memtable_batches {
            return Err(Error::invalid(format!(
                "a put of {} batches exceeds max_memtable_batches ({}); split it into several puts or raise maxMemtableBatches",
                batches.len(),
                inner.config.max_memtable_batches
            )));
        }
        inner.check_open(&inner.lock())?;
        Ok(ValidatedBatches {
            rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
            bytes: batches.iter().map(estimated_batch_bytes).sum(),
            batches,
        })
    }

    /// Inserts, waiting (never failing for pressure alone) while unflushed bytes exceed
    /// `max_unflushed_memtable_bytes`.
    async fn insert_waiting(
        &self,
        mut batches: ValidatedBatches,
        started: Instant,
    ) -> Result<(WriteResult, Option<DurableWatcher>)> {
        let inner = &self.inner;
        let mut waited_since: Option<Instant> = None;
        loop {
            // Subscribe before checking, so progress made in between is not missed.
            let mut progress = inner.progress.subscribe();
            match self.insert_validated(batches, started)? {
                TryPut::Inserted(result, watcher) => {
                    if let Some(t) = waited_since {
                        inner.stats.record_backpressure(t.elapsed());
                    }
                    return Ok((result, watcher));
                }
                TryPut::WouldBlock(back) => batches = back,
            }
            waited_since.get_or_insert_with(Instant::now);
            if progress.changed().await.is_err() {
                return Err(inner.closed_error());
            }
        }
    }

    /// Over the backpressure limit? If so, makes sure something is being flushed that will
    /// relieve it. Caller holds the state lock.
    fn over_pressure(&self, st: &mut WriterState) -> bool {
        let inner = &self.inner;
        let limit = inner.config.max_unflushed_memtable_bytes;
        match &mut st.mode {
            Mode::MemTable(mt) => {
                let over = mt.active.store().estimated_bytes() + mt.frozen_bytes >= limit;
                if over && mt.frozen.is_empty() {
                    // Nothing is being flushed that could relieve the pressure: freeze the
                    // active MemTable so something is.
                    inner.freeze(mt);
                }
                over
            }
            Mode::WalOnly(wo) => {
                let over = wo.pending_bytes >= limit;
                if over {
                    let _ = inner.wal_tx.send(WalMsg::FlushAll { completion: None });
                }
                over
            }
        }
    }

    /// The insert itself: under the state lock, never waiting.
    fn insert_validated(&self, validated: ValidatedBatches, started: Instant) -> Result<TryPut> {
        let inner = &self.inner;
        let mut st = inner.lock();
        inner.check_open(&st)?;
        if self.over_pressure(&mut st) {
            return Ok(TryPut::WouldBlock(validated));
        }
        let ValidatedBatches {
            batches,
            rows,
            bytes,
        } = validated;
        let durable = inner.config.durable_write;
        let (result, watcher) = match &mut st.mode {
            Mode::MemTable(mt) => {
                if mt
                    .active
                    .would_overflow(batches.len(), bytes, inner.config.max_memtable_size)
                {
                    inner.freeze(mt);
                }
                let range = mt.active.insert(&batches).map_err(|full| {
                    Error::invalid(format!(
                        "MemTable batch store is full ({full:?}) - should have been frozen"
                    ))
                })?;
                // INVARIANT (flush.rs contract): capture the accepting MemTable now, before
                // any trigger below can rotate it.
                let accepted: Arc<MemTable> = mt.active.clone();
                let watcher = if durable {
                    let (completion, watcher) = put_completion();
                    let _ = inner.wal_tx.send(WalMsg::Flush(FlushRequest {
                        memtable: accepted.clone(),
                        end: range.end,
                        completion: Some(completion),
                        from_put: true,
                    }));
                    Some(watcher)
                } else {
                    let crossed = mt
                        .active
                        .store()
                        .estimated_bytes()
                        .checked_div(inner.config.max_wal_buffer_size);
                    // Size trigger: one flush per `max_wal_buffer_size` crossed (0 = off).
                    if let Some(crossed) = crossed
                        && mt.wal_size_triggers < crossed
                    {
                        mt.wal_size_triggers = crossed;
                        let _ = inner.wal_tx.send(WalMsg::Flush(FlushRequest {
                            memtable: accepted.clone(),
                            end: range.end,
                            completion: None,
                            from_put: false,
                        }));
                    }
                    None
                };
                if mt.active.should_freeze(inner.config.max_memtable_size) {
                    inner.freeze(mt);
                }
                let result = WriteResult {
                    generation: Some(accepted.generation()),
                    batch_positions: range,
                };
                (result, watcher)
            }
            Mode::WalOnly(wo) => {
                let start = wo.next_position();
                for b in batches {
                    let size = estimated_batch_bytes(&b);
                    wo.pending_bytes += size;
                    wo.pending.push_back((b, size));
                }
                let end = wo.next_position();
                let watcher = if durable {
                    let (completion, watcher) = put_completion();
                    let _ = inner.wal_tx.send(WalMsg::FlushWalOnly {
                        end,
                        completion: Some(completion),
                    });
                    Some(watcher)
                } else {
                    let limit = inner.config.max_wal_buffer_size;
                    if limit > 0 {
                        // Reference §6: a baseline, reset by every drain of the queue (in the
                        // flush handler), so the trigger keeps firing after the first flush.
                        while wo.pending_bytes >= wo.size_baseline + limit {
                            wo.size_baseline += limit;
                            let _ = inner.wal_tx.send(WalMsg::FlushWalOnly {
                                end,
                                completion: None,
                            });
                        }
                    }
                    None
                };
                let result = WriteResult {
                    generation: None,
                    batch_positions: BatchRange {
                        start: start as usize,
                        end: end as usize,
                    },
                };
                (result, watcher)
            }
        };
        drop(st);
        inner.stats.record_put(rows, started.elapsed());
        Ok(TryPut::Inserted(result, watcher))
    }

    /// Makes every row written so far durable; resolves when it is.
    ///
    /// # Errors
    /// `Closed`, or the latched fence error.
    pub async fn flush(&self) -> Result<()> {
        self.inner.check_open(&self.inner.lock())?;
        let (completion, watcher) = put_completion();
        let _ = self.inner.wal_tx.send(WalMsg::FlushAll {
            completion: Some(completion),
        });
        watcher.wait().await
    }

    fn memtable_only(&self, what: &str) -> Result<()> {
        if self.inner.config.enable_memtable {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "{what} not available in WAL-only mode (no MemTable; enable_memtable = false)"
            )))
        }
    }

    /// Freezes the active MemTable now (if it holds rows), queueing it for its generation
    /// flush. Does not wait for the flush; see [`ShardWriter::wait_for_flush_drain`].
    ///
    /// # Errors
    /// `InvalidArgument` in WAL-only mode; `Closed`; `Fenced` if a successor claimed the
    /// shard or the writer is poisoned.
    pub async fn force_seal_active(&self) -> Result<()> {
        self.memtable_only("force_seal_active")?;
        self.inner.check_open(&self.inner.lock())?;
        self.check_fenced_and_latch().await?;
        let mut st = self.inner.lock();
        self.inner.check_open(&st)?;
        if let Mode::MemTable(mt) = &mut st.mode {
            self.inner.freeze(mt);
        }
        Ok(())
    }

    /// Resolves when every MemTable frozen so far (and any frozen meanwhile) is flushed as a
    /// generation. Does not freeze the active MemTable.
    ///
    /// # Errors
    /// `InvalidArgument` in WAL-only mode; `Closed`; the latched error if a flush failed.
    pub async fn wait_for_flush_drain(&self) -> Result<()> {
        self.memtable_only("wait_for_flush_drain")?;
        self.inner.check_open(&self.inner.lock())?;
        self.drain().await
    }

    async fn drain(&self) -> Result<()> {
        let inner = &self.inner;
        loop {
            let mut progress = inner.progress.subscribe();
            {
                let st = inner.lock();
                inner.latch.check()?;
                if st.lifecycle == Lifecycle::Closed {
                    return Err(inner.closed_error());
                }
                match &st.mode {
                    Mode::MemTable(mt) if !mt.frozen.is_empty() => {}
                    _ => return Ok(()),
                }
            }
            if progress.changed().await.is_err() {
                return Err(inner.closed_error());
            }
        }
    }

    /// `Fenced(PeerClaimedEpoch)` if another writer claimed the shard (reads the manifest).
    /// The fence is latched: every later call fails with it.
    pub async fn check_fenced(&self) -> Result<()> {
        {
            let st = self.inner.lock();
            if st.lifecycle != Lifecycle::Open {
                return Err(self.inner.closed_error());
            }
        }
        self.check_fenced_and_latch().await?;
        self.inner.latch.check()
    }

    /// Reads the manifest; a successor's claim seen here is as terminal as one seen by a WAL
    /// append (DESIGN "Writer lifecycle" 3): latch it, or a non-durable writer that was told
    /// it is fenced would go on accepting rows that can never become durable.
    async fn check_fenced_and_latch(&self) -> Result<()> {
        match self.inner.manifests.check_fenced(self.inner.epoch).await {
            Err(e) if e.is_terminal() => {
                self.inner.poison(e.clone());
                Err(e)
            }
            r => r,
        }
    }

    /// Statistics of the active and frozen MemTables.
    ///
    /// # Errors
    /// `InvalidArgument` in WAL-only mode; `Closed`.
    pub fn memtable_stats(&self) -> Result<MemTableStats> {
        self.memtable_only("MemTable accessor (memtable_stats)")?;
        let st = self.inner.lock();
        if st.lifecycle == Lifecycle::Closed {
            return Err(self.inner.closed_error());
        }
        let Mode::MemTable(mt) = &st.mode else {
            unreachable!("memtable_only checked the mode")
        };
        let s = mt.active.store();
        let pending = s.pending_wal_range();
        Ok(MemTableStats {
            generation: mt.active.generation(),
            row_count: s.total_rows(),
            batch_count: s.len() as u64,
            estimated_size: s.estimated_bytes(),
            pending_wal_batch_count: pending.len() as u64,
            pending_wal_row_count: s.total_rows() - s.rows_before(pending.start),
            pending_wal_estimated_bytes: s.estimated_bytes() - s.bytes_before(pending.start),
            frozen_memtable_count: mt.frozen.len() as u64,
            frozen_estimated_bytes: mt.frozen_bytes,
        })
    }

    /// The writer's view of its WAL.
    pub fn wal_stats(&self) -> WalStats {
        let s = self.inner.stats.snapshot();
        WalStats {
            next_wal_entry_position: self
                .inner
                .next_wal_position
                .load(std::sync::atomic::Ordering::Relaxed),
            fence_sentinel_position: self.inner.fence_sentinel_position,
            entries_appended: s.wal_flush_count,
            bytes_appended: s.wal_flush_bytes,
        }
    }

    /// Where [`ShardWriter::open`] spent its time: claiming the shard (after which the
    /// previous writer is fenced) and replaying the WAL tail.
    pub fn open_stats(&self) -> OpenStats {
        self.inner.open_stats
    }

    /// Write statistics.
    pub fn stats(&self) -> WriteStats {
        self.inner.stats.snapshot()
    }

    /// The shard's latest manifest, read from storage.
    pub async fn manifest(&self) -> Result<Option<ShardManifest>> {
        self.inner.manifests.read_latest().await
    }

    /// Every row this writer holds, in insertion order: flushed generations, then frozen
    /// MemTables, then the active one. In durable mode only WAL-appended rows are included
    /// (what a crash would keep); in non-durable mode every inserted row is.
    ///
    /// # Errors
    /// `InvalidArgument` in WAL-only mode; `Closed`; the latched error of a poisoned writer.
    pub async fn scan(&self) -> Result<Vec<RecordBatch>> {
        self.memtable_only("MemTable accessor (scan)")?;
        let inner = &self.inner;
        let durable = inner.config.durable_write;
        let (flushed, memtables) = {
            let st = inner.lock();
            inner.check_open(&st)?;
            let Mode::MemTable(mt) = &st.mode else {
                unreachable!("memtable_only checked the mode")
            };
            let memtables: Vec<(Arc<MemTable>, usize)> = mt
                .frozen
                .iter()
                .chain(std::iter::once(&mt.active))
                .map(|m| {
                    let visible = if durable {
                        m.store().wal_appended_len()
                    } else {
                        m.store().len()
                    };
                    (m.clone(), visible)
                })
                .collect();
            (mt.flushed.clone(), memtables)
        };
        let mut out = Vec::new();
        for g in &flushed {
            out.extend(read_generation(&inner.store, &inner.paths, g, Some(&inner.schema)).await?);
        }
        for (m, visible) in memtables {
            out.extend(m.store().batches(BatchRange {
                start: 0,
                end: visible,
            }));
        }
        Ok(out)
    }

    fn take_tasks(&self) -> Option<BackgroundTasks> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Flushes everything and stops: the WAL gets every row, the active MemTable is frozen,
    /// every generation flush completes, then both tasks are joined. The first error wins.
    /// Later calls (except `abort`) fail with `Closed`.
    ///
    /// Shutdown order: freeze first (so the final WAL append and generation flush are queued
    /// behind everything already queued), wait for the drain, then stop the tasks with
    /// `Shutdown` messages so nothing queued is dropped.
    pub async fn close(&self) -> Result<()> {
        let inner = &self.inner;
        let wal_only_done = {
            let mut st = inner.lock();
            if st.lifecycle != Lifecycle::Open {
                return Err(inner.closed_error());
            }
            st.lifecycle = Lifecycle::Closing;
            match &mut st.mode {
                Mode::MemTable(mt) => {
                    if inner.latch.get().is_none() {
                        inner.freeze(mt);
                    }
                    None
                }
                Mode::WalOnly(_) => {
                    let (completion, watcher) = put_completion();
                    let _ = inner.wal_tx.send(WalMsg::FlushAll {
                        completion: Some(completion),
                    });
                    Some(watcher)
                }
            }
        };
        let mut first: Option<Error> = None;
        let flushed = match wal_only_done {
            Some(w) => w.wait().await.map_err(|e| match e {
                Error::HandlerExited { .. } => Error::HandlerExited {
                    context: " during close".into(),
                },
                e => e,
            }),
            None => self.drain().await,
        };
        if let Err(e) = flushed {
            first.get_or_insert(e);
        }
        let _ = inner.wal_tx.send(WalMsg::Shutdown);
        let _ = inner.gen_tx.send(GenerationMsg::Shutdown);
        if let Some(tasks) = self.take_tasks() {
            for (name, t) in [
                ("generation-flusher", tasks.generation_flusher),
                ("wal-flush-handler", tasks.wal_handler),
            ] {
                if let Err(e) = t.await {
                    first.get_or_insert(Error::io(format!("background task {name} failed"), e));
                }
            }
        }
        if first.is_none()
            && !inner.config.enable_memtable
            && let Some(last) = inner
                .next_wal_position
                .load(std::sync::atomic::Ordering::Relaxed)
                .checked_sub(1)
        {
            // WAL-only writers never flush generations, so nothing else moves the tip hint
            // forward; without it the next open probes (or lists) the whole WAL.
            let _ = inner
                .manifests
                .commit_update(inner.epoch, &inner.writer_id, |l| {
                    (l.wal_entry_position_last_seen < last).then(|| {
                        let mut n = l.clone();
                        n.wal_entry_position_last_seen = last;
                        n
                    })
                })
                .await;
        }
        inner.lock().lifecycle = Lifecycle::Closed;
        inner.bump_progress();
        if let Some(e) = inner.latch.get() {
            return Err(e.clone());
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Stops everything without flushing: buffered rows that were not yet durable are
    /// discarded (as in a crash), waiting durable puts fail with "WAL flush handler exited
    /// before reporting durability". Idempotent.
    ///
    /// Like a crash, an abort does not wait for a write already handed to the store: a WAL
    /// entry or generation file in flight may still land after `abort` returns. Such an entry
    /// is valid (the next writer replays it, or fences it out with its sentinel), but its
    /// puts were already rejected, so callers must treat them as "maybe written".
    pub async fn abort(&self) -> Result<()> {
        self.inner.lock().lifecycle = Lifecycle::Closed;
        if let Some(tasks) = self.take_tasks() {
            tasks.wal_handler.abort();
            tasks.generation_flusher.abort();
            let _ = tasks.wal_handler.await;
            let _ = tasks.generation_flusher.await;
        }
        self.inner.bump_progress();
        Ok(())
    }
}

impl Drop for ShardWriter {
    fn drop(&mut self) {
        if let Some(tasks) = self.take_tasks() {
            tasks.wal_handler.abort();
            tasks.generation_flusher.abort();
        }
    }
}
