//! `NativeShardWriter`: a thin shell over [`memwal_core::ShardWriter`].
//! Each method converts its arguments, makes one core call and maps the error. Every put goes
//! through the one `put` method, whatever its data and mode.

use std::sync::{Arc, OnceLock};

use memwal_core::{
    DurableWatcher, PutMode, PutOptions, RequestId, ShardWriter, Submitted, WriteResult,
};
use napi::Env;
use napi::bindgen_prelude::{
    Buffer, Either, Float64ArraySlice, Function, Object, PromiseRaw, Uint8Array, Utf16String,
};
use napi_derive::napi;

use crate::convert::{
    NativeManifest, NativeMemTableStats, NativeOpenStats, NativeWalStats, NativeWriteResult,
    NativeWriteStats, writer_config,
};
use crate::durable::{Args as DurableArgs, DurableRelay};
use crate::error::{IntoNapi, invalid};
use crate::gc::NativeGcReport;
use crate::put_data::{PutData, PutDecoder};
use crate::rows::RowReader;
use crate::store::NativeObjectStore;
use crate::{ipc, schema};

/// Puts carrying up to this many bytes are decoded and inserted on the JavaScript thread (a few
/// microseconds); larger ones are decoded off the event loop.
const SYNC_INSERT_LIMIT: usize = 256 * 1024;

/// The writer of one shard. See `ShardWriter` in `lib/writer.ts`.
#[napi]
pub struct NativeShardWriter {
    inner: Arc<ShardWriter>,
    decoder: Arc<PutDecoder>,
    /// Converts plain-object rows into batches of the shard's schema.
    rows: RowReader,
    /// Where durable puts wait, by id (set once by `relayDurable`).
    relay: OnceLock<DurableRelay>,
}

/// Where a put's rows went, and whether their durability is reported through the writer's
/// relay (`relayDurable`) under the id the put was given: what a put that could not insert at
/// once (a large one, or one backpressure held) resolves with.
#[napi(object, object_from_js = false, js_name = "NativeWriteTicket")]
pub struct NativeWriteTicket {
    /// Where the rows went.
    pub result: NativeWriteResult,
    /// True in durable mode: the relay reports the rows' durability under the put's id.
    pub relayed: bool,
}

/// `put` flag: a `putNoWait` (else a `put`).
const PUT_NO_WAIT: u32 = 1;
/// `put` flag: relay the cost of the WAL entry that covers the put.
const PUT_COST: u32 = 2;

/// Hands a durable put's watcher to the relay, under the put's id; true if its durability will
/// be relayed (false for a put with nothing to wait for).
fn watch(
    relay: Option<&DurableRelay>,
    durable_id: Option<f64>,
    cost: bool,
    watcher: Option<DurableWatcher>,
) -> napi::Result<bool> {
    let Some(watcher) = watcher else {
        return Ok(false);
    };
    let (Some(relay), Some(id)) = (relay, durable_id) else {
        return Err(invalid(
            "a durable put needs a durability id and the writer's relay (relayDurable)",
        ));
    };
    if relay.watch(id, watcher, cost).is_some() {
        return Err(napi::Error::from_reason(
            "[memwal:CLOSED] the writer's durability relay has stopped (the JavaScript environment is shutting down); the put's rows may or may not become durable",
        ));
    }
    Ok(true)
}

fn ticket(
    relay: Option<&DurableRelay>,
    durable_id: Option<f64>,
    cost: bool,
    result: WriteResult,
    watcher: Option<DurableWatcher>,
) -> napi::Result<NativeWriteTicket> {
    Ok(NativeWriteTicket {
        relayed: watch(relay, durable_id, cost, watcher)?,
        result: result.into(),
    })
}

#[napi]
impl NativeShardWriter {
    /// Opens (claims) a shard. `schema` is the JSON description of `schema.rs`; `options` are
    /// the writer options under their JavaScript names.
    #[napi(
        ts_args_type = "store: NativeObjectStore, schema: Uint8Array, options: Record<string, boolean | number | string | null>",
        ts_return_type = "Promise<NativeShardWriter>",
        catch_unwind
    )]
    pub fn open<'env>(
        env: &'env Env,
        store: &NativeObjectStore,
        schema: Uint8Array,
        options: Object<'env>,
    ) -> napi::Result<PromiseRaw<'env, NativeShardWriter>> {
        let store = store.inner.clone();
        let schema = schema::decode_schema(&schema)?;
        let config = writer_config(&options)?;
        env.spawn_future(async move {
            let w = ShardWriter::open(store, schema, config).await.napi()?;
            let rows = RowReader::new(w.schema(), w.config().ignore_unknown_fields);
            Ok(NativeShardWriter {
                inner: Arc::new(w),
                decoder: Arc::default(),
                rows,
                relay: OnceLock::new(),
            })
        })
    }

    /// The shard id (UUID).
    #[napi(getter)]
    pub fn shard_id(&self) -> String {
        self.inner.shard_id().to_string()
    }

    /// The shard's name as its manifest records it; `null` for a shard only ever opened by id.
    #[napi(getter)]
    pub fn shard_name(&self) -> Option<String> {
        self.inner.shard_name().map(str::to_string)
    }

    /// The claimed epoch.
    #[napi(getter)]
    pub fn epoch(&self) -> f64 {
        self.inner.epoch() as f64
    }

    /// This handle's random writer id, recorded in the manifest as the shard's holder.
    #[napi(getter)]
    pub fn writer_id(&self) -> String {
        self.inner.writer_id().to_string()
    }

    /// The one put: inserts `data` (see `put_data.rs`; `keyCounts` go with an array of rows: one
    /// count per row, or one number for one row, which spares a typed array per put)
    /// as a put of the mode `flags` say ([`PUT_NO_WAIT`], else a put; the core checks what each
    /// mode allows). A small put is decoded and inserted on this thread: where its rows went is
    /// written into `out` (`[generation or NaN, first batch, end batch]`) and the call returns
    /// whether its durability will be relayed. A large one, or one that backpressure makes
    /// wait, returns a promise of its ticket instead. In durable mode the rows' durability is
    /// reported through the relay under `durableId`, whichever way the put went. With a
    /// `requestId` the core answers a retry with the first put's result (`PutOptions`). With
    /// [`PUT_COST`], the relay reports what the WAL entry that covered the put cost.
    ///
    /// Why `out` and positional arguments: a put is the one call made per event, and building
    /// a ticket object (three nested objects with named properties) or reading a wrapper's
    /// properties cost the JavaScript thread more than writing three numbers into an array the
    /// caller reuses.
    #[napi(
        catch_unwind,
        ts_args_type = "data: object, keyCounts: number | Uint32Array | null, flags: number, durableId: number | null, requestId: string | null, out: Float64Array",
        ts_return_type = "boolean | Promise<NativeWriteTicket>"
    )]
    #[allow(clippy::too_many_arguments)]
    pub fn put<'env>(
        &self,
        env: &'env Env,
        data: Object<'env>,
        key_counts: Option<Either<u32, &[u32]>>,
        flags: u32,
        durable_id: Option<f64>,
        request_id: Option<Utf16String>,
        mut out: Float64ArraySlice<'env>,
    ) -> napi::Result<Either<bool, PromiseRaw<'env, NativeWriteTicket>>> {
        let cost = flags & PUT_COST != 0;
        let mode = if flags & PUT_NO_WAIT != 0 {
            PutMode::NoWait
        } else {
            PutMode::Put
        };
        if out.len() < 3 {
            return Err(invalid("put: out must have room for three numbers"));
        }
        let options = PutOptions {
            // Read as UTF-16: a conversion to `String` would replace lone surrogates with
            // U+FFFD, and ids that differ only there would be taken for one.
            request_id: request_id
                .map(|id| RequestId::from_utf16(&id))
                .transpose()
                .napi()?,
        };
        let one_row;
        let key_counts = match key_counts {
            Some(Either::A(n)) => {
                one_row = [n];
                Some(&one_row[..])
            }
            Some(Either::B(counts)) => Some(counts),
            None => None,
        };
        let data = PutData::from_object(&data, key_counts, &self.rows)?;
        let relay = self.relay.get().cloned();
        if data.byte_len() <= SYNC_INSERT_LIMIT {
            let batches = self.decoder.decode(data)?;
            return match self.inner.submit(batches, mode, options).napi()? {
                Submitted::Inserted(result, watcher) => {
                    // SAFETY: no other view of `out` is alive: the rows (whose getters may run
                    // JavaScript, even another put) are read, and nothing below calls into
                    // JavaScript.
                    let out = unsafe { out.as_mut() };
                    out[0] = result.generation.map_or(f64::NAN, |g| g as f64);
                    out[1] = result.batch_positions.start as f64;
                    out[2] = result.batch_positions.end as f64;
                    let relayed = watch(relay.as_ref(), durable_id, cost, watcher)?;
                    Ok(Either::A(relayed))
                }
                Submitted::Blocked(blocked) => Ok(Either::B(env.spawn_future(async move {
                    let (result, watcher) = blocked.inserted().await.napi()?;
                    ticket(relay.as_ref(), durable_id, cost, result, watcher)
                })?)),
            };
        }
        let (inner, decoder) = (self.inner.clone(), self.decoder.clone());
        Ok(Either::B(env.spawn_future(async move {
            let batches = decoder.decode(data)?;
            let (result, watcher) = match inner.submit(batches, mode, options).napi()? {
                Submitted::Inserted(result, watcher) => (result, watcher),
                Submitted::Blocked(blocked) => blocked.inserted().await.napi()?,
            };
            ticket(relay.as_ref(), durable_id, cost, result, watcher)
        })?))
    }

    /// True if puts resolve only once durable (`durableWrite`).
    #[napi(getter)]
    pub fn durable_write(&self) -> bool {
        self.inner.config().durable_write
    }

    /// Reports the durability of puts inserted with a `durableId` to `callback(ok, failed,
    /// messages, costs)` (ids that are durable; ids that failed, with their tagged error
    /// messages; durable puts that asked for their cost, five numbers each, or `null`), in
    /// batches, on the JavaScript thread. Once per writer; the callback does not keep the
    /// event loop alive.
    #[napi(
        ts_args_type = "callback: (ok: number[], failed: number[], messages: string[], costs: number[] | null) => void",
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

    /// Sends this writer's events to `callback(json)`, one JSON object per event, on the
    /// JavaScript thread. Once per writer; the callback does not keep the event loop alive.
    #[napi(ts_args_type = "callback: (event: string) => void", catch_unwind)]
    pub fn on_events(&self, callback: Function<String, ()>) -> napi::Result<()> {
        self.inner.on_event(crate::events::sink(&callback)?).napi()
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

    /// Collects garbage in this writer's shard now, with its options.
    #[napi(catch_unwind)]
    pub async fn collect_garbage(&self) -> napi::Result<NativeGcReport> {
        Ok(self.inner.collect_garbage().await.napi()?.into())
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
