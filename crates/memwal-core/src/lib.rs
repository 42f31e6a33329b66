//! memwal-core: a durable, write-ahead-logged MemTable of Apache Arrow record batches on an
//! object store (a local directory with fsync, memory, or any `object_store` backend).
//!
//! A [`ShardWriter`] owns one *shard*. Data flows one way:
//! `put` → [`memtable`] (readable at once) → WAL flush handler ([`flush`], [`wal`]) →
//! generation flush (Parquet) → [`manifest`]. A new writer claims a higher epoch and fences
//! the old one, whose next WAL append fails with a typed error.
//!
//! **Durability contract** (details in [`flush`]): in durable mode, `put` resolves
//! successfully only after the WAL entry covering exactly its rows (in exactly the MemTable
//! generation that accepted them) is persisted. Otherwise it fails with that append's typed
//! error, or with "WAL flush handler exited before reporting durability"; it never hangs.
//!
//! **Retry-safe puts** ([`request_id`], [`PutOptions`]): a put with a request id the writer
//! remembers writes nothing and returns the first put's result, under the same contract
//! applied to the first put's rows.

#![deny(clippy::all)]
#![deny(clippy::await_holding_lock)]
#![warn(missing_docs)]

pub mod batch_store;
mod claim;
pub mod config;
pub mod error;
pub mod events;
pub mod flush;
pub mod gc;
pub mod holder;
pub mod manifest;
pub mod memtable;
pub mod reader;
pub mod redact;
pub mod request_id;
pub mod shard;
pub mod stats;
pub mod store;
pub mod wal;
pub mod write_result;
pub mod writer;

pub use batch_store::BatchRange;
pub use config::{OptionValue, WriterConfig};
pub use error::{Error, ErrorCode, FenceReason, Result};
pub use events::{EventSink, WriterEvent};
pub use flush::DurableWatcher;
pub use holder::ShardHolder;
pub use manifest::{FlushedGeneration, ShardManifest};
pub use memtable::WalProgress;
pub use reader::{
    GenerationFile, ListedShard, ScanResult, ShardListing, ShardReader, WalTailer, list_shards,
};
pub use redact::redact_secrets;
pub use request_id::{PutRecord, RequestId};
pub use shard::{DEFAULT_SHARD_NAME, ShardName, ShardRef};
pub use stats::{
    LatencySummary, MemTableStats, OpenStats, Operation, OperationStats, OperationsStats,
    StoreRequestStats, WalEntryCost, WalStats, WriteStats,
};
pub use store::Store;
pub use wal::{WalEntry, WalPosition};
pub use writer::{BlockedPut, PutMode, PutOptions, ShardWriter, Submitted, WriteResult};
