//! [`Shard`]: one shard in one store, and the steps and checks most tests make on it.

use std::collections::HashSet;

use arrow_array::RecordBatch;
use memwal_core::manifest::{ManifestStore, ShardManifest};
use memwal_core::{ShardWriter, Store, WalTailer, WriterConfig};
use uuid::Uuid;

use super::{on, open, recovered_ids, schema, wal_entries, wal_len};

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

    /// The existing shard `id` in `store`.
    pub fn at(store: &Store, id: Uuid) -> Self {
        Shard {
            store: store.clone(),
            id,
        }
    }

    /// This shard through another handle on its objects (another process's client).
    pub fn through(&self, store: Store) -> Shard {
        Shard::at(&store, self.id)
    }

    /// Opens a writer of this shard; panics on failure.
    pub async fn open(&self, config: WriterConfig) -> ShardWriter {
        open(&self.store, self.id, config).await
    }

    /// Opens a writer of this shard.
    pub async fn try_open(&self, config: WriterConfig) -> memwal_core::Result<ShardWriter> {
        ShardWriter::open(self.store.clone(), schema(), on(self.id, config)).await
    }

    /// A writer that made each batch of `puts` durable with a put of its own and then crashed
    /// (dropped without close), as a previous process leaves the shard.
    pub async fn crash_after(
        &self,
        config: WriterConfig,
        puts: impl IntoIterator<Item = RecordBatch>,
    ) {
        drop(self.open_and_put(config, puts).await);
    }

    /// A writer that put each batch of `puts` with a put of its own and then closed.
    pub async fn close_after(
        &self,
        config: WriterConfig,
        puts: impl IntoIterator<Item = RecordBatch>,
    ) {
        self.open_and_put(config, puts).await.close().await.unwrap();
    }

    /// A writer that has put each batch of `puts` with a put of its own.
    pub async fn open_and_put(
        &self,
        config: WriterConfig,
        puts: impl IntoIterator<Item = RecordBatch>,
    ) -> ShardWriter {
        let w = self.open(config).await;
        for b in puts {
            w.put(vec![b]).await.unwrap();
        }
        w
    }

    /// A writer of this shard whose store then fails the next `n` WAL puts (transiently).
    pub async fn open_failing_wal_puts(&self, config: WriterConfig, n: u64) -> ShardWriter {
        let w = self.open(config).await;
        self.store.faults().fail_wal_puts(n);
        w
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

    /// Rows of each non-sentinel WAL entry, in position order.
    pub async fn wal_rows(&self) -> Vec<usize> {
        self.wal_entries().await.iter().map(|e| e.2).collect()
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

    /// Closes `w` cleanly; a fresh reader then recovers exactly `expected`, in this order.
    pub async fn close_and_assert_recovered(
        &self,
        w: ShardWriter,
        expected: impl IntoIterator<Item = i32>,
    ) {
        w.close().await.unwrap();
        self.assert_recovered(expected).await;
    }

    /// A fresh reader recovers every id at most once.
    pub async fn assert_no_duplicates(&self) -> HashSet<i32> {
        let got = self.recovered_ids().await;
        let set: HashSet<i32> = got.iter().copied().collect();
        assert_eq!(set.len(), got.len(), "duplicate ids recovered: {got:?}");
        set
    }
}
