//! A deterministic simulation of the per-put completion cells and the WAL flush handler under a
//! seeded scheduler. Everything runs on one current-thread Tokio runtime with paused time;
//! the store is in memory, and its WAL operations get seeded latency, failures before they
//! apply and lost responses after they apply. Many concurrent durable puts (`put` and
//! `put_no_wait`) race random `force_seal_active` calls; every choice comes from one seed.
//!
//! Checked for every seed:
//! - every `Ok` completion's rows are in the WAL when it resolves, in one entry, exactly once;
//! - every completion resolves (none hangs, even across an hour of virtual time);
//! - failures are typed (`Fenced(PersistenceFailure)`: one writer, so never `PeerClaimedEpoch`),
//!   and a failed put is absent from the WAL or whole;
//! - once the writer is poisoned, every later call fails at once, with no time passing;
//! - no row is in the WAL twice or was never put;
//! - the same seed gives the same trace (each put's outcome and completion time, each WAL
//!   entry and its rows) when run twice.
//!
//! Why not `Faults::set_chaos`: its one random stream is shared by every operation, including
//! the generation flusher's, which resumes after Parquet encoding on Tokio's blocking pool at a
//! moment the seed does not control. Here each WAL operation's fate is a function of the seed,
//! the operation, the object and how often that object was touched before, and only the WAL
//! flush handler touches WAL objects during the run; generation files and manifests are served
//! without delay or faults, so the flusher's timing cannot move anything the trace records.
//!
//! CI (a few seeds, each run twice; well under a second):
//!   cargo test -p memwal-core --test deterministic
//! Long (many seeds, more clients):
//!   MEMWAL_DST_LONG=1 cargo test -p memwal-core --release --test deterministic
//! One seed:
//!   MEMWAL_DST_SEED=<seed> cargo test -p memwal-core --test deterministic

mod support;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use memwal_core::store::parse_bitrev64_name;
use memwal_core::wal::entry::{EntryPlace, decode_entry};
use memwal_core::{Error, ErrorCode, FenceReason, ShardWriter, WriterConfig};
use object_store::path::Path;
use object_store::{GetResult, ObjectMeta, ObjectStore, ObjectStoreExt, PutResult};
use support::forwarding::{Forwarding, Get, Hooks, Put, StoreResult, injected, is_wal};
use support::seeded::{Rng, mix, seeds};
use support::*;
use tokio::time::Instant;

fn long() -> bool {
    long_run("MEMWAL_DST_LONG")
}

/// The seeds to run: `MEMWAL_DST_SEED`, or seeds 1 to `n`.
fn dst_seeds(n: u64) -> Vec<u64> {
    seeds("MEMWAL_DST_SEED", 1..n + 1)
}

/// Seeded faults of the WAL: probabilities in percent, latencies in microseconds.
#[derive(Debug, Clone, Copy)]
struct WalFaults {
    seed: u64,
    fail_before: u64,
    fail_after: u64,
    latency_us: u64,
    jitter_us: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Op {
    Get,
    Put,
}

/// Seeded fates for the WAL operations of an in-memory store (see the module docs).
struct SeededFates {
    faults: WalFaults,
    touched: Mutex<HashMap<(Op, String), u64>>,
    /// Faults are on only while the puts run.
    on: AtomicBool,
}

struct Fate {
    delay: Duration,
    fail_before: bool,
    fail_after: bool,
}

impl SeededFates {
    fn fate(&self, op: Op, path: &Path) -> Option<Fate> {
        if !self.on.load(Ordering::SeqCst) || !is_wal(path) {
            return None;
        }
        let key = (op, path.to_string());
        let nth = {
            let mut t = self.touched.lock().unwrap();
            let n = t.entry(key.clone()).or_default();
            *n += 1;
            *n
        };
        let f = self.faults;
        let name_hash = key.1.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        let mut r = Rng::new(mix(f.seed ^ mix(name_hash ^ mix(nth ^ (op as u64) << 56))));
        let delay = f.latency_us + r.below(f.jitter_us + 1);
        let fail_before = r.below(100) < f.fail_before;
        let fail_after = op == Op::Put && !fail_before && r.below(100) < f.fail_after;
        Some(Fate {
            delay: Duration::from_micros(delay),
            fail_before,
            fail_after,
        })
    }

    async fn before(&self, op: Op, path: &Path) -> object_store::Result<bool> {
        let Some(fate) = self.fate(op, path) else {
            return Ok(false);
        };
        tokio::time::sleep(fate.delay).await;
        if fate.fail_before {
            return Err(injected_at(path, "before apply"));
        }
        Ok(fate.fail_after)
    }
}

fn injected_at(path: &Path, when: &str) -> object_store::Error {
    injected("seeded", format!("injected failure ({when}) at {path}"))
}

#[async_trait]
impl Hooks for SeededFates {
    async fn put(&self, inner: &dyn ObjectStore, put: Put<'_>) -> StoreResult<PutResult> {
        let location = put.location;
        let lose_response = self.before(Op::Put, location).await?;
        let r = put.forward(inner).await;
        if lose_response {
            return Err(injected_at(location, "after apply, response lost"));
        }
        r
    }

    async fn get(&self, inner: &dyn ObjectStore, get: Get<'_>) -> StoreResult<GetResult> {
        self.before(Op::Get, get.location).await?;
        get.forward(inner).await
    }
}

/// The WAL as the raw store holds it right now: position → (epoch, ids). Decoded entries are
/// cached (an entry is written once, ever).
struct WalView {
    raw: Arc<dyn ObjectStore>,
    wal_dir: Path,
    cache: Mutex<BTreeMap<u64, (u64, Vec<i32>)>>,
}

impl WalView {
    async fn read(&self) -> BTreeMap<u64, (u64, Vec<i32>)> {
        use futures::TryStreamExt;
        let listed: Vec<ObjectMeta> = self
            .raw
            .list(Some(&self.wal_dir))
            .try_collect()
            .await
            .unwrap();
        for m in listed {
            let Some(pos) = m.location.filename().and_then(parse_bitrev64_name) else {
                continue;
            };
            if self.cache.lock().unwrap().contains_key(&pos) {
                continue;
            }
            let bytes = self
                .raw
                .get(&m.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let e = decode_entry(place_of(&m.location, pos), m.location.as_ref(), bytes).unwrap();
            self.cache
                .lock()
                .unwrap()
                .insert(pos, (e.writer_epoch, ids(&e.batches)));
        }
        self.cache.lock().unwrap().clone()
    }

    /// The position of the one entry holding all of `ids`, or a description of what is wrong.
    async fn entry_holding(&self, ids: &[i32]) -> Result<u64, String> {
        let wal = self.read().await;
        let holding: Vec<u64> = wal
            .iter()
            .filter(|(_, (_, rows))| ids.iter().any(|id| rows.contains(id)))
            .map(|(p, _)| *p)
            .collect();
        match holding.as_slice() {
            [p] if ids.iter().all(|id| wal[p].1.contains(id)) => Ok(*p),
            [] => Err("in no WAL entry".into()),
            _ => Err(format!("split or repeated across WAL entries {holding:?}")),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Ok {
        generation: u64,
        batches: Range<usize>,
    },
    Failed {
        code: ErrorCode,
        reason: Option<FenceReason>,
    },
}

/// One seed's run: the trace, which must not depend on anything but the seed, and the
/// violations found.
#[derive(Debug, Default)]
struct Run {
    trace: Vec<String>,
    violations: Vec<String>,
    /// Whether the writer was poisoned (a WAL append failed for good).
    poisoned: bool,
}

struct Sim {
    w: ShardWriter,
    wal: WalView,
    start: Instant,
    next_id: AtomicI32,
    /// Set once any call saw the writer's fence.
    poisoned: AtomicBool,
    events: Mutex<Vec<(u64, String)>>,
    violations: Mutex<Vec<String>>,
    puts: Mutex<Vec<(Vec<i32>, Outcome)>>,
}

/// Hang detection: an hour of virtual time is "never".
const NEVER: Duration = Duration::from_secs(3600);

impl Sim {
    fn now_us(&self) -> u64 {
        (Instant::now() - self.start).as_micros() as u64
    }

    fn violation(&self, v: String) {
        self.violations.lock().unwrap().push(v);
    }

    fn event(&self, client: u64, what: String) {
        let at = self.now_us();
        self.events
            .lock()
            .unwrap()
            .push((client, format!("t={at}us {what}")));
    }

    /// A failure must be this writer's own fence; returns the outcome it records.
    fn failed(&self, what: &str, e: &Error) -> Outcome {
        if e.fence_reason() != Some(FenceReason::PersistenceFailure) {
            self.violation(format!(
                "{what} failed with {:?}/{:?}, not a PersistenceFailure fence: {e}",
                e.code(),
                e.fence_reason()
            ));
        }
        self.poisoned.store(true, Ordering::SeqCst);
        Outcome::Failed {
            code: e.code(),
            reason: e.fence_reason(),
        }
    }

    async fn completed(&self, ids: &[i32], outcome: Outcome) {
        if let Outcome::Ok { .. } = outcome
            && let Err(v) = self.wal.entry_holding(ids).await
        {
            self.violation(format!("put {ids:?} resolved Ok but its rows are {v}"));
        }
        self.puts.lock().unwrap().push((ids.to_vec(), outcome));
    }

    /// Once the writer is poisoned, a call must fail at once: no virtual time may pass.
    fn expect_fast_failure<T>(&self, what: &str, before: u64, r: &memwal_core::Result<T>) {
        if !self.poisoned.load(Ordering::SeqCst) {
            return;
        }
        if r.is_ok() || self.now_us() != before {
            self.violation(format!(
                "{what} on a poisoned writer: ok={} after {}us",
                r.is_ok(),
                self.now_us() - before
            ));
        }
    }
}

async fn client(sim: Arc<Sim>, me: u64, mut r: Rng, ops: u64) {
    for _ in 0..ops {
        tokio::time::sleep(Duration::from_micros(r.below(3000))).await;
        let dice = r.below(100);
        let before = sim.now_us();
        let was_poisoned = sim.poisoned.load(Ordering::SeqCst);
        if dice < 8 {
            let res = sim.w.force_seal_active().await;
            if was_poisoned {
                sim.expect_fast_failure("force_seal_active", before, &res);
            }
            match &res {
                Ok(()) => sim.event(me, "seal ok".into()),
                Err(e) => {
                    let o = sim.failed("force_seal_active", e);
                    sim.event(me, format!("seal {o:?}"));
                }
            }
            continue;
        }
        let n = 1 + r.below(3) as i32;
        let first = sim.next_id.fetch_add(n, Ordering::SeqCst);
        let ids: Vec<i32> = (first..first + n).collect();
        let batches = if n > 1 && r.below(2) == 0 {
            vec![batch(first..first + 1), batch(first + 1..first + n)]
        } else {
            vec![batch(first..first + n)]
        };
        let no_wait = dice < 40;
        let result = if no_wait {
            let res = sim.w.put_no_wait(batches).await;
            if was_poisoned {
                sim.expect_fast_failure("put_no_wait", before, &res);
            }
            match res {
                Ok((result, Some(watcher))) => {
                    match tokio::time::timeout(NEVER, watcher.wait()).await {
                        Ok(r) => r.map(|()| result),
                        Err(_) => {
                            sim.violation(format!("put_no_wait {ids:?}: its watcher hung"));
                            continue;
                        }
                    }
                }
                Ok((_, None)) => {
                    sim.violation("a durable put_no_wait returned no watcher".into());
                    continue;
                }
                Err(e) => Err(e),
            }
        } else {
            match tokio::time::timeout(NEVER, sim.w.put(batches)).await {
                Ok(res) => {
                    if was_poisoned {
                        sim.expect_fast_failure("put", before, &res);
                    }
                    res
                }
                Err(_) => {
                    sim.violation(format!("put {ids:?} hung"));
                    continue;
                }
            }
        };
        let outcome = match result {
            Ok(w) => Outcome::Ok {
                generation: w.generation.unwrap(),
                batches: w.batch_positions.start..w.batch_positions.end,
            },
            Err(e) => sim.failed(&format!("put {ids:?}"), &e),
        };
        sim.event(
            me,
            format!(
                "{} {ids:?} -> {outcome:?}",
                if no_wait { "put_no_wait" } else { "put" }
            ),
        );
        sim.completed(&ids, outcome).await;
    }
}

async fn simulate(seed: u64) -> Run {
    let mut r = Rng::new(seed);
    let faults = WalFaults {
        seed,
        fail_before: r.below(8),
        fail_after: r.below(8),
        latency_us: r.below(2000),
        jitter_us: r.below(5000),
    };
    let seeded = Forwarding::in_memory(SeededFates {
        faults,
        touched: Mutex::new(HashMap::new()),
        on: AtomicBool::new(false),
    });
    let store = seeded.store("memory://seeded");
    let shard = Shard {
        store: store.clone(),
        id: uuid::Uuid::from_u64_pair(seed, 0x5EED),
    };
    let config = WriterConfig {
        max_memtable_batches: 2 + r.below(7) as usize,
        max_wal_persist_retries: 1 + r.below(3) as u32,
        wal_persist_retry_base_delay_ms: 1 + r.below(3),
        ..durable()
    };
    // The faults start once the writer is open (opening is not what this test is about).
    let w = shard.open(config.clone()).await;
    seeded.hooks.on.store(true, Ordering::SeqCst);
    let sim = Arc::new(Sim {
        w,
        wal: WalView {
            raw: seeded.inner.clone(),
            wal_dir: store.shard_paths(shard.id).wal_dir(),
            cache: Mutex::new(BTreeMap::new()),
        },
        start: Instant::now(),
        next_id: AtomicI32::new(0),
        poisoned: AtomicBool::new(false),
        events: Mutex::new(Vec::new()),
        violations: Mutex::new(Vec::new()),
        puts: Mutex::new(Vec::new()),
    });
    let clients = if long() { 12 } else { 4 + r.below(5) };
    let ops = if long() { 60 } else { 25 };
    let tasks: Vec<_> = (0..clients)
        .map(|c| tokio::spawn(client(sim.clone(), c, r.fork(), ops)))
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut run = Run::default();
    let ended = match tokio::time::timeout(NEVER, sim.w.flush()).await {
        Ok(Ok(())) => "flush ok".to_string(),
        Ok(Err(e)) => format!("flush {:?}", sim.failed("flush", &e)),
        Err(_) => {
            sim.violation("flush hung".into());
            "flush hung".into()
        }
    };
    if sim.poisoned.load(Ordering::SeqCst) {
        match sim.w.scan().await {
            Ok(b) => sim.violation(format!(
                "a poisoned writer served {} rows from scan",
                b.len()
            )),
            Err(e) => {
                sim.failed("scan", &e);
            }
        }
    }
    sim.w.abort().await.unwrap();
    seeded.hooks.on.store(false, Ordering::SeqCst);

    // Every put exactly once or not at all; nothing else.
    let wal = sim.wal.read().await;
    let mut seen: HashMap<i32, u64> = HashMap::new();
    for (pos, (_, rows)) in &wal {
        for id in rows {
            if let Some(other) = seen.insert(*id, *pos) {
                sim.violation(format!("row {id} is in WAL entries {other} and {pos}"));
            }
        }
    }
    let puts = std::mem::take(&mut *sim.puts.lock().unwrap());
    let put_ids: std::collections::HashSet<i32> = puts
        .iter()
        .flat_map(|(ids, _)| ids.iter().copied())
        .collect();
    for id in seen.keys() {
        if !put_ids.contains(id) {
            sim.violation(format!("row {id} is in the WAL but was never put"));
        }
    }
    for (ids, outcome) in &puts {
        let present = ids.iter().filter(|id| seen.contains_key(id)).count();
        match outcome {
            Outcome::Ok { .. } if present != ids.len() => {
                sim.violation(format!("acknowledged put {ids:?} is not in the WAL"))
            }
            Outcome::Failed { .. } if present != 0 && present != ids.len() => {
                sim.violation(format!("failed put {ids:?} is in the WAL partially"))
            }
            _ => {}
        }
    }
    let positions: Vec<u64> = wal.keys().copied().collect();
    if positions != (1..=positions.len() as u64).collect::<Vec<_>>() {
        sim.violation(format!("the WAL has holes: {positions:?}"));
    }

    // The trace: each client's events in order, the WAL, how the run ended.
    let mut events = std::mem::take(&mut *sim.events.lock().unwrap());
    events.sort_by_key(|(c, _)| *c);
    run.trace
        .extend(events.into_iter().map(|(c, e)| format!("client {c}: {e}")));
    run.trace.extend(
        wal.iter()
            .map(|(p, (epoch, ids))| format!("wal {p}: epoch {epoch} {ids:?}")),
    );
    run.trace.push(ended);
    run.violations = std::mem::take(&mut *sim.violations.lock().unwrap());
    run.poisoned = sim.poisoned.load(Ordering::SeqCst);
    let oks = puts
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Ok { .. }))
        .count();
    run.trace.push(format!(
        "{oks} of {} puts ok, {} WAL entries, {faults:?}, {config:?}",
        puts.len(),
        wal.len()
    ));
    run
}

/// Runs `seed` on a fresh current-thread runtime with paused time.
fn run_seed(seed: u64) -> Run {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(simulate(seed))
}

/// Completion cells and the flush handler keep their invariants under every seed, and a
/// seed replays to the same trace.
#[test]
fn seeded_schedules_keep_the_completion_invariants_and_replay_identically() {
    let n = if long() { 300 } else { 12 };
    let mut found = Vec::new();
    let mut distinct = std::collections::HashSet::new();
    let mut poisoned = 0;
    for seed in dst_seeds(n) {
        let first = run_seed(seed);
        let second = run_seed(seed);
        for v in &first.violations {
            found.push(format!("seed {seed}: {v}"));
        }
        if first.trace != second.trace {
            let at = first
                .trace
                .iter()
                .zip(&second.trace)
                .position(|(a, b)| a != b)
                .unwrap_or(first.trace.len().min(second.trace.len()));
            found.push(format!(
                "seed {seed}: two runs diverge at trace line {at}:\n  {:?}\n  {:?}",
                first.trace.get(at),
                second.trace.get(at)
            ));
        }
        eprintln!(
            "seed {seed}: {} trace lines; {}",
            first.trace.len(),
            first.trace.last().unwrap()
        );
        poisoned += usize::from(first.poisoned);
        distinct.insert(first.trace);
    }
    assert!(
        found.is_empty(),
        "{} violations (replay one with MEMWAL_DST_SEED=<seed> cargo test -p memwal-core --test deterministic):\n{}",
        found.len(),
        found.join("\n")
    );
    if dst_seeds(2).len() > 1 {
        assert_eq!(
            distinct.len(),
            n as usize,
            "different seeds gave the same trace"
        );
        assert!(
            0 < poisoned && poisoned < n as usize,
            "{poisoned} of {n} seeds poisoned their writer: the faults are too weak or too strong"
        );
    }
}

/// The place of the entry at `location` (`…/_mem_wal/<shard>/wal/<name>`), position `position`.
fn place_of(location: &Path, position: u64) -> EntryPlace {
    let parts: Vec<String> = location.parts().map(|p| p.as_ref().to_string()).collect();
    let shard = parts[parts.len() - 3]
        .parse()
        .expect("a shard id in a WAL entry's path");
    EntryPlace { shard, position }
}
