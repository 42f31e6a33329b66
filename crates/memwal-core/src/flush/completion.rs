//! The per-request completion cell and the writer's terminal latch.
//!
//! A [`Completion`] is written once, only by the WAL flush handler, only with the outcome of the
//! append that covered the request's range. Dropped unwritten, it makes the waiting
//! [`Watcher`] yield "WAL flush handler exited before reporting durability". A durable put's
//! cell carries the position of the WAL entry through which its store is durable; the public
//! face of that cell is [`DurableWatcher`]. [`TerminalLatch`] keeps the first fence error;
//! later writes learn they lost.

use std::sync::OnceLock;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::stats::WalEntryCost;

/// The handler's side of one request's completion. See the module docs.
#[derive(Debug)]
pub(crate) struct Completion<T>(oneshot::Sender<Result<T>>);

impl<T> Completion<T> {
    /// Writes the outcome. Consumes the cell, so it cannot be written twice.
    pub fn complete(self, outcome: Result<T>) {
        // The waiter may have gone away (a put_no_wait whose watcher was dropped); that is fine.
        let _ = self.0.send(outcome);
    }
}

/// The waiting side of a [`Completion`].
#[derive(Debug)]
pub(crate) struct Watcher<T>(oneshot::Receiver<Result<T>>);

impl<T> Watcher<T> {
    /// A watcher that is already complete with `outcome`.
    pub fn ready(outcome: Result<T>) -> Self {
        let (c, w) = completion();
        c.complete(outcome);
        w
    }

    /// The outcome the handler wrote, or `HandlerExited` if it dropped the cell unwritten.
    ///
    /// # Cancel safety
    /// Dropping the future drops the watcher; the append still happens.
    pub async fn wait(self) -> Result<T> {
        match self.0.await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::HandlerExited {
                context: String::new(),
            }),
        }
    }
}

/// A connected cell: the handler writes the [`Completion`], the caller awaits the [`Watcher`].
pub(crate) fn completion<T>() -> (Completion<T>, Watcher<T>) {
    let (tx, rx) = oneshot::channel();
    (Completion(tx), Watcher(rx))
}

/// The cell of one durable put (or of a frozen MemTable's whole store): the handler writes the
/// WAL entry through which that store is durable, with what its append cost.
pub(crate) type PutCompletion = Completion<WalEntryCost>;

/// Waits for the durability of one put.
///
/// Usually the put's own completion cell. A retry of a put with a request id (see
/// [`crate::writer::PutOptions`]) instead watches the first put's rows through the writer's
/// state, which the WAL flush handler's reports keep current; it is built by the writer.
pub struct DurableWatcher(Watch);

enum Watch {
    Cell(Watcher<WalEntryCost>),
    Ready(Result<()>),
    Retry(BoxFuture<'static, Result<()>>),
}

impl std::fmt::Debug for DurableWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.0 {
            Watch::Cell(_) => "cell",
            Watch::Ready(_) => "ready",
            Watch::Retry(_) => "retry",
        };
        f.debug_tuple("DurableWatcher").field(&kind).finish()
    }
}

impl DurableWatcher {
    /// A watcher that is already complete with `outcome`.
    pub(crate) fn ready(outcome: Result<()>) -> Self {
        DurableWatcher(Watch::Ready(outcome))
    }

    /// A watcher whose outcome is `wait`'s.
    pub(crate) fn from_future(
        wait: impl std::future::Future<Output = Result<()>> + Send + 'static,
    ) -> Self {
        DurableWatcher(Watch::Retry(Box::pin(wait)))
    }

    /// Resolves when the covering WAL append is persisted (`Ok`), failed (its typed error), or
    /// the handler went away (`HandlerExited`).
    ///
    /// # Cancel safety
    /// Dropping the future drops the watcher; the append still happens.
    pub async fn wait(self) -> Result<()> {
        self.wait_cost().await.map(|_| ())
    }

    /// [`DurableWatcher::wait`], also telling what the WAL entry that covered the put cost
    /// (see [`WalEntryCost`]): `None` for a retry answered from a remembered request id, which
    /// wrote nothing.
    pub async fn wait_cost(self) -> Result<Option<WalEntryCost>> {
        match self.0 {
            Watch::Cell(w) => w.wait().await.map(Some),
            Watch::Ready(outcome) => outcome.map(|()| None),
            Watch::Retry(wait) => wait.await.map(|()| None),
        }
    }
}

/// A durable put's connected cell.
pub(crate) fn put_completion() -> (PutCompletion, DurableWatcher) {
    let (c, w) = completion();
    (c, DurableWatcher(Watch::Cell(w)))
}

/// The writer's first terminal (fence) error. Written at most once; never cleared.
#[derive(Debug, Default)]
pub struct TerminalLatch(OnceLock<Error>);

impl TerminalLatch {
    /// Latches `error` if nothing is latched yet. Returns true if this call won.
    pub fn latch(&self, error: Error) -> bool {
        self.0.set(error).is_ok()
    }

    /// The latched error, if any.
    pub fn get(&self) -> Option<&Error> {
        self.0.get()
    }

    /// `Err(latched)` if an error is latched.
    pub fn check(&self) -> Result<()> {
        match self.get() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FenceReason;

    // A completion written with success resolves its watcher with success.
    #[tokio::test]
    async fn watcher_reports_success() {
        let (c, w) = put_completion();
        c.complete(Ok(WalEntryCost::at(1)));
        w.wait().await.unwrap();
    }

    // A typed failure reaches the watcher with its fence reason and message.
    #[tokio::test]
    async fn watcher_preserves_a_typed_failure() {
        let (c, w) = put_completion();
        c.complete(Err(Error::persistence_failure(
            "injected persistence failure",
            None,
        )));
        let e = w.wait().await.unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PersistenceFailure));
        assert!(e.to_string().contains("injected persistence failure"));
    }

    // A completion dropped unwritten (the WAL handler went away) fails its watcher: never a
    // success, never a hang.
    #[tokio::test]
    async fn dropped_completion_reports_handler_exit() {
        let (c, w) = put_completion();
        drop(c);
        let e = w.wait().await.unwrap_err();
        assert!(
            e.to_string()
                .contains("WAL flush handler exited before reporting durability")
        );
    }

    // The latch keeps the first error; later ones do not replace it.
    #[test]
    fn latch_keeps_the_first_error() {
        let l = TerminalLatch::default();
        assert!(l.check().is_ok());
        assert!(l.latch(Error::peer_claimed("first", None)));
        assert!(!l.latch(Error::persistence_failure("second", None)));
        let e = l.check().unwrap_err();
        assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch));
        assert!(e.to_string().contains("first"));
    }
}
