//! Writer configuration, with the defaults of Lance's MemWAL writer (pinned by the test
//! `defaults_match_lance`).
//!
//! Index-related options of Lance (`sync_indexed_write`, HNSW, async index buffering) are
//! dropped: memwal maintains no indexes. Every field states its unit, default and trade-off.

use std::time::Duration;

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::shard::{ShardName, ShardRef, quoted};
use crate::wal::WalLayout;

/// Upper bound on `max_memtable_batches` (a BatchStore allocates its slots as batches arrive,
/// so the bound costs no memory up front).
pub const MAX_MEMTABLE_BATCHES_LIMIT: usize = 1 << 24;
/// Upper bound on `max_wal_persist_retries`.
pub const MAX_WAL_PERSIST_RETRIES_LIMIT: u32 = 64;
/// Upper bound on `wal_persist_retry_base_delay_ms` (one minute).
pub const MAX_RETRY_BASE_DELAY_MS: u64 = 60_000;
/// Upper bound on `max_wal_flush_interval_ms` (one day).
pub const MAX_WAL_FLUSH_INTERVAL_MS: u64 = 86_400_000;
/// Upper bound on `max_memtable_age_ms` (seven days).
pub const MAX_MEMTABLE_AGE_MS: u64 = 7 * 86_400_000;
/// Fewest manifest versions garbage collection keeps: the newest, and the one the version hint
/// may trail by.
pub const MIN_KEEP_MANIFEST_VERSIONS: u64 = 2;
/// Upper bound on `gc_keep_manifest_versions`.
pub const MAX_KEEP_MANIFEST_VERSIONS: u64 = 1_000_000;
/// Upper bound on `request_id_retention_ms` and `gc_grace_ms` (seven days).
pub const MAX_REQUEST_ID_RETENTION_MS: u64 = 7 * 86_400_000;
/// Cap on a single retry backoff sleep: 5 s, as in Lance's MemWAL. Past it, doubling would
/// keep a writer asleep long after a store that failed for a moment is back.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// How a [`crate::ShardWriter`] behaves. Build with `WriterConfig::default()` and override
/// fields; [`WriterConfig::validate`] runs on open.
#[derive(Debug, Clone, PartialEq)]
pub struct WriterConfig {
    /// The shard to write, by name or by id. Default (`None`): the shard named
    /// [`crate::shard::DEFAULT_SHARD_NAME`], so that reopening a location reopens its shard.
    pub shard: Option<ShardRef>,
    /// Durable mode. `true` (default): `put` resolves only after the WAL entry covering its
    /// rows is persisted (about one object PUT of latency, shared by concurrent puts).
    /// `false`: `put` resolves after the in-memory insert; the WAL is written by the ticker,
    /// the size trigger, `flush()` and `close()`, and a crash can lose what was not yet written.
    pub durable_write: bool,
    /// `true` (default): MemTable mode (readable rows, Parquet generations, replay).
    /// `false`: WAL-only mode: puts only go to the WAL; the writer keeps no rows in memory
    /// and writes no generations.
    pub enable_memtable: bool,
    /// Size trigger, in bytes of not-yet-WAL-appended data of the active MemTable (or the
    /// WAL-only queue): crossing a multiple of it queues a WAL append. 0 disables it.
    /// Default 10 MiB. Smaller = smaller, more frequent WAL entries (more PUTs).
    pub max_wal_buffer_size: u64,
    /// Background ticker period in milliseconds; each tick appends whatever is pending, oldest
    /// MemTable first. `None` disables the ticker. Default 100 ms. Only matters for
    /// non-durable puts: it bounds how long an acknowledged non-durable row stays memory-only.
    pub max_wal_flush_interval_ms: Option<u64>,
    /// Retries of a failing WAL PUT at the same position before the writer fences itself with
    /// `PersistenceFailure`. Default 3 (so 4 attempts). 0 = fail on the first error.
    pub max_wal_persist_retries: u32,
    /// Base of the exponential retry backoff in milliseconds (doubles per retry, capped at
    /// 5 s). Default 50 ms.
    pub wal_persist_retry_base_delay_ms: u64,
    /// Freeze the active MemTable when its estimated size reaches this many bytes (of heap,
    /// fixed costs of each batch included: see [`crate::batch_store::estimated_batch_bytes`]).
    /// Default 256 MiB. Larger = fewer, bigger generation files and longer replays.
    pub max_memtable_size: u64,
    /// BatchStore capacity: freeze when the active MemTable holds this many batches.
    /// Default 8000. A single put may not carry more batches than this.
    pub max_memtable_batches: usize,
    /// Seal the active MemTable (and flush it as a generation) once it has held rows for this
    /// many milliseconds, whatever its size: a quiet shard's rows then reach Parquet, its
    /// replay stays short, and (with garbage collection) its WAL can be collected. `None`: only
    /// size seals. Default 3,600,000 (one hour): a quiet shard writes at most one small
    /// generation per hour.
    pub max_memtable_age_ms: Option<u64>,
    /// Backpressure: while active + frozen MemTables hold more than this many bytes, `put`
    /// waits (never fails) for generation flushes to catch up. Default 1 GiB.
    pub max_unflushed_memtable_bytes: u64,
    /// What a put of plain-object rows does with a key that names no field of the shard's
    /// schema (at any depth). `false` (default): the put is rejected naming the key, so a
    /// misspelt field is not silently stored as null. `true`: such keys are skipped, for rows
    /// that carry more than the shard stores; it also saves counting each object's keys (a few
    /// hundred nanoseconds per row). Only hosts that convert rows themselves read it (the Node
    /// binding); Arrow data is checked against the schema either way.
    pub ignore_unknown_fields: bool,
    /// How long, in milliseconds after a put with a request id was accepted, a retry with the
    /// same id is still answered with the first put's result instead of writing again, even
    /// after its rows were flushed to a generation (and across reopens and failovers: the ids
    /// of a flushed generation are persisted beside it). Independently of this, every id whose
    /// rows are not yet in a flushed generation is remembered (its WAL entry carries it).
    /// Default 600,000 (10 minutes); 0 = only until the rows are in a flushed generation.
    /// Costs memory: every id in the window is held (about 200 bytes plus the id's length),
    /// and opening a shard reads one small object per generation flushed within the window.
    /// MemTable mode; in WAL-only mode ids are remembered by this writer only.
    pub request_id_retention_ms: u64,
    /// Whether the writer collects garbage in the background (see [`crate::gc`]): WAL entries
    /// whose rows are in committed generations, old manifest versions and abandoned generation
    /// folders. Default `true`. With `false` nothing is removed unless asked
    /// ([`crate::ShardWriter::collect_garbage`], [`crate::gc::collect`], `memwal gc`).
    pub gc: bool,
    /// How often background collection runs, in milliseconds. Default 60,000.
    pub gc_interval_ms: u64,
    /// Manifest versions collection keeps (at least 2). Default 10.
    pub gc_keep_manifest_versions: u64,
    /// How old an abandoned generation folder must be before collection removes it, in
    /// milliseconds. Default 600,000 (10 minutes).
    pub gc_grace_ms: u64,
    /// Whether the writer merges small generations (see [`crate::flush::compaction`]), after a
    /// generation flush that leaves more than `compaction_max_generations`. Default `true`.
    pub compaction: bool,
    /// How many generations a shard may list before compaction merges the oldest small ones
    /// (at least 2). Default 16.
    pub compaction_max_generations: u64,
    /// The size compaction aims for: it merges generations smaller than half of it, up to this
    /// many bytes (estimated in-memory bytes, as the manifest records them; the Parquet file is
    /// smaller). Default 134,217,728 (128 MiB).
    pub compaction_target_bytes: u64,
    /// How the WAL is laid out ([`WalLayout`]). Default (`None`): the layout an existing shard
    /// records, and for a new shard the store's choice ([`crate::Store::new_shard_wal_layout`],
    /// objects unless the store was built to choose segments; never segments on a network
    /// file system or an object store). A
    /// layout other than the shard's is refused (a shard changes layout only by conversion).
    /// `Segments` needs a local directory on a local disk.
    pub wal_layout: Option<WalLayout>,
    /// Size of a WAL segment file (segment layout), in bytes. Default 67,108,864 (64 MiB):
    /// the disk space a shard's WAL takes at least once it rotated, and how much it writes
    /// between rotations (a sync and a rename each). Between 65,536 and 1,073,741,824.
    pub wal_segment_bytes: u64,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            shard: None,
            durable_write: true,
            enable_memtable: true,
            max_wal_buffer_size: 10 * 1024 * 1024,
            max_wal_flush_interval_ms: Some(100),
            max_wal_persist_retries: 3,
            wal_persist_retry_base_delay_ms: 50,
            max_memtable_size: 256 * 1024 * 1024,
            max_memtable_batches: 8000,
            max_memtable_age_ms: Some(3_600_000),
            max_unflushed_memtable_bytes: 1024 * 1024 * 1024,
            ignore_unknown_fields: false,
            request_id_retention_ms: 600_000,
            gc: true,
            gc_interval_ms: 60_000,
            gc_keep_manifest_versions: 10,
            gc_grace_ms: 600_000,
            compaction: true,
            compaction_max_generations: 16,
            compaction_target_bytes: 128 * 1024 * 1024,
            wal_layout: None,
            wal_segment_bytes: 64 << 20,
        }
    }
}

impl WriterConfig {
    /// Checks every value; the error names the option, the bad value and the allowed range.
    /// The ranges are `RANGES`, checked in its order: the first bad option is reported.
    pub fn validate(&self) -> Result<()> {
        match RANGES.iter().find_map(|range| range.violated_by(self)) {
            Some(message) => Err(Error::invalid(message)),
            None => Ok(()),
        }
    }

    /// Sets the option a host language calls `name` (the field's name in camelCase, as in
    /// JavaScript: `max_wal_flush_interval_ms` ↔ `maxWalFlushIntervalMs`). The one list of
    /// options a host can set, so a new field needs no change in a binding.
    ///
    /// # Errors
    /// `InvalidArgument` naming the option: an unknown name, or a value of the wrong kind
    /// (ranges are checked later, by [`WriterConfig::validate`]).
    pub fn set_host_option(&mut self, name: &str, value: &OptionValue) -> Result<()> {
        match HOST_OPTIONS.iter().find(|(n, _)| *n == name) {
            Some((name, set)) => set(self, name, value),
            None => Err(Error::invalid(format!(
                "unknown option `{name}`; known options: {}",
                HOST_OPTIONS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The retry policy for WAL and generation writes.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.max_wal_persist_retries,
            base_delay: Duration::from_millis(self.wal_persist_retry_base_delay_ms),
            observer: None,
        }
    }
}

/// What an option accepts, as [`WriterConfig::validate`] states it.
enum Bound {
    /// At least `min`; `unit` follows the number (` byte`, or nothing).
    AtLeast { min: u64, unit: &'static str },
    /// From `min` to `max`; `note` follows the range (what the bound is, or what `null` does).
    Between {
        min: u64,
        max: u64,
        note: &'static str,
    },
}

/// One option's range: its field name, its value (`None` for a feature switched off with
/// `null`, which is always valid) and what it may be.
struct OptionRange {
    name: &'static str,
    value: fn(&WriterConfig) -> Option<u64>,
    bound: Bound,
}

impl OptionRange {
    /// The error message if `config`'s value is out of range.
    fn violated_by(&self, config: &WriterConfig) -> Option<String> {
        let value = (self.value)(config)?;
        let allowed = match self.bound {
            Bound::AtLeast { min, .. } if value >= min => return None,
            Bound::Between { min, max, .. } if (min..=max).contains(&value) => return None,
            Bound::AtLeast { min, unit } => format!("at least {min}{unit}"),
            Bound::Between { min, max, note } => format!("between {min} and {max}{note}"),
        };
        Some(format!(
            "invalid config: {} must be {allowed}, got {value}",
            self.name
        ))
    }
}

/// Every option with a range, in the order [`WriterConfig::validate`] checks them.
static RANGES: &[OptionRange] = &[
    OptionRange {
        name: "max_memtable_batches",
        value: |c| Some(c.max_memtable_batches as u64),
        bound: Bound::Between {
            min: 1,
            max: MAX_MEMTABLE_BATCHES_LIMIT as u64,
            note: "",
        },
    },
    OptionRange {
        name: "max_memtable_size",
        value: |c| Some(c.max_memtable_size),
        bound: Bound::AtLeast {
            min: 1,
            unit: " byte",
        },
    },
    OptionRange {
        name: "max_unflushed_memtable_bytes",
        value: |c| Some(c.max_unflushed_memtable_bytes),
        bound: Bound::AtLeast {
            min: 1,
            unit: " byte",
        },
    },
    OptionRange {
        name: "max_wal_flush_interval_ms",
        value: |c| c.max_wal_flush_interval_ms,
        bound: Bound::Between {
            min: 1,
            max: MAX_WAL_FLUSH_INTERVAL_MS,
            note: " (or null to disable the ticker)",
        },
    },
    OptionRange {
        name: "max_memtable_age_ms",
        value: |c| c.max_memtable_age_ms,
        bound: Bound::Between {
            min: 1,
            max: MAX_MEMTABLE_AGE_MS,
            note: " (7 days), or null for size-only sealing",
        },
    },
    OptionRange {
        name: "max_wal_persist_retries",
        value: |c| Some(c.max_wal_persist_retries.into()),
        bound: Bound::Between {
            min: 0,
            max: MAX_WAL_PERSIST_RETRIES_LIMIT as u64,
            note: "",
        },
    },
    OptionRange {
        name: "wal_persist_retry_base_delay_ms",
        value: |c| Some(c.wal_persist_retry_base_delay_ms),
        bound: Bound::Between {
            min: 0,
            max: MAX_RETRY_BASE_DELAY_MS,
            note: "",
        },
    },
    OptionRange {
        name: "gc_interval_ms",
        value: |c| Some(c.gc_interval_ms),
        bound: Bound::Between {
            min: 1,
            max: MAX_WAL_FLUSH_INTERVAL_MS,
            note: " (one day)",
        },
    },
    OptionRange {
        name: "gc_keep_manifest_versions",
        value: |c| Some(c.gc_keep_manifest_versions),
        bound: Bound::Between {
            min: MIN_KEEP_MANIFEST_VERSIONS,
            max: MAX_KEEP_MANIFEST_VERSIONS,
            note: "",
        },
    },
    OptionRange {
        name: "compaction_max_generations",
        value: |c| Some(c.compaction_max_generations),
        bound: Bound::Between {
            min: 2,
            max: 1_000_000,
            note: "",
        },
    },
    OptionRange {
        name: "compaction_target_bytes",
        value: |c| Some(c.compaction_target_bytes),
        bound: Bound::AtLeast { min: 1, unit: "" },
    },
    OptionRange {
        name: "gc_grace_ms",
        value: |c| Some(c.gc_grace_ms),
        bound: Bound::Between {
            min: 0,
            max: MAX_REQUEST_ID_RETENTION_MS,
            note: " (7 days)",
        },
    },
    OptionRange {
        name: "request_id_retention_ms",
        value: |c| Some(c.request_id_retention_ms),
        bound: Bound::Between {
            min: 0,
            max: MAX_REQUEST_ID_RETENTION_MS,
            note: " (7 days)",
        },
    },
    OptionRange {
        name: "wal_segment_bytes",
        value: |c| Some(c.wal_segment_bytes),
        bound: Bound::Between {
            min: 64 << 10,
            max: 1 << 30,
            note: " bytes",
        },
    },
];

/// A writer option's value as a host language passes it (the Node binding's options object).
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// `null`: the feature off, where an option allows it (`maxWalFlushIntervalMs`).
    Null,
    /// A boolean.
    Bool(bool),
    /// A number (a JavaScript number: integers are exact up to 2^53).
    Number(f64),
    /// A string.
    Text(String),
}

impl std::fmt::Display for OptionValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionValue::Null => f.write_str("null"),
            OptionValue::Bool(b) => write!(f, "{b}"),
            OptionValue::Number(n) => write!(f, "{n}"),
            OptionValue::Text(t) => f.write_str(&quoted(t)),
        }
    }
}

type SetOption = fn(&mut WriterConfig, &str, &OptionValue) -> Result<()>;

/// Every option a host can set, by its camelCase name; see [`WriterConfig::set_host_option`].
static HOST_OPTIONS: &[(&str, SetOption)] = &[
    ("shard", |c, name, v| {
        let shard = ShardName::parse(&text(name, v)?)?;
        set_shard(c, ShardRef::Name(shard))
    }),
    ("shardId", |c, name, v| {
        let id = shard_id(name, v)?;
        set_shard(c, ShardRef::Id(id))
    }),
    ("walLayout", |c, name, v| {
        c.wal_layout = match v {
            OptionValue::Null => None,
            v => Some(match text(name, v)?.as_str() {
                "objects" => WalLayout::Objects,
                "segments" => WalLayout::Segments,
                other => {
                    return Err(Error::invalid(format!(
                        "invalid option {name}: must be 'segments' or 'objects', got {}",
                        quoted(other)
                    )));
                }
            }),
        };
        Ok(())
    }),
    ("walSegmentBytes", |c, name, v| {
        c.wal_segment_bytes = uint(name, v)?;
        Ok(())
    }),
    ("durableWrite", |c, name, v| {
        c.durable_write = boolean(name, v)?;
        Ok(())
    }),
    ("enableMemtable", |c, name, v| {
        c.enable_memtable = boolean(name, v)?;
        Ok(())
    }),
    ("maxWalBufferSize", |c, name, v| {
        c.max_wal_buffer_size = uint(name, v)?;
        Ok(())
    }),
    ("maxWalFlushIntervalMs", |c, name, v| {
        c.max_wal_flush_interval_ms = match v {
            OptionValue::Null => None,
            v => Some(uint(name, v)?),
        };
        Ok(())
    }),
    ("maxWalPersistRetries", |c, name, v| {
        c.max_wal_persist_retries = uint(name, v)?.try_into().map_err(|_| {
            Error::invalid(format!(
                "invalid option {name}: must be between 0 and {MAX_WAL_PERSIST_RETRIES_LIMIT}, got {v}"
            ))
        })?;
        Ok(())
    }),
    ("walPersistRetryBaseDelayMs", |c, name, v| {
        c.wal_persist_retry_base_delay_ms = uint(name, v)?;
        Ok(())
    }),
    ("maxMemtableSize", |c, name, v| {
        c.max_memtable_size = uint(name, v)?;
        Ok(())
    }),
    ("maxMemtableBatches", |c, name, v| {
        c.max_memtable_batches = uint(name, v)?.try_into().map_err(|_| {
            Error::invalid(format!(
                "invalid option {name}: must be between 1 and {MAX_MEMTABLE_BATCHES_LIMIT}, got {v}"
            ))
        })?;
        Ok(())
    }),
    ("maxMemtableAgeMs", |c, name, v| {
        c.max_memtable_age_ms = match v {
            OptionValue::Null => None,
            v => Some(uint(name, v)?),
        };
        Ok(())
    }),
    ("maxUnflushedMemtableBytes", |c, name, v| {
        c.max_unflushed_memtable_bytes = uint(name, v)?;
        Ok(())
    }),
    ("ignoreUnknownFields", |c, name, v| {
        c.ignore_unknown_fields = boolean(name, v)?;
        Ok(())
    }),
    ("requestIdRetentionMs", |c, name, v| {
        c.request_id_retention_ms = uint(name, v)?;
        Ok(())
    }),
    ("gc", |c, name, v| {
        c.gc = boolean(name, v)?;
        Ok(())
    }),
    ("gcIntervalMs", |c, name, v| {
        c.gc_interval_ms = uint(name, v)?;
        Ok(())
    }),
    ("gcKeepManifestVersions", |c, name, v| {
        c.gc_keep_manifest_versions = uint(name, v)?;
        Ok(())
    }),
    ("gcGraceMs", |c, name, v| {
        c.gc_grace_ms = uint(name, v)?;
        Ok(())
    }),
    ("compaction", |c, name, v| {
        c.compaction = boolean(name, v)?;
        Ok(())
    }),
    ("compactionMaxGenerations", |c, name, v| {
        c.compaction_max_generations = uint(name, v)?;
        Ok(())
    }),
    ("compactionTargetBytes", |c, name, v| {
        c.compaction_target_bytes = uint(name, v)?;
        Ok(())
    }),
];

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

fn uint(name: &str, v: &OptionValue) -> Result<u64> {
    match v {
        OptionValue::Number(n)
            if n.is_finite() && *n >= 0.0 && n.fract() == 0.0 && *n <= MAX_SAFE_INTEGER =>
        {
            Ok(*n as u64)
        }
        v => Err(Error::invalid(format!(
            "invalid option {name}: expected a non-negative integer, got {v}"
        ))),
    }
}

fn boolean(name: &str, v: &OptionValue) -> Result<bool> {
    match v {
        OptionValue::Bool(b) => Ok(*b),
        v => Err(Error::invalid(format!(
            "invalid option {name}: expected a boolean, got {v}"
        ))),
    }
}

fn text(name: &str, v: &OptionValue) -> Result<String> {
    match v {
        OptionValue::Text(s) => Ok(s.clone()),
        v => Err(Error::invalid(format!(
            "invalid option {name}: expected a string, got {v}"
        ))),
    }
}

fn shard_id(name: &str, v: &OptionValue) -> Result<Uuid> {
    let s = text(name, v)?;
    Uuid::parse_str(&s).map_err(|_| {
        Error::invalid(format!(
            "{name} {} is not a UUID; pass the id of an existing shard (e.g. writer.shardId), or a name as shard",
            quoted(&s)
        ))
    })
}

/// A shard given once, by name or by id: both would leave one of them ignored.
fn set_shard(c: &mut WriterConfig, shard: ShardRef) -> Result<()> {
    if c.shard.is_some() {
        return Err(Error::invalid(
            "invalid options: pass either shard (a name) or shardId (a UUID), not both",
        ));
    }
    c.shard = Some(shard);
    Ok(())
}

/// Told of every retry a [`RetryPolicy`] waits for: the operation, the retry's number (from 1),
/// the failure's message and the backoff. The writer reports it as a `Retry` event.
pub(crate) type RetryObserver =
    std::sync::Arc<dyn Fn(&'static str, u32, &str, Duration) + Send + Sync>;

/// Exponential backoff at one slot: `base × 2^(attempt−1)`, capped at [`MAX_RETRY_DELAY`].
#[derive(Clone)]
pub(crate) struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    /// Told of each retry (the writer's events); `None` before the writer exists.
    pub observer: Option<RetryObserver>,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("base_delay", &self.base_delay)
            .finish_non_exhaustive()
    }
}

impl RetryPolicy {
    /// The same policy, telling `observer` of each retry.
    pub fn observed_by(mut self, observer: RetryObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// After a failed attempt of `operation` with `error` (`failed` counts the failures
    /// before it): `false` if the retries are spent, else counts it, logs and reports it, and
    /// sleeps the backoff before the next attempt.
    pub async fn wait_before_retry(
        &self,
        failed: &mut u32,
        operation: &'static str,
        error: &(dyn std::fmt::Display + Sync),
    ) -> bool {
        if *failed >= self.max_retries {
            return false;
        }
        *failed += 1;
        crate::stats::note_retry();
        let delay = self.delay(*failed);
        tracing::info!(
            target: "memwal::retry",
            operation,
            attempt = *failed,
            error = %error,
            delay_ms = delay.as_millis() as u64,
            "retrying {operation}"
        );
        if let Some(observer) = &self.observer {
            observer(operation, *failed, &error.to_string(), delay);
        }
        tokio::time::sleep(delay).await;
        true
    }

    /// The sleep before retry number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(16);
        self.base_delay
            .saturating_mul(1u32 << shift)
            .min(MAX_RETRY_DELAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_given_by_name_or_by_id_never_both() {
        let text = |s: &str| OptionValue::Text(s.to_string());
        let mut c = WriterConfig::default();
        assert_eq!(c.shard, None);
        c.set_host_option("shard", &text("events")).unwrap();
        assert_eq!(c.shard, Some(ShardRef::parse("events").unwrap()));
        let e = c
            .set_host_option("shardId", &text("550e8400-e29b-41d4-a716-446655440000"))
            .unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");

        let mut c = WriterConfig::default();
        let e = c.set_host_option("shard", &text("")).unwrap_err();
        assert!(e.to_string().contains("is empty"), "{e}");
        let e = c.set_host_option("shardId", &text("events")).unwrap_err();
        assert!(e.to_string().contains("not a UUID"), "{e}");
        let e = c
            .set_host_option("shardId", &text(&"z".repeat(10_000)))
            .unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
        let e = c
            .set_host_option("durableWrite", &text(&"z".repeat(10_000)))
            .unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
    }

    #[test]
    fn host_options_set_their_fields_and_name_bad_values() {
        let mut c = WriterConfig::default();
        c.set_host_option("maxWalFlushIntervalMs", &OptionValue::Null)
            .unwrap();
        c.set_host_option("maxMemtableBatches", &OptionValue::Number(7.0))
            .unwrap();
        c.set_host_option("durableWrite", &OptionValue::Bool(false))
            .unwrap();
        c.set_host_option("ignoreUnknownFields", &OptionValue::Bool(true))
            .unwrap();
        c.set_host_option("requestIdRetentionMs", &OptionValue::Number(0.0))
            .unwrap();
        c.set_host_option("maxMemtableAgeMs", &OptionValue::Null)
            .unwrap();
        assert_eq!(c.max_memtable_age_ms, None);
        assert_eq!(c.request_id_retention_ms, 0);
        assert_eq!(c.max_wal_flush_interval_ms, None);
        assert!(c.ignore_unknown_fields);
        assert_eq!(c.max_memtable_batches, 7);
        assert!(!c.durable_write);
        let e = c
            .set_host_option("maxMemtableSize", &OptionValue::Number(-1.0))
            .unwrap_err();
        assert!(
            e.to_string().contains("invalid option maxMemtableSize"),
            "{e}"
        );
        let e = c
            .set_host_option("ignoreUnknownFields", &OptionValue::Number(1.0))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("invalid option ignoreUnknownFields: expected a boolean"),
            "{e}"
        );
        let e = c
            .set_host_option("shardId", &OptionValue::Text("nope".into()))
            .unwrap_err();
        assert!(e.to_string().contains("is not a UUID"), "{e}");
        let e = c
            .set_host_option("maxWalSize", &OptionValue::Number(1.0))
            .unwrap_err();
        assert!(e.to_string().contains("unknown option `maxWalSize`"), "{e}");
    }

    #[test]
    fn defaults_match_lance() {
        let c = WriterConfig::default();
        assert!(c.durable_write && c.enable_memtable);
        assert_eq!(c.max_wal_buffer_size, 10 << 20);
        assert_eq!(c.max_wal_flush_interval_ms, Some(100));
        assert_eq!(c.max_wal_persist_retries, 3);
        assert_eq!(c.wal_persist_retry_base_delay_ms, 50);
        assert_eq!(c.max_memtable_size, 256 << 20);
        assert_eq!(c.max_memtable_batches, 8000);
        assert_eq!(c.max_unflushed_memtable_bytes, 1 << 30);
        assert!(!c.ignore_unknown_fields);
        assert_eq!(c.request_id_retention_ms, 600_000);
        c.validate().unwrap();
    }

    #[test]
    fn invalid_values_are_rejected_with_the_option_name() {
        let cases: Vec<(WriterConfig, &str)> = vec![
            (
                WriterConfig {
                    max_memtable_batches: 0,
                    ..Default::default()
                },
                "max_memtable_batches",
            ),
            (
                WriterConfig {
                    max_memtable_size: 0,
                    ..Default::default()
                },
                "max_memtable_size",
            ),
            (
                WriterConfig {
                    max_unflushed_memtable_bytes: 0,
                    ..Default::default()
                },
                "max_unflushed_memtable_bytes",
            ),
            (
                WriterConfig {
                    max_wal_flush_interval_ms: Some(0),
                    ..Default::default()
                },
                "max_wal_flush_interval_ms",
            ),
            (
                WriterConfig {
                    max_wal_persist_retries: 1000,
                    ..Default::default()
                },
                "max_wal_persist_retries",
            ),
            (
                WriterConfig {
                    wal_persist_retry_base_delay_ms: 10_000_000,
                    ..Default::default()
                },
                "wal_persist_retry_base_delay_ms",
            ),
            (
                WriterConfig {
                    request_id_retention_ms: MAX_REQUEST_ID_RETENTION_MS + 1,
                    ..Default::default()
                },
                "request_id_retention_ms",
            ),
        ];
        for (c, name) in cases {
            let e = c.validate().unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    #[test]
    fn backoff_doubles_and_caps_at_five_seconds() {
        let p = RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(50),
            observer: None,
        };
        assert_eq!(p.delay(1), Duration::from_millis(50));
        assert_eq!(p.delay(2), Duration::from_millis(100));
        assert_eq!(p.delay(3), Duration::from_millis(200));
        assert_eq!(p.delay(30), MAX_RETRY_DELAY);
    }
}
