//! [`SegmentWalWriter`]: the writer's [`WalWriter`] over a claimed [`SegmentLog`].
//!
//! # The contract, where it is enforced
//! The WAL flush handler appends a round's entries, then commits once, and acknowledges only
//! what the commit says stands (`crate::flush::wal_handler`). Here a commit is:
//! 1. `fdatasync` of every segment written since the last commit, on a blocking thread;
//! 2. a re-read of the fence file. Only if it still holds our epoch did no claimant read the
//!    log before these records were durable, so every claimant from now on replays them: the
//!    round stands.
//! 3. Otherwise a successor claimed the shard. Its claim wrote the fence file before it read
//!    the log, and it starts its own segment at the end it read: our records below that
//!    first position were replayed (they were in the page cache it read, and are now synced),
//!    those at or past it never will be. So the commit waits for that segment to appear and
//!    fails with `stands_below` set to its first position: the handler acknowledges the puts
//!    below and fails the rest with `PeerClaimedEpoch`. A claimant that never gets that far
//!    (it died between its fence write and its segment) leaves the outcome unknown: after
//!    [`SUCCESSOR_WAIT`] the rest fail with `PersistenceFailure`, which says so. So does a
//!    commit that finds that segment already collected (a writer stalled across the claim,
//!    a generation flush and a collection): where the replay ended went with it.
//!
//! A failed sync is never retried (the kernel may have dropped the pages it failed to write):
//! the round and everything after fail, and the writer is poisoned by the handler.
//!
//! Appends write into the page cache and stay on the task unless they rotate (a sync, and a
//! rename of a spare, or its allocation if none is ready), which moves them to a blocking
//! thread. After a claim and after each rotation, a background task allocates the next spare.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;

use super::log::Successor;
use super::log::{LogError, SegmentFiles, SegmentLog};
use crate::claim::Claim;
use crate::error::{Error, Result};
use crate::request_id::PutRecord;
use crate::wal::{AppendedEntry, CommitFailed, WalPosition, WalWriter, entry};

/// How long a fenced commit waits for its successor's first segment before it calls the
/// outcome of its last records unknown. A claimant creates it right after reading the log.
pub const SUCCESSOR_WAIT: Duration = Duration::from_secs(30);
/// How often a fenced commit looks for its successor's first segment.
const SUCCESSOR_POLL: Duration = Duration::from_millis(2);

/// See the module docs.
#[derive(Debug)]
pub(crate) struct SegmentWalWriter {
    claim: Arc<Claim>,
    /// `None` only while a blocking call holds it (and for good if that call was dropped).
    log: Option<SegmentLog>,
    /// The first position not yet committed.
    uncommitted: u64,
    /// The spare being allocated in the background, if any: awaited by [`WalWriter::close`],
    /// so that a closed writer leaves no task writing into the shard's folder.
    allocation: Option<tokio::task::JoinHandle<()>>,
}

impl SegmentWalWriter {
    /// A writer appending to `log`, claimed by `claim`. Starts allocating the next spare.
    pub fn new(claim: Arc<Claim>, log: SegmentLog) -> Self {
        let mut writer = SegmentWalWriter {
            claim,
            uncommitted: log.next_position(),
            log: Some(log),
            allocation: None,
        };
        writer.prepare_spare();
        writer
    }

    fn log(&self) -> Result<&SegmentLog> {
        self.log.as_ref().ok_or_else(lost)
    }

    /// Allocates a full-size spare in the background, unless one is being allocated.
    fn prepare_spare(&mut self) {
        let Ok(log) = self.log() else { return };
        if self.allocation.as_ref().is_some_and(|a| !a.is_finished()) {
            return;
        }
        let files: SegmentFiles = log.files().clone();
        self.allocation = Some(tokio::task::spawn_blocking(move || {
            // A failure here only means the next rotation allocates its own spare.
            if let Err(e) = files.ensure_spare() {
                tracing::warn!(target: "memwal::wal", error = %e, "allocating a WAL segment spare failed");
            }
        }));
    }

    /// Runs `f` on the log on a blocking thread.
    async fn blocking<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut SegmentLog) -> T + Send + 'static,
    ) -> Result<T> {
        let mut log = self.log.take().ok_or_else(lost)?;
        let (log, out) = tokio::task::spawn_blocking(move || {
            let out = f(&mut log);
            (log, out)
        })
        .await
        .map_err(|e| Error::persistence_failure(format!("a WAL segment call failed: {e}"), None))?;
        self.log = Some(log);
        Ok(out)
    }

    /// The commit failure after a claim: which of our uncommitted records stand (see the
    /// module docs, step 3).
    async fn claimed(&mut self) -> CommitFailed {
        let deadline = tokio::time::Instant::now() + SUCCESSOR_WAIT;
        let mut found = Successor::Replaying;
        while tokio::time::Instant::now() < deadline {
            match self.blocking(|log| log.successor_start()).await {
                Ok(Ok(Successor::Replaying)) => tokio::time::sleep(SUCCESSOR_POLL).await,
                Ok(Ok(successor)) => {
                    found = successor;
                    break;
                }
                Ok(Err(_)) | Err(_) => break,
            }
        }
        let first_position = match found {
            Successor::Started { first_position, .. } => first_position,
            Successor::Replaying => {
                return self
                    .failed(self.outcome_unknown("which has not yet started its WAL segment"));
            }
            Successor::Collected => {
                return self.failed(self.outcome_unknown(
                    "and whose first WAL segment, which says where its replay ended, garbage collection has since removed",
                ));
            }
        };
        let error = match self.claim.check_fenced().await {
            Err(e) if e.fence_reason().is_some() => e,
            _ => Error::peer_claimed(
                format!(
                    "the WAL fence file of shard {} holds a newer claim than epoch {}",
                    self.claim.shard_id(),
                    self.claim.epoch
                ),
                None,
            ),
        };
        CommitFailed {
            error,
            stands_below: first_position.max(self.uncommitted),
        }
    }

    /// The error for our uncommitted records when a successor claimed the shard but its
    /// segments no longer say (or do not yet say) whether its replay holds them.
    fn outcome_unknown(&self, successor: &str) -> Error {
        Error::persistence_failure(
            format!(
                "shard {} was claimed by another writer, {successor}; whether its replay holds WAL entries from position {} on is unknown. Reopen to see what the shard holds (retried puts with a request id are answered once)",
                self.claim.shard_id(),
                self.uncommitted
            ),
            None,
        )
    }

    fn failed(&self, error: Error) -> CommitFailed {
        CommitFailed {
            error,
            stands_below: self.uncommitted,
        }
    }
}

/// The log was dropped with a blocking call that never returned: nothing more can be vouched.
fn lost() -> Error {
    Error::persistence_failure(
        "the WAL segment log was lost by an interrupted call; reopen the writer to replay the WAL",
        None,
    )
}

/// A segment I/O failure as the writer reports it: its outcome is unknown.
fn io_failure(what: &str, shard: uuid::Uuid, e: LogError) -> Error {
    match e {
        LogError::Io(e) => Error::persistence_failure(
            format!(
                "{what} of shard {shard} failed, and whether the WAL entries it covered are on disk is unknown; reopen the writer to replay the WAL: {e}"
            ),
            Some(Arc::new(e)),
        ),
        LogError::Damage(d) => Error::persistence_failure(
            format!("{what} of shard {shard} found the WAL damaged: {d:?}"),
            None,
        ),
        LogError::Claimed => {
            Error::peer_claimed(format!("{what} of shard {shard} found a newer claim"), None)
        }
    }
}

#[async_trait::async_trait]
impl WalWriter for SegmentWalWriter {
    fn next_position(&self) -> WalPosition {
        let next = self
            .log
            .as_ref()
            .map_or(self.uncommitted, |l| l.next_position());
        WalPosition::new(next).expect("positions start at 1")
    }

    async fn append_with(
        &mut self,
        batches: &[RecordBatch],
        requests: &[PutRecord],
    ) -> Result<AppendedEntry> {
        let shard = self.claim.shard_id();
        self.claim
            .store
            .faults()
            .pause_point("wal-append-before-put")
            .await;
        let position = self.log()?.next_position();
        let place = entry::EntryPlace { shard, position };
        let bytes = entry::encode_entry_with(self.claim.epoch, batches, requests, Some(place))?;
        let appended = if self.log()?.fits(bytes.len()) {
            let log = self.log.as_mut().ok_or_else(lost)?;
            log.append(&bytes)
        } else {
            let payload = bytes.clone();
            let rotated = self.blocking(move |log| log.append(&payload)).await?;
            self.prepare_spare();
            rotated
        };
        let position = appended.map_err(|e| io_failure("a WAL append", shard, e))?;
        Ok(AppendedEntry {
            position: WalPosition::new(position).expect("positions start at 1"),
            num_batches: batches.len(),
            num_rows: batches.iter().map(|b| b.num_rows()).sum(),
            bytes: bytes.len(),
        })
    }

    async fn close(&mut self) {
        if let Some(allocation) = self.allocation.take() {
            let _ = allocation.await;
        }
    }

    async fn commit(&mut self) -> std::result::Result<(), CommitFailed> {
        let next = match self.log() {
            Ok(log) => log.next_position(),
            Err(e) => return Err(self.failed(e)),
        };
        if next == self.uncommitted {
            return Ok(());
        }
        let shard = self.claim.shard_id();
        match self.blocking(|log| log.sync()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(self.failed(io_failure("a WAL sync", shard, e))),
            Err(e) => return Err(self.failed(e)),
        }
        self.claim
            .store
            .faults()
            .pause_point("wal-segments-before-recheck")
            .await;
        let checked = match self.log() {
            Ok(log) => log.check_fence(),
            Err(e) => return Err(self.failed(e)),
        };
        match checked {
            Ok(()) => {
                self.uncommitted = next;
                Ok(())
            }
            Err(LogError::Claimed) => Err(self.claimed().await),
            Err(e) => Err(self.failed(io_failure("reading the WAL fence file", shard, e))),
        }
    }
}
