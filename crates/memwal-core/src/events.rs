//! Events a writer reports as they happen, so a service learns of a fence, a flush or a
//! collection without waiting for its next call.
//!
//! A writer has at most one [`EventSink`] (installed by its `on_event`); the Node binding
//! installs one that forwards to JavaScript. Events are sent from the writer's background
//! tasks, right after what they describe took effect; with no sink installed, nothing is built.
//! A sink must not block: it runs on those tasks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::error::Error;
use crate::gc::GcReport;

/// Something that happened to a writer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum WriterEvent {
    /// The writer was fenced: every later call fails with this error. Sent once, as soon as a
    /// background task (or a call) finds it, also when no call is waiting.
    Fenced {
        /// The fence, as every later call gets it: its [`Error::fence_reason`] says why, and
        /// for `PeerClaimedEpoch` its [`Error::holder`] names the writer that holds the shard.
        error: Error,
    },
    /// A WAL entry was appended (it is durable).
    WalAppend {
        /// Its WAL position.
        position: u64,
        /// Puts in it: how many puts shared the entry.
        puts: u64,
        /// Batches in it (one or more per put).
        batches: u64,
        /// Rows in it.
        rows: u64,
        /// Its size in bytes.
        bytes: u64,
        /// How long the append took, retries included.
        latency: Duration,
    },
    /// A MemTable was flushed as a generation file and committed in the manifest.
    GenerationFlushed {
        /// Its generation number.
        generation: u64,
        /// Rows in it.
        rows: u64,
        /// Its estimated in-memory bytes.
        bytes: u64,
        /// Its file, as an object path in the store.
        file: String,
        /// How long the flush took (encode, write, commit).
        latency: Duration,
    },
    /// Compaction merged generations into one, committed in the manifest.
    Compaction {
        /// How many generations were merged.
        merged: u64,
        /// The merged generation's number (the last merged one's).
        generation: u64,
        /// Rows in it.
        rows: u64,
        /// Its file, as an object path in the store.
        file: String,
    },
    /// A background garbage collection ran.
    Gc(GcReport),
    /// An object-store or WAL operation failed and is retried after `delay` (the writer
    /// gives up after `max_wal_persist_retries`).
    Retry {
        /// What is retried: `wal append`, `wal read-back`, `fence sentinel` or
        /// `generation flush`.
        operation: &'static str,
        /// Which retry this is (1 for the first).
        attempt: u32,
        /// The failure that is retried, as its message, credentials masked
        /// ([`crate::redact`]).
        error: String,
        /// The backoff before the retry.
        delay: Duration,
    },
    /// Puts started (`waiting: true`) or stopped (`false`) waiting for backpressure
    /// (`max_unflushed_memtable_bytes`): once when the first put has to wait, once when the
    /// last waiting put goes in.
    Backpressure {
        /// Whether puts are now waiting.
        waiting: bool,
        /// The unflushed bytes the limit counts (active and frozen MemTables, or the queued
        /// batches in WAL-only mode), at that moment.
        bytes_waiting: u64,
    },
    /// A background task failed without fencing the writer (a garbage collection); puts go on.
    Error {
        /// What failed.
        error: Error,
    },
}

/// An operation slower than this is logged at `warn` (a WAL append, a generation flush).
pub const SLOW_OPERATION: Duration = Duration::from_secs(1);

/// Logs `operation` at `warn` if it took longer than [`SLOW_OPERATION`].
pub(crate) fn warn_if_slow(operation: &'static str, took: Duration) {
    if took > SLOW_OPERATION {
        tracing::warn!(
            target: "memwal::slow",
            operation,
            ms = took.as_millis() as u64,
            "slow {operation}"
        );
    }
}

/// Logs a committed generation flush (and warns if it was slow).
pub(crate) fn log_flush(
    shard: uuid::Uuid,
    generation: u64,
    rows: u64,
    bytes: Option<u64>,
    took: Duration,
) {
    tracing::info!(
        target: "memwal::flush",
        shard = %shard,
        generation,
        rows,
        bytes,
        ms = took.as_millis() as u64,
        "flushed generation"
    );
    warn_if_slow("generation flush", took);
}

/// Receives a writer's events. Called on the writer's background tasks: it must return quickly.
pub type EventSink = Arc<dyn Fn(WriterEvent) + Send + Sync>;

/// Where a writer's events go: nowhere until a sink is installed, once.
#[derive(Default)]
pub(crate) struct Events {
    sink: OnceLock<EventSink>,
    /// Whether the fence was sent: the task that latched it and the installation of a sink can
    /// both find it, and it is news once.
    fence_sent: AtomicBool,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.sink.get().is_some() {
            "Events(subscribed)"
        } else {
            "Events(none)"
        })
    }
}

impl Events {
    /// Installs `sink`; `false` if one was installed already.
    pub fn subscribe(&self, sink: EventSink) -> bool {
        self.sink.set(sink).is_ok()
    }

    /// Sends the event `make` builds, if anyone listens (so an event costs nothing otherwise).
    pub fn send(&self, make: impl FnOnce() -> WriterEvent) {
        if let Some(sink) = self.sink.get() {
            sink(make());
        }
    }

    /// Sends `fence` (the writer's latched error) as [`WriterEvent::Fenced`], once.
    pub fn send_fenced(&self, fence: &Error) {
        if self.sink.get().is_some() && !self.fence_sent.swap(true, Ordering::SeqCst) {
            self.send(|| WriterEvent::Fenced {
                error: fence.clone(),
            });
        }
    }
}
