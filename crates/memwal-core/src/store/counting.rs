//! [`CountingBackend`]: counts a writer's requests by kind, and the bytes creates send and
//! gets receive, into its [`StatsRecorder`] (see `stats.rs` for how a request is also counted
//! for the operation that made it). It wraps everything a writer's [`super::Store`] reaches,
//! faults included, so an injected failure still counts as the request it stands for.
//! Counting is a few relaxed atomic adds per request.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectMeta, Result};

use super::backend::{Backend, FirstFree, Staged};
use crate::stats::{RequestKind, StatsRecorder};

/// Objects per LIST page on S3 (and the other clouds' default): a listing of `n` objects
/// costs `max(1, ceil(n / LIST_PAGE))` requests.
const LIST_PAGE: u64 = 1000;

/// A [`Backend`] that forwards to `inner`, counting each request. See the module docs.
#[derive(Debug)]
pub struct CountingBackend {
    inner: Arc<dyn Backend>,
    stats: Arc<StatsRecorder>,
}

impl CountingBackend {
    /// Wraps `inner`, counting into `stats`.
    pub fn new(inner: Arc<dyn Backend>, stats: Arc<StatsRecorder>) -> Self {
        CountingBackend { inner, stats }
    }
}

#[async_trait]
impl Backend for CountingBackend {
    async fn create(&self, paths: &[Path], data: &Staged, prepare_next: bool) -> Result<FirstFree> {
        self.stats
            .record_request(RequestKind::Put, data.bytes.len() as u64);
        self.inner.create(paths, data, prepare_next).await
    }

    /// Not a request: what it writes is counted with the create that names it.
    async fn stage(&self, near: &Path, data: Bytes) -> Result<Staged> {
        self.inner.stage(near, data).await
    }

    async fn get(&self, path: &Path) -> Result<Option<Bytes>> {
        self.stats.record_request(RequestKind::Get, 0);
        let got = self.inner.get(path).await?;
        if let Some(bytes) = &got {
            self.stats.record_get_bytes(bytes.len() as u64);
        }
        Ok(got)
    }

    async fn head(&self, path: &Path) -> Result<bool> {
        self.stats.record_request(RequestKind::Head, 0);
        self.inner.head(path).await
    }

    async fn list(&self, prefix: &Path) -> Result<Vec<ObjectMeta>> {
        let listing = self.inner.list(prefix).await;
        let pages = listing
            .as_ref()
            .map_or(0, |l| l.len() as u64)
            .max(1)
            .div_ceil(LIST_PAGE);
        for _ in 0..pages.max(1) {
            self.stats.record_request(RequestKind::List, 0);
        }
        listing
    }

    async fn list_dirs(&self, prefix: &Path) -> Result<Vec<Path>> {
        self.stats.record_request(RequestKind::List, 0);
        self.inner.list_dirs(prefix).await
    }

    async fn overwrite(&self, path: &Path, data: Bytes) -> Result<()> {
        self.stats
            .record_request(RequestKind::Put, data.len() as u64);
        self.inner.overwrite(path, data).await
    }

    async fn delete(&self, path: &Path) -> Result<()> {
        self.stats.record_request(RequestKind::Delete, 0);
        self.inner.delete(path).await
    }

    /// Not a request to an object store, which has nothing to do; a local store's syncs are not
    /// requests either.
    async fn make_durable(&self, paths: &[Path]) -> Result<()> {
        self.inner.make_durable(paths).await
    }

    fn local_files(&self) -> Option<super::backend::LocalFiles> {
        self.inner.local_files()
    }
}
