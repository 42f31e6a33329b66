//! The shard's holder: every epoch claim records the claimant's writer id, host, pid and claim time
//! in the manifest, and a `PeerClaimedEpoch` fence names the holder that the manifest which fenced
//! the writer records (README, "Errors"). Manifests written before the holder fields existed still
//! open; their holder is reported as unknown.

mod support;

use memwal_core::manifest::ShardManifest;
use memwal_core::{ShardHolder, ShardWriter};
use support::*;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `e` is a `PeerClaimedEpoch` fence naming `holder`, in its `holder()` and its message.
fn assert_names(e: &memwal_core::Error, holder: &ShardHolder) {
    assert_peer_claimed(e);
    assert_eq!(e.holder(), Some(holder), "{e}");
    let text = e.to_string();
    let named = format!(
        "owned by writer {} on host {} pid {} (epoch {}, claimed at {})",
        holder.writer_id,
        holder.host,
        holder.pid,
        holder.epoch,
        holder.claimed_at_iso()
    );
    assert!(text.contains(&named), "{text}\ndoes not contain\n{named}");
}

/// The holder `w` recorded when it claimed its epoch.
fn holder_of(w: &ShardWriter, claimed_at_ms: u64) -> ShardHolder {
    ShardHolder {
        writer_id: w.writer_id().to_string(),
        host: memwal_host(),
        pid: std::process::id(),
        epoch: w.epoch(),
        claimed_at_ms,
    }
}

/// This machine's host name as memwal records it (read independently of memwal).
fn memwal_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_claim_records_the_writer_id_host_pid_epoch_and_claim_time() {
    for (backend, shard) in each_backend() {
        let before = now_ms();
        let w = shard.open(durable()).await;
        let after = now_ms();
        let h = shard
            .manifest()
            .await
            .holder()
            .expect("a claim records its holder");
        assert_eq!(h.writer_id, w.writer_id(), "{}", backend.name);
        assert_eq!(h.pid, std::process::id());
        assert_eq!(h.epoch, w.epoch());
        if cfg!(target_os = "linux") {
            assert_eq!(h.host, memwal_host());
        }
        assert!(!h.host.is_empty());
        assert!(
            (before..=after).contains(&h.claimed_at_ms),
            "claimed at {} outside [{before}, {after}]",
            h.claimed_at_ms
        );
        // Commits of the same epoch (a generation flush) keep the claim, not their own time.
        w.put(vec![batch([1])]).await.unwrap();
        w.close().await.unwrap();
        let m = shard.manifest().await;
        assert!(m.version > 1 && !m.flushed_generations.is_empty());
        assert_eq!(m.holder(), Some(h), "{}", backend.name);
    }
}

// The successor is in this process here; the next test has one on another host.
#[tokio::test]
async fn a_fenced_writers_errors_name_the_successor() {
    for (backend, shard) in each_backend() {
        let a = shard.open_and_put(durable(), [batch([1])]).await;
        let b = shard.open(durable()).await;
        let claimed = shard.manifest().await.holder().unwrap().claimed_at_ms;
        let successor = holder_of(&b, claimed);
        assert_ne!(successor.writer_id, a.writer_id(), "{}", backend.name);
        assert_names(&a.check_fenced().await.unwrap_err(), &successor);
        // The WAL append that finds the successor's sentinel, and the latched error after it.
        assert_names(&a.put(vec![batch([2])]).await.unwrap_err(), &successor);
        assert_names(&a.put(vec![batch([3])]).await.unwrap_err(), &successor);
        assert_names(&a.close().await.unwrap_err(), &successor);
        b.close().await.unwrap();
    }
}

#[tokio::test]
async fn the_holder_comes_from_the_manifest_that_fenced_the_writer() {
    let (_backend, shard) = Backend::memory().with_shard();
    let a = shard.open(durable()).await;
    // A successor in another process on another host claims (as its manifest records it).
    let latest = shard.manifest().await;
    let elsewhere = ShardManifest {
        version: latest.version + 1,
        writer_epoch: latest.writer_epoch + 1,
        writer_id: "writer-on-another-host".into(),
        writer_host: Some("db-7.example".into()),
        writer_pid: Some(4242),
        claimed_at_ms: Some(1_700_000_000_123),
        checksum: None,
        ..latest
    };
    shard.manifests().write(&elsewhere).await.unwrap();
    let e = a.check_fenced().await.unwrap_err();
    let successor = ShardHolder {
        writer_id: "writer-on-another-host".into(),
        host: "db-7.example".into(),
        pid: 4242,
        epoch: a.epoch() + 1,
        claimed_at_ms: 1_700_000_000_123,
    };
    assert_names(&e, &successor);
    assert!(
        e.to_string()
            .contains("claimed at 2023-11-14T22:13:20.123Z"),
        "{e}"
    );
}

// A manifest written before memwal recorded holders (no fields 1004-1006) still opens, and the
// new writer's claim adds its holder. A fence by such a manifest reports the holder as unknown,
// and is still the fence.
#[tokio::test]
async fn a_manifest_without_holder_fields_opens_and_its_fence_has_an_unknown_holder() {
    for (backend, shard) in each_backend() {
        shard.close_after(durable(), [batch([1])]).await;
        let latest = shard.manifest().await;
        let old_format = ShardManifest {
            version: latest.version + 1,
            writer_id: "old-writer".into(),
            writer_host: None,
            writer_pid: None,
            claimed_at_ms: None,
            checksum: None,
            ..latest
        };
        shard.manifests().write(&old_format).await.unwrap();
        assert_eq!(shard.manifest().await.holder(), None);
        let w = shard.open(durable()).await;
        assert_eq!(scanned_ids(&w).await, vec![1], "{}", backend.name);
        let m = shard.manifest().await;
        assert_eq!(
            m.holder().map(|h| h.writer_id),
            Some(w.writer_id().to_string())
        );
        let successor = ShardManifest {
            version: m.version + 1,
            writer_epoch: m.writer_epoch + 1,
            writer_id: "old-successor".into(),
            writer_host: None,
            writer_pid: None,
            claimed_at_ms: None,
            checksum: None,
            ..m
        };
        shard.manifests().write(&successor).await.unwrap();
        let e = w.check_fenced().await.unwrap_err();
        assert_peer_claimed(&e);
        assert_eq!(e.holder(), None);
        assert!(e.to_string().contains("holder unknown"), "{e}");
    }
}

// A successor that claims while we replay aborts our open; the error names it.
#[tokio::test]
async fn an_open_aborted_by_a_successor_during_replay_names_it() {
    for (backend, shard) in each_backend() {
        shard.crash_after(durable(), [batch([1])]).await;
        let pause = backend.store.faults().pause_at("open-before-replay");
        let slow = {
            let shard = shard.clone();
            tokio::spawn(async move { shard.try_open(durable()).await })
        };
        pause.reached().await;
        let fast = shard.open(durable()).await;
        let claimed = shard.manifest().await.holder().unwrap().claimed_at_ms;
        pause.release();
        let e = slow.await.unwrap().unwrap_err();
        assert!(e.to_string().contains("WAL replay aborted"), "{e}");
        assert_names(&e, &holder_of(&fast, claimed));
        fast.close().await.unwrap();
    }
}
