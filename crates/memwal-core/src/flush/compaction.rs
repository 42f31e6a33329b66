//! Compaction: merges small generations into larger ones, committed atomically in the manifest.
//!
//! Frequent rotations (a small `max_memtable_size`, `max_memtable_age_ms` on a quiet shard)
//! leave many small generation files, and every reader opens each one. After a generation
//! commit that leaves more than `compaction_max_generations`, the generation flusher merges the
//! oldest run of *small* generations (each under half of `compaction_target_bytes`, together at
//! most that, and not one outweighing the rest while more can still join: see
//! [`CompactionPolicy::pick`]) into one file:
//! 1. read them (checksums checked), in list order, and write their rows, in that order, as a
//!    new generation file (`<random8hex>_gen_<current_generation>`, see below);
//! 2. commit a manifest version in which that one entry replaces the run, at the run's place
//!    (generation number: the run's last), every other field unchanged;
//! 3. report the new list to the writer, whose scans use it from then on.
//!
//! A reader sees the old list or the new one, never both, so no row is read twice or missed.
//! The replaced files stay until garbage collection removes them (as generation folders the
//! manifest no longer lists, once their newest file is older than the grace period), so a
//! reader holding an older manifest can still read them meanwhile: before its commit,
//! compaction adds [`REPLACED_MARKER`] to each folder it replaces, which starts that period.
//!
//! Why the new folder is numbered `current_generation`: collection removes an unlisted folder
//! only if its number is below the manifest's `current_generation` (see [`crate::gc`]).
//! Compaction runs inside the generation flusher, the only task that commits generations, so
//! `current_generation` cannot pass the folder's number before the compaction commits (or is
//! abandoned), and collection never removes the file a commit is about to list.
//!
//! Generations whose puts carried request ids still inside their retention window are not
//! merged: their `request_ids.json` is what a reopened writer reads to answer retries. They
//! become eligible once the window has passed.

use std::ops::Range;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::claim::Claim;
use crate::error::{Error, Result};
use crate::flush::Report;
use std::sync::Arc;

use crate::events::WriterEvent;
use crate::flush::Feedback;
use crate::flush::parquet::{create_generation_file, encode_parquet};
use crate::manifest::{FlushedGeneration, ShardManifest};
use crate::reader::read_generation;
use crate::store::call::Actor;
use crate::store::faults::as_actor;

/// The file compaction adds to each generation folder it replaces, so that garbage collection
/// counts the folder's grace period from its replacement.
pub const REPLACED_MARKER: &str = "replaced.json";

/// When and how much the generation flusher compacts (`WriterConfig::compaction*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompactionPolicy {
    /// Compaction runs once a commit leaves more generations than this.
    pub max_generations: usize,
    /// Merge generations under half of this, up to this many bytes in all.
    pub target_bytes: u64,
    /// `WriterConfig::request_id_retention_ms`.
    pub request_id_retention_ms: u64,
}

impl CompactionPolicy {
    /// Whether `g` may be merged at `now_ms`: small enough, and no request id of it is still
    /// answered from its `request_ids.json`.
    fn eligible(&self, g: &FlushedGeneration, now_ms: u64) -> bool {
        let small = g
            .in_memory_bytes
            .is_some_and(|b| b.saturating_mul(2) < self.target_bytes);
        let ids_expired = g
            .request_ids_newest_ms
            .is_none_or(|ms| ms.saturating_add(self.request_id_retention_ms) <= now_ms);
        small && ids_expired
    }

    /// The run of `gens` to merge, oldest first: the first run of at least two eligible
    /// generations whose bytes add up to at most the target and which is worth merging now
    /// (see [`CompactionPolicy::worth_merging`]); `None` while there are at most
    /// `max_generations`, or no such run.
    pub fn pick(&self, gens: &[FlushedGeneration], now_ms: u64) -> Option<Range<usize>> {
        if gens.len() <= self.max_generations {
            return None;
        }
        for start in 0..gens.len() {
            let mut end = start;
            let mut bytes = 0u64;
            while end < gens.len() && self.eligible(&gens[end], now_ms) {
                let next = bytes + gens[end].in_memory_bytes.unwrap_or(0);
                if next > self.target_bytes {
                    break;
                }
                bytes = next;
                end += 1;
            }
            if self.worth_merging(&gens[start..end], end == gens.len()) {
                return Some(start..end);
            }
        }
        None
    }

    /// Whether merging `run` now is worth its writes: at least two generations, and either
    /// none is larger than all the others together, or the run cannot grow (`at_newest` is
    /// false: an ineligible generation or the target ends it).
    ///
    /// Without this, a shard with about `max_generations` generations past half the target
    /// (which compaction leaves alone) went over the bound at every flush, and each compaction
    /// rewrote the newest merged file to absorb one small generation. A lopsided run at the
    /// newest end now waits while the small generations after its largest merge among
    /// themselves, as in a binary counter, until together they outweigh it: each row is
    /// rewritten about log2(target / flush size) times. In the 2-minute soak (bound 8, target
    /// 16 MiB, 1 MiB MemTables), compactions rewrote 5.0 rows per acknowledged row instead of
    /// 14.1, and the replaced files kept for `gcGraceMs` took 1.0 MiB on average instead of
    /// 2.6, with at most 10 generations listed instead of 9.
    fn worth_merging(&self, run: &[FlushedGeneration], at_newest: bool) -> bool {
        if run.len() < 2 {
            return false;
        }
        let sizes = run.iter().map(|g| g.in_memory_bytes.unwrap_or(0));
        let largest = sizes.clone().max().unwrap_or(0);
        let others = sizes.sum::<u64>() - largest;
        largest <= others || !at_newest
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Compacts for one writer epoch; owned by the generation flusher, which calls it after each
/// commit (so the two never commit at once).
pub(crate) struct Compactor {
    pub claim: Arc<Claim>,
    pub feedback: Arc<Feedback>,
    pub policy: CompactionPolicy,
}

impl Compactor {
    /// Compacts once if `latest` (the manifest our last commit wrote) calls for it. See the
    /// module docs.
    ///
    /// # Errors
    /// Whatever reading, writing or committing failed; `PeerClaimedEpoch` if a successor
    /// claimed the shard. Nothing is committed then.
    pub(crate) async fn compact_if_due(&self, latest: &ShardManifest) -> Result<()> {
        as_actor(Actor::Compaction, self.compact_if_due_as_compaction(latest)).await
    }

    /// [`Compactor::compact_if_due`], its store calls counted as compaction's: the three steps
    /// of the module docs.
    async fn compact_if_due_as_compaction(&self, latest: &ShardManifest) -> Result<()> {
        let Some(run) = self.policy.pick(&latest.flushed_generations, now_ms()) else {
            return Ok(());
        };
        let run: Vec<FlushedGeneration> = latest.flushed_generations[run].to_vec();
        let merged = self.write_merged(&run, latest.current_generation).await?;
        self.mark_replaced(&run, &merged.path).await?;
        self.claim
            .store
            .faults()
            .pause_point("compaction-before-commit")
            .await;
        let committed = self.commit_merged(&run, &merged).await?;
        self.announce(&run, &merged, committed);
        self.claim
            .store
            .faults()
            .pause_point("compaction-reported")
            .await;
        Ok(())
    }

    /// Reads the generations of `run` (checksums checked) and writes their rows, in list order,
    /// as one file in a new folder numbered `current_generation` (module docs); the manifest
    /// entry that replaces the run, at the run's last generation number.
    async fn write_merged(
        &self,
        run: &[FlushedGeneration],
        current_generation: u64,
    ) -> Result<FlushedGeneration> {
        let mut batches = Vec::new();
        for g in run {
            batches.extend(
                read_generation(
                    &self.claim.store,
                    &self.claim.paths,
                    g,
                    Some(&self.claim.schema),
                )
                .await?,
            );
        }
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        // Measured on the batches as read back, not summed from the inputs: a generation of
        // many one-row puts records a per-batch overhead many times its data, and a merged
        // generation carrying that sum would count as large and never be merged again.
        let in_memory_bytes: u64 = batches
            .iter()
            .map(|b| b.get_array_memory_size() as u64)
            .sum();
        let schema = self.claim.schema.clone();
        let parquet = tokio::task::spawn_blocking(move || encode_parquet(&schema, &batches))
            .await
            .map_err(|e| Error::io("the Parquet encoding task failed", e))??;
        let parquet = Bytes::from(parquet);
        let dir = create_generation_file(
            &self.claim.store,
            &self.claim.paths,
            current_generation,
            &parquet,
        )
        .await?;
        let last = run.last().expect("a run has two generations");
        Ok(FlushedGeneration {
            generation: last.generation,
            path: dir,
            in_memory_bytes: Some(in_memory_bytes),
            physical_rows: Some(rows),
            primary_key_bytes: None,
            checksum: Some(crc32c::crc32c(&parquet)),
            request_ids_newest_ms: None,
            request_ids_checksum: None,
        })
    }

    /// Adds [`REPLACED_MARKER`] (naming `dir`, the merged folder) to each folder of `run`.
    ///
    /// Collection times an unlisted folder by its newest file; a replaced generation's files
    /// are old, so without a newer one it would go at the first collection after the commit,
    /// while a reader holding the older manifest may still be reading it. Written before the
    /// commit, so a folder is never unlisted without it.
    async fn mark_replaced(&self, run: &[FlushedGeneration], dir: &str) -> Result<()> {
        let marker = Bytes::from(format!(
            "{{\"replacedAtMs\":{},\"by\":\"{dir}\"}}\n",
            now_ms()
        ));
        for g in run {
            let path = self
                .claim
                .paths
                .shard_dir()
                .clone()
                .join(g.path.as_str())
                .join(REPLACED_MARKER);
            match self.claim.store.put_if_absent(&path, marker.clone()).await {
                Ok(_) => {}
                Err(e) => return Err(Error::io(format!("writing {path}"), e)),
            }
        }
        Ok(())
    }

    /// Commits a manifest version in which `merged` replaces `run`, at its place; the version
    /// committed (or the latest, if an earlier attempt of ours committed it already).
    async fn commit_merged(
        &self,
        run: &[FlushedGeneration],
        merged: &FlushedGeneration,
    ) -> Result<ShardManifest> {
        let mut run_missing = false;
        let committed = self
            .claim
            .commit(|l| {
                if l.flushed_generations.iter().any(|g| g.path == merged.path) {
                    // An earlier attempt of ours committed and lost its acknowledgement.
                    return None;
                }
                let gens = &l.flushed_generations;
                let Some(at) = gens.windows(run.len()).position(|w| w == run) else {
                    run_missing = true;
                    return None;
                };
                let mut next = l.clone();
                next.flushed_generations
                    .splice(at..at + run.len(), [merged.clone()]);
                Some(next)
            })
            .await?;
        if run_missing {
            // Only this epoch commits, so this cannot happen; the new file is left to
            // collection rather than listed over a manifest we do not understand.
            return Err(Error::io_msg(format!(
                "compaction of shard {}: the generations it merged are no longer listed together",
                self.claim.paths.shard_id()
            )));
        }
        Ok(committed)
    }

    /// Logs the compaction of `run` into `merged`, and reports `committed`'s generation list to
    /// the writer, whose scans use it from then on.
    fn announce(
        &self,
        run: &[FlushedGeneration],
        merged: &FlushedGeneration,
        committed: ShardManifest,
    ) {
        let rows = merged.physical_rows.unwrap_or(0);
        tracing::info!(
            target: "memwal::compaction",
            shard = %self.claim.paths.shard_id(),
            merged = run.len(),
            generation = merged.generation,
            rows,
            "compacted generations"
        );
        self.feedback.events.send(|| WriterEvent::Compaction {
            merged: run.len() as u64,
            generation: merged.generation,
            rows,
            file: self.claim.paths.generation_file(&merged.path).to_string(),
        });
        self.feedback.report(Report::GenerationsCompacted {
            flushed: committed.flushed_generations,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation(n: u64, bytes: u64, ids_at: Option<u64>) -> FlushedGeneration {
        FlushedGeneration {
            generation: n,
            path: format!("x_gen_{n}"),
            in_memory_bytes: Some(bytes),
            request_ids_newest_ms: ids_at,
            ..Default::default()
        }
    }

    const POLICY: CompactionPolicy = CompactionPolicy {
        max_generations: 3,
        target_bytes: 100,
        request_id_retention_ms: 1_000,
    };

    #[test]
    fn nothing_is_merged_within_the_bound() {
        let gens: Vec<_> = (1..=3).map(|n| generation(n, 10, None)).collect();
        assert_eq!(POLICY.pick(&gens, 0), None);
    }

    #[test]
    fn the_oldest_run_of_small_generations_is_merged_up_to_the_target() {
        // 60 is large (not under half of 100); 10 + 30 + 40 = 80 fits, + 30 would not.
        let sizes = [60, 10, 30, 40, 30, 5];
        let gens: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, b)| generation(i as u64 + 1, *b, None))
            .collect();
        assert_eq!(POLICY.pick(&gens, 0), Some(1..4));
    }

    #[test]
    fn a_lone_small_generation_between_large_ones_is_left_alone() {
        let sizes = [60, 10, 60, 60, 20, 20];
        let gens: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, b)| generation(i as u64 + 1, *b, None))
            .collect();
        assert_eq!(POLICY.pick(&gens, 0), Some(4..6));
        let sizes = [60, 10, 60, 60];
        let gens: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, b)| generation(i as u64 + 1, *b, None))
            .collect();
        assert_eq!(POLICY.pick(&gens, 0), None);
    }

    fn sized(sizes: &[u64]) -> Vec<FlushedGeneration> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, b)| generation(i as u64 + 1, *b, None))
            .collect()
    }

    #[test]
    fn a_lopsided_run_at_the_newest_end_waits_until_the_others_outweigh_its_largest() {
        // Bound 8: seven generations past half the target (60 of 100), then the newest merged
        // one (40) and one small flush. Merging 40 + 5 would rewrite 40 to absorb 5, and the
        // next flush would call for it again.
        let policy = CompactionPolicy {
            max_generations: 8,
            ..POLICY
        };
        let full = [60; 7];
        let with_full = |newest: &[u64]| sized(&[&full[..], newest].concat());
        assert_eq!(policy.pick(&with_full(&[40, 5]), 0), None);
        // Small ones of similar size merge among themselves meanwhile.
        assert_eq!(policy.pick(&with_full(&[40, 5, 5]), 0), Some(8..10));
        assert_eq!(policy.pick(&with_full(&[40, 10, 5]), 0), None);
        assert_eq!(policy.pick(&with_full(&[40, 10, 5, 5]), 0), Some(8..11));
        // 40 against 25 + 15: the run is balanced, so 40 joins it.
        assert_eq!(policy.pick(&with_full(&[40, 25, 15]), 0), Some(7..10));
    }

    #[test]
    fn a_lopsided_run_that_cannot_grow_is_merged() {
        let policy = CompactionPolicy {
            max_generations: 8,
            ..POLICY
        };
        // Ended by a generation past half the target: nothing newer can join it.
        assert_eq!(
            policy.pick(&sized(&[60, 60, 60, 60, 60, 60, 40, 5, 60]), 0),
            Some(6..8)
        );
        // Ended by the target: 45 + 10 = 55, and the newest (48) would take it past 100.
        assert_eq!(
            policy.pick(&sized(&[60, 60, 60, 60, 60, 60, 45, 10, 48]), 0),
            Some(6..8)
        );
    }

    #[test]
    fn generations_with_request_ids_in_their_window_wait_for_it_to_pass() {
        let gens: Vec<_> = (1..=4).map(|n| generation(n, 10, Some(5_000))).collect();
        assert_eq!(POLICY.pick(&gens, 5_500), None);
        assert_eq!(POLICY.pick(&gens, 6_000), Some(0..4));
    }
}
