//! Shared harness for memwal-core integration tests: the test schema and batches, the usual
//! writer configs, concurrent puts, waits that fail instead of hanging, and the checks most
//! tests make. Each test file includes it with `mod support;` and uses what it needs, hence
//! `dead_code` and `unused_imports` are allowed here.
//!
//! - [`backend`]: [`Backend`], a store kind to run a test on, with raw access to its objects.
//! - [`shard`]: [`Shard`], one shard in one store: opening writers, the steps a previous
//!   owner leaves behind, and what a fresh reader recovers.
//! - [`forwarding`]: an `ObjectStore` wrapper with hooks around puts and gets, for tests that
//!   watch or break individual store operations.
//! - [`seeded`]: the seeded generator and seed selection of the randomized tests.
//!
//! `s3.rs` (an in-process S3 server) is not part of this module: only the files that use it
//! compile it.
#![allow(dead_code, unused_imports)]

pub mod backend;
pub mod forwarding;
pub mod seeded;
pub mod shard;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use memwal_core::{
    ErrorCode, FenceReason, ShardReader, ShardWriter, Store, WalTailer, WriteResult, WriterConfig,
};
use tokio::task::JoinHandle;
use uuid::Uuid;

pub use backend::{Backend, each_backend, each_layout};
pub use shard::Shard;

/// `id: Int32 not null, name: Utf8` (the reference's test schema).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// A batch with the given ids and names `n<id>`.
pub fn batch(ids: impl IntoIterator<Item = i32>) -> RecordBatch {
    let ids: Vec<i32> = ids.into_iter().collect();
    let names: Vec<Option<String>> = ids.iter().map(|i| Some(format!("n{i}"))).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int32Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

/// One single-row batch per id, in order: `open_and_put(config, batch_per_id(0..3))` makes
/// three puts.
pub fn batch_per_id(ids: impl IntoIterator<Item = i32>) -> impl Iterator<Item = RecordBatch> {
    ids.into_iter().map(|i| batch([i]))
}

/// A batch of `rows` rows with ids starting at `start`.
pub fn rows(start: i32, rows: usize) -> RecordBatch {
    batch(start..start + rows as i32)
}

/// The `id` column of every batch, concatenated.
pub fn ids(batches: &[RecordBatch]) -> Vec<i32> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b
                .column(0)
                .as_any()
                .downcast_ref::<Int32Array>()
                .expect("id column");
            (0..a.len()).map(|i| a.value(i)).collect::<Vec<_>>()
        })
        .collect()
}

/// Ids `w.scan()` returns, in order.
pub async fn scanned_ids(w: &ShardWriter) -> Vec<i32> {
    ids(&w.scan().await.unwrap())
}

/// Durable config with no ticker, size limits (64 MiB) that a test's few rows never reach, and
/// retries 1 ms apart, so that a test decides when MemTables rotate.
pub fn durable() -> WriterConfig {
    WriterConfig {
        durable_write: true,
        max_wal_buffer_size: 64 << 20,
        max_wal_flush_interval_ms: None,
        max_memtable_size: 64 << 20,
        wal_persist_retry_base_delay_ms: 1,
        ..Default::default()
    }
}

/// Non-durable config with no ticker and big limits.
pub fn non_durable() -> WriterConfig {
    WriterConfig {
        durable_write: false,
        ..durable()
    }
}

/// A config with one or two fields changed, in one expression:
/// `durable().with(|c| c.max_memtable_batches = 2)`.
pub trait With {
    fn with(self, change: impl FnOnce(&mut Self)) -> Self;
}

impl With for WriterConfig {
    fn with(mut self, change: impl FnOnce(&mut Self)) -> Self {
        change(&mut self);
        self
    }
}

/// `config` bound to `shard`.
pub fn on(shard: Uuid, config: WriterConfig) -> WriterConfig {
    WriterConfig {
        shard: Some(shard.into()),
        ..config
    }
}

pub async fn open(store: &Store, shard: Uuid, config: WriterConfig) -> ShardWriter {
    ShardWriter::open(store.clone(), schema(), on(shard, config))
        .await
        .unwrap()
}

/// Number of WAL entries (including sentinels) of a shard.
pub async fn wal_len(store: &Store, shard: Uuid) -> u64 {
    WalTailer::open(store.clone(), shard)
        .await
        .unwrap()
        .next_position()
        .await
        .unwrap()
        - 1
}

/// Non-sentinel WAL entries of a shard that garbage collection left, as (position, epoch, rows).
pub async fn wal_entries(store: &Store, shard: Uuid) -> Vec<(u64, u64, usize)> {
    let t = WalTailer::open(store.clone(), shard).await.unwrap();
    let n = t.next_position().await.unwrap();
    let mut out = Vec::new();
    for p in 1..n {
        let e = match t.read(p).await {
            // Collected (below the low-water mark).
            Err(e) if e.code() == ErrorCode::Truncated => continue,
            e => e.unwrap().expect("gap-free WAL"),
        };
        if !e.is_sentinel {
            out.push((p, e.writer_epoch, e.num_rows()));
        }
    }
    out
}

/// Ids a fresh reader recovers.
pub async fn recovered_ids(store: &Store, shard: Uuid) -> Vec<i32> {
    let r = ShardReader::open(store.clone(), shard).await.unwrap();
    ids(&r.scan().await.unwrap().batches)
}

/// One put of `batches` on its own task, as a concurrent caller makes it.
pub fn spawn_put(
    w: &Arc<ShardWriter>,
    batches: Vec<RecordBatch>,
) -> JoinHandle<memwal_core::Result<WriteResult>> {
    let w = w.clone();
    tokio::spawn(async move { w.put(batches).await })
}

/// Every put of `puts` at once, each on its own task; their results in the order given.
pub async fn put_concurrently(
    w: &Arc<ShardWriter>,
    puts: impl IntoIterator<Item = Vec<RecordBatch>>,
) -> Vec<memwal_core::Result<WriteResult>> {
    let tasks = puts.into_iter().map(|batches| spawn_put(w, batches));
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.expect("put task panicked"))
        .collect()
}

/// `callers` concurrent tasks, each running `step` on its own ids one at a time and in order:
/// caller `t` takes ids `t * 1000 .. t * 1000 + steps`. Returns every step's output, caller by
/// caller. For many callers each making a stream of puts (`step` makes one put of `id`).
pub async fn run_callers<T, F, Fut>(callers: i32, steps: i32, step: F) -> Vec<T>
where
    F: Fn(i32) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = (0..callers)
        .map(|t| {
            let step = step.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                for id in t * 1000..t * 1000 + steps {
                    out.push(step(id).await);
                }
                out
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.extend(t.await.expect("caller task panicked"));
    }
    out
}

/// How long a test waits for something that must happen before calling it a hang. Only a
/// failing test ever waits this long, so it is generous: a loaded two-core machine must not
/// turn a slow success into a failure.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The output of `fut`, which must come within [`HANG_GUARD`]; panics naming `what` if not.
pub async fn within_hang_guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(HANG_GUARD, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} must not hang"))
}

/// Polls `cond` every millisecond (tokio time, so paused tests auto-advance) until it holds;
/// panics naming `what` after [`HANG_GUARD`]. For background effects no call reports (triggers,
/// tickers): a wait on a condition, never a blind sleep.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Like [`wait_until`], for a condition that needs the store.
pub async fn wait_until_async<F: Future<Output = bool>>(what: &str, mut cond: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Fails unless `fut` is still pending after the runtime has nothing else to do for `ms`
/// milliseconds (use under `start_paused`, where that is deterministic).
pub async fn assert_pending_for<T: std::fmt::Debug>(
    ms: u64,
    fut: &mut (impl Future<Output = T> + Unpin),
) {
    if let Ok(v) = tokio::time::timeout(Duration::from_millis(ms), fut).await {
        panic!("expected still pending after {ms} ms, got {v:?}");
    }
}

/// Whether the environment variable `var` is `1`: the long version of an exhaustive or
/// randomized test (more seeds, offsets or operations), run by hand rather than in CI.
pub fn long_run(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// Passes if a randomized test found no violations; otherwise fails listing every one (each
/// names the seed that replays it).
pub fn assert_no_violations(found: Vec<String>) {
    assert!(
        found.is_empty(),
        "{} violations:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// `e` is the fence a writer gets once a peer has claimed a higher epoch of its shard.
pub fn assert_peer_claimed(e: &memwal_core::Error) {
    assert_fenced(e, FenceReason::PeerClaimedEpoch, "peer claimed epoch");
}

/// `e` is the fence a writer gets once it cannot vouch for its WAL (a failed append).
pub fn assert_persistence_failure(e: &memwal_core::Error) {
    assert_fenced(e, FenceReason::PersistenceFailure, "persistence failure");
}

fn assert_fenced(e: &memwal_core::Error, reason: FenceReason, described: &str) {
    assert_eq!(e.code(), ErrorCode::Fenced, "{e}");
    assert_eq!(e.fence_reason(), Some(reason), "{e}");
    let prefix = format!("Writer fenced ({described}): ");
    assert!(e.to_string().starts_with(&prefix), "{e}");
}

/// `e` has code `code` and its message contains `text`.
pub fn assert_error(e: &memwal_core::Error, code: ErrorCode, text: &str) {
    assert_eq!(e.code(), code, "{e}");
    assert!(e.to_string().contains(text), "{e}");
}
