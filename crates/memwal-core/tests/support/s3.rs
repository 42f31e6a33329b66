//! An in-process S3-compatible server for tests, on 127.0.0.1 with an ephemeral port.
//!
//! [`S3Server`] serves a directory through `s3s-fs`, which honours `If-None-Match: *` on
//! PutObject (conditional create, what memwal's fencing needs), behind [`FaultyS3`], a wrapper
//! that forwards the operations `object_store` uses and injects the failures a real S3 shows:
//! - `503 Service Unavailable` and `500 Internal Error` before the request is applied;
//! - `500` *after* a PutObject was applied: `object_store` retries 5xx responses, so its retry
//!   meets the object and gets `412 Precondition Failed` (the ambiguous "request failed but the
//!   object landed" case of `docs/durability.md`, "When a WAL append fails");
//! - a TCP reset before the request is applied, or after it was (no response ever comes).
//!
//! It also serialises conditional PutObjects (s3s-fs checks then writes, which two racing
//! writers could both pass), and can be told to ignore `If-None-Match`, like an S3-compatible
//! store without conditional writes, which memwal must refuse.
//!
//! Shared by the Rust S3 tests and by `examples/s3_server.rs` (the server the JavaScript tests
//! and the S3 benchmark spawn). It is not part of `support/mod.rs`, so only the files that use
//! it compile it: `#[path = "support/s3.rs"] mod s3_server;`. It binds and serves loopback
//! only.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use memwal_core::Store;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The bucket every server has.
pub const BUCKET: &str = "memwal";
/// Credentials the server accepts (SigV4 is checked).
pub const ACCESS_KEY: &str = "memwal-test-key";
/// Secret of [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "memwal-test-secret";
/// The region clients sign for.
pub const REGION: &str = "us-east-1";

/// One injected failure (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum S3Fault {
    /// `503 Service Unavailable` before the request is applied.
    Unavailable,
    /// `500 Internal Error` before the request is applied.
    Internal,
    /// The request is applied, then `500 Internal Error` is returned.
    InternalAfterApply,
    /// The connection is reset before the request is applied.
    Reset,
    /// The request is applied, then the connection is reset instead of responding.
    ResetAfterApply,
}

impl S3Fault {
    fn applies_first(self) -> bool {
        matches!(self, S3Fault::InternalAfterApply | S3Fault::ResetAfterApply)
    }
}

#[derive(Debug)]
struct Rule {
    op: &'static str,
    key_contains: String,
    fault: S3Fault,
    remaining: u32,
}

/// The server's fault switches and request counters. All faults off by default.
#[derive(Debug, Default)]
pub struct S3Faults {
    rules: Mutex<Vec<Rule>>,
    ignore_conditional: AtomicBool,
    reject_conditional: AtomicBool,
    requests: Mutex<HashMap<&'static str, u64>>,
    injected: AtomicU64,
    latency_us: AtomicU64,
}

impl S3Faults {
    /// The next `times` requests of operation `op` (`"PutObject"`, `"GetObject"`,
    /// `"HeadObject"`, `"ListObjectsV2"`, `"DeleteObject"`, …) whose key contains
    /// `key_contains` fail with `fault`. Rules are consulted in the order they were added.
    pub fn inject(&self, op: &'static str, key_contains: &str, fault: S3Fault, times: u32) {
        self.rules.lock().unwrap().push(Rule {
            op,
            key_contains: key_contains.to_string(),
            fault,
            remaining: times,
        });
    }

    /// When on, PutObject ignores `If-None-Match` and `If-Match`: every put overwrites, like a
    /// store without conditional writes.
    pub fn set_ignore_conditional_writes(&self, on: bool) {
        self.ignore_conditional.store(on, Ordering::SeqCst);
    }

    /// Every request waits this long before it is served (a stand-in for a real store's
    /// latency, for the benchmark).
    pub fn set_latency(&self, latency: std::time::Duration) {
        self.latency_us
            .store(latency.as_micros() as u64, Ordering::SeqCst);
    }

    /// When on, PutObject with `If-None-Match` or `If-Match` fails with `501 Not Implemented`,
    /// like an S3-compatible store that rejects conditional writes.
    pub fn set_reject_conditional_writes(&self, on: bool) {
        self.reject_conditional.store(on, Ordering::SeqCst);
    }

    /// Requests of operation `op` served so far (failed or not).
    pub fn requests(&self, op: &str) -> u64 {
        self.requests.lock().unwrap().get(op).copied().unwrap_or(0)
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    /// Removes every pending rule.
    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }

    /// Counts one request and takes the fault it must suffer, if any.
    fn take(&self, op: &'static str, key: &str) -> Option<S3Fault> {
        *self.requests.lock().unwrap().entry(op).or_default() += 1;
        let mut rules = self.rules.lock().unwrap();
        let i = rules
            .iter()
            .position(|r| r.op == op && r.remaining > 0 && key.contains(&r.key_contains))?;
        rules[i].remaining -= 1;
        let fault = rules[i].fault;
        if rules[i].remaining == 0 {
            rules.remove(i);
        }
        self.injected.fetch_add(1, Ordering::SeqCst);
        Some(fault)
    }
}

/// Set on a connection to make its next read or write fail and its socket close with a reset.
#[derive(Debug, Clone, Default)]
struct ConnReset(Arc<AtomicBool>);

fn injected_error(code: S3ErrorCode) -> S3Error {
    S3Error::with_message(code, "injected by the memwal test server")
}

/// The fault-injecting S3 implementation in front of `s3s-fs`.
struct FaultyS3 {
    fs: s3s_fs::FileSystem,
    faults: Arc<S3Faults>,
    /// Held across a conditional PutObject: s3s-fs checks existence, then writes.
    conditional: tokio::sync::Mutex<()>,
}

impl FaultyS3 {
    /// Serves one request: the fault before, the operation (unless a fault stops it), then
    /// the fault after.
    async fn serve<'a, I, O>(
        &'a self,
        op: &'static str,
        key: &str,
        req: S3Request<I>,
        apply: impl FnOnce(S3Request<I>) -> BoxFuture<'a, S3Result<S3Response<O>>>,
    ) -> S3Result<S3Response<O>> {
        let latency = self.faults.latency_us.load(Ordering::SeqCst);
        if latency > 0 {
            tokio::time::sleep(std::time::Duration::from_micros(latency)).await;
        }
        let fault = self.faults.take(op, key);
        let conn = req.extensions.get::<ConnReset>().cloned();
        let reset = || {
            if let Some(c) = &conn {
                c.0.store(true, Ordering::SeqCst);
            }
        };
        match fault {
            Some(S3Fault::Unavailable) => {
                return Err(injected_error(S3ErrorCode::ServiceUnavailable));
            }
            Some(S3Fault::Internal) => return Err(injected_error(S3ErrorCode::InternalError)),
            Some(S3Fault::Reset) => {
                reset();
                return Err(injected_error(S3ErrorCode::InternalError));
            }
            _ => {}
        }
        let result = apply(req).await;
        match fault {
            Some(f) if f.applies_first() && f == S3Fault::ResetAfterApply => {
                reset();
                result
            }
            Some(f) if f.applies_first() => Err(injected_error(S3ErrorCode::InternalError)),
            _ => result,
        }
    }
}

/// The `S3` implementation of [`FaultyS3`]. Each operation under `served` is `s3s-fs`'s,
/// through [`FaultyS3::serve`] (latency, then faults by S3 operation name and key); `by` names
/// the key a fault rule matches: the object's `key`, the listing's `prefix`, or `none`. The
/// items after the list are written out: a PutObject with its conditional-write switches, and
/// the operations no fault applies to.
macro_rules! faulty_s3 {
    (@key $req:ident key) => {
        $req.input.key.clone()
    };
    (@key $req:ident prefix) => {
        $req.input.prefix.clone().unwrap_or_default()
    };
    (@key $req:ident none) => {
        String::new()
    };
    (
        served {
            $($method:ident($input:ident, $output:ident) as $op:literal by $key:ident;)*
        }
        $($item:item)*
    ) => {
        #[async_trait::async_trait]
        impl S3 for FaultyS3 {
            $(
                async fn $method(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    let key = faulty_s3!(@key req $key);
                    self.serve($op, &key, req, |r| self.fs.$method(r)).await
                }
            )*
            $($item)*
        }
    };
}

faulty_s3! {
    served {
        get_object(GetObjectInput, GetObjectOutput) as "GetObject" by key;
        head_object(HeadObjectInput, HeadObjectOutput) as "HeadObject" by key;
        list_objects_v2(ListObjectsV2Input, ListObjectsV2Output) as "ListObjectsV2" by prefix;
        list_objects(ListObjectsInput, ListObjectsOutput) as "ListObjects" by prefix;
        delete_object(DeleteObjectInput, DeleteObjectOutput) as "DeleteObject" by key;
        delete_objects(DeleteObjectsInput, DeleteObjectsOutput) as "DeleteObjects" by none;
        copy_object(CopyObjectInput, CopyObjectOutput) as "CopyObject" by key;
        create_multipart_upload(CreateMultipartUploadInput, CreateMultipartUploadOutput)
            as "CreateMultipartUpload" by key;
        upload_part(UploadPartInput, UploadPartOutput) as "UploadPart" by key;
        complete_multipart_upload(CompleteMultipartUploadInput, CompleteMultipartUploadOutput)
            as "CompleteMultipartUpload" by key;
    }

    async fn put_object(
        &self,
        mut req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        if self.faults.ignore_conditional.load(Ordering::SeqCst) {
            req.input.if_none_match = None;
            req.input.if_match = None;
        }
        let key = req.input.key.clone();
        let conditional = req.input.if_none_match.is_some() || req.input.if_match.is_some();
        if conditional && self.faults.reject_conditional.load(Ordering::SeqCst) {
            return Err(S3Error::with_message(
                S3ErrorCode::NotImplemented,
                "A header you provided implies functionality that is not implemented",
            ));
        }
        self.serve("PutObject", &key, req, |r| {
            Box::pin(async move {
                let _guard = if conditional {
                    Some(self.conditional.lock().await)
                } else {
                    None
                };
                self.fs.put_object(r).await
            })
        })
        .await
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.fs.head_bucket(req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.fs.abort_multipart_upload(req).await
    }
}

/// A TCP stream that fails every read and write once its [`ConnReset`] is set, and then closes
/// with a reset (`SO_LINGER` 0) when hyper drops it.
struct ResettableStream {
    stream: TcpStream,
    reset: Arc<AtomicBool>,
}

impl ResettableStream {
    fn check(&self) -> io::Result<()> {
        if self.reset.load(Ordering::SeqCst) {
            let _ = self.stream.set_zero_linger();
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "reset injected by the memwal test server",
            ));
        }
        Ok(())
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A running server. Dropping it stops it (and removes its directory if it made one).
pub struct S3Server {
    addr: SocketAddr,
    root: PathBuf,
    faults: Arc<S3Faults>,
    task: tokio::task::JoinHandle<()>,
    _dir: Option<tempfile::TempDir>,
}

impl S3Server {
    /// A server on a fresh temporary directory, spawned on the current tokio runtime.
    pub async fn start() -> S3Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = S3Server::start_in(dir.path(), 0).await.expect("S3 server");
        server._dir = Some(dir);
        server
    }

    /// A server on directory `root` (created if missing), on 127.0.0.1:`port` (0: any free
    /// port), spawned on the current tokio runtime.
    pub async fn start_in(root: &Path, port: u16) -> io::Result<S3Server> {
        std::fs::create_dir_all(root.join(BUCKET))?;
        let fs = s3s_fs::FileSystem::new(root).map_err(|e| io::Error::other(format!("{e:?}")))?;
        let faults = Arc::new(S3Faults::default());
        let s3 = FaultyS3 {
            fs,
            faults: faults.clone(),
            conditional: tokio::sync::Mutex::new(()),
        };
        let mut builder = S3ServiceBuilder::new(s3);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = builder.build();
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let conn = ConnReset::default();
                let io = TokioIo::new(ResettableStream {
                    stream,
                    reset: conn.0.clone(),
                });
                let service = service.clone();
                let per_conn = hyper::service::service_fn(
                    move |mut req: http::Request<hyper::body::Incoming>| {
                        req.extensions_mut().insert(conn.clone());
                        hyper::service::Service::call(&service, req)
                    },
                );
                tokio::spawn(async move {
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(io, per_conn)
                        .await;
                });
            }
        });
        Ok(S3Server {
            addr,
            root: root.to_path_buf(),
            faults,
            task,
            _dir: None,
        })
    }

    /// `http://127.0.0.1:<port>`
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The directory it serves (the bucket is its subdirectory [`BUCKET`]).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Fault switches and request counters.
    pub fn faults(&self) -> &Arc<S3Faults> {
        &self.faults
    }

    /// `s3://memwal/<prefix>`
    pub fn uri(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    /// Every storage option a client needs, explicit so that nothing comes from the
    /// environment (and no credential lookup ever leaves the machine).
    pub fn storage_options(&self) -> Vec<(String, String)> {
        [
            ("endpoint", self.endpoint()),
            ("allow_http", "true".to_string()),
            ("region", REGION.to_string()),
            ("access_key_id", ACCESS_KEY.to_string()),
            ("secret_access_key", SECRET_KEY.to_string()),
            ("virtual_hosted_style_request", "false".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// A memwal store on `s3://memwal/<prefix>` of this server (its own client, as another
    /// process would have).
    pub fn store(&self, prefix: &str) -> Store {
        self.store_with(prefix, &[])
    }

    /// [`S3Server::store`] with `extra` storage options.
    pub fn store_with(&self, prefix: &str, extra: &[(&str, &str)]) -> Store {
        let mut options = self.storage_options();
        options.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Store::from_uri_with(&self.uri(prefix), &options).expect("S3 store")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}
