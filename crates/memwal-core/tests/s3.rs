//! memwal on S3: the core's fencing, failure, replay and seed-regression scenarios against an
//! in-process S3-compatible server (`support/s3.rs`: s3s-fs on 127.0.0.1, conditional create
//! honoured), through `object_store`'s AWS client exactly as a user's `s3://` location is.
//!
//! The retry tests inject the failures a real S3 shows (503, 500, connection resets) on the server
//! side, below `object_store`'s own retries, and check the outcomes that `docs/durability.md`
//! ("When a WAL append fails") states: the writer never fences itself over its own write, never
//! writes an entry twice, and every acknowledged put is in the WAL exactly once.

#[path = "support/s3.rs"]
mod s3_server;
mod support;

use std::collections::HashSet;
use std::sync::Arc;

use memwal_core::{ErrorCode, ShardWriter, Store};
use s3_server::{S3Fault, S3Server};
use support::*;

const WAL_KEYS: &str = "/wal/";

/// Every acknowledged id is recovered exactly once, and nothing else is.
async fn assert_acked_recovered_once(shard: &Shard, acked: &[i32]) {
    let got = shard.recovered_ids().await;
    let set: HashSet<i32> = got.iter().copied().collect();
    assert_eq!(set.len(), got.len(), "duplicate ids recovered: {got:?}");
    let want: HashSet<i32> = acked.iter().copied().collect();
    assert_eq!(set, want, "recovered ids differ from acknowledged ones");
}

/// Opening a writer on `store` fails, saying `why` and naming the store's `url`, and claims
/// nothing.
async fn assert_open_refused(store: Store, why: &str, url: &str) -> memwal_core::Error {
    let e = ShardWriter::open(store.clone(), schema(), durable())
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(m.contains(why), "{m}");
    assert!(m.contains(url), "{m}");
    let shards = store.list_shards().await.unwrap();
    assert!(shards.is_empty(), "nothing was claimed");
    e
}

/// The WAL holds every row at most once (no entry was written twice).
async fn assert_wal_has_no_duplicate_rows(shard: &Shard) {
    let t = shard.tailer().await;
    let n = t.next_position().await.unwrap();
    let mut seen = HashSet::new();
    for p in 1..n {
        let e = t.read(p).await.unwrap().expect("gap-free WAL");
        for id in ids(&e.batches) {
            assert!(
                seen.insert(id),
                "id {id} is in the WAL twice (position {p})"
            );
        }
    }
}

#[tokio::test]
async fn an_s3_location_round_trips_rows_through_the_wal_and_a_generation() {
    let server = S3Server::start().await;
    let store = server.store("tables/events");
    let shard = Shard::new(&store);
    let w = shard.open_and_put(durable(), [batch([1, 2])]).await;
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
    w.put(vec![batch([3])]).await.unwrap();
    assert_eq!(scanned_ids(&w).await, vec![1, 2, 3]);
    shard.close_and_assert_recovered(w, [1, 2, 3]).await;
    assert_eq!(store.list_shards().await.unwrap(), vec![shard.id]);
    // The objects sit under the URI's prefix, in the Lance layout.
    let wal_dir = server
        .root()
        .join(s3_server::BUCKET)
        .join("tables/events/_mem_wal")
        .join(shard.id.to_string())
        .join("wal");
    assert!(wal_dir.is_dir(), "{}", wal_dir.display());
}

// The seed bug's regression (`docs/durability.md`) on S3; see `durability.rs`.
#[tokio::test]
async fn durable_put_does_not_alias_across_memtable_generations() {
    let server = S3Server::start().await;
    let store = server.store("seed");
    let shard = Shard::new(&store);
    let a = shard.open_and_put(durable(), [batch([1])]).await;
    let g = a.memtable_stats().unwrap().generation;
    a.force_seal_active().await.unwrap();
    a.wait_for_flush_drain().await.unwrap();
    assert_eq!(a.memtable_stats().unwrap().generation, g + 1);

    // The successor is another process: its own client of the same bucket.
    let b = shard.through(server.store("seed")).open(durable()).await;
    assert!(b.epoch() > a.epoch());

    let e = a.put(vec![batch([2])]).await.unwrap_err();
    assert_peer_claimed(&e);
    assert_eq!(scanned_ids(&b).await, vec![1]);
    shard.close_and_assert_recovered(b, [1]).await;
}

#[tokio::test]
async fn a_second_writer_replays_the_first_and_fences_it() {
    let server = S3Server::start().await;
    let shard = Shard::new(&server.store("fence"));
    let a = shard
        .open_and_put(durable(), [batch([1, 2]), batch([3])])
        .await;
    let b = shard.through(server.store("fence")).open(durable()).await;
    assert_eq!(scanned_ids(&b).await, vec![1, 2, 3]);
    assert_eq!(b.wal_stats().fence_sentinel_position, Some(3));
    assert_peer_claimed(&a.put(vec![batch([4])]).await.unwrap_err());
    assert_peer_claimed(&a.check_fenced().await.unwrap_err());
    b.put(vec![batch([5])]).await.unwrap();
    b.close().await.unwrap();
    assert_peer_claimed(&a.close().await.unwrap_err());
    shard.assert_recovered([1, 2, 3, 5]).await;
}

#[tokio::test]
async fn concurrent_opens_of_one_shard_on_s3_claim_distinct_epochs() {
    let server = S3Server::start().await;
    let shard = Shard::new(&server.store("race"));
    let w = shard.open_and_put(durable(), [batch([0])]).await;
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let s = shard.through(server.store("race"));
            tokio::spawn(async move { s.try_open(durable()).await })
        })
        .collect();
    let mut writers = Vec::new();
    for o in opens {
        if let Ok(w) = o.await.unwrap() {
            writers.push(w);
        }
    }
    assert!(!writers.is_empty(), "some open wins");
    let epochs: HashSet<u64> = writers.iter().map(|w| w.epoch()).collect();
    assert_eq!(epochs.len(), writers.len(), "distinct epochs");
    // Only the highest epoch may write; every other writer is fenced on its next put.
    writers.sort_by_key(|w| w.epoch());
    let top = writers.pop().unwrap();
    for (i, w) in writers.iter().enumerate() {
        assert_peer_claimed(&w.put(vec![batch([100 + i as i32])]).await.unwrap_err());
    }
    assert_peer_claimed(&w.put(vec![batch([99])]).await.unwrap_err());
    top.put(vec![batch([1])]).await.unwrap();
    shard.close_and_assert_recovered(top, [0, 1]).await;
}

// Replay on S3: a crash keeps durable rows (from the generation and the WAL tail) and a reopen
// replays them once.
#[tokio::test]
async fn replay_after_a_crash_recovers_generations_and_the_wal_tail() {
    let server = S3Server::start().await;
    let shard = Shard::new(&server.store("replay"));
    let config = durable().with(|c| c.max_memtable_batches = 4);
    let w = shard
        .open_and_put(config.clone(), batch_per_id(0..10))
        .await;
    w.wait_for_flush_drain().await.unwrap();
    w.abort().await.unwrap(); // a crash: no final flush
    let m = shard.manifest().await;
    assert!(
        !m.flushed_generations.is_empty(),
        "rotations flushed generations"
    );
    let again = shard.open(config.clone()).await;
    assert_eq!(scanned_ids(&again).await, (0..10).collect::<Vec<_>>());
    again.put(vec![batch([10])]).await.unwrap();
    again.abort().await.unwrap();
    let third = shard.open(config).await;
    assert_eq!(scanned_ids(&third).await, (0..11).collect::<Vec<_>>());
    shard.close_and_assert_recovered(third, 0..11).await;
    assert_wal_has_no_duplicate_rows(&shard).await;
}

// On S3, a put that keeps failing with an error other than a taken slot poisons the writer with
// PersistenceFailure once retries run out, and acknowledges nothing it did not persist.
#[tokio::test]
async fn exhausted_retries_on_s3_poison_the_writer_and_lose_nothing_acknowledged() {
    let server = S3Server::start().await;
    // Few client retries, so that memwal's own retries are reached quickly.
    let shard = Shard::new(&server.store_with("poison", &[("client_max_retries", "1")]));
    let config = durable().with(|c| c.max_wal_persist_retries = 1);
    let w = shard.open_and_put(config.clone(), [batch([1])]).await;
    // Far more than object_store's retries times memwal's: every WAL put fails.
    server
        .faults()
        .inject("PutObject", WAL_KEYS, S3Fault::Internal, 1000);
    let e = w.put(vec![batch([2])]).await.unwrap_err();
    assert_persistence_failure(&e);
    assert!(e.to_string().contains("WAL persistence failed"), "{e}");
    assert_persistence_failure(&w.put(vec![batch([3])]).await.unwrap_err());
    server.faults().clear();
    let again = shard.open(config).await;
    assert_eq!(scanned_ids(&again).await, vec![1]);
    shard.close_and_assert_recovered(again, [1]).await;
}

/// Who retries a failed WAL put.
#[derive(Debug, PartialEq)]
enum RetriedBy {
    /// object_store, inside one memwal attempt (5xx responses).
    Client,
    /// memwal, at the same WAL position (errors the client does not retry).
    Memwal,
}

/// Durable puts while the server injects `fault` on the next `times` WAL PutObjects: every
/// put is acknowledged, the writer is not fenced, and every row is in the WAL exactly once.
async fn transient_faults_are_retried(fault: S3Fault, times: u32, retried_by: Option<RetriedBy>) {
    let server = S3Server::start().await;
    let shard = Shard::new(&server.store("retry"));
    let w = shard.open_and_put(durable(), [batch([0])]).await;
    let before = server.faults().requests("PutObject");
    server.faults().inject("PutObject", WAL_KEYS, fault, times);
    let mut acked = vec![0];
    for i in 1..=4 {
        w.put(vec![batch([i])])
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: put {i} failed: {e}"));
        acked.push(i);
    }
    assert_eq!(
        server.faults().injected(),
        times as u64,
        "{fault:?}: every fault was hit"
    );
    assert!(
        server.faults().requests("PutObject") > before + 4,
        "{fault:?}: failed puts were retried"
    );
    // memwal's own WAL put attempts: one per put unless it had to retry.
    let attempts = shard.store.faults().wal_put_attempts();
    match retried_by {
        Some(RetriedBy::Client) => assert_eq!(attempts, 5, "{fault:?}: retried by the client"),
        Some(RetriedBy::Memwal) => assert!(attempts > 5, "{fault:?}: retried by memwal"),
        None => assert!(attempts >= 5),
    }
    w.check_fenced().await.unwrap();
    assert_eq!(w.stats().wal_flush_count, 5, "{fault:?}: one entry per put");
    assert_eq!(
        shard.wal_len().await,
        5,
        "{fault:?}: no entry written twice"
    );
    w.put(vec![batch([5])]).await.unwrap();
    acked.push(5);
    w.abort().await.unwrap();
    assert_wal_has_no_duplicate_rows(&shard).await;
    assert_acked_recovered_once(&shard, &acked).await;
}

// The faults below object_store's retries, each on the next three WAL PutObjects:
// - a 503 or a 500 before the put is applied: object_store retries it;
// - a connection reset before the put is applied: memwal retries it at the same slot;
// - the ambiguous case: the put landed, the response was a 500, and object_store's own retry met
//   the object (412, reported as "already exists" from inside one memwal attempt). memwal reads the
//   slot back, finds exactly its entry, and acknowledges: no PersistenceFailure, no second copy at
//   the next slot;
// - the same with no response at all: the connection is reset after the put was applied.
#[tokio::test]
async fn transient_wal_put_faults_are_retried_without_loss_or_duplicate() {
    for (fault, retried_by) in [
        (S3Fault::Unavailable, Some(RetriedBy::Client)),
        (S3Fault::Internal, Some(RetriedBy::Client)),
        (S3Fault::Reset, Some(RetriedBy::Memwal)),
        (S3Fault::InternalAfterApply, Some(RetriedBy::Client)),
        (S3Fault::ResetAfterApply, None),
    ] {
        transient_faults_are_retried(fault, 3, retried_by).await;
    }
}

// Failures of the reads memwal makes while resolving an ambiguous put (the read-back) and
// while opening (manifest, listing) are retried too.
#[tokio::test]
async fn failed_reads_on_s3_are_retried() {
    let server = S3Server::start().await;
    let shard = Shard::new(&server.store("reads"));
    let w = shard.open_and_put(durable(), [batch([1])]).await;
    let f = server.faults();
    f.inject("PutObject", WAL_KEYS, S3Fault::InternalAfterApply, 1);
    f.inject("GetObject", WAL_KEYS, S3Fault::Unavailable, 2);
    w.put(vec![batch([2])]).await.unwrap();
    w.abort().await.unwrap();
    f.inject("GetObject", "", S3Fault::Internal, 2);
    f.inject("ListObjectsV2", "", S3Fault::Reset, 1);
    f.inject("HeadObject", "", S3Fault::Unavailable, 1);
    let again = shard.open(durable()).await;
    assert_eq!(scanned_ids(&again).await, vec![1, 2]);
    shard.close_and_assert_recovered(again, [1, 2]).await;
}

// Every kind of fault at once, under concurrent durable puts (group commit): all acknowledged,
// none duplicated, the writer never fences itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_survive_mixed_transient_faults() {
    let server = S3Server::start().await;
    let shard = Shard::new(&server.store("mixed"));
    // The faults may all hit one slot, and object_store does not retry a reset conditional PUT
    // (it is not idempotent for the client), so memwal sees up to four failures at one slot:
    // give it the budget. Exhausting it is `exhausted_retries_on_s3_...` above.
    let config = durable().with(|c| {
        c.max_memtable_batches = 64;
        c.max_wal_persist_retries = 8;
    });
    let w = Arc::new(shard.open(config.clone()).await);
    for fault in [
        S3Fault::Unavailable,
        S3Fault::InternalAfterApply,
        S3Fault::Reset,
        S3Fault::ResetAfterApply,
        S3Fault::Internal,
    ] {
        server.faults().inject("PutObject", WAL_KEYS, fault, 2);
    }
    let writer = w.clone();
    let acked = run_callers(16, 8, move |id| {
        let w = writer.clone();
        async move {
            w.put(vec![batch([id])]).await.unwrap();
            id
        }
    })
    .await;
    assert_eq!(server.faults().injected(), 10);
    w.check_fenced().await.unwrap();
    w.abort().await.unwrap();
    assert_wal_has_no_duplicate_rows(&shard).await;
    assert_acked_recovered_once(&shard, &acked).await;
    let again = shard.open(config).await;
    assert_eq!(scanned_ids(&again).await.len(), acked.len());
    again.close().await.unwrap();
}

// A store that silently overwrites on create (an S3-compatible server without conditional
// writes) cannot fence a stale writer: opening a writer on it fails, with a clear error.
#[tokio::test]
async fn a_server_without_conditional_writes_is_refused_at_open() {
    let server = S3Server::start().await;
    server.faults().set_ignore_conditional_writes(true);
    let e = assert_open_refused(
        server.store("unsafe"),
        "conditional create",
        "s3://memwal/unsafe",
    )
    .await;
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    // The same server with conditional writes on is accepted.
    server.faults().set_ignore_conditional_writes(false);
    let w = ShardWriter::open(server.store("unsafe"), schema(), durable())
        .await
        .unwrap();
    w.close().await.unwrap();
}

// An S3-compatible store that rejects conditional writes outright (501) cannot host a writer
// either; the error says why.
#[tokio::test]
async fn a_server_that_rejects_conditional_writes_fails_the_open_saying_why() {
    let server = S3Server::start().await;
    server.faults().set_reject_conditional_writes(true);
    let store = server.store_with("rejects", &[("client_max_retries", "0")]);
    assert_open_refused(store, "conditional writes", "s3://memwal/rejects").await;
}

// An endpoint may carry credentials (`http://user:pass@host`), and a store's error quotes the
// request's URL with them. A retry event hands that error's message to listeners (and from
// there to metrics and logs), so it comes masked.
#[tokio::test]
async fn a_retry_event_on_s3_never_carries_the_endpoint_credentials() {
    const PLANTED: &str = "PLANTED-endpoint-password";
    let server = S3Server::start().await;
    let endpoint = server
        .endpoint()
        .replace("http://", &format!("http://user:{PLANTED}@"));
    let store = server.store_with(
        "masked",
        &[("endpoint", endpoint.as_str()), ("client_max_retries", "0")],
    );
    let shard = Shard::new(&store);
    let w = shard.open(durable()).await;
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = events.clone();
    w.on_event(Arc::new(move |e| kept.lock().unwrap().push(e)))
        .unwrap();
    // Not retried by the client (no retries left to it): memwal retries, and says so.
    server
        .faults()
        .inject("PutObject", WAL_KEYS, S3Fault::Internal, 1);
    w.put(vec![batch([1])]).await.unwrap();
    let retries: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            memwal_core::WriterEvent::Retry { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(!retries[0].contains(PLANTED), "{}", retries[0]);
    shard.close_and_assert_recovered(w, [1]).await;
}
