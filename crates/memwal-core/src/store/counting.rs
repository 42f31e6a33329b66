//! [`CountingStore`]: counts a writer's object-store requests by kind, and the bytes PUTs send
//! and GETs receive, into its [`StatsRecorder`] (see `stats.rs` for how a request is also
//! counted for the operation that made it). It wraps everything a writer's [`super::Store`]
//! reaches, faults included, so an injected failure still counts as the request it stands
//! for. Counting is a few relaxed atomic adds per request.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use crate::stats::{RequestKind, StatsRecorder};

/// Objects per LIST page on S3 (and the other clouds' default): a listing of `n` objects
/// costs `max(1, ceil(n / LIST_PAGE))` requests.
const LIST_PAGE: u64 = 1000;

/// An [`ObjectStore`] that forwards to `inner`, counting each request. See the module docs.
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    stats: Arc<StatsRecorder>,
}

impl CountingStore {
    /// Wraps `inner`, counting into `stats`.
    pub fn new(inner: Arc<dyn ObjectStore>, stats: Arc<StatsRecorder>) -> Self {
        CountingStore { inner, stats }
    }

    /// Counts a listing as it is consumed: one request up front, one more per full page.
    fn counted_list(
        &self,
        listing: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.stats.record_request(RequestKind::List, 0);
        let stats = self.stats.clone();
        let mut seen = 0u64;
        listing
            .inspect(move |_| {
                seen += 1;
                if seen > 1 && (seen - 1).is_multiple_of(LIST_PAGE) {
                    stats.record_request(RequestKind::List, 0);
                }
            })
            .boxed()
    }
}

impl fmt::Debug for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(&self, path: &Path, data: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.stats
            .record_request(RequestKind::Put, data.content_length() as u64);
        self.inner.put_opts(path, data, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        // memwal never writes multipart; counted as the one request that starts an upload.
        self.stats.record_request(RequestKind::Put, 0);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        let kind = if head {
            RequestKind::Head
        } else {
            RequestKind::Get
        };
        self.stats.record_request(kind, 0);
        let r = self.inner.get_opts(location, options).await?;
        if !head {
            // The body's length, known from the response before it is read.
            self.stats.record_get_bytes(r.range.end - r.range.start);
        }
        Ok(r)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        for r in ranges {
            self.stats.record_request(RequestKind::Get, 0);
            self.stats.record_get_bytes(r.end.saturating_sub(r.start));
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let stats = self.stats.clone();
        let counted = locations
            .inspect(move |_| stats.record_request(RequestKind::Delete, 0))
            .boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counted_list(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counted_list(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.stats.record_request(RequestKind::List, 0);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.stats.record_request(RequestKind::Put, 0);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
