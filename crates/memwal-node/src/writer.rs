//! `NativeShardWriter`: a thin shell over [`memwal_core::ShardWriter`].
//! Each method converts its arguments, makes one core call and maps the error.

use std::sync::{Arc, Mutex, OnceLock};

use arrow_schema::SchemaRef;
use memwal_core::{DurableWatcher, PutMode, ShardWriter, Submitted, WriteResult};
use napi::Env;
use napi::bindgen_prelude::{Buffer, Float64Array, Function, PromiseRaw, Uint8Array};
use napi_derive::napi;

use crate::convert::{
    NativeManifest, NativeMemTableStats, NativeOpenStats, NativeWalStats, NativeWriteResult,
    NativeWriteStats, NativeWriterOptions,
};
use crate::durable::{Args as DurableArgs, DurableRelay};
use crate::error::{IntoNapi, invalid};
use crate::store::NativeObjectStore;
use crate::{columns, ipc};

/// Decodes a put's IPC bytes and checks them against what the caller passed: a `Table` from a
/// second copy of apache-arrow can encode into a stream that silently lacks data.
fn decode_put(
    data: &[u8],
    expected_rows: Option<f64>,
    expected_columns: Option<f64>,
) -> napi::Result<Vec<arrow_array::RecordBatch>> {
    let (schema, batches) = ipc::decode_stream(bytes::Bytes::copy_from_slice(data))?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let columns = schema.fields().len();
    let rows_ok = expected_rows.is_none_or(|r| r == rows as f64);
    let cols_ok = expected_columns.is_none_or(|c| c == columns as f64);
    if !rows_ok || !cols_ok {
        return Err(invalid(format!(
            "the data passed to put has {} rows and {} columns, but memwal decoded {rows} rows and {columns} columns from its Arrow IPC encoding. This happens when two copies of apache-arrow are installed and the Table comes from the other one. Align apache-arrow to ^21.2 (`npm ls apache-arrow`), or pass IPC bytes from the caller's own tableToIPC(table, 'stream')",
            expected_rows.map_or("?".into(), |r| r.to_string()),
            expected_columns.map_or("?".into(), |c| c.to_string()),
        )));
    }
    Ok(batches)
}

/// The writer of one shard. See `ShardWriter` in `index.ts`.
#[napi]
pub struct NativeShardWriter {
    inner: Arc<ShardWriter>,
    /// The last schema sent with column data, decoded (callers send the same one each time).
    schema_cache: Mutex<Option<(Vec<u8>, SchemaRef)>>,
    /// Where durable puts inserted with an id wait (set once by `relayDurable`).
    relay: OnceLock<DurableRelay>,
}

impl NativeShardWriter {
    /// A ticket for rows `submit` inserted, `None` if it would have had to wait. With a
    /// `durable_id` and a relay, the rows' durability is reported through the relay under that
    /// id (the ticket says `relayed`) rather than by the ticket's `wait()`.
    fn try_insert_batches(
        &self,
        batches: Vec<arrow_array::RecordBatch>,
        no_wait: bool,
        durable_id: Option<f64>,
    ) -> napi::Result<Option<NativeWriteTicket>> {
        let mode = if no_wait {
            PutMode::NoWait
        } else {
            PutMode::Put
        };
        Ok(match self.inner.submit(batches, mode).napi()? {
            Submitted::Inserted(result, watcher) => {
                let has_durable = watcher.is_some();
                let watcher = match (watcher, durable_id, self.relay.get()) {
                    (Some(w), Some(id), Some(relay)) => relay.watch(id, w),
                    (w, _, _) => w,
                };
                Some(NativeWriteTicket {
                    result,
                    has_durable,
                    relayed: has_durable && watcher.is_none(),
                    durable: Mutex::new(watcher),
                })
            }
            Submitted::Blocked(_) => None,
        })
    }

    fn column_batches(
        &self,
        schema: &[u8],
        batches: &[f64],
        nodes: &[f64],
        buffers: &[Uint8Array],
    ) -> napi::Result<Vec<arrow_array::RecordBatch>> {
        let schema = {
            let mut cache = self.schema_cache.lock().unwrap_or_else(|e| e.into_inner());
            match cache.as_ref() {
                Some((bytes, s)) if bytes.as_slice() == schema => s.clone(),
                _ => {
                    let s = ipc::decode_schema(schema)?;
                    *cache = Some((schema.to_vec(), s.clone()));
                    s
                }
            }
        };
        columns::decode(&schema, batches, nodes, buffers)
    }
}

/// The in-memory result of `putNoWait` and the durability of its rows.
#[napi]
pub struct NativeWriteTicket {
    result: WriteResult,
    durable: Mutex<Option<DurableWatcher>>,
    has_durable: bool,
    relayed: bool,
}

#[napi]
impl NativeWriteTicket {
    /// Where the rows went.
    #[napi(getter)]
    pub fn result(&self) -> NativeWriteResult {
        self.result.into()
    }

    /// True in durable mode: `wait()` resolves when the rows are durable.
    #[napi(getter)]
    pub fn has_durable(&self) -> bool {
        self.has_durable
    }

    /// True if the rows' durability is reported through the writer's relay, under the id the
    /// insert was given, and not by `wait()`.
    #[napi(getter)]
    pub fn relayed(&self) -> bool {
        self.relayed
    }

    /// Resolves when the rows are durable (at once in non-durable mode, or if relayed).
    #[napi(catch_unwind)]
    pub async fn wait(&self) -> napi::Result<()> {
        let watcher = self
            .durable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match watcher {
            Some(w) => w.wait().await.napi(),
            None => Ok(()),
        }
    }
}

#[napi]
impl NativeShardWriter {
    /// Opens (claims) a shard.
    #[napi(ts_return_type = "Promise<NativeShardWriter>", catch_unwind)]
    pub fn open<'env>(
        env: &'env Env,
        store: &NativeObjectStore,
        schema: Uint8Array,
        options: NativeWriterOptions,
    ) -> napi::Result<PromiseRaw<'env, NativeShardWriter>> {
        let store = store.inner.clone();
        let schema = ipc::decode_schema(&schema)?;
        let config = options.to_config()?;
        env.spawn_future(async move {
            let w = ShardWriter::open(store, schema, config).await.napi()?;
            Ok(NativeShardWriter {
                inner: Arc::new(w),
                schema_cache: Mutex::new(None),
                relay: OnceLock::new(),
            })
        })
    }

    /// The shard id (UUID).
    #[napi(getter)]
    pub fn shard_id(&self) -> String {
        self.inner.shard_id().to_string()
    }

    /// The claimed epoch.
    #[napi(getter)]
    pub fn epoch(&self) -> f64 {
        self.inner.epoch() as f64
    }

    /// Inserts the batches of an IPC stream; durable mode resolves once they are durable.
    #[napi(catch_unwind)]
    pub async fn put(
        &self,
        data: Uint8Array,
        expected_rows: Option<f64>,
        expected_columns: Option<f64>,
    ) -> napi::Result<NativeWriteResult> {
        let batches = decode_put(&data, expected_rows, expected_columns)?;
        drop(data);
        Ok(self.inner.put(batches).await.napi()?.into())
    }

    /// Inserts and returns at once, with a ticket for durability.
    #[napi(catch_unwind)]
    pub async fn put_no_wait(
        &self,
        data: Uint8Array,
        expected_rows: Option<f64>,
        expected_columns: Option<f64>,
    ) -> napi::Result<NativeWriteTicket> {
        let batches = decode_put(&data, expected_rows, expected_columns)?;
        drop(data);
        let (result, watcher) = self.inner.put_no_wait(batches).await.napi()?;
        Ok(NativeWriteTicket {
            result,
            has_durable: watcher.is_some(),
            relayed: false,
            durable: Mutex::new(watcher),
        })
    }

    /// Like `put`, with the batches sent as column buffers (see `columns.rs`).
    #[napi(catch_unwind)]
    pub async fn put_columns(
        &self,
        schema: Uint8Array,
        batches: Float64Array,
        nodes: Float64Array,
        buffers: Vec<Uint8Array>,
    ) -> napi::Result<NativeWriteResult> {
        let batches = self.column_batches(&schema, &batches, &nodes, &buffers)?;
        drop(buffers);
        Ok(self.inner.put(batches).await.napi()?.into())
    }

    /// Like `putNoWait`, with the batches sent as column buffers.
    #[napi(catch_unwind)]
    pub async fn put_no_wait_columns(
        &self,
        schema: Uint8Array,
        batches: Float64Array,
        nodes: Float64Array,
        buffers: Vec<Uint8Array>,
    ) -> napi::Result<NativeWriteTicket> {
        let batches = self.column_batches(&schema, &batches, &nodes, &buffers)?;
        drop(buffers);
        let (result, watcher) = self.inner.put_no_wait(batches).await.napi()?;
        Ok(NativeWriteTicket {
            result,
            has_durable: watcher.is_some(),
            relayed: false,
            durable: Mutex::new(watcher),
        })
    }

    /// Inserts the batches of an IPC stream now, on the calling thread, if that needs no
    /// waiting; `null` if backpressure would make it wait (then use `put`/`putNoWait`). For
    /// small puts: it saves two thread hops. `noWait` applies `putNoWait`'s mode check.
    #[napi(catch_unwind)]
    pub fn try_insert(
        &self,
        data: Uint8Array,
        expected_rows: Option<f64>,
        expected_columns: Option<f64>,
        no_wait: bool,
        durable_id: Option<f64>,
    ) -> napi::Result<Option<NativeWriteTicket>> {
        let batches = decode_put(&data, expected_rows, expected_columns)?;
        self.try_insert_batches(batches, no_wait, durable_id)
    }

    /// `tryInsert` with the batches sent as column buffers.
    #[napi(catch_unwind)]
    pub fn try_insert_columns(
        &self,
        schema: Uint8Array,
        batches: Float64Array,
        nodes: Float64Array,
        buffers: Vec<Uint8Array>,
        no_wait: bool,
        durable_id: Option<f64>,
    ) -> napi::Result<Option<NativeWriteTicket>> {
        let batches = self.column_batches(&schema, &batches, &nodes, &buffers)?;
        self.try_insert_batches(batches, no_wait, durable_id)
    }

    /// Reports the durability of puts inserted with a `durableId` to `callback(ok, failed,
    /// messages)` (ids that are durable; ids that failed, with their tagged error messages),
    /// in batches, on the JavaScript thread. Once per writer; the callback does not keep the
    /// event loop alive.
    #[napi(
        ts_args_type = "callback: (ok: number[], failed: number[], messages: string[]) => void",
        catch_unwind
    )]
    pub fn relay_durable(&self, callback: Function<DurableArgs, ()>) -> napi::Result<()> {
        if self.relay.get().is_some() {
            return Err(invalid(
                "relayDurable: this writer already has a durability callback",
            ));
        }
        let relay = DurableRelay::start(&callback)?;
        let _ = self.relay.set(relay);
        Ok(())
    }

    /// Makes everything written so far durable.
    #[napi(catch_unwind)]
    pub async fn flush(&self) -> napi::Result<()> {
        self.inner.flush().await.napi()
    }

    /// Freezes the active MemTable.
    #[napi(catch_unwind)]
    pub async fn force_seal_active(&self) -> napi::Result<()> {
        self.inner.force_seal_active().await.napi()
    }

    /// Waits for every frozen MemTable's generation flush.
    #[napi(catch_unwind)]
    pub async fn wait_for_flush_drain(&self) -> napi::Result<()> {
        self.inner.wait_for_flush_drain().await.napi()
    }

    /// Fails with FENCED if another writer claimed the shard.
    #[napi(catch_unwind)]
    pub async fn check_fenced(&self) -> napi::Result<()> {
        self.inner.check_fenced().await.napi()
    }

    /// MemTable statistics.
    #[napi(catch_unwind)]
    pub fn memtable_stats(&self) -> napi::Result<NativeMemTableStats> {
        Ok(self.inner.memtable_stats().napi()?.into())
    }

    /// WAL statistics.
    #[napi(catch_unwind)]
    pub fn wal_stats(&self) -> NativeWalStats {
        self.inner.wal_stats().into()
    }

    /// Where open spent its time.
    #[napi(catch_unwind)]
    pub fn open_stats(&self) -> NativeOpenStats {
        self.inner.open_stats().into()
    }

    /// Write statistics.
    #[napi(catch_unwind)]
    pub fn stats(&self) -> NativeWriteStats {
        self.inner.stats().into()
    }

    /// The latest manifest.
    #[napi(catch_unwind)]
    pub async fn manifest(&self) -> napi::Result<Option<NativeManifest>> {
        Ok(self.inner.manifest().await.napi()?.as_ref().map(Into::into))
    }

    /// Every row the writer holds, as one Arrow IPC stream.
    #[napi(catch_unwind)]
    pub async fn scan(&self) -> napi::Result<Buffer> {
        let batches = self.inner.scan().await.napi()?;
        Ok(ipc::encode_stream(&self.inner.schema(), &batches)?.into())
    }

    /// Flushes everything and stops.
    #[napi(catch_unwind)]
    pub async fn close(&self) -> napi::Result<()> {
        self.inner.close().await.napi()
    }

    /// Stops without flushing.
    #[napi(catch_unwind)]
    pub async fn abort(&self) -> napi::Result<()> {
        self.inner.abort().await.napi()
    }
}
