//! Stress: many concurrent durable puts across many forced rotations, with a peer writer taking
//! the shard over mid-stream. The durability contract (src/flush.rs) must hold for every put:
//! an `Ok` put is recovered exactly once; a put issued after the takeover fails with the
//! fence; nothing is duplicated or invented.
//!
//! Kept under a few seconds by default; `MEMWAL_STRESS_LONG=1` scales it up.

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use memwal_core::{Error, ErrorCode, FenceReason, ShardReader, WriterConfig};
use support::*;
use tokio::sync::watch;

struct Outcome {
    id: i32,
    /// The put started after the peer's open had returned.
    after_fence: bool,
    result: Result<(), Error>,
}

fn scale() -> (i32, i32) {
    if long_run("MEMWAL_STRESS_LONG") {
        (16, 500)
    } else {
        (8, 50)
    }
}

fn config() -> WriterConfig {
    WriterConfig {
        // Rotate often: every few puts by batch count, and by size, and on every seal.
        max_memtable_batches: 4,
        max_memtable_size: 2048,
        // The ticker races the puts' own requests (it matters only for non-durable rows,
        // but it exercises the handler's FlushAll path alongside them).
        max_wal_flush_interval_ms: Some(5),
        ..durable()
    }
}

async fn takeover_under_load(backend: Backend, tasks: i32, per_task: i32) {
    let shard = Shard::new(&backend.store);
    let a = Arc::new(shard.open(config()).await);
    let total = (tasks * per_task) as usize;
    let ok_puts = Arc::new(AtomicUsize::new(0));
    let (fenced_tx, fenced_rx) = watch::channel(false);
    let done = Arc::new(AtomicBool::new(false));

    // The peer claims the shard once a third of the puts succeeded.
    let peer = {
        let shard = shard.clone();
        let ok_puts = ok_puts.clone();
        tokio::spawn(async move {
            wait_until("a third of the puts succeeded", || {
                ok_puts.load(Ordering::SeqCst) >= total / 3
            })
            .await;
            let b = shard.open(config()).await;
            fenced_tx.send_replace(true);
            b
        })
    };

    // Forced rotations on top of the size and batch-count ones.
    let sealer = {
        let a = a.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut seals = 0u32;
            while !done.load(Ordering::SeqCst) {
                if a.force_seal_active().await.is_ok() {
                    seals += 1;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            seals
        })
    };

    // The last third of every task's puts waits for the takeover, so some puts are certainly
    // issued after it; the others race it.
    let writers = (0..tasks).map(|t| {
        let a = a.clone();
        let ok_puts = ok_puts.clone();
        let mut fenced_rx = fenced_rx.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            for j in 0..per_task {
                if j >= per_task * 2 / 3 {
                    fenced_rx.wait_for(|f| *f).await.unwrap();
                }
                let id = t * per_task + j;
                let after_fence = *fenced_rx.borrow();
                let result = a.put(vec![batch([id])]).await.map(|_| ());
                if result.is_ok() {
                    ok_puts.fetch_add(1, Ordering::SeqCst);
                }
                out.push(Outcome {
                    id,
                    after_fence,
                    result,
                });
            }
            out
        })
    });
    let outcomes: Vec<Outcome> = futures::future::join_all(writers)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();
    done.store(true, Ordering::SeqCst);
    let seals = sealer.await.unwrap();
    let b = peer.await.unwrap();
    let name = backend.name;

    let ok: HashSet<i32> = outcomes
        .iter()
        .filter(|o| o.result.is_ok())
        .map(|o| o.id)
        .collect();
    let issued: HashSet<i32> = outcomes.iter().map(|o| o.id).collect();
    assert_eq!(issued.len(), total);
    assert!(ok.len() >= total / 3, "{name}: {} ok", ok.len());
    let after: Vec<&Outcome> = outcomes.iter().filter(|o| o.after_fence).collect();
    assert!(
        after.len() >= total / 3,
        "{name}: {} after the fence",
        after.len()
    );
    for o in &after {
        assert!(
            o.result.is_err(),
            "{name}: put {} after the fence succeeded",
            o.id
        );
    }
    // Every failure is the fence, typed; nothing else went wrong.
    for o in &outcomes {
        if let Err(e) = &o.result {
            assert_eq!(e.code(), ErrorCode::Fenced, "{name}: put {}: {e}", o.id);
            assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch), "{e}");
        }
    }
    let a_generation = a.memtable_stats().unwrap().generation;
    assert!(
        a_generation >= 10,
        "{name}: only {a_generation} generations"
    );
    assert!(seals > 0, "{name}: no forced seal succeeded");

    // The peer replayed every acknowledged put, then adds its own.
    let b_view: HashSet<i32> = ids(&b.scan().await.unwrap()).into_iter().collect();
    let missing: Vec<&i32> = ok.difference(&b_view).collect();
    assert!(
        missing.is_empty(),
        "{name}: the peer lost acknowledged puts {missing:?}"
    );
    let marker = 10_000_000;
    for k in 0..10 {
        b.put(vec![batch([marker + k])]).await.unwrap();
    }
    let e = a.close().await.unwrap_err();
    assert_eq!(e.fence_reason(), Some(FenceReason::PeerClaimedEpoch), "{e}");
    b.close().await.unwrap();

    // What a fresh reader recovers: no duplicate, every acknowledged put, nothing invented.
    let reader = ShardReader::open(backend.store.clone(), shard.id)
        .await
        .unwrap();
    let recovered = ids(&reader.scan().await.unwrap().batches);
    let set: HashSet<i32> = recovered.iter().copied().collect();
    assert_eq!(
        set.len(),
        recovered.len(),
        "{name}: duplicate rows recovered"
    );
    let missing: Vec<&i32> = ok.difference(&set).collect();
    assert!(
        missing.is_empty(),
        "{name}: acknowledged puts lost: {missing:?}"
    );
    for k in 0..10 {
        assert!(set.contains(&(marker + k)), "{name}: peer put {k} lost");
    }
    for id in &set {
        assert!(
            issued.contains(id) || (marker..marker + 10).contains(id),
            "{name}: recovered id {id} was never put"
        );
    }
    // Puts after the fence failed and none of them is durable.
    for o in &after {
        assert!(
            !set.contains(&o.id),
            "{name}: fenced put {} is durable",
            o.id
        );
    }

    // A writer that takes over now replays the same rows.
    let c = shard.open(config()).await;
    let mut c_view = ids(&c.scan().await.unwrap());
    c_view.sort();
    let mut sorted = recovered.clone();
    sorted.sort();
    assert_eq!(c_view, sorted, "{name}");
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_durable_puts_survive_rotations_and_a_takeover() {
    let (tasks, per_task) = scale();
    for backend in Backend::all() {
        takeover_under_load(backend, tasks, per_task).await;
    }
}
