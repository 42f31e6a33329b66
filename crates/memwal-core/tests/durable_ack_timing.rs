//! When a durable put is acknowledged: never before the WAL entry holding its rows is durable,
//! and, for a lone put, without waiting for the WAL flush ticker.
//!
//! A store that records the moment each WAL entry's PUT returned (when the entry became
//! durable) shows every acknowledgement coming after its entry's, under concurrent puts and
//! seals; a paused clock shows a lone put not waiting for the next tick.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use memwal_core::WriterConfig;
use memwal_core::store::parse_bitrev64_name;
use object_store::{ObjectStore, PutResult};
use support::forwarding::{Forwarding, Hooks, Put, StoreResult, is_wal};
use support::*;
use uuid::Uuid;

/// Records when each WAL entry's put returned, by WAL position.
#[derive(Default)]
struct DurableAt(Mutex<HashMap<u64, Instant>>);

#[async_trait]
impl Hooks for DurableAt {
    async fn put(&self, inner: &dyn ObjectStore, put: Put<'_>) -> StoreResult<PutResult> {
        let location = put.location;
        let r = put.forward(inner).await;
        if r.is_ok()
            && is_wal(location)
            && let Some(pos) = location.filename().and_then(parse_bitrev64_name)
        {
            self.0.lock().unwrap().insert(pos, Instant::now());
        }
        r
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_durable_ack_comes_after_its_entry_is_durable() {
    let recording = Forwarding::in_memory(DurableAt::default());
    let store = recording.store("recording");
    let shard = Uuid::new_v4();
    let config = WriterConfig {
        max_memtable_batches: 16,
        ..durable()
    };
    let w = Arc::new(open(&store, shard, config).await);
    let writer = w.clone();
    let acks = run_callers(16, 25, move |id| {
        let w = writer.clone();
        async move {
            w.put(vec![batch([id])]).await.unwrap();
            let acked = Instant::now();
            if id % 10 == 9 {
                w.force_seal_active().await.unwrap();
            }
            (id, acked)
        }
    })
    .await;
    w.close().await.unwrap();
    // Which entry holds each row.
    let tailer = memwal_core::WalTailer::open(store.clone(), shard)
        .await
        .unwrap();
    let mut entry_of = HashMap::new();
    for p in 1..tailer.next_position().await.unwrap() {
        let e = tailer.read(p).await.unwrap().unwrap();
        for id in ids(&e.batches) {
            assert!(entry_of.insert(id, p).is_none(), "row {id} in two entries");
        }
    }
    let durable_at = recording.hooks.0.lock().unwrap();
    for (id, acked) in acks {
        let p = entry_of[&id];
        assert!(
            acked >= durable_at[&p],
            "row {id} acknowledged before entry {p} was durable"
        );
    }
}

// No timer floor: with a 1 s ticker, a lone durable put still settles at once (SlateDB's idle
// durable writes waited for the next 100 ms tick). The clock is paused, so only timers move it
// (local I/O on the blocking pool holds it still): a put that waited for the tick would take the
// full second, whatever the machine's load, and one that did not takes none of it.
#[tokio::test(start_paused = true)]
async fn a_lone_durable_put_settles_without_waiting_for_the_ticker() {
    for backend in Backend::every_layout() {
        let w = open(
            &backend.store,
            Uuid::new_v4(),
            WriterConfig {
                max_wal_flush_interval_ms: Some(1_000),
                ..durable()
            },
        )
        .await;
        w.put(vec![batch([0])]).await.unwrap();
        let started = Instant::now();
        w.put(vec![batch([1])]).await.unwrap();
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(1_000),
            "{}: a lone put waited {took:?} of the paused clock",
            backend.name
        );
        w.close().await.unwrap();
    }
}
