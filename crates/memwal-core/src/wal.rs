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
//!
//! Only something outside memwal can break this (an object deleted by hand or by a bucket
//! lifecycle rule, a restore that missed one). Readers must not take such a hole for the tip:
//! every entry after it would be silently dropped, and a writer would fill the hole and then
//! collide with the entries after it. So a reader that stops at an empty slot checks that no
//! later entry exists ([`find_gap`]), and reports a hole as `Corrupt` naming it.

pub mod appender;
pub mod entry;
pub mod segments;

pub use appender::{AppendedEntry, StagedSentinel, WalAppender};
pub use entry::WalEntry;

use arrow_array::RecordBatch;

use crate::request_id::PutRecord;

/// One writer's side of a shard's WAL: entries appended at consecutive positions, durable, and
/// safe from a successor's claim, once [`WalWriter::commit`] returns `Ok`. The WAL flush
/// handler (`crate::flush::wal_handler`) appends each round's entries, commits once, then
/// acknowledges the round.
///
/// Two layouts: the object layout ([`WalAppender`]: one object per entry, created if absent,
/// durable and fenced as it is created, so its commit has nothing left to do), and the segment
/// log for local disks ([`segments`]: appends into a preallocated file, one `fdatasync` and a
/// re-check of the fence per commit; see `docs/wal-segments.md`).
#[async_trait::async_trait]
pub(crate) trait WalWriter: Send + std::fmt::Debug {
    /// The position the next append takes.
    fn next_position(&self) -> WalPosition;
    /// Appends `batches` as one entry at the next position, recording `requests` (the
    /// request-id records of the puts whose rows they are) in its metadata.
    async fn append_with(
        &mut self,
        batches: &[RecordBatch],
        requests: &[PutRecord],
    ) -> Result<AppendedEntry>;
    /// Makes every entry appended since the last commit durable and checks that no successor
    /// fenced them. Called after every round, even one whose append failed: the entries
    /// appended before the failure are committed or failed here.
    ///
    /// # Errors
    /// [`CommitFailed`]: the typed failure that fences the writer (`PeerClaimedEpoch`,
    /// `PersistenceFailure`), and the entries of the round that stand anyway.
    async fn commit(&mut self) -> std::result::Result<(), CommitFailed>;

    /// Waits for whatever this WAL still does in the background (the segment log allocating a
    /// spare), so that a closed writer no longer touches the shard's files.
    async fn close(&mut self) {}
}

/// A commit that failed: the entries at or past `stands_below` fail with `error`; those below
/// it stand (durable, and replayed by the successor that fenced the rest), and their puts
/// succeed.
#[derive(Debug)]
pub(crate) struct CommitFailed {
    /// Why, for the entries that do not stand.
    pub error: Error,
    /// The first position that does not stand.
    pub stands_below: u64,
}

pub use crate::store::WalLayout;

use std::fmt;

use crate::error::{Error, Result};
use crate::store::{ShardPaths, Store, parse_bitrev64_name};

/// The position of one WAL entry: 1-based, gap-free, one sequence per shard.
///
/// A separate type from batch positions ([`crate::BatchRange`], 0-based and local to one MemTable
/// generation) so that the two cannot be compared: a generation-local batch end taken for WAL
/// progress is the seed bug (`docs/durability.md`, "Why it is subtle: the seed bug").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WalPosition(u64);

impl WalPosition {
    /// The first position of every WAL.
    pub const FIRST: WalPosition = WalPosition(1);

    /// `position` as a WAL position; `None` for 0, which names no entry (a replay cursor of 0
    /// means "before the first entry").
    pub fn new(position: u64) -> Option<WalPosition> {
        (position >= 1).then_some(WalPosition(position))
    }

    /// The number, as the manifest and object names store it.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The position after this one.
    pub fn next(self) -> WalPosition {
        WalPosition(self.0 + 1)
    }

    /// The position before this one, `None` for the first.
    pub fn prev(self) -> Option<WalPosition> {
        WalPosition::new(self.0 - 1)
    }
}

impl fmt::Display for WalPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The WAL low-water mark of `manifest` as readers, tailers and an opening writer use it:
/// entries at or below it may be gone.
///
/// Usually the manifest's own `wal_low_water`. But a manifest written by another
/// implementation (Lance, taking a shard over) lacks that field, which then reads as 0 although
/// collection had removed entries: an empty slot there would be taken for a hole, and a search
/// for the tip could end below the replay cursor. So when the recorded mark is below the
/// cursor, the highest empty slot at or below the cursor (from one listing of the WAL) counts
/// as collected, and so does everything under it: entries up to the cursor have their rows in
/// flushed generations, so none of them can be a hole that loses rows, and above the cursor
/// nothing changes. Every slot ever collected is empty and at or below the cursor, so this
/// mark covers it; slots between it and the cursor all hold entries. A fence sentinel kept
/// below a removed run (see [`crate::gc`]) does not lower it.
///
/// No store call unless the recorded mark is below the cursor, which memwal's own manifests
/// never are once a generation was committed (every commit raises the mark to the cursor).
pub async fn low_water(
    store: &Store,
    paths: &ShardPaths,
    manifest: &crate::manifest::ShardManifest,
) -> Result<u64> {
    let (recorded, cursor) = (
        manifest.wal_low_water,
        manifest.replay_after_wal_entry_position,
    );
    if recorded >= cursor {
        return Ok(recorded);
    }
    let listing = store
        .list(&paths.wal_dir())
        .await
        .map_err(|e| Error::io(format!("listing the WAL of shard {}", paths.shard_id()), e))?;
    let present: std::collections::HashSet<u64> = listing
        .iter()
        .filter_map(|m| m.location.filename().and_then(parse_bitrev64_name))
        .filter(|p| *p > recorded && *p <= cursor)
        .collect();
    let mut mark = cursor;
    while mark > recorded && present.contains(&mark) {
        mark -= 1;
    }
    Ok(mark)
}

/// HEADs issued at once while searching for the WAL tip.
const TIP_FANOUT: u64 = 16;
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
        .map(|b| {
            let place = entry::EntryPlace {
                shard: paths.shard_id(),
                position,
            };
            entry::decode_entry(place, path.as_ref(), b)
        })
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

/// The first hole after position `after`: an empty slot with an entry at a later position.
/// `None` if the entries after `after` are gap-free. One LIST, plus one HEAD per empty slot that
/// the listing shows below a listed entry (a listing is not a snapshot: an entry created while
/// it ran may be missing from it, but never from a later HEAD, and entries are created in
/// order, so an empty slot below an existing entry is a hole for good).
pub async fn find_gap(store: &Store, paths: &ShardPaths, after: u64) -> Result<Option<Gap>> {
    let listing = store
        .list(&paths.wal_dir())
        .await
        .map_err(|e| Error::io(format!("listing the WAL of shard {}", paths.shard_id()), e))?;
    let mut positions: Vec<u64> = listing
        .iter()
        .filter_map(|m| m.location.filename().and_then(parse_bitrev64_name))
        .filter(|p| *p > after)
        .collect();
    positions.sort_unstable();
    let Some(&last) = positions.last() else {
        return Ok(None);
    };
    let mut expected = after + 1;
    for p in positions {
        while expected < p {
            let exists = store
                .exists(&paths.wal_entry(expected))
                .await
                .map_err(|e| {
                    Error::io(
                        format!(
                            "probing WAL position {expected} of shard {}",
                            paths.shard_id()
                        ),
                        e,
                    )
                })?;
            if !exists {
                return Ok(Some(Gap {
                    missing: expected,
                    last,
                }));
            }
            expected += 1;
        }
        expected = p + 1;
    }
    Ok(None)
}

/// Whether the empty slot `position` is a hole rather than the tip, judged by its successor
/// alone (two HEADs; what a poller at the tip can afford, where [`find_gap`] lists the WAL):
/// a hole of more than one slot is only found from its last slot.
pub async fn hole_at(store: &Store, paths: &ShardPaths, position: u64) -> Result<Option<Gap>> {
    let exists = |p: u64| async move {
        store.exists(&paths.wal_entry(p)).await.map_err(|e| {
            Error::io(
                format!("probing WAL position {p} of shard {}", paths.shard_id()),
                e,
            )
        })
    };
    // The successor first: entries are created in order, so if `position` is still empty
    // after its successor was seen, it is empty for good.
    if exists(position + 1).await? && !exists(position).await? {
        return Ok(Some(Gap {
            missing: position,
            last: position + 1,
        }));
    }
    Ok(None)
}

/// A hole in a WAL: `missing` is empty although entries exist up to `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The first empty position below a written one.
    pub missing: u64,
    /// The last written position seen.
    pub last: u64,
}

impl Gap {
    /// The `Corrupt` error that reports this hole in the WAL of `paths`.
    pub fn error(self, paths: &ShardPaths) -> Error {
        Error::corrupt(
            paths.wal_entry(self.missing).as_ref(),
            format!(
                "WAL entry {} of shard {} is missing, but an entry exists at position {}: the WAL has a hole (an object deleted outside memwal?). Nothing after it is read or replayed, and no writer can open the shard, until the entry is restored",
                self.missing,
                paths.shard_id(),
                self.last
            ),
            None,
        )
    }
}

/// The first empty WAL position, starting the search at `hint` (a position believed to
/// exist, or 0) and never below `low_water + 1`, the shard's low-water mark ([`low_water`];
/// entries at or below it may have been collected, so an empty slot there says nothing about
/// the tip):
/// HEAD probes forward from the hint, then a LIST if the hint is wrong.
///
/// Positions are filled in order (if entry N is not written, N+1 does not exist), so "exists"
/// is monotone past the hint. The search gallops (hint+1, +2, +4, … +2^15, probed at once),
/// then narrows the bracket with up to [`TIP_FANOUT`] evenly spaced probes at once: a few
/// round trips whatever the distance. A new writer's hint is often far behind the tip, since
/// the manifest's `wal_entry_position_last_seen` only moves at generation flushes; probing one
/// by one made claiming a live shard cost one round trip per unflushed entry.
pub async fn discover_tip(
    store: &Store,
    paths: &ShardPaths,
    hint: u64,
    low_water: u64,
) -> Result<u64> {
    let exists = |p: u64| async move {
        store.exists(&paths.wal_entry(p)).await.map_err(|e| {
            Error::io(
                format!("probing WAL position {p} of shard {}", paths.shard_id()),
                e,
            )
        })
    };
    // Probes `positions` (ascending) at once; the index of the first empty one.
    let first_empty = |positions: Vec<u64>| async move {
        let found = futures::future::try_join_all(positions.iter().map(|p| exists(*p))).await?;
        Ok::<_, Error>(found.iter().position(|e| !e))
    };
    // Nothing is collected above the low-water mark, so from there on the WAL is gap-free.
    let floor = low_water + 1;
    let start = hint.max(floor);
    if exists(start).await? {
        // Invariant: `lo` exists and `hi` was empty when probed.
        let mut lo = start;
        let mut hi = None;
        while hi.is_none() {
            let gallop: Vec<u64> = (0..TIP_FANOUT)
                .map_while(|k| lo.checked_add(1 << k))
                .collect();
            let Some(&last) = gallop.last() else { break };
            match first_empty(gallop.clone()).await? {
                Some(i) => {
                    lo = if i == 0 { lo } else { gallop[i - 1] };
                    hi = Some(gallop[i]);
                }
                None => lo = last,
            }
        }
        if let Some(mut hi) = hi {
            while hi - lo > 1 {
                let step = ((hi - lo) / (TIP_FANOUT + 1)).max(1);
                let probes: Vec<u64> = (1..=TIP_FANOUT)
                    .map(|j| lo + j * step)
                    .take_while(|p| *p < hi)
                    .collect();
                match first_empty(probes.clone()).await? {
                    Some(i) => {
                        if i > 0 {
                            lo = probes[i - 1];
                        }
                        hi = probes[i];
                    }
                    None => lo = *probes.last().expect("hi - lo > 1 leaves a probe"),
                }
            }
            return Ok(hi);
        }
    } else if start == floor {
        return Ok(floor);
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
    // Kept fence sentinels may be listed below the mark (see `crate::gc`).
    Ok((max + 1).max(floor))
}
