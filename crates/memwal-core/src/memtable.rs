//! `MemTable`: one generation's [`BatchStore`] plus its generation number.
//!
//! The *active* MemTable takes puts. When it reaches `max_memtable_size` bytes or its store is
//! full (or on `force_seal_active`/`close`), the writer *freezes* it: a MemTable with
//! generation + 1 replaces it, and the frozen one is queued for the WAL and then for a
//! generation flush. Batch positions are local to the generation: every MemTable starts at 0.

use arrow_array::RecordBatch;

use crate::batch_store::{BatchRange, BatchStore, SizedBatch, StoreFull};
use crate::request_id::PutRecord;
use crate::wal::WalPosition;

/// See the module docs. Shared as `Arc<MemTable>`; identity (`Arc::ptr_eq`) is what ties a
/// durable put to the exact store that accepted it.
#[derive(Debug)]
pub struct MemTable {
    generation: u64,
    store: BatchStore,
    /// When the first batch went in: the age that `max_memtable_age_ms` bounds.
    first_insert: std::sync::OnceLock<tokio::time::Instant>,
}

impl MemTable {
    /// An empty MemTable of `generation` with room for `capacity` batches.
    pub fn new(generation: u64, capacity: usize) -> Self {
        MemTable {
            generation,
            store: BatchStore::new(capacity),
            first_insert: std::sync::OnceLock::new(),
        }
    }

    /// The generation this MemTable's rows will be flushed as.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Its [`BatchStore`]: the batches, at generation-local positions.
    pub fn batch_store(&self) -> &BatchStore {
        &self.store
    }

    /// Its [`BatchStore`] (the name of [`MemTable::batch_store`] before "store" was kept for the
    /// object store only).
    #[deprecated(note = "use `batch_store`: `store` names the object store")]
    pub fn store(&self) -> &BatchStore {
        self.batch_store()
    }

    /// Appends atomically; see [`BatchStore::append`].
    pub fn insert(&self, batches: &[RecordBatch]) -> Result<BatchRange, StoreFull> {
        let range = self.store.append(batches)?;
        self.first_insert.get_or_init(tokio::time::Instant::now);
        Ok(range)
    }

    /// Appends atomically, keeping `requests` with the last batch; see
    /// [`BatchStore::append_with`].
    pub fn insert_with(
        &self,
        batches: Vec<SizedBatch>,
        requests: Vec<PutRecord>,
    ) -> Result<BatchRange, StoreFull> {
        let range = self.store.append_with(batches, requests)?;
        self.first_insert.get_or_init(tokio::time::Instant::now);
        Ok(range)
    }

    /// When the first batch went in (`None` while empty).
    pub fn first_insert(&self) -> Option<tokio::time::Instant> {
        self.first_insert.get().copied()
    }

    /// Whether adding `batches` more batches of `bytes` bytes should freeze this MemTable
    /// first: they would not fit in its store, or (when it already holds rows) they would push
    /// it past `max_size` bytes.
    pub fn would_overflow(&self, batches: usize, bytes: u64, max_size: u64) -> bool {
        batches > self.store.remaining()
            || (!self.store.is_empty() && self.store.estimated_bytes() + bytes > max_size)
    }

    /// Whether this MemTable has reached its size or batch limit and should be frozen.
    pub fn should_freeze(&self, max_size: u64) -> bool {
        self.store.is_full() || self.store.estimated_bytes() >= max_size
    }
}

/// How much of one MemTable's store is in the WAL: batches `[0, appended)`, the last of them in
/// the entry at `last_position`. It only moves forward.
///
/// The WAL flush handler keeps the copy it appends from and reports every change to the writer,
/// which keeps the copy that durable scans and statistics read (see [`crate::flush`]). Replay
/// starts both from the entries it read back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalProgress {
    /// Batches `[0, appended)` of the store are inside persisted WAL entries.
    pub appended: usize,
    /// The highest WAL position holding any batch of the store; `None` before the first.
    pub last_position: Option<WalPosition>,
}

impl WalProgress {
    /// Records that batches `[0, end)` are persisted, the last of them in the entry at
    /// `position`.
    pub fn advance(&mut self, end: usize, position: WalPosition) {
        debug_assert!(end >= self.appended, "WAL progress went backwards");
        self.appended = self.appended.max(end);
        self.last_position = self.last_position.max(Some(position));
    }

    /// The batches of a store holding `committed` batches that are not in the WAL yet.
    pub fn pending(&self, committed: usize) -> BatchRange {
        BatchRange {
            start: self.appended.min(committed),
            end: committed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_store::tests::batch;

    // Inserts take consecutive batch positions and count their rows; a full MemTable asks to be
    // frozen and takes no more.
    #[test]
    fn inserts_count_rows_and_freeze_when_full() {
        let m = MemTable::new(1, 3);
        assert_eq!(m.insert(&[batch(10)]).unwrap().start, 0);
        assert_eq!(m.insert(&[batch(10)]).unwrap().start, 1);
        assert!(!m.should_freeze(u64::MAX));
        assert_eq!(m.insert(&[batch(10)]).unwrap().start, 2);
        assert_eq!(m.batch_store().total_rows(), 30);
        assert!(m.should_freeze(u64::MAX));
        assert!(m.insert(&[batch(10)]).is_err());
    }

    // WAL progress: what is pending is the range after the last appended batch.
    #[test]
    fn wal_progress_tracks_the_pending_range() {
        let mut p = WalProgress::default();
        assert_eq!(p.pending(3), BatchRange { start: 0, end: 3 });
        p.advance(2, WalPosition::new(7).unwrap());
        assert_eq!(p.pending(3), BatchRange { start: 2, end: 3 });
        assert_eq!(p.last_position, WalPosition::new(7));
        p.advance(3, WalPosition::new(9).unwrap());
        assert!(p.pending(3).is_empty());
        assert_eq!(p.last_position, WalPosition::new(9));
    }

    #[test]
    fn overflow_check_freezes_before_a_put_that_does_not_fit() {
        let m = MemTable::new(1, 4);
        assert!(
            !m.would_overflow(4, 1 << 40, 10),
            "an empty MemTable takes any byte size"
        );
        assert!(m.would_overflow(5, 1, u64::MAX));
        m.insert(&[batch(10)]).unwrap();
        let used = m.batch_store().estimated_bytes();
        assert!(m.would_overflow(1, 1, used));
        assert!(!m.would_overflow(1, 1, used + 1));
    }
}
