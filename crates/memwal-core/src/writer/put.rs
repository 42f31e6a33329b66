//! The put path: validate → fail fast if closed or poisoned → backpressure (never failing for
//! pressure alone) → lock, insert, capture the accepting MemTable, queue its flush request, run
//! the triggers, unlock. Awaiting durability is the caller's part (the watcher it returns).
//!
//! Every way in (`ShardWriter::put`, `put_no_wait`, `submit`) goes through [`submit`], so the
//! checks are made once, here, whatever the caller.
//!
//! A put with a request id is checked against the writer's request index (`request_index`) under the same
//! lock hold as its insert, before backpressure: an id the index remembers is a retry, which
//! inserts nothing and is answered by [`retried`] with the first put's result; otherwise the put
//! is inserted with its [`PutRecord`] kept beside its last batch (so the WAL entry and the
//! generation that hold its rows record it) and remembered.

use std::sync::Arc;

use arrow_array::RecordBatch;
use tokio::time::Instant;

use super::request_index::{RequestIndex, Rows};
use super::state::{Held, Lifecycle, MemTableState, Mode, WalOnlyState, WriterInner, WriterState};
use super::validate;
use crate::batch_store::{BatchRange, SizedBatch};
use crate::error::{Error, Result};
use crate::events::WriterEvent;
use crate::flush::wal_handler::{FlushRequest, WalMsg};
use crate::flush::{DurableWatcher, put_completion};
use crate::request_id::{PutRecord, RequestId};
pub use crate::write_result::WriteResult;

/// Options of one put.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Makes the put retry-safe: if a put with this id is already remembered by the writer
    /// (see [`crate::config::WriterConfig::request_id_retention_ms`] for how long), this put writes
    /// nothing and returns the first put's [`WriteResult`], once the first put's rows are
    /// durable (durable mode; at once in non-durable mode), or the first put's typed failure.
    /// The first put wins even if this one carries other data; one with another row count
    /// than the first put's is logged as a warning (target `memwal::request_id`). `None`: an
    /// ordinary put.
    pub request_id: Option<RequestId>,
}

impl PutOptions {
    /// Options of a put with request id `id`.
    pub fn with_request_id(id: RequestId) -> Self {
        PutOptions {
            request_id: Some(id),
        }
    }
}

/// How the caller of `ShardWriter::submit` will wait for its put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// As `ShardWriter::put`: the caller awaits durability (in durable mode) through
    /// the watcher.
    Put,
    /// As `ShardWriter::put_no_wait`: the caller returns once the rows are in memory
    /// and hands out the watcher. MemTable mode only: WAL-only mode has no in-memory rows.
    NoWait,
}

/// What `ShardWriter::submit` did.
#[derive(Debug)]
pub enum Submitted {
    /// The rows are in memory; in durable mode the watcher resolves when they are durable.
    /// For a retry (a request id the writer remembers): nothing was inserted, the result is
    /// the first put's, and the watcher resolves when the first put's rows are durable (or
    /// with its failure).
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
    request_id: Option<RequestId>,
    started: Instant,
    waiting: Waiting,
}

/// Counts a put among the writer's waiting ones while it waits for backpressure: the first one
/// reports that puts wait, and the last one to go (inserted, failed or dropped) that they stop.
#[derive(Debug)]
struct Waiting(Arc<WriterInner>);

impl Waiting {
    /// Counts a put that just found the writer over its limit. Caller holds the state lock.
    fn start(inner: &Arc<WriterInner>, st: &mut WriterState) -> Waiting {
        st.backpressured_puts += 1;
        if st.backpressured_puts == 1 {
            report_backpressure(inner, true, st.unflushed_bytes());
        }
        Waiting(inner.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        // Never dropped under the state lock: `insert` lets go of it first.
        let mut st = self.0.lock();
        st.backpressured_puts -= 1;
        if st.backpressured_puts == 0 {
            report_backpressure(&self.0, false, st.unflushed_bytes());
        }
    }
}

/// Logs and reports that puts started or stopped waiting. Under the state lock, so the
/// reports of successive episodes keep their order.
fn report_backpressure(inner: &WriterInner, waiting: bool, bytes_waiting: u64) {
    tracing::info!(
        target: "memwal::backpressure",
        shard = %inner.claim.shard_id(),
        bytes_waiting,
        limit = inner.config.max_unflushed_memtable_bytes,
        "{}",
        if waiting { "puts wait for backpressure" } else { "backpressure eased" }
    );
    inner.feedback.events.send(|| WriterEvent::Backpressure {
        waiting,
        bytes_waiting,
    });
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
            request_id,
            started,
            mut waiting,
        } = self;
        let waited_since = Instant::now();
        loop {
            // Subscribe before checking, so progress made in between is not missed.
            let mut progress = inner.feedback.progress();
            match insert(&inner, batches, request_id.clone(), started, Some(waiting))? {
                Submitted::Inserted(result, watcher) => {
                    inner
                        .feedback
                        .stats
                        .record_backpressure(waited_since.elapsed());
                    return Ok((result, watcher));
                }
                Submitted::Blocked(back) => (batches, waiting) = (back.batches, back.waiting),
            }
            if progress.changed().await.is_err() {
                return Err(inner.closed_error());
            }
        }
    }
}

/// Batches that passed a put's validation, each measured (outside the writer's lock).
#[derive(Debug)]
struct ValidatedBatches {
    batches: Vec<SizedBatch>,
    rows: u64,
    bytes: u64,
}

/// Validates `batches` for `mode`, then inserts them unless backpressure makes the put wait.
pub(super) fn submit(
    inner: &Arc<WriterInner>,
    batches: Vec<RecordBatch>,
    mode: PutMode,
    options: PutOptions,
) -> Result<Submitted> {
    let started = Instant::now();
    if mode == PutMode::NoWait && !inner.config.enable_memtable {
        return Err(Error::invalid(
            "put_no_wait is only supported in MemTable mode (enable_memtable = true); WAL-only mode has no in-memory rows",
        ));
    }
    let batches = validate::validate(&inner.claim.schema, batches)?;
    if inner.config.enable_memtable && batches.len() > inner.config.max_memtable_batches {
        return Err(Error::invalid(format!(
            "a put of {} batches exceeds max_memtable_batches ({}); split it into several puts or raise maxMemtableBatches",
            batches.len(),
            inner.config.max_memtable_batches
        )));
    }
    let batches: Vec<SizedBatch> = batches.into_iter().map(SizedBatch::new).collect();
    let validated = ValidatedBatches {
        rows: batches.iter().map(|b| b.batch.num_rows() as u64).sum(),
        bytes: batches.iter().map(|b| b.estimated_bytes).sum(),
        batches,
    };
    insert(inner, validated, options.request_id, started, None)
}

/// Over the backpressure limit? If so, makes sure something is being flushed that will relieve
/// it. Caller holds the state lock.
fn over_pressure(inner: &WriterInner, st: &mut WriterState) -> bool {
    let limit = inner.config.max_unflushed_memtable_bytes;
    match &mut st.mode {
        Mode::MemTable(mt) => {
            let over =
                mt.active.memtable.batch_store().estimated_bytes() + mt.frozen_bytes >= limit;
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

/// The insert itself: under the state lock, never waiting. `waiting`: the put's count among
/// the waiting ones, if it waited already (dropped only after the lock, see [`Waiting`]).
///
/// In phases: lock and check the writer is open; answer a retry of a remembered request id;
/// make the put wait if the writer is over its backpressure limit; insert into the active
/// MemTable or the WAL-only queue; unlock, then count the put.
fn insert(
    inner: &Arc<WriterInner>,
    validated: ValidatedBatches,
    request_id: Option<RequestId>,
    started: Instant,
    waiting: Option<Waiting>,
) -> Result<Submitted> {
    let mut st = inner.lock();
    inner.check_open(&st)?;
    let wal_only_appended = st.wal_only_appended();
    st.requests.sweep(wal_only_appended);
    if let Some(id) = &request_id
        && let Some((result, watcher)) = retried(inner, &mut st, id, validated.rows)
    {
        return Ok(Submitted::Inserted(result, watcher));
    }
    if over_pressure(inner, &mut st) {
        let waiting = match waiting {
            Some(w) => w,
            None => Waiting::start(inner, &mut st),
        };
        return Ok(Submitted::Blocked(BlockedPut {
            inner: inner.clone(),
            batches: validated,
            request_id,
            started,
            waiting,
        }));
    }
    let rows = validated.rows;
    let put = Accepted {
        inner,
        request_id,
        started,
    };
    let WriterState { mode, requests, .. } = &mut *st;
    let (result, watcher) = match mode {
        Mode::MemTable(mt) => put.into_memtable(mt, requests, validated)?,
        Mode::WalOnly(wo) => put.into_wal_only_queue(wo, requests, validated),
    };
    drop(st);
    drop(waiting);
    inner.feedback.stats.record_put(rows, started.elapsed());
    Ok(Submitted::Inserted(result, watcher))
}

/// A put the writer takes now (open, not a retry, not over the limit), inserted under the state
/// lock its caller holds.
struct Accepted<'a> {
    inner: &'a Arc<WriterInner>,
    request_id: Option<RequestId>,
    started: Instant,
}

impl Accepted<'_> {
    /// The put's request-id record, if it carries an id: the result it returns, and when.
    /// Called once, by the insert: it takes the id.
    fn record(&mut self, requests: &RequestIndex, result: WriteResult) -> Option<PutRecord> {
        self.request_id.take().map(|id| PutRecord {
            id,
            result,
            put_at_ms: requests.now_ms(),
        })
    }

    /// MemTable mode: inserts the batches into the active MemTable (freezing it first if they
    /// would overflow it), asks the WAL flush handler for what the put needs, and freezes the
    /// MemTable if it is now full.
    fn into_memtable(
        mut self,
        mt: &mut MemTableState,
        requests: &mut RequestIndex,
        validated: ValidatedBatches,
    ) -> Result<(WriteResult, Option<DurableWatcher>)> {
        let max_size = self.inner.config.max_memtable_size;
        if mt
            .active
            .memtable
            .would_overflow(validated.batches.len(), validated.bytes, max_size)
        {
            self.inner.freeze(mt);
        }
        let (accepted, range) = self.insert_and_capture(mt, requests, validated)?;
        let watcher = self.request_wal_flush(mt, &accepted, range.end);
        if mt.active.memtable.should_freeze(max_size) {
            self.inner.freeze(mt);
        }
        let result = WriteResult {
            generation: Some(accepted.memtable.generation()),
            batch_positions: range,
        };
        Ok((result, watcher))
    }

    /// Inserts the batches into the active MemTable, with the put's request-id record beside
    /// the last one, and remembers the id; returns the MemTable that accepted them and where.
    fn insert_and_capture(
        &mut self,
        mt: &mut MemTableState,
        requests: &mut RequestIndex,
        validated: ValidatedBatches,
    ) -> Result<(Held, BatchRange)> {
        let ValidatedBatches { batches, rows, .. } = validated;
        // The writer is the store's only appender and holds the lock: the rows go here.
        let start = mt.active.memtable.batch_store().len();
        let record = self.record(
            requests,
            WriteResult {
                generation: Some(mt.active.memtable.generation()),
                batch_positions: BatchRange {
                    start,
                    end: start + batches.len(),
                },
            },
        );
        let kept: Vec<PutRecord> = record.iter().cloned().collect();
        let range = mt
            .active
            .memtable
            .insert_with(batches, kept)
            .map_err(|full| {
                Error::invalid(format!(
                    "MemTable batch store is full ({full:?}) - should have been frozen"
                ))
            })?;
        // INVARIANT (flush.rs contract): capture the accepting MemTable now, before any
        // trigger can rotate it.
        let accepted: Held = mt.active.clone();
        if let Some(record) = &record {
            debug_assert_eq!(record.result.batch_positions, range);
            requests.insert_counted(
                record,
                Rows::Held {
                    memtable: accepted.memtable.clone(),
                    end: range.end,
                },
                Some(rows),
            );
        }
        Ok((accepted, range))
    }

    /// What a MemTable-mode put asks of the WAL flush handler for `accepted`'s batches up to
    /// `end`. Durable: a flush request with the put's completion, whose watcher it returns.
    /// Otherwise: a flush only when the MemTable crosses another `max_wal_buffer_size`
    /// (0 = never), and no watcher.
    fn request_wal_flush(
        &self,
        mt: &mut MemTableState,
        accepted: &Held,
        end: usize,
    ) -> Option<DurableWatcher> {
        let inner = self.inner;
        if inner.config.durable_write {
            let (completion, watcher) = put_completion();
            let _ = inner.wal_tx.send(WalMsg::Flush(FlushRequest {
                memtable: accepted.memtable.clone(),
                end,
                completion: Some(completion),
                put_started: Some(self.started),
            }));
            return Some(watcher);
        }
        let crossed = accepted
            .memtable
            .batch_store()
            .estimated_bytes()
            .checked_div(inner.config.max_wal_buffer_size);
        if let Some(crossed) = crossed
            && mt.wal_size_triggers < crossed
        {
            mt.wal_size_triggers = crossed;
            let _ = inner.wal_tx.send(WalMsg::Flush(FlushRequest {
                memtable: accepted.memtable.clone(),
                end,
                completion: None,
                put_started: None,
            }));
        }
        None
    }

    /// WAL-only mode: gives the batches the next writer-lifetime positions, remembers the
    /// request id, queues them for the WAL flush handler (with the put's completion if
    /// durable), and runs the size trigger.
    fn into_wal_only_queue(
        mut self,
        wo: &mut WalOnlyState,
        requests: &mut RequestIndex,
        validated: ValidatedBatches,
    ) -> (WriteResult, Option<DurableWatcher>) {
        let inner = self.inner;
        let ValidatedBatches {
            batches,
            rows,
            bytes,
        } = validated;
        let durable = inner.config.durable_write;
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
        let result = WriteResult {
            generation: None,
            batch_positions: BatchRange {
                start: start as usize,
                end: end as usize,
            },
        };
        let request = self.record(requests, result);
        if let Some(record) = &request {
            requests.insert_counted(record, Rows::WalOnly { end }, Some(rows));
        }
        let _ = inner.wal_tx.send(WalMsg::WalOnlyPut {
            batches: batches.into_iter().map(|b| b.batch).collect(),
            bytes,
            completion,
            started: self.started,
            request,
        });
        let limit = inner.config.max_wal_buffer_size;
        if !durable && limit > 0 {
            // Size trigger: one flush per `limit` bytes queued since the last drain. The
            // baseline is reset by every drain (the flush handler reports it), so the trigger
            // keeps firing after the first flush instead of only once per writer.
            while wo.pending_bytes >= wo.size_baseline + limit {
                wo.size_baseline += limit;
                let _ = inner.wal_tx.send(WalMsg::FlushAll { completion: None });
            }
        }
        (result, watcher)
    }
}

/// Whether the first put of `id` is durable, as far as the writer's state shows.
enum FirstPut {
    Durable,
    Pending,
    /// Its MemTable is neither held nor flushed: cannot happen while the writer is open.
    Lost,
}

/// Where the first put of `id`, which returned `result`, stands now. Read from the request
/// index at every look, never kept: while a retry waits, the first put's rows move from a
/// held MemTable to a committed generation, and the held MemTable it was in is let go.
fn first_put_now(st: &mut WriterState, id: &RequestId, result: &WriteResult) -> FirstPut {
    let wal_only_appended = st.wal_only_appended();
    match st.requests.get(id, wal_only_appended) {
        Some(known) if known.result == *result => first_put(&st.mode, &known.rows),
        // The index forgets a put only once its rows are durable (flushed, or appended in
        // WAL-only mode), and takes another put of the id only after forgetting this one.
        _ => FirstPut::Durable,
    }
}

fn first_put(mode: &Mode, rows: &Rows) -> FirstPut {
    match (rows, mode) {
        (Rows::Flushed, _) => FirstPut::Durable,
        (Rows::Held { memtable, end }, Mode::MemTable(mt)) => {
            match mt.held().find(|h| Arc::ptr_eq(&h.memtable, memtable)) {
                Some(h) if h.wal.appended >= *end => FirstPut::Durable,
                Some(_) => FirstPut::Pending,
                // A MemTable leaves the held list only at its generation commit, which marks
                // its puts `Flushed` under the same lock.
                None => FirstPut::Lost,
            }
        }
        (Rows::WalOnly { end }, Mode::WalOnly(wo)) if wo.appended >= *end => FirstPut::Durable,
        (Rows::WalOnly { .. }, Mode::WalOnly(_)) => FirstPut::Pending,
        _ => FirstPut::Lost,
    }
}

/// If `id` is remembered: the first put's result and, in durable mode, a watcher of the first
/// put's durability. `row_count`: the retry's rows, only compared with the first put's (a
/// difference is logged: the first put wins, but an id reused for another request is likely a
/// client's bug that nothing else would show). Caller holds the state lock.
///
/// The watcher is satisfied only by the first put's own rows being durable: the writer's
/// record of the WAL progress of the exact MemTable that accepted them (reported by the WAL
/// flush handler after the append returned; see the contract in [`crate::flush`]), a committed
/// generation holding them, or their replay from the WAL. A failure of the first put's append
/// is latched on the writer, so the retry gets the same typed error.
fn retried(
    inner: &Arc<WriterInner>,
    st: &mut WriterState,
    id: &RequestId,
    row_count: u64,
) -> Option<(WriteResult, Option<DurableWatcher>)> {
    let wal_only_appended = st.wal_only_appended();
    let known = st.requests.get(id, wal_only_appended)?;
    let result = known.result;
    inner.feedback.stats.record_retried_put();
    if let Some(first_rows) = known.row_count
        && first_rows != row_count
    {
        tracing::warn!(
            target: "memwal::request_id",
            shard = %inner.claim.shard_id(),
            request_id = id.as_str(),
            first_rows,
            retry_rows = row_count,
            "retry carries another row count than the first put of its requestId; it writes nothing and gets the first put's result"
        );
    }
    if !inner.config.durable_write {
        // Non-durable mode: the first put resolved once its rows were in memory; so does this.
        return Some((result, None));
    }
    let watcher = match first_put(&st.mode, &known.rows) {
        FirstPut::Durable => DurableWatcher::ready(Ok(())),
        FirstPut::Lost => DurableWatcher::ready(Err(lost(id))),
        FirstPut::Pending => {
            let (inner, id) = (inner.clone(), id.clone());
            DurableWatcher::from_future(async move { first_durable(&inner, &id, &result).await })
        }
    };
    Some((result, Some(watcher)))
}

fn lost(id: &RequestId) -> Error {
    Error::persistence_failure(
        format!(
            "the writer lost track of the rows of the first put with requestId {id:?}; reopen the shard to replay the WAL, then retry"
        ),
        None,
    )
}

/// Waits until the first put of `id`, which returned `result`, is durable, or fails as it
/// did.
async fn first_durable(inner: &WriterInner, id: &RequestId, result: &WriteResult) -> Result<()> {
    loop {
        // Subscribe before checking, so a report in between is not missed.
        let mut progress = inner.feedback.progress();
        {
            let mut st = inner.lock();
            match first_put_now(&mut st, id, result) {
                FirstPut::Durable => return Ok(()),
                FirstPut::Lost => return Err(lost(id)),
                FirstPut::Pending => {}
            }
            // The first put's append failed: the writer latched that error, which is what the
            // first put got.
            inner.feedback.check()?;
            if st.lifecycle == Lifecycle::Closed {
                // Aborted: the first put's cell was dropped unwritten, and so is this one.
                return Err(Error::HandlerExited {
                    context: String::new(),
                });
            }
        }
        if progress.changed().await.is_err() {
            return Err(Error::HandlerExited {
                context: String::new(),
            });
        }
    }
}
