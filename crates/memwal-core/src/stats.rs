//! Statistics: MemTable, WAL and write counters as plain structs.
//!
//! [`StatsRecorder`] holds the live counters (atomics, updated from the put path and the
//! background tasks); [`WriteStats`] is a snapshot. Each counter name is defined once, here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The active MemTable and the frozen ones awaiting their generation flush.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemTableStats {
    /// Generation of the active MemTable.
    pub generation: u64,
    /// Rows in the active MemTable.
    pub row_count: u64,
    /// Batches in the active MemTable.
    pub batch_count: u64,
    /// Estimated bytes of the active MemTable.
    pub estimated_size: u64,
    /// Batches of the active MemTable not yet in the WAL.
    pub pending_wal_batch_count: u64,
    /// Rows of the active MemTable not yet in the WAL.
    pub pending_wal_row_count: u64,
    /// Estimated bytes of the active MemTable not yet in the WAL.
    pub pending_wal_estimated_bytes: u64,
    /// Frozen MemTables waiting for their generation flush.
    pub frozen_memtable_count: u64,
    /// Estimated bytes of those frozen MemTables.
    pub frozen_estimated_bytes: u64,
}

/// The writer's view of its WAL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// The position the next WAL entry will be written at.
    pub next_wal_entry_position: u64,
    /// Where this writer's fence sentinel went (epoch ≥ 2), if it wrote one.
    pub fence_sentinel_position: Option<u64>,
    /// Entries this writer appended.
    pub entries_appended: u64,
    /// Encoded bytes of those entries.
    pub bytes_appended: u64,
}

/// Where [`crate::ShardWriter::open`] spent its time. The claim ends once the previous
/// writer is fenced (its next append fails); replay then rebuilds the MemTables from the WAL,
/// so it grows with the unflushed tail the previous writer left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenStats {
    /// Claiming the shard: the epoch CAS on the manifest, finding the WAL tip and writing the
    /// fence sentinel (plus, once per store, the conditional-write probe).
    pub claim: Duration,
    /// Replaying the WAL tail into MemTables.
    pub replay: Duration,
    /// WAL entries replayed (fence sentinels included).
    pub replayed_entries: u64,
    /// Rows replayed.
    pub replayed_rows: u64,
}

/// A snapshot of the write counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Successful `put`/`put_no_wait` calls.
    pub put_count: u64,
    /// Rows put.
    pub put_rows: u64,
    /// Time spent in the in-memory part of puts (validation, backpressure, insert).
    pub put_time: Duration,
    /// WAL entries appended (excluding the fence sentinel).
    pub wal_flush_count: u64,
    /// Encoded bytes of those entries.
    pub wal_flush_bytes: u64,
    /// Batches in those entries.
    pub wal_flush_batches: u64,
    /// Time spent appending them.
    pub wal_flush_time: Duration,
    /// Durable-put completions written (success or failure).
    pub durable_requests: u64,
    /// Generations flushed.
    pub memtable_flush_count: u64,
    /// Rows in flushed generations.
    pub memtable_flush_rows: u64,
    /// Time spent flushing generations.
    pub memtable_flush_time: Duration,
    /// Puts that had to wait for backpressure.
    pub backpressure_events: u64,
    /// Total time puts waited for backpressure.
    pub backpressure_wait: Duration,
    /// Puts answered as retries: their request id was remembered, so they wrote nothing and
    /// got the first put's result.
    pub retried_puts: u64,
}

impl WriteStats {
    /// Mean durable puts per WAL entry: the group-commit factor.
    pub fn puts_per_wal_entry(&self) -> f64 {
        if self.wal_flush_count == 0 {
            0.0
        } else {
            self.durable_requests as f64 / self.wal_flush_count as f64
        }
    }
}

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Live counters; see [`WriteStats`] for their meaning.
        #[derive(Debug, Default)]
        pub struct StatsRecorder { $(pub(crate) $name: AtomicU64,)* }

        impl StatsRecorder {
            /// Zeroes every counter.
            pub fn reset(&self) { $(self.$name.store(0, Ordering::Relaxed);)* }
        }
    };
}

counters!(
    put_count,
    put_rows,
    put_time_ns,
    wal_flush_count,
    wal_flush_bytes,
    wal_flush_batches,
    wal_flush_time_ns,
    durable_requests,
    memtable_flush_count,
    memtable_flush_rows,
    memtable_flush_time_ns,
    backpressure_events,
    backpressure_wait_ns,
    retried_puts,
);

fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Ordering::Relaxed);
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl StatsRecorder {
    /// One successful put of `rows` rows taking `took`.
    pub fn record_put(&self, rows: u64, took: Duration) {
        add(&self.put_count, 1);
        add(&self.put_rows, rows);
        add(&self.put_time_ns, nanos(took));
    }

    /// One WAL entry of `bytes` bytes and `batches` batches, appended in `took`.
    pub fn record_wal_flush(&self, bytes: u64, batches: u64, took: Duration) {
        add(&self.wal_flush_count, 1);
        add(&self.wal_flush_bytes, bytes);
        add(&self.wal_flush_batches, batches);
        add(&self.wal_flush_time_ns, nanos(took));
    }

    /// One durable-put completion written.
    pub fn record_durable_request(&self) {
        add(&self.durable_requests, 1);
    }

    /// One generation of `rows` rows flushed in `took`.
    pub fn record_memtable_flush(&self, rows: u64, took: Duration) {
        add(&self.memtable_flush_count, 1);
        add(&self.memtable_flush_rows, rows);
        add(&self.memtable_flush_time_ns, nanos(took));
    }

    /// One put that waited `took` for backpressure.
    pub fn record_backpressure(&self, took: Duration) {
        add(&self.backpressure_events, 1);
        add(&self.backpressure_wait_ns, nanos(took));
    }

    /// One put answered as a retry of an earlier put with its request id.
    pub fn record_retried_put(&self) {
        add(&self.retried_puts, 1);
    }

    /// A snapshot of every counter.
    pub fn snapshot(&self) -> WriteStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WriteStats {
            put_count: get(&self.put_count),
            put_rows: get(&self.put_rows),
            put_time: Duration::from_nanos(get(&self.put_time_ns)),
            wal_flush_count: get(&self.wal_flush_count),
            wal_flush_bytes: get(&self.wal_flush_bytes),
            wal_flush_batches: get(&self.wal_flush_batches),
            wal_flush_time: Duration::from_nanos(get(&self.wal_flush_time_ns)),
            durable_requests: get(&self.durable_requests),
            memtable_flush_count: get(&self.memtable_flush_count),
            memtable_flush_rows: get(&self.memtable_flush_rows),
            memtable_flush_time: Duration::from_nanos(get(&self.memtable_flush_time_ns)),
            backpressure_events: get(&self.backpressure_events),
            backpressure_wait: Duration::from_nanos(get(&self.backpressure_wait_ns)),
            retried_puts: get(&self.retried_puts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference §8.2 scenario 45.
    #[test]
    fn counters_accumulate_and_reset() {
        let s = StatsRecorder::default();
        s.record_put(1, Duration::from_millis(10));
        s.record_put(1, Duration::from_millis(20));
        s.record_wal_flush(1024, 1, Duration::from_millis(100));
        s.record_wal_flush(2048, 1, Duration::from_millis(200));
        s.record_memtable_flush(10_000, Duration::from_secs(1));
        let w = s.snapshot();
        assert_eq!(w.put_count, 2);
        assert_eq!(w.put_time, Duration::from_millis(30));
        assert_eq!(w.put_time / w.put_count as u32, Duration::from_millis(15));
        assert_eq!((w.wal_flush_count, w.wal_flush_bytes), (2, 3072));
        assert_eq!(w.wal_flush_bytes / w.wal_flush_count, 1536);
        assert_eq!(w.wal_flush_time, Duration::from_millis(300));
        assert_eq!(w.memtable_flush_count, 1);
        s.reset();
        assert_eq!(s.snapshot(), WriteStats::default());
    }

    #[test]
    fn group_commit_factor() {
        let s = StatsRecorder::default();
        assert_eq!(s.snapshot().puts_per_wal_entry(), 0.0);
        for _ in 0..10 {
            s.record_durable_request();
        }
        s.record_wal_flush(1, 1, Duration::ZERO);
        s.record_wal_flush(1, 1, Duration::ZERO);
        assert_eq!(s.snapshot().puts_per_wal_entry(), 5.0);
    }
}
