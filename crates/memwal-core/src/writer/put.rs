//! The put path: validate → fail fast if closed or poisoned → backpressure (never failing for
//! pressure alone) → lock, insert, capture the accepting MemTable, queue its flush request, run
//! the triggers, unlock. Awaiting durability is the caller's part (the watcher it returns).
//!
//! Every way in (`ShardWriter::put`, `put_no_wait`, `submit`) goes through [`submit`], so the
//! checks are made once, here, whatever the caller.

use std::sync::Arc;

use arrow_array::RecordBatch;
use tokio::time::Instant;

use super::state::{Held, Mode, WriterInner, WriterState};
use super::validate;
use crate::batch_store::{BatchRange, estimated_batch_bytes};
use crate::error::{Error, Result};
use crate::flush::wal_handler::{FlushRequest, WalMsg};
use crate::flush::{DurableWatcher, put_completion};

/// Where a put's rows went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResult {
    /// The MemTable generation that accepted the rows (`None` in WAL-only mode).
    pub generation: Option<u64>,
    /// The batches' positions: local to `generation` in MemTable mode (the first put after a
    /// rotation is `0..1` again); writer-lifetime in WAL-only mode.
    pub batch_positions: BatchRange,
}

/// How the caller of [`crate::ShardWriter::submit`] will wait for its put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// As [`crate::ShardWriter::put`]: the caller awaits durability (in durable mode) through
    /// the watcher.
    Put,
    /// As [`crate::ShardWriter::put_no_wait`]: the caller returns once the rows are in memory
    /// and hands out the watcher. MemTable mode only: WAL-only mode has no in-memory rows.
    NoWait,
}

/// What [`crate::ShardWriter::submit`] did.
#[derive(Debug)]
pub enum Submitted {
    /// The rows are in memory; in durable mode the watcher resolves when they are durable.
    Inserted(WriteResult, Option<DurableWatcher>),
    /// Backpressure makes the put wait; nothing is inserted yet. Await
    /// [`BlockedPut::inserted`] (off the caller's thread if it must not block).
    Blocked(BlockedPut),
}

/// A validated put waiting for backpressure to ease. See [`Submitted::Blocked`].
#[derive(Debug)]
pub struct BlockedPut {
    inner: Arc<WriterInner>,
    batches: ValidatedBatches,
    started: Instant,
}

impl BlockedPut {
    /// Waits (never failing for pressure alone) until the writer takes the rows, then inserts
    /// them; returns where they went and, in durable mode, the durability watcher.
    ///
    /// # Errors
    /// `Closed` if the writer closes meanwhile; its latched fence error if it is poisoned.
    pub async fn inserted(self) -> Result<(WriteResult, Option<DurableWatcher>)> {
        let BlockedPut {
            inner,
            mut batches,
            started,
        } = self;
        let waited_since = Instant::now();
        loop {
            // Subscribe before checking, so progress made in between is not missed.
            let mut progress = inner.feedback.progress();
            match insert(&inner, batches, started)? {
                Submitted::Inserted(result, watcher) => {
                    inner
                        .feedback
                        .stats
                        .record_backpressure(waited_since.elapsed());
                    return Ok((result, watcher));
                }
                Submitted::Blocked(back) => batches = back.batches,
            }
            if progress.changed().await.is_err() {
                return Err(inner.closed_error());
            }
        }
    }
}

/// Batches that passed a put's validation.
#[derive(Debug)]
struct ValidatedBatches {
    batches: Vec<RecordBatch>,
    rows: u64,
    bytes: u64,
}

/// Validates `batches` for `mode`, then inserts them unless backpressure makes the put wait.
pub(super) fn submit(
    inner: &Arc<WriterInner>,
    batches: Vec<RecordBatch>,
    mode: PutMode,
) -> Result<Submitted> {
    let started = Instant::now();
    if mode == PutMode::NoWait && !inner.config.enable_memtable {
        return Err(Error::invalid(
            "put_no_wait is only supported in MemTable mode (enable_memtable = true); WAL-only mode has no in-memory rows",
        ));
    }
    let batches = validate::validate(&inner.schema, batches)?;
    if inner.config.enable_memtable && batches.len() > inner.config.max_memtable_batches {
        return Err(Error::invalid(format!(
            "a put of {} batches exceeds max_memtable_batches ({}); split it into several puts or raise maxMemtableBatches",
            batches.len(),
            inner.config.max_memtable_batches
        )));
    }
    let validated = ValidatedBatches {
        rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
        bytes: batches.iter().map(estimated_batch_bytes).sum(),
        batches,
    };
    insert(inner, validated, started)
}

/// Over the backpressure limit? If so, makes sure something is being flushed that will relieve
/// it. Caller holds the state lock.
fn over_pressure(inner: &WriterInner, st: &mut WriterState) -> bool {
    let limit = inner.config.max_unflushed_memtable_bytes;
    match &mut st.mode {
        Mode::MemTable(mt) => {
            let over = mt.active.memtable.store().estimated_bytes() + mt.frozen_bytes >= limit;
            if over && mt.frozen.is_empty() {
                // Nothing is being flushed that could relieve the pressure: freeze the active
                // MemTable so something is.
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
fn insert(
    inner: &Arc<WriterInner>,
    validated: ValidatedBatches,
    started: Instant,
) -> Result<Submitted> {
    let mut st = inner.lock();
    inner.check_open(&st)?;
    if over_pressure(inner, &mut st) {
        return Ok(Submitted::Blocked(BlockedPut {
            inner: inner.clone(),
            batches: validated,
            started,
        }));
    }
    let ValidatedBatches {
        batches,
        rows,
        bytes,
    } = validated;
    let durable = inner.config.durable_write;
    let (result, watcher) = match &mut st.mode {
        Mode::MemTable(mt) => {
            if mt.active.memtable.would_overflow(
                batches.len(),
                bytes,
                inner.config.max_memtable_size,
            ) {
                inner.freeze(mt);
            }
            let range = mt.active.memtable.insert(&batches).map_err(|full| {
                Error::invalid(format!(
                    "MemTable batch store is full ({full:?}) - should have been frozen"
                ))
            })?;
            // INVARIANT (flush.rs contract): capture the accepting MemTable now, before any
            // trigger below can rotate it.
            let accepted: Held = mt.active.clone();
            let watcher = if durable {
                let (completion, watcher) = put_completion();
                let _ = inner.wal_tx.send(WalMsg::Flush(FlushRequest {
                    memtable: accepted.memtable.clone(),
                    end: range.end,
                    completion: Some(completion),
                    from_put: true,
                }));
                Some(watcher)
            } else {
                let crossed = accepted
                    .memtable
                    .store()
                    .estimated_bytes()
                    .checked_div(inner.config.max_wal_buffer_size);
                // Size trigger: one flush per `max_wal_buffer_size` crossed (0 = off).
                if let Some(crossed) = crossed
                    && mt.wal_size_triggers < crossed
                {
                    mt.wal_size_triggers = crossed;
                    let _ = inner.wal_tx.send(WalMsg::Flush(FlushRequest {
                        memtable: accepted.memtable.clone(),
                        end: range.end,
                        completion: None,
                        from_put: false,
                    }));
                }
                None
            };
            if mt
                .active
                .memtable
                .should_freeze(inner.config.max_memtable_size)
            {
                inner.freeze(mt);
            }
            let result = WriteResult {
                generation: Some(accepted.memtable.generation()),
                batch_positions: range,
            };
            (result, watcher)
        }
        Mode::WalOnly(wo) => {
            let start = wo.next;
            wo.next += batches.len() as u64;
            wo.pending_bytes += bytes;
            let end = wo.next;
            let (completion, watcher) = if durable {
                let (completion, watcher) = put_completion();
                (Some(completion), Some(watcher))
            } else {
                (None, None)
            };
            let _ = inner.wal_tx.send(WalMsg::WalOnlyPut {
                batches,
                bytes,
                completion,
            });
            let limit = inner.config.max_wal_buffer_size;
            if !durable && limit > 0 {
                // Reference §6: a baseline, reset by every drain of the queue (reported by
                // the flush handler), so the trigger keeps firing after the first flush.
                while wo.pending_bytes >= wo.size_baseline + limit {
                    wo.size_baseline += limit;
                    let _ = inner.wal_tx.send(WalMsg::FlushAll { completion: None });
                }
            }
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
    inner.feedback.stats.record_put(rows, started.elapsed());
    Ok(Submitted::Inserted(result, watcher))
}
