//! Request ids: what makes a retried put safe, and how they are recorded.
//!
//! A put may carry a [`RequestId`] chosen by the client. The writer remembers the id with the
//! put's [`WriteResult`] ([`PutRecord`]); a later put with the same id, within the window,
//! writes nothing and gets the first put's result (see `writer::request_index` for the window
//! and [`crate::flush`] for how a retry is answered without weakening durability).
//!
//! Records travel with the rows, so the next writer finds them wherever the rows are:
//! - in the **WAL entry** that holds the put's rows, under the schema metadata key
//!   [`crate::wal::entry::REQUEST_IDS_KEY`] (covered by the entry's checksum; no new column, so
//!   Lance readers still read the WAL);
//! - in the **generation directory** of a flushed generation, as `request_ids.json` next to
//!   `data.parquet` (written and synced before the manifest commit; its checksum and newest put
//!   time are in the manifest's generation entry), so ids outlive the replay cursor.
//!
//! Both hold the same JSON document: `{"version":1,"puts":[{"id":…,"at_ms":…,"generation":…,
//! "start":…,"end":…}, …]}`, one object per put, `at_ms` the put's time in Unix milliseconds and
//! `generation`/`start`/`end` its original [`WriteResult`] (`generation` is `null` in WAL-only
//! mode).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::write_result::{BatchRange, WriteResult};

/// The longest request id, in UTF-8 bytes. Ids are kept in memory for the retention window and
/// written into every WAL entry and generation that holds their rows, so they are bounded;
/// 256 bytes holds a UUID, a hash or a composite key with room to spare.
pub const MAX_REQUEST_ID_BYTES: usize = 256;

/// A client-chosen id that makes a put retry-safe: a non-empty string of at most
/// [`MAX_REQUEST_ID_BYTES`] UTF-8 bytes. Any characters are allowed; ids are compared byte for
/// byte. Cheap to clone (shared).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(Arc<str>);

impl RequestId {
    /// Validates `id`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the option (`requestId`) if `id` is empty or longer than
    /// [`MAX_REQUEST_ID_BYTES`] bytes.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        if id.is_empty() {
            return Err(Error::invalid(
                "invalid put option requestId: it is empty; pass a non-empty string that identifies the request (e.g. a UUID), or omit it",
            ));
        }
        if id.len() > MAX_REQUEST_ID_BYTES {
            return Err(Error::invalid(format!(
                "invalid put option requestId: it is {} UTF-8 bytes long, more than the {MAX_REQUEST_ID_BYTES} allowed; use a shorter id (e.g. a UUID or a hash of the request)",
                id.len()
            )));
        }
        Ok(RequestId(id.into()))
    }

    /// Validates an id given as UTF-16 code units, the way JavaScript holds strings.
    ///
    /// A lone surrogate (half of a surrogate pair without the other half) has no UTF-8 form. A
    /// lossy conversion would replace it with U+FFFD, so ids that differ only there would become
    /// one id, and the retry of one put would answer another put that was never written.
    ///
    /// # Errors
    /// As [`RequestId::new`], and `InvalidArgument` naming the index and the code unit of the
    /// first lone surrogate if `units` is not well-formed UTF-16.
    pub fn from_utf16(units: &[u16]) -> Result<Self> {
        let mut id = String::with_capacity(units.len());
        let mut index = 0;
        for c in char::decode_utf16(units.iter().copied()) {
            match c {
                Ok(c) => {
                    id.push(c);
                    index += c.len_utf16();
                }
                Err(e) => {
                    return Err(Error::invalid(format!(
                        "invalid put option requestId: it is not well-formed UTF-16: the code unit 0x{:04X} at index {index} is a lone surrogate (half of a surrogate pair), which has no UTF-8 form, so ids that differ only there cannot be told apart; pass a well-formed string (requestId.isWellFormed() is true), and cut ids without splitting a surrogate pair",
                        e.unpaired_surrogate()
                    )));
                }
            }
        }
        RequestId::new(id)
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One put that carried a request id: the id, the result its first put returned, and when
/// that put was accepted (Unix milliseconds, by the accepting writer's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutRecord {
    /// The put's request id.
    pub id: RequestId,
    /// What the put returned: generation and batch positions as the writer that accepted it
    /// assigned them.
    pub result: WriteResult,
    /// When the put was accepted, in milliseconds since the Unix epoch. The retention window
    /// (`request_id_retention_ms`) counts from here.
    pub put_at_ms: u64,
}

/// The version of the JSON document this build writes and reads.
const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    puts: Vec<WirePut>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePut {
    id: String,
    at_ms: u64,
    generation: Option<u64>,
    start: u64,
    end: u64,
}

/// Encodes `records` as the JSON document described in the module docs.
pub fn encode_records(records: &[PutRecord]) -> String {
    let doc = Document {
        version: FORMAT_VERSION,
        puts: records
            .iter()
            .map(|r| WirePut {
                id: r.id.as_str().to_owned(),
                at_ms: r.put_at_ms,
                generation: r.result.generation,
                start: r.result.batch_positions.start as u64,
                end: r.result.batch_positions.end as u64,
            })
            .collect(),
    };
    serde_json::to_string(&doc).expect("a request-id document always serialises")
}

/// Decodes a document written by [`encode_records`]. `object` names where it came from.
///
/// # Errors
/// `Corrupt` naming `object` if it is not such a document (or one of a newer format).
pub fn decode_records(object: &str, text: &[u8]) -> Result<Vec<PutRecord>> {
    let corrupt = |msg: String| Error::corrupt(object, msg, None);
    let doc: Document = serde_json::from_slice(text).map_err(|e| {
        corrupt(format!(
            "its request ids are not a valid record document: {e}"
        ))
    })?;
    if doc.version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "its request ids are in format version {}, which this memwal (format {FORMAT_VERSION}) does not know; open the shard with a newer memwal",
            doc.version
        )));
    }
    doc.puts
        .into_iter()
        .map(|p| {
            let position = |v: u64| {
                usize::try_from(v).map_err(|_| corrupt(format!("batch position {v} is too large")))
            };
            let (start, end) = (position(p.start)?, position(p.end)?);
            if start > end {
                return Err(corrupt(format!(
                    "request id {:?} has batch positions {start}..{end}",
                    p.id
                )));
            }
            Ok(PutRecord {
                id: RequestId::new(p.id)
                    .map_err(|e| corrupt(format!("it holds an invalid request id: {e}")))?,
                result: WriteResult {
                    generation: p.generation,
                    batch_positions: BatchRange { start, end },
                },
                put_at_ms: p.at_ms,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn record(id: &str, generation: Option<u64>, start: usize, end: usize) -> PutRecord {
        PutRecord {
            id: RequestId::new(id).unwrap(),
            result: WriteResult {
                generation,
                batch_positions: BatchRange { start, end },
            },
            put_at_ms: 1_700_000_000_123,
        }
    }

    #[test]
    fn ids_must_be_non_empty_and_at_most_256_bytes() {
        assert_eq!(RequestId::new("a").unwrap().as_str(), "a");
        let longest = "é".repeat(MAX_REQUEST_ID_BYTES / 2);
        assert_eq!(longest.len(), MAX_REQUEST_ID_BYTES);
        RequestId::new(longest.clone()).unwrap();
        for bad in [String::new(), format!("{longest}x")] {
            let e = RequestId::new(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
            assert!(e.to_string().contains("requestId"), "{e}");
        }
    }

    #[test]
    fn utf16_ids_must_be_well_formed() {
        let utf16 = |s: &str| s.encode_utf16().collect::<Vec<u16>>();
        let astral = RequestId::from_utf16(&utf16("order-😀")).unwrap();
        assert_eq!(astral.as_str(), "order-😀");
        let prefix = utf16("order-");
        for (lone, index) in [
            (vec![0xD800], 6),
            (vec![0xDBFF], 6),
            (vec![0xDC00, 0xD800], 6),
            (vec![0xD83D, 0x41], 6),
            (vec![0xD83D, 0xDE00, 0xDFFF], 8),
        ] {
            let units = [prefix.clone(), lone.clone()].concat();
            let e = RequestId::from_utf16(&units).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
            let unit = units[index];
            let message = e.to_string();
            assert!(
                message.contains(&format!("code unit 0x{unit:04X} at index {index}")),
                "{lone:X?}: {message}"
            );
            assert!(message.contains("isWellFormed()"), "{message}");
        }
        for bad in [vec![], vec![0x61; MAX_REQUEST_ID_BYTES + 1]] {
            let e = RequestId::from_utf16(&bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
        }
    }

    #[test]
    fn records_round_trip_with_any_characters() {
        let records = vec![
            record("plain", Some(3), 0, 1),
            record("quote\" backslash\\ newline\n nul\0 ☃", None, 7, 9),
        ];
        let text = encode_records(&records);
        assert!(
            text.starts_with('{'),
            "never mistaken for a checksum value: {text}"
        );
        assert_eq!(decode_records("x", text.as_bytes()).unwrap(), records);
    }

    #[test]
    fn malformed_documents_are_corrupt_and_name_the_object() {
        for bad in [
            "",
            "[]",
            r#"{"version":2,"puts":[]}"#,
            r#"{"version":1,"puts":[{"id":"","at_ms":1,"generation":1,"start":0,"end":1}]}"#,
            r#"{"version":1,"puts":[{"id":"a","at_ms":1,"generation":1,"start":2,"end":1}]}"#,
            r#"{"version":1,"puts":[{"id":"a","at_ms":1,"generation":1,"start":0}]}"#,
        ] {
            let e = decode_records("wal/7", bad.as_bytes()).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Corrupt, "{bad}: {e}");
            assert!(e.to_string().contains("wal/7"), "{e}");
        }
    }
}
