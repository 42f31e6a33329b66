//! The one error type of memwal-core.
//!
//! Every failure a caller can see is an [`Error`]. Callers branch on [`Error::code`] (a small,
//! stable set, mirrored one to one in the JavaScript API) and, for fence errors, on
//! [`Error::fence_reason`]; the message is for humans and says what happened, with identifying
//! values, then what to do. `Error` is `Clone` (sources sit in `Arc`s) so that one latched
//! terminal failure can be delivered to every waiter.

use std::fmt;
use std::sync::Arc;

use crate::holder::ShardHolder;

/// Result alias used throughout memwal-core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed, shareable error cause.
pub type Source = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Stable, coarse error categories. A new code is an API change: add one only when callers
/// would handle it differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The writer lost ownership of the shard (or can no longer vouch for its WAL). Stop
    /// writing through this handle; reopen to take the shard over and replay the WAL.
    Fenced,
    /// The call was malformed: bad option, empty input, oversized put. Fix the call.
    InvalidArgument,
    /// The batches do not have the shard's schema. Cast or rebuild them.
    SchemaMismatch,
    /// The handle was closed or aborted. Open a new one.
    Closed,
    /// Stored data could not be decoded. The object named in the message needs attention.
    Corrupt,
    /// The object store failed. Often transient; the message keeps the cause.
    Io,
    /// The object store did not answer within its time budget (connect, request or retry
    /// budget), or a caller's deadline passed. The operation may still have taken effect.
    Timeout,
    /// A WAL position that garbage collection has removed was read. Resume from the first
    /// available position the error carries.
    Truncated,
}

impl ErrorCode {
    /// The code as the stable upper-case string used by the JavaScript API.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Fenced => "FENCED",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::SchemaMismatch => "SCHEMA_MISMATCH",
            ErrorCode::Closed => "CLOSED",
            ErrorCode::Corrupt => "CORRUPT",
            ErrorCode::Io => "IO",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Truncated => "TRUNCATED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a writer was fenced. Both reasons are terminal for the writer handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceReason {
    /// Another writer claimed a higher epoch: it owns the shard now.
    PeerClaimedEpoch,
    /// This writer could not make its WAL durable (retries exhausted, an ambiguous lost
    /// acknowledgement, a failed sync): its memory may diverge from the durable WAL.
    PersistenceFailure,
}

impl FenceReason {
    /// `PeerClaimedEpoch` or `PersistenceFailure`, as exposed to JavaScript.
    pub fn as_str(self) -> &'static str {
        match self {
            FenceReason::PeerClaimedEpoch => "PeerClaimedEpoch",
            FenceReason::PersistenceFailure => "PersistenceFailure",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            FenceReason::PeerClaimedEpoch => "peer claimed epoch",
            FenceReason::PersistenceFailure => "persistence failure",
        }
    }
}

/// Every error memwal-core returns.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The writer is fenced; see [`FenceReason`].
    #[error("Writer fenced ({}): {message}", reason.describe())]
    Fenced {
        /// Why.
        reason: FenceReason,
        /// What happened and what to do.
        message: String,
        /// The storage error behind a persistence failure, if any.
        #[source]
        source: Option<Source>,
        /// For `PeerClaimedEpoch`, the writer that holds the shard, as the manifest that fenced
        /// us records it; `None` if that manifest records no holder or could not be read.
        /// Boxed to keep `Result<T>` small.
        holder: Option<Box<ShardHolder>>,
    },
    /// A bad argument or configuration value.
    #[error("{message}")]
    InvalidArgument {
        /// What was wrong and how to fix it.
        message: String,
    },
    /// Batches whose schema is not the shard's.
    #[error("Schema mismatch: {message}")]
    SchemaMismatch {
        /// Names the differing field.
        message: String,
    },
    /// The handle is closed.
    #[error("{message}")]
    Closed {
        /// Which handle, and what to do.
        message: String,
    },
    /// A durable put's completion was dropped: the WAL flush handler stopped (abort, close, or a
    /// crash of the task) before it could report an outcome. Never a success.
    #[error("WAL flush handler exited before reporting durability{context}")]
    HandlerExited {
        /// Extra context, e.g. " during close".
        context: String,
    },
    /// Stored data that cannot be decoded.
    #[error("Corrupt object {object}: {message}")]
    Corrupt {
        /// The object's path.
        object: String,
        /// What is wrong with it.
        message: String,
        /// The decoder's error.
        #[source]
        source: Option<Source>,
    },
    /// An operation ran out of time: the object store did not answer within its budget, or a
    /// caller's deadline passed. The message starts with "Timed out", names the operation and
    /// the budget, and says what to change.
    #[error("{message}")]
    Timeout {
        /// What timed out, after how long, and what to do.
        message: String,
        /// The store's timeout error, if the store raised it.
        #[source]
        source: Option<Source>,
    },
    /// A WAL position at or below the shard's low-water mark whose entry was collected
    /// (see [`crate::gc`]).
    #[error("{message}")]
    Truncated {
        /// Which position, and where to resume.
        message: String,
        /// The first WAL position that is still available (the low-water mark plus one).
        first_available: u64,
    },
    /// An object-store or local I/O failure.
    #[error("{message}")]
    Io {
        /// What was being done.
        message: String,
        /// The store's error.
        #[source]
        source: Option<Source>,
    },
}

impl Error {
    /// The stable error category.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Fenced { .. } => ErrorCode::Fenced,
            Error::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            Error::SchemaMismatch { .. } => ErrorCode::SchemaMismatch,
            Error::Closed { .. } => ErrorCode::Closed,
            Error::HandlerExited { .. } => ErrorCode::Closed,
            Error::Corrupt { .. } => ErrorCode::Corrupt,
            Error::Io { .. } => ErrorCode::Io,
            Error::Timeout { .. } => ErrorCode::Timeout,
            Error::Truncated { .. } => ErrorCode::Truncated,
        }
    }

    /// For [`Error::Truncated`], the first WAL position still available; `None` for every
    /// other error.
    pub fn first_available(&self) -> Option<u64> {
        match self {
            Error::Truncated {
                first_available, ..
            } => Some(*first_available),
            _ => None,
        }
    }

    /// `Truncated` for `position` of `shard`, whose entries up to `low_water` may be gone.
    pub(crate) fn truncated(shard: uuid::Uuid, position: u64, low_water: u64) -> Self {
        Error::Truncated {
            message: format!(
                "WAL entry {position} of shard {shard} was removed by garbage collection (its rows are in flushed generations); the first available position is {}. Resume from there, or read the generations for older rows",
                low_water + 1
            ),
            first_available: low_water + 1,
        }
    }

    /// The fence reason of a [`Error::Fenced`] error, `None` for every other error.
    pub fn fence_reason(&self) -> Option<FenceReason> {
        match self {
            Error::Fenced { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// The writer holding the shard, for a `PeerClaimedEpoch` fence whose manifest records
    /// it; `None` for every other error.
    pub fn holder(&self) -> Option<&ShardHolder> {
        match self {
            Error::Fenced { holder, .. } => holder.as_deref(),
            _ => None,
        }
    }

    /// True for errors that end the writer's life (fences). They are latched.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Error::Fenced { .. })
    }

    /// `PeerClaimedEpoch` of a writer that was open: `seen` says what fenced it; the holder
    /// (or that it is unknown) and what to do follow.
    pub(crate) fn peer_claimed(seen: impl Into<String>, holder: Option<ShardHolder>) -> Self {
        Self::peer_claimed_then(seen, holder, "stop writing here, or reopen to take it over")
    }

    /// `PeerClaimedEpoch` that ends an open: a peer claimed while we did.
    pub(crate) fn peer_claimed_during_open(
        seen: impl Into<String>,
        holder: Option<ShardHolder>,
    ) -> Self {
        Self::peer_claimed_then(
            seen,
            holder,
            "only one writer may own a shard; retry the open to take it over",
        )
    }

    fn peer_claimed_then(
        seen: impl Into<String>,
        holder: Option<ShardHolder>,
        advice: &str,
    ) -> Self {
        Error::Fenced {
            reason: FenceReason::PeerClaimedEpoch,
            message: format!(
                "{}. {}; {advice}.",
                seen.into(),
                crate::holder::describe_holder(holder.as_ref())
            ),
            source: None,
            holder: holder.map(Box::new),
        }
    }

    pub(crate) fn persistence_failure(message: impl Into<String>, source: Option<Source>) -> Self {
        Error::Fenced {
            reason: FenceReason::PersistenceFailure,
            message: message.into(),
            source,
            holder: None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            message: message.into(),
        }
    }

    pub(crate) fn closed(message: impl Into<String>) -> Self {
        Error::Closed {
            message: message.into(),
        }
    }

    /// A store failure while `message` (what was being done, e.g. "reading manifest version
    /// 3 of shard …"). A failure that was a timeout becomes [`Error::Timeout`], so that it says
    /// so instead of reading like a refusal: every store error passes through here.
    pub(crate) fn io(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        let message = message.into();
        if is_timeout(&source) {
            return Error::Timeout {
                message: format!(
                    "Timed out {message}: the object store did not answer in time. Check the endpoint and the network; the storage options `connect_timeout`, `timeout` (per request) and `client_retry_timeout` (all retries of one request) set the budgets"
                ),
                source: Some(Arc::new(source)),
            };
        }
        Error::Io {
            message,
            source: Some(Arc::new(source)),
        }
    }

    pub(crate) fn io_msg(message: impl Into<String>) -> Self {
        Error::Io {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn corrupt(
        object: impl Into<String>,
        message: impl Into<String>,
        source: Option<Source>,
    ) -> Self {
        Error::Corrupt {
            object: object.into(),
            message: message.into(),
            source,
        }
    }

    /// Every `source()` of this error, outermost first, rendered as text.
    pub fn causes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = std::error::Error::source(self);
        while let Some(e) = cur {
            out.push(e.to_string());
            cur = e.source();
        }
        out
    }
}

/// Whether `e` or any of its sources is a timeout: an HTTP request or connection that timed
/// out in the object store client, or an I/O error of kind `TimedOut`.
pub(crate) fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
        if let Some(h) = e.downcast_ref::<object_store::client::HttpError>()
            && h.kind() == object_store::client::HttpErrorKind::Timeout
        {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// Whether `e` or any of its sources says that no connection to the store could be made
/// (refused, no route, a host name that does not resolve): the store was never reached, so the
/// failure says nothing about what the store supports.
pub(crate) fn is_unreachable(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    let mut cur = Some(e);
    while let Some(e) = cur {
        #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
        if let Some(h) = e.downcast_ref::<object_store::client::HttpError>()
            && h.kind() == object_store::client::HttpErrorKind::Connect
        {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                ErrorKind::ConnectionRefused
                    | ErrorKind::HostUnreachable
                    | ErrorKind::NetworkUnreachable
                    | ErrorKind::AddrNotAvailable
            )
        {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_display_keeps_the_documented_prefixes() {
        let e = Error::peer_claimed("shard s, our epoch 1, manifest epoch 2", None);
        assert!(
            e.to_string()
                .starts_with("Writer fenced (peer claimed epoch): ")
        );
        assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch));
        assert_eq!(e.code(), ErrorCode::Fenced);
        let e = Error::persistence_failure("WAL persistence failed", None);
        assert!(
            e.to_string()
                .starts_with("Writer fenced (persistence failure): ")
        );
        assert_eq!(e.fence_reason(), Some(FenceReason::PersistenceFailure));
        assert!(e.holder().is_none());
    }

    #[test]
    fn a_peer_claimed_fence_names_its_holder_or_says_it_is_unknown() {
        let holder = ShardHolder {
            writer_id: "w2".into(),
            host: "h".into(),
            pid: 42,
            epoch: 2,
            claimed_at_ms: 0,
        };
        let e = Error::peer_claimed("local epoch 1 < stored epoch 2", Some(holder.clone()));
        assert_eq!(e.holder(), Some(&holder));
        assert_eq!(
            e.to_string(),
            "Writer fenced (peer claimed epoch): local epoch 1 < stored epoch 2. The shard is owned by writer w2 on host h pid 42 (epoch 2, claimed at 1970-01-01T00:00:00.000Z); stop writing here, or reopen to take it over."
        );
        let e = Error::peer_claimed("local epoch 1 < stored epoch 2", None);
        assert!(e.holder().is_none());
        assert!(e.to_string().contains("holder unknown"), "{e}");
    }

    #[test]
    fn only_fence_errors_have_a_reason_and_are_terminal() {
        let others = [
            Error::invalid("x"),
            Error::closed("x"),
            Error::io_msg("x"),
            Error::corrupt("p", "x", None),
            Error::HandlerExited {
                context: String::new(),
            },
            Error::SchemaMismatch {
                message: "x".into(),
            },
        ];
        for e in others {
            assert_eq!(e.fence_reason(), None, "{e}");
            assert!(!e.is_terminal(), "{e}");
        }
    }

    #[test]
    fn handler_exited_message_is_stable() {
        let e = Error::HandlerExited {
            context: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "WAL flush handler exited before reporting durability"
        );
        assert_eq!(e.code(), ErrorCode::Closed);
    }

    #[test]
    fn a_store_error_that_timed_out_is_a_timeout_not_an_io_error() {
        let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer");
        let e = Error::io("reading manifest version 3 of shard s", timed_out);
        assert_eq!(e.code(), ErrorCode::Timeout);
        assert_eq!(e.code().as_str(), "TIMEOUT");
        let m = e.to_string();
        assert!(
            m.starts_with("Timed out reading manifest version 3 of shard s: "),
            "{m}"
        );
        assert!(m.contains("client_retry_timeout"), "{m}");
        assert_eq!(e.causes(), vec!["no answer".to_string()]);
        assert!(!e.is_terminal());
        // Wrapped in an object_store error, as the stores return it.
        let wrapped = object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::new(std::io::ErrorKind::TimedOut, "x")),
        };
        assert_eq!(Error::io("x", wrapped).code(), ErrorCode::Timeout);
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "no");
        assert_eq!(Error::io("x", refused).code(), ErrorCode::Io);
    }

    #[test]
    fn causes_walk_the_source_chain() {
        let inner = std::io::Error::other("disk on fire");
        let e = Error::io("writing WAL entry 3", inner);
        assert_eq!(e.causes(), vec!["disk on fire".to_string()]);
    }
}
