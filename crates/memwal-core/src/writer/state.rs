//! The writer's state, and the one place it changes.
//!
//! # Who touches what
//! - `state` (a `std::sync::Mutex`, never held across `.await`) is locked by the writer alone:
//!   the put path inserts under it, `flush`/`close`/`scan` read it. The background tasks never
//!   lock it; they send [`Report`]s, which [`WriterInner::lock`] applies, in order, before it
//!   hands out the guard. So the state a caller sees includes every report sent before it
//!   locked (a report is sent before the completions it explains).
//! - `feedback`: shared with the tasks; holds the terminal latch (first fence error), the
//!   progress signal that wakes backpressure and drain waiters, and the statistics.
//! - `wal_tx` / `gen_tx`: requests to the two tasks. A frozen MemTable is sent to both while
//!   the state lock is held, so every batch of generation N is queued for the WAL before any
//!   batch of generation N + 1 can be.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use super::request_index::RequestIndex;
use crate::claim::Claim;
use crate::config::WriterConfig;
use crate::error::{Error, Result};
use crate::flush::completion::{Watcher, completion};
use crate::flush::generation::{FrozenMemTable, GenerationMsg};
use crate::flush::wal_handler::{FlushRequest, WalMsg};
use crate::flush::{Feedback, Report, Reports};
use crate::manifest::FlushedGeneration;
use crate::memtable::{MemTable, WalProgress};
use crate::stats::{OpenStats, Operation, WalEntryCost};
use crate::wal::WalPosition;

/// Where a writer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    Open,
    /// `close()` is flushing; new calls are rejected.
    Closing,
    /// Closed or aborted.
    Closed,
}

/// A MemTable the writer holds, with what the WAL flush handler last reported of it.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub memtable: Arc<MemTable>,
    pub wal: WalProgress,
}

impl Held {
    pub fn new(memtable: Arc<MemTable>, wal: WalProgress) -> Self {
        Held { memtable, wal }
    }
}

/// MemTable-mode state.
#[derive(Debug)]
pub(crate) struct MemTableState {
    /// Takes puts.
    pub active: Held,
    /// Frozen, oldest first, until their generation flush commits.
    pub frozen: VecDeque<Held>,
    /// Estimated bytes of `frozen`.
    pub frozen_bytes: u64,
    /// Generations in the manifest, oldest first.
    pub flushed: Vec<FlushedGeneration>,
    /// Size-trigger thresholds already crossed by the active MemTable (reset at freeze).
    pub wal_size_triggers: u64,
}

impl MemTableState {
    /// The held MemTables, oldest first (frozen ones, then the active one).
    pub fn held(&self) -> impl Iterator<Item = &Held> {
        self.frozen.iter().chain(std::iter::once(&self.active))
    }
}

/// WAL-only-mode state: batches at writer-lifetime positions `[appended, next)` are queued in
/// the WAL flush handler and not yet durable.
#[derive(Debug, Default)]
pub(crate) struct WalOnlyState {
    /// One past the last assigned lifetime position.
    pub next: u64,
    /// Lifetime positions `[0, appended)` are in the WAL.
    pub appended: u64,
    /// Estimated bytes of the queued batches (backpressure counts them).
    pub pending_bytes: u64,
    /// Size-trigger baseline: pending bytes already covered by a queued trigger. Reset to 0
    /// whenever an append drains the queue.
    pub size_baseline: u64,
}

#[derive(Debug)]
pub(crate) enum Mode {
    MemTable(MemTableState),
    WalOnly(WalOnlyState),
}

#[derive(Debug)]
pub(crate) struct WriterState {
    pub lifecycle: Lifecycle,
    pub mode: Mode,
    /// The WAL position the next append will try, as last reported.
    pub next_wal_position: WalPosition,
    /// The request ids of recent puts (see `request_index` for the window).
    pub requests: RequestIndex,
    /// Puts waiting for backpressure (see `put`): the writer reports when this leaves and
    /// returns to 0.
    pub backpressured_puts: usize,
    reports: Reports,
}

impl WriterState {
    pub fn new(
        mode: Mode,
        next_wal_position: WalPosition,
        requests: RequestIndex,
        reports: Reports,
    ) -> Self {
        WriterState {
            lifecycle: Lifecycle::Open,
            mode,
            next_wal_position,
            requests,
            backpressured_puts: 0,
            reports,
        }
    }

    /// The bytes the backpressure limit counts: the active and frozen MemTables, or the
    /// queued WAL-only batches.
    pub fn unflushed_bytes(&self) -> u64 {
        match &self.mode {
            Mode::MemTable(mt) => {
                mt.active.memtable.batch_store().estimated_bytes() + mt.frozen_bytes
            }
            Mode::WalOnly(wo) => wo.pending_bytes,
        }
    }

    /// How far the WAL-only queue is appended (0 in MemTable mode), for the request index.
    pub fn wal_only_appended(&self) -> u64 {
        match &self.mode {
            Mode::WalOnly(wo) => wo.appended,
            Mode::MemTable(_) => 0,
        }
    }

    /// Applies every report the tasks sent so far, in order.
    fn apply_reports(&mut self) {
        while let Ok(report) = self.reports.try_recv() {
            self.apply(report);
        }
    }

    fn apply(&mut self, report: Report) {
        match (report, &mut self.mode) {
            (
                Report::WalAppended {
                    memtable,
                    progress,
                    next_position,
                },
                Mode::MemTable(mt),
            ) => {
                self.next_wal_position = next_position;
                let held = std::iter::once(&mut mt.active).chain(mt.frozen.iter_mut());
                if let Some(h) = held
                    .into_iter()
                    .find(|h| Arc::ptr_eq(&h.memtable, &memtable))
                {
                    h.wal = progress;
                }
            }
            (
                Report::WalOnlyAppended {
                    end,
                    bytes,
                    next_position,
                },
                Mode::WalOnly(wo),
            ) => {
                self.next_wal_position = next_position;
                wo.appended = wo.appended.max(end);
                wo.pending_bytes = wo.pending_bytes.saturating_sub(bytes);
                // The size trigger counts from the last drain. Detecting the drain from the
                // queue size alone misses it when a put refills the queue to the old size,
                // and the trigger then stays silent for a whole buffer.
                wo.size_baseline = 0;
            }
            (
                Report::GenerationCommitted {
                    memtable,
                    generation,
                },
                Mode::MemTable(mt),
            ) => {
                match mt.frozen.front() {
                    Some(f) if Arc::ptr_eq(&f.memtable, &memtable) => {
                        mt.frozen.pop_front();
                        mt.frozen_bytes = mt
                            .frozen_bytes
                            .saturating_sub(memtable.batch_store().estimated_bytes());
                    }
                    _ => debug_assert!(false, "flushed MemTable is not the oldest frozen one"),
                }
                self.requests.flushed(&memtable);
                mt.flushed.push(generation);
            }
            (Report::GenerationsCompacted { flushed }, Mode::MemTable(mt)) => {
                mt.flushed = flushed;
            }
            (r, _) => debug_assert!(false, "{r:?} does not belong to this writer's mode"),
        }
    }
}

/// Everything a writer handle owns; see the module docs.
#[derive(Debug)]
pub(crate) struct WriterInner {
    /// The shard this writer claimed, and what it claimed it as.
    pub claim: Arc<Claim>,
    /// The name the manifest records (`None` for a shard only ever opened by id).
    pub shard_name: Option<String>,
    pub config: WriterConfig,
    pub state: Mutex<WriterState>,
    pub feedback: Arc<Feedback>,
    pub wal_tx: mpsc::UnboundedSender<WalMsg>,
    pub gen_tx: mpsc::UnboundedSender<GenerationMsg>,
    pub fence_sentinel_position: Option<u64>,
    /// Where open spent its time.
    pub open_stats: OpenStats,
}

impl WriterInner {
    /// Locks the state, after applying every report the tasks sent so far.
    pub fn lock(&self) -> MutexGuard<'_, WriterState> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // matters more than losing the writer; keep serving so errors stay typed.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.apply_reports();
        st
    }

    /// One garbage collection of this writer's shard, with its options (see [`crate::gc`]).
    ///
    /// # Errors
    /// `Fenced(PeerClaimedEpoch)`, latched, if the manifest it reads names a successor: a
    /// writer idling in the background learns it is fenced at its next collection, not only at
    /// its next call.
    pub async fn collect_garbage(&self) -> Result<crate::gc::GcReport> {
        let collect = async {
            let manifest = self.claim.manifests.read_latest().await?.ok_or_else(|| {
                Error::io_msg(format!(
                    "shard {} has no manifest; it was deleted while a writer held it",
                    self.claim.shard_id()
                ))
            })?;
            if crate::manifest::fences(&manifest, self.claim.epoch, &self.claim.writer_id) {
                let fence =
                    crate::manifest::fenced_by(self.claim.shard_id(), self.claim.epoch, &manifest);
                return Err(self.feedback.poison(fence));
            }
            let options = crate::gc::GcOptions {
                keep_manifest_versions: self.config.gc_keep_manifest_versions,
                grace: std::time::Duration::from_millis(self.config.gc_grace_ms),
                dry_run: false,
            };
            let claim = &self.claim;
            crate::gc::collect_from(&claim.store, &claim.paths, &manifest, &options).await
        };
        let collect = crate::store::faults::as_actor(crate::store::call::Actor::Gc, collect);
        self.feedback.stats.scoped(Operation::Gc, collect).await.0
    }

    pub fn closed_error(&self) -> Error {
        Error::closed(format!(
            "ShardWriter for shard {} (epoch {}) is closed; open a new writer",
            self.claim.shard_id(),
            self.claim.epoch
        ))
    }

    /// Fails if the writer is closing/closed or poisoned.
    pub fn check_open(&self, state: &WriterState) -> Result<()> {
        if state.lifecycle != Lifecycle::Open {
            return Err(self.closed_error());
        }
        self.feedback.check()
    }

    /// Freezes the active MemTable (if it holds rows): a MemTable of generation + 1 replaces
    /// it; the old one is queued for the WAL (its whole store) and then for its generation
    /// flush. Caller holds the state lock.
    pub fn freeze(&self, mt: &mut MemTableState) {
        if mt.active.memtable.batch_store().is_empty() {
            return;
        }
        let next = Arc::new(MemTable::new(
            mt.active.memtable.generation() + 1,
            self.config.max_memtable_batches,
        ));
        let old = std::mem::replace(
            &mut mt.active,
            Held::new(next.clone(), WalProgress::default()),
        );
        mt.wal_size_triggers = 0;
        tracing::info!(
            target: "memwal::memtable",
            shard = %self.claim.shard_id(),
            generation = old.memtable.generation(),
            batches = old.memtable.batch_store().len(),
            bytes = old.memtable.batch_store().estimated_bytes(),
            "sealed MemTable"
        );
        let (completion, wal_done) = completion();
        // If the handler is gone the message (and completion) is dropped: the generation
        // flusher then sees "handler exited" and flushes nothing.
        let _ = self.wal_tx.send(WalMsg::Rotated {
            frozen: FlushRequest {
                end: old.memtable.batch_store().len(),
                memtable: old.memtable.clone(),
                completion: Some(completion),
                put_started: None,
            },
            active: next,
        });
        self.enqueue_frozen(mt, old, wal_done);
    }

    /// Adds a frozen MemTable to the frozen list and the generation flusher's queue.
    pub fn enqueue_frozen(
        &self,
        mt: &mut MemTableState,
        frozen: Held,
        wal_done: Watcher<WalEntryCost>,
    ) {
        mt.frozen_bytes += frozen.memtable.batch_store().estimated_bytes();
        let _ = self.gen_tx.send(GenerationMsg::Flush(FrozenMemTable {
            memtable: frozen.memtable.clone(),
            wal_done,
        }));
        mt.frozen.push_back(frozen);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};

    use super::Mode;
    use crate::config::WriterConfig;
    use crate::error::FenceReason;
    use crate::flush::put_completion;
    use crate::flush::wal_handler::{FlushRequest, WalMsg};
    use crate::reader::WalTailer;
    use crate::store::Store;
    use crate::writer::ShardWriter;

    // A flush request past the store's committed length is a broken invariant, never a short append
    // (an append of fewer batches than asked, reported as covering all). It poisons the writer with
    // `PersistenceFailure` and appends nothing, so no completion can report rows durable that no
    // entry holds.
    #[tokio::test]
    async fn a_flush_past_the_committed_length_poisons_without_appending() {
        let store = Store::memory();
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        let batch = |v: i32| {
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![v]))]).unwrap()
        };
        let config = WriterConfig {
            durable_write: false,
            max_wal_flush_interval_ms: None,
            ..Default::default()
        };
        let w = ShardWriter::open(store.clone(), schema.clone(), config)
            .await
            .unwrap();
        w.put(vec![batch(1), batch(2)]).await.unwrap();
        let active = match &w.inner.lock().mode {
            Mode::MemTable(mt) => mt.active.memtable.clone(),
            Mode::WalOnly(_) => unreachable!(),
        };
        let (completion, watcher) = put_completion();
        w.inner
            .wal_tx
            .send(WalMsg::Flush(FlushRequest {
                memtable: active.clone(),
                end: 3,
                completion: Some(completion),
                put_started: Some(tokio::time::Instant::now()),
            }))
            .unwrap();
        let e = watcher.wait().await.unwrap_err();
        assert_eq!(
            e.fence_reason(),
            Some(FenceReason::PersistenceFailure),
            "{e}"
        );
        assert!(e.to_string().contains("missing batch position 2"), "{e}");
        let appended = match &w.inner.lock().mode {
            Mode::MemTable(mt) => mt.active.wal.appended,
            Mode::WalOnly(_) => unreachable!(),
        };
        assert_eq!(appended, 0);
        let tailer = WalTailer::open(store, w.shard_id()).await.unwrap();
        assert_eq!(tailer.next_position().await.unwrap(), 1, "nothing appended");
        let e = w.put(vec![batch(3)]).await.unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PersistenceFailure));
    }
}
