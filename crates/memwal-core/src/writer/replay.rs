//! Replay on open: WAL entries after the manifest's replay cursor go back into MemTables.
//!
//! Replay starts at `replay_after_wal_entry_position + 1` and reads up to the first missing
//! position, whatever epoch wrote each entry: a predecessor's entries after the cursor hold
//! rows it may have acknowledged and never flushed. Sentinels are skipped. An entry with an
//! epoch above ours means a successor claimed the shard while we opened: open aborts with
//! `PeerClaimedEpoch`. Each replayed MemTable comes back with its [`WalProgress`] (every batch
//! appended, the last in the entry it came from), so its batches are never appended again (a
//! second copy in the WAL would be replayed twice) and its generation flush moves the cursor to
//! exactly the entries it holds. MemTables rotate when full; an entry is never split across two
//! MemTables (the cursor could otherwise skip the half in the unflushed one).
//!
//! The request-id records an entry carries go back with its rows: into the slot of the entry's
//! last batch (so the generation flush of the replayed MemTable persists them) and into
//! [`Replayed::requests`] (so the new writer answers retries of those puts).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use super::state::Held;
use crate::batch_store::SizedBatch;
use crate::config::WriterConfig;
use crate::error::{Error, Result};
use crate::manifest::ManifestStore;
use crate::memtable::{MemTable, WalProgress};
use crate::reader::conform;
use crate::request_id::PutRecord;
use crate::store::{ShardPaths, Store};
use crate::wal::segments::{self, log::Read};
use crate::wal::{self, WalEntry, WalPosition};

/// MemTables rebuilt from the WAL.
pub(crate) struct Replayed {
    /// Full MemTables, oldest first, to be queued for generation flushes.
    pub frozen: Vec<Held>,
    /// The MemTable that takes new puts.
    pub active: Held,
    /// The first empty WAL position.
    pub next_position: WalPosition,
    /// Entries read (fence sentinels included).
    pub entries: u64,
    /// Rows put back into MemTables.
    pub rows: u64,
    /// The request-id records of the replayed entries, oldest first, each with the MemTable
    /// its rows went back into and the end of the entry there.
    pub requests: Vec<(PutRecord, Arc<MemTable>, usize)>,
}

/// Replays the WAL of the shard at `paths` after position `replay_after` into MemTables,
/// numbered from `first_generation`, for the writer of `epoch`.
///
/// # Errors
/// `PeerClaimedEpoch` (naming the successor if its manifest can be read) if an entry has an
/// epoch above `epoch`; `Corrupt` for an entry that cannot be read or does not match `schema`.
pub(crate) async fn replay(
    store: &Store,
    paths: &ShardPaths,
    schema: &SchemaRef,
    config: &WriterConfig,
    epoch: u64,
    replay_after: u64,
    first_generation: u64,
) -> Result<Replayed> {
    let mut rebuilt = Rebuilt::new(config, first_generation);
    let mut successor_entry: Option<(u64, u64)> = None;
    let run = wal::read_run(store, paths, replay_after + 1, |entry| {
        rebuilt.entry(paths, schema, epoch, entry, &mut successor_entry)
    })
    .await;
    let next_position = match (run, successor_entry) {
        (Err(_), Some((position, writer_epoch))) => {
            return Err(successor_fence(store, paths, epoch, position, writer_epoch).await);
        }
        (run, _) => run?,
    };
    Ok(rebuilt.finish(next_position))
}

/// [`replay`] of a segment-log shard, from what the claim read of its log (`read`, from the
/// position after the replay cursor to the end).
pub(crate) async fn replay_segments(
    store: &Store,
    paths: &ShardPaths,
    schema: &SchemaRef,
    config: &WriterConfig,
    epoch: u64,
    read: &Read,
    first_generation: u64,
) -> Result<Replayed> {
    let mut rebuilt = Rebuilt::new(config, first_generation);
    let mut successor_entry: Option<(u64, u64)> = None;
    let mut run = Ok(());
    for entry in segments::entries(read, paths) {
        run = entry.and_then(|e| rebuilt.entry(paths, schema, epoch, e, &mut successor_entry));
        if run.is_err() {
            break;
        }
    }
    if let (Err(_), Some((position, writer_epoch))) = (&run, successor_entry) {
        return Err(successor_fence(store, paths, epoch, position, writer_epoch).await);
    }
    run?;
    Ok(rebuilt.finish(read.scanned.end))
}

/// The `batches` of the entry at `position`, made to match the shard's `schema` and measured.
fn conformed(
    paths: &ShardPaths,
    schema: &SchemaRef,
    position: u64,
    batches: Vec<RecordBatch>,
) -> Result<Vec<SizedBatch>> {
    let object = paths.wal_entry(position);
    let batches = batches
        .into_iter()
        .map(|b| conform(b, schema))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| {
            Error::corrupt(
                object.as_ref(),
                format!("WAL entry does not match the shard schema: {e}"),
                None,
            )
        })?;
    Ok(batches.into_iter().map(SizedBatch::new).collect())
}

/// The error for an entry of `writer_epoch`, above our `epoch`, at `position`: a successor
/// claimed the shard while we opened it.
async fn successor_fence(
    store: &Store,
    paths: &ShardPaths,
    epoch: u64,
    position: u64,
    writer_epoch: u64,
) -> Error {
    // The fence must be reported even if the manifest cannot be read: the holder is then
    // unknown, never a read error in place of the fence.
    let latest = ManifestStore::new(store.clone(), paths.clone())
        .read_latest()
        .await;
    Error::peer_claimed_during_open(
        format!(
            "WAL replay aborted: entry at position {position} has writer_epoch {writer_epoch} > our claimed epoch {epoch} for shard {} (a peer claimed the shard while we opened it)",
            paths.shard_id()
        ),
        // Only a manifest of a higher epoch names the successor; ours would name us.
        latest
            .ok()
            .flatten()
            .filter(|m| m.writer_epoch > epoch)
            .and_then(|m| m.holder()),
    )
}

/// The MemTables replay is filling, and what it counted.
struct Rebuilt {
    /// Batches a MemTable holds (`max_memtable_batches`).
    capacity: usize,
    /// `max_memtable_size`.
    max_size: u64,
    frozen: Vec<Held>,
    active: Held,
    entries: u64,
    rows: u64,
    requests: Vec<(PutRecord, Arc<MemTable>, usize)>,
}

impl Rebuilt {
    /// Nothing replayed yet: one empty MemTable of `first_generation`.
    fn new(config: &WriterConfig, first_generation: u64) -> Self {
        let capacity = config.max_memtable_batches;
        Rebuilt {
            capacity,
            max_size: config.max_memtable_size,
            frozen: Vec::new(),
            active: Held::new(
                Arc::new(MemTable::new(first_generation, capacity)),
                WalProgress::default(),
            ),
            entries: 0,
            rows: 0,
            requests: Vec::new(),
        }
    }

    /// Replays `entry`: its rows back into MemTables, a sentinel skipped. An entry of an epoch
    /// above ours is recorded in `successor` and ends replay: a successor claimed the shard
    /// while we opened it. The fence error is built after the read, which cannot await the
    /// manifest read that names the holder.
    fn entry(
        &mut self,
        paths: &ShardPaths,
        schema: &SchemaRef,
        epoch: u64,
        entry: WalEntry,
        successor: &mut Option<(u64, u64)>,
    ) -> Result<()> {
        self.entries += 1;
        if entry.writer_epoch > epoch {
            *successor = Some((entry.position, entry.writer_epoch));
            return Err(Error::peer_claimed("WAL replay aborted", None));
        }
        if entry.is_sentinel {
            return Ok(());
        }
        let batches = conformed(paths, schema, entry.position, entry.batches)?;
        self.put_back(entry.position, entry.requests, batches);
        Ok(())
    }

    /// Puts `batches`, the rows of the data entry at `position`, back into the active MemTable,
    /// whole, with the entry's request-id records `requests`; rotates before if they would
    /// overflow a MemTable that holds rows already, and after once the MemTable is full.
    fn put_back(&mut self, position: u64, requests: Vec<PutRecord>, batches: Vec<SizedBatch>) {
        let bytes: u64 = batches.iter().map(|b| b.estimated_bytes).sum();
        self.rows += batches
            .iter()
            .map(|b| b.batch.num_rows() as u64)
            .sum::<u64>();
        let m = &self.active.memtable;
        if !m.batch_store().is_empty() && m.would_overflow(batches.len(), bytes, self.max_size) {
            self.rotate();
        }
        if batches.len() > self.active.memtable.batch_store().remaining() {
            // An entry larger than our MemTable capacity (written with a larger one): give it
            // a MemTable of its own size.
            self.active = Held::new(
                Arc::new(MemTable::new(
                    self.active.memtable.generation(),
                    batches.len(),
                )),
                WalProgress::default(),
            );
        }
        let active = &mut self.active;
        let range = active
            .memtable
            .insert_with(batches, requests.clone())
            .expect("replay made room for the entry");
        self.requests.extend(
            requests
                .into_iter()
                .map(|r| (r, active.memtable.clone(), range.end)),
        );
        let position = WalPosition::new(position).expect("WAL positions start at 1");
        active.wal.advance(range.end, position);
        if active.memtable.should_freeze(self.max_size) {
            self.rotate();
        }
    }

    /// Freezes the active MemTable; an empty MemTable of the next generation with room for
    /// `capacity` batches takes its place.
    fn rotate(&mut self) {
        let next = Arc::new(MemTable::new(
            self.active.memtable.generation() + 1,
            self.capacity,
        ));
        self.frozen.push(std::mem::replace(
            &mut self.active,
            Held::new(next, WalProgress::default()),
        ));
    }

    /// What replay found, the WAL's first empty position being `next_position`.
    fn finish(mut self, next_position: u64) -> Replayed {
        if self.active.memtable.batch_store().capacity() != self.capacity {
            // Only reachable when the oversized MemTable was also the last one; give puts a
            // normal one.
            self.rotate();
        }
        Replayed {
            frozen: self.frozen,
            active: self.active,
            next_position: WalPosition::new(next_position).expect("the WAL tip is at least 1"),
            entries: self.entries,
            rows: self.rows,
            requests: self.requests,
        }
    }
}
