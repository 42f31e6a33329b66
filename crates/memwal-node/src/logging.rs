//! The core's `tracing` records, to stderr (`MEMWAL_LOG`) and to a JavaScript logger
//! (`setLogger`, `lib/logger.ts`).
//!
//! No subscriber is installed until `MEMWAL_LOG` is set (read once, when the addon loads) or a
//! logger is set; then one global subscriber with two per-layer filters: stderr at the
//! `MEMWAL_LOG` filter, the JavaScript logger at its level. Each filter tells `tracing` its
//! maximum level and the interest cache is rebuilt when the logger changes, so with neither on,
//! a `trace!` on the put path costs one comparison and builds nothing.
//!
//! Both sinks mask credentials (`memwal_core::redact`) in every record before it leaves:
//! records come from the core and from the HTTP client under `object_store` too, whose
//! connection pool names the endpoint at `debug` and `trace`, password included
//! (`("http", user:pass@host:9000)`), and a URL may carry a signature (`?X-Amz-Signature=…`).
//! So the stderr sink masks each formatted line, and the JavaScript one the message and every
//! text field.

use std::io::Write;
use std::sync::{Once, RwLock};

use memwal_core::redact_secrets;
use napi::Status;
use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::{Map, Value, json};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Records queued for JavaScript at most; more are dropped, never waited for, so a slow
/// logger cannot stall a Tokio worker.
const MAX_QUEUED_RECORDS: usize = 1024;

/// Weak: a logger must not keep the process alive. No callee error argument.
type Callback = ThreadsafeFunction<String, (), String, Status, false, true, MAX_QUEUED_RECORDS>;

/// The JavaScript logger and the most verbose level it takes.
static LOGGER: RwLock<Option<(Callback, Level)>> = RwLock::new(None);

/// Installs the global subscriber, once: at load if `MEMWAL_LOG` is set, else at the first
/// `setLogger`.
static INSTALL: Once = Once::new();

/// Reads `MEMWAL_LOG` (`info`, `debug`, `trace`, or any `tracing` filter directive such as
/// `memwal::flush=debug`) and, if set, installs the subscriber that prints to stderr.
#[napi_derive::module_init]
fn init_from_env() {
    if std::env::var_os("MEMWAL_LOG").is_some() {
        install();
    }
}

fn install() {
    INSTALL.call_once(|| {
        let stderr = std::env::var("MEMWAL_LOG").ok().map(|spec| {
            // A bad directive is skipped by the filter; logging must never fail the addon.
            let filter = tracing_subscriber::EnvFilter::builder()
                .with_default_directive(LevelFilter::OFF.into())
                .parse_lossy(spec);
            tracing_subscriber::fmt::layer()
                .with_writer(MaskedStderr)
                .with_ansi(false)
                .with_filter(filter)
        });
        // Another library in the process may have installed one first; then it gets the
        // records, and ours are not installed.
        let _ = tracing_subscriber::registry()
            .with(stderr)
            .with(ToJavaScript.with_filter(LoggerLevel))
            .try_init();
    });
}

/// Sends each record, as one JSON string, to the JavaScript logger (`level` is the most
/// verbose one it takes: `error`, `warn`, `info`, `debug` or `trace`), or, with no callback,
/// stops sending.
#[napi(js_name = "setNativeLogger")]
// Only JavaScript calls it: napi registers it for the addon, not for `cargo test`'s build.
#[cfg_attr(test, allow(dead_code))]
pub fn set_logger(callback: Option<Function<String, ()>>, level: String) -> napi::Result<()> {
    let logger = match callback {
        Some(callback) => {
            let level: Level = level.parse().map_err(|_| {
                napi::Error::new(
                    Status::InvalidArg,
                    format!(
                        "setLogger: unknown level {level:?}; levels: error, warn, info, debug, trace"
                    ),
                )
            })?;
            let callback: Callback = callback
                .build_threadsafe_function::<String>()
                .callee_handled::<false>()
                .weak::<true>()
                .max_queue_size::<MAX_QUEUED_RECORDS>()
                .build()?;
            Some((callback, level))
        }
        None => None,
    };
    let on = logger.is_some();
    *LOGGER.write().unwrap_or_else(|e| e.into_inner()) = logger;
    if on {
        install();
    }
    // The callsites cached their interest for the old level.
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

/// The JavaScript logger's level as a filter.
struct LoggerLevel;

impl LoggerLevel {
    fn current() -> LevelFilter {
        match &*LOGGER.read().unwrap_or_else(|e| e.into_inner()) {
            Some((_, level)) => LevelFilter::from_level(*level),
            None => LevelFilter::OFF,
        }
    }
}

impl<S> Filter<S> for LoggerLevel {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        *meta.level() <= Self::current()
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if *meta.level() <= Self::current() {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(Self::current())
    }
}

/// The layer that hands records to the JavaScript logger.
struct ToJavaScript;

impl<S: tracing::Subscriber> Layer<S> for ToJavaScript {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let guard = LOGGER.read().unwrap_or_else(|e| e.into_inner());
        let Some((callback, _)) = &*guard else {
            return;
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let record = json!({
            "level": meta.level().as_str().to_ascii_lowercase(),
            "target": meta.target(),
            "message": fields.message,
            "fields": fields.fields,
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        });
        // Full queue or the environment torn down: the record is dropped.
        let _ = callback.call(record.to_string(), ThreadsafeFunctionCallMode::NonBlocking);
    }
}

/// Stderr, through one buffer per record that is masked as a whole before it is written:
/// the `fmt` layer writes a record through one writer, so a URI never straddles two buffers.
struct MaskedStderr;

impl<'a> MakeWriter<'a> for MaskedStderr {
    type Writer = MaskedRecord;

    fn make_writer(&'a self) -> Self::Writer {
        MaskedRecord(Vec::new())
    }
}

/// One record on its way to stderr: written out, masked, when the `fmt` layer drops it.
struct MaskedRecord(Vec<u8>);

impl Write for MaskedRecord {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for MaskedRecord {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.0);
        // Nowhere to report a failed write to stderr; logging must never fail the addon.
        let _ = std::io::stderr()
            .lock()
            .write_all(redact_secrets(&text).as_bytes());
    }
}

/// A record's message and its other fields, as JSON values, text masked.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Map<String, Value>,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        let value = redact_secrets(value).into_owned();
        if field.name() == "message" {
            self.message = value;
        } else {
            self.fields.insert(field.name().into(), value.into());
        }
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.fields.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.fields.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.fields.insert(field.name().into(), value.into());
    }

    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.fields.insert(field.name().into(), value.into());
    }
}
