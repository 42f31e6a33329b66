//! The segment-log WAL for local disks (see `docs/wal-segments.md`, the design it follows):
//! preallocated segment files of records, one `fdatasync` per group commit, fenced by a fence
//! file and the first position of each claim's segment.
//!
//! - [`format`]: a segment's header and its records, checksummed with a salt per use.
//! - [`scan`]: reading a shard's segments in order into its WAL positions, telling a torn tail
//!   from damage.
//! - [`log`]: the segments folder of a shard (segments, spares, the fence file), a claim, and
//!   one writer's appends and group commits.
//! - [`read`]: one position at a time, for a tailer, reading only the segment that holds it.
//! - [`writer`]: [`SegmentWalWriter`], the writer's [`super::WalWriter`] over a claimed log.
//! - [`collect`]: garbage collection of segments, and the reads it may overtake.

pub mod collect;
pub mod format;
pub mod log;
pub mod read;
pub mod scan;
pub mod settled;
pub mod writer;

pub(crate) use writer::SegmentWalWriter;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::store::{ShardPaths, Store};
use crate::wal::WalEntry;
use crate::wal::entry::{EntryPlace, decode_entry};

/// The WAL entries `read` found in the segments of the shard at `paths`, decoded, in position
/// order.
pub fn entries<'a>(
    read: &'a log::Read,
    paths: &'a ShardPaths,
) -> impl Iterator<Item = Result<WalEntry>> + 'a {
    read.scanned.records.iter().map(move |found| {
        let (header, bytes) = &read.segments[found.segment];
        let object = record_name(paths, header.seq, found.offset);
        let record = format::decode_record(bytes, header.salt, found.offset)
            .ok_or_else(|| Error::corrupt(&object, "WAL record no longer decodes", None))?;
        let place = EntryPlace {
            shard: paths.shard_id(),
            position: found.position,
        };
        decode_entry(place, &object, Bytes::copy_from_slice(record.payload))
    })
}

/// How errors name the record at `offset` of segment `seq` of the shard at `paths`.
pub fn record_name(paths: &ShardPaths, seq: u64, offset: u64) -> String {
    format!("{}/{seq:020}.seg at offset {offset}", paths.segments_dir())
}

/// The segment files of the shard at `paths` in `store`, with segments of `segment_bytes`
/// for a writer's new ones.
///
/// # Errors
/// `InvalidArgument` if `store` is not a local directory: only a local store has segments.
pub fn files_of(
    store: &Store,
    paths: &ShardPaths,
    segment_bytes: u64,
) -> Result<log::SegmentFiles> {
    let local = store.local_files().ok_or_else(|| {
        Error::invalid(format!(
            "the segment WAL layout needs a local directory, and {} is an object store; use walLayout 'objects' there",
            store.location()
        ))
    })?;
    let dir = local.root.join(paths.segments_dir().as_ref());
    Ok(log::SegmentFiles::new(local.fs, dir, segment_bytes).with_faults(store.faults().clone()))
}

/// Refuses to write segments on a network file system: the fence re-check after each sync
/// reads the fence file from this host's page cache, which a claimant on another host does not
/// write to (`docs/wal-segments.md`, "Fencing").
///
/// # Errors
/// `InvalidArgument` naming the file system.
pub fn check_local_disk(files: &log::SegmentFiles) -> Result<()> {
    match files.network_file_system() {
        Ok(None) => Ok(()),
        Ok(Some(kind)) => Err(Error::invalid(format!(
            "walLayout 'segments' needs a local disk, and {} is on {kind}: its fence is read from this host's page cache, which does not see a claim made on another host. Use walLayout 'objects' there",
            files.dir().display()
        ))),
        Err(e) => Err(Error::io_msg(format!(
            "could not tell which file system {} is on: {e}",
            files.dir().display()
        ))),
    }
}

/// What a read of a shard's segments found from a position on.
#[derive(Debug)]
pub struct Entries {
    /// The entries, in position order.
    pub entries: Vec<WalEntry>,
    /// The first position with no entry: the tip.
    pub end: u64,
    /// The first position any segment holds (`None`: no segment); positions below it were
    /// collected.
    pub first_available: Option<u64>,
}

/// Reads the WAL entries of the segment-layout shard at `paths` from position `start` on,
/// without claiming anything (on a blocking thread).
///
/// The last segment has no successor to bound it. While a claimant replays (the fence file
/// holds its epoch, its segment does not exist yet), the stale writer may still append there a
/// record the claim will refuse: a read then would return a row whose put fails. So a read is
/// taken only when the fence file, read after the segments, holds the last segment's epoch, and
/// otherwise taken again shortly, until [`CLAIM_WAIT`] has passed.
///
/// # Errors
/// `Corrupt` for damage (see [`scan`]); `Io` if the files cannot be read, or a claim stays
/// under way for [`CLAIM_WAIT`] (a claimant died between its fence file and its segment: the
/// next claim settles it).
pub async fn read_entries(store: &Store, paths: &ShardPaths, start: u64) -> Result<Entries> {
    let files = files_of(store, paths, log::DEFAULT_SEGMENT_BYTES)?;
    let shard = paths.shard_id();
    let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
    let read = loop {
        let files = files.clone();
        let (read, settled) = tokio::task::spawn_blocking(move || {
            let read = files.scan(start)?;
            let settled = match read.segments.last() {
                None => true,
                Some((last, _)) => files.read_fence()? == Some(last.epoch),
            };
            Ok::<_, log::LogError>((read, settled))
        })
        .await
        .map_err(|e| Error::io_msg(format!("reading the WAL segments of shard {shard}: {e}")))?
        .map_err(|e| log_error(shard, e))?;
        if settled {
            break read;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::io_msg(format!(
                "shard {shard} is being claimed by a writer that has not started its WAL segment after {CLAIM_WAIT:?}; retry the read (a later claim settles it)"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let entries = entries(&read, paths).collect::<Result<Vec<_>>>()?;
    Ok(Entries {
        entries,
        end: read.scanned.end,
        first_available: read.scanned.first_available,
    })
}

/// How long [`read_entries`] waits for a claim under way to start its segment.
pub const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A [`log::LogError`] met while opening or reading a shard's segments, as memwal reports it.
pub fn log_error(shard: uuid::Uuid, e: log::LogError) -> Error {
    match e {
        log::LogError::Damage(d) => Error::corrupt(
            format!("segment {} of shard {shard}", d.seq),
            format!("WAL segment damaged at offset {}: {}", d.offset, d.why),
            None,
        ),
        log::LogError::Io(e) => Error::io(
            format!("reading the WAL segments of shard {shard}"),
            object_store::Error::Generic {
                store: "local",
                source: Box::new(e),
            },
        ),
        log::LogError::Claimed => Error::peer_claimed_during_open(
            format!("another writer claimed shard {shard} while this one read its WAL segments"),
            None,
        ),
    }
}
