//! `WalFlushHandler`: the one task per writer that writes WAL entries.
//!
//! # Lifecycle of the task
//! 1. **Receive**: wait for requests, draining every queued one at once (`recv_many`), or for
//!    a ticker tick (non-durable data must not sit in memory forever).
//! 2. **Plan**: per MemTable, the largest end any request asked for (group commit); a tick,
//!    `flush()` or `close()` asks for everything committed so far in every store.
//! 3. **Append**: per store, oldest generation first, one entry holding what the store still
//!    owes up to that end. Stores are appended in generation order, and the handler is the
//!    only appender, so WAL order is insert order.
//! 4. **Complete**: every request whose range is now covered gets `Ok` (including ones an
//!    earlier append already covered: no I/O for them); after a failure, the rest get the
//!    latched error.
//! 5. **Stop** on `Shutdown` (after everything queued before it) or when aborted; queued
//!    completions are then dropped and their waiters see "handler exited".
//!
//! Once the writer is poisoned the handler writes nothing more and completes every request
//! with the latched error (reference §10.7).
//!
//! # Cancel safety
//! An abort can drop the task while an append is in flight. The entry may still land; no
//! waiter is told it succeeded, and a reopen replays it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use crate::error::{Error, Result};
use crate::flush::PutCompletion;
use crate::memtable::MemTable;
use crate::wal::WalAppender;
use crate::writer::shared::{Mode, WriterInner};

/// A request to make a prefix of one MemTable's store durable.
#[derive(Debug)]
pub struct FlushRequest {
    /// The MemTable whose store accepted the rows, captured under the writer lock before any
    /// trigger could rotate it.
    pub memtable: Arc<MemTable>,
    /// Batches `[0, end)` of that store must be in the WAL.
    pub end: usize,
    /// Written with the outcome of the append that covers `end` (`None` for triggers).
    pub completion: Option<PutCompletion>,
    /// The completion is a durable put's (counted in the write statistics), not a freeze's.
    pub from_put: bool,
}

/// Messages to the handler.
#[derive(Debug)]
pub enum WalMsg {
    /// MemTable mode: make a store prefix durable.
    Flush(FlushRequest),
    /// WAL-only mode: make lifetime positions `[0, end)` durable.
    FlushWalOnly {
        end: u64,
        completion: Option<PutCompletion>,
    },
    /// Make everything committed so far durable (tick, `flush()`, `close()`).
    FlushAll { completion: Option<PutCompletion> },
    /// Stop after handling everything queued before this message.
    Shutdown,
}

enum Covers {
    Store(Arc<MemTable>, usize),
    WalOnly(u64),
    All,
}

struct Waiter {
    covers: Covers,
    completion: PutCompletion,
    /// A durable put's completion (counted in statistics).
    from_put: bool,
}

const MAX_DRAIN: usize = 4096;

/// See the module docs.
pub(crate) struct WalFlushHandler {
    inner: Arc<WriterInner>,
    appender: WalAppender,
    rx: mpsc::UnboundedReceiver<WalMsg>,
}

impl WalFlushHandler {
    pub fn new(
        inner: Arc<WriterInner>,
        appender: WalAppender,
        rx: mpsc::UnboundedReceiver<WalMsg>,
    ) -> Self {
        WalFlushHandler {
            inner,
            appender,
            rx,
        }
    }

    pub async fn run(mut self) {
        let mut ticker = self.inner.config.max_wal_flush_interval_ms.map(|ms| {
            let period = Duration::from_millis(ms);
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
                        return;
                    }
                }
                _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                    msgs.push(WalMsg::FlushAll { completion: None });
                }
            }
            let stop = self.handle(std::mem::take(&mut msgs)).await;
            if stop {
                return;
            }
        }
    }

    /// Handles one drained batch of messages. Returns true on `Shutdown`.
    async fn handle(&mut self, msgs: Vec<WalMsg>) -> bool {
        let mut stores: Vec<(Arc<MemTable>, usize)> = Vec::new();
        let mut wal_only_end: u64 = 0;
        let mut waiters: Vec<Waiter> = Vec::new();
        let mut stop = false;
        let want =
            |stores: &mut Vec<(Arc<MemTable>, usize)>, m: &Arc<MemTable>, end: usize| match stores
                .iter_mut()
                .find(|(s, _)| Arc::ptr_eq(s, m))
            {
                Some((_, e)) => *e = (*e).max(end),
                None => stores.push((m.clone(), end)),
            };
        for msg in msgs {
            match msg {
                WalMsg::Flush(r) => {
                    want(&mut stores, &r.memtable, r.end);
                    if let Some(completion) = r.completion {
                        waiters.push(Waiter {
                            covers: Covers::Store(r.memtable, r.end),
                            completion,
                            from_put: r.from_put,
                        });
                    }
                }
                WalMsg::FlushWalOnly { end, completion } => {
                    wal_only_end = wal_only_end.max(end);
                    if let Some(completion) = completion {
                        waiters.push(Waiter {
                            covers: Covers::WalOnly(end),
                            completion,
                            from_put: true,
                        });
                    }
                }
                WalMsg::FlushAll { completion } => {
                    let st = self.inner.lock();
                    match &st.mode {
                        Mode::MemTable(mt) => {
                            for m in mt.frozen.iter().chain(std::iter::once(&mt.active)) {
                                want(&mut stores, m, m.store().len());
                            }
                        }
                        Mode::WalOnly(wo) => wal_only_end = wal_only_end.max(wo.next_position()),
                    }
                    drop(st);
                    if let Some(completion) = completion {
                        waiters.push(Waiter {
                            covers: Covers::All,
                            completion,
                            from_put: false,
                        });
                    }
                }
                WalMsg::Shutdown => stop = true,
            }
        }
        let outcome = match self.inner.latch.check() {
            Err(e) => Err(e),
            Ok(()) => self.append_all(stores, wal_only_end).await,
        };
        for w in waiters {
            let result = match (&outcome, w.covers) {
                (Ok(()), _) => Ok(()),
                (Err(_), Covers::Store(m, end)) if m.store().wal_appended_len() >= end => Ok(()),
                (Err(_), Covers::WalOnly(end)) if self.wal_only_appended() >= end => Ok(()),
                (Err(e), _) => Err(e.clone()),
            };
            if w.from_put {
                self.inner.stats.record_durable_request();
            }
            w.completion.complete(result);
        }
        stop
    }

    fn wal_only_appended(&self) -> u64 {
        match &self.inner.lock().mode {
            Mode::WalOnly(wo) => wo.appended,
            Mode::MemTable(_) => 0,
        }
    }

    /// Appends every planned store (oldest generation first), then the WAL-only queue.
    /// The first failure poisons the writer and stops the rest.
    async fn append_all(
        &mut self,
        mut stores: Vec<(Arc<MemTable>, usize)>,
        wal_only_end: u64,
    ) -> Result<()> {
        stores.sort_by_key(|(m, _)| m.generation());
        for (memtable, end) in stores {
            let store = memtable.store();
            let start = store.wal_appended_len();
            let committed = store.len();
            if end > committed {
                // Reference §2.6 (post-#7888): never append a short range and then report the
                // whole of it durable; a request past the committed length is a broken
                // invariant, and this writer can no longer vouch for its WAL.
                return Err(self.inner.poison(Error::persistence_failure(
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
            let batches = store.batches(crate::batch_store::BatchRange { start, end });
            let position = self.append(&batches).await?;
            store.mark_wal_appended(end, position);
            // The bug: a generation-local end published to a writer-wide watermark.
            #[cfg(feature = "legacy-watermark-bug")]
            self.inner.legacy_watermark.send_replace(end);
        }
        if wal_only_end > 0 {
            self.append_wal_only(wal_only_end).await?;
        }
        Ok(())
    }

    async fn append(&mut self, batches: &[arrow_array::RecordBatch]) -> Result<u64> {
        let started = Instant::now();
        match self.appender.append(batches).await {
            Ok(entry) => {
                self.inner.stats.record_wal_flush(
                    entry.bytes as u64,
                    entry.num_batches as u64,
                    started.elapsed(),
                );
                self.inner
                    .record_next_wal_position(self.appender.next_position());
                Ok(entry.position)
            }
            Err(e) => Err(self.inner.poison(e)),
        }
    }

    /// WAL-only: appends a snapshot of the whole pending queue (at least up to `end`) as one
    /// entry, then removes exactly that snapshot. On failure the queue is left as it was
    /// (reference §6: a destructive drain could let a concurrent durable put see an empty
    /// queue and spuriously succeed).
    async fn append_wal_only(&mut self, end: u64) -> Result<()> {
        let (batches, snapshot_end) = {
            let st = self.inner.lock();
            let Mode::WalOnly(wo) = &st.mode else {
                return Err(Error::invalid("WAL-only flush on a MemTable-mode writer"));
            };
            if wo.appended >= end {
                return Ok(());
            }
            let batches: Vec<_> = wo.pending.iter().map(|(b, _)| b.clone()).collect();
            (batches, wo.next_position())
        };
        if batches.is_empty() {
            return Ok(());
        }
        self.append(&batches).await?;
        {
            let mut st = self.inner.lock();
            if let Mode::WalOnly(wo) = &mut st.mode {
                for _ in 0..batches.len() {
                    if let Some((_, bytes)) = wo.pending.pop_front() {
                        wo.pending_bytes -= bytes;
                    }
                }
                wo.appended = snapshot_end;
                // The size trigger counts from the last drain. Detecting the drain from the
                // queue size alone misses it when a put refills the queue to the old size,
                // and the trigger then stays silent for a whole buffer.
                wo.size_baseline = 0;
            }
        }
        self.inner.bump_progress();
        Ok(())
    }
}
