//! Time budgets against an object store that does not answer (`docs/operations.md`, "Time
//! budgets"): a server that accepts connections and never replies must fail an open within the
//! store's budget, with a `Timeout` that says so, and a best-effort read (the manifest's version
//! hint) must not spend a retry budget of its own. A store nobody listens on is reported as
//! unreachable, not as one that may lack conditional writes.
//!
//! The servers here speak just enough HTTP for `object_store`'s S3 client. Budgets are
//! shortened through storage options so that every test ends in seconds; [`STALL_GUARD`]
//! only catches a stall, it measures nothing.

mod support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memwal_core::{ErrorCode, ShardReader, ShardWriter, Store};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

/// Longer than any budget these tests set (one second of retries, plus one request and
/// backoff), far shorter than a default budget (60 s) or the old one (180 s).
const STALL_GUARD: Duration = Duration::from_secs(9);

/// `fut`'s output, which must come within [`STALL_GUARD`].
async fn within_stall_guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(STALL_GUARD, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} stalled past its time budget"))
}

/// An HTTP server on 127.0.0.1 that answers every request with 404, except those whose path
/// contains `silent_on` (every request, if empty): it reads those and never answers.
/// Connections are held open until the test ends.
struct StubServer {
    endpoint: String,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl StubServer {
    async fn start(silent_on: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(socket, silent_on));
            }
        });
        StubServer {
            endpoint,
            connections,
            task,
        }
    }

    /// A store on `s3://bucket/p` of this server with `extra` storage options.
    fn store(&self, extra: &[(&str, &str)]) -> Store {
        let options: Vec<(String, String)> = [
            ("endpoint", self.endpoint.as_str()),
            ("allow_http", "true"),
            ("region", "us-east-1"),
            ("access_key_id", "k"),
            ("secret_access_key", "s"),
        ]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Store::from_uri_with("s3://bucket/p", &options).unwrap()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One connection: reads requests; answers each as an empty bucket would (404, or an empty
/// listing), or holds the connection silently
/// from the first whose path contains `silent_on`.
async fn serve(socket: TcpStream, silent_on: &str) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read);
    loop {
        let mut request_line = String::new();
        if lines.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut body_len = 0usize;
        loop {
            let mut header = String::new();
            if lines.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                body_len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; body_len];
        if tokio::io::AsyncReadExt::read_exact(&mut lines, &mut body)
            .await
            .is_err()
        {
            return;
        }
        let path = request_line.split(' ').nth(1).unwrap_or("");
        if path.contains(silent_on) {
            // Accepted, read, never answered: hold the connection until the test ends.
            std::future::pending::<()>().await;
        }
        // A listing of an empty prefix is an empty result, as S3 answers it.
        let reply = if path.contains("list-type=2") {
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>bucket</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>";
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        } else {
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string()
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// One second of retries of 300 ms requests: what the tests give a silent store.
const SHORT_BUDGETS: &[(&str, &str)] = &[
    ("timeout", "300ms"),
    ("connect_timeout", "300ms"),
    ("client_retry_timeout", "1"),
];

#[tokio::test]
async fn a_silent_store_fails_a_reader_open_with_a_timeout_within_its_budget() {
    let server = StubServer::start("").await;
    let store = server.store(SHORT_BUDGETS);
    let e = within_stall_guard(
        "ShardReader::open on a silent store",
        ShardReader::open(store, Uuid::new_v4()),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    let m = e.to_string();
    assert!(m.starts_with("Timed out "), "{m}");
    assert!(m.contains("manifest version"), "names what timed out: {m}");
    assert!(
        m.contains("client_retry_timeout"),
        "says what to change: {m}"
    );
    assert!(server.connections.load(Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn a_silent_store_fails_a_writer_open_with_a_timeout_not_a_conditional_write_refusal() {
    let server = StubServer::start("").await;
    let store = server.store(SHORT_BUDGETS);
    let e = within_stall_guard(
        "ShardWriter::open on a silent store",
        ShardWriter::open(store.clone(), support::schema(), support::durable()),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    let m = e.to_string();
    assert!(m.starts_with("Timed out probing conditional create"), "{m}");
    assert!(!m.contains("may not support conditional writes"), "{m}");
}

#[tokio::test]
async fn a_store_nobody_listens_on_is_reported_unreachable_not_lacking_conditional_writes() {
    // A port that was just free: connecting to it is refused.
    let endpoint = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let options: Vec<(String, String)> = [
        ("endpoint", endpoint.as_str()),
        ("allow_http", "true"),
        ("region", "us-east-1"),
        ("access_key_id", "k"),
        ("secret_access_key", "s"),
    ]
    .iter()
    .chain(SHORT_BUDGETS)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let store = Store::from_uri_with("s3://bucket/p", &options).unwrap();
    let e = within_stall_guard(
        "ShardWriter::open on a refused endpoint",
        ShardWriter::open(store, support::schema(), support::durable()),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
    let m = e.to_string();
    assert!(
        m.contains("could not reach the object store at s3://bucket/p"),
        "names the location and says it was not reached: {m}"
    );
    assert!(m.contains("host and port"), "says what to check: {m}");
    assert!(!m.contains("may not support conditional writes"), "{m}");
}

#[tokio::test]
async fn a_silent_version_hint_costs_the_best_effort_budget_not_a_retry_budget() {
    // Everything answers (404: no shard) but the version hint, and the retry budget is the
    // default (60 s): the hint must be given up after the best-effort budget (2 s).
    let server = StubServer::start("version_hint").await;
    let store = server.store(&[("timeout", "300ms")]);
    let e = within_stall_guard(
        "ShardReader::open with a silent version hint",
        ShardReader::open(store, Uuid::new_v4()),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    assert!(e.to_string().contains("no shard"), "{e}");
}
