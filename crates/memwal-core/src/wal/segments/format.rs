//! The byte format of the segment-log WAL: a segment's header and its records.
//!
//! A segment is a file of a fixed size, allocated and synced before it is used, so that an
//! append's `fdatasync` writes data blocks and never file metadata. Its first
//! [`HEADER_BYTES`] hold a [`SegmentHeader`]; records follow, each starting at a multiple of 8:
//!
//! ```text
//! header (64 bytes, then zeros up to HEADER_BYTES):
//!   magic "MEMWALSG" | version u32 | crc32c u32 | seq u64 | epoch u64 | first_position u64
//!   | salt u64 | writer id (16 bytes)
//! record (40 bytes, then the payload, then zeros up to a multiple of 8):
//!   magic "MWR1" | crc32c u32 | length u32 | reserved u32 | position u64 | epoch u64
//!   | durable through u64 | payload
//! ```
//!
//! Integers are little-endian. A header's CRC32C covers its 64 bytes with the CRC field zeroed.
//! A record's CRC32C covers the segment's `salt`, then its length, position, epoch and
//! durable-through position, then its payload: a segment is given a new random salt each time it is (re)used, so the bytes a
//! recycled segment still holds from its last use never validate, and neither do zeros, a torn
//! record, or a record copied from another segment. A record's payload is the exact bytes of
//! the Lance-format WAL entry at its position ([`crate::wal::entry`]), so that converting a shard
//! between layouts copies payloads.
//!
//! A record also says the highest position its writer knew durable when it wrote it (its
//! last commit). A disk may write back a group's sectors in any order, so after a power loss a
//! record of a group that was never committed can be intact behind a torn one: that is a torn
//! tail. Only a record whose durable-through position reaches a torn one proves damage
//! ([`super::scan`]).

use uuid::Uuid;

/// Bytes reserved for the header at the start of every segment; records start here.
pub const HEADER_BYTES: u64 = 4096;
/// Bytes of a record's header, before its payload.
pub const RECORD_HEADER_BYTES: u64 = 40;

const SEGMENT_MAGIC: &[u8; 8] = b"MEMWALSG";
const FORMAT_VERSION: u32 = 1;
const RECORD_MAGIC: &[u8; 4] = b"MWR1";
const ENCODED_HEADER_BYTES: usize = 64;

/// What a segment's header says: which segment it is, whose records it holds, and the salt
/// that seeds their checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment's sequence number: segments are read in this order.
    pub seq: u64,
    /// The epoch of the writer that created it; every record in it has this epoch.
    pub epoch: u64,
    /// The WAL position of its first record. A segment's records run from here up to the next
    /// segment's first position; a record at or past that is a stale writer's, never read.
    pub first_position: u64,
    /// Seeds every record checksum of this use of the segment.
    pub salt: u64,
    /// The id of the writer that created it.
    pub writer_id: Uuid,
}

impl SegmentHeader {
    /// The header's bytes (64; the rest of [`HEADER_BYTES`] is zeros).
    pub fn encode(&self) -> [u8; ENCODED_HEADER_BYTES] {
        let mut out = [0u8; ENCODED_HEADER_BYTES];
        out[0..8].copy_from_slice(SEGMENT_MAGIC);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.epoch.to_le_bytes());
        out[32..40].copy_from_slice(&self.first_position.to_le_bytes());
        out[40..48].copy_from_slice(&self.salt.to_le_bytes());
        out[48..64].copy_from_slice(self.writer_id.as_bytes());
        let crc = crc32c::crc32c(&out);
        out[12..16].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The header in `bytes` (the start of a segment), or why it is not one.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, &'static str> {
        let b = bytes
            .get(..ENCODED_HEADER_BYTES)
            .ok_or("the file is shorter than a segment header")?;
        if &b[0..8] != SEGMENT_MAGIC {
            return Err("it does not start with a segment header");
        }
        if u32_at(b, 8) != FORMAT_VERSION {
            return Err("its header has an unknown format version");
        }
        let mut zeroed = [0u8; ENCODED_HEADER_BYTES];
        zeroed.copy_from_slice(b);
        zeroed[12..16].fill(0);
        if crc32c::crc32c(&zeroed) != u32_at(b, 12) {
            return Err("its header's checksum does not match");
        }
        Ok(SegmentHeader {
            seq: u64_at(b, 16),
            epoch: u64_at(b, 24),
            first_position: u64_at(b, 32),
            salt: u64_at(b, 40),
            writer_id: Uuid::from_slice(&b[48..64]).expect("16 bytes"),
        })
    }
}

/// One record as read from a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// The WAL position it holds.
    pub position: u64,
    /// The epoch of the writer that wrote it.
    pub epoch: u64,
    /// The highest position its writer knew durable when it wrote it (0: none).
    pub durable_through: u64,
    /// The WAL entry's bytes.
    pub payload: &'a [u8],
    /// Where the next record starts.
    pub next_offset: u64,
}

/// Bytes a record of a `payload_len`-byte payload takes, padding included.
pub fn record_len(payload_len: usize) -> u64 {
    (RECORD_HEADER_BYTES + payload_len as u64).next_multiple_of(8)
}

/// Where a record goes and who writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHead {
    /// The WAL position it holds.
    pub position: u64,
    /// The epoch of its writer.
    pub epoch: u64,
    /// The highest position its writer knows durable.
    pub durable_through: u64,
}

/// The bytes of a record of `payload` with `head`, for a segment of `salt`: its header, the
/// payload, and zeros up to a multiple of 8.
pub fn encode_record(salt: u64, head: RecordHead, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a WAL entry is smaller than 4 GiB");
    let mut out = Vec::with_capacity(record_len(payload.len()) as usize);
    out.extend_from_slice(RECORD_MAGIC);
    out.extend_from_slice(&record_crc(salt, len, &head, payload).to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&head.position.to_le_bytes());
    out.extend_from_slice(&head.epoch.to_le_bytes());
    out.extend_from_slice(&head.durable_through.to_le_bytes());
    out.extend_from_slice(payload);
    out.resize(record_len(payload.len()) as usize, 0);
    out
}

/// The record starting at `offset` of `segment` (the segment's bytes from its start), if a
/// valid one of this salt is there: `None` for zeros, a torn or damaged record, or a record
/// left from another use of the segment.
pub fn decode_record(segment: &[u8], salt: u64, offset: u64) -> Option<Record<'_>> {
    let start = usize::try_from(offset).ok()?;
    let head = segment.get(start..start + RECORD_HEADER_BYTES as usize)?;
    // The reserved field is not in the checksum: it must be zero, as written.
    if &head[0..4] != RECORD_MAGIC || u32_at(head, 12) != 0 {
        return None;
    }
    let len = u32_at(head, 8);
    let payload_start = start + RECORD_HEADER_BYTES as usize;
    let payload = segment.get(payload_start..payload_start.checked_add(len as usize)?)?;
    let fields = RecordHead {
        position: u64_at(head, 16),
        epoch: u64_at(head, 24),
        durable_through: u64_at(head, 32),
    };
    if record_crc(salt, len, &fields, payload) != u32_at(head, 4) {
        return None;
    }
    Some(Record {
        position: fields.position,
        epoch: fields.epoch,
        durable_through: fields.durable_through,
        payload,
        next_offset: offset + record_len(len as usize),
    })
}

/// The bytes a record starting at `offset` of `segment` claims to take (padding included), if
/// a record's magic is there, whether or not the rest of it is valid: how a reader that holds
/// only the start of a segment tells a record cut by the end of what it read (read more) from
/// the first invalid record (the end of the log).
pub fn claimed_record_len(segment: &[u8], offset: u64) -> Option<u64> {
    let start = usize::try_from(offset).ok()?;
    let head = segment.get(start..start + RECORD_HEADER_BYTES as usize)?;
    (&head[0..4] == RECORD_MAGIC).then(|| record_len(u32_at(head, 8) as usize))
}

/// The offset of the first valid record of this salt at or after `offset`, looking at every
/// multiple of 8: how replay tells a torn tail (nothing valid after it) from a damaged record
/// with valid ones after it.
pub fn next_valid_record(segment: &[u8], salt: u64, offset: u64) -> Option<u64> {
    let mut at = offset.next_multiple_of(8);
    while at + RECORD_HEADER_BYTES <= segment.len() as u64 {
        if segment[at as usize..at as usize + 4] == *RECORD_MAGIC
            && decode_record(segment, salt, at).is_some()
        {
            return Some(at);
        }
        at += 8;
    }
    None
}

fn record_crc(salt: u64, len: u32, head: &RecordHead, payload: &[u8]) -> u32 {
    let mut b = [0u8; 36];
    b[0..8].copy_from_slice(&salt.to_le_bytes());
    b[8..12].copy_from_slice(&len.to_le_bytes());
    b[12..20].copy_from_slice(&head.position.to_le_bytes());
    b[20..28].copy_from_slice(&head.epoch.to_le_bytes());
    b[28..36].copy_from_slice(&head.durable_through.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&b), payload)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> SegmentHeader {
        SegmentHeader {
            seq: 7,
            epoch: 3,
            first_position: 42,
            salt: 0x1234_5678_9abc_def0,
            writer_id: Uuid::from_u128(0xfeed),
        }
    }

    /// A segment of `len` bytes holding `records` from `HEADER_BYTES` on, with `salt`.
    fn segment(salt: u64, records: &[(u64, u64, &[u8])], len: usize) -> Vec<u8> {
        let mut s = vec![0u8; HEADER_BYTES as usize];
        for (position, epoch, payload) in records {
            s.extend(encode_record(
                salt,
                RecordHead {
                    position: *position,
                    epoch: *epoch,
                    durable_through: 0,
                },
                payload,
            ));
        }
        s.resize(len.max(s.len()), 0);
        s
    }

    #[test]
    fn a_header_round_trips_and_any_damage_is_refused() {
        let h = header();
        let bytes = h.encode();
        assert_eq!(SegmentHeader::decode(&bytes), Ok(h));
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 0x01;
            assert!(SegmentHeader::decode(&bad).is_err(), "byte {i}");
        }
        assert!(SegmentHeader::decode(&bytes[..63]).is_err());
        assert!(SegmentHeader::decode(&[0u8; 64]).is_err());
    }

    #[test]
    fn records_follow_each_other_at_multiples_of_eight() {
        let salt = 99;
        let s = segment(
            salt,
            &[(1, 2, b"abc"), (2, 2, b""), (3, 2, &[7u8; 100])],
            8192,
        );
        let mut at = HEADER_BYTES;
        let mut seen = Vec::new();
        while let Some(r) = decode_record(&s, salt, at) {
            assert_eq!(at % 8, 0);
            seen.push((r.position, r.epoch, r.payload.to_vec()));
            at = r.next_offset;
        }
        assert_eq!(
            seen,
            vec![
                (1, 2, b"abc".to_vec()),
                (2, 2, Vec::new()),
                (3, 2, vec![7u8; 100])
            ]
        );
        assert_eq!(next_valid_record(&s, salt, at), None, "zeros after them");
    }

    #[test]
    fn a_record_cut_or_flipped_anywhere_or_of_another_salt_never_validates() {
        let salt = 5;
        let one = encode_record(
            salt,
            RecordHead {
                position: 9,
                epoch: 4,
                durable_through: 0,
            },
            b"payload bytes",
        );
        let at = HEADER_BYTES;
        let whole = segment(salt, &[(9, 4, b"payload bytes")], 0);
        assert!(decode_record(&whole, salt, at).is_some());
        for cut in 0..one.len() {
            let mut torn = vec![0u8; HEADER_BYTES as usize];
            torn.extend_from_slice(&one[..cut]);
            torn.resize(HEADER_BYTES as usize + one.len(), 0);
            // Padding bytes are not covered: a record cut only in its padding is whole.
            let whole_payload = cut >= RECORD_HEADER_BYTES as usize + b"payload bytes".len();
            assert_eq!(
                decode_record(&torn, salt, at).is_some(),
                whole_payload,
                "cut at {cut}"
            );
        }
        for i in 0..(RECORD_HEADER_BYTES as usize + 13) {
            for bit in [0x01u8, 0x80] {
                let mut bad = whole.clone();
                bad[HEADER_BYTES as usize + i] ^= bit;
                assert!(
                    decode_record(&bad, salt, at).is_none(),
                    "byte {i} bit {bit}"
                );
            }
        }
        assert!(
            decode_record(&whole, salt + 1, at).is_none(),
            "another salt"
        );
    }

    #[test]
    fn a_valid_record_after_a_damaged_one_is_found() {
        let salt = 11;
        let mut s = segment(salt, &[(1, 1, b"first"), (2, 1, b"second")], 8192);
        let second = decode_record(&s, salt, HEADER_BYTES).unwrap().next_offset;
        s[HEADER_BYTES as usize + RECORD_HEADER_BYTES as usize + 1] ^= 0xff;
        assert!(decode_record(&s, salt, HEADER_BYTES).is_none());
        assert_eq!(next_valid_record(&s, salt, HEADER_BYTES), Some(second));
        assert_eq!(next_valid_record(&s, salt + 1, HEADER_BYTES), None);
    }
}
