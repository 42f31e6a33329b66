//! [`Backend`]: what memwal needs from a place that keeps objects, and nothing more.
//!
//! memwal writes an object once (a WAL entry, a manifest version, a generation file), reads it
//! whole, lists folders, deletes what collection allows, and overwrites one best-effort hint.
//! That is this trait. Two implementations keep objects: [`super::local::LocalStore`], memwal's
//! own store on a local file system (staging ahead, first-free creates, syncs), and
//! [`super::object::ObjectBackend`], an adapter over any `object_store` store (memory, S3, GCS,
//! Azure). Two wrap one: [`super::counting::CountingBackend`] counts a writer's requests, and,
//! with the `testing` feature, `faults::FaultInjectingBackend` injects failures.
//!
//! Errors are `object_store`'s: the kinds callers tell apart (`NotFound`, `AlreadyExists`,
//! `Precondition`) are its, and a cloud store's errors pass through as they come. A failed sync
//! is carried as a [`SyncFailure`] in the source chain, which [`is_sync_failure`] finds.

use std::fmt;
use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectMeta, Result};

use super::fs;

/// Outcome of a create at the first free of several locations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstFree {
    /// We created the object at this index of the locations.
    Created(usize),
    /// This many of the locations, from the first, were found taken; nothing was written.
    Taken(usize),
}

/// Data ready for [`Backend::create`]: the bytes, and what the backend already wrote of them
/// ([`Backend::stage`]). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Staged {
    pub(crate) bytes: Bytes,
    /// A local store's file, written and synced, waiting for a name.
    pub(crate) file: Option<Arc<fs::Staged>>,
}

impl Staged {
    /// `bytes`, with nothing written ahead.
    pub fn bytes(bytes: Bytes) -> Staged {
        Staged { bytes, file: None }
    }
}

/// See the module docs. Every method is one request to the backend (a create at the first free
/// of several names is one for a local store, which links a staged file under each in turn).
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// Creates `data` at the first of `paths` (names in one folder) that is free, in order,
    /// never overwriting. A backend that creates one name per request tries `paths[0]` only and
    /// reports `Taken(1)` if it is taken. With `prepare_next`, another create in the same
    /// folder follows soon (a durable writer's next WAL entry), which a local store may start
    /// preparing now.
    async fn create(&self, paths: &[Path], data: &Staged, prepare_next: bool) -> Result<FirstFree>;

    /// Readies `data` for a create in the folder of `near`, so that the create itself is
    /// short (a local store writes and syncs the file now and only links it then). By default
    /// nothing is written ahead.
    async fn stage(&self, near: &Path, data: Bytes) -> Result<Staged> {
        let _ = near;
        Ok(Staged::bytes(data))
    }

    /// The object at `path`, `None` if there is none.
    async fn get(&self, path: &Path) -> Result<Option<Bytes>>;

    /// Whether an object exists at `path`.
    async fn head(&self, path: &Path) -> Result<bool>;

    /// Every object under `prefix`, at any depth.
    async fn list(&self, prefix: &Path) -> Result<Vec<ObjectMeta>>;

    /// The folders directly under `prefix`.
    async fn list_dirs(&self, prefix: &Path) -> Result<Vec<Path>>;

    /// Writes `data` at `path`, replacing what is there (only the best-effort version hint).
    async fn overwrite(&self, path: &Path, data: Bytes) -> Result<()>;

    /// Deletes the object at `path`; a missing one is not an error.
    async fn delete(&self, path: &Path) -> Result<()>;

    /// Makes the objects at `paths`, written by anyone, durable. An object store's objects are
    /// durable once written, so by default there is nothing to do.
    async fn make_durable(&self, paths: &[Path]) -> Result<()> {
        let _ = paths;
        Ok(())
    }

    /// The file system and directory a local store keeps its objects in (an object's file is
    /// the directory joined with its path); `None` for an object store. The segment-log WAL
    /// writes its files there, beside the objects, without going through this trait: a file
    /// written in place and synced has no object counterpart.
    fn local_files(&self) -> Option<LocalFiles> {
        None
    }
}

/// See [`Backend::local_files`].
#[derive(Debug, Clone)]
pub struct LocalFiles {
    /// The file system (the real one, or a simulated disk in tests).
    pub fs: std::sync::Arc<dyn super::fs::Fs>,
    /// The store's directory.
    pub root: std::path::PathBuf,
}

/// An `fsync`/`fdatasync` failed: the data it covered may or may not be on disk, and the
/// kernel may have dropped it from the page cache (fsyncgate). Never retried and trusted.
#[derive(Debug, thiserror::Error)]
#[error("sync of {path} failed: {source}")]
pub struct SyncFailure {
    /// What was being synced.
    pub path: String,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

/// Whether `e`, from any backend, was a failed sync or flush: a [`SyncFailure`] anywhere in its
/// source chain. Whether the data it covered is durable is then unknown, and a later
/// "successful" retry proves nothing, so the operation must fail rather than be retried and
/// trusted. Every caller that decides whether to retry a put asks this, and only this.
pub fn is_sync_failure(e: &object_store::Error) -> bool {
    caused_by_sync_failure(e)
}

/// Whether `e` or an error in its source chain is a [`SyncFailure`]: for callers that hold a
/// memwal error wrapping a backend's.
pub(crate) fn caused_by_sync_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = cur {
        if s.downcast_ref::<SyncFailure>().is_some() {
            return true;
        }
        cur = s.source();
    }
    false
}
