//! Garbage collection of a shard's segments, and the reads it may overtake
//! (`docs/wal-segments.md`, "Collection").
//!
//! # What [`collect`] takes out of the log
//! A segment holds the positions from its first up to the next segment's first. Once all of
//! them are at or below the manifest's low-water mark, their rows are in committed generations
//! and nobody reads them again: readers and claimants start after the replay cursor of a
//! manifest at least that new, and the mark never passes the cursor. Such segments leave the
//! log oldest first, so that what stays is always a suffix of it:
//! - **The last segment stays**: its range is open, its writer appends to it, and the next
//!   sequence number follows it, so that no number is ever used twice.
//! - **A segment followed by one of its own epoch is recycled**: its writer rotated past it and
//!   never writes into it again. It becomes a spare that a writer's next rotation takes
//!   without allocating, and that use gives it a new header and salt, under which the records
//!   it keeps never validate. It is renamed to a `.filling-` name and the folder synced before
//!   it is renamed to a spare: a writer that takes the spare writes its new header into it,
//!   and a power loss must never bring that file back under its old segment's name. At most
//!   [`MAX_SPARES`] spares are kept; beyond that a collected segment is removed.
//! - **The last segment of an epoch is removed, never recycled**: its writer may be a stale
//!   one, stalled before an append, that still holds it open. That append then lands in a file
//!   no name reaches, where a recycled file would carry it into a later segment's records.
//! - **Leftovers**: `.filling-` files older than the grace period (an allocation or a recycling
//!   that a crash cut off), and spares beyond [`MAX_SPARES`], are removed. A grace period
//!   shorter than a live allocation takes its file too; the allocation then fills another
//!   ([`SegmentFiles::allocate_spare`]; tests pause it at `wal-segments-spare-filled`).
//!
//!
//! Reads that collection overtakes, and how a stale writer finds its successor: `super::settled`.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use uuid::Uuid;

use super::log::{FILLING_PREFIX, SEGMENT_EXT, SPARE_PREFIX, SegmentFiles};
use super::settled::read_header;

/// Spares a collection keeps: enough for a writer's next rotations, few enough that a shard
/// whose log shrank does not keep its old size on disk.
pub const MAX_SPARES: usize = 2;

/// What one [`collect`] did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Segments taken out of the log: recycled as spares, or removed.
    pub segments: u64,
    /// Of those, the ones recycled as spares.
    pub recycled: u64,
    /// The WAL positions those segments held.
    pub positions: u64,
    /// Bytes of the files removed: segments not recycled, spares beyond [`MAX_SPARES`], and
    /// leftover `.filling-` files (a recycled segment keeps its bytes, as a spare).
    pub bytes_removed: u64,
}

/// Collects the segments of `files` whose positions are all at or below `low_water`, and
/// removes `.filling-` files older than `grace` and spares beyond [`MAX_SPARES`]. See the
/// module docs. With `dry_run`, reports what it would do and changes nothing.
///
/// # Errors
/// The file system's; what was done before stays done, and a rerun continues.
pub fn collect(
    files: &SegmentFiles,
    low_water: u64,
    grace: Duration,
    dry_run: bool,
) -> io::Result<Collected> {
    let act = Act { files, dry_run };
    let mut out = Collected::default();
    act.take_out(collectible(files, low_water)?, &mut out)?;
    act.tidy(grace, &mut out)?;
    Ok(out)
}

/// A segment to take out of the log.
struct Doomed {
    path: PathBuf,
    /// The positions it holds.
    positions: u64,
    len: u64,
    /// Whether the next segment is of its epoch: its writer never writes into it again.
    recyclable: bool,
}

/// The segments whose every position is at or below `low_water`, oldest first: a prefix of
/// the log, never its last segment.
fn collectible(files: &SegmentFiles, low_water: u64) -> io::Result<Vec<Doomed>> {
    let mut listed = Vec::new();
    for (_, path) in files.list()? {
        match read_header(files, &path) {
            Ok(Ok(header)) => listed.push((path, header)),
            // Its range, and the one before it, cannot be told: they stay, and so does every
            // later one, as collection only takes a prefix.
            Ok(Err(_)) => break,
            // Taken by another collection meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    let mut out = Vec::new();
    for pair in listed.windows(2) {
        let [(path, header), (_, next)] = pair else {
            unreachable!("windows of two")
        };
        if next.first_position > low_water.saturating_add(1) {
            break;
        }
        let len = match files.fs().stat(path) {
            Ok(info) => info.len,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        out.push(Doomed {
            path: path.clone(),
            positions: next.first_position - header.first_position,
            len,
            recyclable: next.epoch == header.epoch,
        });
    }
    Ok(out)
}

/// The file operations of one collection: none in a dry run.
struct Act<'a> {
    files: &'a SegmentFiles,
    dry_run: bool,
}

impl Act<'_> {
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.dry_run {
            return Ok(());
        }
        self.files.fs().rename_noreplace(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        if self.dry_run {
            return Ok(());
        }
        self.files.fs().remove_file(path)
    }

    /// A new name with `prefix` in the folder.
    fn named(&self, prefix: &str) -> PathBuf {
        let id = Uuid::new_v4().simple();
        self.files.dir().join(format!("{prefix}{id}{SEGMENT_EXT}"))
    }

    fn sync(&self) -> io::Result<()> {
        if self.dry_run {
            return Ok(());
        }
        self.files.fs().sync_dir(self.files.dir())
    }

    /// Takes `doomed` out of the log in order, recycling or removing each (module docs).
    fn take_out(&self, doomed: Vec<Doomed>, out: &mut Collected) -> io::Result<()> {
        let mut spares = self.spares()?.len();
        let mut filling = Vec::new();
        for d in doomed {
            let recycle = d.recyclable && spares < MAX_SPARES;
            let taken = if recycle {
                let to = self.named(FILLING_PREFIX);
                self.rename(&d.path, &to).map(|()| filling.push(to))
            } else {
                self.remove(&d.path)
            };
            match taken {
                Ok(()) => {}
                // Taken out by another collection meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
            out.segments += 1;
            out.positions += d.positions;
            if recycle {
                spares += 1;
                out.recycled += 1;
            } else {
                out.bytes_removed += d.len;
            }
        }
        if filling.is_empty() {
            return Ok(());
        }
        self.sync()?;
        for f in filling {
            match self.rename(&f, &self.named(SPARE_PREFIX)) {
                Ok(()) => {}
                // Another collection removed it as a leftover (a rename keeps the old
                // segment's modification time): one spare fewer.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        self.sync()
    }

    /// Removes `.filling-` files older than `grace`, and the smallest spares beyond
    /// [`MAX_SPARES`] (a rotation takes only a spare as large as its segments).
    fn tidy(&self, grace: Duration, out: &mut Collected) -> io::Result<()> {
        let now = SystemTime::now();
        for name in self.names()? {
            if !name.starts_with(FILLING_PREFIX) {
                continue;
            }
            let path = self.files.dir().join(&name);
            let info = match self.files.fs().stat(&path) {
                Ok(info) => info,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if now.duration_since(info.modified).unwrap_or_default() >= grace {
                self.remove_counted(&path, info.len, out)?;
            }
        }
        let mut spares = self.spares()?;
        spares.sort_by_key(|(_, len)| std::cmp::Reverse(*len));
        for (path, len) in spares.into_iter().skip(MAX_SPARES) {
            self.remove_counted(&path, len, out)?;
        }
        Ok(())
    }

    /// Removes the file at `path` of `len` bytes, unless something else removed it first.
    fn remove_counted(&self, path: &Path, len: u64, out: &mut Collected) -> io::Result<()> {
        match self.remove(path) {
            Ok(()) => out.bytes_removed += len,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The names of the files in the folder (none if it does not exist yet).
    fn names(&self) -> io::Result<Vec<String>> {
        match self.files.fs().read_dir(self.files.dir()) {
            Ok(names) => Ok(names
                .into_iter()
                .filter(|(_, is_dir)| !is_dir)
                .map(|(name, _)| name)
                .collect()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The spares in the folder, with their sizes.
    fn spares(&self) -> io::Result<Vec<(PathBuf, u64)>> {
        let mut out = Vec::new();
        for name in self.names()? {
            if !name.starts_with(SPARE_PREFIX) {
                continue;
            }
            let path = self.files.dir().join(&name);
            match self.files.fs().stat(&path) {
                Ok(info) => out.push((path, info.len)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::sync::Arc;

    use super::super::format::SegmentHeader;
    use super::super::log::{LogError, SegmentLog, Successor};
    use super::*;
    use crate::store::faults::Faults;
    use crate::store::fs::StdFs;

    const SMALL: u64 = 8192;
    /// About three records to a segment of [`SMALL`] bytes.
    const PAYLOAD: usize = 1000;

    fn files(dir: &Path) -> SegmentFiles {
        SegmentFiles::new(Arc::new(StdFs), dir.join("segments"), SMALL)
    }

    fn claim(dir: &Path, epoch: u64, cursor: u64) -> SegmentLog {
        SegmentLog::claim(files(dir), epoch, Uuid::new_v4(), cursor)
            .unwrap()
            .0
    }

    /// `n` committed records of `byte` into `log`.
    fn append(log: &mut SegmentLog, n: usize, byte: u8) {
        for _ in 0..n {
            log.append(&[byte; PAYLOAD]).unwrap();
        }
        log.commit().unwrap();
    }

    /// The segments' numbers and headers, in order.
    fn headers(dir: &Path) -> Vec<(u64, SegmentHeader)> {
        let f = files(dir);
        f.list()
            .unwrap()
            .into_iter()
            .map(|(seq, path)| (seq, read_header(&f, &path).unwrap().unwrap()))
            .collect()
    }

    fn names(dir: &Path, prefix: &str) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(dir.join("segments"))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .map(|e| e.path())
            .collect();
        out.sort();
        out
    }

    fn inode(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().ino()
    }

    /// The positions and payload bytes a new claim after `cursor` reads.
    fn read_back(dir: &Path, epoch: u64, cursor: u64) -> Vec<(u64, u8)> {
        let (_, read) = SegmentLog::claim(files(dir), epoch, Uuid::new_v4(), cursor).unwrap();
        read.scanned
            .records
            .iter()
            .map(|r| {
                let (header, bytes) = &read.segments[r.segment];
                let rec =
                    super::super::format::decode_record(bytes, header.salt, r.offset).unwrap();
                assert!(rec.payload.iter().all(|b| *b == rec.payload[0]));
                (r.position, rec.payload[0])
            })
            .collect()
    }

    fn collect_below(dir: &Path, low_water: u64) -> Collected {
        collect(&files(dir), low_water, Duration::from_secs(3600), false).unwrap()
    }

    // Segments wholly at or below the mark leave the log as spares; the last one, and any that
    // holds a position above the mark, stay; a dry run only reports.
    #[test]
    fn segments_at_or_below_the_mark_are_recycled_and_the_rest_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        append(&mut a, 12, 1);
        let before = headers(dir.path());
        assert!(before.len() >= 4, "{before:?}");
        let (second, third) = (before[1].1.first_position, before[2].1.first_position);
        assert_eq!(collect_below(dir.path(), second - 2), Collected::default());
        let dry = collect(&files(dir.path()), third - 1, Duration::ZERO, true).unwrap();
        assert_eq!(
            (dry.segments, dry.recycled, dry.positions),
            (2, 2, third - 1)
        );
        assert_eq!(headers(dir.path()), before, "a dry run changes nothing");
        assert_eq!(collect_below(dir.path(), third - 1), dry);
        assert_eq!(headers(dir.path()), before[2..].to_vec());
        assert_eq!(names(dir.path(), ".spare-").len(), 2);
        // Everything below the mark: the last segment stays all the same.
        let all = collect_below(dir.path(), u64::MAX - 1);
        assert_eq!(all.segments as usize, before.len() - 3);
        assert_eq!(headers(dir.path()), before[before.len() - 1..].to_vec());
        assert_eq!(names(dir.path(), ".spare-").len(), MAX_SPARES);
        assert_eq!(read_back(dir.path(), 2, 12), vec![]);
    }

    // A recycled segment still holds its old records when a rotation reuses it. The new use's
    // salt keeps them from validating: a claim reads exactly the new records, and no damage.
    #[test]
    fn a_recycled_segments_old_records_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        append(&mut a, 9, 1);
        let first_of_second = headers(dir.path())[1].1.first_position;
        assert_eq!(collect_below(dir.path(), first_of_second - 1).recycled, 1);
        let [spare] = names(dir.path(), ".spare-").try_into().unwrap();
        let recycled = inode(&spare);
        // Fill the current segment, then one record into the next: the recycled spare.
        while a.fits(PAYLOAD) {
            append(&mut a, 1, 2);
        }
        append(&mut a, 1, 3);
        assert!(
            names(dir.path(), ".spare-").is_empty(),
            "the rotation took the spare"
        );
        let (_, last) = files(dir.path()).list().unwrap().pop().unwrap();
        assert_eq!(
            inode(&last),
            recycled,
            "the rotation reused the recycled segment"
        );
        let bytes = std::fs::read(&last).unwrap();
        let old_records = bytes.windows(4).filter(|w| w == b"MWR1").count();
        assert!(
            old_records >= 2,
            "the old records are still there: {old_records}"
        );
        let got = read_back(dir.path(), 2, first_of_second - 1);
        let tip = a.next_position() - 1;
        assert_eq!(
            got.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            (first_of_second..=tip).collect::<Vec<_>>()
        );
        assert_eq!(got.last(), Some(&(tip, 3)));
    }

    // The last segment of an epoch is removed, not recycled: its stale writer may append to it
    // after collection, and that write must land nowhere a later segment is read from.
    #[test]
    fn the_last_segment_of_an_epoch_is_removed_so_a_stale_write_reaches_no_segment() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        append(&mut a, 4, 1);
        let stale = files(dir.path()).list().unwrap().pop().unwrap().1;
        let stale_inode = inode(&stale);
        let mut b = claim(dir.path(), 2, 0);
        append(&mut b, 6, 2);
        let tip = b.next_position() - 1;
        let c = collect_below(dir.path(), tip - 1);
        assert!(c.segments >= 3 && c.recycled >= 1, "{c:?}");
        assert!(!stale.exists());
        for spare in names(dir.path(), ".spare-") {
            assert_ne!(
                inode(&spare),
                stale_inode,
                "the stale writer's segment is no spare"
            );
        }
        // The stale writer appends into its removed segment; the successor rotates on into
        // the spares; every record of the successor reads back.
        a.append(&[9; 100]).unwrap();
        append(&mut b, 8, 3);
        assert!(matches!(a.commit(), Err(LogError::Claimed)));
        let got = read_back(dir.path(), 3, tip - 1);
        assert_eq!(
            got.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            (tip..b.next_position()).collect::<Vec<_>>()
        );
        assert!(got.iter().all(|(_, byte)| *byte != 9));
    }

    // Spares beyond the few kept are removed, the largest kept; a `.filling-` file goes once
    // it is older than the grace period.
    #[test]
    fn extra_spares_and_old_fillings_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        claim(dir.path(), 1, 0);
        for len in [SMALL, 4 * SMALL, 2 * SMALL, 3 * SMALL] {
            f.allocate_spare(len).unwrap();
        }
        let filling = dir.path().join("segments/.filling-crashed.seg");
        std::fs::write(&filling, [0u8; 100]).unwrap();
        let c = collect(&f, 0, Duration::from_secs(3600), false).unwrap();
        assert_eq!(c.bytes_removed, 3 * SMALL);
        let mut kept: Vec<u64> = names(dir.path(), ".spare-")
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .collect();
        kept.sort();
        assert_eq!(kept, vec![3 * SMALL, 4 * SMALL]);
        assert!(filling.exists(), "younger than the grace period");
        let c = collect(&f, 0, Duration::ZERO, false).unwrap();
        assert_eq!((c.segments, c.bytes_removed), (0, 100));
        assert!(!filling.exists());
    }

    // A collection whose grace period is shorter than an allocation takes the allocation's
    // `.filling-` file for a crashed one's leftover: the allocation fills another.
    #[test]
    fn an_allocation_whose_filling_collection_removed_fills_another() {
        let dir = tempfile::tempdir().unwrap();
        claim(dir.path(), 1, 0);
        let faults = Arc::new(Faults::default());
        let pause = faults.pause_at("wal-segments-spare-filled");
        let paused = files(dir.path()).with_faults(faults);
        let allocated = std::thread::scope(|s| {
            let allocation = s.spawn(|| paused.allocate_spare(SMALL));
            futures::executor::block_on(pause.reached());
            let c = collect(&files(dir.path()), 0, Duration::ZERO, false).unwrap();
            assert_eq!(c.bytes_removed, SMALL, "the filling was taken");
            pause.release();
            allocation.join().unwrap()
        });
        let spare = allocated.expect("another filling");
        assert_eq!(names(dir.path(), ".spare-"), vec![spare]);
        assert!(names(dir.path(), ".filling-").is_empty());
    }

    // A stale writer finds its successor's first segment right after its own last, and once
    // collection took it, learns that where the successor's replay ended is unknown.
    #[test]
    fn a_stale_writer_tells_a_collected_successor_from_one_still_replaying() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        append(&mut a, 2, 1);
        assert_eq!(a.successor_start().unwrap(), Successor::Replaying);
        let mut b = claim(dir.path(), 2, 0);
        let started = Successor::Started {
            first_position: 3,
            epoch: 2,
        };
        assert_eq!(a.successor_start().unwrap(), started);
        append(&mut b, 9, 2);
        let tip = b.next_position() - 1;
        collect_below(dir.path(), 2);
        assert_eq!(
            a.successor_start().unwrap(),
            started,
            "only a's segment went"
        );
        collect_below(dir.path(), tip);
        assert_eq!(a.successor_start().unwrap(), Successor::Collected);
    }

    // A read paused between its listing and its reads while collection takes segments it
    // listed starts over, and reads the log as it now is.
    #[test]
    fn a_read_overtaken_by_collection_reads_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        append(&mut a, 12, 1);
        let segments = headers(dir.path());
        let mark = segments[2].1.first_position - 1;
        let faults = Arc::new(Faults::default());
        let pause = faults.pause_at("wal-segments-listed");
        let paused = files(dir.path()).with_faults(faults);
        let (from_mark, below_mark) = std::thread::scope(|s| {
            let reads = s.spawn(|| (paused.scan(mark + 1), paused.scan(1)));
            futures::executor::block_on(pause.reached());
            assert_eq!(collect_below(dir.path(), mark).segments, 2);
            pause.release();
            reads.join().unwrap()
        });
        let from_mark = from_mark.expect("the read starts over");
        let positions: Vec<u64> = from_mark
            .scanned
            .records
            .iter()
            .map(|r| r.position)
            .collect();
        assert_eq!(positions, (mark + 1..=12).collect::<Vec<_>>());
        // A reader that needed the collected positions sees where the log now starts.
        let below_mark = below_mark.unwrap();
        assert_eq!(below_mark.scanned.first_available, Some(mark + 1));
    }
}
