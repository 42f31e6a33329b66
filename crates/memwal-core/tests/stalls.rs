//! The stall suite: one actor is held at each of its store calls in turn, before the call
//! reaches the store and after the store answered it, while the other actors run to
//! completion (claims, commits, collection); then the held call goes on, and the shard is
//! checked (`docs/fencing.md` argues why these hold):
//! - every put any writer acknowledged is recovered exactly once, by a fresh writer and a fresh
//!   reader alike, and no row appears that was never put;
//! - once a writer's open has resolved, no older writer acknowledges a put it makes afterwards;
//! - a reader's scan holds every row acknowledged before it began, once, in order, and nothing
//!   that was never put; a tailer reads an entry's own rows or is told the entry was
//!   collected, never a hole.
//!
//! Each scenario first runs without a stall, recording the calls its stalled actor makes; the
//! points are those calls. `npm test` runs every point on the in-memory store and every third
//! on a local directory; `MEMWAL_STALLS_LONG=1` runs every point on both.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use memwal_core::gc::{self, GcOptions};
use memwal_core::store::call::{Actor, When};
use memwal_core::store::faults::{PauseHandle, Stall};
use memwal_core::{ErrorCode, ShardReader, ShardWriter, Store, WalTailer, WriterConfig};
use support::*;
use tokio::task::JoinHandle;

/// Where a run holds its stalled actor: its `index`-th store call (counting from 0, as the
/// unstalled run made them), before or after the call.
#[derive(Debug, Clone, Copy)]
struct Point {
    when: When,
    index: u64,
}

/// A run's verdict: `Err` describes what went wrong.
type Outcome = Result<(), String>;

/// The writer configuration of every scenario: durable, collection only when a scenario runs
/// it, as few manifest versions kept as allowed.
fn config() -> WriterConfig {
    durable().with(|c| {
        c.gc = false;
        c.gc_keep_manifest_versions = 2;
        c.compaction = false;
    })
}

/// Collection keeping the fewest versions and no grace for unlisted generation folders: the
/// most it may ever remove.
async fn collect(store: &Store, shard: &Shard) -> memwal_core::Result<gc::GcReport> {
    let options = GcOptions {
        keep_manifest_versions: 2,
        grace: std::time::Duration::ZERO,
        dry_run: false,
    };
    gc::collect(store, shard.id, &options).await
}

/// What was put and what was acknowledged in one run.
#[derive(Debug, Default)]
struct Ledger {
    put: Vec<i32>,
    acked: Vec<i32>,
}

impl Ledger {
    /// One durable put of `ids` by `w`; whether it was acknowledged.
    async fn put(&mut self, w: &ShardWriter, ids: &[i32]) -> bool {
        self.put.extend(ids);
        let ok = w.put(vec![batch(ids.iter().copied())]).await.is_ok();
        if ok {
            self.acked.extend(ids);
        }
        ok
    }

    /// `ids` put and committed as a generation by `w`; whether the put was acknowledged.
    async fn put_and_flush(&mut self, w: &ShardWriter, ids: &[i32]) -> bool {
        let ok = self.put(w, ids).await;
        let _ = w.force_seal_active().await;
        let _ = w.wait_for_flush_drain().await;
        ok
    }

    /// A violation unless `rows` holds every acknowledged row once and only rows put.
    fn check(&self, what: &str, rows: &[i32]) -> Outcome {
        let mut seen = BTreeMap::new();
        for r in rows {
            *seen.entry(*r).or_insert(0) += 1;
        }
        if let Some((r, n)) = seen.iter().find(|(_, n)| **n > 1) {
            return Err(format!("{what}: row {r} appears {n} times in {rows:?}"));
        }
        if let Some(r) = rows.iter().find(|r| !self.put.contains(r)) {
            return Err(format!("{what}: row {r} was never put ({rows:?})"));
        }
        if let Some(r) = self.acked.iter().find(|r| !seen.contains_key(r)) {
            return Err(format!(
                "{what}: acknowledged row {r} is lost ({rows:?}, acknowledged {:?})",
                self.acked
            ));
        }
        Ok(())
    }

    /// Checks what a fresh reader and a fresh writer recover (all other writers closed or
    /// dropped): the same rows, holding every acknowledged one once.
    async fn check_recovered(&self, shard: &Shard) -> Outcome {
        let reader = ShardReader::open(shard.store.clone(), shard.id)
            .await
            .map_err(|e| format!("a fresh reader could not open: {e}"))?;
        let read = ids(&reader
            .scan()
            .await
            .map_err(|e| format!("a fresh reader's scan failed: {e}"))?
            .batches);
        let w = shard
            .try_open(config())
            .await
            .map_err(|e| format!("a fresh writer could not open: {e}"))?;
        let recovered = ids(&w.scan().await.map_err(|e| e.to_string())?);
        w.close().await.map_err(|e| format!("closing it: {e}"))?;
        if read != recovered {
            return Err(format!(
                "a fresh reader sees {read:?} but a fresh writer recovers {recovered:?}"
            ));
        }
        self.check("recovery", &recovered)
    }
}

/// Arms the stall of `point` on the calls of `actor` through the handle labelled `label`.
fn arm(shard: &Shard, label: &str, actor: Actor, point: Point) -> PauseHandle {
    let stall = match point.when {
        When::Before => Stall::before(),
        When::After => Stall::after(),
    };
    shard
        .store
        .faults()
        .stall(stall.label(label).actor(actor).skip(point.index))
}

/// How an actor's work stood once its stall was armed.
enum Progress<T> {
    /// Held at the stall's call; still running.
    Held(JoinHandle<T>),
    /// Finished before reaching it (the point lies past the calls this run makes), or ran
    /// with no stall.
    Finished(T),
}

impl<T> Progress<T> {
    /// Waits until `stall` holds `work`'s call, or `work` finishes first; with no stall,
    /// until it finishes.
    async fn of(stall: Option<&PauseHandle>, mut work: JoinHandle<T>) -> Progress<T> {
        let Some(stall) = stall else {
            return Progress::Finished(work.await.expect("the actor's task panicked"));
        };
        within_hang_guard("the stalled actor to reach its point or finish", async {
            tokio::select! {
                biased;
                _ = stall.reached() => Progress::Held(work),
                out = &mut work => Progress::Finished(out.expect("the actor's task panicked")),
            }
        })
        .await
    }

    /// The work's output, once the stall is released.
    async fn finish(self) -> T {
        match self {
            Progress::Held(work) => work.await.expect("the actor's task panicked"),
            Progress::Finished(out) => out,
        }
    }
}

/// One run of a scenario on a new shard, with its point held (or none: the recording run).
type RunFn = fn(Shard, Option<Point>) -> BoxFuture<'static, Outcome>;

/// A scenario: its name, the label and actor it stalls, and one run of it.
struct Scenario {
    name: &'static str,
    label: &'static str,
    actor: Actor,
    run: RunFn,
}

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "a generation commit against a claim, commits and collection",
            label: "Y",
            actor: Actor::Commit,
            run: |s, p| Box::pin(stale_commit(s, p)),
        },
        Scenario {
            name: "a WAL append against a claim, commits and collection",
            label: "Y",
            actor: Actor::Put,
            run: |s, p| Box::pin(stale_append(s, p)),
        },
        Scenario {
            name: "a claim against commits and collection",
            label: "C",
            actor: Actor::Claim,
            run: |s, p| Box::pin(stale_claim(s, p)),
        },
        Scenario {
            name: "a compaction against a claim, commits and collection",
            label: "Y",
            actor: Actor::Compaction,
            run: |s, p| Box::pin(stale_compaction(s, p)),
        },
        Scenario {
            name: "a collection against commits and a claim",
            label: "G",
            actor: Actor::Gc,
            run: |s, p| Box::pin(stale_collection(s, p)),
        },
        Scenario {
            name: "a reader's scan against flushes and collection",
            label: "R",
            actor: Actor::Reader,
            run: |s, p| Box::pin(stale_scan(s, p)),
        },
        Scenario {
            name: "a tailer's reads against a flush and collection",
            label: "T",
            actor: Actor::Tailer,
            run: |s, p| Box::pin(stale_tail(s, p)),
        },
    ]
}

// Writer Y's generation commit is held while X claims, commits and collects.
async fn stale_commit(shard: Shard, point: Option<Point>) -> Outcome {
    let mut ledger = Ledger::default();
    let y = Arc::new(
        shard
            .through(shard.store.with_label("Y"))
            .open(config())
            .await,
    );
    ledger.put(&y, &[1, 2]).await;
    let stall = point.map(|p| arm(&shard, "Y", Actor::Commit, p));
    y.force_seal_active().await.unwrap();
    let flush = {
        let y = y.clone();
        tokio::spawn(async move { y.wait_for_flush_drain().await })
    };
    let flush = Progress::of(stall.as_ref(), flush).await;
    let x = shard.open(config()).await;
    for id in 10..13 {
        ledger.put_and_flush(&x, &[id]).await;
    }
    let _ = collect(&shard.store, &shard).await;
    ledger.put(&x, &[13]).await;
    drop(stall);
    let flushed = flush.finish().await;
    async {
        if ledger.put(&y, &[99]).await {
            return Err("Y acknowledged a put after X's claim".to_string());
        }
        let _ = y.close().await;
        x.close()
            .await
            .map_err(|e| format!("X's close failed: {e}"))?;
        // A flush that reported success committed Y's generation (X's hold 3 rows or 1).
        let listed = shard.manifest().await.flushed_generations;
        if flushed.is_ok() && !listed.iter().any(|g| g.physical_rows == Some(2)) {
            return Err(format!(
                "Y's generation flush reported success, but no listed generation is Y's: {listed:?}"
            ));
        }
        ledger.check_recovered(&shard).await
    }
    .await
}

// Writer Y's WAL append is held while X claims, commits and collects.
async fn stale_append(shard: Shard, point: Option<Point>) -> Outcome {
    let mut ledger = Ledger::default();
    let y = Arc::new(
        shard
            .through(shard.store.with_label("Y"))
            .open(config())
            .await,
    );
    ledger.put(&y, &[1]).await;
    let stall = point.map(|p| arm(&shard, "Y", Actor::Put, p));
    ledger.put.push(2);
    let put = Progress::of(stall.as_ref(), spawn_put(&y, vec![batch([2])])).await;
    let x = shard.open(config()).await;
    ledger.put_and_flush(&x, &[10]).await;
    let _ = collect(&shard.store, &shard).await;
    ledger.put(&x, &[11]).await;
    drop(stall);
    if put.finish().await.is_ok() {
        ledger.acked.push(2);
    }
    async {
        if ledger.put(&y, &[3]).await {
            return Err("Y acknowledged a put after X's claim".to_string());
        }
        drop(y);
        x.close()
            .await
            .map_err(|e| format!("X's close failed: {e}"))?;
        ledger.check_recovered(&shard).await
    }
    .await
}

// Claimant C's open is held while B claims, commits and collects.
async fn stale_claim(shard: Shard, point: Option<Point>) -> Outcome {
    let mut ledger = Ledger::default();
    let first = shard.open(config()).await;
    ledger.put(&first, &[1]).await;
    first.close().await.unwrap();
    let stall = point.map(|p| arm(&shard, "C", Actor::Claim, p));
    let c_open = {
        let c = shard.through(shard.store.with_label("C"));
        tokio::spawn(async move { c.try_open(config()).await })
    };
    let c_open = Progress::of(stall.as_ref(), c_open).await;
    let b = shard.try_open(config()).await;
    if let Ok(b) = &b {
        for id in 10..13 {
            ledger.put_and_flush(b, &[id]).await;
        }
        let _ = collect(&shard.store, &shard).await;
        ledger.put(b, &[13]).await;
    }
    drop(stall);
    let c = c_open.finish().await;
    async {
        // The writer of the higher epoch claimed last: once its open resolved, the other may
        // not acknowledge (which open resolved first says nothing: an open that read the WAL
        // before a later claim resolves, and is fenced at its first append).
        let c_last = match (&c, &b) {
            (Ok(c), Ok(b)) => c.epoch() > b.epoch(),
            (Ok(_), Err(_)) => true,
            _ => false,
        };
        let (last, other, names) = if c_last {
            (&c, &b, ("C", "B"))
        } else {
            (&b, &c, ("B", "C"))
        };
        if let Ok(last) = last {
            ledger.put(last, &[100]).await;
        }
        if let Ok(other) = other
            && ledger.put(other, &[200]).await
            && last.is_ok()
        {
            return Err(format!(
                "{} acknowledged a put after {}'s open resolved",
                names.1, names.0
            ));
        }
        if let (Err(e), Err(f)) = (&c, &b) {
            return Err(format!("both opens failed: {e}; {f}"));
        }
        for w in [c, b].into_iter().flatten() {
            let _ = w.close().await;
        }
        ledger.check_recovered(&shard).await
    }
    .await
}

// Writer Y's compaction is held while X claims, commits and collects.
async fn stale_compaction(shard: Shard, point: Option<Point>) -> Outcome {
    let compacting = config().with(|c| {
        c.compaction = true;
        c.compaction_max_generations = 2;
    });
    let mut ledger = Ledger::default();
    let y = Arc::new(
        shard
            .through(shard.store.with_label("Y"))
            .open(compacting)
            .await,
    );
    ledger.put_and_flush(&y, &[1]).await;
    ledger.put_and_flush(&y, &[2]).await;
    let stall = point.map(|p| arm(&shard, "Y", Actor::Compaction, p));
    ledger.put(&y, &[3]).await;
    // The third generation calls for a compaction, which runs after its commit on the same
    // task; the flush of a fourth waits behind it.
    y.force_seal_active().await.unwrap();
    ledger.put(&y, &[4]).await;
    y.force_seal_active().await.unwrap();
    let flushes = {
        let y = y.clone();
        tokio::spawn(async move { y.wait_for_flush_drain().await })
    };
    let flushes = Progress::of(stall.as_ref(), flushes).await;
    let x = shard.open(config()).await;
    for id in 10..13 {
        ledger.put_and_flush(&x, &[id]).await;
    }
    let _ = collect(&shard.store, &shard).await;
    ledger.put(&x, &[13]).await;
    drop(stall);
    let _ = flushes.finish().await;
    async {
        if ledger.put(&y, &[99]).await {
            return Err("Y acknowledged a put after X's claim".to_string());
        }
        let _ = y.close().await;
        x.close()
            .await
            .map_err(|e| format!("X's close failed: {e}"))?;
        ledger.check_recovered(&shard).await
    }
    .await
}

// A collection is held while the writer commits and a new writer claims and commits.
async fn stale_collection(shard: Shard, point: Option<Point>) -> Outcome {
    let mut ledger = Ledger::default();
    let w = shard.open(config()).await;
    for id in 1..4 {
        ledger.put_and_flush(&w, &[id]).await;
    }
    let stall = point.map(|p| arm(&shard, "G", Actor::Gc, p));
    let gc = {
        let (store, shard) = (shard.store.with_label("G"), shard.clone());
        tokio::spawn(async move { collect(&store, &shard).await })
    };
    let gc = Progress::of(stall.as_ref(), gc).await;
    ledger.put_and_flush(&w, &[4]).await;
    ledger.put(&w, &[5]).await;
    let v = shard.open(config()).await;
    ledger.put_and_flush(&v, &[6]).await;
    let _ = collect(&shard.store, &shard).await;
    ledger.put(&v, &[7]).await;
    drop(stall);
    let _ = gc.finish().await;
    async {
        if ledger.put(&w, &[99]).await {
            return Err("W acknowledged a put after V's claim".to_string());
        }
        drop(w);
        v.close()
            .await
            .map_err(|e| format!("V's close failed: {e}"))?;
        ledger.check_recovered(&shard).await
    }
    .await
}

// A reader's open and scan are held while the writer flushes and collects, twice.
async fn stale_scan(shard: Shard, point: Option<Point>) -> Outcome {
    let mut ledger = Ledger::default();
    let w = shard.open(config()).await;
    ledger.put_and_flush(&w, &[1]).await;
    ledger.put(&w, &[2]).await;
    ledger.put(&w, &[3]).await;
    let before = ledger.acked.clone();
    let stall = point.map(|p| arm(&shard, "R", Actor::Reader, p));
    let scan = {
        let (store, id) = (shard.store.with_label("R"), shard.id);
        tokio::spawn(async move {
            let reader = ShardReader::open(store, id).await?;
            reader.scan().await
        })
    };
    let scan = Progress::of(stall.as_ref(), scan).await;
    let _ = w.force_seal_active().await;
    let _ = w.wait_for_flush_drain().await;
    let _ = collect(&shard.store, &shard).await;
    ledger.put_and_flush(&w, &[4]).await;
    let _ = collect(&shard.store, &shard).await;
    ledger.put(&w, &[5]).await;
    drop(stall);
    let scanned = scan.finish().await;
    async {
        let rows = ids(&scanned
            .map_err(|e| format!("the scan failed: {e}"))?
            .batches);
        let in_order = rows.windows(2).all(|p| p[0] < p[1]);
        if !in_order || !before.iter().all(|r| rows.contains(r)) {
            return Err(format!(
                "the scan returned {rows:?}, acknowledged before it began {before:?}"
            ));
        }
        Ledger {
            put: ledger.put.clone(),
            acked: before.clone(),
        }
        .check("the scan", &rows)?;
        w.close()
            .await
            .map_err(|e| format!("closing the writer: {e}"))?;
        ledger.check_recovered(&shard).await
    }
    .await
}

// A tailer's reads of entries 1..3 are held while the writer flushes them and collection
// removes them.
async fn stale_tail(shard: Shard, point: Option<Point>) -> Outcome {
    let mut ledger = Ledger::default();
    let w = shard.open(config()).await;
    for id in 1..4 {
        ledger.put(&w, &[id]).await;
    }
    let stall = point.map(|p| arm(&shard, "T", Actor::Tailer, p));
    let reads = {
        let (store, id) = (shard.store.with_label("T"), shard.id);
        tokio::spawn(async move {
            let tailer = WalTailer::open(store, id).await?;
            let mut out = Vec::new();
            for position in 1..4 {
                out.push((position, tailer.read(position).await));
            }
            Ok::<_, memwal_core::Error>(out)
        })
    };
    let reads = Progress::of(stall.as_ref(), reads).await;
    let _ = w.force_seal_active().await;
    let _ = w.wait_for_flush_drain().await;
    let _ = collect(&shard.store, &shard).await;
    drop(stall);
    let reads = reads.finish().await;
    async {
        let reads = reads.map_err(|e| format!("the tailer failed: {e}"))?;
        for (position, read) in reads {
            match read {
                Ok(Some(e)) if ids(&e.batches) == vec![position as i32] => {}
                Err(e) if e.code() == ErrorCode::Truncated => {}
                other => {
                    return Err(format!(
                        "reading position {position} gave {:?}",
                        other.map(|o| o.map(|e| ids(&e.batches)))
                    ));
                }
            }
        }
        w.close()
            .await
            .map_err(|e| format!("closing the writer: {e}"))?;
        ledger.check_recovered(&shard).await
    }
    .await
}

/// Runs `scenario` once recording, then once per point of `stride` (every `stride`-th call),
/// before and after the call, on `backend`; the violations found.
async fn explore(backend: &Backend, scenario: &Scenario, stride: u64) -> Vec<String> {
    let faults = backend.store.faults();
    faults.record_calls();
    let recorded = (scenario.run)(Shard::new(&backend.store), None).await;
    let calls = faults
        .calls()
        .iter()
        .filter(|c| c.label.as_deref() == Some(scenario.label) && c.actor == scenario.actor)
        .count() as u64;
    let mut found = Vec::new();
    let mut say =
        |what: String| found.push(format!("{} ({}): {what}", scenario.name, backend.name));
    if let Err(e) = recorded {
        say(format!("without a stall: {e}"));
    }
    if calls == 0 {
        say("the actor made no store call".to_string());
    }
    for index in (0..calls).step_by(stride as usize) {
        for when in [When::Before, When::After] {
            let point = Point { when, index };
            let run = (scenario.run)(Shard::new(&backend.store), Some(point)).await;
            if let Err(e) = run {
                say(format!("held at call {index} of {calls} ({when:?}): {e}"));
            }
        }
    }
    found
}

async fn explore_all(backend: Backend, stride: u64) {
    let mut found = Vec::new();
    for scenario in scenarios() {
        found.extend(explore(&backend, &scenario, stride).await);
    }
    assert_no_violations(found);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_actor_held_at_every_store_call_in_memory_loses_nothing() {
    explore_all(Backend::memory(), 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_actor_held_at_store_calls_on_a_local_directory_loses_nothing() {
    let stride = if long_run("MEMWAL_STALLS_LONG") { 1 } else { 3 };
    explore_all(Backend::local(), stride).await;
}
