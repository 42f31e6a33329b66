//! The seed bug (`docs/durability.md`, "Why it is subtle: the seed bug"), kept only as the negative
//! control of the regression test `durable_put_does_not_alias_across_memtable_generations`
//! (`tests/durability.rs`): one writer-wide watermark of generation-local batch ends, which a
//! durable put waits on instead of its own append.
//!
//! It exists only with the `legacy-watermark-bug` feature, which nothing ships with: CI builds
//! it once to check that the regression test fails against it (`.ci/run`, "negative
//! control"). Every `cfg` of the feature is in this file; without it [`LegacyWatermark`] is
//! zero-sized, [`LegacyWatermark::ON`] is false, and the call sites compile to nothing.

#[cfg(feature = "legacy-watermark-bug")]
use tokio::sync::watch;

use crate::error::{Error, Result};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct LegacyWatermark {
    #[cfg(feature = "legacy-watermark-bug")]
    watermark: watch::Sender<usize>,
}

impl LegacyWatermark {
    /// Whether the bug is compiled in: a durable put then waits on [`LegacyWatermark::wait`].
    pub const ON: bool = cfg!(feature = "legacy-watermark-bug");

    /// The bug's publication: the end of a generation-local range, written to the one
    /// writer-wide watermark, whatever generation it belongs to.
    #[inline(always)]
    pub fn publish(&self, end: usize) {
        #[cfg(feature = "legacy-watermark-bug")]
        self.watermark.send_replace(end);
        #[cfg(not(feature = "legacy-watermark-bug"))]
        let _ = end;
    }

    /// The bug's watcher: waits until the watermark reaches `end`, a *local* batch end, or
    /// `check` (the writer's latch) fails.
    pub async fn wait(&self, check: impl Fn() -> Result<()>, end: usize) -> Result<()> {
        #[cfg(feature = "legacy-watermark-bug")]
        {
            let mut rx = self.watermark.subscribe();
            loop {
                check()?;
                if *rx.borrow_and_update() >= end {
                    return Ok(());
                }
                if rx.changed().await.is_err() {
                    break;
                }
            }
        }
        #[cfg(not(feature = "legacy-watermark-bug"))]
        let _ = (check, end);
        Err(Error::HandlerExited {
            context: String::new(),
        })
    }
}
