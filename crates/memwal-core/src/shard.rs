//! Which shard a writer, reader or tailer opens: by name, or by id.
//!
//! The on-disk layout names shards by UUID (`_mem_wal/<uuid>/`, as Lance's MemWAL does). A
//! name maps to one UUID for ever (a version-5 UUID in memwal's namespace), so opening
//! `events` reaches the same shard from any process, with nothing to save; the manifest
//! records the name, so listings can show it. A shard opened with neither a name nor an id is
//! the shard named [`DEFAULT_SHARD_NAME`], so reopening a location reopens its shard. Ids stay
//! available for Lance-style shards whose UUID was chosen elsewhere.

use std::fmt;

use unicode_normalization::UnicodeNormalization;
use uuid::Uuid;

use crate::error::{Error, Result};

/// The name of the shard a writer, reader or tailer opens when given neither a name nor an id.
pub const DEFAULT_SHARD_NAME: &str = "default";

/// The longest shard name, in bytes: a name is a label, recorded in every manifest version.
pub const MAX_SHARD_NAME_BYTES: usize = 200;

/// The UUID namespace of shard names (fixed: changing it would move every named shard).
const NAMESPACE: Uuid = Uuid::from_u128(0xca2e_c0ef_b7f4_4339_afc0_58ef_2006_c8a6);

/// A valid shard name. Invariant: 1 to [`MAX_SHARD_NAME_BYTES`] bytes, no control characters,
/// no leading or trailing white space, in Unicode NFC, and not itself a UUID (so a name and an
/// id are never confused where either is accepted, as in the CLI's `--shard`). NFC because the
/// id hashes the name's bytes: `café` typed as `e` plus a combining accent (NFD, as macOS file
/// names and some keyboards produce it) would otherwise be a second shard that lists and prints
/// exactly like the first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardName(String);

impl ShardName {
    /// Checks `name`.
    ///
    /// # Errors
    /// `InvalidArgument` saying what is wrong with it.
    pub fn parse(name: &str) -> Result<Self> {
        let problem = if name.is_empty() {
            Some("is empty".to_string())
        } else if name.len() > MAX_SHARD_NAME_BYTES {
            Some(format!(
                "is {} bytes long; the limit is {MAX_SHARD_NAME_BYTES}",
                name.len()
            ))
        } else if name.chars().any(char::is_control) {
            Some("holds a control character".to_string())
        } else if name.trim() != name {
            Some("starts or ends with white space".to_string())
        } else if !unicode_normalization::is_nfc(name) {
            Some(format!(
                "is not in Unicode NFC (composed) form, so it would reach a different shard than the same name written composed ({}). Pass the name normalized, e.g. name.normalize('NFC') in JavaScript; a shard already created under this spelling can still be opened by its id (shardId, or --shard ID in the CLI)",
                quoted(&name.nfc().collect::<String>())
            ))
        } else if Uuid::parse_str(name).is_ok() {
            Some("is a UUID; pass a shard's id as shardId (or --shard in the CLI)".to_string())
        } else {
            None
        };
        match problem {
            None => Ok(ShardName(name.to_string())),
            Some(p) => Err(Error::invalid(format!("shard name {} {p}", quoted(name)))),
        }
    }

    /// The shard's id: the same for this name everywhere, for ever.
    pub fn id(&self) -> Uuid {
        Uuid::new_v5(&NAMESPACE, self.0.as_bytes())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShardName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `s` quoted for an error message, cut after 60 characters: a message must stay readable
/// whatever the caller passed.
pub(crate) fn quoted(s: &str) -> String {
    const KEEP: usize = 60;
    match s.char_indices().nth(KEEP) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &s[..cut], s.len()),
    }
}

/// A shard, by name or by id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ShardRef {
    /// A named shard (its id derived from the name).
    Name(ShardName),
    /// A shard by its UUID.
    Id(Uuid),
}

impl ShardRef {
    /// The error for this shard missing at `location` (no manifest there).
    pub(crate) fn not_found_at(&self, location: &str) -> crate::error::Error {
        crate::error::Error::invalid(format!(
            "no shard {self} at {location}: it has no manifest. Check the location and the shard's name or id"
        ))
    }

    /// A UUID is an id; anything else must be a valid name.
    ///
    /// # Errors
    /// `InvalidArgument` for a string that is neither.
    pub fn parse(s: &str) -> Result<Self> {
        match Uuid::parse_str(s) {
            Ok(id) => Ok(ShardRef::Id(id)),
            Err(_) => ShardName::parse(s).map(ShardRef::Name),
        }
    }

    /// The shard's id.
    pub fn id(&self) -> Uuid {
        match self {
            ShardRef::Name(n) => n.id(),
            ShardRef::Id(id) => *id,
        }
    }

    /// The name, if the shard was given by name.
    pub fn name(&self) -> Option<&ShardName> {
        match self {
            ShardRef::Name(n) => Some(n),
            ShardRef::Id(_) => None,
        }
    }
}

impl Default for ShardRef {
    /// The shard named [`DEFAULT_SHARD_NAME`].
    fn default() -> Self {
        ShardRef::Name(ShardName(DEFAULT_SHARD_NAME.to_string()))
    }
}

impl From<Uuid> for ShardRef {
    fn from(id: Uuid) -> Self {
        ShardRef::Id(id)
    }
}

impl From<ShardName> for ShardRef {
    fn from(name: ShardName) -> Self {
        ShardRef::Name(name)
    }
}

impl fmt::Display for ShardRef {
    /// `` `events` (<id>) `` for a name, the id alone for an id.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardRef::Name(n) => write!(f, "`{n}` ({})", n.id()),
            ShardRef::Id(id) => write!(f, "{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_has_one_id_for_ever() {
        let a = ShardName::parse("events").unwrap();
        assert_eq!(a.id(), ShardName::parse("events").unwrap().id());
        assert_ne!(a.id(), ShardName::parse("Events").unwrap().id());
        assert_eq!(a.id().get_version_num(), 5);
        // Pinned: a change of namespace or hashing would move every named shard.
        assert_eq!(
            ShardRef::default().id().to_string(),
            Uuid::new_v5(&NAMESPACE, b"default").to_string()
        );
        assert_eq!(
            NAMESPACE.to_string(),
            "ca2ec0ef-b7f4-4339-afc0-58ef2006c8a6"
        );
    }

    #[test]
    fn bad_names_are_refused_saying_why() {
        let long = "x".repeat(MAX_SHARD_NAME_BYTES + 1);
        for (name, why) in [
            ("", "is empty"),
            (long.as_str(), "bytes long"),
            ("a\nb", "control character"),
            ("a\0b", "control character"),
            (" events", "white space"),
            ("550e8400-e29b-41d4-a716-446655440000", "is a UUID"),
        ] {
            let e = ShardName::parse(name).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
            assert!(e.to_string().contains(why), "{name:?}: {e}");
        }
        assert!(ShardName::parse("tenant-7/events.v2 (eu)").is_ok());
        let e = ShardName::parse(&format!("{long}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 200 && e.contains("202 bytes"), "{e}");
        assert!(ShardName::parse(&"é".repeat(MAX_SHARD_NAME_BYTES / 2)).is_ok());
    }

    #[test]
    fn a_name_not_in_nfc_is_refused_saying_how_to_normalize_it() {
        let decomposed = "cafe\u{301}";
        let e = ShardName::parse(decomposed).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
        let m = e.to_string();
        assert!(m.contains("is not in Unicode NFC"), "{m}");
        assert!(m.contains("normalize('NFC')"), "{m}");
        assert!(m.contains("by its id"), "{m}");
        assert!(m.contains("(\"café\")"), "shows the composed spelling: {m}");
        assert!(
            ShardRef::parse(decomposed).is_err(),
            "every entry point parses names here"
        );
        // The composed spelling is the one name.
        assert_eq!(ShardName::parse("caf\u{e9}").unwrap().as_str(), "café");
    }

    #[test]
    fn a_uuid_is_an_id_and_anything_else_a_name() {
        let id = "550e8400-e29b-41d4-a716-446655440000";
        assert_eq!(
            ShardRef::parse(id).unwrap(),
            ShardRef::Id(Uuid::parse_str(id).unwrap())
        );
        let named = ShardRef::parse("events").unwrap();
        assert_eq!(named.name().map(ShardName::as_str), Some("events"));
        assert_eq!(named.id(), ShardName::parse("events").unwrap().id());
        assert!(ShardRef::parse("").is_err());
        assert_eq!(
            ShardRef::default().name().map(ShardName::as_str),
            Some(DEFAULT_SHARD_NAME)
        );
    }
}
