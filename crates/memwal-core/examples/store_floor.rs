//! The raw durable-publish floor of memwal-core's local store, for the benchmark harness
//! (`npm run bench`, workload W0 and the floor rows of W1-W3).
//!
//! It publishes WAL-entry-sized objects through the same stack `Store::local(dir)` builds
//! (`FaultInjectingBackend` over `LocalStore` on `StdFs`, fsync on, faults off) with a
//! create-if-absent put (`Backend::create`) at `_mem_wal/<shard>/wal/<bitrev64(pos)>.arrow`,
//! and nothing else: no MemTable, no encoding, no manifest. `clients` closed-loop clients hand
//! their payloads to one committer task that publishes everything queued as one object (group
//! commit, like memwal's WAL flush handler), so `clients = 1` is a serial publish loop.
//!
//! ```text
//! cargo run --release -p memwal-core --example store_floor -- \
//!     --dir /tmp/floor --payload entry.arrow --clients 64 --warmup-ms 2000 --duration-ms 10000
//! ```
//!
//! Prints one JSON object on stdout: completed puts and objects in the measured window, its
//! length, and put latency percentiles in microseconds (invoke → acknowledged).

// A benchmark measures wall-clock time; the core's rule (tokio time only) is for testability.
#![allow(clippy::disallowed_types)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use memwal_core::Store;
use memwal_core::store::faults::{FaultInjectingBackend, Faults};
use memwal_core::store::fs::StdFs;
use memwal_core::store::local::LocalStore;
use memwal_core::store::{Backend, Staged};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

struct Args {
    dir: std::path::PathBuf,
    payload: Bytes,
    clients: usize,
    warmup: Duration,
    duration: Duration,
}

fn usage() -> ! {
    eprintln!(
        "usage: store_floor --dir DIR (--payload FILE | --bytes N) [--clients C] [--warmup-ms MS] [--duration-ms MS]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut dir = None;
    let mut payload = None;
    let mut clients = 1usize;
    let mut warmup_ms = 1000u64;
    let mut duration_ms = 5000u64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--dir" => dir = Some(std::path::PathBuf::from(value)),
            "--payload" => {
                let bytes = std::fs::read(&value).unwrap_or_else(|e| {
                    eprintln!("store_floor: cannot read {value}: {e}");
                    std::process::exit(2)
                });
                payload = Some(Bytes::from(bytes));
            }
            "--bytes" => {
                let n: usize = value.parse().unwrap_or_else(|_| usage());
                payload = Some(Bytes::from(vec![0x5a; n]));
            }
            "--clients" => clients = value.parse().unwrap_or_else(|_| usage()),
            "--warmup-ms" => warmup_ms = value.parse().unwrap_or_else(|_| usage()),
            "--duration-ms" => duration_ms = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    Args {
        dir: dir.unwrap_or_else(|| usage()),
        payload: payload.unwrap_or_else(|| usage()),
        clients: clients.max(1),
        warmup: Duration::from_millis(warmup_ms),
        duration: Duration::from_millis(duration_ms),
    }
}

/// One queued put: its payload and where to acknowledge it.
type Request = (Bytes, oneshot::Sender<Result<(), String>>);

/// Publishes everything queued as one create-if-absent object per round (group commit).
async fn committer(
    store: Arc<dyn Backend>,
    paths: memwal_core::store::ShardPaths,
    mut rx: mpsc::UnboundedReceiver<Request>,
    objects: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut position = 1u64;
    let mut batch: Vec<Request> = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let body = if batch.len() == 1 {
            batch[0].0.clone()
        } else {
            let mut buf = BytesMut::with_capacity(batch.iter().map(|r| r.0.len()).sum());
            for r in &batch {
                buf.extend_from_slice(&r.0);
            }
            buf.freeze()
        };
        let result = store
            .create(&[paths.wal_entry(position)], &Staged::bytes(body), false)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
        position += 1;
        objects.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (_, ack) in batch.drain(..) {
            let _ = ack.send(result.clone());
        }
    }
}

#[derive(Default)]
struct ClientResult {
    /// Latencies (µs) of puts invoked inside the measured window.
    latencies: Vec<f64>,
    /// Puts acknowledged inside the measured window.
    completed: u64,
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    let dir = std::path::absolute(&args.dir).expect("absolute path");
    // The stack `Store::local` builds (store.rs: `on_fs` → `with_faults`), from public parts:
    // `Store` does not expose its backend or its create-if-absent put.
    let faults = Arc::new(Faults::default());
    let local = LocalStore::new(Arc::new(StdFs), dir.clone(), true, faults.clone());
    let store: Arc<dyn Backend> = Arc::new(FaultInjectingBackend::new(Arc::new(local), faults));
    let paths = Store::local(&dir)
        .expect("local store")
        .shard_paths(Uuid::new_v4());

    let objects = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (tx, rx) = mpsc::unbounded_channel::<Request>();
    let committer = tokio::spawn(committer(store, paths, rx, objects.clone()));

    let start = Instant::now();
    let measure_from = start + args.warmup;
    let end = measure_from + args.duration;
    let mut handles = Vec::new();
    for _ in 0..args.clients {
        let tx = tx.clone();
        let payload = args.payload.clone();
        handles.push(tokio::spawn(async move {
            let mut r = ClientResult::default();
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let (ack, done) = oneshot::channel();
                if tx.send((payload.clone(), ack)).is_err() {
                    break;
                }
                match done.await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => panic!("store_floor: put failed: {e}"),
                    Err(_) => panic!("store_floor: committer stopped"),
                }
                let t1 = Instant::now();
                if t0 >= measure_from {
                    r.latencies.push((t1 - t0).as_secs_f64() * 1e6);
                }
                if t1 >= measure_from && t1 <= end {
                    r.completed += 1;
                }
            }
            r
        }));
    }
    drop(tx);
    tokio::time::sleep_until(measure_from.into()).await;
    let objects_at_start = objects.load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep_until(end.into()).await;
    let objects_in_window = objects.load(std::sync::atomic::Ordering::Relaxed) - objects_at_start;

    let mut latencies = Vec::new();
    let mut completed = 0u64;
    for h in handles {
        let r = h.await.expect("client task");
        latencies.extend(r.latencies);
        completed += r.completed;
    }
    committer.await.expect("committer task");
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| -> String {
        if latencies.is_empty() {
            return "null".to_string();
        }
        let i = ((p / 100.0) * latencies.len() as f64).ceil() as usize;
        format!("{:.1}", latencies[i.clamp(1, latencies.len()) - 1])
    };
    println!(
        "{{\"clients\":{},\"payloadBytes\":{},\"puts\":{},\"objects\":{},\"seconds\":{},\"latencyUs\":{{\"p50\":{},\"p99\":{},\"p999\":{},\"max\":{}}},\"samples\":{}}}",
        args.clients,
        args.payload.len(),
        completed,
        objects_in_window,
        args.duration.as_secs_f64(),
        pct(50.0),
        pct(99.0),
        pct(99.9),
        pct(100.0),
        latencies.len()
    );
}
