//! Every object path memwal uses, and nothing else: the `_mem_wal/<shard>/…` layout and its
//! bit-reversed file names (`docs/format.md`, "Layout").
//!
//! Paths are built here and only here, so that the on-disk layout (which Lance readers depend
//! on) is written down once. Everything is relative to a store's root prefix; [`ShardPaths`]
//! is handed out by [`super::Store::shard_paths`].
//!
//! ```text
//! <root>/_mem_wal/<shard>/manifest/<bitrev64(version)>.binpb
//! <root>/_mem_wal/<shard>/manifest/version_hint.json
//! <root>/_mem_wal/<shard>/wal/<bitrev64(position)>.arrow
//! <root>/_mem_wal/<shard>/<random8hex>_gen_<g>/data.parquet
//! ```

use object_store::path::Path;
use uuid::Uuid;

/// Name of the directory holding all shards under a store root.
pub const MEM_WAL_DIR: &str = "_mem_wal";

/// File name of a generation's data inside its directory.
pub const GENERATION_FILE_NAME: &str = "data.parquet";

/// File name of a generation's request ids inside its directory (see [`crate::request_id`]).
pub const GENERATION_REQUEST_IDS_NAME: &str = "request_ids.json";

/// The path segment naming a shard's WAL directory.
const WAL_DIR: &str = "wal";

/// `n` bit-reversed and printed as 64 binary digits, then `.ext` (`docs/format.md`, "Object
/// names"): consecutive numbers differ in their first digits, which spreads sequential keys across
/// S3 partitions.
pub fn bitrev64_name(n: u64, ext: &str) -> String {
    format!("{:064b}.{ext}", n.reverse_bits())
}

/// Inverse of [`bitrev64_name`]: the number, if `name` is exactly 64 binary digits, a dot and
/// an alphanumeric extension. Anything else (staging files such as `object_store`'s
/// `<name>#1`, hints, foreign files) is `None`.
pub fn parse_bitrev64_name(name: &str) -> Option<u64> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 64
        || !stem.bytes().all(|b| b == b'0' || b == b'1')
        || ext.is_empty()
        || !ext.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return None;
    }
    u64::from_str_radix(stem, 2).ok().map(u64::reverse_bits)
}

/// Eight random lowercase hex characters: the prefix of a generation directory, fresh per flush
/// attempt so a retry never reuses a partially written directory.
pub fn random8hex() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Whether `path` is a WAL entry (or inside a WAL directory). WAL entries are the writes
/// whose outcome decides durability, so the local store and the fault injector single them
/// out.
pub(crate) fn is_wal_path(path: &Path) -> bool {
    path.parts().any(|p| p.as_ref() == WAL_DIR)
}

/// Every object path of one shard (`docs/format.md`, "Layout").
#[derive(Debug, Clone)]
pub struct ShardPaths {
    shard_id: Uuid,
    shard_dir: Path,
}

impl ShardPaths {
    /// The paths of shard `shard_id` under store root `root`.
    pub(super) fn new(root: &Path, shard_id: Uuid) -> Self {
        let shard_dir = root
            .clone()
            .join(MEM_WAL_DIR)
            .join(shard_id.hyphenated().to_string().as_str());
        ShardPaths {
            shard_id,
            shard_dir,
        }
    }

    /// The shard's id.
    pub fn shard_id(&self) -> Uuid {
        self.shard_id
    }

    /// `_mem_wal/<shard>`
    pub fn shard_dir(&self) -> &Path {
        &self.shard_dir
    }

    /// `_mem_wal/<shard>/manifest`
    pub fn manifest_dir(&self) -> Path {
        self.shard_dir.clone().join("manifest")
    }

    /// `_mem_wal/<shard>/manifest/<bitrev64(version)>.binpb`
    pub fn manifest(&self, version: u64) -> Path {
        self.manifest_dir()
            .join(bitrev64_name(version, "binpb").as_str())
    }

    /// `_mem_wal/<shard>/manifest/version_hint.json`
    pub fn version_hint(&self) -> Path {
        self.manifest_dir().join("version_hint.json")
    }

    /// `_mem_wal/<shard>/wal`
    pub fn wal_dir(&self) -> Path {
        self.shard_dir.clone().join(WAL_DIR)
    }

    /// `_mem_wal/<shard>/segments`: the segment-log WAL of a local shard (its segments, spares
    /// and fence file; see `crate::wal::segments`).
    pub fn segments_dir(&self) -> Path {
        self.shard_dir.clone().join("segments")
    }

    /// `_mem_wal/<shard>/wal/<bitrev64(position)>.arrow`
    pub fn wal_entry(&self, position: u64) -> Path {
        self.wal_dir()
            .join(bitrev64_name(position, "arrow").as_str())
    }

    /// `<random8hex>_gen_<g>`: a generation directory name, relative to the shard directory.
    pub fn new_generation_dir_name(generation: u64) -> String {
        format!("{}_gen_{generation}", random8hex())
    }

    /// `_mem_wal/<shard>/<dir>/data.parquet`
    pub fn generation_file(&self, dir_name: &str) -> Path {
        self.shard_dir
            .clone()
            .join(dir_name)
            .join(GENERATION_FILE_NAME)
    }

    /// The request ids of a flushed generation (`request_ids.json`), beside its data file.
    pub fn generation_request_ids(&self, dir_name: &str) -> Path {
        self.shard_dir
            .clone()
            .join(dir_name)
            .join(GENERATION_REQUEST_IDS_NAME)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitrev64_names_are_the_reversed_bits_in_binary() {
        assert_eq!(0u64.reverse_bits(), 0);
        assert_eq!(1u64.reverse_bits(), 0x8000_0000_0000_0000);
        assert_eq!(5u64.reverse_bits(), 0xa000_0000_0000_0000);
        assert_eq!(
            bitrev64_name(1, "binpb"),
            format!("1{}.binpb", "0".repeat(63))
        );
        assert_eq!(
            bitrev64_name(5, "lance"),
            format!("101{}.lance", "0".repeat(61))
        );
        for n in [1u64, 2, 5, 1000, u64::MAX, 1 << 40] {
            assert_eq!(parse_bitrev64_name(&bitrev64_name(n, "arrow")), Some(n));
        }
    }

    #[test]
    fn foreign_names_do_not_parse() {
        for bad in [
            "invalid",
            "123.binpb",
            &format!("{}.binpb", "1".repeat(65)),
            &format!("{}2.arrow", "0".repeat(63)),
            "version_hint.json",
            // object_store's staging files, and our name without an extension.
            &format!("{}.arrow#1", "0".repeat(64)),
            &format!("{}.arrow%231", "1".repeat(64)),
            &format!("{}.binpb.tmp", "1".repeat(64)),
            &format!("{}.", "1".repeat(64)),
            &"1".repeat(64),
        ] {
            assert_eq!(parse_bitrev64_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn shard_paths_follow_the_layout() {
        let id = Uuid::parse_str("550e8400-e29b-41d4-a716-446655440000").unwrap();
        let p = ShardPaths::new(&Path::from("my/dataset"), id);
        assert_eq!(
            p.wal_dir().to_string(),
            "my/dataset/_mem_wal/550e8400-e29b-41d4-a716-446655440000/wal"
        );
        assert_eq!(
            p.manifest_dir().to_string(),
            "my/dataset/_mem_wal/550e8400-e29b-41d4-a716-446655440000/manifest"
        );
        assert_eq!(
            p.generation_file("a1b2c3d4_gen_5").to_string(),
            "my/dataset/_mem_wal/550e8400-e29b-41d4-a716-446655440000/a1b2c3d4_gen_5/data.parquet"
        );
        let p = ShardPaths::new(&Path::default(), id);
        assert_eq!(
            p.wal_dir().to_string(),
            "_mem_wal/550e8400-e29b-41d4-a716-446655440000/wal"
        );
    }

    #[test]
    fn random8hex_is_eight_hex_chars_and_varies() {
        let a = random8hex();
        assert_eq!(a.len(), 8);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        let distinct: std::collections::HashSet<_> = (0..16).map(|_| random8hex()).collect();
        assert!(distinct.len() > 1);
    }
}
