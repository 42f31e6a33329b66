//! [`Forwarding`]: an `ObjectStore` that hands every operation to an inner store, with
//! [`Hooks`] around the three that tests need to watch or break: puts, gets (which include
//! HEADs) and recursive listings.
//!
//! Tests reach for this when `Store::faults()` cannot express what they check: recording when
//! a WAL entry's put returned, failing only some reads, giving each WAL operation a seeded
//! fate, or counting manifest listings. Everything else (multipart uploads, range reads, listings
//! by folder, copies, renames, deletes) goes straight to the inner store, unseen by the hooks.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use memwal_core::Store;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// The result type of `object_store` calls, named so hook signatures fit on one line.
pub type StoreResult<T> = object_store::Result<T>;

/// A put as a hook receives it.
pub struct Put<'a> {
    pub location: &'a Path,
    pub payload: PutPayload,
    pub opts: PutOptions,
}

impl Put<'_> {
    /// Hands the put to `inner` unchanged.
    pub async fn forward(self, inner: &dyn ObjectStore) -> StoreResult<PutResult> {
        inner.put_opts(self.location, self.payload, self.opts).await
    }
}

/// A get (or, with `options.head` set, a HEAD) as a hook receives it.
pub struct Get<'a> {
    pub location: &'a Path,
    pub options: GetOptions,
}

impl Get<'_> {
    /// Hands the get to `inner` unchanged.
    pub async fn forward(self, inner: &dyn ObjectStore) -> StoreResult<GetResult> {
        inner.get_opts(self.location, self.options).await
    }
}

/// What a [`Forwarding`] store does instead of a plain put or get. Each method receives the
/// inner store and, by default, forwards to it, so a test overrides only the one it needs.
#[async_trait]
pub trait Hooks: Send + Sync + 'static {
    /// A put (memwal's WAL entries, manifest versions, generation files).
    async fn put(&self, inner: &dyn ObjectStore, put: Put<'_>) -> StoreResult<PutResult> {
        put.forward(inner).await
    }

    /// A get or a HEAD.
    async fn get(&self, inner: &dyn ObjectStore, get: Get<'_>) -> StoreResult<GetResult> {
        get.forward(inner).await
    }

    /// A recursive listing of `prefix` (how memwal finds the latest manifest version).
    fn list(
        &self,
        inner: &dyn ObjectStore,
        prefix: Option<&Path>,
    ) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        inner.list(prefix)
    }
}

/// `inner` with `hooks` around its puts and gets; see the module docs.
pub struct Forwarding<H> {
    /// The store that holds the objects; a test may read or plant objects here directly,
    /// bypassing the hooks.
    pub inner: Arc<dyn ObjectStore>,
    /// The test's hooks, and whatever state they keep (counters, switches, records).
    pub hooks: H,
}

impl<H: Hooks> Forwarding<H> {
    /// `hooks` around a fresh, empty `InMemory` store.
    pub fn in_memory(hooks: H) -> Arc<Self> {
        Arc::new(Forwarding {
            inner: Arc::new(InMemory::new()),
            hooks,
        })
    }

    /// A memwal `Store` over this object store, rooted at its top; `url` is only the name it
    /// reports.
    pub fn store(self: &Arc<Self>, url: &str) -> Store {
        Store::from_object_store(self.clone(), Path::default(), url)
    }
}

/// Whether `path` is a WAL entry, or inside a WAL directory.
pub fn is_wal(path: &Path) -> bool {
    path.parts().any(|p| p.as_ref() == "wal")
}

/// The error a hook returns for a failure it injects: a generic (retryable) store error from
/// the store named `store`.
pub fn injected(store: &'static str, message: String) -> object_store::Error {
    object_store::Error::Generic {
        store,
        source: message.into(),
    }
}

impl<H> fmt::Debug for Forwarding<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Forwarding")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<H> fmt::Display for Forwarding<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Forwarding({})", self.inner)
    }
}

#[async_trait]
impl<H: Hooks> ObjectStore for Forwarding<H> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let put = Put {
            location,
            payload,
            opts,
        };
        self.hooks.put(self.inner.as_ref(), put).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let get = Get { location, options };
        self.hooks.get(self.inner.as_ref(), get).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.hooks.list(self.inner.as_ref(), prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, opts: CopyOptions) -> StoreResult<()> {
        self.inner.copy_opts(from, to, opts).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, opts: RenameOptions) -> StoreResult<()> {
        self.inner.rename_opts(from, to, opts).await
    }
}
