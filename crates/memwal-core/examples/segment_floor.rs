//! The raw floor of a segment-log WAL, for the benchmark harness (`npm run bench`, the
//! `segment-floor-rust` rows of W1 and W2): records written at the next offset of a
//! preallocated file, then one `fdatasync` per group commit. No memwal code runs: this is what
//! the disk allows for that layout, before encoding, fencing or JavaScript.
//!
//! The segment is zero-filled and fsynced before the clock starts, so that a commit's
//! `fdatasync` has data blocks to write and no metadata (an append would change the file's
//! size; fallocated extents would change from unwritten to written). A round that would run
//! past the segment's end starts again at offset 0, as a recycled segment is reused.
//!
//! `clients` closed-loop tasks hand their records to one committer thread, which writes
//! everything queued with one `pwrite` and then syncs; records arriving during the sync form
//! the next round (at most one sync in flight, no timer). `clients = 1` is a serial loop.
//!
//! ```text
//! cargo run --release -p memwal-core --example segment_floor -- \
//!     --dir /tmp/floor --record-bytes 132 --clients 64 --warmup-ms 2000 --duration-ms 10000
//! ```
//!
//! Prints one JSON object on stdout: puts and rounds (each one `fdatasync`) completed in the
//! measured window, its length, and put latency percentiles in microseconds.

// A benchmark measures wall-clock time; the core's rule (tokio time only) is for testability.
#![allow(clippy::disallowed_types)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

struct Args {
    dir: PathBuf,
    record_bytes: usize,
    segment_bytes: u64,
    clients: usize,
    warmup: Duration,
    duration: Duration,
}

fn usage() -> ! {
    eprintln!(
        "usage: segment_floor --dir DIR [--record-bytes N] [--segment-bytes N] [--clients C] [--warmup-ms MS] [--duration-ms MS]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut dir = None;
    let mut record_bytes = 132usize;
    let mut segment_bytes = 64u64 << 20;
    let mut clients = 1usize;
    let mut warmup_ms = 1000u64;
    let mut duration_ms = 5000u64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--dir" => dir = Some(PathBuf::from(value)),
            "--record-bytes" => record_bytes = value.parse().unwrap_or_else(|_| usage()),
            "--segment-bytes" => segment_bytes = value.parse().unwrap_or_else(|_| usage()),
            "--clients" => clients = value.parse().unwrap_or_else(|_| usage()),
            "--warmup-ms" => warmup_ms = value.parse().unwrap_or_else(|_| usage()),
            "--duration-ms" => duration_ms = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let record_bytes = record_bytes.max(1);
    Args {
        dir: dir.unwrap_or_else(|| usage()),
        record_bytes,
        // Room for a round of every client's record, so that a round never wraps mid-write.
        segment_bytes: segment_bytes.max((record_bytes * clients.max(1)) as u64),
        clients: clients.max(1),
        warmup: Duration::from_millis(warmup_ms),
        duration: Duration::from_millis(duration_ms),
    }
}

/// The segment: `bytes` zeros, written and synced with its folder, open for writing.
fn preallocate(dir: &std::path::Path, bytes: u64) -> std::io::Result<File> {
    std::fs::create_dir_all(dir)?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("segment"))?;
    let zeros = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    file.sync_all()?;
    File::open(dir)?.sync_all()?;
    Ok(file)
}

/// One queued put: its record and where to acknowledge it.
type Request = (Arc<[u8]>, oneshot::Sender<Result<(), String>>);

/// Writes everything queued at the next offset, then syncs, then acknowledges (group commit).
fn committer(
    file: File,
    segment_bytes: u64,
    mut rx: mpsc::UnboundedReceiver<Request>,
    rounds: Arc<AtomicU64>,
) {
    let mut offset = 0u64;
    let mut batch: Vec<Request> = Vec::new();
    let mut body: Vec<u8> = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        body.clear();
        for (record, _) in &batch {
            body.extend_from_slice(record);
        }
        if offset + body.len() as u64 > segment_bytes {
            offset = 0;
        }
        let result = file
            .write_all_at(&body, offset)
            .and_then(|()| file.sync_data())
            .map_err(|e| e.to_string());
        offset += body.len() as u64;
        rounds.fetch_add(1, Ordering::Relaxed);
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
    let file = preallocate(&args.dir, args.segment_bytes).unwrap_or_else(|e| {
        eprintln!(
            "segment_floor: cannot preallocate in {}: {e}",
            args.dir.display()
        );
        std::process::exit(1)
    });

    let rounds = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::unbounded_channel::<Request>();
    let committer = {
        let rounds = rounds.clone();
        let segment_bytes = args.segment_bytes;
        std::thread::spawn(move || committer(file, segment_bytes, rx, rounds))
    };

    let start = Instant::now();
    let measure_from = start + args.warmup;
    let end = measure_from + args.duration;
    let mut handles = Vec::new();
    for client in 0..args.clients {
        let tx = tx.clone();
        let record_bytes = args.record_bytes;
        handles.push(tokio::spawn(async move {
            let mut r = ClientResult::default();
            let mut record = vec![0x5a_u8; record_bytes];
            for seq in 0u64.. {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                // Each put's record is its own (stamped), as a WAL's records are.
                let stamp = (client as u64) << 40 | seq;
                let n = record.len().min(8);
                record[..n].copy_from_slice(&stamp.to_le_bytes()[..n]);
                let (ack, done) = oneshot::channel();
                if tx.send((Arc::from(record.as_slice()), ack)).is_err() {
                    break;
                }
                match done.await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => panic!("segment_floor: put failed: {e}"),
                    Err(_) => panic!("segment_floor: committer stopped"),
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
    let rounds_at_start = rounds.load(Ordering::Relaxed);
    tokio::time::sleep_until(end.into()).await;
    let rounds_in_window = rounds.load(Ordering::Relaxed) - rounds_at_start;

    let mut latencies = Vec::new();
    let mut completed = 0u64;
    for h in handles {
        let r = h.await.expect("client task");
        latencies.extend(r.latencies);
        completed += r.completed;
    }
    committer.join().expect("committer thread");
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| -> String {
        if latencies.is_empty() {
            return "null".to_string();
        }
        let i = ((p / 100.0) * latencies.len() as f64).ceil() as usize;
        format!("{:.1}", latencies[i.clamp(1, latencies.len()) - 1])
    };
    println!(
        "{{\"clients\":{},\"recordBytes\":{},\"segmentBytes\":{},\"puts\":{},\"rounds\":{},\"seconds\":{},\"latencyUs\":{{\"p50\":{},\"p99\":{},\"p999\":{},\"max\":{}}},\"samples\":{}}}",
        args.clients,
        args.record_bytes,
        args.segment_bytes,
        completed,
        rounds_in_window,
        args.duration.as_secs_f64(),
        pct(50.0),
        pct(99.0),
        pct(99.9),
        pct(100.0),
        latencies.len()
    );
}
