//! Fault injection for the object store, shared by Rust tests and JavaScript
//! (`ObjectStore.faults`).
//!
//! Compiled only with the `testing` feature (the integration tests and the Node addon turn it
//! on); a production build has the no-op controller of `no_faults.rs` in its place, so none
//! of this is in it. With the feature, [`FaultInjectingBackend`] wraps every store's backend;
//! with all faults off it forwards every call unchanged.
//!
//! Faults target WAL-entry puts (paths with a `wal` segment), the writes whose outcome
//! decides durability:
//! - `fail_wal_puts(n)`: the next `n` WAL puts fail with a transient error ("injected transient
//!   WAL put failure"); `u64::MAX` means every WAL put fails until [`Faults::recover`].
//! - `set_lost_ack(true)`: a failing WAL put *lands* before its error is returned, the ambiguous
//!   "request applied, response lost" case (`docs/durability.md`, "When a WAL append fails").
//! - `wal_put_attempts()`: how many WAL puts were attempted, failed or not.
//! - `wal_heads()`: how many HEADs probed WAL entries (tip discovery's cost).
//! - `fail_wal_syncs(n)`: the next `n` syncs of a WAL entry (its data or its directory) fail
//!   like an `fsync` returning EIO (local stores only: [`super::local::LocalStore`] consults
//!   this controller at each of its persistence points).
//! - `set_chaos(..)`: every operation (puts, gets, heads, lists) may fail before it is
//!   applied, fail after it was applied (the response is lost), and be delayed, all drawn from
//!   one seed so a failing run can be replayed.
//! - `pause_at(name)`: the next time memwal reaches the named pause point it waits until the
//!   test releases it, so a test can start a peer writer at exactly that moment. Points:
//!   `wal-append-before-put` (an entry is encoded, its PUT not yet issued),
//!   `open-before-sentinel` (a new writer claimed its epoch, its fence sentinel not yet
//!   written), `open-before-replay` (a new writer claimed its epoch and wrote its fence
//!   sentinel), `compaction-before-commit` (a compaction wrote its file, the manifest not yet
//!   updated), `compaction-reported` (a compaction committed and reported the new generation
//!   list to the writer), `generation-before-commit`
//!   (a generation file is written, the manifest not yet updated).
//! - `stall(Stall)`: the next store call that matches (by store label, [`Actor`], [`StoreOp`],
//!   [`ObjectKind`], before or after it reaches the store, skipping the first `n` matches)
//!   waits until the test releases it. Unlike a named pause point it needs no line in memwal:
//!   every call of every actor can be held (see [`super::call`]). `record_calls()` logs the
//!   calls made meanwhile, so a suite can first learn an actor's calls, then stall each.
//! - `fail(Stall, n)` and `delay(Stall, d, n)`: the next `n` matching calls fail with a
//!   transient error ("injected failure"; before the store: nothing happened; after: it did,
//!   and its answer is lost), or wait `d` first: a generation flush, a manifest commit, a
//!   reader's get, any call of any actor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectMeta, Result};

use super::backend::{Backend, FirstFree, Staged};
use super::call::{Actor, ObjectKind, StoreCall, StoreOp, When};
use super::paths::is_wal_path;
use super::splitmix64::SplitMix64;

tokio::task_local! {
    /// The actor whose work is being polled (see [`as_actor`]).
    static ACTOR: Actor;
}

/// Runs `fut` as `actor`'s work: every store call it makes is attributed to `actor`, so a
/// [`Stall`] can single it out. Scopes nest; the innermost wins. Work spawned from inside
/// runs outside the scope unless wrapped again.
pub fn as_actor<F: std::future::Future>(
    actor: Actor,
    fut: F,
) -> impl std::future::Future<Output = F::Output> {
    ACTOR.scope(actor, fut)
}

/// The actor whose work is running now: the innermost scope's, else `fallback` (the store
/// handle's own actor).
fn current_actor(fallback: Actor) -> Actor {
    ACTOR.try_with(|a| *a).unwrap_or(fallback)
}

/// Which store call a [`Faults::stall`] holds: every field left unset matches anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// Only calls through a store handle with this label (`Store::with_label`).
    pub label: Option<String>,
    /// Only calls made by this actor.
    pub actor: Option<Actor>,
    /// Only this operation.
    pub op: Option<StoreOp>,
    /// Only calls on this kind of object.
    pub kind: Option<ObjectKind>,
    /// Before the call reaches the store, or after it answered.
    pub when: When,
    /// Matching calls to let through first.
    pub skip: u64,
}

impl Stall {
    /// Holds the first call of any kind, before it reaches the store; narrow it with the
    /// other methods.
    pub fn before() -> Stall {
        Stall {
            label: None,
            actor: None,
            op: None,
            kind: None,
            when: When::Before,
            skip: 0,
        }
    }

    /// Holds the first call of any kind once the store answered it, before its caller sees the
    /// answer.
    pub fn after() -> Stall {
        Stall {
            when: When::After,
            ..Stall::before()
        }
    }

    /// Only calls through the store handle labelled `label`.
    pub fn label(mut self, label: &str) -> Stall {
        self.label = Some(label.to_string());
        self
    }

    /// Only calls made by `actor`.
    pub fn actor(mut self, actor: Actor) -> Stall {
        self.actor = Some(actor);
        self
    }

    /// Only `op` calls.
    pub fn op(mut self, op: StoreOp) -> Stall {
        self.op = Some(op);
        self
    }

    /// Only calls on objects of `kind`.
    pub fn kind(mut self, kind: ObjectKind) -> Stall {
        self.kind = Some(kind);
        self
    }

    /// Lets the first `n` matching calls through.
    pub fn skip(mut self, n: u64) -> Stall {
        self.skip = n;
        self
    }

    fn matches(&self, call: &StoreCall, when: When) -> bool {
        self.when == when
            && self
                .label
                .as_deref()
                .is_none_or(|l| call.label.as_deref() == Some(l))
            && self.actor.is_none_or(|a| a == call.actor)
            && self.op.is_none_or(|o| o == call.op)
            && self.kind.is_none_or(|k| k == call.kind)
    }
}

/// An armed [`Stall`] and what it does to the calls it matches.
#[derive(Debug)]
struct ArmedStall {
    stall: Stall,
    skip: u64,
    effect: Effect,
}

/// What an armed rule does to a call it matches.
#[derive(Debug)]
enum Effect {
    /// Holds the first one until released (then the rule is gone).
    Hold(Arc<Pause>),
    /// Fails this many more.
    Fail(u64),
    /// Delays this many more, each by the duration.
    Delay(Duration, u64),
}

/// Message of every failure injected by [`Faults::fail`] (tests match on it).
pub const INJECTED_CALL_FAILURE: &str = "injected failure";

/// Random faults on every operation (see [`Faults::set_chaos`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chaos {
    /// Seed of the deterministic generator.
    pub seed: u64,
    /// Probability that an operation fails before it is applied.
    pub fail_before: f64,
    /// Probability that a put is applied but reports an error (a lost response).
    pub fail_after: f64,
    /// Latency added to every operation.
    pub latency: Duration,
    /// Extra random latency, uniform in `[0, jitter]`.
    pub jitter: Duration,
}

#[derive(Debug)]
struct ChaosState {
    chaos: Chaos,
    rng: SplitMix64,
}

impl ChaosState {
    /// True with probability `p`: the top 53 bits of a draw as a fraction of 1.
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// One operation's fate under chaos.
#[derive(Debug, Clone, Copy, Default)]
struct Fate {
    delay: Duration,
    fail_before: bool,
    fail_after: bool,
}

/// A named pause point armed by a test.
#[derive(Debug)]
struct Pause {
    reached: tokio::sync::watch::Sender<bool>,
    released: tokio::sync::watch::Sender<bool>,
}

/// Controls an armed pause point. Dropping it releases the point.
#[derive(Debug)]
pub struct PauseHandle(Arc<Pause>);

impl PauseHandle {
    /// Resolves once memwal is waiting at the point.
    pub async fn reached(&self) {
        let mut rx = self.0.reached.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// Lets memwal continue past the point.
    pub fn release(&self) {
        self.0.released.send_replace(true);
    }
}

impl Drop for PauseHandle {
    fn drop(&mut self) {
        self.release();
    }
}

/// Switches for injected faults. All off by default. Shared by every clone of a store.
#[derive(Debug, Default)]
pub struct Faults {
    chaos: Mutex<Option<ChaosState>>,
    /// Whether `chaos` is set: a store with no fault switched on takes no lock per call.
    any_chaos: AtomicBool,
    pauses: Mutex<HashMap<String, Arc<Pause>>>,
    any_pause: AtomicBool,
    fail_wal_puts: AtomicU64,
    lost_ack: AtomicBool,
    wal_put_attempts: AtomicU64,
    wal_heads: AtomicU64,
    fail_wal_syncs: AtomicU64,
    skip_wal_syncs: AtomicU64,
    stalls: Mutex<Vec<ArmedStall>>,
    any_stall: AtomicBool,
    calls: Mutex<Option<Vec<StoreCall>>>,
    recording: AtomicBool,
}

/// Message of every injected WAL put failure (tests match on it).
pub const INJECTED_WAL_PUT_FAILURE: &str = "injected transient WAL put failure";

impl Faults {
    /// Fail the next `n` WAL-entry puts; `u64::MAX` fails all of them until [`Faults::recover`].
    pub fn fail_wal_puts(&self, n: u64) {
        self.fail_wal_puts.store(n, Ordering::SeqCst);
    }

    /// When on, a failing WAL put is applied to the store before its error is returned.
    pub fn set_lost_ack(&self, on: bool) {
        self.lost_ack.store(on, Ordering::SeqCst);
    }

    /// Fail the next `n` syncs of WAL entries (`u64::MAX`: all until [`Faults::recover`]).
    pub fn fail_wal_syncs(&self, n: u64) {
        self.fail_wal_syncs_after(0, n);
    }

    /// Let `skip` WAL syncs succeed, then fail the next `n`. A WAL entry has two syncs (its
    /// data, then its directory), so `(1, 1)` fails only the directory sync.
    pub fn fail_wal_syncs_after(&self, skip: u64, n: u64) {
        self.skip_wal_syncs.store(skip, Ordering::SeqCst);
        self.fail_wal_syncs.store(n, Ordering::SeqCst);
    }

    /// Random faults and latency on every operation, from `chaos.seed`; `None` switches
    /// them off.
    pub fn set_chaos(&self, chaos: Option<Chaos>) {
        self.any_chaos.store(chaos.is_some(), Ordering::SeqCst);
        *self.chaos.lock().unwrap_or_else(|e| e.into_inner()) = chaos.map(|c| ChaosState {
            rng: SplitMix64::new(c.seed),
            chaos: c,
        });
    }

    fn fate(&self, is_put: bool) -> Fate {
        if !self.any_chaos.load(Ordering::Relaxed) {
            return Fate::default();
        }
        let mut guard = self.chaos.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = guard.as_mut() else {
            return Fate::default();
        };
        let c = state.chaos;
        let jitter = if c.jitter.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(state.rng.next_u64() % (c.jitter.as_nanos() as u64 + 1))
        };
        let fail_before = state.chance(c.fail_before);
        let fail_after = is_put && !fail_before && state.chance(c.fail_after);
        Fate {
            delay: c.latency + jitter,
            fail_before,
            fail_after,
        }
    }

    /// Arms pause point `name` (see the module docs) for its next hit.
    pub fn pause_at(&self, name: &str) -> PauseHandle {
        let pause = Arc::new(Pause {
            reached: tokio::sync::watch::Sender::new(false),
            released: tokio::sync::watch::Sender::new(false),
        });
        self.pauses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), pause.clone());
        self.any_pause.store(true, Ordering::SeqCst);
        PauseHandle(pause)
    }

    /// Arms `stall`: the matching store call (after `stall.skip` others) waits until the
    /// returned handle is released or dropped. Several stalls may be armed at once; each holds
    /// one call.
    pub fn stall(&self, stall: Stall) -> PauseHandle {
        let pause = Arc::new(Pause {
            reached: tokio::sync::watch::Sender::new(false),
            released: tokio::sync::watch::Sender::new(false),
        });
        self.arm(stall, Effect::Hold(pause.clone()));
        PauseHandle(pause)
    }

    /// Fails the next `times` store calls that match `at` (after `at.skip` others) with a
    /// transient error, [`INJECTED_CALL_FAILURE`]: before the store, the call did not happen;
    /// after it, it did and its answer is lost. [`Faults::recover`] disarms it.
    pub fn fail(&self, at: Stall, times: u64) {
        if times > 0 {
            self.arm(at, Effect::Fail(times));
        }
    }

    /// Delays the next `times` store calls that match `at` by `delay` each (before or after the
    /// call reaches the store). [`Faults::recover`] disarms it.
    pub fn delay(&self, at: Stall, delay: Duration, times: u64) {
        if times > 0 {
            self.arm(at, Effect::Delay(delay, times));
        }
    }

    fn arm(&self, stall: Stall, effect: Effect) {
        self.stalls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ArmedStall {
                skip: stall.skip,
                stall,
                effect,
            });
        self.any_stall.store(true, Ordering::SeqCst);
    }

    /// Starts logging every store call (before it reaches the store), dropping any earlier
    /// log; [`Faults::calls`] returns it.
    pub fn record_calls(&self) {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
        self.recording.store(true, Ordering::SeqCst);
    }

    /// The calls logged since [`Faults::record_calls`] (empty if it was not called).
    pub fn calls(&self) -> Vec<StoreCall> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default()
    }

    /// Called by the store at each of its operations, before (`When::Before`) and after
    /// (`When::After`) the operation: logs the call if asked to, and applies the first armed
    /// rule that matches it (waits, fails it, or delays it).
    pub(crate) async fn store_call(
        &self,
        label: Option<&str>,
        actor: Actor,
        op: StoreOp,
        path: &Path,
        when: When,
    ) -> Result<()> {
        let recording = self.recording.load(Ordering::Relaxed);
        if !self.any_stall.load(Ordering::Relaxed) && !recording {
            return Ok(());
        }
        let call = StoreCall {
            label: label.map(str::to_string),
            actor: current_actor(actor),
            op,
            kind: ObjectKind::of(path),
            path: path.to_string(),
        };
        let effect = self.take_effect(&call, when);
        if recording
            && when == When::Before
            && let Some(log) = self
                .calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
        {
            log.push(call.clone());
        }
        match effect {
            None => Ok(()),
            Some(Effect::Hold(p)) => {
                p.reached.send_replace(true);
                let mut rx = p.released.subscribe();
                let _ = rx.wait_for(|r| *r).await;
                Ok(())
            }
            Some(Effect::Delay(d, _)) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Some(Effect::Fail(_)) => Err(object_store::Error::Generic {
                store: "faults",
                source: format!(
                    "{INJECTED_CALL_FAILURE} of a {} of {} by {} ({when:?}) at {path}",
                    call.op.name(),
                    call.kind.name(),
                    call.actor.name()
                )
                .into(),
            }),
        }
    }

    /// The effect of the first armed rule matching `call`, used up by one: a hold is removed,
    /// a failure or delay counts down and goes at zero.
    fn take_effect(&self, call: &StoreCall, when: When) -> Option<Effect> {
        let mut rules = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        let i = rules.iter_mut().position(|armed| {
            if !armed.stall.matches(call, when) {
                return false;
            }
            if armed.skip > 0 {
                armed.skip -= 1;
                return false;
            }
            true
        })?;
        let (effect, spent) = match &mut rules[i].effect {
            Effect::Hold(p) => (Effect::Hold(p.clone()), true),
            Effect::Fail(n) => {
                *n -= 1;
                (Effect::Fail(*n), *n == 0)
            }
            Effect::Delay(d, n) => {
                *n -= 1;
                (Effect::Delay(*d, *n), *n == 0)
            }
        };
        if spent {
            rules.remove(i);
        }
        Some(effect)
    }

    /// Called by memwal at pause point `name`: waits there if a test armed it.
    pub(crate) async fn pause_point(&self, name: &str) {
        if !self.any_pause.load(Ordering::Relaxed) {
            return;
        }
        let pause = self
            .pauses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        if let Some(p) = pause {
            p.reached.send_replace(true);
            let mut rx = p.released.subscribe();
            let _ = rx.wait_for(|r| *r).await;
        }
    }

    /// [`Faults::pause_point`] for code on a blocking thread (the segment-log WAL's file I/O),
    /// which holds the thread while it waits.
    pub(crate) fn pause_point_blocking(&self, name: &str) {
        if self.any_pause.load(Ordering::Relaxed) {
            futures::executor::block_on(self.pause_point(name));
        }
    }

    /// Switches every fault off, armed failures and delays included (attempt counters keep
    /// counting; armed stalls stay until released).
    pub fn recover(&self) {
        self.set_chaos(None);
        self.stalls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|armed| matches!(armed.effect, Effect::Hold(_)));
        self.fail_wal_puts.store(0, Ordering::SeqCst);
        self.lost_ack.store(false, Ordering::SeqCst);
        self.fail_wal_syncs.store(0, Ordering::SeqCst);
        self.skip_wal_syncs.store(0, Ordering::SeqCst);
    }

    /// Decides whether this WAL sync fails.
    pub(crate) fn take_wal_sync_failure(&self) -> bool {
        if self.fail_wal_syncs.load(Ordering::SeqCst) == 0 || take_one(&self.skip_wal_syncs) {
            return false;
        }
        take_one(&self.fail_wal_syncs)
    }

    /// WAL-entry puts attempted through this store so far.
    pub fn wal_put_attempts(&self) -> u64 {
        self.wal_put_attempts.load(Ordering::SeqCst)
    }

    /// HEADs of WAL entries issued through this store so far.
    pub fn wal_heads(&self) -> u64 {
        self.wal_heads.load(Ordering::SeqCst)
    }

    /// Counts one WAL put attempt and decides whether it fails.
    fn take_wal_put_failure(&self) -> bool {
        self.wal_put_attempts.fetch_add(1, Ordering::SeqCst);
        take_one(&self.fail_wal_puts)
    }
}

/// Consumes one unit of a "fail the next n" counter (`u64::MAX` never runs out).
fn take_one(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            0 => None,
            u64::MAX => Some(u64::MAX),
            n => Some(n - 1),
        })
        .is_ok()
}

fn chaos_error(path: &Path, when: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "faults",
        source: format!("injected chaos failure ({when}) at {path}").into(),
    }
}

fn injected(path: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "faults",
        source: format!("{INJECTED_WAL_PUT_FAILURE} at {path}").into(),
    }
}

/// A [`Backend`] that forwards to `inner`, injecting the faults switched on in [`Faults`].
#[derive(Debug)]
pub struct FaultInjectingBackend {
    inner: Arc<dyn Backend>,
    faults: Arc<Faults>,
}

impl FaultInjectingBackend {
    /// Wraps `inner`; faults are controlled through `faults`.
    pub fn new(inner: Arc<dyn Backend>, faults: Arc<Faults>) -> Self {
        FaultInjectingBackend { inner, faults }
    }

    /// Applies chaos before an operation; `Err` if it fails before being applied.
    async fn before(&self, path: &Path, is_put: bool) -> Result<Fate> {
        let fate = self.faults.fate(is_put);
        if !fate.delay.is_zero() {
            tokio::time::sleep(fate.delay).await;
        }
        if fate.fail_before {
            return Err(chaos_error(path, "before apply"));
        }
        Ok(fate)
    }
}

#[async_trait]
impl Backend for FaultInjectingBackend {
    async fn create(&self, paths: &[Path], data: &Staged, prepare_next: bool) -> Result<FirstFree> {
        let Some(path) = paths.first() else {
            return self.inner.create(paths, data, prepare_next).await;
        };
        let fate = self.before(path, true).await?;
        if fate.fail_after {
            let _ = self.inner.create(paths, data, prepare_next).await;
            return Err(chaos_error(path, "after apply, response lost"));
        }
        if is_wal_path(path) && self.faults.take_wal_put_failure() {
            if self.faults.lost_ack.load(Ordering::SeqCst) {
                // Ignore the outcome: the caller must see an error either way.
                let _ = self.inner.create(paths, data, prepare_next).await;
            }
            return Err(injected(path));
        }
        self.inner.create(paths, data, prepare_next).await
    }

    async fn stage(&self, near: &Path, data: Bytes) -> Result<Staged> {
        self.inner.stage(near, data).await
    }

    async fn get(&self, path: &Path) -> Result<Option<Bytes>> {
        self.before(path, false).await?;
        self.inner.get(path).await
    }

    async fn head(&self, path: &Path) -> Result<bool> {
        if is_wal_path(path) {
            self.faults.wal_heads.fetch_add(1, Ordering::SeqCst);
        }
        self.before(path, false).await?;
        self.inner.head(path).await
    }

    async fn list(&self, prefix: &Path) -> Result<Vec<ObjectMeta>> {
        self.inner.list(prefix).await
    }

    async fn list_dirs(&self, prefix: &Path) -> Result<Vec<Path>> {
        self.before(prefix, false).await?;
        self.inner.list_dirs(prefix).await
    }

    async fn overwrite(&self, path: &Path, data: Bytes) -> Result<()> {
        let fate = self.before(path, true).await?;
        if fate.fail_after {
            let _ = self.inner.overwrite(path, data).await;
            return Err(chaos_error(path, "after apply, response lost"));
        }
        self.inner.overwrite(path, data).await
    }

    async fn delete(&self, path: &Path) -> Result<()> {
        self.inner.delete(path).await
    }

    async fn make_durable(&self, paths: &[Path]) -> Result<()> {
        self.inner.make_durable(paths).await
    }

    fn local_files(&self) -> Option<super::backend::LocalFiles> {
        self.inner.local_files()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::object::ObjectBackend;
    use object_store::memory::InMemory;

    fn store() -> (FaultInjectingBackend, Arc<Faults>) {
        let faults = Arc::new(Faults::default());
        let inner = Arc::new(ObjectBackend(Arc::new(InMemory::new())));
        (FaultInjectingBackend::new(inner, faults.clone()), faults)
    }

    async fn create(s: &FaultInjectingBackend, path: &str) -> Result<FirstFree> {
        let data = Staged::bytes(Bytes::from_static(b"a"));
        s.create(&[Path::from(path)], &data, false).await
    }

    #[tokio::test]
    async fn fails_exactly_n_wal_puts_and_counts_attempts() {
        let (s, f) = store();
        f.fail_wal_puts(2);
        let p = "_mem_wal/x/wal/1.arrow";
        for _ in 0..2 {
            let e = create(&s, p).await.unwrap_err();
            assert!(e.to_string().contains(INJECTED_WAL_PUT_FAILURE));
        }
        assert_eq!(create(&s, p).await.unwrap(), FirstFree::Created(0));
        assert_eq!(f.wal_put_attempts(), 3);
        // Non-WAL paths are never failed nor counted.
        f.fail_wal_puts(u64::MAX);
        create(&s, "_mem_wal/x/manifest/1.binpb").await.unwrap();
        assert_eq!(f.wal_put_attempts(), 3);
        for _ in 0..5 {
            assert!(create(&s, "_mem_wal/x/wal/2.arrow").await.is_err());
        }
        f.recover();
        create(&s, "_mem_wal/x/wal/2.arrow").await.unwrap();
    }

    #[tokio::test]
    async fn lost_ack_lands_the_write_and_returns_an_error() {
        let (s, f) = store();
        f.set_lost_ack(true);
        f.fail_wal_puts(1);
        let p = "_mem_wal/x/wal/1.arrow";
        assert!(create(&s, p).await.is_err());
        assert!(s.head(&Path::from(p)).await.unwrap());
        assert_eq!(create(&s, p).await.unwrap(), FirstFree::Taken(1));
    }
}
