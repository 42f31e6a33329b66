//! A shard whose `manifest/` folder was deleted (or left out of a restore) while its WAL and
//! generations remain. Without a manifest nothing says which generations were committed or
//! where replay starts, so an open, a reader and a collection all refuse it as `Corrupt`,
//! naming the manifest folder, and write nothing; once the folder is restored the shard opens
//! as before.

mod support;

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use memwal_core::gc::{self, GcOptions};
use memwal_core::manifest::{ManifestStore, ShardManifest, encode_schema};
use memwal_core::wal::entry::encode_entry;
use memwal_core::{ErrorCode, ListedShard, ShardReader, Store, WriterConfig, list_shards};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use support::forwarding::{Forwarding, Hooks, StoreResult};
use support::*;

/// Durable, no background collection (tests collect when they choose).
fn manual_gc() -> WriterConfig {
    durable().with(|c| c.gc = false)
}

/// Removes every manifest version of `shard` (and the hint), as `rm -r manifest/` does;
/// returns them for a restore.
async fn delete_manifest_folder(backend: &Backend, shard: &Shard) -> Vec<(Path, bytes::Bytes)> {
    let dir = shard.store.shard_paths(shard.id).manifest_dir();
    let kept = backend.snapshot(&dir).await;
    assert!(!kept.is_empty());
    for (path, _) in &kept {
        backend.take(path).await;
    }
    kept
}

/// Every way in refuses the shard as `Corrupt` naming its manifest folder, and writes nothing.
async fn assert_refused(backend: &Backend, shard: &Shard) {
    let folder = shard.store.shard_paths(shard.id).manifest_dir();
    let before = backend.shard_objects(shard.id).await;
    let e = shard.try_open(manual_gc()).await.err().unwrap();
    assert_error(&e, ErrorCode::Corrupt, folder.as_ref());
    assert_error(&e, ErrorCode::Corrupt, "Restore the folder from a backup");
    let e = ShardReader::open(shard.store.clone(), shard.id)
        .await
        .unwrap_err();
    assert_error(&e, ErrorCode::Corrupt, folder.as_ref());
    let e = gc::collect(&shard.store, shard.id, &GcOptions::default())
        .await
        .unwrap_err();
    assert_error(&e, ErrorCode::Corrupt, folder.as_ref());
    assert_eq!(
        backend.shard_objects(shard.id).await,
        before,
        "{}: a refused open, read or collection wrote or removed something",
        backend.name
    );
}

#[tokio::test]
async fn a_shard_without_its_manifest_folder_is_refused_until_it_is_restored() {
    for (backend, shard) in each_layout() {
        // A generation (rows 0-1), then a writer of epoch 2 that left its sentinel and row 2
        // in the WAL.
        shard.close_after(manual_gc(), batch_per_id(0..2)).await;
        shard.crash_after(manual_gc(), batch_per_id(2..3)).await;
        let kept = delete_manifest_folder(&backend, &shard).await;
        assert_refused(&backend, &shard).await;
        // Listed as a shard (whose name is unknown), not as a first open cut off before it
        // wrote anything: opening it says what is wrong.
        let listing = list_shards(&shard.store).await.unwrap();
        assert_eq!(
            listing.shards,
            vec![ListedShard {
                id: shard.id,
                name: None
            }],
            "{}",
            backend.name
        );
        assert_eq!(
            listing.incomplete,
            Vec::<uuid::Uuid>::new(),
            "{}",
            backend.name
        );
        for (path, bytes) in kept {
            backend.plant(&path, bytes).await;
        }
        let w = shard.open(manual_gc()).await;
        shard.close_and_assert_recovered(w, 0..3).await;
    }
}

/// Generation folders alone (every WAL entry collected) say as much.
#[tokio::test]
async fn generation_folders_without_a_manifest_are_refused_too() {
    for (backend, shard) in each_layout() {
        shard.close_after(manual_gc(), batch_per_id(0..2)).await;
        gc::collect(&shard.store, shard.id, &GcOptions::default())
            .await
            .unwrap();
        let wal = shard.store.shard_paths(shard.id).wal_dir();
        assert_eq!(backend.object_names(&wal).await, Vec::<String>::new());
        delete_manifest_folder(&backend, &shard).await;
        assert_refused(&backend, &shard).await;
    }
}

/// Plants manifest version 1 of a shard the moment its WAL is first listed: a first writer
/// whose claim lands while another open looks at the shard's folder.
struct ClaimDuringListing {
    plain: Store,
    shard: uuid::Uuid,
    pending: Mutex<bool>,
}

#[async_trait::async_trait]
impl Hooks for ClaimDuringListing {
    fn list(
        &self,
        inner: &dyn ObjectStore,
        prefix: Option<&Path>,
    ) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        let listing = inner.list(prefix);
        let is_wal = prefix.is_some_and(|p| p.as_ref().ends_with("/wal"));
        if !is_wal || !std::mem::take(&mut *self.pending.lock().unwrap()) {
            return listing;
        }
        let manifests = ManifestStore::new(self.plain.clone(), self.plain.shard_paths(self.shard));
        let first = ShardManifest {
            shard_id: Some(memwal_core::manifest::ProtoUuid {
                uuid: self.shard.as_bytes().to_vec(),
            }),
            version: 1,
            writer_epoch: 1,
            current_generation: 1,
            arrow_schema: Some(encode_schema(&schema()).unwrap()),
            writer_id: "first".into(),
            ..Default::default()
        };
        futures::stream::once(async move {
            manifests.write(&first).await.unwrap();
            listing
        })
        .flatten()
        .boxed()
    }
}

/// WAL entries seen with no manifest may be a first writer's, whose manifest version 1 landed
/// after the look for it: the open looks again, and takes the shard over.
#[tokio::test]
async fn entries_of_a_first_writer_whose_claim_lands_meanwhile_are_not_taken_for_a_lost_manifest() {
    let mem = Arc::new(InMemory::new());
    let plain = Store::from_object_store(mem.clone(), Path::default(), "memory://plain");
    let id = uuid::Uuid::new_v4();
    let entry = plain.shard_paths(id).wal_entry(1);
    let probed = Arc::new(Forwarding {
        inner: mem.clone(),
        hooks: ClaimDuringListing {
            plain: plain.clone(),
            shard: id,
            pending: Mutex::new(true),
        },
    });
    object_store::ObjectStoreExt::put(
        mem.as_ref(),
        &entry,
        encode_entry(1, &[batch([7])]).unwrap().into(),
    )
    .await
    .unwrap();
    let shard = Shard::at(&probed.store("memory://probed"), id);
    let w = shard.open(manual_gc()).await;
    assert_eq!(w.epoch(), 2);
    shard.close_and_assert_recovered(w, [7]).await;
}
