//! `MemTable`: one generation's [`BatchStore`] plus its generation number.
//!
//! The *active* MemTable takes puts. When it reaches `max_memtable_size` bytes or its store is
//! full (or on `force_seal_active`/`close`), the writer *freezes* it: a MemTable with
//! generation + 1 replaces it, and the frozen one is queued for the WAL and then for a
//! generation flush. Batch positions are local to the generation: every MemTable starts at 0.

use arrow_array::RecordBatch;

use crate::batch_store::{BatchRange, BatchStore, StoreFull};

/// See the module docs. Shared as `Arc<MemTable>`; identity (`Arc::ptr_eq`) is what ties a
/// durable put to the exact store that accepted it.
#[derive(Debug)]
pub struct MemTable {
    generation: u64,
    store: BatchStore,
}

impl MemTable {
    /// An empty MemTable of `generation` with room for `capacity` batches.
    pub fn new(generation: u64, capacity: usize) -> Self {
        MemTable {
            generation,
            store: BatchStore::new(capacity),
        }
    }

    /// The generation this MemTable's rows will be flushed as.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The batches.
    pub fn store(&self) -> &BatchStore {
        &self.store
    }

    /// Appends atomically; see [`BatchStore::append`].
    pub fn insert(&self, batches: &[RecordBatch]) -> Result<BatchRange, StoreFull> {
        self.store.append(batches)
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int32Array;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        RecordBatch::try_new(
            schema,
            vec![Arc::new(Int32Array::from_iter_values(0..rows as i32))],
        )
        .unwrap()
    }

    // Reference §8.5 scenarios 85-88.
    #[test]
    fn inserts_count_rows_and_freeze_when_full() {
        let m = MemTable::new(1, 3);
        assert_eq!(m.insert(&[batch(10)]).unwrap().start, 0);
        assert_eq!(m.insert(&[batch(10)]).unwrap().start, 1);
        assert!(!m.should_freeze(u64::MAX));
        assert_eq!(m.insert(&[batch(10)]).unwrap().start, 2);
        assert_eq!(m.store().total_rows(), 30);
        assert!(m.should_freeze(u64::MAX));
        assert!(m.insert(&[batch(10)]).is_err());
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
        let used = m.store().estimated_bytes();
        assert!(m.would_overflow(1, 1, used));
        assert!(!m.would_overflow(1, 1, used + 1));
    }
}
