//! An S3-compatible server on 127.0.0.1 for the JavaScript tests and the S3 benchmark: the
//! Rust tests' in-process server (`tests/support/s3.rs`, s3s-fs with conditional create) as a
//! process.
//!
//! ```text
//! cargo run -p memwal-core --example s3_server -- <dir> [--port N] [--no-conditional-writes] [--latency-ms N]
//! ```
//!
//! Serves `<dir>` (bucket `memwal` is its subdirectory) and prints one JSON line on stdout with
//! what a client needs: `{"endpoint", "port", "bucket", "storage"}`, where `storage` holds the
//! JavaScript storage options that reach it (`S3Server::storage_options`, the one list of them,
//! under their camelCase names). It exits when its standard input closes (so it dies with the process
//! that spawned it) or on a signal. `--no-conditional-writes` makes PutObject ignore
//! `If-None-Match`, like a store memwal must refuse. `--latency-ms` delays every request, a
//! stand-in for a real store's latency (the benchmark uses it).

#[path = "../tests/support/s3.rs"]
mod s3;

use std::io::Read;
use std::path::PathBuf;

fn usage() -> ! {
    eprintln!("usage: s3_server <dir> [--port N] [--no-conditional-writes] [--latency-ms N]");
    std::process::exit(2)
}

/// `options` as a JSON object of JavaScript storage options: camelCase keys (`allowHttp`), and
/// `true`/`false` as booleans, since `lib/store.ts` type-checks them. The values are the
/// server's own (a URL, a region, fixed keys), none with a character JSON would escape.
fn storage_json(options: &[(String, String)]) -> String {
    let fields: Vec<String> = options
        .iter()
        .map(|(key, value)| match value.as_str() {
            "true" | "false" => format!("\"{}\":{value}", camel_case(key)),
            _ => format!("\"{}\":\"{value}\"", camel_case(key)),
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// `allow_http` → `allowHttp`.
fn camel_case(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut dir: Option<PathBuf> = None;
    let mut port = 0u16;
    let mut conditional = true;
    let mut latency_ms = 0f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => {
                port = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--no-conditional-writes" => conditional = false,
            "--latency-ms" => {
                latency_ms = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .filter(|ms: &f64| ms.is_finite() && *ms >= 0.0)
                    .unwrap_or_else(|| usage())
            }
            "-h" | "--help" => usage(),
            _ if dir.is_none() && !a.starts_with("--") => dir = Some(PathBuf::from(a)),
            _ => usage(),
        }
    }
    let dir = dir.unwrap_or_else(|| usage());
    let server = s3::S3Server::start_in(&dir, port)
        .await
        .unwrap_or_else(|e| {
            eprintln!("s3_server: cannot serve {}: {e}", dir.display());
            std::process::exit(1)
        });
    server.faults().set_ignore_conditional_writes(!conditional);
    server
        .faults()
        .set_latency(std::time::Duration::from_secs_f64(latency_ms / 1000.0));
    println!(
        "{{\"endpoint\":\"{}\",\"port\":{},\"bucket\":\"{}\",\"storage\":{}}}",
        server.endpoint(),
        server.port(),
        s3::BUCKET,
        storage_json(&server.storage_options())
    );
    // Exit with the parent: a blocking read of stdin returns when it closes.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = rx.await;
    drop(server);
}
