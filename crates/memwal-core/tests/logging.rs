//! Logs (`docs/operations.md`, "Logs"): state changes are logged at `info` with their fields
//! (claim, seal, flush, fence, retry), a put logs nothing above `trace`, and nothing is built with
//! no subscriber.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use memwal_core::{PutOptions, RequestId, ShardWriter};
use support::*;
use tracing::level_filters::LevelFilter;

/// Log output captured as text, one record a line.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The one line with `message`; panics unless there is exactly one.
    fn line(&self, message: &str) -> String {
        let found: Vec<_> = self
            .lines()
            .into_iter()
            .filter(|l| l.contains(message))
            .collect();
        assert_eq!(found.len(), 1, "{message}: {:#?}", self.lines());
        found[0].clone()
    }
}

/// Captures the records at `level` and above while it is alive (this thread only: the tests
/// run on a current-thread runtime, so the writer's tasks log here too).
fn capture(level: LevelFilter) -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

#[tokio::test]
async fn claim_seal_flush_and_fence_are_logged_with_their_fields() {
    let (logs, _guard) = capture(LevelFilter::INFO);
    let (_backend, shard) = Backend::memory().with_shard();
    let a = shard
        .open(durable().with(|c| {
            c.max_memtable_batches = 1;
            c.compaction = false;
        }))
        .await;
    let claim = logs.line("claimed shard");
    assert!(claim.contains(" INFO "), "{claim}");
    assert!(claim.contains(&format!("shard={}", shard.id)), "{claim}");
    assert!(claim.contains("epoch=1"), "{claim}");
    assert!(
        claim.contains(&format!("writer_id={}", a.writer_id())),
        "{claim}"
    );

    // One batch fills the MemTable: it is sealed and flushed as generation 1.
    a.put(vec![rows(0, 3)]).await.unwrap();
    wait_until_logged(&logs, "flushed generation").await;
    let sealed = logs.line("sealed MemTable shard");
    assert!(
        sealed.contains(&format!("shard={} generation=1 batches=1", shard.id)),
        "{sealed}"
    );
    let flushed = logs.line("flushed generation shard");
    assert!(flushed.contains("generation=1"), "{flushed}");
    assert!(flushed.contains("rows=3"), "{flushed}");
    assert!(flushed.contains("bytes="), "{flushed}");
    assert!(flushed.contains("ms="), "{flushed}");

    let b = shard.open(durable()).await;
    a.put(vec![rows(4, 1)]).await.unwrap_err();
    let fenced = logs.line("writer fenced");
    assert!(fenced.contains(" WARN "), "{fenced}");
    assert!(fenced.contains("PeerClaimedEpoch"), "{fenced}");
    assert!(
        fenced.contains(&format!("holder_writer_id=\"{}\"", b.writer_id())),
        "{fenced}"
    );
    assert!(fenced.contains("holder_epoch=2"), "{fenced}");
    a.abort().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test]
async fn a_put_logs_nothing_above_trace() {
    let (logs, guard) = capture(LevelFilter::INFO);
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;
    let before = logs.lines().len();
    for i in 0..20 {
        w.put(vec![rows(i, 1)]).await.unwrap();
    }
    assert_eq!(logs.lines()[before..], [] as [String; 0]);
    w.close().await.unwrap();
    drop(guard);

    let (logs, _guard) = capture(LevelFilter::TRACE);
    let w = shard.open(durable()).await;
    w.put(vec![rows(100, 1)]).await.unwrap();
    let appended = logs.line("appended WAL entry");
    assert!(appended.contains("TRACE"), "{appended}");
    assert!(appended.contains("rows=1"), "{appended}");
    w.close().await.unwrap();
}

#[tokio::test]
async fn a_retry_is_logged_with_its_operation_attempt_and_error() {
    let (logs, _guard) = capture(LevelFilter::INFO);
    let (backend, shard) = Backend::memory().with_shard();
    let w: ShardWriter = shard.open(durable()).await;
    backend.store.faults().fail_wal_puts(1);
    w.put(vec![rows(0, 1)]).await.unwrap();
    let retry = logs.line("retrying wal append");
    assert!(retry.contains("operation=\"wal append\""), "{retry}");
    assert!(retry.contains("attempt=1"), "{retry}");
    assert!(
        retry.contains("injected transient WAL put failure"),
        "{retry}"
    );
    assert!(retry.contains("delay_ms=1"), "{retry}");
    w.close().await.unwrap();
}

#[tokio::test]
async fn a_retry_with_another_row_count_than_its_first_put_is_a_warning() {
    let (logs, _guard) = capture(LevelFilter::WARN);
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard.open(durable()).await;
    let id = || PutOptions::with_request_id(RequestId::new("order-1").unwrap());
    let first = w.put_with(vec![rows(0, 2)], id()).await.unwrap();
    // The same row count (other values, even) is an ordinary retry: silent.
    assert_eq!(w.put_with(vec![rows(5, 2)], id()).await.unwrap(), first);
    assert_eq!(logs.lines(), [] as [String; 0]);
    assert_eq!(
        w.put_with(vec![rows(5, 2), rows(7, 1)], id())
            .await
            .unwrap(),
        first,
        "the first put still wins"
    );
    let warning = logs.line("retry carries another row count");
    assert!(warning.contains(" WARN memwal::request_id:"), "{warning}");
    assert!(
        warning.contains(&format!("shard={}", shard.id)),
        "{warning}"
    );
    assert!(warning.contains("request_id=\"order-1\""), "{warning}");
    assert!(warning.contains("first_rows=2 retry_rows=3"), "{warning}");
    assert_eq!(scanned_ids(&w).await, vec![0, 1]);
    w.close().await.unwrap();
}

async fn wait_until_logged(logs: &Captured, message: &str) {
    wait_until(message, || logs.lines().iter().any(|l| l.contains(message))).await;
}
