//! Making rows durable: the WAL flush handler, per-put completions, and generation flushes.
//!
//! Parts:
//! - [`completion`]: `PutCompletion` / [`DurableWatcher`], the request-scoped write-once
//!   cell of one durable put, and [`TerminalLatch`], where the first fence error is kept.
//! - `wal_handler`: `WalFlushHandler`, the one task per writer that owns the
//!   [`crate::wal::WalAppender`] and turns flush requests into WAL entries (group commit).
//! - `generation`: `GenerationFlusher`, the task that turns a frozen MemTable into a Parquet
//!   generation file and a manifest commit.
//! - `compaction`: how the generation flusher merges small generations after a commit.
//! - `feedback`: how those two tasks report back to the writer. The writer owns its state and
//!   is the only one that locks it; the tasks get what they need in their messages and send a
//!   `Report` for every change (an append, a committed generation), so data flows one way:
//!   writer → WAL handler → generation flusher, with reports flowing back.
//!
//! # Durability contract
//!
//! **A durable put resolves successfully only after the WAL append that covers its exact rows
//! (the exact BatchStore that accepted them, and their exact position range in it) has been
//! persisted.** Nothing else can satisfy it: not a flush of another generation, not a
//! watermark of another store, not a timer.
//!
//! 1. `put` captures the MemTable that accepted its rows *under the writer lock, before any
//!    trigger can rotate the MemTable*, and sends `FlushRequest { memtable, end, completion }`
//!    to the WAL flush handler.
//! 2. The handler appends what that store still owes, up to at least `end`, as one WAL entry
//!    (put-if-not-exists), and only after the store's put returned does it advance that
//!    store's [`crate::memtable::WalProgress`], report it to the writer, and complete the cell
//!    with `Ok`.
//! 3. If an earlier append of **the same store** already covered `end`, the cell completes
//!    with `Ok` and no I/O (coalesced empty flush). Progress is kept per store (found by
//!    `Arc` identity), so a range of another generation can never satisfy it.
//! 4. If the append fails, the cell gets that append's typed error (`PeerClaimedEpoch` or
//!    `PersistenceFailure`). The error is latched: every waiter and every later call gets it.
//! 5. If the handler goes away before writing the cell (abort, close, a task crash), the
//!    dropped cell yields "WAL flush handler exited before reporting durability". Never a
//!    success, never a hang.
//!
//! 6. **Retries (a put with a request id the writer remembers)** write nothing and are answered
//!    with the first put's result under the same rule, applied to the first put's rows: `Ok`
//!    only once the writer's record of the WAL progress of the exact MemTable that accepted
//!    them (reported by the handler after the covering append returned, as in 2) covers their
//!    range, or once they are in a committed generation, or when they were replayed from the
//!    WAL (so are in a persisted entry). A retry of a first put still in flight waits for
//!    that; if the first put's append fails, the error is latched (4), and the retry gets it.
//!    If the writer is aborted first, the retry gets "WAL flush handler exited before
//!    reporting durability", as the first put does. In non-durable mode a retry resolves at
//!    once, as the first put did. (`writer/put.rs`, `retried`.)
//!
//! Why it is subtle: batch positions are generation-local (every MemTable numbers its batches from
//! 0). Lance once tracked durability as one writer-wide watermark of those local positions, so
//! after a rotation the previous generation's flush "covered" position 0 of the new generation, and
//! a durable put was acknowledged before its own WAL append (the seed bug: `docs/durability.md`,
//! "Why it is subtle: the seed bug"; regression test
//! `durable_put_does_not_alias_across_memtable_generations`).
//!
//! Generation flushes keep a second rule: a frozen MemTable is written as a generation file
//! only after its own WAL append completed, and the manifest's replay cursor then moves to the
//! highest WAL position holding any of its batches; generations flush strictly in order, so the
//! cursor never skips an entry whose rows are not in a generation file.

pub mod compaction;
pub mod completion;
pub(crate) mod feedback;
pub(crate) mod generation;
pub(crate) mod legacy_watermark;
pub(crate) mod parquet;
pub(crate) mod wal_handler;

pub use completion::{DurableWatcher, TerminalLatch};
pub(crate) use completion::{PutCompletion, put_completion};
pub(crate) use feedback::{Feedback, Report, Reports};
