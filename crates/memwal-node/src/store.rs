//! `NativeObjectStore`: a core [`memwal_core::Store`] plus its fault controller.

use std::collections::HashMap;

use memwal_core::{ShardRef, Store};
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
