//! Plain JavaScript objects ↔ core types: options in, results and statistics out.
//! Numbers cross as JS numbers (exact up to 2^53); sizes in bytes, durations in milliseconds.

use memwal_core::{
    BatchRange, FlushedGeneration, MemTableStats, OpenStats, ShardManifest, WalStats, WriteResult,
    WriteStats, WriterConfig,
};
use napi_derive::napi;
use uuid::Uuid;

use crate::error::invalid;

/// Options of `ShardWriter.open`, already type-checked by `index.ts`; values are checked here.
#[napi(object)]
#[derive(Default)]
pub struct NativeWriterOptions {
    pub shard_id: Option<String>,
    pub durable_write: Option<bool>,
    pub enable_memtable: Option<bool>,
    pub max_wal_buffer_size: Option<f64>,
    pub max_wal_flush_interval_ms: Option<f64>,
    /// `maxWalFlushIntervalMs: null` in JavaScript: no ticker.
    pub disable_wal_flush_interval: Option<bool>,
    pub max_wal_persist_retries: Option<f64>,
    pub wal_persist_retry_base_delay_ms: Option<f64>,
    pub max_memtable_size: Option<f64>,
    pub max_memtable_batches: Option<f64>,
    pub max_unflushed_memtable_bytes: Option<f64>,
}

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

fn uint(name: &str, v: f64) -> napi::Result<u64> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= MAX_SAFE {
        Ok(v as u64)
    } else {
        Err(invalid(format!(
            "invalid option {name}: expected a non-negative integer, got {v}"
        )))
    }
}

/// Parses a shard id.
pub fn shard_uuid(s: &str) -> napi::Result<Uuid> {
    Uuid::parse_str(s).map_err(|_| {
        invalid(format!(
            "shardId {s:?} is not a UUID; pass the id of an existing shard (e.g. writer.shardId)"
        ))
    })
}

impl NativeWriterOptions {
    /// The core config; ranges are checked by `WriterConfig::validate` on open.
    pub fn to_config(&self) -> napi::Result<WriterConfig> {
        let mut c = WriterConfig::default();
        if let Some(s) = &self.shard_id {
            c.shard_id = Some(shard_uuid(s)?);
        }
        if let Some(v) = self.durable_write {
            c.durable_write = v;
        }
        if let Some(v) = self.enable_memtable {
            c.enable_memtable = v;
        }
        if let Some(v) = self.max_wal_buffer_size {
            c.max_wal_buffer_size = uint("maxWalBufferSize", v)?;
        }
        if let Some(v) = self.max_wal_flush_interval_ms {
            c.max_wal_flush_interval_ms = Some(uint("maxWalFlushIntervalMs", v)?);
        }
        if self.disable_wal_flush_interval == Some(true) {
            c.max_wal_flush_interval_ms = None;
        }
        if let Some(v) = self.max_wal_persist_retries {
            c.max_wal_persist_retries =
                uint("maxWalPersistRetries", v)?.try_into().map_err(|_| {
                    invalid(format!(
                        "invalid option maxWalPersistRetries: {v} is too large"
                    ))
                })?;
        }
        if let Some(v) = self.wal_persist_retry_base_delay_ms {
            c.wal_persist_retry_base_delay_ms = uint("walPersistRetryBaseDelayMs", v)?;
        }
        if let Some(v) = self.max_memtable_size {
            c.max_memtable_size = uint("maxMemtableSize", v)?;
        }
        if let Some(v) = self.max_memtable_batches {
            c.max_memtable_batches = uint("maxMemtableBatches", v)? as usize;
        }
        if let Some(v) = self.max_unflushed_memtable_bytes {
            c.max_unflushed_memtable_bytes = uint("maxUnflushedMemtableBytes", v)?;
        }
        Ok(c)
    }
}

/// `[start, end)` batch positions.
#[napi(object, object_from_js = false)]
pub struct NativeBatchRange {
    pub start: f64,
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
#[napi(object, object_from_js = false)]
pub struct NativeWriteResult {
    /// MemTable generation (`null` in WAL-only mode).
    pub generation: Option<f64>,
    /// Positions local to `generation` (writer-lifetime in WAL-only mode).
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

#[napi(object, object_from_js = false)]
pub struct NativeMemTableStats {
    pub generation: f64,
    pub row_count: f64,
    pub batch_count: f64,
    pub estimated_size: f64,
    pub pending_wal_batch_count: f64,
    pub pending_wal_row_count: f64,
    pub pending_wal_estimated_bytes: f64,
    pub frozen_memtable_count: f64,
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

#[napi(object, object_from_js = false)]
pub struct NativeWalStats {
    pub next_wal_entry_position: f64,
    pub fence_sentinel_position: Option<f64>,
    pub entries_appended: f64,
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

#[napi(object, object_from_js = false)]
pub struct NativeOpenStats {
    pub claim_ms: f64,
    pub replay_ms: f64,
    pub replayed_entries: f64,
    pub replayed_rows: f64,
}

impl From<OpenStats> for NativeOpenStats {
    fn from(s: OpenStats) -> Self {
        NativeOpenStats {
            claim_ms: s.claim.as_secs_f64() * 1000.0,
            replay_ms: s.replay.as_secs_f64() * 1000.0,
            replayed_entries: s.replayed_entries as f64,
            replayed_rows: s.replayed_rows as f64,
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct NativeWriteStats {
    pub put_count: f64,
    pub put_rows: f64,
    pub put_time_ms: f64,
    pub wal_flush_count: f64,
    pub wal_flush_bytes: f64,
    pub wal_flush_batches: f64,
    pub wal_flush_time_ms: f64,
    pub durable_requests: f64,
    pub puts_per_wal_entry: f64,
    pub memtable_flush_count: f64,
    pub memtable_flush_rows: f64,
    pub memtable_flush_time_ms: f64,
    pub backpressure_events: f64,
    pub backpressure_wait_ms: f64,
}

impl From<WriteStats> for NativeWriteStats {
    fn from(s: WriteStats) -> Self {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
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
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct NativeFlushedGeneration {
    pub generation: f64,
    pub path: String,
    pub rows: Option<f64>,
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

#[napi(object, object_from_js = false)]
pub struct NativeManifest {
    pub shard_id: Option<String>,
    pub version: f64,
    pub writer_epoch: f64,
    pub replay_after_wal_entry_position: f64,
    pub wal_entry_position_last_seen: f64,
    pub current_generation: f64,
    pub flushed_generations: Vec<NativeFlushedGeneration>,
    pub writer_id: String,
}

impl From<&ShardManifest> for NativeManifest {
    fn from(m: &ShardManifest) -> Self {
        NativeManifest {
            shard_id: m.shard_uuid().map(|u| u.to_string()),
            version: m.version as f64,
            writer_epoch: m.writer_epoch as f64,
            replay_after_wal_entry_position: m.replay_after_wal_entry_position as f64,
            wal_entry_position_last_seen: m.wal_entry_position_last_seen as f64,
            current_generation: m.current_generation as f64,
            flushed_generations: m.flushed_generations.iter().map(Into::into).collect(),
            writer_id: m.writer_id.clone(),
        }
    }
}
