//! The MemTable size estimate against the heap a batch really holds, measured by a counting
//! allocator. The size limits (`max_memtable_size`, `max_unflushed_memtable_bytes`) bound memory
//! only as well as this estimate tracks it; small batches are the hard case, as their fixed
//! costs (array structs, buffer headers, allocation rounding) outweigh their data.
//!
//! One test per binary: the allocator is process-wide, and a second test running at the same
//! time would be counted too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use arrow_array::{ArrayRef, RecordBatch, make_array};
use arrow_buffer::Buffer;
use arrow_data::ArrayDataBuilder;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use memwal_core::batch_store::estimated_batch_bytes;

/// Heap in use, in glibc malloc chunk sizes: each allocation costs its size plus an 8-byte
/// header, rounded up to 16, at least 32. (The slack of an over-aligned allocation goes back to
/// the free lists, where the small allocations around it reuse it.)
static HEAP: AtomicI64 = AtomicI64::new(0);

struct Counting;

fn chunk(layout: Layout) -> i64 {
    (layout.size() + 8).next_multiple_of(16).max(32) as i64
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HEAP.fetch_add(chunk(layout), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP.fetch_sub(chunk(layout), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The bench's 100-byte row: a 20-byte key, a 72-byte value and a timestamp.
fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, false),
    ]))
}

fn offsets(lens: impl Iterator<Item = usize>) -> Vec<u8> {
    let mut at = 0i32;
    let mut out = at.to_le_bytes().to_vec();
    for l in lens {
        at += l as i32;
        out.extend_from_slice(&at.to_le_bytes());
    }
    out
}

/// A batch of `rows` rows built as the Node binding builds one from a Table's column buffers:
/// every buffer copied into an allocation of its own.
fn column_buffers_batch(schema: &SchemaRef, rows: usize) -> RecordBatch {
    let utf8 = |width: usize| -> ArrayRef {
        let values = vec![b'x'; rows * width];
        let data = ArrayDataBuilder::new(DataType::Utf8)
            .len(rows)
            .add_buffer(Buffer::from_slice_ref(offsets(std::iter::repeat_n(
                width, rows,
            ))))
            .add_buffer(Buffer::from_slice_ref(values))
            .build()
            .unwrap();
        make_array(data)
    };
    let ts: Vec<u8> = (0..rows as i64).flat_map(|t| t.to_le_bytes()).collect();
    let ts = make_array(
        ArrayDataBuilder::new(DataType::Int64)
            .len(rows)
            .add_buffer(Buffer::from_slice_ref(ts))
            .build()
            .unwrap(),
    );
    RecordBatch::try_new(schema.clone(), vec![utf8(20), utf8(72), ts]).unwrap()
}

/// Heap bytes that `make` leaves allocated, with what the estimate says about them.
fn measure(make: impl FnOnce() -> Vec<RecordBatch>) -> (i64, u64, Vec<RecordBatch>) {
    let before = HEAP.load(Ordering::SeqCst);
    let batches = make();
    let heap = HEAP.load(Ordering::SeqCst) - before;
    let estimate = batches.iter().map(estimated_batch_bytes).sum();
    (heap, estimate, batches)
}

#[test]
fn the_size_estimate_tracks_the_heap_a_memtable_holds() {
    let n = 2000;
    // One schema for every batch, as a writer has.
    let schema = schema();

    // 1-row batches from the Node binding's column-buffer path: fixed costs dominate.
    let (heap, estimate, small) =
        measure(|| (0..n).map(|_| column_buffers_batch(&schema, 1)).collect());
    let ratio = estimate as f64 / heap as f64;
    assert!(
        (0.8..=1.25).contains(&ratio),
        "1-row batches: estimate {estimate} B vs heap {heap} B (ratio {ratio:.2})"
    );

    // The same rows decoded from one IPC stream (the IPC put path and WAL replay): buffers are
    // windows on each message's body, so the estimate may count more than the heap, not less.
    let mut bytes = Vec::new();
    {
        let mut w = StreamWriter::try_new(&mut bytes, &schema).unwrap();
        for b in &small {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }
    let (heap, estimate, _decoded) = measure(|| {
        StreamReader::try_new(bytes.as_slice(), None)
            .unwrap()
            .map(|b| b.unwrap())
            .collect()
    });
    let ratio = estimate as f64 / heap as f64;
    assert!(
        (0.8..=2.0).contains(&ratio),
        "1-row batches from IPC: estimate {estimate} B vs heap {heap} B (ratio {ratio:.2})"
    );

    // Large batches: the data is all there is.
    let (heap, estimate, _large) = measure(|| {
        (0..4)
            .map(|_| column_buffers_batch(&schema, 10_000))
            .collect()
    });
    let ratio = estimate as f64 / heap as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "10,000-row batches: estimate {estimate} B vs heap {heap} B (ratio {ratio:.2})"
    );
}
