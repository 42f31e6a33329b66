//! Reading a shard's segments while collection may take some of them, and how a stale
//! writer finds its successor's first segment.
//!
//! # Reads that collection overtakes
//! - **Readers and claimants** list the segments, then read them. A segment renamed away in
//!   between is gone from its name (a number is not used twice, but for the moment below),
//!   and if a writer took it as a spare meanwhile, its bytes change under the read.
//!   [`SegmentFiles::read_settled`] reads each segment by its name and lists again after: if one went, it
//!   starts over, so that what it returns is every segment as its own use wrote it. A collected range then shows as positions below the
//!   first segment's ([`super::scan::Scanned::first_available`]), which a reader tells from a
//!   hole by a newer manifest's mark (`crate::reader`). A claimant never needs a collected
//!   segment: it reads from after the cursor of the latest manifest, and a segment goes only
//!   once the next one starts at or below the mark plus one. Tests pause a read between its
//!   listing and its reads at pause point `wal-segments-listed`.
//! - **A stale writer** learns which of its records stand from its successor's first segment,
//!   the one numbered right after its own last ([`SegmentFiles::successor_of`]). Once collection took that
//!   segment the answer went with it ([`Successor::Collected`]), and the writer reports the
//!   outcome of those records as unknown. Its rotation targets that same number, which is free
//!   again once collected: a rotation that then finds a higher number in place gives it up
//!   ([`SegmentFiles::used_before`]), so that the number stays gone. For the moment it was back, a read may
//!   have seen it; a segment with no records where the log needs some is damage to the scan,
//!   which the reader then finds a newer manifest's mark explains, and reads again.

use std::collections::HashSet;
use std::io;
use std::path::Path;

use super::format::{HEADER_BYTES, SegmentHeader};
use super::log::{LogError, SegmentFiles, Successor};
use super::scan::Damage;

/// Reads of the log that collection overtakes in a row before `read_settled` gives up.
const READ_ATTEMPTS: usize = 16;

/// Segments as read: each one's header and bytes, in sequence order.
pub(crate) type SegmentsRead = Vec<(SegmentHeader, Vec<u8>)>;

/// The header of the segment at `path`, or why it is not one.
pub(crate) fn read_header(
    files: &SegmentFiles,
    path: &Path,
) -> io::Result<Result<SegmentHeader, &'static str>> {
    let head = files
        .fs()
        .open_file(path)?
        .read_at(0, HEADER_BYTES as usize)?;
    Ok(SegmentHeader::decode(&head))
}

impl SegmentFiles {
    /// The segments of `files` that hold positions from `start` on (every later one, and the one
    /// before that holds `start`), with their headers and bytes, in sequence order: each as its
    /// own use wrote it, although collection may recycle segments while they are read (module
    /// docs).
    ///
    /// # Errors
    /// [`LogError::Damage`] for a header that is not one; [`LogError::Io`] if the file system
    /// fails, or if collection overtook [`READ_ATTEMPTS`] reads in a row.
    pub(crate) fn read_settled(&self, start: u64) -> Result<SegmentsRead, LogError> {
        let files = self;
        for _ in 0..READ_ATTEMPTS {
            if let Some(read) = files.read_once(start)? {
                return Ok(read);
            }
        }
        Err(LogError::Io(io::Error::other(format!(
            "the WAL segments in {} were collected faster than they could be read ({READ_ATTEMPTS} attempts); read again",
            files.dir().display()
        ))))
    }

    /// One attempt of [`SegmentFiles::read_settled`]: `None` if a segment it listed was gone by its end.
    fn read_once(&self, start: u64) -> Result<Option<SegmentsRead>, LogError> {
        let files = self;
        let listed = files.list()?;
        files.pause("wal-segments-listed");
        let mut headers = Vec::with_capacity(listed.len());
        for (seq, path) in &listed {
            match read_header(files, path) {
                Ok(Ok(header)) => headers.push((header, path)),
                // Damage only if the file still has its name: a recycled file may be getting a
                // writer's new header.
                Ok(Err(why)) if files.still_listed(&[*seq])? => {
                    return Err(LogError::Damage(Damage {
                        seq: *seq,
                        offset: 0,
                        why: why.to_string(),
                    }));
                }
                Ok(Err(_)) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        // Only headers are read of the segments before the one holding `start`: a long log is not
        // read whole to replay its tail.
        let first_needed = headers
            .iter()
            .rposition(|(h, _)| h.first_position <= start)
            .unwrap_or(0);
        let mut out = Vec::new();
        for (header, path) in headers.into_iter().skip(first_needed) {
            match files.fs().read(path) {
                Ok(bytes) => out.push((header, bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        // A name that is still there was never renamed away, so its file was read as that
        // segment's own.
        let seqs: Vec<u64> = listed.iter().map(|(seq, _)| *seq).collect();
        Ok(files.still_listed(&seqs)?.then_some(out))
    }

    /// Whether every one of segments `seqs` is still in the folder.
    fn still_listed(&self, seqs: &[u64]) -> io::Result<bool> {
        let files = self;
        let now: HashSet<u64> = files.list()?.into_iter().map(|(seq, _)| seq).collect();
        Ok(seqs.iter().all(|seq| now.contains(seq)))
    }

    /// Whether a segment numbered above `seq` is in place, just after a writer's rotation created
    /// segment `seq`: then `seq` was a claimant's first segment that collection took, and the
    /// rotation gave the number a second life. Left in place, it would hide that segment's loss
    /// from the writer ([`successor_of`] would take the claimant's next segment for its first)
    /// and from readers, which rely on a name that went never coming back. The rotation is then a
    /// claim ([`LogError::Claimed`]) and removes what it created.
    pub(crate) fn used_before(&self, seq: u64) -> io::Result<bool> {
        let files = self;
        Ok(files.list()?.last().is_some_and(|(last, _)| *last > seq))
    }

    /// The first segment numbered above `after` (a writer's current segment) of an epoch above
    /// `epoch`: its claimant's first. Numbers have no gaps (a new one follows the highest in
    /// place, the last segment is never collected, and a rotation never keeps a number that was
    /// used before: `used_before`) and collection takes the oldest first, so a missing number
    /// below one in place was collected.
    ///
    /// # Errors
    /// The file system's.
    pub fn successor_of(&self, after: u64, epoch: u64) -> io::Result<Successor> {
        let files = self;
        let later = files.list()?.into_iter().filter(|(seq, _)| *seq > after);
        for (expected, (seq, path)) in (after + 1..).zip(later) {
            if seq != expected {
                return Ok(Successor::Collected);
            }
            match read_header(files, &path) {
                Ok(Ok(h)) if h.epoch > epoch => {
                    return Ok(Successor::Started {
                        first_position: h.first_position,
                        epoch: h.epoch,
                    });
                }
                // Ours (a rotation that failed after its rename), or no header: the next decides.
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Successor::Collected),
                Err(e) => return Err(e),
            }
        }
        Ok(Successor::Replaying)
    }
}
