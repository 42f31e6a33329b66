//! [`ShardHolder`]: who owns a shard, as its manifest records it.
//!
//! A fenced writer's operator needs to know *who* fenced it: a successor they started on
//! purpose, a second deployment writing to the same shard, or a stray process. So every epoch
//! claim records the claimant's writer id (one random id per [`crate::ShardWriter`] handle),
//! host name, process id and claim time in the manifest (`manifest/holder.rs`), and every
//! later commit of that epoch carries them over. Manifests written before these fields existed
//! have no holder: it is reported as unknown, never guessed.
//!
//! A leaf: errors name holders and manifests record them, so neither may own the type.

use std::fmt;

/// The writer that holds a shard: the claimant of the manifest's epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardHolder {
    /// The random id of the writer handle that claimed the epoch.
    pub writer_id: String,
    /// The host name of the machine it ran on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The epoch it claimed.
    pub epoch: u64,
    /// When it claimed the epoch, in milliseconds since the Unix epoch (its own clock).
    pub claimed_at_ms: u64,
}

impl ShardHolder {
    /// The claim time as an ISO-8601 UTC timestamp with milliseconds.
    pub fn claimed_at_iso(&self) -> String {
        i64::try_from(self.claimed_at_ms)
            .ok()
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map_or_else(
                || format!("{} ms since the Unix epoch", self.claimed_at_ms),
                |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            )
    }
}

impl fmt::Display for ShardHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "writer {} on host {} pid {} (epoch {}, claimed at {})",
            self.writer_id,
            self.host,
            self.pid,
            self.epoch,
            self.claimed_at_iso()
        )
    }
}

/// The "when the holder is unknown" phrase fence messages use, so all of them read alike.
pub(crate) fn describe_holder(holder: Option<&ShardHolder>) -> String {
    match holder {
        Some(h) => format!("The shard is owned by {h}"),
        None => "Another writer owns this shard (holder unknown: its manifest does not record one)"
            .to_string(),
    }
}
