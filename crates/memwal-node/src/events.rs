//! Writer events to JavaScript: each [`WriterEvent`] as one JSON object (`lib/events.ts` turns
//! a fence's tagged message into the `FencedError` every later call gets).

use std::sync::Arc;

use memwal_core::{EventSink, WriterEvent};
use napi::Status;
use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use serde_json::json;

use crate::error::tagged;

/// Weak: events must not keep the process alive. No callee error argument.
type Callback = ThreadsafeFunction<String, (), String, Status, false, true>;

/// A sink that hands every event to `callback` on the JavaScript thread, as a JSON string.
pub fn sink(callback: &Function<String, ()>) -> napi::Result<EventSink> {
    let callback: Callback = callback
        .build_threadsafe_function::<String>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    Ok(Arc::new(move |event| {
        // Fails only while the environment is torn down, when no one is left to tell.
        let _ = callback.call(
            json_of(&event).to_string(),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }))
}

/// `event` as `lib/events.ts` reads it: `type`, then its fields in camelCase.
fn json_of(event: &WriterEvent) -> serde_json::Value {
    let ms = |d: &std::time::Duration| d.as_secs_f64() * 1000.0;
    match event {
        WriterEvent::Fenced { error } => json!({ "type": "fenced", "error": tagged(error) }),
        WriterEvent::WalAppend {
            position,
            puts,
            batches,
            rows,
            bytes,
            latency,
        } => json!({
            "type": "walAppend",
            "position": position,
            "puts": puts,
            "batches": batches,
            "rows": rows,
            "bytes": bytes,
            "latencyMs": ms(latency),
        }),
        WriterEvent::GenerationFlushed {
            generation,
            rows,
            bytes,
            file,
            latency,
        } => json!({
            "type": "generationFlushed",
            "generation": generation,
            "rows": rows,
            "bytes": bytes,
            "file": file,
            "latencyMs": ms(latency),
        }),
        WriterEvent::Compaction {
            merged,
            generation,
            rows,
            file,
        } => json!({
            "type": "compaction",
            "merged": merged,
            "generation": generation,
            "rows": rows,
            "file": file,
        }),
        WriterEvent::Gc(r) => json!({
            "type": "gc",
            "manifestVersion": r.manifest_version,
            "lowWater": r.low_water,
            "walEntriesRemoved": r.wal_entries_removed,
            "walEntriesKept": r.wal_entries_kept,
            "walSegmentsRemoved": r.wal_segments_removed,
            "manifestVersionsRemoved": r.manifest_versions_removed,
            "generationDirsRemoved": r.generation_dirs_removed,
            "generationDirsKept": r.generation_dirs_kept,
            "bytesRemoved": r.bytes_removed,
            "dryRun": r.dry_run,
        }),
        WriterEvent::Retry {
            operation,
            attempt,
            error,
            delay,
        } => json!({
            "type": "retry",
            "operation": operation,
            "attempt": attempt,
            "error": error,
            "delayMs": ms(delay),
        }),
        WriterEvent::Backpressure {
            waiting,
            bytes_waiting,
        } => json!({
            "type": "backpressure",
            "phase": if *waiting { "start" } else { "end" },
            "bytesWaiting": bytes_waiting,
        }),
        WriterEvent::Error { error } => json!({ "type": "error", "error": tagged(error) }),
        // `WriterEvent` is non-exhaustive: a kind this binding does not know yet.
        _ => json!({ "type": "unknown" }),
    }
}
