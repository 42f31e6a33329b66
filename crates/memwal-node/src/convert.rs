//! Plain JavaScript objects ↔ core types: options in, results and statistics out.
//! Numbers cross as JS numbers (exact up to 2^53); sizes in bytes, durations in milliseconds.
//!
//! The result objects are declared once, here: napi-rs writes each one, with its doc comments,
//! into `binding.d.ts` under its public name (`js_name`), and `lib/types.ts` re-exports those
//! declarations as the API's types. So these doc comments are the TypeScript API's
//! documentation: write them for JavaScript users (camelCase names, `null`, milliseconds).
//! `use_nullable` makes an absent value `null` (typed `T | null`) rather than a missing key,
//! the shape the API has always returned, so TypeScript passes the objects on unconverted.

use std::time::Duration;

use memwal_core::wal::WalLayout;
use memwal_core::{
    BatchRange, FlushedGeneration, MemTableStats, OpenStats, OptionValue, ShardManifest, WalStats,
    WriteResult, WriteStats, WriterConfig,
};
use napi::bindgen_prelude::{Either4, Null, Object};
use napi_derive::napi;

use crate::error::IntoNapi;

/// The core config from the options object of `ShardWriter.open` (type-checked by
/// `lib/options.ts`): every key is handed to [`WriterConfig::set_host_option`], which holds the
/// one list of options, so a new option needs no change here.
pub fn writer_config(options: &Object) -> napi::Result<WriterConfig> {
    let mut config = WriterConfig::default();
    for key in Object::keys(options)? {
        let value = match options.get::<Either4<bool, f64, String, Null>>(&key)? {
            None => continue,
            Some(Either4::A(b)) => OptionValue::Bool(b),
            Some(Either4::B(n)) => OptionValue::Number(n),
            Some(Either4::C(s)) => OptionValue::Text(s),
            Some(Either4::D(Null)) => OptionValue::Null,
        };
        config.set_host_option(&key, &value).napi()?;
    }
    Ok(config)
}

/// Parses a shard id.
/// A duration as JavaScript milliseconds.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Batch positions `[start, end)`.
///
/// @inline
// `@inline` is for typedoc: the API docs show these fields inside `WriteResult`, the only
// public type holding a range, so `BatchRange` needs no page (nor export) of its own.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "BatchRange"
)]
pub struct NativeBatchRange {
    /// First batch position of the put (inclusive).
    pub start: f64,
    /// One past the put's last batch position (exclusive).
    pub end: f64,
}

impl From<BatchRange> for NativeBatchRange {
    fn from(r: BatchRange) -> Self {
        NativeBatchRange {
            start: r.start as f64,
            end: r.end as f64,
        }
    }
}

/// Where a put's rows went.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "WriteResult"
)]
pub struct NativeWriteResult {
    /// The MemTable generation that accepted the rows; `null` in WAL-only mode.
    pub generation: Option<f64>,
    /// Batch positions `[start, end)`, local to `generation` (the first put after a rotation
    /// is `0..1` again); writer-lifetime in WAL-only mode.
    pub batch_positions: NativeBatchRange,
}

impl From<WriteResult> for NativeWriteResult {
    fn from(r: WriteResult) -> Self {
        NativeWriteResult {
            generation: r.generation.map(|g| g as f64),
            batch_positions: r.batch_positions.into(),
        }
    }
}

/// Statistics of the active MemTable and the frozen ones awaiting their generation flush.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "MemTableStats"
)]
pub struct NativeMemTableStats {
    /// Generation of the active MemTable (the one its flush will produce).
    pub generation: f64,
    /// Rows in the active MemTable.
    pub row_count: f64,
    /// Record batches in the active MemTable.
    pub batch_count: f64,
    /// Estimated in-memory bytes of the active MemTable; it freezes at `maxMemtableSize`.
    pub estimated_size: f64,
    /// Batches of the active MemTable not yet in the WAL.
    pub pending_wal_batch_count: f64,
    /// Rows of the active MemTable not yet in the WAL.
    pub pending_wal_row_count: f64,
    /// Estimated bytes of the active MemTable not yet in the WAL.
    pub pending_wal_estimated_bytes: f64,
    /// Frozen MemTables waiting for their generation flush (still visible to `scan()`).
    pub frozen_memtable_count: f64,
    /// Estimated bytes of those frozen MemTables; counts towards `maxUnflushedMemtableBytes`.
    pub frozen_estimated_bytes: f64,
}

impl From<MemTableStats> for NativeMemTableStats {
    fn from(s: MemTableStats) -> Self {
        NativeMemTableStats {
            generation: s.generation as f64,
            row_count: s.row_count as f64,
            batch_count: s.batch_count as f64,
            estimated_size: s.estimated_size as f64,
            pending_wal_batch_count: s.pending_wal_batch_count as f64,
            pending_wal_row_count: s.pending_wal_row_count as f64,
            pending_wal_estimated_bytes: s.pending_wal_estimated_bytes as f64,
            frozen_memtable_count: s.frozen_memtable_count as f64,
            frozen_estimated_bytes: s.frozen_estimated_bytes as f64,
        }
    }
}

/// The writer's view of its WAL.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "WalStats"
)]
pub struct NativeWalStats {
    /// Where the next WAL entry goes.
    pub next_wal_entry_position: f64,
    /// Where this writer's fence sentinel went (epoch ≥ 2).
    pub fence_sentinel_position: Option<f64>,
    /// WAL entries this writer appended.
    pub entries_appended: f64,
    /// Their encoded bytes.
    pub bytes_appended: f64,
}

impl From<WalStats> for NativeWalStats {
    fn from(s: WalStats) -> Self {
        NativeWalStats {
            next_wal_entry_position: s.next_wal_entry_position as f64,
            fence_sentinel_position: s.fence_sentinel_position.map(|p| p as f64),
            entries_appended: s.entries_appended as f64,
            bytes_appended: s.bytes_appended as f64,
        }
    }
}

/// Where {@link ShardWriter.open} spent its time. The claim ends once the previous writer is
/// fenced (its next append fails); replay then rebuilds the MemTables from the WAL tail the
/// previous writer left, so it grows with that tail.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "OpenStats"
)]
pub struct NativeOpenStats {
    /// Milliseconds spent claiming the shard: the epoch CAS, finding the WAL tip, the fence
    /// sentinel.
    pub claim_ms: f64,
    /// Milliseconds spent replaying the WAL tail into MemTables (0 in WAL-only mode).
    pub replay_ms: f64,
    /// WAL entries replayed, fence sentinels included.
    pub replayed_entries: f64,
    /// Rows replayed.
    pub replayed_rows: f64,
}

impl From<OpenStats> for NativeOpenStats {
    fn from(s: OpenStats) -> Self {
        NativeOpenStats {
            claim_ms: ms(s.claim),
            replay_ms: ms(s.replay),
            replayed_entries: s.replayed_entries as f64,
            replayed_rows: s.replayed_rows as f64,
        }
    }
}

/// Write counters. `putsPerWalEntry` is the group-commit factor of durable puts.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "WriteStats"
)]
pub struct NativeWriteStats {
    /// Successful `put` and `putNoWait` calls.
    pub put_count: f64,
    /// Rows those calls inserted.
    pub put_rows: f64,
    /// Milliseconds spent in the in-memory part of puts (validation, backpressure, insert).
    pub put_time_ms: f64,
    /// WAL entries appended (not counting the fence sentinel).
    pub wal_flush_count: f64,
    /// Encoded bytes of those WAL entries.
    pub wal_flush_bytes: f64,
    /// Record batches in those WAL entries.
    pub wal_flush_batches: f64,
    /// Milliseconds spent appending them (object-store puts, fsync included).
    pub wal_flush_time_ms: f64,
    /// Durable-put completions reported (successes and failures).
    pub durable_requests: f64,
    /// Mean durable puts per WAL entry: the group-commit factor (grows with concurrency).
    pub puts_per_wal_entry: f64,
    /// MemTable generations flushed as Parquet files.
    pub memtable_flush_count: f64,
    /// Rows in those generations.
    pub memtable_flush_rows: f64,
    /// Milliseconds spent flushing generations.
    pub memtable_flush_time_ms: f64,
    /// Puts that waited for backpressure (see `maxUnflushedMemtableBytes`).
    pub backpressure_events: f64,
    /// Total milliseconds puts waited for backpressure.
    pub backpressure_wait_ms: f64,
    /// Puts answered as retries (their `requestId` was remembered): they wrote nothing and
    /// got the first put's result.
    pub retried_puts: f64,
    /// Requests this writer made of its object store, by kind, from its open on.
    pub store: NativeStoreRequestStats,
    /// Retries and failures of the writer's store operations.
    pub operations: NativeOperationsStats,
    /// Latency of WAL appends: one sample per entry, retries included.
    pub wal_append_latency: NativeLatencySummary,
    /// Latency of generation flushes (Parquet file, request ids, manifest commit).
    pub generation_flush_latency: NativeLatencySummary,
    /// Latency from a durable put's call (in the core, after the JavaScript side handed the
    /// rows over) to its durability acknowledgement: one sample per durable put.
    pub put_to_durable_latency: NativeLatencySummary,
}

/// Object-store requests by kind. A request counts when it is issued, whatever its outcome
/// (a retry counts again); a listing counts one LIST per 1,000 objects, at least one.
#[napi(object, object_from_js = false, js_name = "StoreRequestStats")]
pub struct NativeStoreRequestStats {
    /// PUT requests (WAL entries, manifest versions, generation files, the version hint).
    pub put_requests: f64,
    /// Payload bytes those PUTs sent.
    pub put_bytes: f64,
    /// GET requests.
    pub get_requests: f64,
    /// Bytes received by GETs that succeeded.
    pub get_bytes: f64,
    /// HEAD requests (existence probes).
    pub head_requests: f64,
    /// LIST requests.
    pub list_requests: f64,
    /// DELETE requests, one per object.
    pub delete_requests: f64,
}

impl From<memwal_core::StoreRequestStats> for NativeStoreRequestStats {
    fn from(s: memwal_core::StoreRequestStats) -> Self {
        NativeStoreRequestStats {
            put_requests: s.put_requests as f64,
            put_bytes: s.put_bytes as f64,
            get_requests: s.get_requests as f64,
            get_bytes: s.get_bytes as f64,
            head_requests: s.head_requests as f64,
            list_requests: s.list_requests as f64,
            delete_requests: s.delete_requests as f64,
        }
    }
}

/// Retries and failures of one operation.
#[napi(object, object_from_js = false, js_name = "OperationStats")]
pub struct NativeOperationStats {
    /// Attempts repeated after a failed one (a manifest commit: after losing a version race).
    pub retries: f64,
    /// Operations that failed for good (retries spent, a failed sync, a fence).
    pub failures: f64,
}

impl From<memwal_core::OperationStats> for NativeOperationStats {
    fn from(s: memwal_core::OperationStats) -> Self {
        NativeOperationStats {
            retries: s.retries as f64,
            failures: s.failures as f64,
        }
    }
}

/// {@link OperationStats} of each operation a writer runs against its store.
#[napi(object, object_from_js = false, js_name = "OperationsStats")]
pub struct NativeOperationsStats {
    /// Appending WAL entries.
    pub wal_append: NativeOperationStats,
    /// Writing the fence sentinel at open.
    pub fence_sentinel: NativeOperationStats,
    /// Flushing generations.
    pub generation_flush: NativeOperationStats,
    /// Committing manifest versions (within generation flushes and compactions).
    pub manifest_commit: NativeOperationStats,
    /// Compacting generations.
    pub compaction: NativeOperationStats,
    /// Collecting garbage.
    pub gc: NativeOperationStats,
}

impl From<memwal_core::OperationsStats> for NativeOperationsStats {
    fn from(s: memwal_core::OperationsStats) -> Self {
        NativeOperationsStats {
            wal_append: s.wal_append.into(),
            fence_sentinel: s.fence_sentinel.into(),
            generation_flush: s.generation_flush.into(),
            manifest_commit: s.manifest_commit.into(),
            compaction: s.compaction.into(),
            gc: s.gc.into(),
        }
    }
}

/// A latency histogram's summary (HdrHistogram, three significant digits, microsecond
/// resolution), in milliseconds.
#[napi(object, object_from_js = false, js_name = "LatencySummary")]
pub struct NativeLatencySummary {
    /// Samples recorded.
    pub count: f64,
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// Largest sample, in milliseconds.
    pub max_ms: f64,
    /// Sum of the samples, in milliseconds.
    pub sum_ms: f64,
}

impl From<memwal_core::LatencySummary> for NativeLatencySummary {
    fn from(s: memwal_core::LatencySummary) -> Self {
        NativeLatencySummary {
            count: s.count as f64,
            p50_ms: ms(s.p50),
            p99_ms: ms(s.p99),
            max_ms: ms(s.max),
            sum_ms: ms(s.sum),
        }
    }
}

impl From<WriteStats> for NativeWriteStats {
    fn from(s: WriteStats) -> Self {
        NativeWriteStats {
            put_count: s.put_count as f64,
            put_rows: s.put_rows as f64,
            put_time_ms: ms(s.put_time),
            wal_flush_count: s.wal_flush_count as f64,
            wal_flush_bytes: s.wal_flush_bytes as f64,
            wal_flush_batches: s.wal_flush_batches as f64,
            wal_flush_time_ms: ms(s.wal_flush_time),
            durable_requests: s.durable_requests as f64,
            puts_per_wal_entry: s.puts_per_wal_entry(),
            memtable_flush_count: s.memtable_flush_count as f64,
            memtable_flush_rows: s.memtable_flush_rows as f64,
            memtable_flush_time_ms: ms(s.memtable_flush_time),
            backpressure_events: s.backpressure_events as f64,
            backpressure_wait_ms: ms(s.backpressure_wait),
            retried_puts: s.retried_puts as f64,
            store: s.store.into(),
            operations: s.operations.into(),
            wal_append_latency: s.wal_append_latency.into(),
            generation_flush_latency: s.generation_flush_latency.into(),
            put_to_durable_latency: s.put_to_durable_latency.into(),
        }
    }
}

/// One flushed generation (an immutable Parquet file).
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "FlushedGeneration"
)]
pub struct NativeFlushedGeneration {
    /// Generation number (1 for the first MemTable of a shard).
    pub generation: f64,
    /// Directory relative to the shard directory; the data is `<path>/data.parquet`.
    pub path: String,
    /// Rows in the generation; `null` if the manifest does not record it.
    pub rows: Option<f64>,
    /// Estimated in-memory bytes of its rows (not the Parquet file size, which is
    /// compressed); `null` if the manifest does not record it.
    pub bytes: Option<f64>,
}

impl From<&FlushedGeneration> for NativeFlushedGeneration {
    fn from(g: &FlushedGeneration) -> Self {
        NativeFlushedGeneration {
            generation: g.generation as f64,
            path: g.path.clone(),
            rows: g.physical_rows.map(|v| v as f64),
            bytes: g.in_memory_bytes.map(|v| v as f64),
        }
    }
}

/// A shard manifest version.
#[napi(
    object,
    object_from_js = false,
    use_nullable = true,
    js_name = "ShardManifest"
)]
pub struct NativeManifest {
    /// The shard id (a UUID); `null` if the manifest does not record one.
    pub shard_id: Option<String>,
    /// The shard's name; `null` for a shard only ever opened by id.
    pub shard_name: Option<String>,
    /// Manifest version: 1 for the first, +1 for every commit.
    pub version: f64,
    /// The fencing token: the epoch of the latest writer to claim the shard.
    pub writer_epoch: f64,
    /// WAL entries at or below this position are in flushed generations.
    pub replay_after_wal_entry_position: f64,
    /// A hint of the WAL tip when the manifest was written; not authoritative.
    pub wal_entry_position_last_seen: f64,
    /// The WAL low-water mark: entries at or below it may have been removed by garbage
    /// collection (their rows are in flushed generations).
    pub wal_low_water: f64,
    /// The generation number the next flushed MemTable gets.
    pub current_generation: f64,
    /// Flushed generations, oldest first.
    pub flushed_generations: Vec<NativeFlushedGeneration>,
    /// Id of the writer handle that wrote this version.
    pub writer_id: String,
    /// The writer that claimed the epoch (`lib/types.ts` turns `claimedAtMs` into a `Date`);
    /// `null` if the manifest predates holder records.
    pub holder: Option<NativeShardHolder>,
    /// How the shard's WAL is laid out: `'objects'` or `'segments'`.
    pub wal_layout: String,
}

/// The writer that holds a shard, as the manifest records its claim.
#[napi(object, object_from_js = false, js_name = "NativeShardHolder")]
pub struct NativeShardHolder {
    /// The random id of the writer handle (`ShardWriter.writerId`).
    pub writer_id: String,
    /// The host name of its machine.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The epoch it claimed.
    pub epoch: f64,
    /// When it claimed the epoch, in milliseconds since the Unix epoch.
    pub claimed_at_ms: f64,
}

impl From<&ShardManifest> for NativeManifest {
    fn from(m: &ShardManifest) -> Self {
        NativeManifest {
            shard_id: m.shard_uuid().map(|u| u.to_string()),
            shard_name: m.shard_name.clone(),
            version: m.version as f64,
            writer_epoch: m.writer_epoch as f64,
            replay_after_wal_entry_position: m.replay_after_wal_entry_position as f64,
            wal_entry_position_last_seen: m.wal_entry_position_last_seen as f64,
            wal_low_water: m.wal_low_water as f64,
            current_generation: m.current_generation as f64,
            flushed_generations: m.flushed_generations.iter().map(Into::into).collect(),
            writer_id: m.writer_id.clone(),
            holder: m.holder().map(|h| NativeShardHolder {
                writer_id: h.writer_id,
                host: h.host,
                pid: h.pid,
                epoch: h.epoch as f64,
                claimed_at_ms: h.claimed_at_ms as f64,
            }),
            wal_layout: WalLayout::of(m).name().to_string(),
        }
    }
}
