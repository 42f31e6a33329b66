//! [`RequestIndex`]: the request ids a writer remembers, and for how long.
//!
//! # The window
//! A put's request id is remembered (so a retry with it writes nothing and gets the first
//! result) while **either** holds:
//! - (a) its rows are not yet in a flushed generation: they are in a MemTable this writer
//!   holds (active or frozen), put by this writer or replayed from the WAL on open (the WAL
//!   entry carries the id, so a reopen or a failover brings it back);
//! - (b) less than `request_id_retention_ms` has passed since the put was accepted
//!   ([`PutRecord::put_at_ms`]). After a generation flush the ids live on in the generation's
//!   `request_ids.json`, which the next writer reads on open for every generation flushed
//!   within the window ([`crate::manifest::FlushedGeneration::request_ids_newest_ms`]).
//!
//! In WAL-only mode there are no generations and no replay: ids are remembered by this writer
//! only, for the retention time and in any case until the put is durable.
//!
//! Time is the writer's clock ([`WallClock`]): Unix milliseconds read once at open, advanced
//! by tokio's clock (so tests can pause it). Ids loaded from another writer's records count
//! from that writer's clock; skew between machines shifts the window by as much.
//!
//! # Memory
//! Every remembered id costs about 200 bytes plus its length, held under the writer's state
//! lock; the index is swept on puts and generation commits, so an id leaves memory soon after
//! its window ends.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::time::Instant;

use crate::memtable::MemTable;
use crate::request_id::{PutRecord, RequestId};
use crate::writer::WriteResult;

/// Unix milliseconds that advance with tokio's clock. See the module docs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallClock {
    wall_ms: u64,
    at: Instant,
}

impl WallClock {
    /// The clock, anchored at the system time now.
    pub fn new() -> Self {
        let wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        WallClock {
            wall_ms,
            at: Instant::now(),
        }
    }

    /// Milliseconds since the Unix epoch, now.
    pub fn now_ms(&self) -> u64 {
        self.wall_ms + self.at.elapsed().as_millis() as u64
    }
}

/// Where a remembered put's rows are, which decides whether they are durable.
#[derive(Debug, Clone)]
pub(crate) enum Rows {
    /// In a MemTable this writer holds (put by this writer, or replayed). Durable once that
    /// MemTable's reported WAL progress covers batches `[0, end)`; replayed ones are from the
    /// start.
    Held { memtable: Arc<MemTable>, end: usize },
    /// WAL-only mode: durable once writer-lifetime positions `[0, end)` are appended.
    WalOnly { end: u64 },
    /// In a committed generation: durable.
    Flushed,
}

/// A remembered put.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    /// What the first put returned.
    pub result: WriteResult,
    /// Where its rows are.
    pub rows: Rows,
    /// How many rows it wrote, if this writer took it (ids loaded on open have none, see
    /// [`RequestIndex::insert`]). A retry with another count is logged.
    pub row_count: Option<u64>,
    /// When window (b) ends, in Unix milliseconds.
    expires_at_ms: u64,
}

/// See the module docs. Lives in the writer's state, under its lock.
#[derive(Debug)]
pub(crate) struct RequestIndex {
    clock: WallClock,
    retention_ms: u64,
    known: HashMap<RequestId, Known>,
    /// `(expires_at_ms, id)`, roughly in expiry order (this writer's puts in order; ids loaded
    /// on open sorted before them). Entries whose put was replaced are skipped when popped.
    expiry: VecDeque<(u64, RequestId)>,
}

impl RequestIndex {
    pub fn new(clock: WallClock, retention_ms: u64) -> Self {
        RequestIndex {
            clock,
            retention_ms,
            known: HashMap::new(),
            expiry: VecDeque::new(),
        }
    }

    /// The writer's clock, in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Whether window (b) of a put accepted at `put_at_ms` is still open.
    pub fn retained(&self, put_at_ms: u64) -> bool {
        put_at_ms.saturating_add(self.retention_ms) > self.now_ms()
    }

    /// Remembers `record`, whose rows are at `rows`, without a row count (ids loaded on open,
    /// whose records hold batch positions, not row counts). A later record of the same id
    /// replaces an earlier one (only possible once the earlier one's window ended, or when
    /// loading records oldest first).
    pub fn insert(&mut self, record: &PutRecord, rows: Rows) {
        self.insert_counted(record, rows, None);
    }

    /// [`RequestIndex::insert`] for a put of `row_count` rows that this writer takes.
    pub fn insert_counted(&mut self, record: &PutRecord, rows: Rows, row_count: Option<u64>) {
        let expires_at_ms = record.put_at_ms.saturating_add(self.retention_ms);
        self.known.insert(
            record.id.clone(),
            Known {
                result: record.result,
                rows,
                row_count,
                expires_at_ms,
            },
        );
        self.expiry.push_back((expires_at_ms, record.id.clone()));
    }

    /// Puts the expiry queue in order after loading records on open.
    pub fn sort_expiry(&mut self) {
        self.expiry.make_contiguous().sort();
    }

    /// The remembered put of `id`, if its window is open. `wal_only_appended` is how far the
    /// WAL-only queue is appended (0 in MemTable mode).
    pub fn get(&mut self, id: &RequestId, wal_only_appended: u64) -> Option<&Known> {
        let now = self.now_ms();
        let k = self.known.get(id)?;
        if k.expires_at_ms <= now && removable(k, wal_only_appended) {
            self.known.remove(id);
            return None;
        }
        self.known.get(id)
    }

    /// The rows of `memtable` are in a committed generation: its remembered puts are durable
    /// and leave window (a); those past window (b) are forgotten now.
    pub fn flushed(&mut self, memtable: &Arc<MemTable>) {
        if self.known.is_empty() {
            return;
        }
        let now = self.now_ms();
        let batch_store = memtable.batch_store();
        let all = crate::batch_store::BatchRange {
            start: 0,
            end: batch_store.len(),
        };
        for record in batch_store.requests(all) {
            let Some(k) = self.known.get_mut(&record.id) else {
                continue;
            };
            if !matches!(&k.rows, Rows::Held { memtable: m, .. } if Arc::ptr_eq(m, memtable)) {
                continue;
            }
            if k.expires_at_ms <= now {
                self.known.remove(&record.id);
            } else {
                k.rows = Rows::Flushed;
            }
        }
    }

    /// Forgets the puts whose window ended. Cheap when nothing is due: one comparison.
    pub fn sweep(&mut self, wal_only_appended: u64) {
        if self.expiry.is_empty() {
            return;
        }
        let now = self.now_ms();
        while let Some((expires_at_ms, id)) = self.expiry.front() {
            if *expires_at_ms > now {
                return;
            }
            match self.known.get(id) {
                Some(k) if k.expires_at_ms == *expires_at_ms => {
                    if removable(k, wal_only_appended) {
                        self.known.remove(id);
                    } else if let Rows::WalOnly { .. } = k.rows {
                        // Still in flight: keep it (and what follows) until its append.
                        return;
                    }
                    // Held: window (a) keeps it; `flushed` forgets it at its generation commit.
                }
                // Replaced by a later put of the same id, or already forgotten.
                _ => {}
            }
            self.expiry.pop_front();
        }
    }

    /// How many puts are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.known.len()
    }
}

/// Whether a put past window (b) may be forgotten: its rows are flushed (window (a) is over)
/// or, in WAL-only mode, durable.
fn removable(k: &Known, wal_only_appended: u64) -> bool {
    match k.rows {
        Rows::Flushed => true,
        Rows::WalOnly { end } => end <= wal_only_appended,
        Rows::Held { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::batch_store::tests::batch;
    use crate::batch_store::{BatchRange, SizedBatch};

    fn record(id: &str, put_at_ms: u64, start: usize) -> PutRecord {
        PutRecord {
            id: RequestId::new(id).unwrap(),
            result: WriteResult {
                generation: Some(1),
                batch_positions: BatchRange {
                    start,
                    end: start + 1,
                },
            },
            put_at_ms,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_flushed_put_is_forgotten_when_its_retention_ends() {
        let mut index = RequestIndex::new(WallClock::new(), 1_000);
        let r = record("a", index.now_ms(), 0);
        index.insert(&r, Rows::Flushed);
        tokio::time::advance(Duration::from_millis(999)).await;
        index.sweep(0);
        assert_eq!(index.get(&r.id, 0).unwrap().result, r.result);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(index.get(&r.id, 0).is_none());
        index.sweep(0);
        assert_eq!(index.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_put_is_kept_past_its_retention_until_its_generation_commits() {
        let mut index = RequestIndex::new(WallClock::new(), 0);
        let memtable = Arc::new(MemTable::new(1, 4));
        let r = record("a", index.now_ms(), 0);
        memtable
            .insert_with(vec![SizedBatch::new(batch(1))], vec![r.clone()])
            .unwrap();
        index.insert(
            &r,
            Rows::Held {
                memtable: memtable.clone(),
                end: 1,
            },
        );
        tokio::time::advance(Duration::from_secs(3600)).await;
        index.sweep(0);
        assert!(index.get(&r.id, 0).is_some(), "window (a)");
        index.flushed(&memtable);
        assert!(index.get(&r.id, 0).is_none());
        assert_eq!(index.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wal_only_put_is_kept_until_it_is_appended() {
        let mut index = RequestIndex::new(WallClock::new(), 0);
        let r = record("a", index.now_ms(), 0);
        index.insert(&r, Rows::WalOnly { end: 1 });
        tokio::time::advance(Duration::from_millis(1)).await;
        index.sweep(0);
        assert!(index.get(&r.id, 0).is_some(), "in flight");
        index.sweep(1);
        assert_eq!(index.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_put_again_after_its_window_is_remembered_with_its_new_result() {
        let mut index = RequestIndex::new(WallClock::new(), 10);
        let first = record("a", index.now_ms(), 0);
        index.insert(&first, Rows::Flushed);
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(index.get(&first.id, 0).is_none());
        let again = record("a", index.now_ms(), 5);
        index.insert(&again, Rows::Flushed);
        index.sweep(0);
        assert_eq!(index.get(&again.id, 0).unwrap().result, again.result);
        tokio::time::advance(Duration::from_millis(10)).await;
        index.sweep(0);
        assert_eq!(index.len(), 0);
    }
}
