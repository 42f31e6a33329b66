//! memwal-node: the napi-rs binding of memwal-core.
//!
//! Thin `#[napi]` classes over core types, one file per concept: `store` (object stores and
//! their faults), `writer` (one put method for every input and mode), `put_data` (a put's data
//! as `lib/encoding.ts` hands it over), `rows` (plain-object rows → a batch of the shard's
//! schema), `columns` (column buffers → batches), `schema` (an
//! apache-arrow Schema described by its structure → arrow-rs schema), `ipc` (Arrow IPC bytes ↔
//! batches), `durable` (the relay that reports durable puts to JavaScript in batches), `events` (writer
//! events to JavaScript), `logging` (the core's logs to stderr or a JavaScript logger),
//! `reader` (reader and tailer), `gc` (garbage collection's options and report), `convert` (options, results, statistics) and `error` (the only
//! place core errors become JavaScript errors). Semantics live in memwal-core; an `if` about
//! memwal behaviour belongs there.

#![deny(clippy::all)]

/// The addon's Rust allocations go to mimalloc. Under glibc's malloc a small put spent about a
/// quarter of the JavaScript thread's time in the allocator: Arrow's 64-byte-aligned buffers
/// take glibc's memalign path, which consolidates the fast bins on each call, and the buffers
/// the JavaScript thread allocates are freed by Tokio's workers, contending on arena locks.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod columns;
mod convert;
mod durable;
mod error;
mod events;
mod gc;
mod ipc;
mod logging;
mod put_data;
mod reader;
mod rows;
mod schema;
mod store;
mod writer;
