//! Opening a writer: claim the next epoch, write the fence sentinel, replay the WAL (with the
//! request ids its entries carry), read the request ids of the generations flushed within the
//! retention window, and start the two background tasks.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_schema::SchemaRef;
use futures::FutureExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use super::replay;
use super::request_index::{RequestIndex, Rows, WallClock};
use super::state::{Held, Lifecycle, MemTableState, Mode, WalOnlyState, WriterInner, WriterState};
use crate::claim::Claim;
use crate::config::{RetryPolicy, WriterConfig};
use crate::error::{Error, Result};
use crate::events::WriterEvent;
use crate::flush::Feedback;
use crate::flush::compaction::{CompactionPolicy, Compactor};
use crate::flush::completion::Watcher;
use crate::flush::generation::{GenerationFlusher, GenerationMsg};
use crate::flush::wal_handler::{WalFlushHandler, WalMsg};
use crate::manifest::{LayoutChoice, ManifestStore, ShardManifest, check_same_schema};
use crate::memtable::{MemTable, WalProgress};
use crate::reader::generation_schema;
use crate::request_id::{PutRecord, decode_records};
use crate::stats::{OpenStats, Operation, StatsRecorder, WalEntryCost};
use crate::store::ShardPaths;
use crate::store::Store;
use crate::store::call::Actor;
use crate::store::faults::as_actor;
use crate::wal::segments::log::{Read, SegmentFiles, SegmentLog};
use crate::wal::segments::{self, SegmentWalWriter};
use crate::wal::{self, StagedSentinel, WalAppender, WalLayout, WalPosition, WalWriter};

/// The writer's background tasks.
pub(crate) struct BackgroundTasks {
    pub wal_handler: JoinHandle<()>,
    pub generation_flusher: JoinHandle<()>,
    /// Timers, aborted at close: the age sealer (`max_memtable_age_ms`, MemTable mode) and the
    /// garbage collector (`gc`).
    pub periodic: Vec<JoinHandle<()>>,
}

/// Collects garbage every `interval` while the writer is open (see [`crate::gc`]). A failed
/// run waits for the next interval: collection is never needed for correctness, so it never
/// fails the writer. It holds the writer weakly between runs, like [`seal_by_age`].
async fn collect_periodically(writer: std::sync::Weak<WriterInner>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = writer.upgrade() else {
            return;
        };
        if inner.lock().lifecycle != Lifecycle::Open || inner.feedback.check().is_err() {
            return;
        }
        match inner.collect_garbage().await {
            Ok(report) => {
                tracing::info!(
                    target: "memwal::gc",
                    shard = %inner.claim.shard_id(),
                    low_water = report.low_water,
                    wal_entries_removed = report.wal_entries_removed,
                    wal_segments_removed = report.wal_segments_removed,
                    manifest_versions_removed = report.manifest_versions_removed,
                    generation_dirs_removed = report.generation_dirs_removed.len(),
                    bytes_removed = report.bytes_removed,
                    "collected garbage"
                );
                inner.feedback.events.send(|| WriterEvent::Gc(report))
            }
            // A successor's claim seen by collection latched the fence (its event fired): stop.
            Err(error) if error.fence_reason().is_some() => return,
            Err(error) => {
                tracing::warn!(target: "memwal::gc", shard = %inner.claim.shard_id(), error = %error, "garbage collection failed");
                inner.feedback.events.send(|| WriterEvent::Error { error })
            }
        }
    }
}

/// Freezes the active MemTable once it has held rows for `max_age`. It holds the writer only
/// weakly, and only while it looks, so it never keeps a dropped writer alive; it stops when
/// the writer is closing, closed or failed. A freeze here is the same as a size-triggered one.
async fn seal_by_age(writer: std::sync::Weak<WriterInner>, max_age: Duration) {
    loop {
        let wait = {
            let Some(inner) = writer.upgrade() else {
                return;
            };
            let mut st = inner.lock();
            if st.lifecycle != Lifecycle::Open || inner.feedback.check().is_err() {
                return;
            }
            let Mode::MemTable(mt) = &mut st.mode else {
                return;
            };
            match mt.active.memtable.first_insert().map(|t| t.elapsed()) {
                Some(age) if age >= max_age => {
                    inner.freeze(mt);
                    max_age
                }
                Some(age) => max_age - age,
                None => max_age,
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// Spawns `fut` as a named background task; a panic poisons the writer with an error that
/// names the task instead of vanishing.
fn spawn_task(
    name: &'static str,
    feedback: Arc<Feedback>,
    fut: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(panic) = std::panic::AssertUnwindSafe(fut).catch_unwind().await {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            feedback.poison(Error::persistence_failure(
                format!("background task {name} panicked: {what}; reopen the writer to replay"),
                None,
            ));
        }
    })
}

/// Makes the WAL entries after `cursor` and below `tip` durable: what replay reads, and what
/// the fence sentinel will stand above.
///
/// A predecessor syncs each entry before it writes the next, so only its last can be linked
/// and not durable (it died between the link and the sync, or the sync failed), but an entry
/// written by another implementation may never have been synced at all. On a file system
/// without a journal, such an entry is freed at the next mount: a retry answered from it would
/// be a lost acknowledgement, and a sentinel above it would stand over a hole that no writer can
/// open past. So every replayed entry is made durable before the sentinel is written and
/// before replay answers anything (`docs/fencing.md`, "What replay trusts"). Entries a live
/// predecessor writes after `tip` was found are made durable by the sentinel's create, which
/// syncs each name it finds taken before it tries the next ([`Store::make_durable`]).
async fn make_replayed_entries_durable(
    store: &Store,
    paths: &ShardPaths,
    cursor: u64,
    tip: u64,
) -> Result<()> {
    let entries: Vec<_> = (cursor + 1..tip).map(|p| paths.wal_entry(p)).collect();
    store.make_durable(&entries).await.map_err(|e| {
        Error::io(
            format!(
                "making the WAL entries {}..{} of shard {} durable before replaying them; retry the open",
                cursor + 1,
                tip,
                paths.shard_id()
            ),
            e,
        )
    })
}

/// The schema of a shard whose latest manifest `m` records none (one written by another
/// implementation: Lance, rewriting the manifest when it takes a shard over, keeps none of
/// memwal's fields): that of the first WAL entry after the replay cursor that holds rows, else
/// that of the newest flushed generation's file; `None` if the shard has neither.
///
/// The claim records the schema it is given when the manifest has none, so that schema must be
/// checked before: a wrong one recorded there would refuse every later open with the right
/// one, while the shard's rows do not fit it (replay fails on the first entry, a scan on the
/// first generation).
async fn schema_of_unrecorded(
    store: &Store,
    paths: &ShardPaths,
    m: &ShardManifest,
) -> Result<Option<SchemaRef>> {
    let mut position = m.replay_after_wal_entry_position + 1;
    while let Some(entry) = wal::read_entry(store, paths, position).await? {
        if !entry.is_sentinel {
            return Ok(Some(entry.schema));
        }
        position += 1;
    }
    match m.flushed_generations.last() {
        Some(g) => generation_schema(store, paths, g).await.map(Some),
        None => Ok(None),
    }
}

/// See `ShardWriter::open`. In four steps: [`claim`] the shard, [`fence`] the predecessor,
/// [`recover`] what it left in the WAL, and [`start`] the background tasks.
pub(crate) async fn open(
    store: Store,
    schema: SchemaRef,
    config: WriterConfig,
) -> Result<(Arc<WriterInner>, BackgroundTasks)> {
    check_arguments(&schema, &config)?;
    let started = Instant::now();
    // Everything this writer asks of the store, from its claim on, counts in its statistics.
    let stats = Arc::new(StatsRecorder::default());
    let store = store.counted(stats.clone());
    store.check_conditional_create().await?;
    let mut claimed = claim(store, schema, &config).await?;
    let (feedback, reports) = Feedback::new(claimed.claim.shard_id(), stats.clone());
    let retry = retry_policy(&config, &feedback);
    let (wal, fence_sentinel_position, recovered, open_stats) = match std::mem::replace(
        &mut claimed.wal,
        ClaimedWal::Objects {
            tip: 0,
            staged: None,
        },
    ) {
        ClaimedWal::Objects { tip, staged } => {
            let mut appender = WalAppender::new(claimed.claim.clone(), tip, retry.clone());
            appender.set_prepare_next(config.durable_write);
            let fence_sentinel_position =
                fence(&claimed, tip, staged, &mut appender, &stats).await?;
            let (recovered, open_stats) =
                recover_timed(&claimed, &config, started, Source::Objects).await?;
            if let Some(next) = recovered.next_position {
                appender.set_next_position(next.max(appender.next_position()));
            }
            let wal: Box<dyn WalWriter> = Box::new(appender);
            (wal, fence_sentinel_position, recovered, open_stats)
        }
        ClaimedWal::Segments { log, read } => {
            let (recovered, open_stats) =
                recover_timed(&claimed, &config, started, Source::Segments(&read)).await?;
            let wal: Box<dyn WalWriter> =
                Box::new(SegmentWalWriter::new(claimed.claim.clone(), *log));
            (wal, None, recovered, open_stats)
        }
    };
    let inner = Arc::new(WriterInner {
        claim: claimed.claim.clone(),
        shard_name: claimed.manifest.shard_name.clone(),
        state: Mutex::new(WriterState::new(
            recovered.mode,
            wal.next_position(),
            recovered.requests,
            reports,
        )),
        feedback: feedback.clone(),
        wal_tx: recovered.wal_tx,
        gen_tx: recovered.gen_tx,
        fence_sentinel_position,
        open_stats,
        config: config.clone(),
    });
    let tasks = start(&inner, wal, retry, recovered.frozen, recovered.rx);
    Ok((inner, tasks))
}

/// Refuses a schema or configuration no writer can work with, before anything is read.
fn check_arguments(schema: &SchemaRef, config: &WriterConfig) -> Result<()> {
    config.validate()?;
    if schema.fields().is_empty() {
        return Err(Error::invalid(
            "schema has no fields; a shard needs at least one column",
        ));
    }
    // Before anything is written: a schema the generation file cannot hold would otherwise
    // take puts and then fence this writer, and every later one, at the first flush.
    if config.enable_memtable {
        crate::flush::generation::schema::check(schema)?;
    }
    Ok(())
}

/// A shard this writer claimed: the claim, the manifest version that made it, and its WAL.
struct Claimed {
    claim: Arc<Claim>,
    manifest: ShardManifest,
    wal: ClaimedWal,
}

/// The WAL of a claimed shard, by layout.
// One per open, moved a few times: boxing the larger variant would save nothing.
#[allow(clippy::large_enum_variant)]
enum ClaimedWal {
    /// The WAL's tip as found for the claim, and the fence sentinel staged meanwhile.
    Objects {
        tip: u64,
        staged: Option<StagedSentinel>,
    },
    /// The claimed segment log, and what the claim read of it after the replay cursor.
    Segments { log: Box<SegmentLog>, read: Read },
}

/// Claims the next epoch of the shard `config` names, and finds the WAL's tip for it.
///
/// While the epoch claim writes (a durable create), the WAL tip is searched and the fence
/// sentinel of the epoch it should win is staged (written and synced, unnamed), so that only a
/// link and a directory sync are left once the claim ends. A tip found before the claim is
/// still a safe start for the sentinel, which takes the first free slot at or after it (the
/// predecessor appends in order, so it cannot pass a slot it has not reached). Nothing is
/// visible until the sentinel is written, and a claim that ends at another epoch restages (or
/// fails, if a peer claimed). Every entry the new writer will replay is made durable before it
/// returns ([`make_replayed_entries_durable`]).
async fn claim(store: Store, schema: SchemaRef, config: &WriterConfig) -> Result<Claimed> {
    let shard = config.shard.clone().unwrap_or_default();
    let paths = store.shard_paths(shard.id());
    let manifests = ManifestStore::new(store.clone(), paths.clone());
    let writer_id = Uuid::new_v4().to_string();
    let latest = manifests.read_latest_of_existing().await?;
    if let Some(m) = &latest
        && m.arrow_schema.is_none()
        && let Some(stored) = schema_of_unrecorded(&store, &paths, m).await?
    {
        check_same_schema(shard.id(), &stored, &schema)?;
    }
    let choice = LayoutChoice {
        asked: config.wal_layout,
        for_new_shard: match config.wal_layout {
            Some(asked) => asked,
            None => new_shard_layout(&store, &paths)?,
        },
    };
    let layout = latest
        .as_ref()
        .map(WalLayout::of)
        .unwrap_or(choice.for_new_shard);
    if layout == WalLayout::Segments {
        let files = segments::files_of(&store, &paths, config.wal_segment_bytes)?;
        segments::check_local_disk(&files)?;
        let manifest = manifests
            .claim_epoch_after(latest, &schema, &writer_id, shard.name(), choice)
            .await?;
        let claim = claim_of(store, paths, manifests, &manifest, writer_id, schema);
        return claim_segments(claim, manifest, files).await;
    }
    let start = ClaimStart::read(&store, &paths, latest.as_ref()).await?;
    // A hole after the cursor would look like the tip to the search and to replay: every entry
    // after it would be dropped, and this writer would write into it (see `wal`).
    let (manifest, tip, staged, gap) = tokio::try_join!(
        manifests.claim_epoch_after(latest, &schema, &writer_id, shard.name(), choice),
        wal::discover_tip(&store, &paths, start.hint, start.low_water),
        async {
            // Epoch 1 is the first claim ever: no predecessor to fence. A staging error is not
            // final here: the sentinel write stages again and retries.
            Ok(if start.expected_epoch >= 2 {
                StagedSentinel::stage(&store, &paths, start.expected_epoch)
                    .await
                    .ok()
            } else {
                None
            })
        },
        wal::find_gap(&store, &paths, start.cursor),
    )?;
    if let Some(gap) = gap {
        // Before the sentinel, which would take the hole for the tip and fill it.
        return Err(gap.error(&paths));
    }
    let tip = start.tip_above_mark(&store, &paths, &manifest, tip).await?;
    make_replayed_entries_durable(
        &store,
        &paths,
        manifest.replay_after_wal_entry_position,
        tip,
    )
    .await?;
    if WalLayout::of(&manifest) != WalLayout::Objects {
        return Err(changed_layout(&paths));
    }
    let claim = claim_of(store, paths, manifests, &manifest, writer_id, schema);
    Ok(Claimed {
        claim,
        manifest,
        wal: ClaimedWal::Objects { tip, staged },
    })
}

/// The claim the manifest version `manifest` made, logged.
fn claim_of(
    store: Store,
    paths: ShardPaths,
    manifests: ManifestStore,
    manifest: &ShardManifest,
    writer_id: String,
    schema: SchemaRef,
) -> Arc<Claim> {
    tracing::info!(
        target: "memwal::writer",
        shard = %paths.shard_id(),
        shard_name = manifest.shard_name.as_deref(),
        epoch = manifest.writer_epoch,
        writer_id = %writer_id,
        layout = WalLayout::of(manifest).name(),
        "claimed shard"
    );
    Arc::new(Claim {
        store,
        paths,
        manifests,
        epoch: manifest.writer_epoch,
        writer_id,
        schema,
    })
}

/// The layout a new shard gets when its writer asks for none: the store's choice, except that
/// segments fall back to objects on a network file system (where they are refused when asked
/// for: see [`segments::check_local_disk`]).
fn new_shard_layout(store: &Store, paths: &ShardPaths) -> Result<WalLayout> {
    let layout = store.new_shard_wal_layout();
    if layout == WalLayout::Segments {
        let files = segments::files_of(store, paths, 0)?;
        if segments::check_local_disk(&files).is_err() {
            return Ok(WalLayout::Objects);
        }
    }
    Ok(layout)
}

/// The shard was created with the other layout while this open read it: a race between two
/// first opens that asked for different layouts.
fn changed_layout(paths: &ShardPaths) -> Error {
    Error::invalid(format!(
        "shard {} was created with another WAL layout while this writer opened it; retry the open",
        paths.shard_id()
    ))
}

/// The segment-log half of [`claim`], once the manifest claim `manifest` holds: the log's
/// fence file takes our epoch, then the log is read to its end from after the replay cursor
/// (see [`SegmentLog::claim`]). No tip search and no sentinel: the fence file and our first
/// segment do their work.
async fn claim_segments(
    claim: Arc<Claim>,
    manifest: ShardManifest,
    files: SegmentFiles,
) -> Result<Claimed> {
    if WalLayout::of(&manifest) != WalLayout::Segments {
        return Err(changed_layout(&claim.paths));
    }
    let writer_id = Uuid::parse_str(&claim.writer_id).expect("writer ids are UUIDs");
    let (epoch, cursor, shard) = (
        claim.epoch,
        manifest.replay_after_wal_entry_position,
        claim.shard_id(),
    );
    let claimed =
        tokio::task::spawn_blocking(move || SegmentLog::claim(files, epoch, writer_id, cursor))
            .await
            .map_err(|e| {
                Error::io_msg(format!("claiming the WAL segments of shard {shard}: {e}"))
            })?;
    let (log, read) = claimed.map_err(|e| segments::log_error(shard, e))?;
    Ok(Claimed {
        claim,
        manifest,
        wal: ClaimedWal::Segments {
            log: Box::new(log),
            read,
        },
    })
}

/// What a claim starts from, read from the latest manifest before it: where the tip search
/// starts, the epoch it expects to win, the replay cursor, and the low-water mark.
struct ClaimStart {
    /// The highest WAL position the manifest knows of.
    hint: u64,
    expected_epoch: u64,
    cursor: u64,
    /// The low-water mark as [`wal::low_water`] derives it for the manifest.
    low_water: u64,
    /// The manifest's (mark, cursor), to tell whether the claimed version was built from it.
    read_as: Option<(u64, u64)>,
}

impl ClaimStart {
    /// Reads what a claim from `latest` (`None`: a shard never claimed) starts from.
    async fn read(
        store: &Store,
        paths: &ShardPaths,
        latest: Option<&ShardManifest>,
    ) -> Result<Self> {
        let low_water = match latest {
            Some(m) => wal::low_water(store, paths, m).await?,
            None => 0,
        };
        Ok(ClaimStart {
            hint: latest.map_or(0, |m| {
                m.wal_entry_position_last_seen
                    .max(m.replay_after_wal_entry_position)
            }),
            expected_epoch: latest.map_or(1, |m| m.writer_epoch + 1),
            cursor: latest.map_or(0, |m| m.replay_after_wal_entry_position),
            low_water,
            read_as: latest.map(|m| (m.wal_low_water, m.replay_after_wal_entry_position)),
        })
    }

    /// The WAL tip for the claimed version `manifest`: `tip`, as found from this start, unless
    /// it is at or below the claimed version's low-water mark, then searched again above it.
    ///
    /// Garbage collection may have removed entries up to the claimed version's mark while the
    /// tip was searched from an older manifest; a tip found there is no tip. The claimed
    /// version carries the mark and cursor it was built from, so unless the claim raced to a
    /// newer one, the mark found before it holds (and costs no second listing).
    async fn tip_above_mark(
        &self,
        store: &Store,
        paths: &ShardPaths,
        manifest: &ShardManifest,
        tip: u64,
    ) -> Result<u64> {
        let claimed = (
            manifest.wal_low_water,
            manifest.replay_after_wal_entry_position,
        );
        let claimed_low_water = if self.read_as == Some(claimed) {
            self.low_water
        } else {
            wal::low_water(store, paths, manifest).await?
        };
        if tip <= claimed_low_water {
            wal::discover_tip(store, paths, 0, claimed_low_water).await
        } else {
            Ok(tip)
        }
    }
}

/// The writer's retry policy, reporting each retry as an event.
fn retry_policy(config: &WriterConfig, feedback: &Arc<Feedback>) -> RetryPolicy {
    let feedback = feedback.clone();
    config
        .retry_policy()
        .observed_by(Arc::new(move |operation, attempt, error, delay| {
            feedback.events.send(|| WriterEvent::Retry {
                operation,
                attempt,
                // A store's error may quote the request's URL, endpoint credentials included;
                // events go to listeners and metrics that are not for secrets.
                error: crate::redact_secrets(error).into_owned(),
                delay,
            })
        }))
}

/// Writes the fence sentinel of `claimed`'s epoch (none for epoch 1: nobody to fence), from
/// `staged` if it was staged for that epoch, and checks that the claim is still the latest once it is durable; the sentinel's position.
async fn fence(
    claimed: &Claimed,
    tip: u64,
    staged: Option<StagedSentinel>,
    appender: &mut WalAppender,
    stats: &Arc<StatsRecorder>,
) -> Result<Option<u64>> {
    let claim = &claimed.claim;
    claim
        .store
        .faults()
        .pause_point("open-before-sentinel")
        .await;
    if claim.epoch < 2 {
        return Ok(None);
    }
    let sentinel = appender.write_fence_sentinel(tip, staged);
    let (at, _, _) = stats.scoped(Operation::FenceSentinel, sentinel).await;
    let at = at?;
    // Fencing with collection (see `crate::gc`): only a claim after ours can raise the
    // low-water mark past our claim's, and then collect the slot the sentinel just took, where
    // it fences nobody and replay does not look. With our claim still the latest once the
    // sentinel is durable, no entry above our mark was ever collected, so the sentinel is above
    // every entry a predecessor wrote. The latest is listed, never probed: a version after ours
    // may itself have been collected since.
    claim.check_fenced().await?;
    Ok(Some(at))
}

/// Where replay reads the WAL from.
enum Source<'a> {
    /// The entry objects after the replay cursor.
    Objects,
    /// What the segment claim read.
    Segments(&'a Read),
}

/// [`recover`], and the open's statistics: the claim took until now, replay the rest.
async fn recover_timed(
    claimed: &Claimed,
    config: &WriterConfig,
    started: Instant,
    source: Source<'_>,
) -> Result<(Recovered, OpenStats)> {
    let claimed_at = Instant::now();
    let mut open_stats = OpenStats {
        claim: claimed_at - started,
        ..OpenStats::default()
    };
    claimed
        .claim
        .store
        .faults()
        .pause_point("open-before-replay")
        .await;
    let recovered = recover(claimed, config, source).await?;
    if let Some((entries, rows)) = recovered.replayed {
        open_stats.replay = claimed_at.elapsed();
        open_stats.replayed_entries = entries;
        open_stats.replayed_rows = rows;
    }
    Ok((recovered, open_stats))
}

/// What a new writer takes over from the WAL and the generations: its MemTables, the request
/// ids it answers, the MemTables replay filled (to be flushed), and the channels of its tasks.
struct Recovered {
    mode: Mode,
    requests: RequestIndex,
    frozen: Vec<Held>,
    /// Entries and rows replayed (MemTable mode).
    replayed: Option<(u64, u64)>,
    /// The first WAL position replay found empty (MemTable mode).
    next_position: Option<WalPosition>,
    wal_tx: mpsc::UnboundedSender<WalMsg>,
    gen_tx: mpsc::UnboundedSender<GenerationMsg>,
    rx: TaskReceivers,
}

/// The receiving ends of the two background tasks' channels.
struct TaskReceivers {
    wal: mpsc::UnboundedReceiver<WalMsg>,
    generations: mpsc::UnboundedReceiver<GenerationMsg>,
}

/// Replays the WAL after the claimed manifest's cursor into MemTables (MemTable mode), with
/// the request ids its entries carry and those of the generations flushed within the retention
/// window.
async fn recover(
    claimed: &Claimed,
    config: &WriterConfig,
    source: Source<'_>,
) -> Result<Recovered> {
    let (claim, manifest) = (&claimed.claim, &claimed.manifest);
    let (wal_tx, wal) = mpsc::unbounded_channel();
    let (gen_tx, generations) = mpsc::unbounded_channel();
    let rx = TaskReceivers { wal, generations };
    let mut requests = RequestIndex::new(WallClock::new(), config.request_id_retention_ms);
    if !config.enable_memtable {
        return Ok(Recovered {
            mode: Mode::WalOnly(WalOnlyState::default()),
            requests,
            frozen: Vec::new(),
            replayed: None,
            next_position: None,
            wal_tx,
            gen_tx,
            rx,
        });
    }
    let replayed = replay_from(claimed, config, source);
    let (r, flushed) = tokio::try_join!(
        replayed,
        flushed_requests(&claim.store, &claim.paths, manifest, &requests),
    )?;
    // Oldest first, so a later put of an id (written again after its window) wins.
    for record in flushed {
        requests.insert(&record, Rows::Flushed);
    }
    for (record, memtable, end) in r.requests {
        requests.insert(&record, Rows::Held { memtable, end });
    }
    requests.sort_expiry();
    let mode = Mode::MemTable(MemTableState {
        active: r.active,
        frozen: VecDeque::new(),
        frozen_bytes: 0,
        flushed: manifest.flushed_generations.clone(),
        wal_size_triggers: 0,
    });
    Ok(Recovered {
        mode,
        requests,
        frozen: r.frozen,
        replayed: Some((r.entries, r.rows)),
        next_position: Some(r.next_position),
        wal_tx,
        gen_tx,
        rx,
    })
}

/// Replays the WAL of `claimed` after its cursor from `source` (see [`recover`]).
async fn replay_from(
    claimed: &Claimed,
    config: &WriterConfig,
    source: Source<'_>,
) -> Result<replay::Replayed> {
    let (claim, manifest) = (&claimed.claim, &claimed.manifest);
    let first_generation = manifest.current_generation.max(1);
    match source {
        Source::Objects => {
            replay::replay(
                &claim.store,
                &claim.paths,
                &claim.schema,
                config,
                claim.epoch,
                manifest.replay_after_wal_entry_position,
                first_generation,
            )
            .await
        }
        Source::Segments(read) => {
            replay::replay_segments(
                &claim.store,
                &claim.paths,
                &claim.schema,
                config,
                claim.epoch,
                read,
                first_generation,
            )
            .await
        }
    }
}

/// Queues the MemTables replay filled for their generation flushes, and starts the writer's
/// background tasks: the WAL flush handler, the generation flusher, and the timers.
fn start(
    inner: &Arc<WriterInner>,
    wal: Box<dyn WalWriter>,
    retry: RetryPolicy,
    frozen: Vec<Held>,
    rx: TaskReceivers,
) -> BackgroundTasks {
    let active = {
        let mut st = inner.lock();
        match &mut st.mode {
            Mode::MemTable(mt) => {
                for held in frozen {
                    // Replayed batches are in the WAL already: their generation flush need
                    // not wait, and covers exactly the entries they came from.
                    let done = held
                        .wal
                        .last_position
                        .map(|p| WalEntryCost::at(p.get()))
                        .ok_or_else(|| Error::invalid("a replayed MemTable has no WAL position"));
                    inner.enqueue_frozen(mt, held, Watcher::ready(done));
                }
                Some((mt.active.memtable.clone(), mt.active.wal))
            }
            // A WAL-only writer replays nothing.
            Mode::WalOnly(_) => None,
        }
    };
    spawn_tasks(inner, wal, retry, active, rx)
}

/// Spawns the background tasks of `inner` (see [`start`]).
fn spawn_tasks(
    inner: &Arc<WriterInner>,
    wal: Box<dyn WalWriter>,
    retry: RetryPolicy,
    active: Option<(Arc<MemTable>, WalProgress)>,
    rx: TaskReceivers,
) -> BackgroundTasks {
    let (config, feedback) = (&inner.config, &inner.feedback);
    let handler = WalFlushHandler::new(
        wal,
        feedback.clone(),
        config.max_wal_flush_interval_ms.map(Duration::from_millis),
        active,
        rx.wal,
    );
    let compactor = config.compaction.then(|| Compactor {
        claim: inner.claim.clone(),
        feedback: feedback.clone(),
        policy: CompactionPolicy {
            max_generations: config.compaction_max_generations as usize,
            target_bytes: config.compaction_target_bytes,
            request_id_retention_ms: config.request_id_retention_ms,
        },
    });
    let flusher = GenerationFlusher {
        claim: inner.claim.clone(),
        retry,
        feedback: feedback.clone(),
        request_id_retention_ms: config.request_id_retention_ms,
        compactor,
    };
    let mut periodic = Vec::new();
    if let (true, Some(ms)) = (config.enable_memtable, config.max_memtable_age_ms) {
        periodic.push(spawn_task(
            "memtable-age-sealer",
            feedback.clone(),
            seal_by_age(Arc::downgrade(inner), Duration::from_millis(ms)),
        ));
    }
    // Only generation flushes raise the low-water mark, so a WAL-only writer has nothing to
    // collect but manifest versions, which it writes one per close.
    if config.enable_memtable && config.gc {
        let interval = Duration::from_millis(config.gc_interval_ms);
        periodic.push(spawn_task(
            "garbage-collector",
            feedback.clone(),
            as_actor(
                Actor::Gc,
                collect_periodically(Arc::downgrade(inner), interval),
            ),
        ));
    }
    BackgroundTasks {
        wal_handler: spawn_task(
            "wal-flush-handler",
            feedback.clone(),
            as_actor(Actor::Put, handler.run()),
        ),
        generation_flusher: spawn_task(
            "generation-flusher",
            feedback.clone(),
            as_actor(Actor::Commit, flusher.run(rx.generations)),
        ),
        periodic,
    }
}

/// The request ids of the generations in `manifest` whose window (b) is still open, read
/// from their `request_ids.json` (one GET per such generation, concurrently), oldest first.
///
/// # Errors
/// `Corrupt` naming the file if it is missing or damaged (the manifest says it was written);
/// `Io` if the store fails.
async fn flushed_requests(
    store: &Store,
    paths: &ShardPaths,
    manifest: &ShardManifest,
    index: &RequestIndex,
) -> Result<Vec<PutRecord>> {
    let reads = manifest
        .flushed_generations
        .iter()
        .filter(|g| g.request_ids_newest_ms.is_some_and(|ms| index.retained(ms)))
        .map(|g| async move {
            let path = paths.generation_request_ids(&g.path);
            let bytes = store
                .get(&path)
                .await
                .map_err(|e| Error::io(format!("reading {path}"), e))?
                .ok_or_else(|| {
                    Error::corrupt(
                        path.as_ref(),
                        format!(
                            "generation {} lists request ids but the file is missing; restore it, or set requestIdRetentionMs to 0 to open without it",
                            g.generation
                        ),
                        None,
                    )
                })?;
            let actual = crc32c::crc32c(&bytes);
            if g.request_ids_checksum.is_some_and(|c| c != actual) {
                return Err(Error::corrupt(
                    path.as_ref(),
                    format!(
                        "request ids checksum mismatch (manifest {:08x}, computed {actual:08x})",
                        g.request_ids_checksum.unwrap_or_default()
                    ),
                    None,
                ));
            }
            decode_records(path.as_ref(), &bytes)
        });
    let per_generation = futures::future::try_join_all(reads).await?;
    Ok(per_generation
        .into_iter()
        .flatten()
        .filter(|r| index.retained(r.put_at_ms))
        .collect())
}
