//! The segment-log WAL as a writer uses it (`walLayout: 'segments'`, `docs/wal-segments.md`):
//! puts, replay, readers, the layout recorded in the manifest, one sync per group commit, and
//! the fencing races a claim can run into, driven deterministically with pause points.

mod support;

use std::sync::Arc;

use memwal_core::store::sim_fs::SimFs;
use memwal_core::wal::WalLayout;
use memwal_core::{ErrorCode, ShardReader, ShardWriter, Store, WriterConfig};
use support::*;

/// Durable, segment layout, small segments so that tests rotate.
fn segments() -> WriterConfig {
    durable().with(|c| {
        c.wal_layout = Some(WalLayout::Segments);
        c.wal_segment_bytes = 64 << 10;
    })
}

// Durable puts come back after a clean close, after a crash, and to a reader meanwhile; the
// manifest records the layout, and a later open without walLayout keeps it.
#[tokio::test]
async fn puts_replay_and_read_back_on_segments() {
    let (_b, shard) = Backend::local().with_shard();
    let a = shard.open(segments()).await;
    for i in 0..5 {
        a.put(vec![rows(i * 3, 3)]).await.unwrap();
    }
    assert_eq!(
        WalLayout::of(&shard.manifest().await),
        WalLayout::Segments,
        "the manifest records the layout"
    );
    shard.assert_recovered(0..15).await;
    drop(a);
    let b = shard.open(durable()).await;
    assert_eq!(scanned_ids(&b).await, (0..15).collect::<Vec<_>>());
    b.put(vec![rows(15, 2)]).await.unwrap();
    shard.close_and_assert_recovered(b, 0..17).await;
    let c = shard.open(durable()).await;
    assert_eq!(scanned_ids(&c).await, (0..17).collect::<Vec<_>>());
    assert!(
        shard.wal_entries().await.is_empty()
            || WalLayout::of(&shard.manifest().await) == WalLayout::Segments,
        "no object-layout entries were written"
    );
}

// Enough puts to rotate through several segments and flush generations; a reopen recovers
// every row once.
#[tokio::test]
async fn rotations_and_generation_flushes_lose_nothing() {
    let (backend, shard) = Backend::local().with_shard();
    let config = segments().with(|c| c.max_memtable_batches = 16);
    let a = shard.open(config.clone()).await;
    let payload = 40;
    for i in 0..60 {
        a.put(vec![rows(i * payload, payload as usize)])
            .await
            .unwrap();
    }
    drop(a);
    let dir = backend
        .path()
        .unwrap()
        .join(format!("_mem_wal/{}/segments", shard.id));
    let segs = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".seg")
        })
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert!(segs >= 2, "the log rotated: {segs} segments");
    let b = shard.open(config).await;
    assert_eq!(scanned_ids(&b).await, (0..60 * payload).collect::<Vec<_>>());
    shard.close_and_assert_recovered(b, 0..60 * payload).await;
}

// A shard keeps the layout it was created with: asking for the other one is a clear error
// naming the conversion, and the segment layout needs a local directory.
#[tokio::test]
async fn the_layout_is_the_shards_and_segments_need_a_local_directory() {
    let (_b, shard) = Backend::local().with_shard();
    shard.open(durable()).await.close().await.unwrap();
    let e = shard.try_open(segments()).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "memwal wal convert");
    assert_error(&e, ErrorCode::InvalidArgument, "objects layout");

    let (_b, shard) = Backend::local().with_shard();
    shard.open(segments()).await.close().await.unwrap();
    let objects = durable().with(|c| c.wal_layout = Some(WalLayout::Objects));
    let e = shard.try_open(objects).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "segments layout");

    let (_b, shard) = Backend::memory().with_shard();
    let e = shard.try_open(segments()).await.unwrap_err();
    assert_error(&e, ErrorCode::InvalidArgument, "local directory");
}

// One sync per group commit, counted on a simulated disk: a lone put costs one `fdatasync`,
// and a burst of puts that arrive while one commit runs shares the next.
#[tokio::test]
async fn a_lone_put_and_a_burst_each_cost_one_sync_per_group_commit() {
    let fs = Arc::new(SimFs::new());
    let store = Store::on_fs(fs.clone(), "/data".into(), true);
    let shard = Shard::new(&store);
    let w = shard.open(segments()).await;
    w.put(vec![rows(0, 1)]).await.unwrap();
    // Let the background spare allocation finish before counting.
    wait_spare_ready(&fs).await;
    for i in 1..6 {
        let before = fs.persistence_points();
        w.put(vec![rows(i, 1)]).await.unwrap();
        assert_eq!(fs.persistence_points() - before, 1, "a lone put syncs once");
    }
    let before = fs.persistence_points();
    let w = Arc::new(w);
    let puts: Vec<_> = (0..32)
        .map(|i| {
            let w = w.clone();
            tokio::spawn(async move { w.put(vec![rows(100 + i, 1)]).await.unwrap() })
        })
        .collect();
    for p in puts {
        p.await.unwrap();
    }
    let syncs = fs.persistence_points() - before;
    assert!(
        (1..=2).contains(&syncs),
        "32 puts queued at once take one group commit (two if the first started alone): {syncs} syncs"
    );
}

/// Waits until the simulated disk stops counting persistence points (the writer's background
/// spare allocation is done).
async fn wait_spare_ready(fs: &Arc<SimFs>) {
    let mut last = fs.persistence_points();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let now = fs.persistence_points();
        if now == last {
            return;
        }
        last = now;
    }
}

// A claim between a stale writer's sync and its re-check: the claimant read the record (it was
// in the page cache) and starts past it, so the record stands and its put succeeds, and the
// claimant replays it.
#[tokio::test]
async fn a_claim_between_sync_and_recheck_replays_the_record_and_its_put_succeeds() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let pause = backend
        .store
        .faults()
        .pause_at("wal-segments-before-recheck");
    let put = spawn_put(&a, vec![rows(1, 1)]);
    pause.reached().await;
    let b = shard
        .through(backend.second_handle())
        .open(segments())
        .await;
    pause.release();
    put.await
        .unwrap()
        .expect("the record stands: the claimant replayed it");
    assert_eq!(scanned_ids(&b).await, vec![0, 1]);
    let e = a.put(vec![rows(2, 1)]).await.unwrap_err();
    assert_peer_claimed(&e);
    shard.close_and_assert_recovered(b, [0, 1]).await;
}

// A stale writer that appends after a claim read the log: its record is at or past the
// claimant's first position, so its put fails with PeerClaimedEpoch, and no reader or later
// writer ever sees the row. Without the re-check after the sync, the put would succeed and the
// row be lost.
#[tokio::test]
async fn a_stale_writers_append_after_a_claim_is_refused_and_never_read() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let pause = backend.store.faults().pause_at("wal-append-before-put");
    let put = spawn_put(&a, vec![rows(1, 1)]);
    pause.reached().await;
    let other = shard.through(backend.second_handle());
    let b = other.open(segments()).await;
    pause.release();
    let e = put.await.unwrap().unwrap_err();
    assert_peer_claimed(&e);
    b.put(vec![rows(2, 1)]).await.unwrap();
    assert_eq!(scanned_ids(&b).await, vec![0, 2]);
    b.close().await.unwrap();
    other.assert_recovered([0, 2]).await;
    let c = other.open(segments()).await;
    assert_eq!(
        scanned_ids(&c).await,
        vec![0, 2],
        "the stale record is never replayed"
    );
}

// A stale writer keeps writing into its old segment after the claim, across rotations: every
// put fails, and nothing it wrote is read.
#[tokio::test]
async fn a_stale_writer_writing_on_in_its_old_segment_is_never_read() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = shard.open(segments()).await;
    a.put(vec![rows(0, 1)]).await.unwrap();
    let other = shard.through(backend.second_handle());
    let b = other.open(segments()).await;
    for i in 1..4 {
        // Big enough to rotate a 64 KiB segment within a few puts.
        let e = a.put(vec![rows(i * 1000, 900)]).await.unwrap_err();
        assert_peer_claimed(&e);
    }
    b.put(vec![rows(1, 1)]).await.unwrap();
    b.close().await.unwrap();
    other.assert_recovered([0, 1]).await;
}

// Two writers in turn, each taking the shard over from the other many times: every
// acknowledged row is read back once, in order.
#[tokio::test]
async fn takeovers_back_and_forth_keep_every_acknowledged_row() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let other = shard.through(backend.second_handle());
    let mut expected = Vec::new();
    let mut stale: Option<ShardWriter> = None;
    for round in 0..8 {
        let s = if round % 2 == 0 { &shard } else { &other };
        let w = s.open(segments()).await;
        if let Some(old) = stale.take() {
            assert_peer_claimed(&old.put(vec![rows(10_000 + round, 1)]).await.unwrap_err());
        }
        for i in 0..3 {
            let id = round * 10 + i;
            w.put(vec![rows(id, 1)]).await.unwrap();
            expected.push(id);
        }
        stale = Some(w);
    }
    drop(stale);
    shard.assert_recovered(expected).await;
}

// A claim while the stale writer is about to rotate: its rotation finds the next segment
// number taken by the claimant's segment, and its put fails; nothing it wrote after the claim
// is read.
#[tokio::test]
async fn a_claim_before_a_stale_writers_rotation_fences_the_rotation() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let pause = backend.store.faults().pause_at("wal-append-before-put");
    // More than a 64 KiB segment holds: this append must rotate.
    let put = spawn_put(&a, vec![rows(1000, 4000)]);
    pause.reached().await;
    let other = shard.through(backend.second_handle());
    let b = other.open(segments()).await;
    pause.release();
    assert_peer_claimed(&put.await.unwrap().unwrap_err());
    b.put(vec![rows(1, 1)]).await.unwrap();
    b.close().await.unwrap();
    other.assert_recovered([0, 1]).await;
}

// A claim in the middle of a burst of puts that rotate segment after segment: every put that
// succeeded is read back once, in order, and no put that failed left a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_during_a_burst_of_rotations_keeps_exactly_the_acknowledged_rows() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = Arc::new(shard.open(segments()).await);
    let puts: Vec<_> = (0..40)
        .map(|i| (i, spawn_put(&a, vec![rows(i * 1000, 600)])))
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let other = shard.through(backend.second_handle());
    let b = other.open(segments()).await;
    let mut acknowledged = Vec::new();
    for (i, put) in puts {
        match put.await.unwrap() {
            Ok(_) => acknowledged.push(i),
            Err(e) => assert_peer_claimed(&e),
        }
    }
    let expected: Vec<i32> = acknowledged
        .iter()
        .flat_map(|i| i * 1000..i * 1000 + 600)
        .collect();
    let got = scanned_ids(&b).await;
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(got_sorted, expected_sorted, "exactly the acknowledged rows");
    b.close().await.unwrap();
    let mut recovered = other.recovered_ids().await;
    recovered.sort();
    assert_eq!(recovered, expected_sorted);
}

// A read while a claim is under way (the claimant wrote the fence file and read the log, and
// has not started its segment) waits for the claim to settle: a stale writer's record appended
// meanwhile, past the end the claimant read, is never returned, and its put fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_during_a_claim_never_returns_a_record_the_claim_refuses() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let claimant = shard.through(backend.second_handle());
    let pause = claimant.store.faults().pause_at("wal-segments-claim-read");
    let claim = {
        let claimant = Shard::at(&claimant.store, shard.id);
        tokio::spawn(async move { claimant.open(segments()).await })
    };
    pause.reached().await;
    let stale = spawn_put(&a, vec![rows(1, 1)]);
    // The stale record is in the page cache; its commit waits for the claimant's segment.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let reader = ShardReader::open(backend.second_handle(), shard.id)
        .await
        .unwrap();
    let scan = tokio::spawn(async move { reader.scan().await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        !scan.is_finished(),
        "the read waits for the claim to settle"
    );
    pause.release();
    let b = claim.await.unwrap();
    assert_eq!(ids(&scan.await.unwrap().unwrap().batches), vec![0]);
    assert_peer_claimed(&stale.await.unwrap().unwrap_err());
    b.close().await.unwrap();
}

// A claim overtaken after it read the log, before it started its segment: the later claim took
// the segment number it meant to take, and the fence file names the later claim, so the
// overtaken open fails instead of starting a segment of a lower epoch after a higher one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_overtaken_before_its_segment_fails_and_the_later_claim_keeps_the_shard() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    shard.open(segments()).await.close().await.unwrap();
    let slow = shard.through(backend.second_handle());
    let pause = slow.store.faults().pause_at("wal-segments-claim-read");
    let slow_open = {
        let slow = Shard::at(&slow.store, shard.id);
        tokio::spawn(async move { slow.try_open(segments()).await })
    };
    pause.reached().await;
    let fast = shard.open(segments()).await;
    fast.put(vec![rows(1, 1)]).await.unwrap();
    pause.release();
    match slow_open.await.unwrap() {
        Err(e) => assert_peer_claimed(&e),
        Ok(w) => assert_peer_claimed(&w.put(vec![rows(99, 1)]).await.unwrap_err()),
    }
    fast.put(vec![rows(2, 1)]).await.unwrap();
    shard.close_and_assert_recovered(fast, [1, 2]).await;
}
