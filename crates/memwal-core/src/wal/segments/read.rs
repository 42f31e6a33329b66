//! Reading a shard's segments one position at a time, as a tailer does: only the segment
//! holding the position is read, only as far as needed, and what was found is remembered
//! ([`ReadCache`]), so that following the log reads each new record once instead of its whole
//! segment at every step.
//!
//! # What a read returns, and why
//! - A position below the first position any segment holds was collected.
//! - The records of a segment are checked by [`scan`]'s rules, on the part of the segment read
//!   so far: within the segment's range (up to the next segment's first position) they must be
//!   valid, consecutive and of the segment's epoch, so a stale writer's record at or past its
//!   successor's first position is never read.
//! - The last segment has no next segment to bound it. While a claimant replays, before its own
//!   segment exists, a stale writer may still append there, and what it appends after the
//!   claimant read the log is not the WAL's: it is refused once the claimant's segment exists.
//!   So a record of the last segment is returned only once the fence file, read after the
//!   record, still holds the segment's epoch (a claimant writes the fence file before it reads
//!   the log, so it will read, and replay, that record), or once a later segment bounds the
//!   range. While a claim is under way neither holds, and the record is "not yet": the claim
//!   decides, as it decides the stale writer's puts.
//! - In the last segment the first invalid record ends the log, unless a valid record after it
//!   says it was durable (damage). Only [`WINDOW`] bytes past the last record found are looked
//!   at for such a record, so that a follower polling the tip does not read the whole segment
//!   every time; damage further on is what [`verify`] (a scan of the whole log) is for.
//!
//! Blocking: the callers run these on blocking threads.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::format::{
    HEADER_BYTES, RECORD_HEADER_BYTES, SegmentHeader, claimed_record_len, decode_record,
};
use super::log::{LogError, SegmentFiles};
use super::scan::{Damage, Found, SegmentBytes, scan};

/// How much of the last segment a read looks at past the last record it knows of: enough to
/// tell a torn tail from damage in most cases, little enough to read at every poll of the tip.
pub const WINDOW: u64 = 1 << 20;

/// Attempts in a row that find the segments changed under them (a segment collected, a later
/// one created) before a read gives up.
const MAX_ATTEMPTS: usize = 16;

/// What a tailer remembers of a shard's segments between reads: their headers, and where the
/// records of the segment it read last are. Shared by the clones of one tailer.
#[derive(Debug, Default)]
pub struct ReadCache {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// By sequence number. A sequence number names one segment for good: a collected segment
    /// is renamed away, and a reused one takes a new, higher number.
    headers: HashMap<u64, SegmentHeader>,
    indexed: Option<Indexed>,
}

/// The records found so far in one segment.
#[derive(Debug)]
struct Indexed {
    header: SegmentHeader,
    path: PathBuf,
    /// The offset of the record of each position, from the header's first position on.
    offsets: Vec<u64>,
    /// Where the record after the last one found starts.
    next_offset: u64,
    /// Positions below this were confirmed to stand while the segment was the last one (see
    /// the module docs).
    confirmed: u64,
}

impl Indexed {
    fn new(header: SegmentHeader, path: PathBuf) -> Self {
        Indexed {
            header,
            path,
            offsets: Vec::new(),
            next_offset: HEADER_BYTES,
            confirmed: header.first_position,
        }
    }

    /// The first position not found (yet).
    fn end(&self) -> u64 {
        self.header.first_position + self.offsets.len() as u64
    }

    fn holds(&self, position: u64) -> bool {
        position >= self.header.first_position && position < self.end()
    }

    /// Forgets what was found at or past `upper`, the next segment's first position: a stale
    /// writer's records, read while no later segment bounded this one.
    fn bound(&mut self, upper: u64) {
        let keep = upper.saturating_sub(self.header.first_position) as usize;
        if keep < self.offsets.len() {
            self.next_offset = self.offsets[keep];
            self.offsets.truncate(keep);
        }
        self.confirmed = self.confirmed.min(self.end());
    }
}

/// A record read at one position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundRecord {
    /// Its WAL position.
    pub position: u64,
    /// The epoch of the writer that wrote it.
    pub epoch: u64,
    /// The sequence number of its segment.
    pub seq: u64,
    /// The offset of the record in its segment.
    pub offset: u64,
    /// The WAL entry's bytes.
    pub payload: Vec<u8>,
}

/// What is at one position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The position's record.
    Record(FoundRecord),
    /// No record yet: the position is at or past the tip, or a claim under way decides
    /// whether the last segment's record there stands.
    NotYet,
    /// Below the first position any segment holds: collected.
    Collected {
        /// The first position a segment holds.
        first_available: u64,
    },
}

/// Where a shard's segments start and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tip {
    /// The first position with no record that stands (see [`At::NotYet`]).
    pub end: u64,
    /// The first position any segment holds; positions below it were collected.
    pub first_available: u64,
}

/// Whether a step's view of the segments held, or they changed under it and it must look again.
enum Step<T> {
    Done(T),
    Changed,
}

/// The record at `position` in the segments of `files`. See the module docs.
///
/// # Errors
/// [`LogError::Damage`] naming the segment and offset; [`LogError::Io`] if the files cannot be
/// read, or kept changing under the read.
pub fn read_position(
    files: &SegmentFiles,
    cache: &ReadCache,
    position: u64,
) -> Result<At, LogError> {
    with_state(cache, |state| state.read(files, position))
}

/// Where the segments of `files` start and end, `None` if there is no segment.
///
/// # Errors
/// As [`read_position`].
pub fn tip(files: &SegmentFiles, cache: &ReadCache) -> Result<Option<Tip>, LogError> {
    with_state(cache, |state| state.tip(files))
}

/// The first position any segment of `files` holds, `None` if there is no segment: reads one
/// header.
///
/// # Errors
/// As [`read_position`].
pub fn first_available(files: &SegmentFiles, cache: &ReadCache) -> Result<Option<u64>, LogError> {
    with_state(cache, |state| {
        let listed = state.list(files)?;
        let Some(first) = listed.first() else {
            return Ok(Step::Done(None));
        };
        Ok(match state.header(files, first)? {
            Some(h) => Step::Done(Some(h.first_position)),
            None => Step::Changed,
        })
    })
}

/// Scans the whole log from `start` (every segment from the one holding it, read whole), by
/// [`scan`]'s rules: what a read of one position only checks near it.
///
/// # Errors
/// As [`read_position`].
pub fn verify(files: &SegmentFiles, start: u64) -> Result<(), LogError> {
    for _ in 0..MAX_ATTEMPTS {
        match files.scan(start) {
            Ok(_) => return Ok(()),
            // A segment listed was collected before it was read: list again.
            Err(LogError::Io(e)) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Err(kept_changing())
}

fn kept_changing() -> LogError {
    LogError::Io(io::Error::other(format!(
        "the WAL segments changed under {MAX_ATTEMPTS} reads in a row (collected or created meanwhile); retry"
    )))
}

/// Runs `step` on the cache's state until its view of the segments holds.
fn with_state<T>(
    cache: &ReadCache,
    mut step: impl FnMut(&mut State) -> Result<Step<T>, LogError>,
) -> Result<T, LogError> {
    let mut state = cache.state.lock().unwrap_or_else(|poisoned| {
        // A read that panicked may have left its findings half updated: start over.
        cache.state.clear_poison();
        let mut state = poisoned.into_inner();
        *state = State::default();
        state
    });
    for _ in 0..MAX_ATTEMPTS {
        match step(&mut state) {
            Ok(Step::Done(v)) => return Ok(v),
            // What was found in a segment stays: it is checked against the segment's header,
            // read again, before it is used.
            Ok(Step::Changed) => state.headers.clear(),
            Err(e) => return Err(e),
        }
    }
    Err(kept_changing())
}

impl State {
    /// The segments, by sequence number; forgets the headers of those no longer listed.
    fn list(&mut self, files: &SegmentFiles) -> Result<Vec<(u64, PathBuf)>, LogError> {
        let listed = files.list()?;
        self.headers
            .retain(|seq, _| listed.binary_search_by_key(seq, |(s, _)| *s).is_ok());
        Ok(listed)
    }

    /// The header of the listed segment `(seq, path)`, `None` if it is gone.
    fn header(
        &mut self,
        files: &SegmentFiles,
        (seq, path): &(u64, PathBuf),
    ) -> Result<Option<SegmentHeader>, LogError> {
        if let Some(h) = self.headers.get(seq) {
            return Ok(Some(*h));
        }
        let header = read_header(files, path, *seq)?;
        if let Some(h) = header {
            self.headers.insert(*seq, h);
        }
        Ok(header)
    }

    /// What was found of the segment `header` at `path` (a new index if it is another one).
    fn indexed_for(&mut self, header: SegmentHeader, path: &Path) -> &mut Indexed {
        if !self.indexed.as_ref().is_some_and(|i| i.header == header) {
            self.indexed = Some(Indexed::new(header, path.to_path_buf()));
        }
        self.indexed.as_mut().expect("set above")
    }

    fn read(&mut self, files: &SegmentFiles, position: u64) -> Result<Step<At>, LogError> {
        let listed = self.list(files)?;
        let Some(first) = listed.first() else {
            return Ok(Step::Done(At::NotYet));
        };
        let Some(first) = self.header(files, first)? else {
            return Ok(Step::Changed);
        };
        if position < first.first_position {
            return Ok(Step::Done(At::Collected {
                first_available: first.first_position,
            }));
        }
        // The last segment starting at or below the position holds it. First positions never
        // go down; an empty segment (a claimant's that got no record) starts where the next
        // one does and holds nothing.
        let (mut lo, mut hi) = (0, listed.len());
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let Some(h) = self.header(files, &listed[mid])? else {
                return Ok(Step::Changed);
            };
            if h.first_position <= position {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let Some(header) = self.header(files, &listed[lo])? else {
            return Ok(Step::Changed);
        };
        let next = match listed.get(lo + 1) {
            Some(n) => match self.header(files, n)? {
                Some(h) => Some(h),
                None => return Ok(Step::Changed),
            },
            None => None,
        };
        let indexed = self.indexed_for(header, &listed[lo].1);
        if let Some(n) = next {
            indexed.bound(n.first_position);
        }
        if !indexed.holds(position)
            && let Step::Changed = extend(files, indexed, next, Some(position))?
        {
            return Ok(Step::Changed);
        }
        if !indexed.holds(position) {
            return Ok(Step::Done(At::NotYet));
        }
        let Some(record) = read_record(files, indexed, position)? else {
            return Ok(Step::Changed);
        };
        if next.is_none() && position >= indexed.confirmed {
            match decide(files, indexed)? {
                Decided::Stands => {}
                Decided::Undecided => return Ok(Step::Done(At::NotYet)),
                Decided::Bounded => return Ok(Step::Changed),
            }
        }
        Ok(Step::Done(At::Record(record)))
    }

    fn tip(&mut self, files: &SegmentFiles) -> Result<Step<Option<Tip>>, LogError> {
        let listed = self.list(files)?;
        let (Some(first), Some(last)) = (listed.first(), listed.last()) else {
            return Ok(Step::Done(None));
        };
        let (Some(first), Some(header)) = (self.header(files, first)?, self.header(files, last)?)
        else {
            return Ok(Step::Changed);
        };
        let indexed = self.indexed_for(header, &last.1);
        if let Step::Changed = extend(files, indexed, None, None)? {
            return Ok(Step::Changed);
        }
        let mut end = indexed.end();
        if end > indexed.confirmed {
            match decide(files, indexed)? {
                Decided::Stands => {}
                Decided::Undecided => end = indexed.confirmed,
                Decided::Bounded => return Ok(Step::Changed),
            }
        }
        Ok(Step::Done(Some(Tip {
            end,
            first_available: first.first_position,
        })))
    }
}

/// The header of segment `seq` at `path`, `None` if it is gone (collected since it was
/// listed).
fn read_header(
    files: &SegmentFiles,
    path: &Path,
    seq: u64,
) -> Result<Option<SegmentHeader>, LogError> {
    let bytes = match files.fs().open_file(path) {
        Ok(handle) => handle.read_at(0, HEADER_BYTES as usize)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let header = SegmentHeader::decode(&bytes).map_err(|why| {
        LogError::Damage(Damage {
            seq,
            offset: 0,
            why: why.to_string(),
        })
    })?;
    if header.seq != seq {
        // Opened as it was collected and given a new header for its next use: gone.
        return Ok(None);
    }
    Ok(Some(header))
}

/// Whether the segment `indexed` found is still in place, with the same header.
fn still_there(files: &SegmentFiles, indexed: &Indexed) -> Result<bool, LogError> {
    Ok(read_header(files, &indexed.path, indexed.header.seq)? == Some(indexed.header))
}

/// Finds more records of `indexed`'s segment, whose successor is `next` (`None`: the last
/// segment): until `want` is found if given, else up to the end of its range, or of the log.
fn extend(
    files: &SegmentFiles,
    indexed: &mut Indexed,
    next: Option<SegmentHeader>,
    want: Option<u64>,
) -> Result<Step<()>, LogError> {
    let fs = files.fs();
    let handle = match fs.open_file(&indexed.path) {
        Ok(h) => h,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Step::Changed),
        Err(e) => return Err(e.into()),
    };
    let upper = next.map(|n| n.first_position);
    // A bounded segment no longer changes within its range: it is read to its end at once,
    // and only once.
    let mut window = match upper {
        Some(_) => match fs.stat(&indexed.path) {
            Ok(info) => info.len.saturating_sub(indexed.next_offset).max(1),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Step::Changed),
            Err(e) => return Err(e.into()),
        },
        None => WINDOW,
    };
    let next_header_only = vec![0u8; HEADER_BYTES as usize];
    loop {
        if upper.is_some_and(|u| indexed.end() >= u) || want.is_some_and(|w| indexed.holds(w)) {
            return Ok(Step::Done(()));
        }
        let base = indexed.next_offset;
        let data = handle.read_at(base, window as usize)?;
        let eof = (data.len() as u64) < window;
        // The part read, as a segment of its own that starts at the first position not found
        // yet, so that `scan` checks it by the same rules as a whole one; its offsets are
        // `base - HEADER_BYTES` below the real ones.
        let mut part_bytes = vec![0u8; HEADER_BYTES as usize];
        part_bytes.extend_from_slice(&data);
        let part = SegmentHeader {
            first_position: indexed.end(),
            ..indexed.header
        };
        let mut input = vec![SegmentBytes {
            header: part,
            bytes: &part_bytes,
        }];
        if let Some(n) = next {
            // Only its first position matters: it ends this segment's range.
            input.push(SegmentBytes {
                header: n,
                bytes: &next_header_only,
            });
        }
        match scan(&input, part.first_position) {
            Ok(scanned) => {
                let stop = add_found(indexed, &input[0], base, &scanned.records);
                if upper.is_some() {
                    // The scan read the whole range, or it would have failed.
                    return Ok(Step::Done(()));
                }
                match cut_at(&part_bytes, stop) {
                    // The record after the last one found runs past what was read: read on
                    // from it.
                    Some(needed) if !eof => window = window.max(needed),
                    // The end of the log.
                    _ => return Ok(Step::Done(())),
                }
            }
            Err(d) if d.seq == part.seq && d.offset >= HEADER_BYTES && !eof => {
                let Some(needed) = cut_at(&part_bytes, d.offset) else {
                    return damaged(files, indexed, d, &input[0], base, want);
                };
                // Cut by the end of what was read, not damaged: read more.
                window = (window * 2).max(d.offset - HEADER_BYTES + needed);
            }
            Err(d) => return damaged(files, indexed, d, &input[0], base, want),
        }
    }
}

/// Adds the records `found` in `part`, the part of `indexed`'s segment read at `base`, to
/// `indexed`; the offset in `part` after the last of them.
fn add_found(indexed: &mut Indexed, part: &SegmentBytes<'_>, base: u64, found: &[Found]) -> u64 {
    let mut stop = HEADER_BYTES;
    for f in found.iter().filter(|f| f.segment == 0) {
        let record = decode_record(part.bytes, part.header.salt, f.offset)
            .expect("a record the scan found decodes");
        indexed.offsets.push(f.offset - HEADER_BYTES + base);
        stop = record.next_offset;
    }
    indexed.next_offset = stop - HEADER_BYTES + base;
    stop
}

/// `d`, found in `part`, the part of `indexed`'s segment read at `base`, as the error it is,
/// unless the segment was collected meanwhile (then the caller looks again) or `want` is among
/// the records before the damage, which are whole and in order, and read as such.
fn damaged(
    files: &SegmentFiles,
    indexed: &mut Indexed,
    mut d: Damage,
    part: &SegmentBytes<'_>,
    base: u64,
    want: Option<u64>,
) -> Result<Step<()>, LogError> {
    if !still_there(files, indexed)? {
        return Ok(Step::Changed);
    }
    if d.seq == part.header.seq && d.offset >= HEADER_BYTES {
        let before = SegmentBytes {
            header: part.header,
            bytes: &part.bytes[..d.offset as usize],
        };
        if let Ok(scanned) = scan(&[before], part.header.first_position) {
            add_found(indexed, &before, base, &scanned.records);
        }
        if want.is_some_and(|w| indexed.holds(w)) {
            return Ok(Step::Done(()));
        }
        d.offset = d.offset - HEADER_BYTES + base;
    }
    Err(LogError::Damage(d))
}

/// The bytes the record at `offset` of `part` needs, if it runs past the end of `part` (or its
/// header does): then only more of the segment can say whether it is valid.
fn cut_at(part: &[u8], offset: u64) -> Option<u64> {
    let len = part.len() as u64;
    if offset + RECORD_HEADER_BYTES > len {
        return Some(RECORD_HEADER_BYTES);
    }
    claimed_record_len(part, offset).filter(|needed| offset + needed > len)
}

/// The record of `position`, which `indexed` holds, read again from its segment; `None` if the
/// segment was collected meanwhile.
fn read_record(
    files: &SegmentFiles,
    indexed: &Indexed,
    position: u64,
) -> Result<Option<FoundRecord>, LogError> {
    let k = (position - indexed.header.first_position) as usize;
    let start = indexed.offsets[k];
    let end = indexed
        .offsets
        .get(k + 1)
        .copied()
        .unwrap_or(indexed.next_offset);
    let bytes = match files.fs().open_file(&indexed.path) {
        Ok(handle) => handle.read_at(start, (end - start) as usize)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let h = indexed.header;
    match decode_record(&bytes, h.salt, 0) {
        Some(r) if r.position == position && r.epoch == h.epoch => Ok(Some(FoundRecord {
            position,
            epoch: r.epoch,
            seq: h.seq,
            offset: start,
            payload: r.payload.to_vec(),
        })),
        _ if !still_there(files, indexed)? => Ok(None),
        _ => Err(LogError::Damage(Damage {
            seq: h.seq,
            offset: start,
            why: format!("the record of position {position} no longer decodes"),
        })),
    }
}

/// Whether the records `indexed` found in the last segment stand.
enum Decided {
    /// They all do.
    Stands,
    /// A claim is under way and has not created its segment yet: it decides.
    Undecided,
    /// A later segment now bounds the segment's range: look again.
    Bounded,
}

/// See the module docs: the fence file is read after every record found was read.
fn decide(files: &SegmentFiles, indexed: &mut Indexed) -> Result<Decided, LogError> {
    if files.read_fence()? == Some(indexed.header.epoch) {
        indexed.confirmed = indexed.end();
        return Ok(Decided::Stands);
    }
    if files
        .list()?
        .iter()
        .any(|(seq, _)| *seq > indexed.header.seq)
    {
        return Ok(Decided::Bounded);
    }
    Ok(Decided::Undecided)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fs::StdFs;
    use crate::wal::segments::log::SegmentLog;
    use std::sync::Arc;
    use uuid::Uuid;

    const SMALL: u64 = 8192;

    fn files(dir: &Path) -> SegmentFiles {
        SegmentFiles::new(Arc::new(StdFs), dir.join("segments"), SMALL)
    }

    fn claim(dir: &Path, epoch: u64, cursor: u64) -> SegmentLog {
        SegmentLog::claim(files(dir), epoch, Uuid::new_v4(), cursor)
            .unwrap()
            .0
    }

    fn payload(position: u64) -> Vec<u8> {
        format!("entry {position}")
            .repeat(1 + position as usize % 50)
            .into_bytes()
    }

    fn read(dir: &Path, cache: &ReadCache, position: u64) -> At {
        read_position(&files(dir), cache, position).unwrap()
    }

    fn record(at: At) -> FoundRecord {
        match at {
            At::Record(r) => r,
            other => panic!("expected a record, got {other:?}"),
        }
    }

    // Positions across rotations read back, with a cache and without, in any order.
    #[test]
    fn every_position_reads_back_across_rotations() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        for i in 1..=60 {
            a.append(&payload(i)).unwrap();
        }
        a.commit().unwrap();
        assert!(files(dir.path()).list().unwrap().len() > 3);
        let cache = ReadCache::default();
        for p in (1..=60).chain((1..=60).rev()) {
            let r = record(read(dir.path(), &cache, p));
            assert_eq!((r.position, r.epoch), (p, 1));
            assert_eq!(r.payload, payload(p));
            assert_eq!(
                record(read(dir.path(), &ReadCache::default(), p)).payload,
                payload(p)
            );
        }
        assert_eq!(read(dir.path(), &cache, 61), At::NotYet);
        let t = tip(&files(dir.path()), &cache).unwrap().unwrap();
        assert_eq!((t.end, t.first_available), (61, 1));
    }

    // A record longer than the window is read whole.
    #[test]
    fn a_record_larger_than_the_window_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        let big = vec![9u8; (WINDOW as usize) * 3 + 5];
        a.append(b"small").unwrap();
        a.append(&big).unwrap();
        a.append(b"after").unwrap();
        a.commit().unwrap();
        let cache = ReadCache::default();
        assert_eq!(record(read(dir.path(), &cache, 2)).payload, big);
        assert_eq!(record(read(dir.path(), &cache, 3)).payload, b"after");
        assert_eq!(tip(&files(dir.path()), &cache).unwrap().unwrap().end, 4);
    }

    // A claim under way (here a fence file a claimant died writing, which reads as one) leaves
    // the last segment's records read after it undecided until the claimant's segment exists;
    // what the claimant read stands, and what the stale writer appends after its segment
    // exists is never returned.
    #[test]
    fn a_claim_decides_the_last_segments_records() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let mut a = claim(dir.path(), 1, 0);
        a.append(b"one").unwrap();
        a.commit().unwrap();
        let cache = ReadCache::default();
        assert_eq!(record(read(dir.path(), &cache, 1)).payload, b"one");
        // A claimant of epoch 2 recorded its claim (the fence file is as long as its slot).
        std::fs::OpenOptions::new()
            .write(true)
            .open(f.dir().join("fence"))
            .unwrap()
            .set_len(3 * 8)
            .unwrap();
        a.append(b"maybe").unwrap();
        assert_eq!(read(dir.path(), &cache, 2), At::NotYet, "the claim decides");
        assert_eq!(
            read(dir.path(), &ReadCache::default(), 1),
            At::NotYet,
            "a new reader has confirmed nothing"
        );
        assert_eq!(record(read(dir.path(), &cache, 1)).payload, b"one");
        assert_eq!(tip(&f, &cache).unwrap().unwrap().end, 2);
        // The claimant read "maybe": it stands.
        let mut b = claim(dir.path(), 2, 0);
        assert_eq!(b.next_position(), 3);
        let r = record(read(dir.path(), &cache, 2));
        assert_eq!((r.payload.as_slice(), r.epoch), (&b"maybe"[..], 1));
        assert_eq!(tip(&f, &ReadCache::default()).unwrap().unwrap().end, 3);
        a.append(b"stale").unwrap();
        assert_eq!(read(dir.path(), &cache, 3), At::NotYet);
        assert_eq!(tip(&f, &cache).unwrap().unwrap().end, 3);
        b.append(b"three").unwrap();
        b.commit().unwrap();
        let r = record(read(dir.path(), &cache, 3));
        assert_eq!((r.payload.as_slice(), r.epoch), (&b"three"[..], 2));
    }

    // Damage within a segment's range is reported with its segment and offset.
    #[test]
    fn damage_is_reported_where_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = claim(dir.path(), 1, 0);
        // Committed one by one, so that each record says the one before it was durable.
        for i in 1..=3 {
            a.append(&payload(i)).unwrap();
            a.commit().unwrap();
        }
        let (seq, path) = files(dir.path()).list().unwrap().pop().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let second = HEADER_BYTES + super::super::format::record_len(payload(1).len());
        bytes[second as usize + 45] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let cache = ReadCache::default();
        assert_eq!(record(read(dir.path(), &cache, 1)).payload, payload(1));
        match read_position(&files(dir.path()), &cache, 2) {
            Err(LogError::Damage(d)) => assert_eq!((d.seq, d.offset), (seq, second), "{}", d.why),
            other => panic!("expected damage, got {other:?}"),
        }
        assert!(matches!(
            verify(&files(dir.path()), 1),
            Err(LogError::Damage(_))
        ));
    }
}
