//! [`WalAppender`]: appends entries at the next WAL position, each slot created at most once
//! (put-if-not-exists), which is what fences a stale writer (`docs/fencing.md`, section 1).
//!
//! Outcomes of one append:
//! - **created**: the entry is durable (the store's put returned); the position advances.
//! - **slot taken** (`AlreadyExists`): the slot may hold our own write whose acknowledgement
//!   was lost (after a failed attempt of ours, or one the object store client retried
//!   internally). Read it back: if it holds exactly our bytes, the append succeeded (the bytes
//!   carry our epoch, and a writer never sends two different entries to one slot, so nobody
//!   else can have written them). Lance reports this case as `PersistenceFailure`, though the
//!   append may have landed; the read-back tells. A read-back that fails resolves nothing: it
//!   is retried like a failed put (same slot, same budget), never taken for someone else's
//!   entry.
//! - **slot taken** otherwise: read the manifest. A higher epoch means a successor fenced us:
//!   `PeerClaimedEpoch`. A fence sentinel of a lower epoch is skipped: a writer that claimed
//!   just before us and lost the open race can write its sentinel after ours (its open then
//!   aborts); it holds no rows. Else, after a failed attempt, `PersistenceFailure` ("taken
//!   after a failed PUT"). We never write the same data to the next slot, which could
//!   duplicate it. Any other taken slot cannot happen in a correct deployment; memwal treats it
//!   as `PersistenceFailure` too rather than skipping ahead (Lance skips, which could leave our
//!   rows behind another writer's).
//! - **sync failure** (an `fsync` error from a local store, told apart by
//!   [`crate::store::is_sync_failure`] only): `PersistenceFailure` at once, no retry and no
//!   read-back: after a failed sync the kernel may have dropped the data (fsyncgate), and the
//!   entry may be readable without being durable. The same holds for a fence sentinel, whose
//!   failed sync fails the open.
//! - **other error**: check the manifest first (a successor's fence is terminal; do not spend
//!   retries), then retry the **same** position with exponential backoff; after
//!   `max_wal_persist_retries` retries, `PersistenceFailure`.

use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;

use crate::claim::Claim;
use crate::config::RetryPolicy;
use crate::error::{Error, Result};
use crate::request_id::PutRecord;
use crate::store::{CreateOutcome, FirstFree, ShardPaths, Staged, Store};
use crate::wal::{WalPosition, entry};

/// What one successful append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedEntry {
    /// The entry's WAL position.
    pub position: WalPosition,
    /// Batches in the entry.
    pub num_batches: usize,
    /// Rows in the entry.
    pub num_rows: usize,
    /// Encoded size in bytes.
    pub bytes: usize,
}

/// Taken slots a fence sentinel passes (and stale sentinels an append steps over) before
/// giving up: an open racing a predecessor that keeps appending fails with an error to retry
/// rather than chase its tip for ever.
const MAX_SENTINEL_CONFLICTS: u32 = 1024;
/// Consecutive WAL slots one fence-sentinel put may take, the first free in order. A live
/// predecessor keeps appending while the sentinel's data syncs, so its exact tip is often
/// taken by then; a local store syncs the sentinel once and then only tries names.
const SENTINEL_SLOTS: u64 = 8;

/// A writer's fence sentinel, staged ([`Store::stage`]) before its epoch claim ends, so that
/// its data syncs while the claim's does and only a link remains for
/// [`WalAppender::write_fence_sentinel`].
#[derive(Debug)]
pub struct StagedSentinel {
    epoch: u64,
    put: Staged,
}

impl StagedSentinel {
    /// Stages the sentinel of `epoch` in the WAL directory of `paths`. Nothing is visible
    /// until it is written: a staged sentinel of an epoch that is never claimed is harmless.
    pub async fn stage(store: &Store, paths: &ShardPaths, epoch: u64) -> Result<Self> {
        let bytes = entry::encode_sentinel(epoch)?;
        let put = store.stage(&paths.wal_entry(1), bytes).await.map_err(|e| {
            Error::io(
                format!("staging the fence sentinel of shard {}", paths.shard_id()),
                e,
            )
        })?;
        Ok(StagedSentinel { epoch, put })
    }
}

/// Appends WAL entries for one writer epoch. See the module docs.
#[derive(Debug)]
pub struct WalAppender {
    claim: Arc<Claim>,
    next_position: u64,
    retry: RetryPolicy,
    /// Whether a put waits for each append (durable mode): then the store may open the next
    /// entry's file while this one is written ([`crate::store::Backend::create`]). A non-durable
    /// writer's appends are waited for by nobody, and the extra thread would take CPU from
    /// the puts.
    prepare_next: bool,
}

impl WalAppender {
    /// An appender for the writer of `claim` whose next append goes to `next_position`.
    pub(crate) fn new(claim: Arc<Claim>, next_position: u64, retry: RetryPolicy) -> Self {
        WalAppender {
            claim,
            next_position: next_position.max(1),
            retry,
            prepare_next: false,
        }
    }

    /// Has the store open each next entry's file ahead (see the field): for durable writers.
    pub(crate) fn set_prepare_next(&mut self, prepare_next: bool) {
        self.prepare_next = prepare_next;
    }

    /// The position the next append will try.
    pub fn next_position(&self) -> WalPosition {
        WalPosition::new(self.next_position).expect("next_position is at least 1")
    }

    pub(crate) fn set_next_position(&mut self, position: WalPosition) {
        self.next_position = position.get();
    }

    /// The writer epoch stamped on every entry.
    pub fn epoch(&self) -> u64 {
        self.claim.epoch
    }

    /// Appends `batches` as one entry at the next position.
    pub async fn append(&mut self, batches: &[RecordBatch]) -> Result<AppendedEntry> {
        self.append_with(batches, &[]).await
    }

    /// Appends `batches` as one entry at the next position, recording `requests` (the
    /// request-id records of the puts whose rows they are) in its metadata.
    pub async fn append_with(
        &mut self,
        batches: &[RecordBatch],
        requests: &[PutRecord],
    ) -> Result<AppendedEntry> {
        let (epoch, shard) = (self.claim.epoch, self.claim.paths.shard_id());
        // The entry records its slot, so it is encoded for the slot it is written to.
        let encode = |position: u64| {
            let place = entry::EntryPlace { shard, position };
            entry::encode_entry_with(epoch, batches, requests, Some(place))
        };
        let (position, len) = self.append_encoded(encode).await?;
        Ok(AppendedEntry {
            position: WalPosition::new(position).expect("appends start at position 1"),
            num_batches: batches.len(),
            num_rows: batches.iter().map(|b| b.num_rows()).sum(),
            bytes: len,
        })
    }

    /// `Some(PeerClaimedEpoch)` if the manifest shows a higher epoch. A failed manifest read
    /// yields `None`: the caller then treats the situation as its own failure.
    async fn successor_fence(&self) -> Option<Error> {
        match self.claim.check_fenced().await {
            Err(e) if e.fence_reason().is_some() => Some(e),
            _ => None,
        }
    }

    /// Whether the slot at `path` holds exactly `bytes`; `Err` if it could not be read.
    async fn holds(
        &self,
        path: &object_store::path::Path,
        bytes: &Bytes,
    ) -> object_store::Result<bool> {
        Ok(matches!(self.claim.store.get(path).await?, Some(existing) if existing == *bytes))
    }

    /// Writes the entry `encode` makes for a slot at the next position (or, past stale
    /// sentinels, a later one); the position written and the entry's size. Each attempt ends in
    /// one of the outcomes of the module docs.
    async fn append_encoded(
        &mut self,
        encode: impl Fn(u64) -> Result<Bytes>,
    ) -> Result<(u64, usize)> {
        let mut slot = Slot::new(&self.claim.paths, self.next_position, &encode)?;
        self.claim
            .store
            .faults()
            .pause_point("wal-append-before-put")
            .await;
        loop {
            match self
                .claim
                .store
                .put_if_absent_then(&slot.path, slot.bytes.clone(), self.prepare_next)
                .await
            {
                Ok(CreateOutcome::Created) => break,
                Ok(CreateOutcome::AlreadyExists) => match self.slot_taken(&mut slot).await? {
                    Taken::Ours => break,
                    Taken::Unknown => {}
                    Taken::StaleSentinel => {
                        slot.skip(&self.claim.paths, &encode)?;
                        self.next_position = slot.position;
                    }
                },
                Err(e) => self.put_failed(&mut slot, e).await?,
            }
        }
        self.next_position = slot.position + 1;
        Ok((slot.position, slot.bytes.len()))
    }

    /// After a put found `slot` taken: whether the entry there is ours, a stale sentinel to
    /// step over, or unknown (it could not be read back: retry); else the error.
    async fn slot_taken(&self, slot: &mut Slot) -> Result<Taken> {
        let (position, shard) = (slot.position, self.claim.paths.shard_id());
        match self.holds(&slot.path, &slot.bytes).await {
            // An earlier attempt of ours landed and only its response was lost (ours, or one
            // retried inside the object store client, which then reports the slot as taken).
            // The entry's bytes name our epoch, so no other writer can have written exactly
            // them: the append succeeded.
            Ok(true) => return Ok(Taken::Ours),
            Ok(false) => {}
            Err(e) => {
                // The slot may hold our own write: until it can be read back the outcome is
                // unknown, never a fence. Retry like a failed put.
                if !self
                    .retry
                    .wait_before_retry(&mut slot.failed_attempts, "wal read-back", &e)
                    .await
                {
                    let failed_attempts = slot.failed_attempts;
                    return Err(Error::persistence_failure(
                        format!(
                            "WAL position {position} for shard {shard} is taken and could not be read back after {failed_attempts} retries, so whether it holds this entry is unknown; in-memory state may diverge from the durable WAL, reopen to replay: {e}"
                        ),
                        Some(std::sync::Arc::new(e)),
                    ));
                }
                return Ok(Taken::Unknown);
            }
        }
        if let Some(fence) = self.successor_fence().await {
            return Err(fence);
        }
        if slot.stale_sentinels < MAX_SENTINEL_CONFLICTS
            && self.holds_stale_sentinel(position).await
        {
            // A writer that claimed a lower epoch just before us found the tip after our
            // sentinel and wrote its own there (its open then aborts on ours). It holds no rows
            // and nobody will write after it, so skipping it neither duplicates nor strands data.
            return Ok(Taken::StaleSentinel);
        }
        let message = if slot.failed_attempts > 0 {
            format!(
                "WAL position {position} for shard {shard} was taken after a failed PUT; in-memory state may diverge from the durable WAL, reopen to replay"
            )
        } else {
            format!(
                "WAL position {position} for shard {shard} is already taken although no writer claimed a higher epoch; in-memory state may diverge from the durable WAL, reopen to replay"
            )
        };
        Err(Error::persistence_failure(message, None))
    }

    /// After a put at `slot` failed with `e`: `Ok` to try the same slot again (after the
    /// backoff), or the error that ends the append.
    async fn put_failed(&self, slot: &mut Slot, e: object_store::Error) -> Result<()> {
        let (position, shard) = (slot.position, self.claim.paths.shard_id());
        if let Some(fence) = self.successor_fence().await {
            return Err(fence);
        }
        if crate::store::is_sync_failure(&e) {
            // fsyncgate: after a failed sync the kernel may have dropped the dirty pages, so a
            // later "successful" retry proves nothing. Stop here.
            return Err(Error::persistence_failure(
                format!(
                    "WAL persistence failed for shard {shard} at position {position}: a sync failed, so the entry may or may not be durable and is not retried; reopen to replay: {e}"
                ),
                Some(std::sync::Arc::new(e)),
            ));
        }
        if !self
            .retry
            .wait_before_retry(&mut slot.failed_attempts, "wal append", &e)
            .await
        {
            let failed_attempts = slot.failed_attempts;
            return Err(Error::persistence_failure(
                format!(
                    "WAL persistence failed for shard {shard} at position {position} after {failed_attempts} retries; in-memory state may diverge from the durable WAL, reopen to replay: {e}"
                ),
                Some(std::sync::Arc::new(e)),
            ));
        }
        Ok(())
    }

    /// One attempt at the sentinel (`bytes`): stages it first if that has not succeeded yet.
    async fn put_sentinel(
        &self,
        staged: &mut Option<Staged>,
        bytes: &Bytes,
        candidates: &[object_store::path::Path],
    ) -> object_store::Result<FirstFree> {
        let put = match staged {
            Some(put) => put,
            None => staged.insert(
                self.claim
                    .store
                    .stage(&candidates[0], bytes.clone())
                    .await?,
            ),
        };
        self.claim
            .store
            .put_if_absent_first_free(candidates, put)
            .await
    }

    /// Whether `position` holds a fence sentinel of an epoch below ours.
    async fn holds_stale_sentinel(&self, position: u64) -> bool {
        matches!(
            super::read_entry(&self.claim.store, &self.claim.paths, position).await,
            Ok(Some(e)) if e.is_sentinel && e.writer_epoch < self.claim.epoch
        )
    }

    /// Writes a fence sentinel at the WAL tip, starting the search at `tip`, and moves the
    /// next position past it (how it fences: `docs/fencing.md`, section 1). A slot taken
    /// meanwhile means another entry landed there; the sentinel goes to the next slot. Returns
    /// the sentinel's position. `staged`, if it is this epoch's, spares the write its data sync.
    pub async fn write_fence_sentinel(
        &mut self,
        tip: u64,
        staged: Option<StagedSentinel>,
    ) -> Result<u64> {
        let mut staged = staged
            .filter(|s| s.epoch == self.claim.epoch)
            .map(|s| s.put);
        let bytes = entry::encode_sentinel(self.claim.epoch)?;
        let mut search = SentinelSearch {
            position: tip.max(1),
            conflicts: 0,
            failed_attempts: 0,
            ours_may_have_landed: false,
        };
        loop {
            let candidates: Vec<_> = search
                .slots()
                .map(|p| self.claim.paths.wal_entry(p))
                .collect();
            let at = match self.put_sentinel(&mut staged, &bytes, &candidates).await {
                Ok(FirstFree::Created(i)) => Some(search.position + i as u64),
                Ok(FirstFree::Taken(taken)) => {
                    self.sentinel_slots_taken(&mut search, taken).await?
                }
                Err(e) => {
                    self.sentinel_put_failed(&mut search, e).await?;
                    None
                }
            };
            if let Some(at) = at {
                self.next_position = at + 1;
                return Ok(at);
            }
        }
    }

    /// After the sentinel's put found the first `taken` of its slots taken: the position of
    /// our own sentinel if that is what the one slot holds, else `None` to search on past them,
    /// or the error once there were too many conflicts.
    async fn sentinel_slots_taken(
        &self,
        search: &mut SentinelSearch,
        taken: usize,
    ) -> Result<Option<u64>> {
        let position = search.position;
        // One slot: a retry inside the store client may have landed our first attempt; a
        // sentinel of our epoch can only be ours, as epochs are claimed once. (Several slots
        // come only from a local store, which does not retry, and only before any failed put.)
        if taken == 1
            && let Ok(Some(e)) =
                super::read_entry(&self.claim.store, &self.claim.paths, position).await
            && e.is_sentinel
            && e.writer_epoch == self.claim.epoch
        {
            return Ok(Some(position));
        }
        search.conflicts += taken as u32;
        search.failed_attempts = 0;
        if search.conflicts >= MAX_SENTINEL_CONFLICTS {
            return Err(Error::io_msg(format!(
                "fence sentinel write for shard {} failed after {} conflicts; retry the open",
                self.claim.paths.shard_id(),
                search.conflicts
            )));
        }
        search.position += taken as u64;
        Ok(None)
    }

    /// After the sentinel's put failed with `e`: `Ok` to try again (one slot at a time from
    /// now on, after the backoff), or the error that fails the open.
    async fn sentinel_put_failed(
        &self,
        search: &mut SentinelSearch,
        e: object_store::Error,
    ) -> Result<()> {
        let (shard, position) = (self.claim.paths.shard_id(), search.position);
        if crate::store::is_sync_failure(&e) {
            // The sentinel may be readable but not durable; reading it back would accept it
            // (fsyncgate). A lost sentinel would let the predecessor append after our replay,
            // so the open fails.
            return Err(Error::io(
                format!(
                    "writing the fence sentinel of shard {shard} at WAL position {position}: a sync failed, so the sentinel may or may not be durable and is not trusted; retry the open"
                ),
                e,
            ));
        }
        search.ours_may_have_landed = true;
        if !self
            .retry
            .wait_before_retry(&mut search.failed_attempts, "fence sentinel", &e)
            .await
        {
            return Err(Error::io(
                format!(
                    "writing the fence sentinel of shard {shard} at WAL position {position} failed after {} retries",
                    search.failed_attempts
                ),
                e,
            ));
        }
        Ok(())
    }
}

/// The slot one append is trying, with what its attempts so far found.
struct Slot {
    position: u64,
    path: object_store::path::Path,
    /// The entry as encoded for this slot (it records its position).
    bytes: Bytes,
    /// Failed puts and read-backs at this slot, counted against the retry budget.
    failed_attempts: u32,
    /// Stale sentinels stepped over so far.
    stale_sentinels: u32,
}

impl Slot {
    /// The slot at `position`, with the entry `encode` makes for it.
    fn new(
        paths: &ShardPaths,
        position: u64,
        encode: &impl Fn(u64) -> Result<Bytes>,
    ) -> Result<Self> {
        Ok(Slot {
            position,
            path: paths.wal_entry(position),
            bytes: encode(position)?,
            failed_attempts: 0,
            stale_sentinels: 0,
        })
    }

    /// Moves to the next position, past a stale sentinel, with a fresh retry budget.
    fn skip(&mut self, paths: &ShardPaths, encode: &impl Fn(u64) -> Result<Bytes>) -> Result<()> {
        self.stale_sentinels += 1;
        self.failed_attempts = 0;
        self.position += 1;
        self.path = paths.wal_entry(self.position);
        self.bytes = encode(self.position)?;
        Ok(())
    }
}

/// What a taken slot turned out to hold (see [`WalAppender::slot_taken`]).
enum Taken {
    /// Exactly our entry: the append succeeded.
    Ours,
    /// It could not be read back: try the slot again.
    Unknown,
    /// A fence sentinel of a lower epoch: skip to the next slot.
    StaleSentinel,
}

/// Where a fence sentinel's search for a free slot is.
struct SentinelSearch {
    /// The first slot the next put tries.
    position: u64,
    /// Slots found taken so far.
    conflicts: u32,
    failed_attempts: u32,
    /// After a failed put, one of ours may have landed: then go one slot at a time and read
    /// each taken slot back.
    ours_may_have_landed: bool,
}

impl SentinelSearch {
    /// The slots the next put tries, the first free in order.
    fn slots(&self) -> std::ops::Range<u64> {
        let slots = if self.ours_may_have_landed {
            1
        } else {
            SENTINEL_SLOTS
        };
        self.position..self.position + slots
    }
}

#[async_trait::async_trait]
impl super::WalWriter for WalAppender {
    fn next_position(&self) -> WalPosition {
        WalAppender::next_position(self)
    }

    async fn append_with(
        &mut self,
        batches: &[RecordBatch],
        requests: &[PutRecord],
    ) -> Result<AppendedEntry> {
        WalAppender::append_with(self, batches, requests).await
    }

    /// Nothing to do: each entry was durable, and fenced by its create if absent, when its
    /// append returned.
    async fn commit(&mut self) -> std::result::Result<(), super::CommitFailed> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WriterConfig;

    #[tokio::test]
    async fn a_staged_sentinel_is_used_only_for_its_own_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::local(dir.path()).unwrap();
        let paths = store.shard_paths(uuid::Uuid::new_v4());
        let appender = |epoch| {
            let claim = Claim {
                store: store.clone(),
                paths: paths.clone(),
                manifests: crate::manifest::ManifestStore::new(store.clone(), paths.clone()),
                epoch,
                writer_id: "w".to_string(),
                schema: Arc::new(arrow_schema::Schema::empty()),
            };
            WalAppender::new(Arc::new(claim), 1, WriterConfig::default().retry_policy())
        };
        let staged = StagedSentinel::stage(&store, &paths, 3).await.unwrap();
        assert!(
            store.list(&paths.wal_dir()).await.unwrap().is_empty(),
            "a staged sentinel is invisible"
        );
        // A claim that ended at another epoch than the one staged for: the sentinel is
        // written for the epoch claimed.
        let mut a2 = appender(2);
        assert_eq!(a2.write_fence_sentinel(1, Some(staged)).await.unwrap(), 1);
        let mut a3 = appender(3);
        let staged = StagedSentinel::stage(&store, &paths, 3).await.unwrap();
        assert_eq!(a3.write_fence_sentinel(1, Some(staged)).await.unwrap(), 2);
        assert_eq!(a3.next_position().get(), 3);
        for (position, epoch) in [(1, 2), (2, 3)] {
            let e = crate::wal::read_entry(&store, &paths, position)
                .await
                .unwrap()
                .unwrap();
            assert!(e.is_sentinel);
            assert_eq!(e.writer_epoch, epoch, "sentinel at {position}");
        }
    }
}
