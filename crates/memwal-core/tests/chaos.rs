//! Acknowledged puts survive a failing object store. Every get, head, put and list may fail
//! before it is applied, a put may be applied and then report an error (its response is lost),
//! and every operation is delayed by a seeded latency plus jitter (`Faults::set_chaos`).
//! Writers, durable and not, with frequent rotations and store retries, run several sessions
//! (open, concurrent puts, seals and flushes, then close or crash) on one shard. Every outcome is recorded; then the
//! chaos stops, the shard is reopened, and the history is checked:
//! - every acknowledged durable put (and every non-durable one made durable by `flush` or
//!   `close`) is present exactly once;
//! - every failed put is absent or whole (all-or-nothing, its rows contiguous and in order);
//! - no duplicates, no row that was never put, and puts acknowledged before another was
//!   invoked come first;
//! - ambiguous creates (a WAL append, a manifest version, a generation file whose response was
//!   lost) are resolved: no writer is ever fenced by its own write (`PeerClaimedEpoch` with one
//!   writer at a time), nothing is duplicated, the WAL has no hole;
//! - once a writer is poisoned, every later put fails and `scan` rejects (no rows that are not
//!   durable are served); errors are typed.
//!
//! The in-memory runs use paused Tokio time on one thread (fast; latency costs nothing), the
//! local-store run real time. A failing seed is printed with the command that reruns it: the
//! same faults and workload (the interleaving with Parquet encoding on the blocking pool can
//! differ slightly; `deterministic.rs` is the exactly replayable simulation).
//!
//! CI (12 seeds in memory, 1 on disk, 3 sessions each; a few seconds):
//!   cargo test -p memwal-core --test chaos
//! Long (300 seeds in memory, 8 on disk, 5 sessions of 4x more operations; ~5 min release):
//!   MEMWAL_CHAOS_LONG=1 cargo test -p memwal-core --release --test chaos
//! One seed:
//!   MEMWAL_CHAOS_SEED=<seed> cargo test -p memwal-core --test chaos

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use async_trait::async_trait;
use memwal_core::store::faults::Chaos;
use memwal_core::{Error, ErrorCode, FenceReason, ShardReader, ShardWriter, WriterConfig};
use object_store::{GetResult, ObjectStore};
use support::forwarding::{Forwarding, Get, Hooks, StoreResult, injected, is_wal};
use support::seeded::{Rng, seeds};
use support::*;

fn long() -> bool {
    long_run("MEMWAL_CHAOS_LONG")
}

/// The seeds to run: `MEMWAL_CHAOS_SEED`, or `n` seeds from `base` on.
fn chaos_seeds(base: u64, n: u64) -> Vec<u64> {
    seeds("MEMWAL_CHAOS_SEED", base..base + n)
}

#[derive(Debug, Clone)]
enum Outcome {
    Ok,
    Failed(Error),
    /// Still pending after `HANG` (itself a violation); its rows may or may not be there.
    Hung,
}

#[derive(Debug)]
struct PutRecord {
    ids: Vec<i32>,
    durable: bool,
    session: usize,
    /// History sequence numbers: when the put was invoked and when it returned.
    invoke: u64,
    done: u64,
    outcome: Outcome,
}

#[derive(Debug, Default)]
struct Counts {
    ok: usize,
    failed: usize,
    open_retries: usize,
    starved_opens: usize,
    poisoned_sessions: usize,
    closes_ok: usize,
    /// Failed puts by the kind of failure that poisoned their writer.
    failures: BTreeMap<&'static str, usize>,
}

/// What made a writer fail a put, from the message of the (latched) error.
fn kind_of(e: &Error) -> &'static str {
    let m = e.to_string();
    [
        (
            "was taken after a failed PUT",
            "slot taken after a failed put",
        ),
        ("after", "WAL put retries exhausted"),
        ("flushing generation", "generation flush failed"),
        ("sync", "sync failed"),
    ]
    .into_iter()
    .find(|(needle, _)| m.contains(needle))
    .map_or("other", |(_, kind)| kind)
}

/// The recorded history of one seed.
#[derive(Default)]
struct History {
    seq: AtomicU64,
    next_id: AtomicI32,
    puts: Mutex<Vec<PutRecord>>,
    /// Ids made durable by a successful `flush` or `close`.
    required: Mutex<BTreeSet<i32>>,
    violations: Mutex<Vec<String>>,
    /// Sequence number at which the current session first saw a fence error.
    first_fence: AtomicU64,
}

impl History {
    fn tick(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    fn violation(&self, v: String) {
        self.violations.lock().unwrap().push(v);
    }

    fn saw_fence(&self, at: u64) {
        self.first_fence.fetch_min(at, Ordering::SeqCst);
    }

    /// Checks that `e` is a fence of this writer's own making (never `PeerClaimedEpoch`: only
    /// one writer exists at a time, so that would be a writer fenced by its own write).
    /// A slot taken after our failed put can only hold our own write (one writer at a time):
    /// reporting it as a fence means an ambiguous create was left unresolved.
    fn expect_persistence_failure(&self, what: &str, e: &Error) {
        if e.fence_reason() != Some(FenceReason::PersistenceFailure) {
            self.violation(format!(
                "{what} failed with {:?}/{:?} instead of a PersistenceFailure fence: {e}",
                e.code(),
                e.fence_reason()
            ));
        } else if e.to_string().contains("taken after a failed PUT") {
            self.violation(format!(
                "{what}: the writer fenced itself over its own lost acknowledgement: {e}"
            ));
        }
    }

    /// Every non-durable put of `session` that returned before sequence `before` is durable.
    fn require_acked_before(&self, session: usize, before: u64) {
        let puts = self.puts.lock().unwrap();
        let mut required = self.required.lock().unwrap();
        for p in puts.iter() {
            if p.session == session && p.done < before && matches!(p.outcome, Outcome::Ok) {
                required.extend(p.ids.iter().copied());
            }
        }
    }
}

/// One seed's store faults and workload shape.
#[derive(Debug, Clone, Copy)]
struct Plan {
    chaos: Chaos,
    sessions: usize,
    clients: u64,
    ops_per_client: u64,
}

fn plan(seed: u64) -> Plan {
    let mut r = Rng::new(seed);
    let mut fail_before = r.pick(&[0.0, 0.01, 0.03, 0.08]);
    let fail_after = r.pick(&[0.0, 0.01, 0.03, 0.08]);
    if fail_before == 0.0 && fail_after == 0.0 {
        fail_before = 0.03;
    }
    Plan {
        chaos: Chaos {
            seed,
            fail_before,
            fail_after,
            latency: Duration::from_micros(r.below(1500)),
            jitter: Duration::from_micros(r.below(3000)),
        },
        sessions: if long() { 5 } else { 3 },
        clients: 3 + r.below(6),
        ops_per_client: if long() { 60 } else { 15 },
    }
}

fn session_config(r: &mut Rng, durable: bool) -> WriterConfig {
    WriterConfig {
        durable_write: durable,
        max_wal_flush_interval_ms: if durable {
            None
        } else {
            Some(r.pick(&[2, 10, 50]))
        },
        max_wal_buffer_size: r.pick(&[0, 512, 4096]),
        max_memtable_batches: r.pick(&[2, 4, 16]) as usize,
        max_memtable_size: r.pick(&[1500, 8 << 10, 1 << 20]),
        max_unflushed_memtable_bytes: r.pick(&[16 << 10, 1 << 30]),
        max_wal_persist_retries: r.pick(&[0, 1, 3, 3, 5]),
        wal_persist_retry_base_delay_ms: 1,
        ..WriterConfig::default()
    }
}

/// A put of 1-2 batches of 1-3 rows with fresh ids.
fn next_put(r: &mut Rng, h: &History) -> (Vec<RecordBatch>, Vec<i32>) {
    let mut batches = Vec::new();
    let mut all = Vec::new();
    for _ in 0..1 + r.below(2) {
        let n = 1 + r.below(3) as i32;
        let start = h.next_id.fetch_add(n, Ordering::SeqCst);
        batches.push(rows(start, n as usize));
        all.extend(start..start + n);
    }
    (batches, all)
}

/// Longer than any call may take (virtual time in memory, real time on disk): a call still
/// pending then is reported as hung.
const HANG: Duration = Duration::from_secs(120);

/// `fut`'s output, or `None` (and a violation) if it hangs.
async fn in_time<T>(
    h: &History,
    what: &str,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    match tokio::time::timeout(HANG, fut).await {
        Ok(v) => Some(v),
        Err(_) => {
            h.violation(format!("{what} hung for {HANG:?}"));
            None
        }
    }
}

/// One client of a session: puts, and now and then a seal or a flush.
async fn client(w: Arc<ShardWriter>, h: Arc<History>, mut r: Rng, session: usize, ops: u64) {
    for _ in 0..ops {
        tokio::time::sleep(Duration::from_micros(r.below(2000))).await;
        let dice = r.below(100);
        if dice < 6 {
            let Some(sealed) = in_time(&h, "force_seal_active", w.force_seal_active()).await else {
                return;
            };
            if let Err(e) = sealed {
                // Reading the manifest can fail transiently; a fence is this writer's own.
                if e.code() != ErrorCode::Io {
                    h.expect_persistence_failure("force_seal_active", &e);
                    h.saw_fence(h.tick());
                }
            }
            continue;
        }
        if dice < 10 {
            let start = h.tick();
            let Some(flushed) = in_time(&h, "flush", w.flush()).await else {
                return;
            };
            match flushed {
                Ok(()) => h.require_acked_before(session, start),
                Err(e) => {
                    h.expect_persistence_failure("flush", &e);
                    h.saw_fence(h.tick());
                }
            }
            continue;
        }
        let (batches, ids) = next_put(&mut r, &h);
        let invoke = h.tick();
        let result = in_time(&h, &format!("put {ids:?}"), w.put(batches)).await;
        let done = h.tick();
        let hung = result.is_none();
        let outcome = match result {
            None => Outcome::Hung,
            Some(Ok(_)) => Outcome::Ok,
            Some(Err(e)) => {
                h.expect_persistence_failure(&format!("put {ids:?}"), &e);
                h.saw_fence(done);
                Outcome::Failed(e)
            }
        };
        h.puts.lock().unwrap().push(PutRecord {
            ids,
            durable: false,
            session,
            invoke,
            done,
            outcome,
        });
        if hung {
            return;
        }
    }
}

/// Opens a writer, retrying opens that the chaos failed (they must fail with `Io`).
///
/// memwal does not retry reads: one failed GET among the hundreds that replaying a long WAL
/// takes fails the open, and every failed open leaves a claimed epoch and a fence sentinel
/// behind, so the WAL grows with each attempt. That is an availability limit, not a
/// correctness one (the failure is loud, nothing is lost), so after `OPEN_ATTEMPTS` the open
/// runs without chaos (counted as starved) and the chaos resumes afterwards.
async fn open_under_chaos(
    backend: &Backend,
    shard: &Shard,
    config: &WriterConfig,
    chaos: Chaos,
    h: &History,
    counts: &mut Counts,
) -> Option<ShardWriter> {
    const OPEN_ATTEMPTS: usize = 20;
    for attempt in 0..=OPEN_ATTEMPTS {
        if attempt == OPEN_ATTEMPTS {
            counts.starved_opens += 1;
            backend.store.faults().set_chaos(None);
        }
        let opened = shard.try_open(config.clone()).await;
        backend.store.faults().set_chaos(Some(Chaos {
            seed: chaos.seed.wrapping_add(h.tick() << 32),
            ..chaos
        }));
        match opened {
            Ok(w) => return Some(w),
            Err(e) if e.code() == ErrorCode::Io && attempt < OPEN_ATTEMPTS => {
                counts.open_retries += 1
            }
            Err(e) => {
                h.violation(format!("open failed with {:?}: {e}", e.code()));
                return None;
            }
        }
    }
    unreachable!()
}

/// Runs one seed on `backend`; returns the violations found.
async fn run_seed(backend: &Backend, seed: u64) -> Vec<String> {
    let p = plan(seed);
    let mut r = Rng::new(seed ^ 0x5EED);
    let h = Arc::new(History::default());
    let mut counts = Counts::default();
    let shard = Shard::new(&backend.store);
    backend.store.faults().set_chaos(Some(p.chaos));
    for session in 0..p.sessions {
        let durable = r.chance(60);
        let config = session_config(&mut r, durable);
        let Some(w) = open_under_chaos(backend, &shard, &config, p.chaos, &h, &mut counts).await
        else {
            break;
        };
        let w = Arc::new(w);
        h.first_fence.store(u64::MAX, Ordering::SeqCst);
        let first_put = h.puts.lock().unwrap().len();
        let clients: Vec<_> = (0..p.clients)
            .map(|_| {
                tokio::spawn(client(
                    w.clone(),
                    h.clone(),
                    r.fork(),
                    session,
                    p.ops_per_client,
                ))
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        {
            let mut puts = h.puts.lock().unwrap();
            for put in &mut puts[first_put..] {
                put.durable = durable;
            }
        }
        // A poisoned writer fails every put invoked after the fence was seen, and serves no
        // rows at all (some of them may not be durable).
        let fence = h.first_fence.load(Ordering::SeqCst);
        if fence != u64::MAX {
            counts.poisoned_sessions += 1;
            for put in &h.puts.lock().unwrap()[first_put..] {
                if put.invoke > fence && matches!(put.outcome, Outcome::Ok) {
                    h.violation(format!(
                        "put {:?} invoked after the writer was poisoned succeeded",
                        put.ids
                    ));
                }
            }
            match w.scan().await {
                Ok(b) => h.violation(format!(
                    "a poisoned writer served {} rows from scan",
                    ids(&b).len()
                )),
                Err(e) => h.expect_persistence_failure("scan of a poisoned writer", &e),
            }
            match w.put(vec![batch([-1])]).await {
                Ok(_) => h.violation("a poisoned writer accepted a put".into()),
                Err(e) => h.expect_persistence_failure("put after poisoning", &e),
            }
        }
        if r.chance(50) {
            let start = h.tick();
            let Some(closed) = in_time(&h, "close", w.close()).await else {
                break;
            };
            match closed {
                Ok(()) => {
                    counts.closes_ok += 1;
                    h.require_acked_before(session, start);
                }
                Err(e) if e.code() == ErrorCode::Io => {}
                Err(e) => h.expect_persistence_failure("close", &e),
            }
        } else {
            w.abort().await.unwrap();
        }
    }
    backend.store.faults().recover();

    // Recovery with a healthy store.
    let w = match shard.try_open(durable()).await {
        Ok(w) => w,
        Err(e) => {
            let mut v = h.violations.lock().unwrap().clone();
            v.push(format!("reopen without chaos failed: {e}"));
            return v;
        }
    };
    let got = ids(&w.scan().await.unwrap());
    w.close().await.unwrap();
    let reader = ShardReader::open(backend.store.clone(), shard.id)
        .await
        .unwrap();
    let read = ids(&reader.scan().await.unwrap().batches);
    if read != got {
        h.violation(format!(
            "the reader recovered {} rows, the writer {}",
            read.len(),
            got.len()
        ));
    }
    let manifest = shard.manifest().await;
    let gens: Vec<u64> = manifest
        .flushed_generations
        .iter()
        .map(|g| g.generation)
        .collect();
    if gens.windows(2).any(|w| w[0] >= w[1]) {
        h.violation(format!(
            "flushed generations listed twice or out of order: {gens:?}"
        ));
    }
    let tailer = shard.tailer().await;
    let tip = tailer.next_position().await.unwrap();
    for pos in 1..tip {
        if tailer.read(pos).await.unwrap().is_none() {
            h.violation(format!("hole at WAL position {pos} below the tip {tip}"));
        }
    }

    let puts = std::mem::take(&mut *h.puts.lock().unwrap());
    for put in &puts {
        match &put.outcome {
            Outcome::Ok => counts.ok += 1,
            Outcome::Failed(e) => {
                counts.failed += 1;
                *counts.failures.entry(kind_of(e)).or_default() += 1;
            }
            Outcome::Hung => counts.failed += 1,
        }
    }
    let mut v = std::mem::take(&mut *h.violations.lock().unwrap());
    let required = h.required.lock().unwrap().clone();
    v.extend(check_history(&puts, &required, &got));
    if !v.is_empty() {
        v.insert(
            0,
            format!(
                "{} seed {seed} ({p:?}; {counts:?}); replay with MEMWAL_CHAOS_SEED={seed} cargo test -p memwal-core --test chaos",
                backend.name
            ),
        );
    }
    eprintln!("{} seed {seed}: {counts:?}", backend.name);
    v
}

/// The violations of the history of `puts` by the recovered rows `got`.
fn check_history(puts: &[PutRecord], required: &BTreeSet<i32>, got: &[i32]) -> Vec<String> {
    let mut v = Vec::new();
    let mut position: HashMap<i32, usize> = HashMap::new();
    for (i, id) in got.iter().enumerate() {
        if position.insert(*id, i).is_some() {
            v.push(format!("row {id} recovered twice"));
        }
    }
    let put_of: HashMap<i32, usize> = puts
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.ids.iter().map(move |id| (*id, i)))
        .collect();
    for id in got {
        if !put_of.contains_key(id) {
            v.push(format!("row {id} was never put"));
        }
    }
    for id in required {
        if !position.contains_key(id) {
            v.push(format!(
                "row {id} was made durable by flush or close, and is lost"
            ));
        }
    }
    // Present puts, with the position of their first row.
    let mut present: Vec<(&PutRecord, usize)> = Vec::new();
    for p in puts {
        let at: Vec<Option<usize>> = p.ids.iter().map(|id| position.get(id).copied()).collect();
        let n = at.iter().flatten().count();
        if n == 0 {
            if p.durable && matches!(p.outcome, Outcome::Ok) {
                v.push(format!("acknowledged durable put {:?} is lost", p.ids));
            }
            continue;
        }
        if n != at.len() {
            v.push(format!(
                "put {:?} recovered partially: {at:?} ({:?})",
                p.ids, p.outcome
            ));
            continue;
        }
        let first = at[0].unwrap();
        if at.iter().enumerate().any(|(k, a)| *a != Some(first + k)) {
            v.push(format!(
                "put {:?} is not contiguous and in order: {at:?}",
                p.ids
            ));
        }
        present.push((p, first));
    }
    // Real-time order: a put that returned before another was invoked precedes it.
    let mut by_done: Vec<&(&PutRecord, usize)> = present.iter().collect();
    by_done.sort_by_key(|(p, _)| p.done);
    let mut by_invoke: Vec<&(&PutRecord, usize)> = present.iter().collect();
    by_invoke.sort_by_key(|(p, _)| p.invoke);
    let mut k = 0;
    let mut latest: Option<(usize, &PutRecord)> = None;
    for (b, b_at) in by_invoke {
        while k < by_done.len() && by_done[k].0.done < b.invoke {
            let (a, a_at) = by_done[k];
            if latest.is_none_or(|(at, _)| *a_at > at) {
                latest = Some((*a_at, a));
            }
            k += 1;
        }
        if let Some((a_at, a)) = latest
            && a_at > *b_at
        {
            v.push(format!(
                "put {:?} returned before put {:?} was invoked but is recovered after it",
                a.ids, b.ids
            ));
        }
    }
    v
}

/// Runs `n` seeds from `base` on (or `MEMWAL_CHAOS_SEED`), each on a fresh backend from
/// `backend`, and fails listing every violation found.
async fn acknowledged_puts_survive(backend: fn() -> Backend, base: u64, n: u64) {
    let mut found = Vec::new();
    for seed in chaos_seeds(base, n) {
        found.extend(run_seed(&backend(), seed).await);
    }
    assert_no_violations(found);
}

/// In memory, on one thread with paused time, many seeds of faults and latency.
#[tokio::test(start_paused = true)]
async fn acknowledged_puts_survive_a_failing_store_in_memory() {
    acknowledged_puts_survive(Backend::memory, 1, if long() { 300 } else { 12 }).await;
}

/// The same on the local store (real files, fsync, real time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_puts_survive_a_failing_local_store() {
    acknowledged_puts_survive(Backend::local, 10_001, if long() { 8 } else { 1 }).await;
}

/// The history checker itself reports each kind of violation (so a clean run means
/// something).
#[test]
fn the_history_checker_finds_each_kind_of_violation() {
    let put = |ids: Vec<i32>, invoke, done, ok: bool| PutRecord {
        ids,
        durable: true,
        session: 0,
        invoke,
        done,
        outcome: if ok {
            Outcome::Ok
        } else {
            Outcome::Failed(Error::InvalidArgument {
                message: "x".into(),
            })
        },
    };
    let puts = vec![
        put(vec![1, 2], 0, 1, true),
        put(vec![3, 4], 2, 3, false),
        put(vec![5], 4, 5, true),
    ];
    let none = BTreeSet::new();
    assert!(check_history(&puts, &none, &[1, 2, 3, 4, 5]).is_empty());
    assert!(check_history(&puts, &none, &[1, 2, 5]).is_empty());
    let cases: &[(&[i32], &str)] = &[
        (&[1, 2], "acknowledged durable put [5] is lost"),
        (&[1, 2, 3, 5], "recovered partially"),
        (&[1, 2, 5, 5], "recovered twice"),
        (&[1, 2, 5, 9], "never put"),
        (&[2, 1, 5], "not contiguous and in order"),
        (&[5, 1, 2], "returned before put [5] was invoked"),
    ];
    for (got, want) in cases {
        let v = check_history(&puts, &none, got);
        assert!(v.iter().any(|s| s.contains(want)), "{got:?}: {v:?}");
    }
    let required = BTreeSet::from([3]);
    let v = check_history(&puts, &required, &[1, 2, 5]);
    assert!(
        v.iter().any(|s| s.contains("row 3 was made durable")),
        "{v:?}"
    );
}

/// Fails the next `n` reads of WAL entries (set `n` with `.0.store(n)`).
#[derive(Default)]
struct FailWalReads(AtomicU64);

#[async_trait]
impl Hooks for FailWalReads {
    async fn get(&self, inner: &dyn ObjectStore, get: Get<'_>) -> StoreResult<GetResult> {
        if is_wal(get.location)
            && self
                .0
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(injected(
                "flaky",
                format!("injected read failure at {}", get.location),
            ));
        }
        get.forward(inner).await
    }
}

/// A WAL append whose response was lost is resolved by reading the slot back; when that read fails
/// too, the append retries the read instead of fencing the writer over its own write (Lance's
/// MemWAL reports a retry that finds its slot taken as `PersistenceFailure`; memwal resolves it by
/// content: `docs/durability.md`, "When a WAL append fails").
#[tokio::test(start_paused = true)]
async fn a_lost_ack_whose_read_back_fails_is_retried_not_fenced() {
    let flaky = Forwarding::in_memory(FailWalReads::default());
    let store = flaky.store("flaky");
    let shard = Shard::new(&store);
    let w = shard.open_and_put(durable(), [batch([0])]).await;
    // The next WAL put lands but reports an error; the retry finds the slot taken, and the
    // first two reads of it fail.
    store.faults().set_lost_ack(true);
    store.faults().fail_wal_puts(1);
    flaky.hooks.0.store(2, Ordering::SeqCst);
    w.put(vec![batch([1, 2])]).await.unwrap();
    assert_eq!(flaky.hooks.0.load(Ordering::SeqCst), 0, "reads were failed");
    w.put(vec![batch([3])]).await.unwrap();
    w.abort().await.unwrap();
    shard.assert_recovered([0, 1, 2, 3]).await;
    let entries = shard.wal_len().await;
    assert_eq!(entries, 3, "the lost-ack entry was not written twice");
}
