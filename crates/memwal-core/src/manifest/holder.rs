//! How a manifest records its [`ShardHolder`] (see [`crate::holder`]).

use std::sync::OnceLock;

use super::ShardManifest;
use crate::holder::ShardHolder;
#[cfg(test)]
use crate::holder::describe_holder;

impl ShardManifest {
    /// The writer holding the shard at this version, `None` if the manifest does not record
    /// one (it was written before memwal recorded holders, or by another implementation).
    pub fn holder(&self) -> Option<ShardHolder> {
        Some(ShardHolder {
            writer_id: self.writer_id.clone(),
            host: self.writer_host.clone()?,
            pid: self.writer_pid?,
            epoch: self.writer_epoch,
            claimed_at_ms: self.claimed_at_ms?,
        })
    }

    /// Records this process (host, pid) and the current time as the claimant of this version's
    /// epoch; `writer_id` is set by the caller.
    pub(crate) fn record_claim(&mut self) {
        self.writer_host = Some(this_host().to_string());
        self.writer_pid = Some(std::process::id());
        self.claimed_at_ms = Some(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        );
    }

    /// Carries the claimant's record of `latest` (the same epoch) into this new version.
    pub(crate) fn keep_claim_of(&mut self, latest: &ShardManifest) {
        self.writer_host.clone_from(&latest.writer_host);
        self.writer_pid = latest.writer_pid;
        self.claimed_at_ms = latest.claimed_at_ms;
    }
}

/// This machine's host name, read once per process; `unknown` if it cannot be read (the
/// holder record is for people, so a missing name must not fail a claim).
pub(crate) fn this_host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| read_host().unwrap_or_else(|| "unknown".to_string()))
}

#[cfg(unix)]
fn read_host() -> Option<String> {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_str().ok()?.trim();
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(not(unix))]
fn read_host() -> Option<String> {
    std::env::var("COMPUTERNAME").ok().filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_without_holder_fields_has_no_holder() {
        let m = ShardManifest {
            writer_id: "old".into(),
            writer_epoch: 3,
            ..Default::default()
        };
        assert_eq!(m.holder(), None);
        assert!(describe_holder(None).contains("holder unknown"));
    }

    #[test]
    fn a_claim_records_this_process() {
        let mut m = ShardManifest {
            writer_id: "w".into(),
            writer_epoch: 2,
            ..Default::default()
        };
        m.record_claim();
        let h = m.holder().expect("a claim records the holder");
        assert_eq!(
            (h.writer_id.as_str(), h.pid, h.epoch),
            ("w", std::process::id(), 2)
        );
        assert!(!h.host.is_empty());
        assert!(h.claimed_at_ms > 0);
        let text = h.to_string();
        assert!(
            text.starts_with(&format!(
                "writer w on host {} pid {} (epoch 2, claimed at ",
                h.host, h.pid
            )),
            "{text}"
        );
        assert!(text.ends_with("Z)"), "{text}");
    }
}
