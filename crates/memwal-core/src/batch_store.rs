//! `BatchStore`: a fixed-capacity, append-only array of Arrow record batches.
//!
//! One writer appends (callers serialise appends under the writer's state lock; an internal
//! mutex makes a second concurrent appender wait rather than corrupt anything), and any number
//! of readers read without locks. Capacity is fixed at creation, so nothing is ever
//! reallocated: the MemTable freezes when its store is full.
//!
//! Slots are allocated as batches arrive, in segments that double in size (32, 64, 128, …
//! slots), so a store costs memory for the batches it holds, not for its capacity: at the
//! largest allowed capacity (2^24) pre-allocating every slot took over a gigabyte per MemTable.
//! A segment never moves once allocated, which is what lets readers hold `&StoredBatch`
//! without a lock; doubling keeps the segment table a fixed 20 entries and the unused tail
//! under half of the allocated slots.
//!
//! # Field rules
//! - `segments[k]` is set once, by the appender, before `committed_len` covers any of its
//!   slots; it is never changed or removed until the store is dropped.
//! - each slot is written once, by the appender, before `committed_len` covers it; it is never
//!   changed or removed until the store is dropped.
//! - `committed_len` is set by the appender with `Release` and loaded by readers with `Acquire`;
//!   it never decreases, and a multi-batch append publishes all its batches at once (readers see
//!   none or all of them).
//!
//! How much of a store is in the WAL is not the store's business: see
//! [`crate::memtable::WalProgress`].
//!
//! A slot also holds the [`PutRecord`]s of the puts whose last batch it is (puts with a request
//! id), written with the batch and published with it, so whoever reads a range of batches (the
//! WAL flush handler, the generation flusher) reads exactly the records of the puts in it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use arrow_array::cast::AsArray;
use arrow_array::{Array, OffsetSizeTrait, RecordBatch};
use arrow_data::ArrayData;
use arrow_schema::DataType;

use crate::config::MAX_MEMTABLE_BATCHES_LIMIT;
use crate::request_id::PutRecord;
pub use crate::write_result::BatchRange;

/// One batch in a store, with its cumulative offsets.
#[derive(Debug, Clone)]
pub struct StoredBatch {
    /// The batch, with the shard's schema.
    pub batch: RecordBatch,
    /// Rows in all earlier batches of this store.
    pub rows_before: u64,
    /// Estimated bytes of all earlier batches of this store.
    pub bytes_before: u64,
    /// This batch's estimated in-memory size (slice-aware).
    pub estimated_bytes: u64,
    /// The records of the puts with a request id whose last batch this is (empty for most).
    pub requests: Vec<PutRecord>,
    /// Appends (puts) that ended at or before this batch in this store.
    pub puts_through: u64,
}

/// A batch with its [`estimated_batch_bytes`], measured once: by a put before it takes the
/// writer's lock, then kept in the batch's slot.
#[derive(Debug, Clone)]
pub struct SizedBatch {
    /// The batch.
    pub batch: RecordBatch,
    /// Its estimated in-memory size.
    pub estimated_bytes: u64,
}

impl SizedBatch {
    /// `batch`, measured.
    pub fn new(batch: RecordBatch) -> SizedBatch {
        SizedBatch {
            estimated_bytes: estimated_batch_bytes(&batch),
            batch,
        }
    }
}

/// The append would exceed the store's capacity; nothing was appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreFull {
    /// Batches the append needed.
    pub needed: usize,
    /// Free slots left.
    pub remaining: usize,
}

/// Heap bytes a buffer costs besides its data: the shared `Bytes` header behind its `Arc`, the
/// allocator's chunk header and, for a buffer of its own, the rounding of its capacity to 64
/// bytes (measured in `tests/memory.rs` against glibc's malloc; the Node addon allocates with
/// mimalloc, which has no chunk headers, so there this errs high).
const BUFFER_OVERHEAD: u64 = 160;
/// Heap bytes a batch costs besides its arrays: the `Vec` of column handles and its slot.
const BATCH_OVERHEAD: u64 = 64;

/// Estimated memory of a batch, counting only the window of each buffer a slice holds (so a
/// zero-copy slice of a large batch does not trip the size trigger early), plus the fixed cost
/// of every array and buffer. That fixed cost dominates small batches: a 1-row batch of three
/// columns holds about 100 bytes of data in about 1.3 KiB of heap, and without it a MemTable of
/// 1-row puts would hold ten times `max_memtable_size`.
pub fn estimated_batch_bytes(batch: &RecordBatch) -> u64 {
    BATCH_OVERHEAD
        + batch
            .columns()
            .iter()
            .map(|c| {
                let (window, buffers) = flat_window(c.as_ref()).unwrap_or_else(|| {
                    let data = c.to_data();
                    let window = data
                        .get_slice_memory_size()
                        .unwrap_or_else(|_| c.get_array_memory_size());
                    (window, data_buffers(&data))
                });
                // The array structs (the typed array behind its `Arc`, and its children's).
                let structs = c
                    .get_array_memory_size()
                    .saturating_sub(c.get_buffer_memory_size());
                (window + structs) as u64 + buffers as u64 * BUFFER_OVERHEAD
            })
            .sum::<u64>()
}

/// Buffers of `data` and its children, the null buffers included.
fn data_buffers(data: &ArrayData) -> usize {
    let own = data.buffers().len() + usize::from(data.nulls().is_some());
    own + data.child_data().iter().map(data_buffers).sum::<usize>()
}

/// For an array without children (numbers, times, booleans, strings, binaries): its window's
/// bytes and its buffers, exactly what `ArrayData::get_slice_memory_size` and
/// [`data_buffers`] give, read off the typed array. Building the `ArrayData` clones the type
/// and every buffer handle, which was most of the estimate of a put's small batch, and every
/// put is estimated. `None` for other arrays.
fn flat_window(c: &dyn Array) -> Option<(usize, usize)> {
    fn var_width<O: OffsetSizeTrait>(offsets: &[O], len: usize) -> usize {
        let window = offsets[len].as_usize() - offsets[0].as_usize();
        // `len + 1` offsets: one boundary per value and the end of the last one.
        (len + 1) * size_of::<O>() + window
    }
    let len = c.len();
    let (bytes, buffers) = match c.data_type() {
        DataType::Boolean => (len.div_ceil(8), 1),
        DataType::Utf8 => (var_width(c.as_string::<i32>().value_offsets(), len), 2),
        DataType::LargeUtf8 => (var_width(c.as_string::<i64>().value_offsets(), len), 2),
        DataType::Binary => (var_width(c.as_binary::<i32>().value_offsets(), len), 2),
        DataType::LargeBinary => (var_width(c.as_binary::<i64>().value_offsets(), len), 2),
        other => (len * other.primitive_width()?, 1),
    };
    // `ArrayData` drops a null buffer that holds no null (a slice of valid values).
    Some(match c.nulls().filter(|n| n.null_count() > 0) {
        Some(_) => (bytes + len.div_ceil(8), buffers + 1),
        None => (bytes, buffers),
    })
}

/// Slots in the first segment; segment `k` holds `FIRST_SEGMENT << k`.
const FIRST_SEGMENT: usize = 32;
/// Segments needed for the largest capacity the configuration allows.
const SEGMENTS: usize =
    (usize::BITS - (MAX_MEMTABLE_BATCHES_LIMIT / FIRST_SEGMENT).leading_zeros()) as usize;

/// A store's slots: a segment is allocated when the first batch for it arrives.
type Segment = Box<[OnceLock<StoredBatch>]>;

/// The segment holding `position`, and the position's index in it.
fn locate(position: usize) -> (usize, usize) {
    let shifted = position + FIRST_SEGMENT;
    let segment = (usize::BITS - 1 - shifted.leading_zeros()) as usize
        - FIRST_SEGMENT.trailing_zeros() as usize;
    (segment, shifted - (FIRST_SEGMENT << segment))
}

/// The first position of `segment`.
fn segment_start(segment: usize) -> usize {
    (FIRST_SEGMENT << segment) - FIRST_SEGMENT
}

/// See the module docs.
pub struct BatchStore {
    capacity: usize,
    segments: [OnceLock<Segment>; SEGMENTS],
    committed_len: AtomicUsize,
    append_lock: Mutex<()>,
}

impl std::fmt::Debug for BatchStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchStore")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

impl BatchStore {
    /// A store with room for `capacity` batches.
    ///
    /// Allocates no slot yet: see the module docs.
    ///
    /// # Panics
    /// If `capacity` is 0 or above [`MAX_MEMTABLE_BATCHES_LIMIT`] (configuration validation
    /// rejects both earlier).
    pub fn new(capacity: usize) -> Self {
        assert!(
            capacity > 0 && capacity <= MAX_MEMTABLE_BATCHES_LIMIT,
            "BatchStore capacity must be between 1 and {MAX_MEMTABLE_BATCHES_LIMIT}, got {capacity}"
        );
        BatchStore {
            capacity,
            segments: std::array::from_fn(|_| OnceLock::new()),
            committed_len: AtomicUsize::new(0),
            append_lock: Mutex::new(()),
        }
    }

    /// Maximum number of batches.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Slots allocated so far: at least [`BatchStore::len`], less than twice it plus the first
    /// segment, and never more than the capacity. What the store's slot table costs in memory
    /// (about 100 bytes a slot) is this, not the capacity.
    pub fn allocated_slots(&self) -> usize {
        self.segments
            .iter()
            .filter_map(OnceLock::get)
            .map(|s| s.len())
            .sum()
    }

    /// The slot at `position` (below the capacity), allocating its segment if it has none.
    /// Only the appender calls this, under `append_lock`.
    fn slot_for_append(&self, position: usize) -> &OnceLock<StoredBatch> {
        let (segment, index) = locate(position);
        let slots = self.segments[segment].get_or_init(|| {
            // The last segment stops at the capacity.
            let len = (FIRST_SEGMENT << segment).min(self.capacity - segment_start(segment));
            (0..len).map(|_| OnceLock::new()).collect()
        });
        &slots[index]
    }

    /// The slot at `position`, if its segment is allocated.
    fn slot(&self, position: usize) -> Option<&OnceLock<StoredBatch>> {
        let (segment, index) = locate(position);
        self.segments.get(segment)?.get()?.get(index)
    }

    /// Number of committed batches (what readers may see).
    pub fn len(&self) -> usize {
        self.committed_len.load(Ordering::Acquire)
    }

    /// True if no batch is committed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free slots.
    pub fn remaining(&self) -> usize {
        self.capacity() - self.len()
    }

    /// True when no slot is free.
    pub fn is_full(&self) -> bool {
        self.remaining() == 0
    }

    /// Appends `batches` atomically: all of them become visible at once, or none is appended.
    /// An empty list is a no-op returning an empty range at the current end.
    pub fn append(&self, batches: &[RecordBatch]) -> Result<BatchRange, StoreFull> {
        let sized = batches.iter().cloned().map(SizedBatch::new).collect();
        self.append_with(sized, Vec::new())
    }

    /// As [`BatchStore::append`], with `requests` kept in the last batch's slot (published
    /// with it). `requests` must be empty if `batches` is.
    pub fn append_with(
        &self,
        batches: Vec<SizedBatch>,
        mut requests: Vec<PutRecord>,
    ) -> Result<BatchRange, StoreFull> {
        debug_assert!(!batches.is_empty() || requests.is_empty());
        let _guard = self.append_lock.lock().unwrap_or_else(|e| e.into_inner());
        let start = self.committed_len.load(Ordering::Acquire);
        let remaining = self.capacity() - start;
        if batches.len() > remaining {
            return Err(StoreFull {
                needed: batches.len(),
                remaining,
            });
        }
        let (mut rows, mut bytes, puts) = match start.checked_sub(1).and_then(|i| self.get(i)) {
            Some(prev) => (
                prev.rows_before + prev.batch.num_rows() as u64,
                prev.bytes_before + prev.estimated_bytes,
                prev.puts_through,
            ),
            None => (0, 0, 0),
        };
        let count = batches.len();
        for (i, sized) in batches.into_iter().enumerate() {
            let SizedBatch {
                batch,
                estimated_bytes,
            } = sized;
            let last = i + 1 == count;
            let batch_rows = batch.num_rows() as u64;
            let stored = StoredBatch {
                batch,
                rows_before: rows,
                bytes_before: bytes,
                estimated_bytes,
                requests: if last {
                    std::mem::take(&mut requests)
                } else {
                    Vec::new()
                },
                puts_through: puts + u64::from(last),
            };
            rows += batch_rows;
            bytes += estimated_bytes;
            if self.slot_for_append(start + i).set(stored).is_err() {
                unreachable!("BatchStore slot {} written twice", start + i);
            }
        }
        let end = start + count;
        self.committed_len.store(end, Ordering::Release);
        Ok(BatchRange { start, end })
    }

    /// The batch at `position`, if committed.
    pub fn get(&self, position: usize) -> Option<&StoredBatch> {
        if position < self.len() {
            // `committed_len` (Acquire) covers `position`, so its segment and slot were set
            // before it was published.
            self.slot(position)?.get()
        } else {
            None
        }
    }

    /// Clones of the batches in `range` (which must be committed).
    pub fn batches(&self, range: BatchRange) -> Vec<RecordBatch> {
        (range.start..range.end)
            .filter_map(|i| self.get(i).map(|s| s.batch.clone()))
            .collect()
    }

    /// The request-id records of the puts whose last batch is in `range` (which must be
    /// committed), in insertion order.
    pub fn requests(&self, range: BatchRange) -> Vec<PutRecord> {
        (range.start..range.end)
            .filter_map(|i| self.get(i))
            .flat_map(|s| s.requests.iter().cloned())
            .collect()
    }

    /// Appends (puts) that ended in `range` (which must be committed). An append publishes all
    /// its batches at once, so a committed range never splits one.
    pub fn puts(&self, range: BatchRange) -> u64 {
        let through = |n: usize| {
            n.checked_sub(1)
                .and_then(|i| self.get(i))
                .map_or(0, |s| s.puts_through)
        };
        through(range.end) - through(range.start)
    }

    /// Rows in the first `n` committed batches.
    pub fn rows_before(&self, n: usize) -> u64 {
        match n.checked_sub(1).and_then(|i| self.get(i)) {
            Some(s) => s.rows_before + s.batch.num_rows() as u64,
            None => 0,
        }
    }

    /// Estimated bytes of the first `n` committed batches.
    pub fn bytes_before(&self, n: usize) -> u64 {
        match n.checked_sub(1).and_then(|i| self.get(i)) {
            Some(s) => s.bytes_before + s.estimated_bytes,
            None => 0,
        }
    }

    /// Rows in all committed batches.
    pub fn total_rows(&self) -> u64 {
        self.rows_before(self.len())
    }

    /// Estimated bytes of all committed batches.
    pub fn estimated_bytes(&self) -> u64 {
        self.bytes_before(self.len())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow_array::Int32Array;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    /// A batch of `rows` rows of one `id: Int32` column (0, 1, …).
    pub(crate) fn batch(rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        RecordBatch::try_new(
            schema,
            vec![Arc::new(Int32Array::from_iter_values(0..rows as i32))],
        )
        .unwrap()
    }

    // A new store has its whole capacity free and holds nothing.
    #[test]
    fn new_store_is_empty() {
        let s = BatchStore::new(10);
        assert_eq!((s.capacity(), s.len(), s.remaining()), (10, 0, 10));
        assert!(s.is_empty() && !s.is_full());
    }

    #[test]
    fn puts_count_appends_not_batches() {
        let s = BatchStore::new(10);
        s.append(&[batch(1), batch(2), batch(3)]).unwrap();
        s.append(&[batch(1)]).unwrap();
        s.append(&[batch(1), batch(1)]).unwrap();
        let range = |start, end| BatchRange { start, end };
        assert_eq!(s.puts(range(0, 6)), 3);
        assert_eq!(s.puts(range(0, 3)), 1);
        assert_eq!(s.puts(range(3, 6)), 2);
        assert_eq!(s.puts(range(4, 6)), 1);
        assert_eq!(s.puts(range(6, 6)), 0);
    }

    #[test]
    fn slots_are_allocated_as_batches_arrive() {
        let s = BatchStore::new(crate::config::MAX_MEMTABLE_BATCHES_LIMIT);
        assert_eq!(s.allocated_slots(), 0, "a new store allocates no slot");
        s.append(&[batch(1)]).unwrap();
        assert_eq!(s.allocated_slots(), FIRST_SEGMENT);
        for _ in 1..1000 {
            s.append(&[batch(1)]).unwrap();
        }
        let allocated = s.allocated_slots();
        assert!(
            (1000..2 * 1000 + FIRST_SEGMENT).contains(&allocated),
            "{allocated} slots for 1000 batches"
        );
        let small = BatchStore::new(40);
        for _ in 0..40 {
            small.append(&[batch(1)]).unwrap();
        }
        assert_eq!(
            small.allocated_slots(),
            40,
            "the last segment stops at the capacity"
        );
        assert!(small.append(&[batch(1)]).is_err());
    }

    #[test]
    fn positions_map_to_segments_without_gaps() {
        let mut expected = (0, 0);
        for position in 0..100_000 {
            assert_eq!(locate(position), expected, "position {position}");
            assert_eq!(segment_start(expected.0) + expected.1, position);
            expected.1 += 1;
            if expected.1 == FIRST_SEGMENT << expected.0 {
                expected = (expected.0 + 1, 0);
            }
        }
        let (last, _) = locate(crate::config::MAX_MEMTABLE_BATCHES_LIMIT - 1);
        assert_eq!(last, SEGMENTS - 1);
    }

    #[test]
    fn batches_across_segments_keep_their_positions_and_offsets() {
        let s = BatchStore::new(500);
        for i in 0..500 {
            s.append(&[batch(i % 7 + 1)]).unwrap();
        }
        for i in 0..500 {
            assert_eq!(
                s.get(i).unwrap().batch.num_rows(),
                i % 7 + 1,
                "position {i}"
            );
        }
        let rows: u64 = (0..500).map(|i| (i % 7 + 1) as u64).sum();
        assert_eq!(s.total_rows(), rows);
        assert!(s.is_full());
    }

    // Appends take positions 0, 1, 2, …, and each batch records how many rows come before it.
    #[test]
    fn appends_assign_sequential_positions_and_cumulative_offsets() {
        let s = BatchStore::new(10);
        let r = s.append(&[batch(100)]).unwrap();
        assert_eq!(r, BatchRange { start: 0, end: 1 });
        assert_eq!(s.total_rows(), 100);
        let s = BatchStore::new(10);
        for (i, rows) in [10, 20, 30, 40, 50].into_iter().enumerate() {
            assert_eq!(s.append(&[batch(rows)]).unwrap().start, i);
        }
        let offsets: Vec<u64> = (0..5).map(|i| s.get(i).unwrap().rows_before).collect();
        assert_eq!(offsets, vec![0, 10, 30, 60, 100]);
        assert_eq!(s.total_rows(), 150);
        assert_eq!(s.get(1).unwrap().batch.num_rows(), 20);
        assert!(s.get(5).is_none() && s.get(100).is_none());
    }

    // A store without room for a whole append rejects it and appends none of its batches; an empty
    // append takes no slot.
    #[test]
    fn full_store_rejects_without_partial_append() {
        let s = BatchStore::new(3);
        for _ in 0..3 {
            s.append(&[batch(1)]).unwrap();
        }
        assert!(s.is_full());
        assert_eq!(
            s.append(&[batch(1)]).unwrap_err(),
            StoreFull {
                needed: 1,
                remaining: 0
            }
        );
        let s = BatchStore::new(3);
        s.append(&[batch(1), batch(1)]).unwrap();
        assert!(s.append(&[batch(1), batch(1)]).is_err());
        assert_eq!(s.len(), 2);
        let r = s.append(&[]).unwrap();
        assert!(r.is_empty());
        assert_eq!(s.len(), 2);
    }

    // A multi-batch append takes one range of consecutive positions.
    #[test]
    fn multi_batch_append_is_one_range() {
        let s = BatchStore::new(8);
        let r = s
            .append(&[batch(10), batch(20), batch(30), batch(40), batch(50)])
            .unwrap();
        assert_eq!(r, BatchRange { start: 0, end: 5 });
        assert_eq!(s.rows_before(3), 60);
        assert_eq!(s.batches(BatchRange { start: 1, end: 3 }).len(), 2);
    }

    // A slice is counted by its window, not by the whole buffers it shares with its parent.
    #[test]
    fn size_estimate_is_slice_aware() {
        let big = batch(100_000);
        let full = estimated_batch_bytes(&big);
        assert!(full >= 400_000);
        let slices: u64 = (0..100)
            .map(|i| estimated_batch_bytes(&big.slice(i * 1000, 1000)))
            .sum();
        // Each slice also carries a batch's fixed costs (its array structs and buffer handles).
        let fixed = estimated_batch_bytes(&big.slice(0, 0));
        assert!(
            slices >= 400_000 && slices <= full + 100 * (fixed + 64),
            "{slices} vs {full}"
        );
        let naive: u64 = (0..100)
            .map(|i| big.slice(i * 1000, 1000).get_array_memory_size() as u64)
            .sum();
        assert!(naive >= 10 * slices);
    }

    // The shortcut for arrays without children gives exactly what `ArrayData` does, whole or
    // sliced, with or without nulls.
    #[test]
    fn flat_window_matches_array_data() {
        use arrow_array::{
            ArrayRef, BinaryArray, BooleanArray, Float64Array, LargeStringArray, StringArray,
            TimestampMillisecondArray,
        };
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from_iter_values(0..100)),
            Arc::new(Int32Array::from_iter(
                (0..100).map(|i| (i % 3 != 0).then_some(i)),
            )),
            Arc::new(Float64Array::from_iter_values((0..100).map(f64::from))),
            Arc::new(TimestampMillisecondArray::from_iter_values(0..100).with_timezone("UTC")),
            Arc::new(BooleanArray::from_iter(
                (0..100).map(|i| (i % 5 != 0).then_some(i % 2 == 0)),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..100).map(|i| "x".repeat(i % 7)),
            )),
            Arc::new(StringArray::from_iter(
                (0..100).map(|i| (i % 4 != 0).then(|| "ab".repeat(i % 9))),
            )),
            Arc::new(LargeStringArray::from_iter_values(
                (0..100).map(|i| format!("v{i}")),
            )),
            Arc::new(BinaryArray::from_iter_values(
                (0..100).map(|i| vec![1u8; i % 11]),
            )),
        ];
        for a in arrays {
            for (offset, len) in [(0, 100), (0, 0), (13, 40), (99, 1), (37, 63)] {
                let s = a.slice(offset, len);
                let data = s.to_data();
                let expected = (data.get_slice_memory_size().unwrap(), data_buffers(&data));
                assert_eq!(
                    flat_window(s.as_ref()),
                    Some(expected),
                    "{} [{offset}, +{len})",
                    a.data_type()
                );
            }
        }
    }

    // Readers, which take no lock, never see part of an append.
    #[test]
    fn concurrent_readers_see_whole_appends() {
        let s = Arc::new(BatchStore::new(200));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        let n = s.len();
                        assert_eq!(n % 2, 0, "saw half of a two-batch append");
                        for i in 0..n {
                            assert_eq!(s.get(i).unwrap().batch.num_rows(), 3);
                        }
                    }
                })
            })
            .collect();
        for _ in 0..100 {
            s.append(&[batch(3), batch(3)]).unwrap();
        }
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(s.len(), 200);
    }
}
