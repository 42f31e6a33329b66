//! Masking of the credentials a location or an endpoint can carry, in any text memwal shows.
//!
//! A location (`s3://KEY:SECRET@bucket/p`), an endpoint (`http://user:pass@host:9000`) or a
//! presigned URL (`…?X-Amz-Signature=…`) may be echoed by an error, a log record of the core
//! or of the HTTP client under it, `Store::location`, or the CLI. Every one of those passes
//! its text through [`redact_secrets`], the one masking function: the binding's log sinks
//! (`crates/memwal-node/src/logging.rs`), and JavaScript's `redactLocation` (`lib/redact.ts`,
//! which every error and the CLI's output go through) calls it through the binding. So what
//! is masked cannot differ between an error, a log line and the CLI.
//!
//! It masks, with `***`:
//! - the userinfo of a URI (`scheme://user:pass@host` → `scheme://***@host`), up to the last
//!   `@` of the authority, since a password may itself hold an `@`. A user name alone is
//!   masked too: some services take a token as the user name.
//! - a `user:pass@host` authority without its scheme, as the HTTP client's connection pool
//!   logs it (`("http", user:pass@127.0.0.1:9000)`). Without a `:` before the `@` it is left
//!   alone: that is an e-mail address or `git@host`, not a credential.
//! - the value of a query parameter whose name holds one of [`SECRET_WORDS`], case
//!   insensitively (`?sig=…`, `&X-Amz-Credential=…`, `;token=…`), up to the next `&`, `#` or
//!   white space.
//!
//! It works on text, not on parsed URIs, because a URI in a message is surrounded by other
//! text, and one a user mistyped is the one most likely to be echoed.

use std::borrow::Cow;

/// What a secret is replaced with.
pub const MASK: &str = "***";

/// A query parameter whose name contains one of these (case-insensitively) holds a secret:
/// `sig` also covers `signature` (`X-Amz-Signature`, `X-Goog-Signature`, Azure SAS `sig`),
/// `credential` covers `X-Amz-Credential`, `token` covers `X-Amz-Security-Token`, and `auth`
/// covers `authorization` and `auth_token`. A parameter that only looks like one (`design`,
/// `monkey`) is masked too: a name that wrongly matches costs a hidden value, one that wrongly
/// does not costs a leaked secret.
pub const SECRET_WORDS: [&str; 9] = [
    "secret",
    "sig",
    "token",
    "password",
    "passwd",
    "pwd",
    "key",
    "credential",
    "auth",
];

/// `text` with the credentials a URI in it may carry replaced by [`MASK`] (see the module
/// docs for what counts); borrowed unchanged when there is none.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    let masked = then(mask_userinfo(text), mask_bare_userinfo);
    then(masked, mask_secret_query_values)
}

/// `step` applied to `text`, borrowing from the original while nothing has changed.
fn then<'a>(text: Cow<'a, str>, step: fn(&str) -> Cow<'_, str>) -> Cow<'a, str> {
    match text {
        Cow::Borrowed(text) => step(text),
        Cow::Owned(text) => Cow::Owned(step(&text).into_owned()),
    }
}

/// Whether a query parameter named `name` holds a secret: its name contains one of
/// [`SECRET_WORDS`], in any case.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| lower.contains(w))
}

/// A character of a URI scheme (`s3`, `abfss`, `git+ssh`).
fn is_scheme_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-')
}

/// Where the authority that starts at `start` ends: at the path, query or fragment, or at
/// white space, which no URI holds and which ends one in running text.
fn authority_end(text: &str, start: usize) -> usize {
    text[start..]
        .find(|c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#'))
        .map_or(text.len(), |i| start + i)
}

/// `scheme://userinfo@host` → `scheme://***@host`, for every URI in `text`.
fn mask_userinfo(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let separator = from + found;
        let start = separator + 3;
        let end = authority_end(text, start);
        // `://` alone (no scheme before it) is not a URI.
        let is_uri = separator > 0 && is_scheme_char(bytes[separator - 1]);
        if is_uri && let Some(at) = text[start..end].rfind('@') {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..start]);
            out.push_str(MASK);
            copied = start + at;
        }
        from = end.max(start);
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// A character that may stand in the userinfo of an authority as a URL parser writes it
/// (RFC 3986: unreserved, percent-encoded, sub-delims and `:`); an `@` in a password is
/// percent-encoded there.
fn is_userinfo_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'%'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
        )
}

/// `user:pass@host` → `***@host`, wherever no scheme precedes it (those are
/// [`mask_userinfo`]'s): the userinfo is the run of [`is_userinfo_char`]s before an `@` that a
/// host follows, when it holds a `:`.
fn mask_bare_userinfo(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    for (at, _) in text.match_indices('@') {
        let host_follows = bytes
            .get(at + 1)
            .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'[');
        let mut start = at;
        while start > copied && is_userinfo_char(bytes[start - 1]) {
            start -= 1;
        }
        let userinfo = &text[start..at];
        if host_follows && userinfo.contains(':') {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..start]);
            out.push_str(MASK);
            copied = at;
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// A character of a query parameter's name, as far as masking looks for one.
fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// `?sig=abc&x=1` → `?sig=***&x=1`: the value of every parameter named by [`is_secret_name`]
/// that follows a `?`, `&` or `;`.
fn mask_secret_query_values(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !matches!(bytes[i], b'?' | b'&' | b';') {
            i += 1;
            continue;
        }
        let name_start = i + 1;
        let mut name_end = name_start;
        while name_end < bytes.len() && is_name_char(bytes[name_end]) {
            name_end += 1;
        }
        let is_secret = name_end < bytes.len()
            && bytes[name_end] == b'='
            && is_secret_name(&text[name_start..name_end]);
        if !is_secret {
            i = name_end.max(i + 1);
            continue;
        }
        let value_start = name_end + 1;
        let value_end = text[value_start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '&' | '#'))
            .map_or(text.len(), |j| value_start + j);
        if value_end > value_start {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..value_start]);
            out.push_str(MASK);
            copied = value_end;
        }
        i = value_end;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn masks(text: &str, expected: &str) {
        assert_eq!(redact_secrets(text), expected, "masking {text:?}");
    }

    #[test]
    fn userinfo_of_a_location_is_masked() {
        masks("s3://KEY:SECRET@bucket/p", "s3://***@bucket/p");
        masks("s3://KEY:SECRET@bucket", "s3://***@bucket");
        masks(
            "no credentials for gs://a:b@bucket/x: set one",
            "no credentials for gs://***@bucket/x: set one",
        );
        // A user name alone may be a token.
        masks("https://ghp_TOKEN@host/repo", "https://***@host/repo");
        masks(
            "abfss://box@acct.dfs.core.windows.net/p",
            "abfss://***@acct.dfs.core.windows.net/p",
        );
    }

    #[test]
    fn userinfo_of_an_endpoint_is_masked_up_to_the_last_at() {
        masks(
            "connecting to http://user:PASS@127.0.0.1:9000/memwal/x",
            "connecting to http://***@127.0.0.1:9000/memwal/x",
        );
        // A password with an `@` in it: every part of it is masked.
        masks("http://user:p@ss@host:1/", "http://***@host:1/");
        // As `Debug` quotes it, and as JSON holds it.
        masks(
            r#"endpoint: "http://u:PW@h:1", next: 2"#,
            r#"endpoint: "http://***@h:1", next: 2"#,
        );
        masks(r#"{"url":"http://u:PW@h"}"#, r#"{"url":"http://***@h"}"#);
        // Several URIs in one text.
        masks(
            "from s3://a:b@x/1 to http://c:d@y:2/3",
            "from s3://***@x/1 to http://***@y:2/3",
        );
    }

    #[test]
    fn an_authority_without_its_scheme_is_masked_when_it_has_a_password() {
        // As hyper-util's connection pool logs the key of a connection.
        masks(
            r#"checkout waiting for idle connection: ("http", user:PASS@127.0.0.1:40269)"#,
            r#"checkout waiting for idle connection: ("http", ***@127.0.0.1:40269)"#,
        );
        masks(
            "take? user:p%40ss!$'*+,;=~@host:1: expiration",
            "take? ***@host:1: expiration",
        );
        masks("[user:pw@[::1]:9000]", "[***@[::1]:9000]");
        // An e-mail address, `git@host` and a user name alone carry no password.
        for text in [
            "mail ops@example.com",
            "git@github.com:org/repo",
            "writer a@b on host h",
            "12:30 @ noon",
            "a:b@ with no host",
        ] {
            masks(text, text);
        }
    }

    #[test]
    fn an_at_outside_the_authority_is_not_userinfo() {
        for text in [
            "s3://bucket/p/a@b",
            "s3://bucket?x=a@b",
            "s3://bucket#a@b",
            "http://host:1 then user@example.com",
            "writer a@b on host h",
            "file:///tmp/a@b",
        ] {
            masks(text, text);
        }
    }

    #[test]
    fn secret_query_values_are_masked() {
        masks("s3://b/p?sig=abc", "s3://b/p?sig=***");
        masks(
            "https://h/o?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F1&X-Amz-Signature=ff00&X-Amz-Security-Token=tok&x-id=GetObject",
            "https://h/o?X-Amz-Algorithm=AWS4&X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Security-Token=***&x-id=GetObject",
        );
        masks(
            "https://a.blob.core.windows.net/c?sv=2022&se=2030&sig=Zm9v%3D#frag",
            "https://a.blob.core.windows.net/c?sv=2022&se=2030&sig=***#frag",
        );
        for name in [
            "token",
            "key",
            "secret",
            "password",
            "passwd",
            "pwd",
            "signature",
            "access_key",
            "Authorization",
            "PASSWORD",
        ] {
            masks(
                &format!("memory://x?{name}=PLANTED next"),
                &format!("memory://x?{name}=*** next"),
            );
            masks(
                &format!("/dir;a=1;{name}=PLANTED"),
                &format!("/dir;a=1;{name}=***"),
            );
        }
    }

    #[test]
    fn other_query_values_and_plain_text_stay() {
        for text in [
            "s3://b/p?region=us-east-1&x-id=PutObject",
            "position=3 epoch=2 rows=1",
            "sig=abc without a ? before it",
            "a ?sig= with nothing after it",
            "",
            "just text",
        ] {
            masks(text, text);
            assert!(matches!(redact_secrets(text), Cow::Borrowed(_)), "{text:?}");
        }
    }

    #[test]
    fn userinfo_and_query_are_masked_together_and_text_around_them_is_kept() {
        masks(
            "s3://AKIAKEY:SUPERSECRET@bucket/prefix?sig=SUPERSECRET: not found",
            // A value runs to white space, `&` or `#`: the `:` after it goes with it.
            "s3://***@bucket/prefix?sig=*** not found",
        );
        // Non-ASCII text around a URI is kept whole.
        masks("é s3://ü:ß@b/ä?tökén=ö ñ", "é s3://***@b/ä?tökén=ö ñ");
        masks("é s3://ü:ß@b/ä?token=ö ñ", "é s3://***@b/ä?token=*** ñ");
    }

    #[test]
    fn masking_twice_changes_nothing_more() {
        for text in ["s3://K:S@b/p?sig=x&token=y", "http://u:p@ss@h/?password=1"] {
            let once = redact_secrets(text).into_owned();
            assert_eq!(redact_secrets(&once), once);
        }
    }

    #[test]
    fn secret_names() {
        assert!(is_secret_name("X-Amz-Signature"));
        assert!(is_secret_name("sessionToken"));
        assert!(!is_secret_name("region"));
        assert!(!is_secret_name("x-id"));
    }
}
