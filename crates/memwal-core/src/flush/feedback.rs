//! [`Feedback`]: how the background tasks tell the writer what happened.
//!
//! The writer owns its state (MemTables, WAL-only counters, lifecycle) and is the only one that
//! locks it. The WAL flush handler and the generation flusher never touch it: they send a
//! [`Report`] for every change the writer must learn of, and the writer applies the reports, in
//! order, the next time it takes its lock. A report is sent *before* the completions it
//! explains, so a caller whose put just resolved sees its effect on its next call.
//!
//! Besides reports, the tasks share with the writer only what is written once or counted:
//! - the [`TerminalLatch`] (the first fence error, [`Feedback::poison`]);
//! - a progress signal that wakes the writer's waiters (backpressure, drain) after each report
//!   and after a poisoning;
//! - the write statistics (atomic counters).

use crate::events::Events;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::flush::TerminalLatch;
use crate::flush::legacy_watermark::LegacyWatermark;
use crate::manifest::FlushedGeneration;
use crate::memtable::{MemTable, WalProgress};
use crate::stats::StatsRecorder;
use crate::wal::WalPosition;

/// A change a background task made that the writer must apply to its state.
#[derive(Debug)]
pub(crate) enum Report {
    /// MemTable mode: `memtable`'s store is in the WAL as far as `progress` says.
    WalAppended {
        memtable: Arc<MemTable>,
        progress: WalProgress,
        next_position: WalPosition,
    },
    /// WAL-only mode: writer-lifetime batch positions `[0, end)` are in the WAL, and
    /// `bytes` (estimated) of queued batches left the queue with that append.
    WalOnlyAppended {
        end: u64,
        bytes: u64,
        next_position: WalPosition,
    },
    /// The generation flush of `memtable` (the oldest frozen one) is committed in the
    /// manifest as `generation`.
    GenerationCommitted {
        memtable: Arc<MemTable>,
        generation: FlushedGeneration,
    },
    /// Compaction committed a manifest whose generation list is `flushed`.
    GenerationsCompacted { flushed: Vec<FlushedGeneration> },
}

/// See the module docs. Shared as `Arc<Feedback>` by the writer and its two tasks.
#[derive(Debug)]
pub(crate) struct Feedback {
    shard_id: Uuid,
    latch: TerminalLatch,
    reports: mpsc::UnboundedSender<Report>,
    progress: watch::Sender<u64>,
    /// Write statistics.
    pub stats: Arc<StatsRecorder>,
    /// Where events go (see [`crate::events`]).
    pub events: Events,
    /// The seed bug (`docs/durability.md`), for the regression test's negative control only
    /// (zero-sized unless its feature is on).
    pub legacy_watermark: LegacyWatermark,
}

/// The writer's end of the report channel.
pub(crate) type Reports = mpsc::UnboundedReceiver<Report>;

impl Feedback {
    /// A feedback channel for the writer of `shard_id`, and the receiver the writer keeps under
    /// its state lock.
    pub fn new(shard_id: Uuid, stats: Arc<StatsRecorder>) -> (Arc<Feedback>, Reports) {
        let (reports, rx) = mpsc::unbounded_channel();
        let feedback = Feedback {
            shard_id,
            latch: TerminalLatch::default(),
            reports,
            progress: watch::Sender::new(0),
            stats,
            events: Events::default(),
            legacy_watermark: LegacyWatermark::default(),
        };
        (Arc::new(feedback), rx)
    }

    /// Sends `report` to the writer and wakes its waiters.
    pub fn report(&self, report: Report) {
        // The writer holds the receiver for as long as any task runs; a send can only fail
        // while the writer is being dropped, when nobody is left to apply it.
        let _ = self.reports.send(report);
        self.bump_progress();
    }

    /// Wakes every waiter of [`Feedback::progress`].
    pub fn bump_progress(&self) {
        self.progress.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A receiver that changes after every report, poisoning and lifecycle change. Subscribe
    /// before checking the state, so that a change in between is not missed.
    pub fn progress(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }

    /// The latched terminal error, if any.
    pub fn latched(&self) -> Option<&Error> {
        self.latch.get()
    }

    /// `Err(latched)` if the writer is poisoned.
    pub fn check(&self) -> Result<()> {
        self.latch.check()
    }

    /// Latches `error` as the writer's terminal failure (first wins), wakes the waiters, and
    /// returns the latched error. A non-fence error is wrapped as a `PersistenceFailure`:
    /// whatever stopped the WAL or a generation flush, this writer can no longer vouch for its
    /// rows.
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
        if self.latch.latch(error) {
            let fence = self.latch.get().expect("latched");
            let holder = fence.holder();
            tracing::warn!(
                target: "memwal::writer",
                shard = %self.shard_id,
                reason = fence.fence_reason().map(tracing::field::debug),
                holder_writer_id = holder.map(|h| h.writer_id.as_str()),
                holder_host = holder.map(|h| h.host.as_str()),
                holder_pid = holder.map(|h| h.pid),
                holder_epoch = holder.map(|h| h.epoch),
                error = %fence,
                "writer fenced"
            );
        }
        self.events.send_fenced(self.latch.get().expect("latched"));
        self.bump_progress();
        self.latch.get().cloned().expect("latched")
    }
}
