//! State shared between a [`crate::ShardWriter`] handle and its background tasks.
//!
//! # Who touches what
//! - `state` (a `std::sync::Mutex`, never held across `.await`): the put path inserts under it;
//!   the generation flusher moves a flushed MemTable from `frozen` to `flushed` under it; the
//!   WAL flush handler snapshots stores and the WAL-only queue under it.
//! - `latch`: written by whichever task first sees a terminal failure, via [`WriterInner::poison`].
//! - `progress`: bumped after every generation flush, WAL-only append, poisoning and shutdown,
//!   so backpressure and drain waiters re-check the state.
//! - `wal_tx` / `gen_tx`: requests to the two tasks. Frozen MemTables are sent to both while the
//!   state lock is held, so every batch of generation N is queued for the WAL before any batch
//!   of generation N + 1 can be.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use crate::config::WriterConfig;
use crate::error::{Error, Result};
use crate::flush::generation::{FrozenMemTable, GenerationMsg};
use crate::flush::wal_handler::{FlushRequest, WalMsg};
use crate::flush::{TerminalLatch, put_completion};
use crate::manifest::{FlushedGeneration, ManifestStore};
use crate::memtable::MemTable;
use crate::stats::{OpenStats, StatsRecorder};
use crate::store::{ShardPaths, Store};

/// Where a writer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    Open,
    /// `close()` is flushing; new calls are rejected.
    Closing,
    /// Closed or aborted.
    Closed,
}

/// MemTable-mode state.
#[derive(Debug)]
pub(crate) struct MemTableState {
    /// Takes puts.
    pub active: Arc<MemTable>,
    /// Frozen, oldest first, until their generation flush commits.
    pub frozen: VecDeque<Arc<MemTable>>,
    /// Estimated bytes of `frozen`.
    pub frozen_bytes: u64,
    /// Generations in the manifest, oldest first.
    pub flushed: Vec<FlushedGeneration>,
    /// Size-trigger thresholds already crossed by the active MemTable (reset at freeze).
    pub wal_size_triggers: u64,
}

/// WAL-only-mode state: batches waiting for the WAL, at writer-lifetime positions
/// `[appended, appended + pending.len())`.
#[derive(Debug, Default)]
pub(crate) struct WalOnlyState {
    pub pending: VecDeque<(RecordBatch, u64)>,
    pub pending_bytes: u64,
    /// Lifetime positions `[0, appended)` are in the WAL.
    pub appended: u64,
    /// Size-trigger baseline (reference §6): pending bytes already covered by a queued
    /// trigger. Reset to 0 by the flush handler whenever it drains the queue.
    pub size_baseline: u64,
}

impl WalOnlyState {
    /// One past the last assigned lifetime position.
    pub fn next_position(&self) -> u64 {
        self.appended + self.pending.len() as u64
    }
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
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct WriterInner {
    pub shard_id: Uuid,
    pub writer_id: String,
    pub epoch: u64,
    pub config: WriterConfig,
    pub schema: SchemaRef,
    pub store: Store,
    pub paths: ShardPaths,
    pub manifests: ManifestStore,
    pub state: Mutex<WriterState>,
    pub latch: TerminalLatch,
    pub progress: watch::Sender<u64>,
    pub stats: StatsRecorder,
    pub wal_tx: mpsc::UnboundedSender<WalMsg>,
    pub gen_tx: mpsc::UnboundedSender<GenerationMsg>,
    /// Mirror of the appender's next position, for stats.
    pub next_wal_position: AtomicU64,
    pub fence_sentinel_position: Option<u64>,
    /// Where open spent its time.
    pub open_stats: OpenStats,
    /// The seed report's bug, for the regression test's negative control only.
    #[cfg(feature = "legacy-watermark-bug")]
    pub legacy_watermark: watch::Sender<usize>,
}

impl WriterInner {
    pub fn lock(&self) -> MutexGuard<'_, WriterState> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // matters more than losing the writer; keep serving so errors stay typed.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn closed_error(&self) -> Error {
        Error::closed(format!(
            "ShardWriter for shard {} (epoch {}) is closed; open a new writer",
            self.shard_id, self.epoch
        ))
    }

    /// Fails if the writer is closing/closed or poisoned.
    pub fn check_open(&self, state: &WriterState) -> Result<()> {
        if state.lifecycle != Lifecycle::Open {
            return Err(self.closed_error());
        }
        self.latch.check()
    }

    /// Wakes every progress waiter.
    pub fn bump_progress(&self) {
        self.progress.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Latches `error` as the writer's terminal failure (first wins) and wakes waiters. A
    /// non-fence error is wrapped as a `PersistenceFailure`: whatever stopped the WAL or a
    /// generation flush, this writer can no longer vouch for its rows.
    pub fn poison(&self, error: Error) -> Error {
        let error = if error.is_terminal() {
            error
        } else {
            Error::persistence_failure(
                format!(
                    "shard {}: {error}; in-memory state may diverge from the durable WAL, reopen to replay",
                    self.shard_id
                ),
                Some(Arc::new(error)),
            )
        };
        self.latch.latch(error);
        self.bump_progress();
        self.latch.get().cloned().expect("latched")
    }

    pub fn record_next_wal_position(&self, p: u64) {
        self.next_wal_position.store(p, Ordering::Relaxed);
    }

    /// Freezes the active MemTable (if it holds rows): a MemTable of generation + 1 replaces
    /// it; the old one is queued for the WAL (its whole store) and then for its generation
    /// flush. Caller holds the state lock.
    pub fn freeze(&self, mt: &mut MemTableState) {
        if mt.active.store().is_empty() {
            return;
        }
        let next = Arc::new(MemTable::new(
            mt.active.generation() + 1,
            self.config.max_memtable_batches,
        ));
        let old = std::mem::replace(&mut mt.active, next);
        mt.wal_size_triggers = 0;
        let (completion, wal_done) = put_completion();
        // If the handler is gone the message (and completion) is dropped: the generation
        // flusher then sees "handler exited" and flushes nothing.
        let _ = self.wal_tx.send(WalMsg::Flush(FlushRequest {
            end: old.store().len(),
            memtable: old.clone(),
            completion: Some(completion),
            from_put: false,
        }));
        self.enqueue_frozen(mt, old, wal_done);
    }

    /// Adds a frozen MemTable to the frozen list and the generation flusher's queue.
    pub fn enqueue_frozen(
        &self,
        mt: &mut MemTableState,
        frozen: Arc<MemTable>,
        wal_done: crate::flush::DurableWatcher,
    ) {
        mt.frozen_bytes += frozen.store().estimated_bytes();
        mt.frozen.push_back(frozen.clone());
        let _ = self.gen_tx.send(GenerationMsg::Flush(FrozenMemTable {
            memtable: frozen,
            wal_done,
        }));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};

    use super::Mode;
    use crate::flush::put_completion;
    use crate::flush::wal_handler::{FlushRequest, WalMsg};
    use crate::{FenceReason, ShardWriter, Store, WalTailer, WriterConfig};

    // Reference §8.3 scenario 66 (and §2.6, recommended): a flush request past the store's
    // committed length is a broken invariant, never a short append. It poisons the writer
    // with `PersistenceFailure` and appends nothing, so no completion can report rows durable
    // that no entry holds.
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
            Mode::MemTable(mt) => mt.active.clone(),
            Mode::WalOnly(_) => unreachable!(),
        };
        let (completion, watcher) = put_completion();
        w.inner
            .wal_tx
            .send(WalMsg::Flush(FlushRequest {
                memtable: active.clone(),
                end: 3,
                completion: Some(completion),
                from_put: true,
            }))
            .unwrap();
        let e = watcher.wait().await.unwrap_err();
        assert_eq!(
            e.fence_reason(),
            Some(FenceReason::PersistenceFailure),
            "{e}"
        );
        assert!(e.to_string().contains("missing batch position 2"), "{e}");
        assert_eq!(active.store().wal_appended_len(), 0);
        let tailer = WalTailer::open(store, w.shard_id()).await.unwrap();
        assert_eq!(tailer.next_position().await.unwrap(), 1, "nothing appended");
        let e = w.put(vec![batch(3)]).await.unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PersistenceFailure));
    }
}
