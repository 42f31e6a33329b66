//! Statistics: MemTable, WAL and write counters as plain structs.
//!
//! [`StatsRecorder`] holds the live counters (atomics, updated from the put path and the
//! background tasks); [`WriteStats`] is a snapshot. Each counter name is defined once, here.
//!
//! Object-store requests are counted by `store::counting` (a wrapper around the writer's
//! store) and retries by the retry loops, both through the [`Operation`] scope a background
//! task runs an operation in ([`StatsRecorder::scoped`]): a task-local, so the store and the
//! retry policy need no handle on the writer, and the requests one WAL append made are known
//! exactly (its [`WalEntryCost`]) although other tasks use the same store meanwhile.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;

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
    /// Requests this writer made of its object store, by kind.
    pub store: StoreRequestStats,
    /// Retries and failures of the writer's store operations.
    pub operations: OperationsStats,
    /// Latency of WAL appends (one sample per entry, retries included).
    pub wal_append_latency: LatencySummary,
    /// Latency of generation flushes (file, request ids and manifest commit).
    pub generation_flush_latency: LatencySummary,
    /// Latency from a durable put's call to its durability acknowledgement in the core (one
    /// sample per durable put; a retry answered from a remembered request id is not sampled).
    pub put_to_durable_latency: LatencySummary,
}

/// Object-store requests by kind. A request is counted when it is issued, whatever its
/// outcome; retries count again. A listing counts one LIST per 1,000 objects returned (S3's
/// page size), at least one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreRequestStats {
    /// PUT requests (creates, overwrites).
    pub put_requests: u64,
    /// Payload bytes sent by PUTs.
    pub put_bytes: u64,
    /// GET requests.
    pub get_requests: u64,
    /// Bytes received by GETs that succeeded.
    pub get_bytes: u64,
    /// HEAD requests (existence probes).
    pub head_requests: u64,
    /// LIST requests.
    pub list_requests: u64,
    /// DELETE requests (one per object).
    pub delete_requests: u64,
}

/// What a writer does against its store, for retry and failure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Appending a WAL entry.
    WalAppend,
    /// Writing the fence sentinel at open.
    FenceSentinel,
    /// Flushing a generation (its file, request ids and manifest commit).
    GenerationFlush,
    /// Committing a manifest version (within a generation flush or compaction).
    ManifestCommit,
    /// Compacting generations.
    Compaction,
    /// Collecting garbage.
    Gc,
}

impl Operation {
    /// Every operation, in the order of [`OperationsStats`]' fields.
    pub const ALL: [Operation; 6] = [
        Operation::WalAppend,
        Operation::FenceSentinel,
        Operation::GenerationFlush,
        Operation::ManifestCommit,
        Operation::Compaction,
        Operation::Gc,
    ];

    /// The operation's name in metrics (`wal_append`, `generation_flush`, …).
    pub fn name(self) -> &'static str {
        match self {
            Operation::WalAppend => "wal_append",
            Operation::FenceSentinel => "fence_sentinel",
            Operation::GenerationFlush => "generation_flush",
            Operation::ManifestCommit => "manifest_commit",
            Operation::Compaction => "compaction",
            Operation::Gc => "gc",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Retries and failures of one [`Operation`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperationStats {
    /// Attempts repeated after a failed one (a manifest commit: after losing a version race).
    pub retries: u64,
    /// Operations that failed for good (retries spent, a failed sync, a fence).
    pub failures: u64,
}

/// [`OperationStats`] of each [`Operation`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperationsStats {
    /// [`Operation::WalAppend`].
    pub wal_append: OperationStats,
    /// [`Operation::FenceSentinel`].
    pub fence_sentinel: OperationStats,
    /// [`Operation::GenerationFlush`].
    pub generation_flush: OperationStats,
    /// [`Operation::ManifestCommit`].
    pub manifest_commit: OperationStats,
    /// [`Operation::Compaction`].
    pub compaction: OperationStats,
    /// [`Operation::Gc`].
    pub gc: OperationStats,
}

impl OperationsStats {
    /// The counts of `op`.
    pub fn of(&self, op: Operation) -> OperationStats {
        match op {
            Operation::WalAppend => self.wal_append,
            Operation::FenceSentinel => self.fence_sentinel,
            Operation::GenerationFlush => self.generation_flush,
            Operation::ManifestCommit => self.manifest_commit,
            Operation::Compaction => self.compaction,
            Operation::Gc => self.gc,
        }
    }
}

/// Count, median, 99th percentile and maximum of a latency histogram (HdrHistogram, three
/// significant digits, microsecond resolution).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest sample.
    pub max: Duration,
    /// Sum of the samples (Prometheus summaries report it with the count).
    pub sum: Duration,
}

/// What the WAL entry that covered a durable put cost: its position, the object-store
/// requests and bytes its append took (retries and read-backs included), and how many durable
/// puts it acknowledged together (group commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalEntryCost {
    /// The entry's WAL position (a plain number: statistics import nothing from the WAL).
    pub position: u64,
    /// Object-store requests the append made.
    pub requests: u64,
    /// Bytes those requests sent and received.
    pub bytes: u64,
    /// Durable puts acknowledged by this entry in the same round.
    pub puts: u64,
}

impl WalEntryCost {
    /// A position whose append cost is not known (replayed, or covered by an earlier round).
    pub fn at(position: u64) -> Self {
        WalEntryCost {
            position,
            requests: 0,
            bytes: 0,
            puts: 0,
        }
    }
}

/// A latency histogram behind a mutex: recorded once per WAL append, generation flush, or
/// round of durable-put acknowledgements, never per put on the put path.
#[derive(Debug)]
struct Latency(Mutex<Samples>);

/// A histogram of microseconds and the exact sum of its samples.
#[derive(Debug)]
struct Samples {
    histogram: Histogram<u64>,
    sum_us: u64,
}

impl Samples {
    fn record(&mut self, took: Duration) {
        let us = micros(took);
        // Auto-resizing: a sample past the current range grows it rather than failing.
        let _ = self.histogram.record(us);
        self.sum_us = self.sum_us.saturating_add(us);
    }
}

impl Default for Latency {
    fn default() -> Self {
        Latency(Mutex::new(Samples {
            histogram: Histogram::new(3).expect("3 significant digits is valid"),
            sum_us: 0,
        }))
    }
}

impl Latency {
    fn lock(&self) -> std::sync::MutexGuard<'_, Samples> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reset(&self) {
        let mut s = self.lock();
        s.histogram.reset();
        s.sum_us = 0;
    }

    fn summary(&self) -> LatencySummary {
        let s = self.lock();
        let h = &s.histogram;
        let at = |q: f64| Duration::from_micros(h.value_at_quantile(q));
        LatencySummary {
            count: h.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: Duration::from_micros(h.max()),
            sum: Duration::from_micros(s.sum_us),
        }
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
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
        pub struct StatsRecorder {
            $(pub(crate) $name: AtomicU64,)*
            retries: [AtomicU64; 6],
            failures: [AtomicU64; 6],
            wal_append_latency: Latency,
            generation_flush_latency: Latency,
            put_to_durable_latency: Latency,
        }

        impl StatsRecorder {
            /// Zeroes every counter and histogram.
            pub fn reset(&self) {
                $(self.$name.store(0, Ordering::Relaxed);)*
                for c in self.retries.iter().chain(&self.failures) {
                    c.store(0, Ordering::Relaxed);
                }
                self.wal_append_latency.reset();
                self.generation_flush_latency.reset();
                self.put_to_durable_latency.reset();
            }
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
    put_requests,
    put_bytes,
    get_requests,
    get_bytes,
    head_requests,
    list_requests,
    delete_requests,
);

/// The kind of an object-store request, for [`StoreRequestStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    Put,
    Get,
    Head,
    List,
    Delete,
}

/// The operation a task is running, for the counts of [`StatsRecorder::scoped`].
#[derive(Debug)]
struct Scope {
    op: Operation,
    recorder: Arc<StatsRecorder>,
    requests: AtomicU64,
    bytes: AtomicU64,
}

tokio::task_local! {
    static SCOPE: Arc<Scope>;
}

/// Counts one retry of the operation the current task runs (no-op outside a scope).
pub(crate) fn note_retry() {
    let _ = SCOPE.try_with(|s| add(&s.recorder.retries[s.op.index()], 1));
}

/// Runs `fut` as `op` inside the operation the current task runs (a manifest commit inside a
/// generation flush); outside any scope it runs uncounted.
pub(crate) async fn nested<T>(
    op: Operation,
    fut: impl Future<Output = crate::error::Result<T>>,
) -> crate::error::Result<T> {
    match SCOPE.try_with(|s| s.recorder.clone()) {
        Ok(recorder) => recorder.scoped(op, fut).await.0,
        Err(_) => fut.await,
    }
}

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

    /// One object-store request of `kind` moving `bytes`; also counted for the operation the
    /// current task runs, if any.
    pub(crate) fn record_request(&self, kind: RequestKind, bytes: u64) {
        let (requests, moved) = match kind {
            RequestKind::Put => (&self.put_requests, Some(&self.put_bytes)),
            RequestKind::Get => (&self.get_requests, None),
            RequestKind::Head => (&self.head_requests, None),
            RequestKind::List => (&self.list_requests, None),
            RequestKind::Delete => (&self.delete_requests, None),
        };
        add(requests, 1);
        if let Some(moved) = moved {
            add(moved, bytes);
        }
        let _ = SCOPE.try_with(|s| {
            add(&s.requests, 1);
            add(&s.bytes, bytes);
        });
    }

    /// Bytes received by a GET (counted once the response arrived).
    pub(crate) fn record_get_bytes(&self, bytes: u64) {
        add(&self.get_bytes, bytes);
        let _ = SCOPE.try_with(|s| add(&s.bytes, bytes));
    }

    /// Runs `fut` as operation `op`: retries noted in it ([`note_retry`]) count for `op`, an
    /// `Err` counts as a failure of `op`, and it returns the object-store requests and bytes
    /// `fut` made.
    pub(crate) async fn scoped<T>(
        self: &Arc<Self>,
        op: Operation,
        fut: impl Future<Output = crate::error::Result<T>>,
    ) -> (crate::error::Result<T>, u64, u64) {
        let scope = Arc::new(Scope {
            op,
            recorder: self.clone(),
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        });
        let out = SCOPE.scope(scope.clone(), fut).await;
        if out.is_err() {
            add(&self.failures[op.index()], 1);
        }
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (out, get(&scope.requests), get(&scope.bytes))
    }

    /// One WAL append that took `took`.
    pub(crate) fn record_wal_append_latency(&self, took: Duration) {
        self.wal_append_latency.lock().record(took);
    }

    /// One generation flush that took `took`.
    pub(crate) fn record_generation_flush_latency(&self, took: Duration) {
        self.generation_flush_latency.lock().record(took);
    }

    /// Durable puts acknowledged together: each took the time from its call to now.
    pub(crate) fn record_put_to_durable(&self, took: impl Iterator<Item = Duration>) {
        let mut h = self.put_to_durable_latency.lock();
        for t in took {
            h.record(t);
        }
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
            store: StoreRequestStats {
                put_requests: get(&self.put_requests),
                put_bytes: get(&self.put_bytes),
                get_requests: get(&self.get_requests),
                get_bytes: get(&self.get_bytes),
                head_requests: get(&self.head_requests),
                list_requests: get(&self.list_requests),
                delete_requests: get(&self.delete_requests),
            },
            operations: {
                let op = |o: Operation| OperationStats {
                    retries: get(&self.retries[o.index()]),
                    failures: get(&self.failures[o.index()]),
                };
                OperationsStats {
                    wal_append: op(Operation::WalAppend),
                    fence_sentinel: op(Operation::FenceSentinel),
                    generation_flush: op(Operation::GenerationFlush),
                    manifest_commit: op(Operation::ManifestCommit),
                    compaction: op(Operation::Compaction),
                    gc: op(Operation::Gc),
                }
            },
            wal_append_latency: self.wal_append_latency.summary(),
            generation_flush_latency: self.generation_flush_latency.summary(),
            put_to_durable_latency: self.put_to_durable_latency.summary(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Counters add up across calls, and a reset zeroes them.
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
    fn latency_summaries_count_each_sample() {
        let s = StatsRecorder::default();
        s.record_put_to_durable((1..=100).map(Duration::from_millis));
        s.record_wal_append_latency(Duration::from_millis(7));
        let w = s.snapshot();
        let p = w.put_to_durable_latency;
        assert_eq!(p.count, 100);
        assert_eq!(p.sum, Duration::from_millis(5050));
        // Three significant digits: within 0.1% of the true value.
        let near = |d: Duration, ms: u64| {
            d.abs_diff(Duration::from_millis(ms)) <= Duration::from_micros(ms)
        };
        assert!(
            near(p.p50, 50) && near(p.p99, 99) && near(p.max, 100),
            "{p:?}"
        );
        assert_eq!(w.wal_append_latency.count, 1);
        assert_eq!(w.generation_flush_latency, LatencySummary::default());
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
