//! Acknowledged rows survive a simulated power loss. The shard lives on [`SimFs`], which remembers what was synced
//! (file data and directory entries). Each scenario runs once to count its persistence points,
//! then once per point with the power cut right there; the disk a reboot would find is then
//! reopened and checked against the history of acknowledgements:
//! - every acknowledged durable put (and every put made durable by `flush`, a generation
//!   flush or `close`) is present exactly once;
//! - every put is all-or-nothing; no row appears that was never put; no duplicates.
//!
//! The mutation check at the end runs the same scenarios with syncing switched off and
//! requires the checker to find lost acknowledged rows: if it did not, these tests would be
//! unable to see a missing fsync.
//!
//! `MEMWAL_POWER_LOSS_LONG=1` adds longer operation sequences and more random crash states.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use memwal_core::store::sim_fs::{CrashMode, SimFs};
use memwal_core::wal::WalLayout;
use memwal_core::{ShardReader, ShardWriter, Store, WriterConfig};
use support::*;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A put of one batch of two rows (durable or not, per the writer's mode).
    Put,
    /// `flush()`: makes every earlier non-durable put durable.
    Flush,
    /// `force_seal_active()` + `wait_for_flush_drain()`: a generation flush.
    Seal,
    /// A second writer claims the shard; later puts go to it.
    Failover,
    /// `close()`, then a new writer.
    Reopen,
}

#[derive(Debug, Default)]
struct History {
    /// Every put attempted, as its ids.
    attempted: Vec<[i32; 2]>,
    /// Ids whose durability was acknowledged.
    required: BTreeSet<i32>,
    /// Ids of acknowledged non-durable puts not yet made durable.
    pending: Vec<i32>,
}

fn config(durable: bool) -> WriterConfig {
    WriterConfig {
        durable_write: durable,
        max_wal_flush_interval_ms: None,
        max_wal_persist_retries: 0,
        wal_persist_retry_base_delay_ms: 0,
        // Small segments: the simulated disk holds every byte of a spare in memory.
        wal_segment_bytes: 64 << 10,
        ..WriterConfig::default()
    }
}

fn store(fs: &Arc<SimFs>, fsync: bool) -> Store {
    layout_store(fs, fsync, WalLayout::Objects)
}

/// A store on `fs` whose new shards get the WAL `layout`.
fn layout_store(fs: &Arc<SimFs>, fsync: bool, layout: WalLayout) -> Store {
    Store::on_fs(fs.clone(), "/data".into(), fsync).with_new_shard_wal_layout(layout)
}

async fn open(store: &Store, shard: Uuid, durable: bool) -> Option<ShardWriter> {
    ShardWriter::open(store.clone(), schema(), on(shard, config(durable)))
        .await
        .ok()
}

/// Runs `ops` against a shard on `fs`; errors (after the power cut) just stop acknowledging.
async fn run(
    fs: &Arc<SimFs>,
    (fsync, layout): (bool, WalLayout),
    shard: Uuid,
    durable: bool,
    ops: &[Op],
) -> History {
    let store = layout_store(fs, fsync, layout);
    let mut h = History::default();
    let mut writer = open(&store, shard, durable).await;
    let mut old: Vec<ShardWriter> = Vec::new();
    let mut next = 0;
    for op in ops {
        let Some(w) = writer.as_ref() else {
            break;
        };
        match op {
            Op::Put => {
                let ids = [next, next + 1];
                next += 2;
                h.attempted.push(ids);
                if w.put(vec![batch(ids)]).await.is_ok() {
                    if durable {
                        h.required.extend(ids);
                    } else {
                        h.pending.extend(ids);
                    }
                }
            }
            Op::Flush => {
                if w.flush().await.is_ok() {
                    h.required.extend(h.pending.drain(..));
                }
            }
            Op::Seal => {
                if w.force_seal_active().await.is_ok() && w.wait_for_flush_drain().await.is_ok() {
                    h.required.extend(h.pending.drain(..));
                }
            }
            Op::Failover => {
                // The old writer's unflushed non-durable rows die with it.
                h.pending.clear();
                let next_writer = open(&store, shard, durable).await;
                old.extend(writer.take());
                writer = next_writer;
            }
            Op::Reopen => {
                if w.close().await.is_ok() {
                    h.required.extend(h.pending.drain(..));
                }
                h.pending.clear();
                old.extend(writer.take());
                writer = open(&store, shard, durable).await;
            }
        }
    }
    for w in old.iter().chain(writer.iter()) {
        let _ = w.abort().await;
    }
    h
}

/// What a reboot finds: the rows a new writer recovers (and a reader then agrees). The writer
/// opens first: a claim the power cut interrupted (on segments, a fence file written and no
/// segment started) leaves the shard for the next claim to settle, and a reader waits for that.
async fn recovered(fs: &Arc<SimFs>, shard: Uuid) -> Result<Vec<i32>, String> {
    // An existing shard keeps its layout: the store's choice for new ones does not matter.
    let store = store(fs, true);
    let writer_rows =
        match ShardWriter::open(store.clone(), schema(), on(shard, config(true))).await {
            Ok(w) => {
                let rows = ids(&w.scan().await.map_err(|e| e.to_string())?);
                w.close().await.map_err(|e| e.to_string())?;
                rows
            }
            Err(e) => return Err(format!("reopen failed: {e}")),
        };
    let reader_rows = match ShardReader::open(store.clone(), shard).await {
        Ok(r) => ids(&r.scan().await.map_err(|e| e.to_string())?.batches),
        Err(e) => return Err(e.to_string()),
    };
    if writer_rows != reader_rows {
        return Err(format!(
            "writer recovered {writer_rows:?} but the reader sees {reader_rows:?}"
        ));
    }
    Ok(writer_rows)
}

/// The violations of the durability contract in `got`, given history `h`.
fn violations(h: &History, got: &[i32]) -> Vec<String> {
    let mut out = Vec::new();
    let mut counts: BTreeMap<i32, usize> = BTreeMap::new();
    for id in got {
        *counts.entry(*id).or_default() += 1;
    }
    for (id, n) in &counts {
        if *n > 1 {
            out.push(format!("row {id} recovered {n} times"));
        }
    }
    for id in &h.required {
        if !counts.contains_key(id) {
            out.push(format!("acknowledged row {id} lost"));
        }
    }
    let attempted: BTreeSet<i32> = h.attempted.iter().flatten().copied().collect();
    for id in counts.keys() {
        if !attempted.contains(id) {
            out.push(format!("row {id} was never put"));
        }
    }
    for ids in &h.attempted {
        if counts.contains_key(&ids[0]) != counts.contains_key(&ids[1]) {
            out.push(format!("put {ids:?} recovered partially"));
        }
    }
    out
}

/// Runs `ops` with the power cut at every persistence point (and, with `random_seeds`, also
/// recovering random crash states). Returns every violation found.
async fn crash_everywhere(
    ops: &[Op],
    durable: bool,
    disk: (bool, WalLayout),
    modes: &[CrashMode],
) -> Vec<String> {
    let shard = Uuid::new_v4();
    let probe = Arc::new(SimFs::new());
    run(&probe, disk, shard, durable, ops).await;
    let points = probe.persistence_points();
    let mut found = Vec::new();
    for k in 0..=points {
        for mode in modes {
            let fs = Arc::new(SimFs::new());
            fs.crash_after(k);
            let h = run(&fs, disk, shard, durable, ops).await;
            let after = Arc::new(fs.recover(*mode));
            match recovered(&after, shard).await {
                Ok(got) => {
                    for v in violations(&h, &got) {
                        found.push(format!(
                            "{ops:?} {:?} durable={durable} crash@{k} {mode:?}: {v}",
                            disk.1
                        ));
                    }
                }
                Err(e) => found.push(format!(
                    "{ops:?} durable={durable} crash@{k} {mode:?}: recovery failed: {e}"
                )),
            }
        }
    }
    found
}

fn sequences(alphabet: &[Op], max_len: usize) -> Vec<Vec<Op>> {
    let mut all: Vec<Vec<Op>> = vec![vec![]];
    let mut frontier = all.clone();
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for op in alphabet {
                let mut t = s.clone();
                t.push(*op);
                next.push(t);
            }
        }
        all.extend(next.iter().cloned());
        frontier = next;
    }
    all.into_iter().filter(|s| !s.is_empty()).collect()
}

fn long() -> bool {
    long_run("MEMWAL_POWER_LOSS_LONG")
}

/// Every sequence of up to 3 (long: 4) of `ops`, crashing at every persistence point
/// (dropping what was not synced), recovers every acknowledged row.
async fn every_sequence_survives_power_loss(ops: &[Op], durable: bool, layout: WalLayout) {
    let len = if long() { 4 } else { 3 };
    let mut found = Vec::new();
    for ops in sequences(ops, len) {
        let disk = (true, layout);
        found.extend(crash_everywhere(&ops, durable, disk, &[CrashMode::DropUnsynced]).await);
    }
    assert_no_violations(found);
}

// Every sequence for a durable writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_acknowledgements_survive_power_loss_at_every_sync() {
    let ops = [Op::Put, Op::Seal, Op::Failover, Op::Reopen];
    every_sequence_survives_power_loss(&ops, true, WalLayout::Objects).await;
}

// The same on the segment-log WAL: its syncs, the fence file, claims and rotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_acknowledgements_survive_power_loss_at_every_sync_on_segments() {
    let ops = [Op::Put, Op::Seal, Op::Failover, Op::Reopen];
    every_sequence_survives_power_loss(&ops, true, WalLayout::Segments).await;
}

// The same for non-durable puts made durable by flush, a generation flush or close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_non_durable_puts_survive_power_loss_at_every_sync() {
    let ops = [Op::Put, Op::Flush, Op::Seal, Op::Reopen];
    every_sequence_survives_power_loss(&ops, false, WalLayout::Objects).await;
    every_sequence_survives_power_loss(&ops, false, WalLayout::Segments).await;
}

// File systems may persist part of what was not synced (ALICE): random subsets of unsynced
// directory changes and torn unsynced file data must not break recovery either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_partial_persistence_of_unsynced_state_is_recovered() {
    let seeds: Vec<CrashMode> = (1..=if long() { 16 } else { 3 })
        .map(CrashMode::Random)
        .collect();
    let scenarios: &[(&[Op], bool)] = &[
        (&[Op::Put, Op::Put, Op::Seal, Op::Put], true),
        (&[Op::Put, Op::Failover, Op::Put, Op::Reopen], true),
        (&[Op::Put, Op::Flush, Op::Put, Op::Seal, Op::Put], false),
    ];
    let mut found = Vec::new();
    for layout in [WalLayout::Objects, WalLayout::Segments] {
        for (ops, durable) in scenarios {
            found.extend(crash_everywhere(ops, *durable, (true, layout), &seeds).await);
        }
    }
    assert_no_violations(found);
}

// The mutation check: with syncing switched off (as `object_store`'s LocalFileSystem does by
// default), acknowledged rows must be reported lost. If this passes with fsync off, the
// suite above could not detect a missing fsync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_power_loss_check_fails_when_fsync_is_switched_off() {
    let ops = [Op::Put, Op::Put, Op::Seal, Op::Put];
    let drop = [CrashMode::DropUnsynced];
    let with_fsync = crash_everywhere(&ops, true, (true, WalLayout::Objects), &drop).await;
    assert!(with_fsync.is_empty(), "{with_fsync:?}");
    let without = crash_everywhere(&ops, true, (false, WalLayout::Objects), &drop).await;
    assert!(
        without
            .iter()
            .any(|v| v.contains("acknowledged row") && v.contains("lost")),
        "syncing off went unnoticed: {without:?}"
    );
}

/// One durable put on `fs` (its directories perhaps planted beforehand), then a power loss
/// right after the acknowledgement: the rows a reboot finds.
async fn put_then_lose_power(fs: &Arc<SimFs>, shard: Uuid) -> Vec<i32> {
    let w = open(&store(fs, true), shard, true).await.expect("open");
    w.put(vec![batch([7, 8])]).await.expect("durable put");
    let after = Arc::new(fs.recover(CrashMode::DropUnsynced));
    recovered(&after, shard).await.expect("recovery")
}

// On ext4 without a journal, a directory fsync does not write the inode of a file linked into it,
// whose on-disk link count is still the 0 of its unnamed data sync (`docs/durability.md`, "What
// fsync covers on a local disk").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_put_survives_power_loss_on_a_file_system_without_a_journal() {
    let fs = Arc::new(SimFs::new());
    assert_eq!(put_then_lose_power(&fs, Uuid::new_v4()).await, vec![7, 8]);
}

// Directories a crashed process created (or whose parent's sync failed) exist without being
// durable; the store must sync them before relying on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_left_unsynced_by_a_crashed_process_are_synced_before_use() {
    use memwal_core::store::fs::Fs;
    let fs = Arc::new(SimFs::new());
    let shard = Uuid::new_v4();
    let base = std::path::PathBuf::from(format!("/data/_mem_wal/{shard}"));
    for dir in ["/data", "/data/_mem_wal"] {
        fs.create_dir(std::path::Path::new(dir)).unwrap();
    }
    for dir in [base.clone(), base.join("manifest"), base.join("wal")] {
        fs.create_dir(&dir).unwrap();
    }
    assert_eq!(put_then_lose_power(&fs, shard).await, vec![7, 8]);
}

// A writer's WAL entry was linked but its file sync failed (or the writer died between the
// link and the sync): its rows were never acknowledged, but the entry is readable. The next
// writer replays it and answers a retry of its request id as durable; on ext4 without a
// journal that entry is freed at the next mount unless its inode is synced. So a new writer
// makes every entry it replays durable before its fence sentinel and before any answer (see
// `docs/fencing.md`, "What replay trusts"): after a power loss, the retried put and the new
// writer's own rows are there, and nothing stands above a hole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_entry_whose_file_sync_failed_is_made_durable_before_it_is_trusted() {
    use memwal_core::{PutOptions, RequestId};
    let retry = || PutOptions::with_request_id(RequestId::new("order-2").unwrap());
    let fs = Arc::new(SimFs::new());
    let shard = Uuid::new_v4();
    let a = open(&store(&fs, true), shard, true).await.expect("open");
    a.put(vec![batch([1])]).await.expect("durable put");
    fs.fail_next_file_syncs(1);
    let e = a.put_with(vec![batch([2])], retry()).await.unwrap_err();
    assert_eq!(
        e.fence_reason(),
        Some(memwal_core::FenceReason::PersistenceFailure),
        "{e}"
    );
    drop(a);

    let b = open(&store(&fs, true), shard, true).await.expect("reopen");
    b.put_with(vec![batch([2])], retry())
        .await
        .expect("the retry is answered from the replayed entry");
    assert_eq!(b.stats().retried_puts, 1);
    b.put(vec![batch([3])]).await.expect("durable put");

    let after = Arc::new(fs.recover(CrashMode::DropUnsynced));
    assert_eq!(
        recovered(&after, shard).await.expect("recovery"),
        vec![1, 2, 3]
    );
}

// The same entry, linked by a live predecessor after the new writer found the WAL's tip: the
// sentinel's create finds the slot taken, and makes what it found durable before it takes the
// next one, so that the sentinel never outlives an entry below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_is_placed_only_above_entries_made_durable() {
    use memwal_core::store::call::{Actor, ObjectKind, StoreOp};
    use memwal_core::store::faults::Stall;
    let fs = Arc::new(SimFs::new());
    let shard = Uuid::new_v4();
    let a = open(&store(&fs, true), shard, true).await.expect("open");
    a.put(vec![batch([1])]).await.expect("durable put");

    let b_store = store(&fs, true);
    let stall = b_store.faults().stall(
        Stall::before()
            .actor(Actor::Claim)
            .op(StoreOp::Create)
            .kind(ObjectKind::WalEntry),
    );
    let b_open = tokio::spawn(async move { open(&b_store, shard, true).await });
    stall.reached().await;
    fs.fail_next_file_syncs(1);
    a.put(vec![batch([2])]).await.unwrap_err();
    stall.release();
    let b = b_open.await.unwrap().expect("reopen");
    b.put(vec![batch([3])]).await.expect("durable put");

    let after = Arc::new(fs.recover(CrashMode::DropUnsynced));
    assert_eq!(
        recovered(&after, shard).await.expect("recovery"),
        vec![1, 2, 3]
    );
}
