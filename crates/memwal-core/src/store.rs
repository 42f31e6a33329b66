//! The store memwal writes to.
//!
//! [`Store`] is the few operations memwal needs, on a [`Backend`]: create-if-absent (the only
//! way a WAL entry, manifest version or generation file is ever written), gets, existence
//! probes, listings, deletes, the one best-effort overwrite, and making objects durable. A
//! `Store` is built from a location ([`Store::from_uri`]): a local directory, `memory://`, or a
//! cloud bucket (`cloud`). Every operation goes through the fault controller's two looks at it
//! ([`call`]), so that a test can hold any call of any actor.
//!
//! # Parts
//! - [`backend`]: the [`Backend`] trait, and the sync-failure rule every backend follows.
//! - [`local`] and [`fs`]: memwal's own backend on a local directory, and the file-system
//!   operations it syncs through.
//! - [`object`]: any `object_store` store as a backend; `cloud` (private) builds the S3, GCS and
//!   Azure ones, one table row each.
//! - [`counting`]: the wrapper backend that counts a writer's requests for its statistics.
//! - [`paths`]: every object path (`bitrev64` file names, `_mem_wal/<shard>/…`), built there
//!   and nowhere else; re-exported here.
//! - [`call`]: who makes a store call, and what it does, as the fault controller sees it.
//! - `faults` and `sim_fs`, with the `testing` feature only (Rust tests, and the Node addon
//!   for JavaScript's `ObjectStore.faults`): every backend is then wrapped in
//!   `faults::FaultInjectingBackend`, whose faults are all off unless a test switches them on,
//!   and `sim_fs::SimFs` simulates power loss under the local store; both draw their seeded
//!   choices from `splitmix64`. Without the feature, `faults` is a no-op whose pause points
//!   compile to nothing.
//!
//! # Durability of the local store
//! A local directory is served by [`local::LocalStore`]: a put writes a staging file,
//! `fdatasync`s it, hard-links it to its final name (which fails if the name exists, giving
//! put-if-not-exists), `fsync`s the file (its link count, which a file system without a
//! journal writes only then), then `fsync`s the parent directory; the first put into a
//! directory also syncs it and its ancestors, whether or not they already existed. Its persistence points go through the [`fs::Fs`] trait, so that a power-loss
//! simulator can replace the disk in tests.
//!
//! A failed sync is the one store error that must never be retried: [`is_sync_failure`] is
//! the single place that says whether an error is one.

pub mod backend;
pub mod call;
mod cloud;
pub mod counting;
#[cfg(feature = "testing")]
pub mod faults;
/// The fault controller of a production build: no faults, no cost.
#[cfg(not(feature = "testing"))]
#[path = "store/no_faults.rs"]
pub mod faults;
pub mod fs;
pub mod local;
pub mod object;
pub mod paths;
#[cfg(feature = "testing")]
pub mod sim_fs;
#[cfg(feature = "testing")]
pub mod splitmix64;
pub mod wal_layout;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::redact::redact_secrets;
use call::{StoreOp, When};
use faults::Faults;
use fs::{Fs, StdFs};
use local::LocalStore;
use object::ObjectBackend;
pub use paths::{
    GENERATION_FILE_NAME, MEM_WAL_DIR, ShardPaths, bitrev64_name, parse_bitrev64_name, random8hex,
};

pub(crate) use backend::caused_by_sync_failure;
pub use backend::{Backend, FirstFree, LocalFiles, Staged, SyncFailure, is_sync_failure};
pub use wal_layout::WalLayout;

/// Outcome of a create-if-absent put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// We created the object.
    Created,
    /// An object already existed at that path; nothing was written.
    AlreadyExists,
}

/// A handle on an object store plus the root prefix memwal works under. Cheap to clone;
/// clones share the underlying store and its fault controller.
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
    root: Path,
    faults: Arc<Faults>,
    location: String,
    /// What an object's path is appended to for a location other tools can open
    /// ([`Store::uri_of`]): the local directory, `memory://NAME`, or `scheme://bucket` (never
    /// the credentials a location URI may carry).
    object_base: String,
    /// Whether conditional create must be verified before a writer trusts this store (every
    /// store but memwal's own local and in-memory ones), and whether it was.
    create_check: Arc<tokio::sync::OnceCell<()>>,
    needs_create_check: bool,
    /// Time allowed to a best-effort request ([`Store::put_overwrite`]) before memwal goes on
    /// without it; `None`: no limit of its own. Set for remote stores only: a local read that outlasts it under a paused test clock
    /// would be cut short for nothing.
    best_effort_budget: Option<Duration>,
    /// A name a test gives this handle (`Store::with_label`), so that a stall can hold the
    /// calls of one writer and not another's on the same store.
    label: Option<Arc<str>>,
    /// Whose calls go through this handle when no actor scope says otherwise (readers and
    /// tailers keep a handle of their own; see [`call`]).
    actor: call::Actor,
    /// The WAL layout a writer gives a new shard when its options name none
    /// ([`Store::with_new_shard_wal_layout`]).
    new_shard_wal_layout: WalLayout,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish()
    }
}

fn memory_registry() -> &'static Mutex<HashMap<String, Store>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Store>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Store {
    /// A local directory, with fsync of files and directories on. The directory (and its
    /// parents) is created on the first write, so a reader never creates anything. New shards
    /// get the object layout unless [`Store::with_new_shard_wal_layout`] says otherwise (the
    /// segment layout becomes the default for local directories once every suite runs on it).
    pub fn local(dir: impl AsRef<std::path::Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.as_os_str().is_empty() {
            return Err(Error::invalid(
                "local store path is empty; pass a directory such as ./data",
            ));
        }
        let abs = std::path::absolute(dir).map_err(|e| {
            Error::io(
                format!("cannot resolve local store path {}", dir.display()),
                e,
            )
        })?;
        if abs.exists() && !abs.is_dir() {
            return Err(Error::invalid(format!(
                "local store path {} exists but is not a directory; pass a directory",
                abs.display()
            )));
        }
        Ok(Self::on_fs(Arc::new(StdFs), abs, true))
    }

    /// A store in directory `dir` of `fs` (absolute). `fsync: false` makes nothing durable
    /// across a power loss: only for tests that must see that happen.
    pub fn on_fs(fs: Arc<dyn Fs>, dir: std::path::PathBuf, fsync: bool) -> Self {
        let faults = Arc::new(Faults::default());
        let location = dir.display().to_string();
        let local = Arc::new(LocalStore::new(fs, dir, fsync, faults.clone()));
        Self::with_faults(local, Path::default(), location, faults)
    }

    /// A fresh, private in-memory store (nothing survives the process).
    pub fn memory() -> Self {
        Self::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory://")
    }

    /// The in-process in-memory store registered under `name`: every call with the same name
    /// returns a handle on the same objects (and the same fault controller), so two writers in
    /// one process can race on it.
    pub fn named_memory(name: &str) -> Self {
        let mut reg = memory_registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.entry(name.to_string())
            .or_insert_with(|| {
                Self::from_object_store(
                    Arc::new(InMemory::new()),
                    Path::default(),
                    format!("memory://{name}"),
                )
            })
            .clone()
    }

    /// Forgets the in-process store registered under `name` (`memory://NAME`); returns whether
    /// there was one. Named stores otherwise live until the process exits, so a process that
    /// makes many of them (tests, short-lived tenants) would keep every one's objects.
    ///
    /// The next open of `memory://NAME` gets a new, empty store. Handles already open on the
    /// old one (writers, readers, `ObjectStore`s) keep working on it; its memory is freed when
    /// the last of them is dropped.
    pub fn drop_named_memory(name: &str) -> bool {
        let mut reg = memory_registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.remove(name).is_some()
    }

    /// Parses a location: `file:///abs/path`, `memory://NAME`, or a plain local path; with the
    /// `s3`/`gcs`/`azure` features also `s3://bucket/prefix`, `gs://bucket/prefix` and
    /// `az://container/prefix` (credentials from the usual environment variables).
    pub fn from_uri(uri: &str) -> Result<Self> {
        Self::from_uri_with(uri, &[])
    }

    /// [`Store::from_uri`] with storage options for object stores: `object_store`
    /// configuration keys such as `region`, `endpoint`, `allow_http`, `access_key_id`,
    /// `secret_access_key`, `session_token`. They override the environment.
    pub fn from_uri_with(uri: &str, options: &[(String, String)]) -> Result<Self> {
        if let Some((scheme, _)) = uri.split_once("://")
            && cloud::is_cloud_scheme(scheme)
        {
            let opened = cloud::open(scheme, uri, options)?;
            let mut store = Self::from_object_store(opened.object_store, opened.root, uri);
            store.best_effort_budget = Some(cloud::BEST_EFFORT_BUDGET);
            store.object_base = opened.base;
            return Ok(store);
        }
        let shown = redact_secrets(uri);
        if !options.is_empty() {
            return Err(Error::invalid(format!(
                "storage options apply to object stores (s3://, gs://, az://), not to {shown}"
            )));
        }
        if uri.is_empty() {
            return Err(Error::invalid(
                "location is empty; pass a local directory, file:///abs/path or memory://NAME",
            ));
        }
        if let Some(rest) = uri.strip_prefix("memory://") {
            return Ok(Self::named_memory(rest));
        }
        if let Some(rest) = uri.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(Error::invalid(format!(
                    "file URI {shown} must be absolute (file:///abs/path); use a plain path for relative directories"
                )));
            }
            return Self::local(rest);
        }
        if let Some((scheme, _)) = uri.split_once("://") {
            return Err(Error::invalid(format!(
                "unsupported location scheme `{scheme}://` in {shown}; use a local path, file:///abs/path or memory://NAME"
            )));
        }
        Self::local(uri)
    }

    /// Wraps any `object_store` implementation (used for tests and custom backends). Objects go
    /// under `root`.
    pub fn from_object_store(
        object_store: Arc<dyn ObjectStore>,
        root: Path,
        location: impl Into<String>,
    ) -> Self {
        let backend = Arc::new(ObjectBackend(object_store));
        let mut s = Self::with_faults(backend, root, location, Arc::new(Faults::default()));
        s.needs_create_check = true;
        s
    }

    /// Every store is built here. With the `testing` feature its backend is wrapped in the
    /// fault injector that `faults` switches; without it there is nothing to wrap.
    fn with_faults(
        backend: Arc<dyn Backend>,
        root: Path,
        location: impl Into<String>,
        faults: Arc<Faults>,
    ) -> Self {
        let location: String = location.into();
        #[cfg(feature = "testing")]
        let backend: Arc<dyn Backend> =
            Arc::new(faults::FaultInjectingBackend::new(backend, faults.clone()));
        Store {
            backend,
            root,
            faults,
            // `location` is shown (errors, logs, `ObjectStore.location`, the CLI); the object
            // base is not shown as such but joined to object paths for other tools, which
            // need the real directory (a cloud store replaces it by one without credentials).
            location: redact_secrets(&location).into_owned(),
            object_base: location,
            create_check: Arc::new(tokio::sync::OnceCell::new()),
            needs_create_check: false,
            best_effort_budget: None,
            label: None,
            actor: call::Actor::Other,
            new_shard_wal_layout: WalLayout::Objects,
        }
    }

    /// This store with every request counted into `stats` (see [`counting`]): what a writer
    /// works through, so that its statistics count its requests and no other handle's.
    pub(crate) fn counted(&self, stats: Arc<crate::stats::StatsRecorder>) -> Store {
        let mut s = self.clone();
        s.backend = Arc::new(counting::CountingBackend::new(self.backend.clone(), stats));
        s
    }

    /// This store under `label`: the same objects and fault controller, with every call
    /// through this handle (and the writers, readers and collections opened on it) carrying
    /// the label, so that a stall can single it out (`faults::Stall::label`).
    pub fn with_label(&self, label: &str) -> Store {
        let mut s = self.clone();
        s.label = Some(Arc::from(label));
        s
    }

    /// This store, with new shards (opened without a `wal_layout` option) laid out as
    /// `layout`. Ignored for `Segments` on an object store, which only has objects.
    pub fn with_new_shard_wal_layout(&self, layout: WalLayout) -> Store {
        let mut s = self.clone();
        s.new_shard_wal_layout = layout;
        s
    }

    /// The WAL layout a new shard gets when its writer's options name none.
    pub fn new_shard_wal_layout(&self) -> WalLayout {
        match self.new_shard_wal_layout {
            WalLayout::Segments if self.local_files().is_none() => WalLayout::Objects,
            layout => layout,
        }
    }

    /// This handle with its calls attributed to `actor` where no actor scope is set.
    pub(crate) fn acting_as(&self, actor: call::Actor) -> Store {
        let mut s = self.clone();
        s.actor = actor;
        s
    }

    /// Runs `call`, one `op` on `path`, between the fault controller's two looks at it (see
    /// [`call`]).
    async fn call<T>(
        &self,
        op: StoreOp,
        path: &Path,
        call: impl Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        let (label, actor) = (self.label.as_deref(), self.actor);
        self.faults
            .store_call(label, actor, op, path, When::Before)
            .await?;
        let out = call.await;
        // An injected failure after the call replaces its answer: the call happened.
        self.faults
            .store_call(label, actor, op, path, When::After)
            .await?;
        out
    }

    /// Sets the time a best-effort request (the manifest's version hint) may take before it
    /// is given up as failed; `None` removes the limit. Remote stores have one by default
    /// (two seconds); a test may shorten it.
    pub fn set_best_effort_budget(&mut self, budget: Option<Duration>) {
        self.best_effort_budget = budget;
    }

    /// Verifies, once per store, that it really refuses to overwrite on create
    /// (put-if-not-exists): WAL fencing depends on it. A store that accepts the second create
    /// (or cannot do conditional creates at all) is refused with a clear error instead of
    /// silently losing data to a stale writer.
    pub async fn check_conditional_create(&self) -> Result<()> {
        if !self.needs_create_check {
            return Ok(());
        }
        self.create_check
            .get_or_try_init(|| async {
                let probe = self
                    .root
                    .clone()
                    .join(MEM_WAL_DIR)
                    .join(".create-probe")
                    .join(uuid::Uuid::new_v4().to_string().as_str());
                let unsafe_store = |why: String| {
                    Error::invalid(format!(
                        "the object store at {} cannot be used by a writer: {why}. memwal needs conditional create (put-if-not-exists, e.g. S3 `If-None-Match: *`) to fence stale writers; use a store that supports it (AWS S3, GCS, Azure, or an S3-compatible server with conditional writes)",
                        self.location
                    ))
                };
                let first = self
                    .put_if_absent(&probe, Bytes::from_static(b"1"))
                    .await
                    .map_err(|e| match e {
                        object_store::Error::NotImplemented { .. } => {
                            unsafe_store(format!("it does not implement conditional create ({e})"))
                        }
                        // A timeout says nothing about conditional writes: `Error::io` reports
                        // it as a timeout, under the short message.
                        e if crate::error::is_timeout(&e) => Error::io(
                            format!("probing conditional create at {}", self.location),
                            e,
                        ),
                        // Nor does a store that was never reached: say so, not that it may
                        // lack conditional writes.
                        e if crate::error::is_unreachable(&e) => Error::io(
                            format!(
                                "could not reach the object store at {} (no connection could be made while probing conditional create). Check the endpoint's host and port, and that the store is running and reachable from this machine",
                                self.location
                            ),
                            e,
                        ),
                        e => Error::io(
                            format!(
                                "probing conditional create at {}: a create-if-absent put failed. If the error persists, the store may not support conditional writes (S3 `If-None-Match: *`), which a writer needs to fence stale writers",
                                self.location
                            ),
                            e,
                        ),
                    })?;
                let second = self
                    .put_if_absent(&probe, Bytes::from_static(b"2"))
                    .await
                    .map_err(|e| Error::io(format!("probing conditional create at {}", self.location), e))?;
                let _ = self.backend.delete(&probe).await;
                match (first, second) {
                    (CreateOutcome::Created, CreateOutcome::AlreadyExists) => Ok(()),
                    _ => Err(unsafe_store(
                        "it overwrote an existing object on a create-if-absent put".to_string(),
                    )),
                }
            })
            .await
            .map(|_| ())
    }

    /// The fault controller of this store (all faults off by default).
    #[cfg(feature = "testing")]
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// The fault controller of this store: without the `testing` feature, a no-op for the
    /// pause points production code passes.
    #[cfg(not(feature = "testing"))]
    pub(crate) fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// A human-readable description of where this store lives, with any credentials its
    /// location carried masked ([`redact_secrets`]).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Where another tool (DuckDB, pyarrow, Polars) finds the object at `path`: a file path in
    /// a local store, `s3://bucket/key` (or `gs://`, `az://`) in an object store, without any
    /// credentials the store's location carries.
    pub fn uri_of(&self, path: &Path) -> String {
        format!("{}/{path}", self.object_base.trim_end_matches('/'))
    }

    /// Sets what [`Store::uri_of`] appends object paths to.
    #[cfg(test)]
    pub(crate) fn set_object_base(&mut self, base: String) {
        self.object_base = base;
    }

    /// The file system and directory of a local store (`None` for an object store): where the
    /// segment-log WAL keeps its files. See [`Backend::local_files`].
    pub fn local_files(&self) -> Option<LocalFiles> {
        self.backend.local_files()
    }

    /// The paths of one shard in this store.
    pub fn shard_paths(&self, shard_id: Uuid) -> ShardPaths {
        ShardPaths::new(&self.root, shard_id)
    }

    /// Shard ids with a `_mem_wal/<uuid>/` directory in this store, sorted, whether or not it
    /// holds a manifest (see [`crate::reader::list_shards`] for shards and their names).
    pub async fn list_shards(&self) -> Result<Vec<Uuid>> {
        let prefix = self.root.clone().join(MEM_WAL_DIR);
        let mut ids: Vec<Uuid> = self
            .list_dirs(&prefix)
            .await?
            .iter()
            .filter_map(|n| Uuid::parse_str(n).ok())
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// The names of the directories (common prefixes) directly under `prefix`.
    pub(crate) async fn list_dirs(&self, prefix: &Path) -> Result<Vec<String>> {
        let dirs = self
            .call(StoreOp::List, prefix, self.backend.list_dirs(prefix))
            .await
            .map_err(|e| Error::io(format!("listing {prefix}"), e))?;
        Ok(dirs
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    /// Writes `bytes` at `path` only if nothing is there.
    pub(crate) async fn put_if_absent(
        &self,
        path: &Path,
        bytes: Bytes,
    ) -> object_store::Result<CreateOutcome> {
        self.put_if_absent_then(path, bytes, false).await
    }

    /// [`Store::put_if_absent`]; with `prepare_next`, the caller will soon create another
    /// object in `path`'s directory (see [`Backend::create`]).
    pub(crate) async fn put_if_absent_then(
        &self,
        path: &Path,
        bytes: Bytes,
        prepare_next: bool,
    ) -> object_store::Result<CreateOutcome> {
        let data = Staged::bytes(bytes);
        Ok(
            match self
                .create_first_free(std::slice::from_ref(path), &data, prepare_next)
                .await?
            {
                FirstFree::Created(_) => CreateOutcome::Created,
                FirstFree::Taken(_) => CreateOutcome::AlreadyExists,
            },
        )
    }

    /// Readies `bytes` for [`Store::put_if_absent_first_free`] in the directory of `near`
    /// (any location in it). A local store writes and syncs them now, so that this can overlap
    /// other work and the put only links a name and syncs the directory; elsewhere this does
    /// nothing.
    pub(crate) async fn stage(&self, near: &Path, bytes: Bytes) -> object_store::Result<Staged> {
        self.call(StoreOp::Stage, near, self.backend.stage(near, bytes))
            .await
    }

    /// Creates `staged` at the first free of `paths` (names in one directory), in order. A
    /// local store has written and synced the data once, so losing a race for a slot costs a
    /// `link`, not another sync; elsewhere this is a create at `paths[0]`.
    pub(crate) async fn put_if_absent_first_free(
        &self,
        paths: &[Path],
        staged: &Staged,
    ) -> object_store::Result<FirstFree> {
        self.create_first_free(paths, staged, false).await
    }

    async fn create_first_free(
        &self,
        paths: &[Path],
        staged: &Staged,
        prepare_next: bool,
    ) -> object_store::Result<FirstFree> {
        let Some(first) = paths.first() else {
            return Ok(FirstFree::Taken(0));
        };
        let create = self.backend.create(paths, staged, prepare_next);
        self.call(StoreOp::Create, first, create).await
    }

    /// Makes the objects at `paths`, written by anyone, durable (see
    /// [`Backend::make_durable`]): on a local store, a writer may have linked one and died
    /// before syncing it.
    ///
    /// # Errors
    /// `NotFound` if one is missing; a [`SyncFailure`] if a sync failed.
    pub(crate) async fn make_durable(&self, paths: &[Path]) -> object_store::Result<()> {
        let Some(first) = paths.first() else {
            return Ok(());
        };
        self.call(StoreOp::Sync, first, self.backend.make_durable(paths))
            .await
    }

    /// Overwrites `path` (only for the best-effort `version_hint.json`), within the
    /// best-effort budget.
    pub(crate) async fn put_overwrite(
        &self,
        path: &Path,
        bytes: Bytes,
    ) -> object_store::Result<()> {
        let put = self.backend.overwrite(path, bytes);
        self.best_effort(path, self.call(StoreOp::Overwrite, path, put))
            .await
    }

    /// `request` (on `path`), cut short after the best-effort budget. Dropping it is safe: a
    /// best-effort request's outcome is never relied on.
    async fn best_effort<T>(
        &self,
        path: &Path,
        request: impl Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        let Some(budget) = self.best_effort_budget else {
            return request.await;
        };
        tokio::time::timeout(budget, request)
            .await
            .unwrap_or_else(|_| {
                Err(object_store::Error::Generic {
                    store: "memwal",
                    source: Box::new(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "best-effort request on {path} gave up after {} ms",
                            budget.as_millis()
                        ),
                    )),
                })
            })
    }

    /// The object at `path`, or `None` if there is none.
    pub(crate) async fn get(&self, path: &Path) -> object_store::Result<Option<Bytes>> {
        self.call(StoreOp::Get, path, self.backend.get(path)).await
    }

    /// Whether an object exists at `path`. Errors other than not-found are errors, never "absent":
    /// a failed probe taken for an empty slot would end the WAL early.
    pub(crate) async fn exists(&self, path: &Path) -> object_store::Result<bool> {
        self.call(StoreOp::Head, path, self.backend.head(path))
            .await
    }

    /// Deletes the object at `path`; deleting a missing object succeeds.
    pub(crate) async fn delete(&self, path: &Path) -> object_store::Result<()> {
        self.call(StoreOp::Delete, path, self.backend.delete(path))
            .await
    }

    /// Every object under `prefix` (recursive).
    pub(crate) async fn list(&self, prefix: &Path) -> object_store::Result<Vec<ObjectMeta>> {
        self.call(StoreOp::List, prefix, self.backend.list(prefix))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::{ObjectStoreExt, PutOptions, PutPayload};

    #[test]
    fn locations_parse() {
        assert!(Store::from_uri("").is_err());
        let e = Store::from_uri("gopher://x").unwrap_err();
        assert!(e.to_string().contains("gopher://"), "{e}");
        let e = Store::from_uri("file://relative/dir").unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        let a = Store::from_uri("memory://shared-x").unwrap();
        let b = Store::from_uri("memory://shared-x").unwrap();
        assert!(Arc::ptr_eq(a.faults(), b.faults()));
        let c = Store::from_uri("memory://other-x").unwrap();
        assert!(!Arc::ptr_eq(a.faults(), c.faults()));
        assert!(Store::drop_named_memory("shared-x"));
        assert!(!Store::drop_named_memory("shared-x"));
        let d = Store::from_uri("memory://shared-x").unwrap();
        assert!(
            !Arc::ptr_eq(a.faults(), d.faults()),
            "a dropped name opens a new store"
        );
        let dir = tempfile::tempdir().unwrap();
        let s = Store::from_uri(&format!("file://{}", dir.path().display())).unwrap();
        assert!(s.location().contains(dir.path().to_str().unwrap()));
    }

    /// An object store that ignores put-if-not-exists (like S3 servers without conditional
    /// writes): every create overwrites.
    #[derive(Debug)]
    struct IgnoresCreate(InMemory);

    impl fmt::Display for IgnoresCreate {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "IgnoresCreate")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for IgnoresCreate {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            _opts: PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.0.put(location, payload).await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.0.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.0.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
            self.0.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.0.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<object_store::ListResult> {
            self.0.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.0.copy_opts(from, to, options).await
        }
    }

    #[tokio::test]
    async fn a_store_without_conditional_create_is_refused() {
        let store = Store::from_object_store(
            Arc::new(IgnoresCreate(InMemory::new())),
            Path::default(),
            "s3://no-conditional-writes",
        );
        let e = store.check_conditional_create().await.unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("conditional create"), "{e}");
        assert!(e.to_string().contains("s3://no-conditional-writes"), "{e}");
        // A store that honours it passes, once.
        let good = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "ok");
        good.check_conditional_create().await.unwrap();
        good.check_conditional_create().await.unwrap();
        assert!(
            good.list(&Path::default()).await.unwrap().is_empty(),
            "the probe is removed"
        );
    }

    #[tokio::test]
    async fn put_if_absent_creates_once() {
        for store in [Store::memory(), {
            let d = tempfile::tempdir().unwrap().keep();
            Store::local(d).unwrap()
        }] {
            let p = store.shard_paths(Uuid::new_v4()).wal_entry(1);
            assert!(!store.exists(&p).await.unwrap());
            let r = store
                .put_if_absent(&p, Bytes::from_static(b"a"))
                .await
                .unwrap();
            assert_eq!(r, CreateOutcome::Created);
            let r = store
                .put_if_absent(&p, Bytes::from_static(b"b"))
                .await
                .unwrap();
            assert_eq!(r, CreateOutcome::AlreadyExists);
            assert_eq!(store.get(&p).await.unwrap().unwrap().as_ref(), b"a");
            assert!(store.exists(&p).await.unwrap());
        }
    }

    // The file of the next create is opened while this one is written (`StdFs`) when the put
    // says another follows (`PrepareNext`, a durable writer's WAL appends): a spare for that
    // directory appears; a put that does not say so asks for none.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_wal_put_has_the_next_entry_s_file_opened_ahead() {
        let _serial = fs::spare_tests();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::local(dir.path()).unwrap();
            let paths = store.shard_paths(Uuid::new_v4());
            let manifest = paths.shard_dir().clone().join("other.json");
            store
                .put_if_absent_then(&manifest, Bytes::from_static(b"{}"), false)
                .await
                .unwrap();
            store
                .put_if_absent_then(&paths.wal_entry(1), Bytes::from_static(b"one"), true)
                .await
                .unwrap();
            let on_disk = |p: &Path| {
                let mut d = dir.path().to_path_buf();
                d.extend(p.parts().map(|part| part.as_ref().to_string()));
                d
            };
            let wal_dir = on_disk(&paths.wal_dir());
            // The spare is opened on a blocking thread after the put began: wait for it, up to
            // a minute on a loaded machine (another test's WAL puts can only add spares of
            // their own directories).
            let mut spares = fs::spare_count(&wal_dir);
            for _ in 0..6000 {
                if spares > 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                spares = fs::spare_count(&wal_dir);
            }
            assert_eq!(spares, 1, "a spare for the WAL directory");
            assert_eq!(fs::spare_count(&on_disk(paths.shard_dir())), 0);
        });
    }

    // A lost race for a slot must not cost another data sync: a local store writes the data
    // once and links it at the first free name; other stores try only the first name.
    #[tokio::test]
    async fn put_if_absent_first_free_takes_the_first_free_slot_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for (store, tries_all) in [
            (Store::local(dir.path()).unwrap(), true),
            (Store::memory(), false),
        ] {
            let paths = store.shard_paths(Uuid::new_v4());
            let slots: Vec<Path> = (1..=4).map(|p| paths.wal_entry(p)).collect();
            for p in &slots[..2] {
                store
                    .put_if_absent(p, Bytes::from_static(b"old"))
                    .await
                    .unwrap();
            }
            let staged = store
                .stage(&slots[0], Bytes::from_static(b"new"))
                .await
                .unwrap();
            assert_eq!(
                store.list(&paths.wal_dir()).await.unwrap().len(),
                2,
                "staging names nothing"
            );
            let r = store
                .put_if_absent_first_free(&slots, &staged)
                .await
                .unwrap();
            if tries_all {
                assert_eq!(r, FirstFree::Created(2));
                assert_eq!(
                    store.get(&slots[2]).await.unwrap().unwrap().as_ref(),
                    b"new"
                );
                assert!(!store.exists(&slots[3]).await.unwrap(), "one slot only");
                drop(staged);
                // A staged put that lost every slot is still good for later ones.
                let x = store
                    .stage(&slots[0], Bytes::from_static(b"x"))
                    .await
                    .unwrap();
                let r = store
                    .put_if_absent_first_free(&slots[..3], &x)
                    .await
                    .unwrap();
                assert_eq!(r, FirstFree::Taken(3));
                let r = store
                    .put_if_absent_first_free(&slots[2..], &x)
                    .await
                    .unwrap();
                assert_eq!(r, FirstFree::Created(1));
                assert_eq!(store.get(&slots[3]).await.unwrap().unwrap().as_ref(), b"x");
            } else {
                assert_eq!(r, FirstFree::Taken(1));
                assert!(!store.exists(&slots[2]).await.unwrap());
            }
            for p in &slots[..2] {
                assert_eq!(store.get(p).await.unwrap().unwrap().as_ref(), b"old");
            }
            let listed = store.list(&paths.wal_dir()).await.unwrap();
            assert!(
                listed
                    .iter()
                    .all(|m| m.location.filename().is_some_and(|n| !n.starts_with('.'))),
                "no staging file left behind: {listed:?}"
            );
        }
    }
}
