//! The write-ahead log: one object per entry, at 1-based, gap-free positions.
//!
//! - [`entry`]: the codec (Arrow IPC stream, `writer_epoch`, fence sentinel, checksum).
//! - [`appender`]: [`WalAppender`], which appends one entry at the next position with
//!   put-if-not-exists and classifies the outcome (ok / `PeerClaimedEpoch` /
//!   `PersistenceFailure`). It is the only writer of WAL slots and is owned by the WAL flush
//!   handler, so WAL order is insert order. Its interface is narrow (append a list of batches,
//!   write a sentinel) so another backend could replace it.
//!
//! Reading helpers here are shared by replay, [`crate::ShardReader`] and [`crate::WalTailer`].
//!
//! # Invariant
//! A slot is written once, ever (put-if-not-exists), and entry `n + 1` is only attempted after
//! entry `n` exists, so the WAL has no holes: the first missing position is the tip.

pub mod appender;
pub mod entry;

pub use appender::{AppendedEntry, WalAppender};
pub use entry::WalEntry;

use crate::error::{Error, Result};
use crate::store::{ShardPaths, Store, parse_bitrev64_name};

/// How many HEADs tip discovery spends before falling back to a LIST (reference §1.4).
const MAX_TIP_PROBES: u64 = 4096;
/// Entries fetched concurrently while reading a run of the WAL.
const READ_AHEAD: u64 = 16;

/// Reads the entry at `position`, `None` if the slot is empty.
pub async fn read_entry(
    store: &Store,
    paths: &ShardPaths,
    position: u64,
) -> Result<Option<WalEntry>> {
    let path = paths.wal_entry(position);
    let bytes = store.get(&path).await.map_err(|e| {
        Error::io(
            format!("reading WAL entry {position} of shard {}", paths.shard_id()),
            e,
        )
    })?;
    bytes
        .map(|b| entry::decode_entry(position, path.as_ref(), b))
        .transpose()
}

/// Reads entries `start, start+1, …` up to the first missing position, calling `each` in
/// position order. Returns the first missing position (the tip, as seen by this read).
pub async fn read_run(
    store: &Store,
    paths: &ShardPaths,
    start: u64,
    mut each: impl FnMut(WalEntry) -> Result<()>,
) -> Result<u64> {
    let mut position = start.max(1);
    loop {
        let window = (position..position + READ_AHEAD).map(|p| read_entry(store, paths, p));
        let entries = futures::future::join_all(window).await;
        for e in entries {
            match e? {
                Some(entry) => {
                    each(entry)?;
                    position += 1;
                }
                None => return Ok(position),
            }
        }
    }
}

/// The first empty WAL position, starting the search at `hint` (a position believed to
/// exist, or 0): HEAD probes forward from the hint, then a LIST if the hint is wrong or the
/// probe budget runs out.
pub async fn discover_tip(store: &Store, paths: &ShardPaths, hint: u64) -> Result<u64> {
    let exists = |p: u64| async move {
        store.exists(&paths.wal_entry(p)).await.map_err(|e| {
            Error::io(
                format!("probing WAL position {p} of shard {}", paths.shard_id()),
                e,
            )
        })
    };
    let start = hint.max(1);
    if exists(start).await? {
        for p in start + 1..start + 1 + MAX_TIP_PROBES {
            if !exists(p).await? {
                return Ok(p);
            }
        }
    } else if start == 1 {
        return Ok(1);
    }
    let listing = store
        .list(&paths.wal_dir())
        .await
        .map_err(|e| Error::io(format!("listing the WAL of shard {}", paths.shard_id()), e))?;
    let max = listing
        .iter()
        .filter_map(|m| m.location.filename().and_then(parse_bitrev64_name))
        .max()
        .unwrap_or(0);
    Ok(max + 1)
}
