//! Shared harness for memwal-core integration tests: the test schema and batches, a
//! [`Backend`] per store kind, the usual writer configs, a [`Shard`] with the checks most
//! tests make, and waits that fail instead of hanging. Each test file includes it with
//! `mod support;` and uses what it needs, hence `dead_code` is allowed here.
//!
//! - [`forwarding`]: an `ObjectStore` wrapper with hooks around puts and gets, for tests that
//!   watch or break individual store operations.
//! - [`seeded`]: the seeded generator and seed selection of the randomized tests.
//!
//! `s3.rs` (an in-process S3 server) is not part of this module: only the files that use it
//! compile it.
#![allow(dead_code)]

pub mod forwarding;
pub mod seeded;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use memwal_core::manifest::{ManifestStore, ShardManifest};
use memwal_core::{
    ErrorCode, FenceReason, ShardReader, ShardWriter, Store, WalTailer, WriterConfig,
};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use uuid::Uuid;

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

/// A named store kind, for running one test on every backend.
pub struct Backend {
    pub name: &'static str,
    pub store: Store,
    /// The same objects without memwal's wrapper (no faults), for planting objects a
    /// misbehaving process could have written.
    raw: Arc<dyn ObjectStore>,
    _dir: Option<tempfile::TempDir>,
}

impl Backend {
    pub fn memory() -> Self {
        let raw: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        Backend {
            name: "memory",
            store: Store::from_object_store(raw.clone(), Path::default(), "memory://test"),
            raw,
            _dir: None,
        }
    }

    pub fn local() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::local(dir.path()).unwrap();
        Backend {
            name: "local",
            store,
            // `Store::local` paths are relative to its directory.
            raw: Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap(),
            ),
            _dir: Some(dir),
        }
    }

    /// Another handle on the same objects with its own fault controller, as a second process
    /// would have.
    pub fn second_handle(&self) -> Store {
        match &self._dir {
            Some(dir) => Store::local(dir.path()).unwrap(),
            None => Store::from_object_store(self.raw.clone(), Path::default(), "memory://test"),
        }
    }

    /// Writes `bytes` at `path` directly, bypassing memwal (and its put-if-absent).
    pub async fn plant(&self, path: &Path, bytes: Bytes) {
        self.raw
            .put(path, PutPayload::from_bytes(bytes))
            .await
            .unwrap();
    }

    /// The object at `path` as stored, bypassing memwal; `None` if there is none.
    pub async fn raw_get(&self, path: &Path) -> Option<Bytes> {
        match self.raw.get(path).await {
            Ok(r) => Some(r.bytes().await.unwrap()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("reading {path}: {e}"),
        }
    }

    /// Every object under `prefix` with its bytes, sorted by path.
    pub async fn snapshot(&self, prefix: &Path) -> Vec<(Path, Bytes)> {
        use futures::TryStreamExt;
        let mut paths: Vec<Path> = self
            .raw
            .list(Some(prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .unwrap();
        paths.sort();
        let mut out = Vec::new();
        for path in paths {
            let bytes = self.raw_get(&path).await.expect("listed object");
            out.push((path, bytes));
        }
        out
    }

    /// A new, empty backend of the same kind.
    pub fn fresh(&self) -> Backend {
        match self._dir {
            Some(_) => Backend::local(),
            None => Backend::memory(),
        }
    }

    /// Writes a file named `name` (which may be one `object_store` refuses to write, such as
    /// its own `name#1` staging files) in directory `dir`, as a crashed process could have
    /// left it.
    pub async fn plant_file(&self, dir: &Path, name: &str, bytes: &[u8]) {
        match self.path() {
            Some(root) => {
                let mut p = root.to_path_buf();
                for part in dir.parts() {
                    p.push(part.as_ref());
                }
                std::fs::create_dir_all(&p).unwrap();
                std::fs::write(p.join(name), bytes).unwrap();
            }
            None => {
                self.plant(&dir.clone().join(name), Bytes::copy_from_slice(bytes))
                    .await
            }
        }
    }

    /// Names of every object under `prefix`, sorted.
    pub async fn object_names(&self, prefix: &Path) -> Vec<String> {
        use futures::TryStreamExt;
        let mut names: Vec<String> = self
            .raw
            .list(Some(prefix))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        names.sort();
        names
    }

    /// One of each.
    pub fn all() -> Vec<Backend> {
        vec![Backend::local(), Backend::memory()]
    }

    pub fn path(&self) -> Option<&std::path::Path> {
        self._dir.as_ref().map(|d| d.path())
    }
}

/// Durable config with no ticker and big limits (reference §8 "durable cfg").
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

/// `config` bound to `shard`.
pub fn on(shard: Uuid, config: WriterConfig) -> WriterConfig {
    WriterConfig {
        shard_id: Some(shard),
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

/// Non-sentinel WAL entries of a shard, as (position, epoch, rows).
pub async fn wal_entries(store: &Store, shard: Uuid) -> Vec<(u64, u64, usize)> {
    let t = WalTailer::open(store.clone(), shard).await.unwrap();
    let n = t.next_position().await.unwrap();
    let mut out = Vec::new();
    for p in 1..n {
        let e = t.read(p).await.unwrap().expect("gap-free WAL");
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

/// How long a test waits for something that must happen before calling it a hang. Only a
/// failing test ever waits this long, so it is generous: a loaded two-core machine must not
/// turn a slow success into a failure.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

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
    assert_eq!(e.code(), ErrorCode::Fenced, "{e}");
    assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch), "{e}");
    assert!(
        e.to_string()
            .starts_with("Writer fenced (peer claimed epoch): "),
        "{e}"
    );
}

/// One shard in one store, with the checks most tests make.
#[derive(Clone)]
pub struct Shard {
    pub store: Store,
    pub id: Uuid,
}

impl Shard {
    /// A new shard id in `store`.
    pub fn new(store: &Store) -> Self {
        Shard {
            store: store.clone(),
            id: Uuid::new_v4(),
        }
    }

    /// Opens a writer of this shard; panics on failure.
    pub async fn open(&self, config: WriterConfig) -> ShardWriter {
        open(&self.store, self.id, config).await
    }

    /// Opens a writer of this shard.
    pub async fn try_open(&self, config: WriterConfig) -> memwal_core::Result<ShardWriter> {
        ShardWriter::open(self.store.clone(), schema(), on(self.id, config)).await
    }

    /// The manifest store of this shard (what an external process would use).
    pub fn manifests(&self) -> ManifestStore {
        ManifestStore::new(self.store.clone(), self.store.shard_paths(self.id))
    }

    /// The latest manifest; panics if there is none.
    pub async fn manifest(&self) -> ShardManifest {
        self.manifests()
            .read_latest()
            .await
            .unwrap()
            .expect("shard has a manifest")
    }

    pub async fn tailer(&self) -> WalTailer {
        WalTailer::open(self.store.clone(), self.id).await.unwrap()
    }

    /// WAL entries, sentinels included.
    pub async fn wal_len(&self) -> u64 {
        wal_len(&self.store, self.id).await
    }

    /// Non-sentinel WAL entries as (position, epoch, rows).
    pub async fn wal_entries(&self) -> Vec<(u64, u64, usize)> {
        wal_entries(&self.store, self.id).await
    }

    /// Ids a fresh `ShardReader` recovers, in order.
    pub async fn recovered_ids(&self) -> Vec<i32> {
        recovered_ids(&self.store, self.id).await
    }

    /// A fresh reader recovers exactly `expected`, in this order.
    pub async fn assert_recovered(&self, expected: impl IntoIterator<Item = i32>) {
        let expected: Vec<i32> = expected.into_iter().collect();
        assert_eq!(self.recovered_ids().await, expected, "recovered ids");
    }

    /// A fresh reader recovers every id at most once.
    pub async fn assert_no_duplicates(&self) -> HashSet<i32> {
        let got = self.recovered_ids().await;
        let set: HashSet<i32> = got.iter().copied().collect();
        assert_eq!(set.len(), got.len(), "duplicate ids recovered: {got:?}");
        set
    }
}
