//! [`SegmentLog`]: one writer's appends into a shard's segments, and the claim that starts
//! them (`docs/wal-segments.md`, "Appending and group commit" and "Fencing").
//!
//! # The protocol, where it is enforced
//! - [`SegmentLog::claim`]: the fence file gets the claimant's epoch (synced) **before** the log
//!   is read; the log is read to its end `t`, the segments read are synced (a predecessor may
//!   have died before its sync), and the claimant's own segment is created with first position
//!   `t`. It never writes into a predecessor's segment, and never waits for one.
//! - [`SegmentLog::append`] writes a record into the current segment (page cache only);
//!   [`SegmentLog::commit`] syncs every segment written since the last commit, then re-reads the
//!   fence file. A round is acknowledged only after both.
//! - A newer epoch in the fence file means a successor claimed the shard
//!   ([`LogError::Claimed`]). The first segment of an epoch above ours decides
//!   ([`SegmentLog::successor_start`]): our records below its first position were replayed by
//!   the successor and stand; those at or past it never will be read, and are refused. While
//!   the claimant still replays, that segment does not exist yet: the caller waits for it.
//!
//! Blocking, and never waiting: every method does file I/O and returns; the async layers call
//! them on blocking threads and do any waiting.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use super::format::{HEADER_BYTES, RecordHead, SegmentHeader, encode_record, record_len};
use super::scan::{Damage, Scanned, SegmentBytes, scan};
use crate::store::faults::Faults;
use crate::store::fs::{FileHandle, Fs};

/// Size of a segment: large enough that rotations (a header sync, a rename and a folder sync)
/// are rare, small enough that collection frees space in useful steps.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

const FENCE_FILE: &str = "fence";
/// Bytes of one claim's slot in the fence file.
const FENCE_SLOT: u64 = 8;
pub(crate) const SEGMENT_EXT: &str = ".seg";
pub(crate) const SPARE_PREFIX: &str = ".spare-";
pub(crate) const FILLING_PREFIX: &str = ".filling-";
/// Size of a claimant's first segment when no spare is ready: small enough that allocating it
/// keeps a takeover fast; the writer rotates into a full-size spare, allocated meanwhile in
/// the background, once it is full.
pub const FIRST_SEGMENT_BYTES: u64 = 256 << 10;

/// What can go wrong in a segment log.
#[derive(Debug)]
pub enum LogError {
    /// The fence file records a claim above ours (or, for a claim, that a later claim
    /// overtook it), or a claimant took the segment number we rotate to: a successor claimed
    /// the shard. [`SegmentLog::successor_start`] says which of our records stand.
    Claimed,
    /// The segments break a rule of the format (see `super::scan`).
    Damage(Damage),
    /// The file system failed; a failed sync is never retried.
    Io(io::Error),
}

impl From<io::Error> for LogError {
    fn from(e: io::Error) -> Self {
        LogError::Io(e)
    }
}

/// What a writer whose fence file shows a newer claim finds after its own last segment
/// ([`SegmentFiles::successor_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Successor {
    /// No newer epoch's segment follows ours yet: its claimant is replaying (or died first).
    Replaying,
    /// The claimant's first segment: our records below `first_position` were replayed by it
    /// and stand; the rest never will be read.
    Started {
        /// Its first position: where the claimant's replay ended.
        first_position: u64,
        /// The claimant's epoch.
        epoch: u64,
    },
    /// Collection took the claimant's first segment: where its replay ended is no longer
    /// known, so neither is which of our records stand.
    Collected,
}

/// One shard's `segments/` folder: its segments, spares and fence file.
#[derive(Debug, Clone)]
pub struct SegmentFiles {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    segment_bytes: u64,
    faults: Arc<Faults>,
}

impl SegmentFiles {
    /// The segments folder `dir` on `fs`, with segments of `segment_bytes`.
    pub fn new(fs: Arc<dyn Fs>, dir: PathBuf, segment_bytes: u64) -> Self {
        SegmentFiles {
            fs,
            dir,
            segment_bytes,
            faults: Arc::default(),
        }
    }

    /// These files, pausing at the pause points `faults` arms (its store's, in tests).
    pub(crate) fn with_faults(self, faults: Arc<Faults>) -> Self {
        SegmentFiles { faults, ..self }
    }

    /// Waits at pause point `name` if a test armed it.
    pub(crate) fn pause(&self, name: &str) {
        self.faults.pause_point_blocking(name);
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file system the folder is on.
    pub fn fs(&self) -> &Arc<dyn Fs> {
        &self.fs
    }

    /// See [`Fs::network_file_system`].
    pub fn network_file_system(&self) -> io::Result<Option<&'static str>> {
        self.fs.network_file_system(&self.dir)
    }

    fn segment_path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("{seq:020}{SEGMENT_EXT}"))
    }

    /// The segments, by sequence number.
    pub fn list(&self) -> io::Result<Vec<(u64, PathBuf)>> {
        let names = match self.fs.read_dir(&self.dir) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out: Vec<(u64, PathBuf)> = names
            .into_iter()
            .filter(|(_, is_dir)| !is_dir)
            .filter_map(|(name, _)| {
                let seq = name.strip_suffix(SEGMENT_EXT)?.parse::<u64>().ok()?;
                Some((seq, self.dir.join(name)))
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// The segments that hold positions from `start` on (every later one, and the one before
    /// that holds `start`), with their headers and bytes, in sequence order, each as its own
    /// use left it although collection may recycle segments meanwhile ([`SegmentFiles::read_settled`]).
    fn read_from(&self, start: u64) -> Result<Vec<(SegmentHeader, Vec<u8>)>, LogError> {
        self.read_settled(start)
    }

    /// Reads the log from position `start`.
    pub fn scan(&self, start: u64) -> Result<Read, LogError> {
        let segments = self.read_from(start)?;
        let input: Vec<SegmentBytes<'_>> = segments
            .iter()
            .map(|(header, bytes)| SegmentBytes {
                header: *header,
                bytes,
            })
            .collect();
        let scanned = scan(&input, start).map_err(LogError::Damage)?;
        Ok(Read { scanned, segments })
    }

    /// The highest epoch that claimed the log, `None` before the first claim: the fence file's
    /// length says it (see [`SegmentFiles::write_fence`]).
    pub fn read_fence(&self) -> io::Result<Option<u64>> {
        match self.fs.stat(&self.dir.join(FENCE_FILE)) {
            Ok(info) => Ok((info.len / FENCE_SLOT).checked_sub(1)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Records the claim of `epoch` in the fence file, durably: its epoch written into its own
    /// slot, at `epoch * 8`. The file only grows, so its length names the highest claim ever
    /// recorded, whatever order claimants write in: a claim whose manifest version was
    /// overtaken, writing after the later claim did, cannot lower the fence under the later
    /// claim's writer. Such a claim finds the file longer than its own slot, and fails
    /// ([`LogError::Claimed`]).
    fn write_fence(&self, epoch: u64) -> Result<(), LogError> {
        let path = self.dir.join(FENCE_FILE);
        match self.fs.allocate(&path, 0) {
            Ok(()) => self.fs.sync_dir(&self.dir)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
        let handle = self.fs.open_file(&path)?;
        handle.write_at(epoch * FENCE_SLOT, &epoch.to_le_bytes())?;
        handle.sync_data()?;
        match self.read_fence()? {
            Some(highest) if highest == epoch => Ok(()),
            _ => Err(LogError::Claimed),
        }
    }

    /// Makes sure the folder exists, durably.
    fn ensure_dir(&self) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut cur = Some(self.dir.as_path());
        while let Some(d) = cur {
            if self.fs.exists(d)? {
                break;
            }
            missing.push(d.to_path_buf());
            cur = d.parent();
        }
        for d in missing.iter().rev() {
            match self.fs.create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            if let Some(parent) = d.parent() {
                self.fs.sync_dir(parent)?;
            }
        }
        Ok(())
    }

    /// An allocated spare of at least `len` bytes, and its size: one already in the folder,
    /// else a new one of `len`.
    fn spare(&self, len: u64) -> io::Result<(PathBuf, u64)> {
        if let Some(found) = self.find_spare(len)? {
            return Ok(found);
        }
        Ok((self.allocate_spare(len)?, len))
    }

    /// A spare of at least `len` bytes in the folder, and its size.
    fn find_spare(&self, len: u64) -> io::Result<Option<(PathBuf, u64)>> {
        for (name, is_dir) in self.fs.read_dir(&self.dir)? {
            if !is_dir && name.starts_with(SPARE_PREFIX) {
                let path = self.dir.join(&name);
                let size = match self.fs.stat(&path) {
                    Ok(info) => info.len,
                    // Taken by another writer meanwhile.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                if size >= len {
                    return Ok(Some((path, size)));
                }
            }
        }
        Ok(None)
    }

    /// Whether a full-size spare is ready, so that the next rotation only renames.
    pub fn has_spare(&self) -> io::Result<bool> {
        Ok(self.find_spare(self.segment_bytes)?.is_some())
    }

    /// Allocates a new spare of `len` bytes (zeros, synced, its name durable). It is filled
    /// under a temporary name and renamed once synced, so that no writer takes a spare that is
    /// still being filled.
    pub fn allocate_spare(&self, len: u64) -> io::Result<PathBuf> {
        let mut attempts = 1;
        loop {
            let id = Uuid::new_v4().simple();
            let filling = self.dir.join(format!("{FILLING_PREFIX}{id}{SEGMENT_EXT}"));
            let path = self.dir.join(format!("{SPARE_PREFIX}{id}{SEGMENT_EXT}"));
            self.fs.allocate(&filling, len)?;
            self.pause("wal-segments-spare-filled");
            match self.fs.rename_noreplace(&filling, &path) {
                // Collection took it for a crashed allocation: its grace period was shorter
                // than this allocation took.
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 3 => {
                    attempts += 1;
                    continue;
                }
                renamed => renamed?,
            }
            self.fs.sync_dir(&self.dir)?;
            return Ok(path);
        }
    }

    /// Allocates a full-size spare unless one is ready: what a writer's background task does
    /// after it takes one, so that its next rotation, or a successor's claim, only renames.
    pub fn ensure_spare(&self) -> io::Result<()> {
        if !self.has_spare()? {
            self.allocate_spare(self.segment_bytes)?;
        }
        Ok(())
    }

    /// Creates segment `header.seq` from a spare of at least `len` bytes: its header written
    /// and synced before the spare is renamed into place (so a segment in place always has a
    /// valid header), then the folder synced. The segment's handle and size; `AlreadyExists`
    /// if the sequence number is taken.
    fn create_segment(
        &self,
        header: &SegmentHeader,
        len: u64,
    ) -> io::Result<(Arc<dyn FileHandle>, u64)> {
        loop {
            let (spare, size) = self.spare(len)?;
            let handle: Arc<dyn FileHandle> = match self.fs.open_file(&spare) {
                Ok(h) => Arc::from(h),
                // Taken by another writer meanwhile: pick another.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            handle.write_at(0, &header.encode())?;
            handle.sync_data()?;
            let path = self.segment_path(header.seq);
            match self.fs.rename_noreplace(&spare, &path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
            self.fs.sync_dir(&self.dir)?;
            return Ok((handle, size));
        }
    }
}

/// The segment a writer appends to.
#[derive(Debug)]
struct Current {
    header: SegmentHeader,
    handle: Arc<dyn FileHandle>,
    /// Where the next record goes.
    offset: u64,
    /// The file's size.
    len: u64,
}

/// One writer's appends into the segments of a shard it claimed. See the module docs.
#[derive(Debug)]
pub struct SegmentLog {
    files: SegmentFiles,
    epoch: u64,
    writer_id: Uuid,
    current: Current,
    next_position: u64,
    /// The highest position a sync has made durable (recorded in every record written).
    durable_through: u64,
    /// Segments written since the last commit (the current one, and any it rotated from).
    dirty: Vec<Arc<dyn FileHandle>>,
}

/// The log as read from a position on: the records, and the segments they point into.
#[derive(Debug)]
pub struct Read {
    /// The records from the position on, and the tip.
    pub scanned: Scanned,
    /// The segments read (headers and bytes), in sequence order: each record's `segment` is an
    /// index into this.
    pub segments: Vec<(SegmentHeader, Vec<u8>)>,
}

impl SegmentLog {
    /// Claims the log for `epoch` (already claimed in the manifest) after replay cursor
    /// `cursor`: see the module docs.
    pub fn claim(
        files: SegmentFiles,
        epoch: u64,
        writer_id: Uuid,
        cursor: u64,
    ) -> Result<(SegmentLog, Read), LogError> {
        files.ensure_dir()?;
        files.write_fence(epoch)?;
        loop {
            let read = files.scan(cursor + 1)?;
            files.pause("wal-segments-claim-read");
            for (seq, path) in files.list()? {
                if read.segments.iter().any(|(h, _)| h.seq == seq) {
                    match files.fs.open_file(&path) {
                        Ok(segment) => segment.sync_data()?,
                        // Collected under a later claim's mark: its rows are in a generation.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            let seq = files.list()?.last().map_or(1, |(seq, _)| seq + 1);
            // After the listing: a later claim records itself in the fence file before it
            // creates its segment, so if the listing saw that segment, this read sees the claim,
            // and our segment must not follow one of a higher epoch.
            if files.read_fence()? != Some(epoch) {
                return Err(LogError::Claimed);
            }
            let end = read.scanned.end;
            let header = SegmentHeader {
                seq,
                epoch,
                first_position: end,
                salt: rand::random(),
                writer_id,
            };
            let first = files.segment_bytes.min(FIRST_SEGMENT_BYTES);
            let (handle, len) = match files.create_segment(&header, first) {
                Ok(created) => created,
                // A stale writer rotated into that number after our read: read again, past it,
                // unless a later claim took it (then ours was overtaken, and a segment of our
                // epoch after one of a higher epoch would read as damage).
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if files.read_fence()? != Some(epoch) {
                        return Err(LogError::Claimed);
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let log = SegmentLog {
                files,
                epoch,
                writer_id,
                current: Current {
                    header,
                    handle: handle.clone(),
                    offset: HEADER_BYTES,
                    len,
                },
                next_position: end,
                durable_through: end - 1,
                dirty: Vec::new(),
            };
            return Ok((log, read));
        }
    }

    /// The position the next append takes.
    pub fn next_position(&self) -> u64 {
        self.next_position
    }

    /// Whether a record of `payload_len` bytes fits in the current segment: if not, its
    /// append rotates (a sync, and a spare renamed or, if none is ready, allocated).
    pub fn fits(&self, payload_len: usize) -> bool {
        self.current.offset + record_len(payload_len) <= self.current.len
    }

    /// The shard's segment files.
    pub fn files(&self) -> &SegmentFiles {
        &self.files
    }

    /// Writes `payload` (the WAL entry of the next position) into the log, not yet durable:
    /// [`SegmentLog::commit`] makes it so. Its position.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, LogError> {
        let needed = record_len(payload.len());
        if self.current.offset + needed > self.current.len {
            self.rotate(needed)?;
        }
        let position = self.next_position;
        let head = RecordHead {
            position,
            epoch: self.epoch,
            durable_through: self.durable_through,
        };
        let record = encode_record(self.current.header.salt, head, payload);
        self.current.handle.write_at(self.current.offset, &record)?;
        self.current.offset += needed;
        self.next_position += 1;
        if !self
            .dirty
            .last()
            .is_some_and(|d| Arc::ptr_eq(d, &self.current.handle))
        {
            self.dirty.push(self.current.handle.clone());
        }
        Ok(position)
    }

    /// Moves to a new segment of this epoch, starting at the next position, large enough for a
    /// record of `needed` bytes.
    ///
    /// The current segment is synced first: once the new one is in place, the current one's
    /// records up to its first position must all be there after a power loss, or the log
    /// would have a hole below a durable segment (damage, not a torn tail).
    fn rotate(&mut self, needed: u64) -> Result<(), LogError> {
        self.current.handle.sync_data()?;
        self.dirty.retain(|d| !Arc::ptr_eq(d, &self.current.handle));
        self.durable_through = self.next_position - 1;
        let header = SegmentHeader {
            seq: self.current.header.seq + 1,
            epoch: self.epoch,
            first_position: self.next_position,
            salt: rand::random(),
            writer_id: self.writer_id,
        };
        let len = self.files.segment_bytes.max(HEADER_BYTES + needed);
        match self.files.create_segment(&header, len) {
            Ok(_) if self.files.used_before(header.seq)? => {
                // Not ours to keep: nothing may read it as that number's segment.
                let _ = self
                    .files
                    .fs
                    .remove_file(&self.files.segment_path(header.seq));
                Err(LogError::Claimed)
            }
            Ok((handle, len)) => {
                self.current = Current {
                    header,
                    handle,
                    offset: HEADER_BYTES,
                    len,
                };
                Ok(())
            }
            // The number is taken: only a claimant's segment takes the number after ours.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(LogError::Claimed),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes every record appended so far durable (one `fdatasync` per segment written since
    /// the last commit), then re-reads the fence file: `Ok` acknowledges them all;
    /// [`LogError::Claimed`] means a successor decides which stand. A failed sync is an
    /// `Io` error, and the records' durability is then unknown: never sync again and trust it.
    pub fn commit(&mut self) -> Result<(), LogError> {
        self.sync()?;
        self.check_fence()
    }

    /// The first half of [`SegmentLog::commit`]: the sync.
    pub fn sync(&mut self) -> Result<(), LogError> {
        for handle in self.dirty.drain(..) {
            handle.sync_data()?;
        }
        self.durable_through = self.next_position - 1;
        Ok(())
    }

    /// The second half of [`SegmentLog::commit`]: `Ok` if no claim above ours was recorded in
    /// the fence file (its length, from the page cache).
    pub fn check_fence(&self) -> Result<(), LogError> {
        match self.files.read_fence()? {
            Some(e) if e == self.epoch => Ok(()),
            _ => Err(LogError::Claimed),
        }
    }

    /// The first segment of an epoch above ours, after our current one: our records below its
    /// first position were replayed by its claimant and stand, the rest never will be read.
    /// See [`Successor`] for while its claimant replays, and once collection took it.
    pub fn successor_start(&self) -> io::Result<Successor> {
        self.files.successor_of(self.current.header.seq, self.epoch)
    }

    /// The folder this log writes in.
    pub fn dir(&self) -> &Path {
        &self.files.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fs::StdFs;

    const SMALL: u64 = 8192;

    fn files(dir: &Path) -> SegmentFiles {
        SegmentFiles::new(Arc::new(StdFs), dir.join("segments"), SMALL)
    }

    fn claim(dir: &Path, epoch: u64, cursor: u64) -> (SegmentLog, Read) {
        SegmentLog::claim(files(dir), epoch, Uuid::new_v4(), cursor).unwrap()
    }

    fn positions(c: &Read) -> Vec<u64> {
        c.scanned.records.iter().map(|r| r.position).collect()
    }

    fn started(first_position: u64, epoch: u64) -> Successor {
        Successor::Started {
            first_position,
            epoch,
        }
    }

    #[test]
    fn appends_committed_are_read_by_the_next_claim() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, first) = claim(dir.path(), 1, 0);
        assert_eq!(first.scanned.end, 1);
        for i in 0..5 {
            assert_eq!(a.append(format!("entry {i}").as_bytes()).unwrap(), i + 1);
        }
        a.commit().unwrap();
        let (b, claimed) = claim(dir.path(), 2, 0);
        assert_eq!(positions(&claimed), vec![1, 2, 3, 4, 5]);
        assert_eq!(b.next_position(), 6);
    }

    // Records fill several segments: the log rotates, and a claim reads across them.
    #[test]
    fn a_full_segment_rotates_and_the_log_reads_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, _) = claim(dir.path(), 1, 0);
        let payload = vec![7u8; 1000];
        for _ in 0..20 {
            a.append(&payload).unwrap();
        }
        a.commit().unwrap();
        assert!(files(dir.path()).list().unwrap().len() > 2);
        let (_, claimed) = claim(dir.path(), 2, 0);
        assert_eq!(positions(&claimed), (1..=20).collect::<Vec<_>>());
        // A claim after a cursor reads only past it.
        let (_, claimed) = claim(dir.path(), 3, 15);
        assert_eq!(positions(&claimed), (16..=20).collect::<Vec<_>>());
    }

    // A claim between a stale writer's appends: what the claimant read stands, what the stale
    // writer writes after is refused at its commit and never read.
    #[test]
    fn a_stale_writer_is_fenced_from_its_successors_start() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, _) = claim(dir.path(), 1, 0);
        a.append(b"one").unwrap();
        a.commit().unwrap();
        a.append(b"two").unwrap();
        assert_eq!(a.successor_start().unwrap(), Successor::Replaying);
        // The claimant reads "two" (in the page cache), so it starts at 3.
        let (b, claimed) = claim(dir.path(), 2, 0);
        assert_eq!(positions(&claimed), vec![1, 2]);
        assert_eq!(b.next_position(), 3);
        assert!(matches!(a.commit(), Err(LogError::Claimed)));
        assert_eq!(a.successor_start().unwrap(), started(3, 2));
        a.append(b"three").unwrap();
        assert!(matches!(a.commit(), Err(LogError::Claimed)));
        let (_, claimed) = claim(dir.path(), 3, 0);
        assert_eq!(
            positions(&claimed),
            vec![1, 2],
            "a's zombie record 3 is not read"
        );
    }

    // A fence file a claimant died writing reads as a claim; the segments then say nothing
    // until a claimant creates its own.
    #[test]
    fn a_torn_fence_file_reads_as_a_claim_the_segments_decide() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, _) = claim(dir.path(), 1, 0);
        a.append(b"one").unwrap();
        // A claimant of epoch 2 that died right after its fence write (its slot unwritten, the
        // file extended): the length counts.
        let fence = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("segments/fence"))
            .unwrap();
        fence.set_len(3 * FENCE_SLOT).unwrap();
        assert!(matches!(a.commit(), Err(LogError::Claimed)));
        assert_eq!(a.successor_start().unwrap(), Successor::Replaying);
        let (b, _) = claim(dir.path(), 2, 0);
        assert_eq!(b.next_position(), 2);
        assert_eq!(a.successor_start().unwrap(), started(2, 2));
    }

    // Two claims whose fence writes land out of epoch order (the lower claim's manifest
    // version was overtaken while it stalled): the fence never goes down, the overtaken claim
    // fails, and the later claim's writer keeps committing.
    #[test]
    fn an_overtaken_claims_late_fence_write_fails_and_lowers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _) = claim(dir.path(), 3, 0);
        c.append(b"one").unwrap();
        c.commit().unwrap();
        let late = SegmentLog::claim(files(dir.path()), 2, Uuid::new_v4(), 0);
        assert!(matches!(late, Err(LogError::Claimed)), "{late:?}");
        assert_eq!(files(dir.path()).read_fence().unwrap(), Some(3));
        c.append(b"two").unwrap();
        c.commit().expect("the later claim still holds the log");
    }

    // A stale writer's rotation finds its next number taken by a claimant's segment.
    #[test]
    fn a_stale_writers_rotation_into_a_claimants_number_is_a_claim() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, _) = claim(dir.path(), 1, 0);
        a.append(b"one").unwrap();
        a.commit().unwrap();
        let (_b, _) = claim(dir.path(), 2, 0);
        // Does not fit in what is left of a's segment.
        let big = vec![1u8; 6000];
        assert!(matches!(a.append(&big), Err(LogError::Claimed)));
    }

    // A power loss at every sync of a writer that appends (across rotations) and commits in
    // rounds: the next claim always reads the log without damage, holds every committed
    // record with its own bytes, and nothing past what was appended.
    #[test]
    fn committed_records_survive_power_loss_at_every_sync() {
        use crate::store::sim_fs::{CrashMode, SimFs};
        let payload = |i: u64| vec![i as u8; 300 + (i as usize * 37) % 700];
        let mut crash_at = 0;
        loop {
            let fs = Arc::new(SimFs::new());
            let files = |fs: &Arc<SimFs>| {
                SegmentFiles::new(fs.clone(), PathBuf::from("/d/segments"), SMALL)
            };
            let (mut a, _) = SegmentLog::claim(files(&fs), 1, Uuid::new_v4(), 0).unwrap();
            fs.crash_after(crash_at);
            let (mut appended, mut committed) = (0u64, 0u64);
            for i in 1..=24 {
                if a.append(&payload(i)).is_err() {
                    break;
                }
                appended = i;
                if i % 4 == 0 {
                    if a.commit().is_err() {
                        break;
                    }
                    committed = i;
                }
            }
            let finished = !fs.is_dead();
            let modes = [0, 1000, 2000].map(|seed| CrashMode::Random(crash_at + seed));
            for mode in std::iter::once(CrashMode::DropUnsynced).chain(modes) {
                let after = Arc::new(fs.recover(mode));
                let (_, read) = SegmentLog::claim(files(&after), 2, Uuid::new_v4(), 0)
                    .unwrap_or_else(|e| panic!("crash at {crash_at}, {mode:?}: {e:?}"));
                let got: Vec<u64> = read.scanned.records.iter().map(|r| r.position).collect();
                assert!(
                    got.len() as u64 >= committed && got.len() as u64 <= appended,
                    "crash at {crash_at}, {mode:?}: read {got:?}, committed {committed}, appended {appended}"
                );
                assert_eq!(got, (1..=got.len() as u64).collect::<Vec<_>>());
                for r in &read.scanned.records {
                    let (header, bytes) = &read.segments[r.segment];
                    let rec =
                        super::super::format::decode_record(bytes, header.salt, r.offset).unwrap();
                    assert_eq!(rec.payload, payload(r.position).as_slice());
                }
            }
            if finished {
                break;
            }
            crash_at += 1;
        }
        assert!(crash_at > 10, "the writer made {crash_at} syncs");
    }
}
