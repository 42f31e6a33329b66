//! The segment-log WAL for local disks (see `docs/wal-segments.md`, the design it follows):
//! preallocated segment files of records, one `fdatasync` per group commit, fenced by a fence
//! file and the first position of each claim's segment.
//!
//! - [`format`]: a segment's header and its records, checksummed with a salt per use.
//! - [`scan`]: reading a shard's segments in order into its WAL positions, telling a torn tail
//!   from damage.
//! - [`log`]: the segments folder of a shard (segments, spares, the fence file), a claim, and
//!   one writer's appends and group commits.
//!
//! Not wired into the writer yet: the object layout (`super::appender`) is the only one a shard
//! uses today.

pub mod format;
pub mod log;
pub mod scan;
