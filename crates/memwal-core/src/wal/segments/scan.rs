//! Reading a shard's segments, in sequence order, into WAL positions (`docs/wal-segments.md`,
//! "Recovery").
//!
//! # The rules
//! - Segment `k` holds positions from its header's first position up to segment `k + 1`'s
//!   first position. A record at or past that is a stale writer's, written after its successor
//!   claimed the shard: it is never read, whatever it holds.
//! - Within that range, records are valid (checksummed with the segment's salt), consecutive,
//!   and of the segment's epoch. An invalid record there is damage, reported with the
//!   segment's sequence number and offset.
//! - In the last segment the range is open: the first invalid record ends the log (a write
//!   torn by a crash) unless a valid record after it says the invalid one was durable (its
//!   durable-through position reaches it), which only damage can leave. A valid record that
//!   says less is one of a group that was never committed, written back out of order.
//! - Sequence numbers, first positions and epochs never go down from one segment to the next:
//!   a claimant's segment starts where its replay ended, after every segment it read.
//!
//! Pure: the caller reads the segments (or maps them) and hands their bytes in.

use super::format::{HEADER_BYTES, SegmentHeader, decode_record, next_valid_record};

/// The first valid record of `salt` after `offset` in `bytes` whose durable-through position
/// reaches `position`: proof that the record of `position` was durable.
fn proof_of_durability(bytes: &[u8], salt: u64, offset: u64, position: u64) -> Option<u64> {
    let mut at = offset;
    while let Some(found) = next_valid_record(bytes, salt, at) {
        let r = decode_record(bytes, salt, found).expect("found valid");
        if r.durable_through >= position {
            return Some(found);
        }
        at = found + 8;
    }
    None
}

/// One segment as the scan reads it: its header and all its bytes.
#[derive(Debug, Clone, Copy)]
pub struct SegmentBytes<'a> {
    /// Its decoded header.
    pub header: SegmentHeader,
    /// The whole segment, header included.
    pub bytes: &'a [u8],
}

/// Where a record was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Its WAL position.
    pub position: u64,
    /// The epoch of the writer that wrote it.
    pub epoch: u64,
    /// The index of its segment in the scan's input.
    pub segment: usize,
    /// The offset of its record in the segment.
    pub offset: u64,
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scanned {
    /// The records from the scan's start on, in position order.
    pub records: Vec<Found>,
    /// The first position with no record: the WAL's tip.
    pub end: u64,
    /// The first position any segment still holds (`None` for no segment): positions below it
    /// were collected.
    pub first_available: Option<u64>,
}

/// Damage in a segment: where, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The segment's sequence number.
    pub seq: u64,
    /// The offset in it (0: the segment as a whole).
    pub offset: u64,
    /// What was wrong.
    pub why: String,
}

/// Reads `segments` (in sequence order) from position `start` on. See the module docs.
///
/// # Errors
/// [`Damage`] naming the segment and offset of the first rule broken.
pub fn scan(segments: &[SegmentBytes<'_>], start: u64) -> Result<Scanned, Damage> {
    check_order(segments)?;
    let mut records = Vec::new();
    let mut end = start;
    for (i, segment) in segments.iter().enumerate() {
        let upper = segments.get(i + 1).map(|s| s.header.first_position);
        if upper.is_some_and(|u| u <= start) {
            continue;
        }
        end = read_segment(i, segment, upper, start, &mut records)?;
    }
    Ok(Scanned {
        records,
        end: end.max(start),
        first_available: segments.first().map(|s| s.header.first_position),
    })
}

/// Sequence numbers strictly up, first positions and epochs never down.
fn check_order(segments: &[SegmentBytes<'_>]) -> Result<(), Damage> {
    for pair in segments.windows(2) {
        let (a, b) = (pair[0].header, pair[1].header);
        let why = if b.seq <= a.seq {
            "its sequence number does not follow the segment before it"
        } else if b.first_position < a.first_position {
            "it starts at a position below the segment before it"
        } else if b.epoch < a.epoch {
            "its epoch is below the segment before it"
        } else {
            continue;
        };
        return Err(Damage {
            seq: b.seq,
            offset: 0,
            why: why.to_string(),
        });
    }
    Ok(())
}

/// Reads segment `index` (`segment`), whose range ends at `upper` (`None`: the last segment),
/// pushing its records from `start` on; the position after its last record.
fn read_segment(
    index: usize,
    segment: &SegmentBytes<'_>,
    upper: Option<u64>,
    start: u64,
    records: &mut Vec<Found>,
) -> Result<u64, Damage> {
    let h = segment.header;
    let damage = |offset: u64, why: String| Damage {
        seq: h.seq,
        offset,
        why,
    };
    let mut offset = HEADER_BYTES;
    let mut expected = h.first_position;
    while upper.is_none_or(|u| expected < u) {
        let Some(r) = decode_record(segment.bytes, h.salt, offset) else {
            if upper.is_some() {
                return Err(damage(
                    offset,
                    format!(
                        "the record of position {expected} is missing or damaged, but the next segment starts at position {}",
                        upper.unwrap_or_default()
                    ),
                ));
            }
            if let Some(at) = proof_of_durability(segment.bytes, h.salt, offset, expected) {
                return Err(damage(
                    offset,
                    format!(
                        "the record of position {expected} is damaged, but a valid record at offset {at} says it was durable"
                    ),
                ));
            }
            return Ok(expected);
        };
        if r.position != expected || r.epoch != h.epoch {
            return Err(damage(
                offset,
                format!(
                    "it holds position {} of epoch {} where position {expected} of epoch {} belongs",
                    r.position, r.epoch, h.epoch
                ),
            ));
        }
        if expected >= start {
            records.push(Found {
                position: expected,
                epoch: r.epoch,
                segment: index,
                offset,
            });
        }
        expected += 1;
        offset = r.next_offset;
    }
    Ok(expected)
}

#[cfg(test)]
mod tests {
    use super::super::format::{RecordHead, encode_record};
    use super::*;
    use uuid::Uuid;

    /// A segment: its header and bytes holding `records` (position, epoch, payload), in a file
    /// of 8 KiB.
    fn seg(seq: u64, epoch: u64, first: u64, records: &[(u64, u64)]) -> (SegmentHeader, Vec<u8>) {
        seg_durable(seq, epoch, first, records, 0)
    }

    /// [`seg`] with every record saying `durable_through`.
    fn seg_durable(
        seq: u64,
        epoch: u64,
        first: u64,
        records: &[(u64, u64)],
        durable_through: u64,
    ) -> (SegmentHeader, Vec<u8>) {
        let header = SegmentHeader {
            seq,
            epoch,
            first_position: first,
            salt: seq * 1000 + 7,
            writer_id: Uuid::from_u128(epoch as u128),
        };
        let mut bytes = header.encode().to_vec();
        bytes.resize(HEADER_BYTES as usize, 0);
        for (position, e) in records {
            bytes.extend(encode_record(
                header.salt,
                RecordHead {
                    position: *position,
                    epoch: *e,
                    durable_through,
                },
                b"entry",
            ));
        }
        bytes.resize(8192, 0);
        (header, bytes)
    }

    fn run(segs: &[(SegmentHeader, Vec<u8>)], start: u64) -> Result<Scanned, Damage> {
        let input: Vec<SegmentBytes<'_>> = segs
            .iter()
            .map(|(header, bytes)| SegmentBytes {
                header: *header,
                bytes,
            })
            .collect();
        scan(&input, start)
    }

    fn positions(s: &Scanned) -> Vec<u64> {
        s.records.iter().map(|r| r.position).collect()
    }

    #[test]
    fn segments_read_in_order_up_to_the_tip() {
        let segs = [
            seg(1, 1, 1, &[(1, 1), (2, 1)]),
            seg(2, 2, 3, &[(3, 2), (4, 2)]),
        ];
        let s = run(&segs, 1).unwrap();
        assert_eq!(positions(&s), vec![1, 2, 3, 4]);
        assert_eq!((s.end, s.first_available), (5, Some(1)));
        let s = run(&segs, 3).unwrap();
        assert_eq!(positions(&s), vec![3, 4]);
        assert_eq!(s.records[0].segment, 1);
        assert_eq!(
            run(&[], 7).unwrap().end,
            7,
            "no segment: the tip is the start"
        );
    }

    // A stale writer of epoch 1 kept writing into its segment after a claimant's segment
    // started at position 3: its records 3 and 4 are never read.
    #[test]
    fn a_stale_writers_records_past_its_successors_start_are_never_read() {
        let segs = [
            seg(1, 1, 1, &[(1, 1), (2, 1), (3, 1), (4, 1)]),
            seg(2, 2, 3, &[(3, 2)]),
        ];
        let s = run(&segs, 1).unwrap();
        assert_eq!(positions(&s), vec![1, 2, 3]);
        assert_eq!(s.records[2].epoch, 2);
        assert_eq!(s.end, 4);
    }

    #[test]
    fn a_torn_tail_ends_the_log_and_damage_before_a_valid_record_is_reported() {
        // A record written back before one it follows, in a group never committed: torn.
        let (h, mut unsynced) = seg(1, 1, 1, &[(1, 1), (2, 1), (3, 1)]);
        let second = super::super::format::record_len(5) + HEADER_BYTES;
        unsynced[second as usize + 41] ^= 0xff;
        assert_eq!(run(&[(h, unsynced)], 1).unwrap().end, 2);
        // The same, where the record after says position 2 was durable: damage.
        let (h, mut bytes) = seg_durable(1, 1, 1, &[(1, 1), (2, 1), (3, 1)], 2);
        let third = second + super::super::format::record_len(5);
        // Torn: the last record cut.
        let mut torn = bytes.clone();
        torn[third as usize + 34..].fill(0);
        assert_eq!(run(&[(h, torn)], 1).unwrap().end, 3);
        // Damaged: the second record's payload flipped, the third intact after it.
        bytes[second as usize + 41] ^= 0xff;
        let e = run(&[(h, bytes)], 1).unwrap_err();
        assert_eq!((e.seq, e.offset), (1, second));
        assert!(e.why.contains("says it was durable"), "{}", e.why);
    }

    #[test]
    fn a_record_missing_before_the_next_segment_is_damage() {
        let segs = [seg(1, 1, 1, &[(1, 1)]), seg(2, 2, 3, &[(3, 2)])];
        let e = run(&segs, 1).unwrap_err();
        assert_eq!(e.seq, 1);
        assert!(e.why.contains("position 2"), "{}", e.why);
        // Starting past that segment's range skips it.
        assert_eq!(positions(&run(&segs, 3).unwrap()), vec![3]);
    }

    #[test]
    fn out_of_place_records_and_segments_are_damage() {
        let wrong_position = [seg(1, 1, 1, &[(1, 1), (3, 1)])];
        assert!(
            run(&wrong_position, 1)
                .unwrap_err()
                .why
                .contains("holds position 3")
        );
        let wrong_epoch = [seg(1, 2, 1, &[(1, 1)])];
        assert!(run(&wrong_epoch, 1).unwrap_err().why.contains("of epoch 1"));
        for (a, b, why) in [
            (seg(2, 1, 1, &[]), seg(2, 1, 1, &[]), "sequence number"),
            (
                seg(1, 1, 5, &[]),
                seg(2, 1, 4, &[]),
                "starts at a position below",
            ),
            (seg(1, 2, 1, &[]), seg(2, 1, 1, &[]), "epoch is below"),
        ] {
            let e = run(&[a, b], 1).unwrap_err();
            assert!(e.why.contains(why), "{}", e.why);
        }
    }

    #[test]
    fn collected_positions_are_below_the_first_available() {
        let segs = [seg(5, 3, 40, &[(40, 3), (41, 3)])];
        let s = run(&segs, 38).unwrap();
        assert_eq!(s.first_available, Some(40));
        assert_eq!(positions(&s), vec![40, 41]);
    }
}
