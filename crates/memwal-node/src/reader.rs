//! `NativeShardReader` and `NativeWalTailer`: thin shells over the core's read-only handles.

use memwal_core::{ShardReader, ShardRef, WalTailer};
use napi::Env;
use napi::bindgen_prelude::{Buffer, PromiseRaw};
use napi_derive::napi;

use crate::convert::NativeManifest;
use crate::error::{IntoNapi, invalid};
use crate::ipc;
use crate::store::NativeObjectStore;

/// The static `open(store, shard)` (a shard's name, or its id) of the read-only handle class `$native { inner: $core }`:
/// it opens the core's handle of that shard off the JavaScript thread. Both handles open the
/// same way, and napi-rs needs the factory declared on each class, so it is written once, here.
/// `$doc` is the method's TypeScript documentation. It is a string, not a `///` comment:
/// napi-derive reads a doc attribute's literal as written, and a doc comment passed through a
/// macro arrives as a raw string (`r"…"`), which would show in `binding.d.ts`.
macro_rules! open_read_handle {
    ($doc:literal, $native:ident, $core:ident, $ts_return:literal) => {
        #[napi]
        impl $native {
            #[doc = $doc]
            #[napi(ts_return_type = $ts_return, catch_unwind)]
            pub fn open<'env>(
                env: &'env Env,
                store: &NativeObjectStore,
                shard: String,
            ) -> napi::Result<PromiseRaw<'env, $native>> {
                let store = store.inner.clone();
                let shard = ShardRef::parse(&shard).napi()?;
                env.spawn_future(async move {
                    Ok($native {
                        inner: $core::open(store, shard).await.napi()?,
                    })
                })
            }
        }
    };
}

/// Read-only view of a shard.
#[napi]
pub struct NativeShardReader {
    inner: ShardReader,
}

open_read_handle!(
    " Opens a shard for reading; fails if it has no manifest.",
    NativeShardReader,
    ShardReader,
    "Promise<NativeShardReader>"
);

#[napi]
impl NativeShardReader {
    /// Every recoverable row, as one Arrow IPC stream.
    #[napi(catch_unwind)]
    pub async fn scan(&self) -> napi::Result<Buffer> {
        let r = self.inner.scan().await.napi()?;
        Ok(ipc::encode_stream(&r.schema, &r.batches)?.into())
    }

    /// The latest manifest.
    #[napi(catch_unwind)]
    pub async fn manifest(&self) -> napi::Result<NativeManifest> {
        Ok((&self.inner.manifest().await.napi()?).into())
    }

    /// The committed generation files, oldest first, as the latest manifest lists them.
    #[napi(catch_unwind)]
    pub async fn generation_files(&self) -> napi::Result<Vec<NativeGenerationFile>> {
        Ok(self
            .inner
            .generation_files()
            .await
            .napi()?
            .into_iter()
            .map(|f| NativeGenerationFile {
                generation: f.generation as f64,
                rows: f.rows.map(|r| r as f64),
                uri: f.uri,
                object: f.object,
            })
            .collect())
    }

    /// Generation folders the latest manifest does not list (uncommitted or abandoned flushes).
    #[napi(catch_unwind)]
    pub async fn uncommitted_generations(&self) -> napi::Result<Vec<String>> {
        self.inner.uncommitted_generations().await.napi()
    }

    /// The shard id (UUID).
    #[napi(getter)]
    pub fn shard_id(&self) -> String {
        self.inner.shard_id().to_string()
    }

    /// The shard's name as its manifest recorded it at open; `null` for a shard only ever
    /// opened by id.
    #[napi(getter)]
    pub fn shard_name(&self) -> Option<String> {
        self.inner.shard_name().map(str::to_string)
    }
}

/// A committed generation file, as `ShardReader.files()` returns it.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "GenerationFile"
)]
pub struct NativeGenerationFile {
    /// The generation number.
    pub generation: f64,
    /// Rows it holds, as the manifest records them (`null` if it does not).
    pub rows: Option<f64>,
    /// Where other tools open it: a file path, or `s3://bucket/key` (`gs://`, `az://`).
    pub uri: String,
    /// Its object path in the store.
    pub object: String,
}

/// One WAL entry.
#[napi(object, object_from_js = false)]
pub struct NativeWalEntry {
    pub position: f64,
    pub writer_epoch: f64,
    pub is_sentinel: bool,
    /// The entry's batches as an Arrow IPC stream (`null` for a sentinel).
    pub data: Option<Buffer>,
}

/// Reads WAL entries by position.
#[napi]
pub struct NativeWalTailer {
    inner: WalTailer,
}

open_read_handle!(
    " A tailer over a shard's WAL.",
    NativeWalTailer,
    WalTailer,
    "Promise<NativeWalTailer>"
);

#[napi]
impl NativeWalTailer {
    /// The first position with no entry.
    #[napi(catch_unwind)]
    pub async fn next_position(&self) -> napi::Result<f64> {
        Ok(self.inner.next_position().await.napi()? as f64)
    }

    /// The first position garbage collection has not removed (the low-water mark plus one).
    #[napi(catch_unwind)]
    pub async fn first_position(&self) -> napi::Result<f64> {
        Ok(self.inner.first_position().await.napi()? as f64)
    }

    /// Rejects (CORRUPT) if the WAL has a hole: an empty slot below a written one.
    #[napi(catch_unwind)]
    pub async fn verify(&self) -> napi::Result<()> {
        self.inner.verify().await.napi()
    }

    /// The entry at `position`, or null.
    #[napi(catch_unwind)]
    pub async fn read(&self, position: f64) -> napi::Result<Option<NativeWalEntry>> {
        // Past 2^53 - 1 a JS number no longer names one integer (and `as u64` would saturate).
        if !(position.is_finite()
            && position >= 1.0
            && position.fract() == 0.0
            && position <= 9_007_199_254_740_991.0)
        {
            return Err(invalid(format!(
                "read(position): position must be an integer from 1 to 9007199254740991, got {position}"
            )));
        }
        let Some(e) = self.inner.read(position as u64).await.napi()? else {
            return Ok(None);
        };
        let data = if e.is_sentinel {
            None
        } else {
            Some(ipc::encode_stream(&e.schema, &e.batches)?.into())
        };
        Ok(Some(NativeWalEntry {
            position: e.position as f64,
            writer_epoch: e.writer_epoch as f64,
            is_sentinel: e.is_sentinel,
            data,
        }))
    }
}
