//! Fault injection for the object store, shared by Rust tests and JavaScript
//! (`ObjectStore.faults`).
//!
//! [`FaultInjectingStore`] wraps every [`super::Store`]; with all faults off it forwards every call
//! unchanged. Faults target WAL-entry puts (paths with a `wal` segment), the writes whose
//! outcome decides durability:
//! - `fail_wal_puts(n)`: the next `n` WAL puts fail with a transient error ("injected transient
//!   WAL put failure"); `u64::MAX` means every WAL put fails until [`Faults::recover`].
//! - `set_lost_ack(true)`: a failing WAL put *lands* before its error is returned, the ambiguous
//!   "request applied, response lost" case of reference §3.2.
//! - `wal_put_attempts()`: how many WAL puts were attempted, failed or not.
//! - `fail_wal_syncs(n)`: the next `n` syncs of a WAL entry (its data or its directory) fail
//!   like an `fsync` returning EIO (local stores only: [`super::local::LocalStore`] consults
//!   this controller at each of its persistence points).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Switches for injected faults. All off by default. Shared by every clone of a store.
#[derive(Debug, Default)]
pub struct Faults {
    fail_wal_puts: AtomicU64,
    lost_ack: AtomicBool,
    wal_put_attempts: AtomicU64,
    fail_wal_syncs: AtomicU64,
    skip_wal_syncs: AtomicU64,
}

/// Message of every injected WAL put failure (tests match on it).
pub const INJECTED_WAL_PUT_FAILURE: &str = "injected transient WAL put failure";

impl Faults {
    /// Fail the next `n` WAL-entry puts; `u64::MAX` fails all of them until [`Faults::recover`].
    pub fn fail_wal_puts(&self, n: u64) {
        self.fail_wal_puts.store(n, Ordering::SeqCst);
    }

    /// When on, a failing WAL put is applied to the store before its error is returned.
    pub fn set_lost_ack(&self, on: bool) {
        self.lost_ack.store(on, Ordering::SeqCst);
    }

    /// Fail the next `n` syncs of WAL entries (`u64::MAX`: all until [`Faults::recover`]).
    pub fn fail_wal_syncs(&self, n: u64) {
        self.fail_wal_syncs_after(0, n);
    }

    /// Let `skip` WAL syncs succeed, then fail the next `n`. A WAL entry has two syncs (its
    /// data, then its directory), so `(1, 1)` fails only the directory sync.
    pub fn fail_wal_syncs_after(&self, skip: u64, n: u64) {
        self.skip_wal_syncs.store(skip, Ordering::SeqCst);
        self.fail_wal_syncs.store(n, Ordering::SeqCst);
    }

    /// Switches every fault off (attempt counters keep counting).
    pub fn recover(&self) {
        self.fail_wal_puts.store(0, Ordering::SeqCst);
        self.lost_ack.store(false, Ordering::SeqCst);
        self.fail_wal_syncs.store(0, Ordering::SeqCst);
        self.skip_wal_syncs.store(0, Ordering::SeqCst);
    }

    /// Decides whether this WAL sync fails.
    pub(crate) fn take_wal_sync_failure(&self) -> bool {
        if self.fail_wal_syncs.load(Ordering::SeqCst) == 0 || take_one(&self.skip_wal_syncs) {
            return false;
        }
        take_one(&self.fail_wal_syncs)
    }

    /// WAL-entry puts attempted through this store so far.
    pub fn wal_put_attempts(&self) -> u64 {
        self.wal_put_attempts.load(Ordering::SeqCst)
    }

    /// Counts one WAL put attempt and decides whether it fails.
    fn take_wal_put_failure(&self) -> bool {
        self.wal_put_attempts.fetch_add(1, Ordering::SeqCst);
        take_one(&self.fail_wal_puts)
    }
}

/// Consumes one unit of a "fail the next n" counter (`u64::MAX` never runs out).
fn take_one(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            0 => None,
            u64::MAX => Some(u64::MAX),
            n => Some(n - 1),
        })
        .is_ok()
}

/// Whether `path` is a WAL entry (or inside a WAL directory).
pub(crate) fn is_wal_path(path: &Path) -> bool {
    path.parts().any(|p| p.as_ref() == "wal")
}

fn injected(path: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "faults",
        source: format!("{INJECTED_WAL_PUT_FAILURE} at {path}").into(),
    }
}

/// An [`ObjectStore`] that forwards to `inner`, injecting the faults switched on in [`Faults`].
pub struct FaultInjectingStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<Faults>,
}

impl FaultInjectingStore {
    /// Wraps `inner`; faults are controlled through `faults`.
    pub fn new(inner: Arc<dyn ObjectStore>, faults: Arc<Faults>) -> Self {
        FaultInjectingStore { inner, faults }
    }
}

impl fmt::Debug for FaultInjectingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultInjectingStore({})", self.inner)
    }
}

impl fmt::Display for FaultInjectingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultInjectingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultInjectingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if is_wal_path(location) && self.faults.take_wal_put_failure() {
            if self.faults.lost_ack.load(Ordering::SeqCst) {
                // Ignore the outcome: the caller must see an error either way.
                let _ = self.inner.put_opts(location, payload, opts).await;
            }
            return Err(injected(location));
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutMode};

    fn store() -> (FaultInjectingStore, Arc<Faults>) {
        let faults = Arc::new(Faults::default());
        (
            FaultInjectingStore::new(Arc::new(InMemory::new()), faults.clone()),
            faults,
        )
    }

    #[tokio::test]
    async fn fails_exactly_n_wal_puts_and_counts_attempts() {
        let (s, f) = store();
        f.fail_wal_puts(2);
        let p = Path::from("_mem_wal/x/wal/1.arrow");
        for _ in 0..2 {
            let e = s.put(&p, PutPayload::from_static(b"a")).await.unwrap_err();
            assert!(e.to_string().contains(INJECTED_WAL_PUT_FAILURE));
        }
        s.put(&p, PutPayload::from_static(b"a")).await.unwrap();
        assert_eq!(f.wal_put_attempts(), 3);
        // Non-WAL paths are never failed nor counted.
        f.fail_wal_puts(u64::MAX);
        s.put(
            &Path::from("_mem_wal/x/manifest/1.binpb"),
            PutPayload::from_static(b"m"),
        )
        .await
        .unwrap();
        assert_eq!(f.wal_put_attempts(), 3);
        for _ in 0..5 {
            assert!(s.put(&p, PutPayload::from_static(b"a")).await.is_err());
        }
        f.recover();
        s.put(&p, PutPayload::from_static(b"a")).await.unwrap();
    }

    #[tokio::test]
    async fn lost_ack_lands_the_write_and_returns_an_error() {
        let (s, f) = store();
        f.set_lost_ack(true);
        f.fail_wal_puts(1);
        let p = Path::from("_mem_wal/x/wal/1.arrow");
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        assert!(
            s.put_opts(&p, PutPayload::from_static(b"a"), opts.clone())
                .await
                .is_err()
        );
        assert!(s.head(&p).await.is_ok());
        let e = s
            .put_opts(&p, PutPayload::from_static(b"a"), opts)
            .await
            .unwrap_err();
        assert!(matches!(e, object_store::Error::AlreadyExists { .. }));
    }
}
