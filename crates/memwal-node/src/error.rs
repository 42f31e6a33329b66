//! The only place where core errors become JavaScript errors.
//!
//! An async napi rejection can only carry a Node-API status as `error.code`, so the stable
//! memwal code (and the fence reason) travel as a fixed tag ahead of the message:
//! `[memwal:FENCED:PeerClaimedEpoch] Writer fenced (peer claimed epoch): …`. `lib/native-call.ts`
//! parses the tag in one function, throws the matching `MemWalError` subclass and strips the tag.
//! A fence that names the shard's holder adds it to the tag as a JSON object,
//! `[memwal:FENCED:PeerClaimedEpoch:holder={"writerId":…}] `, with every `]` escaped as
//! `\u005d` (the object holds no arrays, so a `]` can only occur inside a string) so the tag
//! still ends at its first `]`. A `TRUNCATED` error carries the first available WAL position,
//! `[memwal:TRUNCATED:first=6] `. The error's `source()` chain follows as indented "Caused by:"
//! lines, each only if the message does not already say it.
//!
//! `redactSecrets` (below) is the credential masking `lib/redact.ts` applies to every message,
//! the core's own (`memwal_core::redact`), so JavaScript has no second copy of it.

use memwal_core::{Error, ShardHolder, redact_secrets};
use napi_derive::napi;

/// Converts a core error to a napi error carrying the memwal tag.
pub fn to_napi(e: Error) -> napi::Error {
    napi::Error::from_reason(tagged(&e))
}

/// The tagged message of `e`.
pub fn tagged(e: &Error) -> String {
    let mut msg = match (e.fence_reason(), e.holder()) {
        (Some(r), Some(h)) => format!(
            "[memwal:{}:{}:holder={}] {e}",
            e.code().as_str(),
            r.as_str(),
            holder_json(h)
        ),
        (Some(r), None) => format!("[memwal:{}:{}] {e}", e.code().as_str(), r.as_str()),
        (None, _) => match e.first_available() {
            Some(first) => format!("[memwal:{}:first={first}] {e}", e.code().as_str()),
            None => format!("[memwal:{}] {e}", e.code().as_str()),
        },
    };
    // A cause whose text the message already holds (most errors put their source's text in
    // their own) would only repeat it.
    for cause in e.causes() {
        if !msg.contains(&cause) {
            msg.push_str("\n  Caused by: ");
            msg.push_str(&cause);
        }
    }
    msg
}

/// `h` as the tag's JSON object (`lib/native-call.ts` builds a `ShardHolder` from it).
fn holder_json(h: &ShardHolder) -> String {
    serde_json::json!({
        "writerId": h.writer_id,
        "host": h.host,
        "pid": h.pid,
        "epoch": h.epoch,
        "claimedAtMs": h.claimed_at_ms,
    })
    .to_string()
    .replace(']', "\\u005d")
}

/// An `INVALID_ARGUMENT` error raised by the binding itself (argument conversion).
pub fn invalid(message: impl AsRef<str>) -> napi::Error {
    napi::Error::from_reason(format!("[memwal:INVALID_ARGUMENT] {}", message.as_ref()))
}

/// Extension for `Result<T, memwal_core::Error>`.
pub trait IntoNapi<T> {
    /// Maps the error with [`to_napi`].
    fn napi(self) -> napi::Result<T>;
}

impl<T> IntoNapi<T> for Result<T, Error> {
    fn napi(self) -> napi::Result<T> {
        self.map_err(to_napi)
    }
}

/// `text` with the credentials a URI in it may carry masked (`memwal_core::redact`): what
/// `lib/redact.ts`'s `redactLocation` calls, so that errors, the CLI and both log sinks mask
/// exactly the same things.
#[napi(js_name = "redactSecrets")]
// Only JavaScript calls it: napi registers it for the addon, not for `cargo test`'s build.
#[cfg_attr(test, allow(dead_code))]
pub fn redact(text: String) -> String {
    match redact_secrets(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(masked) => masked,
    }
}
