//! R6: durability honesty. An instrumented store records when each WAL entry's PUT returned
//! (the moment it became durable); every durable acknowledgement must come after the entry
//! holding its rows did. And a lone durable put settles without waiting for a timer.

mod support;

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use memwal_core::store::parse_bitrev64_name;
use memwal_core::{Store, WriterConfig};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};
use support::*;
use uuid::Uuid;

/// Forwards to `inner`, recording when each WAL entry's put returned.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ObjectStore>,
    durable_at: Mutex<HashMap<u64, Instant>>,
}

impl fmt::Display for Recording {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recording({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Recording {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let r = self.inner.put_opts(location, payload, opts).await;
        if r.is_ok()
            && location.parts().any(|p| p.as_ref() == "wal")
            && let Some(pos) = location.filename().and_then(parse_bitrev64_name)
        {
            self.durable_at.lock().unwrap().insert(pos, Instant::now());
        }
        r
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_durable_ack_comes_after_its_entry_is_durable() {
    let recording = Arc::new(Recording {
        inner: Arc::new(InMemory::new()),
        durable_at: Mutex::new(HashMap::new()),
    });
    let store = Store::from_object_store(recording.clone(), Path::default(), "recording");
    let shard = Uuid::new_v4();
    let config = WriterConfig {
        max_memtable_batches: 16,
        ..durable()
    };
    let w = Arc::new(open(&store, shard, config).await);
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let w = w.clone();
            tokio::spawn(async move {
                let mut acks = Vec::new();
                for i in 0..25 {
                    let id = t * 100 + i;
                    w.put(vec![batch([id])]).await.unwrap();
                    acks.push((id, Instant::now()));
                    if i % 10 == 9 {
                        w.force_seal_active().await.unwrap();
                    }
                }
                acks
            })
        })
        .collect();
    let mut acks = Vec::new();
    for t in tasks {
        acks.extend(t.await.unwrap());
    }
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
    let durable_at = recording.durable_at.lock().unwrap();
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
    for backend in Backend::all() {
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
