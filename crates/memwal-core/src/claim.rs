//! [`Claim`]: a writer's hold on a shard, shared by the parts that act for it.
//!
//! Once a writer has claimed a shard (an epoch, under its writer id), four parts act for it:
//! the writer itself, its WAL appender, its generation flusher and its compactor. Each needs
//! the same things: the store and the shard's paths, its manifest versions, the epoch and writer
//! id that fence it (see `docs/fencing.md`, rule 3), and the shard's schema. One `Arc<Claim>`
//! holds them; nothing in it changes after the open that made it. The feedback channel back to
//! the writer is not part of it: it is how the tasks report, not what they act as.

use arrow_schema::SchemaRef;
use uuid::Uuid;

use crate::error::Result;
use crate::manifest::{ManifestStore, ShardManifest};
use crate::store::{ShardPaths, Store};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Claim {
    /// The store, counted into the writer's statistics.
    pub store: Store,
    /// The shard's object paths.
    pub paths: ShardPaths,
    /// The shard's manifest versions.
    pub manifests: ManifestStore,
    /// The epoch this writer claimed.
    pub epoch: u64,
    /// This writer's id, recorded with its epoch in every manifest version it writes.
    pub writer_id: String,
    /// The shard's schema.
    pub schema: SchemaRef,
}

impl Claim {
    /// The shard's id.
    pub fn shard_id(&self) -> Uuid {
        self.paths.shard_id()
    }

    /// `PeerClaimedEpoch` if a successor holds the shard (reads the manifest; never cached).
    pub async fn check_fenced(&self) -> Result<()> {
        self.manifests
            .check_fenced(self.epoch, &self.writer_id)
            .await
    }

    /// Commits a manifest version built by `prepare` from the latest, as this writer (see
    /// [`ManifestStore::commit_update`]).
    pub async fn commit(
        &self,
        prepare: impl FnMut(&ShardManifest) -> Option<ShardManifest>,
    ) -> Result<ShardManifest> {
        self.manifests
            .commit_update(self.epoch, &self.writer_id, prepare)
            .await
    }
}
