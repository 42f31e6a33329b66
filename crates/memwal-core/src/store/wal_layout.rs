//! [`WalLayout`]: how a shard's WAL is laid out in a store, objects or segment files (see
//! `crate::wal`). Here, below both the store and the WAL, so that a store can choose the layout
//! of its new shards without importing the WAL.

/// How a shard's WAL is laid out. The manifest records it (`ShardManifest::wal_layout`);
/// a manifest without it (written before memwal had segments, or by Lance) is `Objects`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum WalLayout {
    /// One object per entry at `wal/<bitrev64(position)>.arrow`, created if absent: the only
    /// layout an object store can fence, and the one Lance reads.
    Objects = 0,
    /// Records in preallocated segment files under `segments/`, one `fdatasync` per group
    /// commit, fenced by the fence file (`docs/wal-segments.md`). Local directories only.
    Segments = 1,
}

impl WalLayout {
    /// The name options and messages use.
    pub fn name(self) -> &'static str {
        match self {
            WalLayout::Objects => "objects",
            WalLayout::Segments => "segments",
        }
    }
}
