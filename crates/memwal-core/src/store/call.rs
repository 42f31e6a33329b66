//! A call to the store, as the fault controller sees it: which actor made it, what it does,
//! and what kind of object it touches.
//!
//! Every operation of [`super::Store`] names itself with a [`StoreOp`] and the [`ObjectKind`] of
//! its path, and runs inside the [`Actor`] scope memwal set around the work that issued it (a
//! writer's claim, its WAL appends, a generation commit, a compaction, a collection, a reader,
//! a tailer). With the `testing` feature, `faults::Faults::stall` can hold any such call, before
//! or after it reaches the store, for as long as a test likes: that is how the stall suites
//! interleave a stalled actor with the others at every store call it makes
//! (`crates/memwal-core/tests/stalls.rs`). Without the feature the scopes cost nothing.

use object_store::path::Path;

use super::paths::{GENERATION_FILE_NAME, GENERATION_REQUEST_IDS_NAME};
use crate::error::{Error, Result};

/// Who issued a store call. Set by memwal around each kind of work; a call made outside every
/// scope (a test's own, or a CLI helper's) is [`Actor::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Actor {
    /// A writer opening: the epoch claim, the fence sentinel and the WAL replay.
    Claim,
    /// A writer's WAL flush handler: appends and the fence checks that follow a taken slot.
    Put,
    /// A writer's generation flush: the Parquet file, its request ids and the manifest commit
    /// (and a WAL-only writer's closing commit).
    Commit,
    /// A writer's compaction: the merged file and its manifest commit.
    Compaction,
    /// Garbage collection, in a writer's background or run on its own (`gc::collect`).
    Gc,
    /// A [`crate::ShardReader`] (and shard listing).
    Reader,
    /// A [`crate::WalTailer`].
    Tailer,
    /// Anything else: a writer's own reads (`check_fenced`, `manifest`), tests, tools.
    Other,
}

impl Actor {
    /// The actor's name, as JavaScript's `StoreFaults.stall` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Actor::Claim => "claim",
            Actor::Put => "put",
            Actor::Commit => "commit",
            Actor::Compaction => "compaction",
            Actor::Gc => "gc",
            Actor::Reader => "reader",
            Actor::Tailer => "tailer",
            Actor::Other => "other",
        }
    }

    /// Inverse of [`Actor::name`].
    pub fn from_name(name: &str) -> Option<Actor> {
        Actor::ALL.into_iter().find(|a| a.name() == name)
    }

    /// [`Actor::from_name`], or `InvalidArgument` naming every actor.
    pub fn parse(name: &str) -> Result<Actor> {
        Actor::from_name(name).ok_or_else(|| unknown("actor", name, Actor::ALL.map(Actor::name)))
    }

    /// Every actor.
    pub const ALL: [Actor; 8] = [
        Actor::Claim,
        Actor::Put,
        Actor::Commit,
        Actor::Compaction,
        Actor::Gc,
        Actor::Reader,
        Actor::Tailer,
        Actor::Other,
    ];
}

/// What a store call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    /// Read an object.
    Get,
    /// Ask whether an object exists.
    Head,
    /// List a prefix (objects or folders).
    List,
    /// Create an object if absent (the first free of several, for a WAL sentinel).
    Create,
    /// Stage an object's data ahead of its create (a local store writes and syncs it).
    Stage,
    /// Overwrite an object (only the best-effort version hint).
    Overwrite,
    /// Delete an object.
    Delete,
    /// Make objects already written durable (a local store's file and folder syncs).
    Sync,
}

impl StoreOp {
    /// The operation's name, as JavaScript's `StoreFaults.stall` takes it.
    pub fn name(self) -> &'static str {
        match self {
            StoreOp::Get => "get",
            StoreOp::Head => "head",
            StoreOp::List => "list",
            StoreOp::Create => "create",
            StoreOp::Stage => "stage",
            StoreOp::Overwrite => "overwrite",
            StoreOp::Delete => "delete",
            StoreOp::Sync => "sync",
        }
    }

    /// Inverse of [`StoreOp::name`].
    pub fn from_name(name: &str) -> Option<StoreOp> {
        StoreOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// [`StoreOp::from_name`], or `InvalidArgument` naming every operation.
    pub fn parse(name: &str) -> Result<StoreOp> {
        StoreOp::from_name(name).ok_or_else(|| unknown("op", name, StoreOp::ALL.map(StoreOp::name)))
    }

    /// Every operation.
    pub const ALL: [StoreOp; 8] = [
        StoreOp::Get,
        StoreOp::Head,
        StoreOp::List,
        StoreOp::Create,
        StoreOp::Stage,
        StoreOp::Overwrite,
        StoreOp::Delete,
        StoreOp::Sync,
    ];
}

/// The kind of object a store call touches, told from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A manifest version, or the manifest folder.
    Manifest,
    /// `version_hint.json`.
    VersionHint,
    /// A WAL entry, or the WAL folder.
    WalEntry,
    /// A generation's Parquet file, or a shard's folder of generations.
    Generation,
    /// A generation's `request_ids.json`.
    RequestIds,
    /// Anything else (the conditional-create probe, the store root).
    Other,
}

impl ObjectKind {
    /// The kind of the object (or folder) at `path`.
    pub fn of(path: &Path) -> ObjectKind {
        let parts: Vec<_> = path.parts().collect();
        let last = parts.last().map(|p| p.as_ref()).unwrap_or_default();
        let parent = parts
            .len()
            .checked_sub(2)
            .map(|i| parts[i].as_ref())
            .unwrap_or_default();
        match (parent, last) {
            (_, "manifest") => ObjectKind::Manifest,
            ("manifest", "version_hint.json") => ObjectKind::VersionHint,
            ("manifest", _) => ObjectKind::Manifest,
            (_, "wal") | ("wal", _) => ObjectKind::WalEntry,
            (_, GENERATION_FILE_NAME) => ObjectKind::Generation,
            (_, GENERATION_REQUEST_IDS_NAME) => ObjectKind::RequestIds,
            (p, _) if p.contains("_gen_") => ObjectKind::Generation,
            (_, l) if l.contains("_gen_") => ObjectKind::Generation,
            (super::paths::MEM_WAL_DIR, _) => ObjectKind::Generation,
            _ => ObjectKind::Other,
        }
    }

    /// The kind's name, as JavaScript's `StoreFaults.stall` takes it.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Manifest => "manifest",
            ObjectKind::VersionHint => "version-hint",
            ObjectKind::WalEntry => "wal",
            ObjectKind::Generation => "generation",
            ObjectKind::RequestIds => "request-ids",
            ObjectKind::Other => "other",
        }
    }

    /// Inverse of [`ObjectKind::name`].
    pub fn from_name(name: &str) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// [`ObjectKind::from_name`], or `InvalidArgument` naming every kind (JavaScript calls a
    /// kind `object`).
    pub fn parse(name: &str) -> Result<ObjectKind> {
        ObjectKind::from_name(name)
            .ok_or_else(|| unknown("object", name, ObjectKind::ALL.map(ObjectKind::name)))
    }

    /// Every kind.
    pub const ALL: [ObjectKind; 6] = [
        ObjectKind::Manifest,
        ObjectKind::VersionHint,
        ObjectKind::WalEntry,
        ObjectKind::Generation,
        ObjectKind::RequestIds,
        ObjectKind::Other,
    ];
}

/// Whether a stall holds a call before it reaches the store, or after the store answered and
/// before its caller sees the answer (the call has then taken effect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum When {
    /// Before the call reaches the store.
    Before,
    /// After the store answered, before the caller sees it.
    After,
}

impl When {
    /// Its name, as JavaScript's `StoreFaults.stall` takes it.
    pub fn name(self) -> &'static str {
        match self {
            When::Before => "before",
            When::After => "after",
        }
    }

    /// [`When::name`]'s inverse, or `InvalidArgument` naming both.
    pub fn parse(name: &str) -> Result<When> {
        [When::Before, When::After]
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| unknown("when", name, [When::Before, When::After].map(When::name)))
    }
}

/// The error for a name that is none of `allowed`: JavaScript passes names as strings, and a
/// typo would otherwise arm a stall that never matches and hang the test at `reached()`.
fn unknown<const N: usize>(what: &str, name: &str, allowed: [&str; N]) -> Error {
    Error::invalid(format!(
        "stall: {what} must be one of {}; got {name:?}",
        allowed.map(|a| format!("'{a}'")).join(", ")
    ))
}

/// One store call, as recorded by `faults::Faults::record_calls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCall {
    /// The label of the store handle it went through (`Store::with_label`), if any.
    pub label: Option<String>,
    /// Who made it.
    pub actor: Actor,
    /// What it did.
    pub op: StoreOp,
    /// On what kind of object.
    pub kind: ObjectKind,
    /// The object's (or folder's) path.
    pub path: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_from_paths() {
        let s = "_mem_wal/550e8400-e29b-41d4-a716-446655440000";
        let kind = |p: &str| ObjectKind::of(&Path::from(p));
        assert_eq!(kind(&format!("{s}/manifest")), ObjectKind::Manifest);
        assert_eq!(
            kind(&format!("{s}/manifest/{}.binpb", "1".repeat(64))),
            ObjectKind::Manifest
        );
        assert_eq!(
            kind(&format!("{s}/manifest/version_hint.json")),
            ObjectKind::VersionHint
        );
        assert_eq!(kind(&format!("{s}/wal")), ObjectKind::WalEntry);
        assert_eq!(
            kind(&format!("{s}/wal/{}.arrow", "1".repeat(64))),
            ObjectKind::WalEntry
        );
        assert_eq!(
            kind(&format!("{s}/0a1b2c3d_gen_4/data.parquet")),
            ObjectKind::Generation
        );
        assert_eq!(kind(&format!("{s}/0a1b2c3d_gen_4")), ObjectKind::Generation);
        assert_eq!(kind(s), ObjectKind::Generation);
        assert_eq!(
            kind(&format!("{s}/0a1b2c3d_gen_4/request_ids.json")),
            ObjectKind::RequestIds
        );
        assert_eq!(kind("_mem_wal/.create-probe/x"), ObjectKind::Other);
    }

    #[test]
    fn names_round_trip() {
        for a in Actor::ALL {
            assert_eq!(Actor::from_name(a.name()), Some(a));
        }
        for o in [
            "get",
            "head",
            "list",
            "create",
            "stage",
            "overwrite",
            "delete",
            "sync",
        ] {
            assert_eq!(StoreOp::from_name(o).unwrap().name(), o);
        }
        for k in [
            "manifest",
            "version-hint",
            "wal",
            "generation",
            "request-ids",
            "other",
        ] {
            assert_eq!(ObjectKind::from_name(k).unwrap().name(), k);
        }
        assert_eq!(Actor::from_name("nobody"), None);
        for w in ["before", "after"] {
            assert_eq!(When::parse(w).unwrap().name(), w);
        }
    }

    #[test]
    fn unknown_names_are_refused_naming_the_allowed_ones() {
        let e = Actor::parse("writer").unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
        assert_eq!(
            e.to_string(),
            "stall: actor must be one of 'claim', 'put', 'commit', 'compaction', 'gc', 'reader', 'tailer', 'other'; got \"writer\""
        );
        let e = StoreOp::parse("put").unwrap_err().to_string();
        assert!(e.contains("op must be one of 'get', 'head', 'list', 'create', 'stage', 'overwrite', 'delete', 'sync'"), "{e}");
        let e = ObjectKind::parse("wal-entry").unwrap_err().to_string();
        assert!(e.contains("object must be one of 'manifest', 'version-hint', 'wal', 'generation', 'request-ids', 'other'"), "{e}");
        let e = When::parse("during").unwrap_err().to_string();
        assert!(
            e.contains("when must be one of 'before', 'after'; got \"during\""),
            "{e}"
        );
    }
}
