//! The fault controller of a build without the `testing` feature: nothing can be switched
//! on, so a pause point or an injected sync failure compiles to nothing.
//!
//! Production code asks its store's controller at a few places (`pause_point` in the writer,
//! the generation flush and the WAL; `store_call` at every store operation;
//! `take_wal_sync_failure` in the local store). This type
//! answers those calls under the same names as the real controller in `faults.rs`, so the
//! call sites need no `cfg`, and the library carries no fault injection.

use object_store::path::Path;

use super::call::{Actor, StoreOp, When};

/// Runs `fut` as `actor`'s work; without the `testing` feature nothing tells actors apart,
/// so this is `fut` itself.
#[inline(always)]
pub fn as_actor<F: std::future::Future>(_actor: Actor, fut: F) -> F {
    fut
}

/// A controller with every fault off, always (see the module docs). Zero-sized; its private
/// field keeps it built only by `Default`, like the real controller.
#[derive(Debug, Default)]
pub struct Faults(());

impl Faults {
    /// Where a test could pause memwal; without the `testing` feature, never.
    #[inline(always)]
    pub(crate) async fn pause_point(&self, _name: &str) {}

    /// Where a test could pause memwal on a blocking thread; without the `testing` feature,
    /// never.
    #[inline(always)]
    pub(crate) fn pause_point_blocking(&self, _name: &str) {}

    /// Where a test could hold a store call; without the `testing` feature, never.
    #[inline(always)]
    pub(crate) async fn store_call(
        &self,
        _label: Option<&str>,
        _actor: Actor,
        _op: StoreOp,
        _path: &Path,
        _when: When,
    ) -> object_store::Result<()> {
        Ok(())
    }

    /// Whether this WAL sync fails on purpose; without the `testing` feature, never.
    #[inline(always)]
    pub(crate) fn take_wal_sync_failure(&self) -> bool {
        false
    }
}
