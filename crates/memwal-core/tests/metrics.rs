//! Writer metrics (`docs/operations.md`, "Metrics"): object-store requests by kind, retries and
//! failures by operation, latency histograms, and what the WAL entry that covered a durable put
//! cost. Every count here is exact: none depends on timing.

mod support;

use memwal_core::wal::WalLayout;

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use memwal_core::{
    DurableWatcher, ErrorCode, PutMode, PutOptions, ShardWriter, Store, Submitted, WriteStats,
};
use object_store::{ObjectStore, PutResult};
use support::forwarding::{Forwarding, Get, Hooks, Put, StoreResult};
use support::*;

/// The durable test config without background collection (it would add requests).
fn quiet() -> memwal_core::WriterConfig {
    durable().with(|c| c.gc = false)
}

fn delta(a: &WriteStats, b: &WriteStats) -> [u64; 7] {
    let (a, b) = (a.store, b.store);
    [
        b.put_requests - a.put_requests,
        b.put_bytes - a.put_bytes,
        b.get_requests - a.get_requests,
        b.get_bytes - a.get_bytes,
        b.head_requests - a.head_requests,
        b.list_requests - a.list_requests,
        b.delete_requests - a.delete_requests,
    ]
}

/// A durable put's watcher, submitted without waiting for it.
fn submit(w: &ShardWriter, id: i32) -> DurableWatcher {
    match w
        .submit(vec![batch([id])], PutMode::Put, PutOptions::default())
        .unwrap()
    {
        Submitted::Inserted(_, Some(watcher)) => watcher,
        other => panic!("a durable put in a fresh writer is inserted at once: {other:?}"),
    }
}

// Each durable put alone is one WAL entry: on the object layout one PUT of exactly its
// encoded bytes, on segments no store request at all (a record appended to a file), and
// nothing else: no GET, HEAD, LIST or DELETE on the put path.
#[tokio::test]
async fn each_sequential_durable_put_costs_exactly_one_put_request() {
    for layout in [WalLayout::Objects, WalLayout::Segments] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::local(dir.path())
            .unwrap()
            .with_new_shard_wal_layout(layout);
        let w = Shard::new(&store).open(quiet()).await;
        let opened = w.stats();
        // A fresh shard: one PUT (the claim's manifest version), reads that find nothing, no
        // DELETE (a local store needs no conditional-create probe).
        assert_eq!(opened.store.put_requests, 1, "{:?}", opened.store);
        assert_eq!(opened.store.get_bytes, 0, "{:?}", opened.store);
        assert_eq!(opened.store.delete_requests, 0, "{:?}", opened.store);
        assert!(
            opened.store.get_requests + opened.store.head_requests + opened.store.list_requests > 0,
            "open looks at the shard before claiming it: {:?}",
            opened.store
        );
        const N: u64 = 5;
        for i in 0..N as i32 {
            w.put(vec![batch([i])]).await.unwrap();
        }
        let after = w.stats();
        let wal_bytes = w.wal_stats().bytes_appended;
        let expected = match layout {
            WalLayout::Objects => [N, wal_bytes, 0, 0, 0, 0, 0],
            WalLayout::Segments => [0; 7],
        };
        assert_eq!(delta(&opened, &after), expected, "{layout:?}");
        assert_eq!(after.wal_append_latency.count, N);
        assert_eq!(after.put_to_durable_latency.count, N);
        assert!(after.put_to_durable_latency.max >= after.put_to_durable_latency.p50);
        assert_eq!(after.operations, Default::default(), "nothing was retried");
        w.close().await.unwrap();
    }
}

/// Counts, below the writer's own counting, what reaches the object store.
#[derive(Default)]
struct Tally {
    puts: AtomicU64,
    put_bytes: AtomicU64,
    gets: AtomicU64,
    heads: AtomicU64,
}

#[async_trait]
impl Hooks for Tally {
    async fn put(&self, inner: &dyn ObjectStore, put: Put<'_>) -> StoreResult<PutResult> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        self.put_bytes
            .fetch_add(put.payload.content_length() as u64, Ordering::SeqCst);
        put.forward(inner).await
    }

    async fn get(
        &self,
        inner: &dyn ObjectStore,
        get: Get<'_>,
    ) -> StoreResult<object_store::GetResult> {
        let counter = if get.options.head {
            &self.heads
        } else {
            &self.gets
        };
        counter.fetch_add(1, Ordering::SeqCst);
        get.forward(inner).await
    }
}

// Over a whole life (open with its conditional-create probe, puts, a generation flush and its
// manifest commit, close), the writer's counts equal those of an independent counter under it.
#[tokio::test]
async fn counts_by_kind_match_what_reaches_the_store() {
    let raw = Forwarding::in_memory(Tally::default());
    let store = raw.store("s3://tally");
    let w = Shard::new(&store).open(quiet()).await;
    for i in 0..4 {
        w.put(vec![batch([i])]).await.unwrap();
    }
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
    w.close().await.unwrap();
    let s = w.stats().store;
    let t = &raw.hooks;
    let get = |c: &AtomicU64| c.load(Ordering::SeqCst);
    assert_eq!(s.put_requests, get(&t.puts), "{s:?}");
    assert_eq!(s.put_bytes, get(&t.put_bytes), "{s:?}");
    assert_eq!(s.get_requests, get(&t.gets), "{s:?}");
    assert_eq!(s.head_requests, get(&t.heads), "{s:?}");
    assert_eq!(
        s.delete_requests, 1,
        "the conditional-create probe is removed: {s:?}"
    );
    assert!(s.get_bytes > 0, "the flush reads the manifest: {s:?}");
    let stats = w.stats();
    assert_eq!(stats.generation_flush_latency.count, 1);
    assert_eq!(stats.wal_append_latency.count, stats.wal_flush_count);
}

// Retries and failures move with the fault-injecting store, counted for the WAL append only.
#[tokio::test]
async fn wal_append_retries_and_failures_are_counted() {
    let store = Store::memory();
    let w = Shard::new(&store)
        .open(quiet().with(|c| c.max_wal_persist_retries = 3))
        .await;
    let before = w.stats();
    store.faults().fail_wal_puts(2);
    w.put(vec![batch([1])]).await.unwrap();
    let s = w.stats();
    assert_eq!(s.operations.wal_append.retries, 2);
    assert_eq!(s.operations.wal_append.failures, 0);
    assert_eq!(
        s.store.put_requests - before.store.put_requests,
        3,
        "two failed attempts and the one that landed"
    );
    assert_eq!(
        s.wal_append_latency.count, 1,
        "one sample per entry, retries included"
    );

    store.faults().fail_wal_puts(u64::MAX);
    let e = w.put(vec![batch([2])]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Fenced, "{e}");
    let s = w.stats();
    assert_eq!(s.operations.wal_append.retries, 2 + 3);
    assert_eq!(s.operations.wal_append.failures, 1);
    let others = memwal_core::Operation::ALL
        .into_iter()
        .filter(|op| *op != memwal_core::Operation::WalAppend)
        .map(|op| s.operations.of(op))
        .collect::<Vec<_>>();
    assert!(
        others.iter().all(|o| *o == Default::default()),
        "{others:?}"
    );
    store.faults().recover();
    let _ = w.abort().await;
}

// Puts acknowledged by one entry see the same position, cost and count; the cost is that
// entry's single PUT of its encoded bytes.
#[tokio::test]
async fn puts_sharing_an_entry_see_its_cost() {
    let store = Store::memory();
    let w = Shard::new(&store).open(quiet()).await;
    // On this single-threaded runtime the WAL handler runs only once the test awaits, so the
    // three puts are drained together: one entry.
    let watchers: Vec<_> = (0..3).map(|i| submit(&w, i)).collect();
    let mut costs = Vec::new();
    for watcher in watchers {
        costs.push(
            watcher
                .wait_cost()
                .await
                .unwrap()
                .expect("a put's own cell"),
        );
    }
    assert_eq!(w.stats().wal_flush_count, 1);
    let bytes = w.wal_stats().bytes_appended;
    for c in &costs {
        assert_eq!(*c, costs[0]);
    }
    assert_eq!(costs[0].puts, 3);
    assert_eq!(costs[0].requests, 1);
    assert_eq!(costs[0].bytes, bytes);
    let one = submit(&w, 9).wait_cost().await.unwrap().unwrap();
    assert_eq!(
        (one.position, one.puts, one.requests),
        (costs[0].position + 1, 1, 1)
    );
    // A retry answered from a remembered request id wrote nothing of its own.
    let retry = PutOptions::with_request_id(memwal_core::RequestId::new("r").unwrap());
    w.put_with(vec![batch([10])], retry.clone()).await.unwrap();
    match w.submit(vec![batch([10])], PutMode::Put, retry).unwrap() {
        Submitted::Inserted(_, Some(watcher)) => {
            assert_eq!(watcher.wait_cost().await.unwrap(), None)
        }
        other => panic!("{other:?}"),
    }
    w.close().await.unwrap();
}

/// Fails the first `n` generation-file puts (paths with a `_gen_` folder).
#[derive(Default)]
struct FailGenerationPuts {
    left: AtomicU64,
}

#[async_trait]
impl Hooks for FailGenerationPuts {
    async fn put(&self, inner: &dyn ObjectStore, put: Put<'_>) -> StoreResult<PutResult> {
        let is_generation = put.location.as_ref().contains("_gen_");
        if is_generation
            && self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(support::forwarding::injected(
                "generation",
                format!("injected failure at {}", put.location),
            ));
        }
        put.forward(inner).await
    }
}

// A generation flush that fails once and then succeeds counts one retry, for the flush only.
#[tokio::test]
async fn generation_flush_retries_are_counted() {
    let raw = Forwarding::in_memory(FailGenerationPuts {
        left: AtomicU64::new(1),
    });
    let store = raw.store("s3://flaky-generations");
    let w = Shard::new(&store).open(quiet()).await;
    w.put(vec![batch([1])]).await.unwrap();
    w.force_seal_active().await.unwrap();
    w.wait_for_flush_drain().await.unwrap();
    let s = w.stats();
    assert_eq!(s.memtable_flush_count, 1);
    assert_eq!(
        s.operations.generation_flush.retries, 1,
        "{:?}",
        s.operations
    );
    assert_eq!(s.operations.generation_flush.failures, 0);
    assert_eq!(s.operations.wal_append, Default::default());
    assert_eq!(s.operations.manifest_commit, Default::default());
    assert_eq!(s.generation_flush_latency.count, 1);
    w.close().await.unwrap();
}
