//! [`ShardWriter`]: the one writer of a shard.
//!
//! Parts:
//! - `open`: claims the next epoch, writes a fence sentinel at the WAL tip (epoch ≥ 2), replays
//!   the WAL after the replay cursor (`replay`), and starts the WAL flush handler and the
//!   generation flusher ([`crate::flush`]).
//! - `put`: the put path, one for every way in ([`ShardWriter::put`], `put_no_wait`,
//!   `submit`): validate (`validate`) → fail fast if closed or poisoned → backpressure wait →
//!   lock, insert, capture the accepting MemTable, queue its flush request, run the triggers,
//!   unlock → the caller awaits the completion.
//! - `state`: the writer's state, which only the writer locks; the background tasks report
//!   their progress to it by message.

mod open;
mod put;
pub(crate) mod replay;
pub(crate) mod request_index;
pub(crate) mod state;
mod validate;

use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::batch_store::BatchRange;
use crate::config::WriterConfig;
use crate::error::{Error, Result};
use crate::flush::DurableWatcher;
use crate::flush::completion::completion;
use crate::flush::generation::GenerationMsg;
use crate::flush::legacy_watermark::LegacyWatermark;
use crate::flush::wal_handler::WalMsg;
use crate::manifest::ShardManifest;
use crate::memtable::MemTable;
use crate::reader::read_generation;
use crate::stats::{MemTableStats, OpenStats, WalStats, WriteStats};
use crate::store::Store;
use crate::store::call::Actor;
use crate::store::faults::as_actor;
use open::BackgroundTasks;
pub use put::{BlockedPut, PutMode, PutOptions, Submitted, WriteResult};
use state::{Lifecycle, Mode, WriterInner};

/// The writer of one shard. See the module docs and [`crate::flush`] for the durability
/// contract. Methods take `&self` and may be called concurrently; share it with an `Arc`.
/// Dropping a writer that was not closed aborts it, as [`ShardWriter::abort`] does without
/// waiting for its tasks: unflushed non-durable rows are lost, as in a crash, and durability
/// watchers still waiting (a retry's included) fail with "WAL flush handler exited before
/// reporting durability".
pub struct ShardWriter {
    inner: Arc<WriterInner>,
    tasks: Mutex<Option<BackgroundTasks>>,
}

impl std::fmt::Debug for ShardWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardWriter")
            .field("shard_id", &self.inner.claim.shard_id())
            .field("epoch", &self.inner.claim.epoch)
            .finish()
    }
}

impl ShardWriter {
    /// Opens the writer of shard `config.shard` (the shard named `default` if `None`) in `store`.
    ///
    /// Claims the next epoch (fencing any previous writer), writes a fence sentinel at the WAL
    /// tip when a previous writer may exist, replays the WAL into MemTables, and starts the
    /// background tasks. Must be called inside a Tokio runtime.
    ///
    /// # Errors
    /// - `InvalidArgument`: an invalid config value or an empty schema.
    /// - `SchemaMismatch`: the shard was written with another schema (as its manifest records
    ///   it, or, in a manifest that records none, as its WAL entries or newest generation
    ///   hold it); nothing is written.
    /// - `Fenced(PeerClaimedEpoch)`: another writer claimed the shard concurrently.
    /// - `Corrupt`: a manifest or WAL entry cannot be decoded (the message names it), or the
    ///   shard has WAL entries or generations but no manifest (nothing is written).
    /// - `Io`: the store failed.
    pub async fn open(store: Store, schema: SchemaRef, config: WriterConfig) -> Result<Self> {
        let (inner, tasks) = as_actor(Actor::Claim, open::open(store, schema, config)).await?;
        Ok(ShardWriter {
            inner,
            tasks: Mutex::new(Some(tasks)),
        })
    }

    /// The shard this writer owns.
    pub fn shard_id(&self) -> uuid::Uuid {
        self.inner.claim.shard_id()
    }

    /// The shard's name, as its manifest records it (`None` for a shard only ever opened by
    /// id).
    pub fn shard_name(&self) -> Option<&str> {
        self.inner.shard_name.as_deref()
    }

    /// The epoch this writer claimed.
    pub fn epoch(&self) -> u64 {
        self.inner.claim.epoch
    }

    /// This handle's random writer id: the manifest records it as the shard's holder, so a
    /// fenced writer's [`Error::holder`](crate::error::Error::holder) can be matched to the handle
    /// that fenced it.
    pub fn writer_id(&self) -> &str {
        &self.inner.claim.writer_id
    }

    /// The writer's configuration (as validated on open).
    pub fn config(&self) -> &WriterConfig {
        &self.inner.config
    }

    /// The shard's schema.
    pub fn schema(&self) -> SchemaRef {
        self.inner.claim.schema.clone()
    }

    /// The store this writer writes to.
    pub fn store(&self) -> &Store {
        &self.inner.claim.store
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
        self.put_with(batches, PutOptions::default()).await
    }

    /// [`ShardWriter::put`] with options. With a request id the put is retry-safe: if the
    /// writer remembers a put with that id (see
    /// [`WriterConfig::request_id_retention_ms`] for the window), nothing is written and the
    /// call resolves with the first put's result, under the same durability rule: only once
    /// the first put's rows are durable, or with the first put's typed failure.
    ///
    /// # Errors
    /// As [`ShardWriter::put`]; a retry whose first put failed gets that failure.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use arrow_array::{Int32Array, RecordBatch};
    /// # use arrow_schema::{DataType, Field, Schema};
    /// # use memwal_core::{ShardWriter, Store, WriterConfig};
    /// use memwal_core::{PutOptions, RequestId};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
    /// # let rows = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![1, 2]))]).unwrap();
    /// let w = ShardWriter::open(Store::memory(), schema, WriterConfig::default()).await?;
    /// let id = RequestId::new("order-42")?;
    /// let first = w.put_with(vec![rows.clone()], PutOptions::with_request_id(id.clone())).await?;
    /// // A retry (after a timeout, say) writes nothing and gets the first result.
    /// let again = w.put_with(vec![rows], PutOptions::with_request_id(id)).await?;
    /// assert_eq!(first, again);
    /// assert_eq!(w.scan().await?.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    /// # w.close().await?;
    /// # Ok::<(), memwal_core::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn put_with(
        &self,
        batches: Vec<RecordBatch>,
        options: PutOptions,
    ) -> Result<WriteResult> {
        let (result, durable) = self.inserted(batches, PutMode::Put, options).await?;
        if LegacyWatermark::ON && durable.is_some() && self.inner.config.enable_memtable {
            let feedback = &self.inner.feedback;
            let end = result.batch_positions.end;
            let check = || feedback.check();
            feedback.legacy_watermark.wait(check, end).await?;
            return Ok(result);
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
        self.put_no_wait_with(batches, PutOptions::default()).await
    }

    /// [`ShardWriter::put_no_wait`] with options; a retried request id (see
    /// [`ShardWriter::put_with`]) returns the first put's result at once, with a watcher of the
    /// first put's durability.
    pub async fn put_no_wait_with(
        &self,
        batches: Vec<RecordBatch>,
        options: PutOptions,
    ) -> Result<(WriteResult, Option<DurableWatcher>)> {
        self.inserted(batches, PutMode::NoWait, options).await
    }

    /// Validates `batches` as a put of `mode` and inserts them now unless backpressure would
    /// make the put wait; never waits itself. For callers that must not block (the Node binding
    /// inserts small puts on the JavaScript thread): a [`Submitted::Blocked`] put is inserted
    /// by awaiting [`BlockedPut::inserted`] elsewhere. [`ShardWriter::put_with`] and
    /// [`ShardWriter::put_no_wait_with`] are this call followed by those waits. A retried
    /// request id is answered at once, never blocked.
    ///
    /// # Errors
    /// As [`ShardWriter::put`], except durability errors, which the watcher reports;
    /// `InvalidArgument` for [`PutMode::NoWait`] in WAL-only mode.
    pub fn submit(
        &self,
        batches: Vec<RecordBatch>,
        mode: PutMode,
        options: PutOptions,
    ) -> Result<Submitted> {
        put::submit(&self.inner, batches, mode, options)
    }

    async fn inserted(
        &self,
        batches: Vec<RecordBatch>,
        mode: PutMode,
        options: PutOptions,
    ) -> Result<(WriteResult, Option<DurableWatcher>)> {
        match self.submit(batches, mode, options)? {
            Submitted::Inserted(result, watcher) => Ok((result, watcher)),
            Submitted::Blocked(blocked) => blocked.inserted().await,
        }
    }

    /// Makes every row written so far durable; resolves when it is.
    ///
    /// # Errors
    /// `Closed`, or the latched fence error.
    pub async fn flush(&self) -> Result<()> {
        self.inner.check_open(&self.inner.lock())?;
        let (completion, watcher) = completion();
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
            let mut progress = inner.feedback.progress();
            {
                let st = inner.lock();
                inner.feedback.check()?;
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
        self.inner.feedback.check()
    }

    /// Reads the manifest; a successor's claim seen here is as terminal as one seen by a WAL
    /// append (DESIGN "Writer lifecycle" 3): latch it, or a non-durable writer that was told
    /// it is fenced would go on accepting rows that can never become durable.
    async fn check_fenced_and_latch(&self) -> Result<()> {
        let inner = &self.inner;
        match inner
            .claim
            .manifests
            .check_fenced(inner.claim.epoch, &inner.claim.writer_id)
            .await
        {
            Err(e) if e.is_terminal() => {
                self.inner.feedback.poison(e.clone());
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
        let s = mt.active.memtable.batch_store();
        let pending = mt.active.wal.pending(s.len());
        Ok(MemTableStats {
            generation: mt.active.memtable.generation(),
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
        let s = self.inner.feedback.stats.snapshot();
        WalStats {
            next_wal_entry_position: self.inner.lock().next_wal_position.get(),
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
        self.inner.feedback.stats.snapshot()
    }

    /// The shard's latest manifest, read from storage.
    pub async fn manifest(&self) -> Result<Option<ShardManifest>> {
        self.inner.claim.manifests.read_latest().await
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
                .held()
                .map(|h| {
                    let len = h.memtable.batch_store().len();
                    let visible = if durable {
                        h.wal.appended.min(len)
                    } else {
                        len
                    };
                    (h.memtable.clone(), visible)
                })
                .collect();
            (mt.flushed.clone(), memtables)
        };
        let mut out = Vec::new();
        for g in &flushed {
            out.extend(
                read_generation(
                    &inner.claim.store,
                    &inner.claim.paths,
                    g,
                    Some(&inner.claim.schema),
                )
                .await?,
            );
        }
        for (m, visible) in memtables {
            out.extend(m.batch_store().batches(BatchRange {
                start: 0,
                end: visible,
            }));
        }
        Ok(out)
    }

    /// Sends this writer's events to `sink` from now on (see [`crate::events`]): a fence as soon
    /// as it is found, every WAL append, generation flush, compaction and background collection.
    ///
    /// # Errors
    /// `InvalidArgument` if this writer already has a sink.
    pub fn on_event(&self, sink: crate::events::EventSink) -> Result<()> {
        if !self.inner.feedback.events.subscribe(sink) {
            return Err(Error::invalid(
                "this writer already sends its events somewhere; a writer has one event sink",
            ));
        }
        // A fence found before the sink was installed is still news to it.
        if let Some(latched) = self.inner.feedback.latched() {
            self.inner.feedback.events.send_fenced(latched);
        }
        Ok(())
    }

    /// Collects garbage in this writer's shard now, with this writer's `gc_*` options, and
    /// says what was removed. Runs whether or not background collection (`gc`) is on; see
    /// [`crate::gc`] for what is removed and why it is safe while writers run.
    ///
    /// # Errors
    /// `Closed` after `close`/`abort`; `Io`/`Timeout` if the store fails (a rerun continues).
    pub async fn collect_garbage(&self) -> Result<crate::gc::GcReport> {
        let inner = self.inner.clone();
        if inner.lock().lifecycle != Lifecycle::Open {
            return Err(inner.closed_error());
        }
        inner.collect_garbage().await
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
                    if inner.feedback.latched().is_none() {
                        inner.freeze(mt);
                    }
                    None
                }
                Mode::WalOnly(_) => {
                    let (completion, watcher) = completion();
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
            for timer in &tasks.periodic {
                timer.abort();
            }
            for (name, t) in [
                ("generation-flusher", tasks.generation_flusher),
                ("wal-flush-handler", tasks.wal_handler),
            ] {
                if let Err(e) = t.await {
                    first.get_or_insert(Error::io(format!("background task {name} failed"), e));
                }
            }
        }
        let next_wal_position = inner.lock().next_wal_position;
        if first.is_none()
            && !inner.config.enable_memtable
            && let Some(last) = next_wal_position.prev().map(|p| p.get())
        {
            // WAL-only writers never flush generations, so nothing else moves the tip hint
            // forward; without it the next open probes (or lists) the whole WAL.
            let commit = inner.claim.commit(|l| {
                (l.wal_entry_position_last_seen < last).then(|| {
                    let mut n = l.clone();
                    n.wal_entry_position_last_seen = last;
                    n
                })
            });
            let _ = as_actor(Actor::Commit, commit).await;
        }
        inner.lock().lifecycle = Lifecycle::Closed;
        inner.feedback.bump_progress();
        if let Some(e) = inner.feedback.latched() {
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
            for timer in &tasks.periodic {
                timer.abort();
            }
            tasks.wal_handler.abort();
            tasks.generation_flusher.abort();
            let _ = tasks.wal_handler.await;
            let _ = tasks.generation_flusher.await;
        }
        self.inner.feedback.bump_progress();
        Ok(())
    }
}

impl Drop for ShardWriter {
    fn drop(&mut self) {
        // As `abort`, without waiting for the tasks. Closed first, then the waiters woken: a
        // retry's watcher outlives the handle (it holds the writer's state, not the handle)
        // and waits for reports that the aborted tasks will never send.
        self.inner.lock().lifecycle = Lifecycle::Closed;
        if let Some(tasks) = self.take_tasks() {
            for timer in &tasks.periodic {
                timer.abort();
            }
            tasks.wal_handler.abort();
            tasks.generation_flusher.abort();
        }
        self.inner.feedback.bump_progress();
    }
}
