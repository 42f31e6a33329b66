//! The shard manifest through the public `ManifestStore` and the writer: how the first claim
//! initializes a shard, commits against concurrent handles, no caching, and how the latest version
//! is found (`docs/format.md`, "The shard manifest"; the listing rule of `docs/fencing.md`). Most
//! of these behaviours are Lance MemWAL's too (`docs/format.md`, "Compatibility with Lance"), which
//! finds the latest version from a hint instead.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use memwal_core::manifest::{FlushedGeneration, ManifestStore, ShardManifest, ShardStatus};
use memwal_core::{ErrorCode, ShardReader, Store};
use object_store::path::Path;
use object_store::{GetResult, ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};
use support::forwarding::{Forwarding, Get, Hooks, StoreResult, injected};
use support::*;

/// Counts listings of a manifest folder and HEADs of manifest versions, and can make the
/// listings fail (a transient 503), to observe how the latest version is found.
#[derive(Default)]
struct ManifestProbes {
    listings: AtomicU64,
    heads: AtomicU64,
    fail: AtomicBool,
}

fn is_manifest_version(path: &Path) -> bool {
    path.as_ref().contains("/manifest/") && path.as_ref().ends_with(".binpb")
}

#[async_trait]
impl Hooks for ManifestProbes {
    async fn get(&self, inner: &dyn ObjectStore, get: Get<'_>) -> StoreResult<GetResult> {
        if get.options.head && is_manifest_version(get.location) {
            self.heads.fetch_add(1, Ordering::SeqCst);
        }
        get.forward(inner).await
    }

    fn list(
        &self,
        inner: &dyn ObjectStore,
        prefix: Option<&Path>,
    ) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        if !prefix.is_some_and(|p| p.as_ref().ends_with("/manifest")) {
            return inner.list(prefix);
        }
        self.listings.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            let e = injected("probed", "503 Service Unavailable (injected)".into());
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        inner.list(prefix)
    }
}

type ProbedStore = Forwarding<ManifestProbes>;

/// A manifest as `claim_epoch`/`commit_update` return it: the stored checksum is not set.
fn without_checksum(m: ShardManifest) -> ShardManifest {
    ShardManifest {
        checksum: None,
        ..m
    }
}

fn probed() -> (Arc<ProbedStore>, Store) {
    let probed = Forwarding::in_memory(ManifestProbes::default());
    let store = probed.store("memory://probed");
    (probed, store)
}

// There is no separate step that initializes a shard: the first claim creates version 1 (epoch 1,
// generation 1, cursors 0, the shard id and schema), and every later claim carries the other fields
// over.
#[tokio::test]
async fn the_first_claim_initializes_the_shard() {
    for (backend, shard) in each_layout() {
        let w = shard.open(durable()).await;
        let m = shard.manifest().await;
        assert_eq!((m.version, m.writer_epoch), (1, 1), "{}", backend.name);
        assert_eq!(m.current_generation, 1);
        assert_eq!(m.replay_after_wal_entry_position, 0);
        assert_eq!(m.wal_entry_position_last_seen, 0);
        assert!(m.flushed_generations.is_empty());
        assert_eq!(m.shard_uuid(), Some(shard.id));
        assert_eq!(m.shard_spec_id, 0);
        assert_eq!(m.status, ShardStatus::Active as i32);
        assert_eq!(m.schema().unwrap().unwrap().fields(), schema().fields());
        w.put(vec![batch([1])]).await.unwrap();
        w.close().await.unwrap();
        let closed = shard.manifest().await;
        let w = shard.open(durable()).await;
        let m = shard.manifest().await;
        assert_eq!((m.version, m.writer_epoch), (closed.version + 1, 2));
        assert_eq!(m.flushed_generations, closed.flushed_generations);
        assert_eq!(
            m.replay_after_wal_entry_position,
            closed.replay_after_wal_entry_position
        );
        assert_eq!(m.current_generation, closed.current_generation);
        w.close().await.unwrap();
    }
}

// A reader holds no manifest cache; it sees later commits.
#[tokio::test]
async fn a_reader_observes_later_commits() {
    for (backend, shard) in each_layout() {
        let w = shard.open(durable()).await;
        let r = ShardReader::open(backend.store.clone(), shard.id)
            .await
            .unwrap();
        assert_eq!(r.manifest().await.unwrap().version, 1);
        w.put(vec![batch([1])]).await.unwrap();
        assert_eq!(ids(&r.scan().await.unwrap().batches), vec![1]);
        w.force_seal_active().await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
        let m = r.manifest().await.unwrap();
        assert_eq!(m.version, 2, "{}", backend.name);
        assert_eq!(m.flushed_generations.len(), 1);
        assert_eq!(ids(&r.scan().await.unwrap().batches), vec![1]);
        w.close().await.unwrap();
    }
}

// A commit after another handle's commit at the same epoch is rebuilt on top of it; neither change
// is lost.
#[tokio::test]
async fn a_commit_builds_on_a_concurrent_commit_of_the_same_epoch() {
    let (backend, shard) = Backend::memory().with_shard();
    let h1 = shard.manifests();
    let h2 = ManifestStore::new(backend.store.clone(), backend.store.shard_paths(shard.id));
    let claimed = h1.claim_epoch(&schema(), "w").await.unwrap();
    let epoch = claimed.writer_epoch;
    let seven = FlushedGeneration {
        generation: 7,
        path: "0000abcd_gen_7".into(),
        ..Default::default()
    };
    h1.commit_update(epoch, "w", |latest| {
        let mut next = latest.clone();
        next.flushed_generations.push(seven.clone());
        next.current_generation = 8;
        Some(next)
    })
    .await
    .unwrap();
    let mut seen_versions = Vec::new();
    let m = h2
        .commit_update(epoch, "w", |latest| {
            seen_versions.push(latest.version);
            let mut next = latest.clone();
            next.replay_after_wal_entry_position = 42;
            Some(next)
        })
        .await
        .unwrap();
    assert_eq!(seen_versions, vec![claimed.version + 1]);
    assert_eq!(m.version, claimed.version + 2);
    assert_eq!(m.flushed_generations, vec![seven]);
    assert_eq!(m.current_generation, 8);
    assert_eq!(m.replay_after_wal_entry_position, 42);
    assert_eq!(without_checksum(shard.manifest().await), m);
}

// The caller cannot commit a version out of sequence; `commit_update` always writes the successor
// of the version it read.
#[tokio::test]
async fn a_commit_always_writes_the_successor_version() {
    let (_backend, shard) = Backend::memory().with_shard();
    let h = shard.manifests();
    let claimed = h.claim_epoch(&schema(), "w").await.unwrap();
    let m = h
        .commit_update(claimed.writer_epoch, "w", |latest| {
            let mut next: ShardManifest = latest.clone();
            next.version = latest.version + 5;
            next.writer_epoch = 99;
            next.current_generation = 3;
            Some(next)
        })
        .await
        .unwrap();
    assert_eq!(m.version, claimed.version + 1);
    assert_eq!(
        m.writer_epoch, claimed.writer_epoch,
        "the epoch is ours, not the closure's"
    );
    assert_eq!(h.latest_version().await.unwrap(), claimed.version + 1);
    for v in 1..=claimed.version + 1 {
        assert!(h.read_version(v).await.unwrap().is_some(), "version {v}");
    }
    assert_eq!(shard.manifest().await.current_generation, 3);
}

// A commit by an older epoch fails with `PeerClaimedEpoch` and writes nothing.
#[tokio::test]
async fn a_commit_of_a_fenced_epoch_writes_nothing() {
    let (_backend, shard) = Backend::memory().with_shard();
    let h = shard.manifests();
    let old = h.claim_epoch(&schema(), "a").await.unwrap();
    let new = h.claim_epoch(&schema(), "b").await.unwrap();
    assert_eq!(new.writer_epoch, old.writer_epoch + 1);
    let e = h
        .commit_update(old.writer_epoch, "a", |l| Some(l.clone()))
        .await
        .unwrap_err();
    assert_eq!(
        e.fence_reason(),
        Some(memwal_core::FenceReason::PeerClaimedEpoch)
    );
    assert_eq!(without_checksum(shard.manifest().await), new);
}

// A failed listing while finding the latest version is an error, not "no manifest": the writer's
// fence check is not reported clear, an open claims nothing, and everything works again once the
// store heals.
#[tokio::test]
async fn a_failed_listing_is_an_error_never_the_end_of_the_versions() {
    let (probed, store) = probed();
    let shard = Shard::new(&store);
    let w = shard.open(durable()).await;
    w.put(vec![batch([1])]).await.unwrap();
    let before = shard.manifest().await;

    probed.hooks.fail.store(true, Ordering::SeqCst);
    let e = w.check_fenced().await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
    assert!(e.to_string().contains("manifest"), "{e}");
    assert!(
        e.causes().iter().any(|c| c.contains("503")),
        "{:?}",
        e.causes()
    );
    let e = shard.try_open(durable()).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
    assert!(shard.manifests().latest_version().await.is_err());
    let e = ShardReader::open(store.clone(), shard.id)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");

    probed.hooks.fail.store(false, Ordering::SeqCst);
    assert_eq!(
        shard.manifest().await,
        before,
        "the failed open claimed nothing"
    );
    w.check_fenced().await.unwrap();
    w.put(vec![batch([2])]).await.unwrap();
    w.close().await.unwrap();
    shard.assert_recovered([1, 2]).await;
}

// The latest version is the highest listed (see `docs/fencing.md`): one listing, whatever the
// version hint says (a hint is only for Lance readers), and no HEADs, however far behind the
// hint is.
#[tokio::test]
async fn finding_the_latest_version_costs_one_listing_whatever_the_hint() {
    let (probed, store) = probed();
    let shard = Shard::new(&store);
    let h = shard.manifests();
    let claimed = h.claim_epoch(&schema(), "w").await.unwrap();
    for _ in 0..150 {
        h.commit_update(claimed.writer_epoch, "w", |l| {
            let mut n = l.clone();
            n.wal_entry_position_last_seen += 1;
            Some(n)
        })
        .await
        .unwrap();
    }
    let latest = claimed.version + 150;
    let hint = store.shard_paths(shard.id).version_hint();
    for lag in [0, 1, 10, 100] {
        let planted = format!("{{\"version\":{}}}", latest - lag);
        store_put(&probed, &hint, planted).await;
        probed.hooks.listings.store(0, Ordering::SeqCst);
        probed.hooks.heads.store(0, Ordering::SeqCst);
        assert_eq!(h.latest_version().await.unwrap(), latest);
        let counts = (
            probed.hooks.listings.load(Ordering::SeqCst),
            probed.hooks.heads.load(Ordering::SeqCst),
        );
        assert_eq!(counts, (1, 0), "lag {lag}");
    }
}

async fn store_put(probed: &ProbedStore, path: &Path, text: String) {
    probed
        .inner
        .put(path, PutPayload::from(Bytes::from(text)))
        .await
        .unwrap();
}
