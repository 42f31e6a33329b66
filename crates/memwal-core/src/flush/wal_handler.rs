//! `WalFlushHandler`: the one task per writer that writes WAL entries.
//!
//! # What it owns
//! The [`WalAppender`] (so WAL order is the order requests arrive in), the WAL progress of every
//! MemTable that may still owe entries (MemTable mode), and the queue of batches waiting for the
//! WAL (WAL-only mode). It never reads or locks the writer's state: everything it needs arrives
//! in its messages, and every append is reported back to the writer ([`Report`]) before the
//! completions it settles.
//!
//! # Lifecycle of the task
//! 1. **Receive**: wait for requests, draining every queued one at once (`recv_many`), or for
//!    a ticker tick (non-durable data must not sit in memory forever).
//! 2. **Plan**: per MemTable, the largest end any request asked for (group commit); a tick,
//!    `flush()` or `close()` asks for everything committed so far in every store.
//! 3. **Append**: per store, oldest generation first, one entry holding what the store still
//!    owes up to that end; then the WAL-only queue.
//! 4. **Complete**: every request whose range is now covered gets `Ok` with the position it is
//!    durable through (including ones an earlier append already covered: no I/O for them);
//!    after a failure, the rest get the latched error.
//! 5. **Stop** on `Shutdown` (after everything queued before it) or when aborted; queued
//!    completions are then dropped and their waiters see "handler exited".
//!
//! Once the writer is poisoned the handler writes nothing more and completes every request
//! with the latched error (rule 4 of the durability contract in [`crate::flush`]): after a
//! fence or an append whose outcome is unknown, this writer can no longer vouch for any entry.
//!
//! # Cancel safety
//! An abort can drop the task while an append is in flight. The entry may still land; no
//! waiter is told it succeeded, and a reopen replays it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use crate::batch_store::BatchRange;
use crate::error::{Error, Result};
use crate::events::WriterEvent;
use crate::flush::completion::Completion;
use crate::flush::{Feedback, PutCompletion, Report};
use crate::memtable::{MemTable, WalProgress};
use crate::request_id::PutRecord;
use crate::stats::{Operation, WalEntryCost};
use crate::wal::{WalPosition, WalWriter};

/// A request to make a prefix of one MemTable's store durable.
#[derive(Debug)]
pub(crate) struct FlushRequest {
    /// The MemTable whose store accepted the rows, captured under the writer lock before any
    /// trigger could rotate it.
    pub memtable: Arc<MemTable>,
    /// Batches `[0, end)` of that store must be in the WAL.
    pub end: usize,
    /// Written with the outcome of the append that covers `end` (`None` for triggers).
    pub completion: Option<PutCompletion>,
    /// When the durable put whose completion this is was called (`None` for a freeze's
    /// completion): the put is counted in the write statistics and its latency sampled.
    pub put_started: Option<Instant>,
}

/// Messages to the handler.
#[derive(Debug)]
pub(crate) enum WalMsg {
    /// MemTable mode: make a store prefix durable.
    Flush(FlushRequest),
    /// MemTable mode: the writer froze `frozen.memtable` (the request covers its whole store)
    /// and `active` takes puts from now on.
    Rotated {
        frozen: FlushRequest,
        active: Arc<MemTable>,
    },
    /// WAL-only mode: a put's batches, next in the writer-lifetime positions. With a
    /// completion, they must be durable before it is written.
    WalOnlyPut {
        batches: Vec<RecordBatch>,
        bytes: u64,
        completion: Option<PutCompletion>,
        /// When the put was called.
        started: Instant,
        /// The put's request-id record, written into the entry that holds its batches.
        request: Option<PutRecord>,
    },
    /// Make everything received so far durable (tick, `flush()`, `close()`, pressure).
    FlushAll { completion: Option<Completion<()>> },
    /// Stop after handling everything queued before this message.
    Shutdown,
}

/// What a waiter's range is.
enum Covers {
    Store(Arc<MemTable>, usize),
    WalOnly(u64),
}

/// One completion to write after this round's appends.
enum Waiter {
    Range {
        covers: Covers,
        completion: PutCompletion,
        /// When the durable put was called (`None`: a freeze's completion).
        put_started: Option<Instant>,
    },
    All(Completion<()>),
}

/// What one round of the handler will do: how far each store must be in the WAL (the largest
/// end any request asked for: group commit), how far the WAL-only queue, and whom to tell.
#[derive(Default)]
struct Plan {
    /// Per MemTable (by `Arc` identity), the end its store must be appended to.
    wants: Vec<(Arc<MemTable>, usize)>,
    wal_only_end: u64,
    waiters: Vec<Waiter>,
    /// A `Shutdown` came: stop after this round.
    stop: bool,
}

impl Plan {
    /// Asks for `m`'s store up to at least `end`.
    fn want(&mut self, m: &Arc<MemTable>, end: usize) {
        match self.wants.iter_mut().find(|(w, _)| Arc::ptr_eq(w, m)) {
            Some((_, e)) => *e = (*e).max(end),
            None => self.wants.push((m.clone(), end)),
        }
    }

    /// Plans `r`: its range, and its waiter if it has a completion.
    fn request(&mut self, r: FlushRequest) {
        self.want(&r.memtable, r.end);
        if let Some(completion) = r.completion {
            self.waiters.push(Waiter::Range {
                covers: Covers::Store(r.memtable, r.end),
                completion,
                put_started: r.put_started,
            });
        }
    }
}

/// A MemTable that may owe WAL entries, and how far it is appended.
struct Tracked {
    memtable: Arc<MemTable>,
    progress: WalProgress,
    /// A newer MemTable took its place: nothing more will be inserted.
    frozen: bool,
}

/// WAL-only mode: batches at writer-lifetime positions `[appended, appended + queue.len())`
/// wait for the WAL.
#[derive(Default)]
struct WalOnlyQueue {
    queue: VecDeque<RecordBatch>,
    /// The request-id records of the queued puts that carry one.
    requests: Vec<PutRecord>,
    /// Estimated bytes of `queue`, as the writer counted them.
    queued_bytes: u64,
    /// Puts in `queue`.
    queued_puts: u64,
    appended: u64,
    /// The entry holding the last of `appended`.
    last_position: Option<WalPosition>,
}

impl WalOnlyQueue {
    fn end(&self) -> u64 {
        self.appended + self.queue.len() as u64
    }
}

const MAX_DRAIN: usize = 4096;

/// See the module docs.
pub(crate) struct WalFlushHandler {
    appender: Box<dyn WalWriter>,
    feedback: Arc<Feedback>,
    flush_interval: Option<Duration>,
    rx: mpsc::UnboundedReceiver<WalMsg>,
    /// MemTable mode, oldest first; the last is the active one.
    memtables: Vec<Tracked>,
    wal_only: WalOnlyQueue,
    /// The entries appended in the current round, with what each append cost.
    round: Vec<WalEntryCost>,
    /// The current round's appends, applied to the progress once its commit says they stand.
    pending: Vec<Pending>,
}

/// One append of a round, waiting for the round's commit.
enum Pending {
    /// `memtable`'s store is in the entry at `position` up to batch `end`.
    Store {
        memtable: Arc<MemTable>,
        end: usize,
        position: WalPosition,
    },
    /// WAL-only: writer-lifetime batch positions up to `end` are in the entry at `position`,
    /// and `bytes` (estimated) left the queue with it.
    WalOnly {
        end: u64,
        bytes: u64,
        position: WalPosition,
    },
}

impl Pending {
    fn position(&self) -> WalPosition {
        match self {
            Pending::Store { position, .. } | Pending::WalOnly { position, .. } => *position,
        }
    }
}

impl WalFlushHandler {
    /// A handler appending through `appender`. In MemTable mode `active` is the MemTable that
    /// takes puts, with its progress after replay; in WAL-only mode it is `None`.
    pub fn new(
        appender: Box<dyn WalWriter>,
        feedback: Arc<Feedback>,
        flush_interval: Option<Duration>,
        active: Option<(Arc<MemTable>, WalProgress)>,
        rx: mpsc::UnboundedReceiver<WalMsg>,
    ) -> Self {
        WalFlushHandler {
            appender,
            feedback,
            flush_interval,
            rx,
            memtables: active
                .map(|(memtable, progress)| Tracked {
                    memtable,
                    progress,
                    frozen: false,
                })
                .into_iter()
                .collect(),
            wal_only: WalOnlyQueue::default(),
            round: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub async fn run(mut self) {
        let mut ticker = self.flush_interval.map(|period| {
            let mut t = tokio::time::interval_at(Instant::now() + period, period);
            t.set_missed_tick_behavior(MissedTickBehavior::Delay);
            t
        });
        let mut msgs = Vec::new();
        loop {
            tokio::select! {
                biased;
                n = self.rx.recv_many(&mut msgs, MAX_DRAIN) => {
                    if n == 0 {
                        self.appender.close().await;
                        return;
                    }
                }
                _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                    msgs.push(WalMsg::FlushAll { completion: None });
                }
            }
            let stop = self.handle(std::mem::take(&mut msgs)).await;
            if stop {
                self.appender.close().await;
                return;
            }
        }
    }

    /// Handles one drained batch of messages: plans the round, appends what it asks for
    /// (nothing once the writer is poisoned), completes its waiters, and lets go of frozen
    /// MemTables that owe nothing more. Returns true on `Shutdown`.
    async fn handle(&mut self, msgs: Vec<WalMsg>) -> bool {
        let plan = self.plan(msgs);
        self.round.clear();
        let outcome = match self.feedback.check() {
            Err(e) => Err(e),
            Ok(()) => {
                // Committed even after a failed append: what was appended before it is made
                // durable, or failed, here.
                let appended = self.append_all(plan.wants, plan.wal_only_end).await;
                let committed = self.commit().await;
                appended.and(committed)
            }
        };
        self.complete(plan.waiters, &outcome);
        // Frozen MemTables whose whole store is in the WAL owe nothing more.
        self.memtables
            .retain(|t| !(t.frozen && t.progress.appended >= t.memtable.batch_store().len()));
        plan.stop
    }

    /// The round `msgs` ask for, in their order: a rotation tracks the new MemTable at once, so
    /// a later `FlushAll` of the same round covers it too.
    fn plan(&mut self, msgs: Vec<WalMsg>) -> Plan {
        let mut plan = Plan::default();
        for msg in msgs {
            match msg {
                WalMsg::Flush(r) => plan.request(r),
                WalMsg::Rotated { frozen, active } => {
                    if let Some(t) = self
                        .memtables
                        .iter_mut()
                        .find(|t| Arc::ptr_eq(&t.memtable, &frozen.memtable))
                    {
                        t.frozen = true;
                    }
                    self.memtables.push(Tracked {
                        memtable: active,
                        progress: WalProgress::default(),
                        frozen: false,
                    });
                    plan.request(frozen);
                }
                WalMsg::WalOnlyPut {
                    batches,
                    bytes,
                    completion,
                    started,
                    request,
                } => {
                    self.wal_only.queue.extend(batches);
                    self.wal_only.queued_puts += 1;
                    self.wal_only.requests.extend(request);
                    self.wal_only.queued_bytes += bytes;
                    if let Some(completion) = completion {
                        let end = self.wal_only.end();
                        plan.wal_only_end = plan.wal_only_end.max(end);
                        plan.waiters.push(Waiter::Range {
                            covers: Covers::WalOnly(end),
                            completion,
                            put_started: Some(started),
                        });
                    }
                }
                WalMsg::FlushAll { completion } => {
                    for t in &self.memtables {
                        plan.want(&t.memtable, t.memtable.batch_store().len());
                    }
                    plan.wal_only_end = plan.wal_only_end.max(self.wal_only.end());
                    if let Some(completion) = completion {
                        plan.waiters.push(Waiter::All(completion));
                    }
                }
                WalMsg::Shutdown => plan.stop = true,
            }
        }
        plan
    }

    /// Writes every waiter's completion after the round's appends ended with `outcome`: `Ok`
    /// with its entry if its range is covered, else the round's error.
    fn complete(&mut self, waiters: Vec<Waiter>, outcome: &Result<()>) {
        let acks = self.acknowledged(&waiters);
        for (w, ack) in waiters.into_iter().zip(acks) {
            match w {
                Waiter::Range {
                    covers: _,
                    completion,
                    put_started,
                } => {
                    if put_started.is_some() {
                        self.feedback.stats.record_durable_request();
                    }
                    completion.complete(ack.ok_or_else(|| {
                        match outcome {
                            Err(e) => e.clone(),
                            // Every planned range was appended, so an uncovered one was never
                            // planned: a broken invariant, never a success.
                            Ok(()) => self.feedback.poison(Error::persistence_failure(
                                "the WAL flush handler was asked about a range it does not track; reopen the writer to replay the WAL",
                                None,
                            )),
                        }
                    }));
                }
                Waiter::All(completion) => completion.complete(outcome.clone()),
            }
        }
    }

    /// The entry each waiter's range is durable through, if it is, with what its append cost
    /// and how many of this round's durable puts it acknowledges; samples the put-to-durable
    /// latency of those puts. Once per round, so per-put cost stays a comparison or two.
    fn acknowledged(&mut self, waiters: &[Waiter]) -> Vec<Option<WalEntryCost>> {
        // Each waiter's entry as an index into `round`, read only once every waiter is counted.
        let mut entries: Vec<Option<usize>> = Vec::with_capacity(waiters.len());
        for w in waiters {
            let Waiter::Range {
                covers,
                put_started,
                ..
            } = w
            else {
                entries.push(None);
                continue;
            };
            let Some(position) = self.covered(covers) else {
                entries.push(None);
                continue;
            };
            let position = position.get();
            let i = match self.round.iter().position(|e| e.position == position) {
                Some(i) => i,
                None => {
                    // Appended in an earlier round (a timer or flush() wrote these rows):
                    // acknowledging them now costs no request.
                    self.round.push(WalEntryCost::at(position));
                    self.round.len() - 1
                }
            };
            if put_started.is_some() {
                self.round[i].puts += 1;
            }
            entries.push(Some(i));
        }
        let now = Instant::now();
        self.feedback
            .stats
            .record_put_to_durable(waiters.iter().zip(&entries).filter_map(|(w, entry)| {
                match (w, entry) {
                    (
                        Waiter::Range {
                            put_started: Some(started),
                            ..
                        },
                        Some(_),
                    ) => Some(now.duration_since(*started)),
                    _ => None,
                }
            }));
        entries
            .into_iter()
            .map(|entry| entry.map(|i| self.round[i]))
            .collect()
    }

    /// The position through which `covers` is durable, if it is.
    fn covered(&self, covers: &Covers) -> Option<WalPosition> {
        match covers {
            Covers::Store(m, end) => {
                let t = self.tracked(m)?;
                (t.progress.appended >= *end)
                    .then_some(t.progress.last_position)
                    .flatten()
            }
            Covers::WalOnly(end) => (self.wal_only.appended >= *end)
                .then_some(self.wal_only.last_position)
                .flatten(),
        }
    }

    fn tracked(&self, m: &Arc<MemTable>) -> Option<&Tracked> {
        self.memtables.iter().find(|t| Arc::ptr_eq(&t.memtable, m))
    }

    /// Appends every planned store (oldest generation first), then the WAL-only queue.
    /// The first failure poisons the writer and stops the rest.
    async fn append_all(
        &mut self,
        mut wants: Vec<(Arc<MemTable>, usize)>,
        wal_only_end: u64,
    ) -> Result<()> {
        wants.sort_by_key(|(m, _)| m.generation());
        for (memtable, end) in wants {
            let Some(i) = self
                .memtables
                .iter()
                .position(|t| Arc::ptr_eq(&t.memtable, &memtable))
            else {
                return Err(self.feedback.poison(Error::persistence_failure(
                    format!(
                        "the WAL flush handler got a request for MemTable generation {} that it does not track; reopen the writer to replay the WAL",
                        memtable.generation()
                    ),
                    None,
                )));
            };
            let batch_store = memtable.batch_store();
            let start = self.memtables[i].progress.appended;
            let committed = batch_store.len();
            if end > committed {
                // Appending what the store holds and reporting the whole range durable would
                // acknowledge rows no entry holds (the durability contract in `crate::flush`).
                // A request past the committed length is a broken invariant, and this writer
                // can no longer vouch for its WAL.
                return Err(self.feedback.poison(Error::persistence_failure(
                    format!(
                        "WAL flush range [{start}, {end}) of generation {} is missing batch position {committed}; its BatchStore holds {committed} batches. Reopen the writer to replay the WAL",
                        memtable.generation()
                    ),
                    None,
                )));
            }
            if start >= end {
                continue;
            }
            let range = BatchRange { start, end };
            let position = self
                .append(
                    &batch_store.batches(range),
                    &batch_store.requests(range),
                    batch_store.puts(range),
                )
                .await?;
            self.pending.push(Pending::Store {
                memtable,
                end,
                position,
            });
            self.feedback.legacy_watermark.publish(end);
        }
        if wal_only_end > self.wal_only.appended {
            self.append_wal_only().await?;
        }
        Ok(())
    }

    /// Makes the round's entries durable ([`WalWriter::commit`]) and applies the appends that
    /// stand to the progress, reporting each to the writer; a failure poisons the writer.
    async fn commit(&mut self) -> Result<()> {
        let (stands_below, outcome) = match self.appender.commit().await {
            Ok(()) => (u64::MAX, Ok(())),
            Err(failed) => (failed.stands_below, Err(self.feedback.poison(failed.error))),
        };
        for pending in std::mem::take(&mut self.pending) {
            if pending.position().get() < stands_below {
                self.apply(pending);
            }
        }
        outcome
    }

    /// Records an append that stands: its store's (or the WAL-only queue's) progress, reported
    /// to the writer.
    fn apply(&mut self, pending: Pending) {
        let next_position = self.appender.next_position();
        match pending {
            Pending::Store {
                memtable,
                end,
                position,
            } => {
                let Some(t) = self
                    .memtables
                    .iter_mut()
                    .find(|t| Arc::ptr_eq(&t.memtable, &memtable))
                else {
                    return;
                };
                t.progress.advance(end, position);
                self.feedback.report(Report::WalAppended {
                    memtable,
                    progress: t.progress,
                    next_position,
                });
            }
            Pending::WalOnly {
                end,
                bytes,
                position,
            } => {
                self.wal_only.appended = end;
                self.wal_only.last_position = Some(position);
                self.feedback.report(Report::WalOnlyAppended {
                    end,
                    bytes,
                    next_position,
                });
            }
        }
    }

    async fn append(
        &mut self,
        batches: &[RecordBatch],
        requests: &[PutRecord],
        puts: u64,
    ) -> Result<WalPosition> {
        let started = Instant::now();
        let stats = self.feedback.stats.clone();
        let append = self.appender.append_with(batches, requests);
        let (appended, requests, bytes) = stats.scoped(Operation::WalAppend, append).await;
        match appended {
            Ok(entry) => {
                let latency = started.elapsed();
                stats.record_wal_append_latency(latency);
                self.round.push(WalEntryCost {
                    position: entry.position.get(),
                    requests,
                    bytes,
                    puts: 0,
                });
                tracing::trace!(target: "memwal::wal", position = entry.position.get(), rows = entry.num_rows, bytes = entry.bytes, "appended WAL entry");
                crate::events::warn_if_slow("wal append", latency);
                self.feedback.stats.record_wal_flush(
                    entry.bytes as u64,
                    entry.num_batches as u64,
                    latency,
                );
                self.feedback.events.send(|| WriterEvent::WalAppend {
                    position: entry.position.get(),
                    puts,
                    batches: entry.num_batches as u64,
                    rows: entry.num_rows as u64,
                    bytes: entry.bytes as u64,
                    latency,
                });
                Ok(entry.position)
            }
            Err(e) => Err(self.feedback.poison(e)),
        }
    }

    /// WAL-only: appends the whole queue as one entry, then removes exactly what it appended.
    /// On failure the queue is left as it was: emptied before its append succeeded, it would
    /// let a durable put planned meanwhile find nothing owed and succeed with its rows in no
    /// entry.
    async fn append_wal_only(&mut self) -> Result<()> {
        let batches: Vec<_> = self.wal_only.queue.iter().cloned().collect();
        let requests = self.wal_only.requests.clone();
        let position = self
            .append(&batches, &requests, self.wal_only.queued_puts)
            .await?;
        self.wal_only.queued_puts = 0;
        self.wal_only.queue.clear();
        self.wal_only.requests.clear();
        self.pending.push(Pending::WalOnly {
            end: self.wal_only.end() + batches.len() as u64,
            bytes: std::mem::take(&mut self.wal_only.queued_bytes),
            position,
        });
        Ok(())
    }
}
