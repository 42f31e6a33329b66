//! [`Backend`]: a store kind to run a test on (a temp directory, or memory), with raw access to
//! its objects for planting what a misbehaving process could have left.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use memwal_core::Store;
use memwal_core::wal::WalLayout;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use uuid::Uuid;

use super::Shard;

/// A named store kind, for running one test on every backend.
pub struct Backend {
    pub name: &'static str,
    pub store: Store,
    /// The same objects without memwal's wrapper (no faults), for planting objects a
    /// misbehaving process could have written.
    raw: Arc<dyn ObjectStore>,
    dir: Option<tempfile::TempDir>,
}

impl Backend {
    pub fn memory() -> Self {
        let raw: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        Backend {
            name: "memory",
            store: Store::from_object_store(raw.clone(), Path::default(), "memory://test"),
            raw,
            dir: None,
        }
    }

    pub fn local() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Objects, which `Store::local` gives new shards only on a network file system.
        let store = Store::local(dir.path())
            .unwrap()
            .with_new_shard_wal_layout(WalLayout::Objects);
        Backend {
            name: "local",
            store,
            // `Store::local` paths are relative to its directory.
            raw: Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap(),
            ),
            dir: Some(dir),
        }
    }

    /// A local directory whose new shards use the segment-log WAL.
    pub fn local_segments() -> Self {
        let local = Backend::local();
        Backend {
            name: "local-segments",
            store: local.store.with_new_shard_wal_layout(WalLayout::Segments),
            ..local
        }
    }

    /// Whether new shards of this backend use the segment-log WAL.
    pub fn segments(&self) -> bool {
        self.name == "local-segments"
    }

    /// One of each kind of store: a local directory and memory (both with one object per WAL
    /// entry, the layout the tests that look at WAL objects need).
    pub fn all() -> Vec<Backend> {
        vec![Backend::local(), Backend::memory()]
    }

    /// Every WAL layout: a local directory with each, and memory.
    pub fn every_layout() -> Vec<Backend> {
        vec![
            Backend::local(),
            Backend::local_segments(),
            Backend::memory(),
        ]
    }

    /// This backend with a new shard in it: `let (backend, shard) = Backend::memory().with_shard();`.
    pub fn with_shard(self) -> (Backend, Shard) {
        let shard = Shard::new(&self.store);
        (self, shard)
    }

    /// A new, empty backend of the same kind.
    pub fn fresh(&self) -> Backend {
        match self.dir {
            Some(_) if self.segments() => Backend::local_segments(),
            Some(_) => Backend::local(),
            None => Backend::memory(),
        }
    }

    /// The temp directory of a local backend.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.dir.as_ref().map(|d| d.path())
    }

    /// Another handle on the same objects with its own fault controller, as a second process
    /// would have.
    pub fn second_handle(&self) -> Store {
        match &self.dir {
            Some(dir) => Store::local(dir.path())
                .unwrap()
                .with_new_shard_wal_layout(self.store.new_shard_wal_layout()),
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

    /// Writes `bytes` as WAL entry `position` of `shard`, bypassing memwal; returns its path.
    pub async fn plant_wal_entry(&self, shard: Uuid, position: u64, bytes: Bytes) -> Path {
        let path = self.store.shard_paths(shard).wal_entry(position);
        self.plant(&path, bytes).await;
        path
    }

    /// Deletes the object at `path`, bypassing memwal (as a person or a lifecycle rule
    /// would); returns its bytes.
    pub async fn take(&self, path: &Path) -> Bytes {
        let bytes = self.raw_get(path).await.expect("an object to take");
        self.raw.delete(path).await.unwrap();
        bytes
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

    /// Names of every object in `shard`'s directory, sorted.
    pub async fn shard_objects(&self, shard: Uuid) -> Vec<String> {
        let dir = self.store.shard_paths(shard).shard_dir().clone();
        self.object_names(&dir).await
    }
}

/// Every WAL layout's backend, each with a new shard in it: for tests of what works alike on
/// both layouts.
pub fn each_layout() -> Vec<(Backend, Shard)> {
    Backend::every_layout()
        .into_iter()
        .map(Backend::with_shard)
        .collect()
}

/// Every backend, each with a new shard in it: `for (backend, shard) in each_backend()`.
pub fn each_backend() -> Vec<(Backend, Shard)> {
    Backend::all()
        .into_iter()
        .map(Backend::with_shard)
        .collect()
}
