//! Replay on open: WAL entries after the manifest's replay cursor go back into MemTables.
//!
//! Replay starts at `replay_after_wal_entry_position + 1` and reads up to the first missing
//! position, whatever epoch wrote each entry (reference §5). Sentinels are skipped. An entry
//! with an epoch above ours means a successor claimed the shard while we opened: open aborts
//! with `PeerClaimedEpoch`. Each replayed MemTable comes back with its [`WalProgress`] (every
//! batch appended, the last in the entry it came from), so its batches are never appended
//! again (reference §10.3) and its generation flush moves the cursor to exactly the entries it
//! holds. MemTables rotate when
//! full; an entry is never split across two MemTables (the cursor could otherwise skip the
//! half in the unflushed one).
//!
//! The request-id records an entry carries go back with its rows: into the slot of the entry's
//! last batch (so the generation flush of the replayed MemTable persists them) and into
//! [`Replayed::requests`] (so the new writer answers retries of those puts).

use std::sync::Arc;

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
use crate::wal::{self, WalPosition};

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

pub(crate) async fn replay(
    store: &Store,
    paths: &ShardPaths,
    schema: &SchemaRef,
    config: &WriterConfig,
    epoch: u64,
    replay_after: u64,
    first_generation: u64,
) -> Result<Replayed> {
    let capacity = config.max_memtable_batches;
    let max_size = config.max_memtable_size;
    let mut frozen: Vec<Held> = Vec::new();
    let mut active = Held::new(
        Arc::new(MemTable::new(first_generation, capacity)),
        WalProgress::default(),
    );
    let (mut entries, mut rows) = (0u64, 0u64);
    let mut requests = Vec::new();
    // (position, epoch) of an entry written by a successor; the fence error is built after the
    // read, which cannot await the manifest read that names the holder.
    let mut successor_entry: Option<(u64, u64)> = None;
    let run = wal::read_run(store, paths, replay_after + 1, |entry| {
        entries += 1;
        if entry.writer_epoch > epoch {
            successor_entry = Some((entry.position, entry.writer_epoch));
            return Err(Error::peer_claimed("WAL replay aborted", None));
        }
        if entry.is_sentinel {
            return Ok(());
        }
        let object = paths.wal_entry(entry.position);
        let batches = entry
            .batches
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
        let batches: Vec<SizedBatch> = batches.into_iter().map(SizedBatch::new).collect();
        let bytes: u64 = batches.iter().map(|b| b.estimated_bytes).sum();
        rows += batches
            .iter()
            .map(|b| b.batch.num_rows() as u64)
            .sum::<u64>();
        let m = &active.memtable;
        if !m.store().is_empty() && m.would_overflow(batches.len(), bytes, max_size) {
            rotate(&mut active, &mut frozen, capacity);
        }
        if batches.len() > active.memtable.store().remaining() {
            // An entry larger than our MemTable capacity (written with a larger one): give it
            // a MemTable of its own size.
            active = Held::new(
                Arc::new(MemTable::new(active.memtable.generation(), batches.len())),
                WalProgress::default(),
            );
        }
        let range = active
            .memtable
            .insert_with(batches, entry.requests.clone())
            .expect("replay made room for the entry");
        requests.extend(
            entry
                .requests
                .into_iter()
                .map(|r| (r, active.memtable.clone(), range.end)),
        );
        let position = WalPosition::new(entry.position).expect("WAL positions start at 1");
        active.wal.advance(range.end, position);
        if active.memtable.should_freeze(max_size) {
            rotate(&mut active, &mut frozen, capacity);
        }
        Ok(())
    })
    .await;
    let next_position = match (run, successor_entry) {
        (Err(_), Some((position, writer_epoch))) => {
            // The fence must be reported even if the manifest cannot be read: the holder is
            // then unknown, never a read error in place of the fence.
            let latest = ManifestStore::new(store.clone(), paths.clone())
                .read_latest()
                .await;
            return Err(Error::peer_claimed_during_open(
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
            ));
        }
        (run, _) => run?,
    };
    if active.memtable.store().capacity() != capacity {
        // Only reachable when the oversized MemTable was also the last one; give puts a
        // normal one.
        rotate(&mut active, &mut frozen, capacity);
    }
    Ok(Replayed {
        frozen,
        active,
        next_position: WalPosition::new(next_position).expect("the WAL tip is at least 1"),
        entries,
        rows,
        requests,
    })
}

/// Freezes `active` into `frozen`; an empty MemTable of the next generation with room for
/// `capacity` batches takes its place.
fn rotate(active: &mut Held, frozen: &mut Vec<Held>, capacity: usize) {
    let next = Arc::new(MemTable::new(active.memtable.generation() + 1, capacity));
    frozen.push(std::mem::replace(
        active,
        Held::new(next, WalProgress::default()),
    ));
}
