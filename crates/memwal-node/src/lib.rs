//! memwal-node: the napi-rs binding of memwal-core.
//!
//! Thin `#[napi]` classes over core types, one file per concept: `store` (object stores and
//! their faults), `writer`, `reader` (reader and tailer), `convert` (options, results,
//! statistics), `ipc` (Arrow IPC bytes ↔ batches) and `error` (the only place core errors
//! become JavaScript errors). Semantics live in memwal-core; an `if` about memwal behaviour
//! belongs there.

#![deny(clippy::all)]

mod columns;
mod convert;
mod error;
mod ipc;
mod reader;
mod store;
mod writer;
