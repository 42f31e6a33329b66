//! `NativeObjectStore`: a core [`memwal_core::Store`] plus its fault controller, and
//! `NativeStoreStall`, one armed [`Stall`] of that controller.

use std::collections::HashMap;
use std::sync::Arc;

use memwal_core::store::call::{Actor, ObjectKind, StoreOp, When};
use memwal_core::store::faults::{PauseHandle, Stall};
use memwal_core::{ShardRef, Store};
use napi::Status;
use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::error::{IntoNapi, invalid};
use crate::gc::{NativeGcOptions, NativeGcReport, gc_options};

/// Handle on an object store (a local directory, an in-memory store, or a URI).
#[napi]
pub struct NativeObjectStore {
    pub(crate) inner: Store,
}

#[napi]
impl NativeObjectStore {
    /// A local directory (created on first write), with fsync of files and directories.
    #[napi(factory, catch_unwind)]
    pub fn local(dir: String) -> napi::Result<Self> {
        Ok(NativeObjectStore {
            inner: Store::local(dir).napi()?,
        })
    }

    /// A fresh, private in-memory store.
    #[napi(factory, catch_unwind)]
    pub fn memory() -> Self {
        NativeObjectStore {
            inner: Store::memory(),
        }
    }

    /// `file:///abs/path`, `memory://NAME` (shared in-process), a plain local path, or
    /// `s3://`, `gs://`, `az://` with `storage` options (object_store keys, snake_case or
    /// camelCase, values as strings: `lib/store.ts` has type-checked them).
    #[napi(factory, catch_unwind)]
    pub fn from_uri(uri: String, storage: Option<HashMap<String, String>>) -> napi::Result<Self> {
        let mut options: Vec<(String, String)> = storage.unwrap_or_default().into_iter().collect();
        options.sort();
        Ok(NativeObjectStore {
            inner: Store::from_uri_with(&uri, &options).napi()?,
        })
    }

    /// Forgets the in-process store `memory://NAME`; returns whether there was one.
    #[napi(catch_unwind)]
    pub fn drop_memory_store(name: String) -> bool {
        Store::drop_named_memory(&name)
    }

    /// Where the store lives.
    #[napi(getter)]
    pub fn location(&self) -> String {
        self.inner.location().to_string()
    }

    /// Fail the next `n` WAL-entry puts (`Infinity`: all of them until `recover()`).
    #[napi(catch_unwind)]
    pub fn fail_wal_puts(&self, n: f64) -> napi::Result<()> {
        let n = if n == f64::INFINITY {
            u64::MAX
        } else if n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n < 9.007e15 {
            n as u64
        } else {
            return Err(invalid(format!(
                "failWalPuts(n): n must be a non-negative integer or Infinity, got {n}"
            )));
        };
        self.inner.faults().fail_wal_puts(n);
        Ok(())
    }

    /// When on, a failing WAL put lands before its error is returned (a lost acknowledgement).
    #[napi(catch_unwind)]
    pub fn set_lost_ack(&self, on: bool) {
        self.inner.faults().set_lost_ack(on);
    }

    /// Switches every fault off.
    #[napi(catch_unwind)]
    pub fn recover(&self) {
        self.inner.faults().recover();
    }

    /// WAL-entry puts attempted through this store so far.
    #[napi(catch_unwind)]
    pub fn wal_put_attempts(&self) -> f64 {
        self.inner.faults().wal_put_attempts() as f64
    }

    /// Arms a stall of the next matching store call (names as `memwal_core::store::call`
    /// spells them); `on_reached` is called once that call is held.
    #[napi(catch_unwind)]
    pub fn stall(
        &self,
        spec: NativeStallSpec,
        on_reached: Function<(), ()>,
    ) -> napi::Result<NativeStoreStall> {
        let stall = matcher("stall", &spec)?;
        let on_reached: ReachedCallback = on_reached
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        let handle = Arc::new(self.inner.faults().stall(stall));
        let watched = handle.clone();
        // Holds `watched` until the call is reached, so a StoreStall collected before then
        // still holds its call (released once this handle and the StoreStall's are both gone);
        // a stall never reached leaves this task pending, which keeps nothing else alive.
        napi::bindgen_prelude::spawn(async move {
            watched.reached().await;
            // Fails only while the environment is torn down, when no one is left to tell.
            let _ = on_reached.call((), ThreadsafeFunctionCallMode::NonBlocking);
        });
        Ok(NativeStoreStall { handle })
    }

    /// Fails the next `times` matching store calls with a transient injected error (before
    /// the store: nothing happened; after: it did, and its answer is lost).
    #[napi(catch_unwind)]
    pub fn fail(&self, spec: NativeStallSpec, times: f64) -> napi::Result<()> {
        let at = matcher("fail", &spec)?;
        self.inner.faults().fail(at, count("fail", "times", times)?);
        Ok(())
    }

    /// Delays the next `times` matching store calls by `ms` milliseconds each.
    #[napi(catch_unwind)]
    pub fn delay(&self, spec: NativeStallSpec, ms: f64, times: f64) -> napi::Result<()> {
        let at = matcher("delay", &spec)?;
        let ms = count("delay", "ms", ms)?;
        let times = count("delay", "times", times)?;
        self.inner
            .faults()
            .delay(at, std::time::Duration::from_millis(ms), times);
        Ok(())
    }

    /// Starts logging every store call through this store's fault controller (dropping any
    /// earlier log).
    #[napi(catch_unwind)]
    pub fn record_calls(&self) {
        self.inner.faults().record_calls();
    }

    /// The calls logged since `record_calls`, oldest first.
    #[napi(catch_unwind)]
    pub fn calls(&self) -> Vec<NativeStoreCall> {
        self.inner
            .faults()
            .calls()
            .into_iter()
            .map(|c| NativeStoreCall {
                actor: c.actor.name().to_string(),
                op: c.op.name().to_string(),
                object: c.kind.name().to_string(),
                path: c.path,
            })
            .collect()
    }

    /// Collects garbage in `shard` (a name or an id): see `memwal_core::gc`.
    #[napi(catch_unwind)]
    pub async fn collect_garbage(
        &self,
        shard: String,
        options: Option<NativeGcOptions>,
    ) -> napi::Result<NativeGcReport> {
        let shard = ShardRef::parse(&shard).napi()?;
        let options = gc_options(options)?;
        Ok(memwal_core::gc::collect(&self.inner, shard, &options)
            .await
            .napi()?
            .into())
    }

    /// The shards in this store (with a manifest), and the shard folders without one.
    #[napi(catch_unwind)]
    pub async fn list_shards(&self) -> napi::Result<NativeShardListing> {
        let listing = memwal_core::list_shards(&self.inner).await.napi()?;
        Ok(NativeShardListing {
            shards: listing
                .shards
                .into_iter()
                .map(|s| NativeListedShard {
                    id: s.id.to_string(),
                    name: s.name,
                })
                .collect(),
            incomplete: listing.incomplete.iter().map(ToString::to_string).collect(),
        })
    }
}

/// A shard in a store.
#[napi(object, object_from_js = false, use_nullable = true)]
pub struct NativeListedShard {
    /// The shard id (a UUID).
    pub id: String,
    /// The shard's name; `null` for a shard only ever opened by id.
    pub name: Option<String>,
}

/// What `listShards` found.
#[napi(object, object_from_js = false)]
pub struct NativeShardListing {
    /// Shards with a manifest, sorted by id.
    pub shards: Vec<NativeListedShard>,
    /// Ids of shard folders with no manifest (a first open cut off before writing one).
    pub incomplete: Vec<String>,
}

/// Weak: a stall that is never reached must not keep the process alive (`lib/store.ts`'s
/// `reached()` is then a promise that never settles, as a user awaiting it would expect).
type ReachedCallback = ThreadsafeFunction<(), (), (), Status, false, true>;

/// Which store call to stall; every field left out matches anything.
#[napi(object, object_to_js = false)]
pub struct NativeStallSpec {
    /// An actor's name (`claim`, `put`, `commit`, …).
    pub actor: Option<String>,
    /// An operation's name (`get`, `create`, …).
    pub op: Option<String>,
    /// An object kind's name (`manifest`, `wal`, …).
    pub object: Option<String>,
    /// `before` (the default) or `after`.
    pub when: Option<String>,
    /// Matching calls to let through first.
    pub skip: Option<f64>,
}

/// The calls `spec` matches, for `what` (`stall`, `fail`, `delay`), with its names checked.
fn matcher(what: &str, spec: &NativeStallSpec) -> napi::Result<Stall> {
    let skip = count(what, "skip", spec.skip.unwrap_or(0.0))?;
    let when = spec.when.as_deref().map(When::parse).transpose().napi()?;
    let mut at = if when == Some(When::After) {
        Stall::after()
    } else {
        Stall::before()
    }
    .skip(skip);
    if let Some(a) = spec.actor.as_deref() {
        at = at.actor(Actor::parse(a).napi()?);
    }
    if let Some(o) = spec.op.as_deref() {
        at = at.op(StoreOp::parse(o).napi()?);
    }
    if let Some(k) = spec.object.as_deref() {
        at = at.kind(ObjectKind::parse(k).napi()?);
    }
    Ok(at)
}

/// `n` as a count (a non-negative integer), or `INVALID_ARGUMENT` naming `what`'s `name`.
fn count(what: &str, name: &str, n: f64) -> napi::Result<u64> {
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n < 9.007e15 {
        Ok(n as u64)
    } else {
        Err(invalid(format!(
            "{what}: {name} must be a non-negative integer, got {n}"
        )))
    }
}

/// One armed stall: its call waits from when it is reached until `release` (or until this
/// handle is garbage-collected).
#[napi]
pub struct NativeStoreStall {
    handle: Arc<PauseHandle>,
}

#[napi]
impl NativeStoreStall {
    /// Lets the held call continue (or, if it was not reached yet, pass straight through).
    #[napi(catch_unwind)]
    pub fn release(&self) {
        self.handle.release();
    }
}

/// A store call, as recorded by `record_calls`.
#[napi(object, object_from_js = false)]
pub struct NativeStoreCall {
    /// Who made it.
    pub actor: String,
    /// What it did.
    pub op: String,
    /// The kind of object it touched.
    pub object: String,
    /// The object's (or folder's) path.
    pub path: String,
}
