//! Opening a writer: claim the next epoch, write the fence sentinel, replay the WAL, and start
//! the two background tasks.

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
use super::state::{MemTableState, Mode, WalOnlyState, WriterInner, WriterState};
use crate::config::WriterConfig;
use crate::error::{Error, Result};
use crate::flush::Feedback;
use crate::flush::completion::Watcher;
use crate::flush::generation::GenerationFlusher;
use crate::flush::wal_handler::WalFlushHandler;
use crate::manifest::ManifestStore;
use crate::stats::OpenStats;
use crate::store::Store;
use crate::wal::{self, StagedSentinel, WalAppender};

/// The writer's two background tasks.
pub(crate) struct BackgroundTasks {
    pub wal_handler: JoinHandle<()>,
    pub generation_flusher: JoinHandle<()>,
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

/// See [`crate::ShardWriter::open`].
pub(crate) async fn open(
    store: Store,
    schema: SchemaRef,
    config: WriterConfig,
) -> Result<(Arc<WriterInner>, BackgroundTasks)> {
    config.validate()?;
    if schema.fields().is_empty() {
        return Err(Error::invalid(
            "schema has no fields; a shard needs at least one column",
        ));
    }
    let started = Instant::now();
    store.check_conditional_create().await?;
    let shard_id = config.shard_id.unwrap_or_else(Uuid::new_v4);
    let paths = store.shard_paths(shard_id);
    let manifests = ManifestStore::new(store.clone(), paths.clone());
    let writer_id = Uuid::new_v4().to_string();
    // While the epoch claim writes (a durable create), the WAL tip is searched and the fence
    // sentinel of the epoch it should win is staged (written and synced, unnamed), so that only
    // a link and a directory sync are left once the claim ends. A tip found before the claim is
    // still a safe start for the sentinel, which takes the first free slot at or after it (the
    // predecessor appends in order, so it cannot pass a slot it has not reached). Nothing is
    // visible until the sentinel is written, and a claim that ends at another epoch restages
    // (or fails, if a peer claimed).
    let latest = manifests.read_latest().await?;
    let hint = latest.as_ref().map_or(0, |m| {
        m.wal_entry_position_last_seen
            .max(m.replay_after_wal_entry_position)
    });
    let expected_epoch = latest.as_ref().map_or(1, |m| m.writer_epoch + 1);
    let (manifest, tip, staged) = tokio::try_join!(
        manifests.claim_epoch_after(latest, &schema, &writer_id),
        wal::discover_tip(&store, &paths, hint),
        async {
            // Epoch 1 is the first claim ever: no predecessor to fence. A staging error is not
            // final here: the sentinel write stages again and retries.
            Ok(if expected_epoch >= 2 {
                StagedSentinel::stage(&store, &paths, expected_epoch)
                    .await
                    .ok()
            } else {
                None
            })
        },
    )?;
    let epoch = manifest.writer_epoch;
    let mut appender = WalAppender::new(
        store.clone(),
        paths.clone(),
        manifests.clone(),
        epoch,
        tip,
        config.retry_policy(),
    );
    let fence_sentinel_position = if epoch >= 2 {
        Some(appender.write_fence_sentinel(tip, staged).await?)
    } else {
        None
    };
    let claimed = Instant::now();
    let mut open_stats = OpenStats {
        claim: claimed - started,
        ..OpenStats::default()
    };
    store.faults().pause_point("open-before-replay").await;
    let (feedback, reports) = Feedback::new(shard_id);
    let (wal_tx, wal_rx) = mpsc::unbounded_channel();
    let (gen_tx, gen_rx) = mpsc::unbounded_channel();
    let mut replayed_frozen = Vec::new();
    let mode = if config.enable_memtable {
        let r = replay::replay(
            &store,
            &paths,
            &schema,
            &config,
            epoch,
            manifest.replay_after_wal_entry_position,
            manifest.current_generation.max(1),
        )
        .await?;
        appender.set_next_position(r.next_position.max(appender.next_position()));
        replayed_frozen = r.frozen;
        open_stats.replay = claimed.elapsed();
        open_stats.replayed_entries = r.entries;
        open_stats.replayed_rows = r.rows;
        Mode::MemTable(MemTableState {
            active: r.active,
            frozen: VecDeque::new(),
            frozen_bytes: 0,
            flushed: manifest.flushed_generations.clone(),
            wal_size_triggers: 0,
        })
    } else {
        Mode::WalOnly(WalOnlyState::default())
    };
    let handler_active = match &mode {
        Mode::MemTable(mt) => Some((mt.active.memtable.clone(), mt.active.wal)),
        Mode::WalOnly(_) => None,
    };
    let inner = Arc::new(WriterInner {
        shard_id,
        writer_id: writer_id.clone(),
        epoch,
        schema: schema.clone(),
        store: store.clone(),
        paths: paths.clone(),
        manifests: manifests.clone(),
        state: Mutex::new(WriterState::new(mode, appender.next_position(), reports)),
        feedback: feedback.clone(),
        wal_tx,
        gen_tx,
        fence_sentinel_position,
        open_stats,
        config: config.clone(),
    });
    {
        let mut st = inner.lock();
        if let Mode::MemTable(mt) = &mut st.mode {
            for held in replayed_frozen {
                // Replayed batches are in the WAL already: their generation flush need not
                // wait, and covers exactly the entries they came from.
                let done = held
                    .wal
                    .last_position
                    .ok_or_else(|| Error::invalid("a replayed MemTable has no WAL position"));
                inner.enqueue_frozen(mt, held, Watcher::ready(done));
            }
        }
    }
    let handler = WalFlushHandler::new(
        appender,
        feedback.clone(),
        config.max_wal_flush_interval_ms.map(Duration::from_millis),
        handler_active,
        wal_rx,
    );
    let flusher = GenerationFlusher {
        store,
        paths,
        manifests,
        epoch,
        writer_id,
        schema,
        retry: config.retry_policy(),
        feedback: feedback.clone(),
    };
    let tasks = BackgroundTasks {
        wal_handler: spawn_task("wal-flush-handler", feedback.clone(), handler.run()),
        generation_flusher: spawn_task("generation-flusher", feedback, flusher.run(gen_rx)),
    };
    Ok((inner, tasks))
}
