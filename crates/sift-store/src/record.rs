//! One record on disk, and finding records in a segment's bytes.
//!
//! Layout, little-endian (`docs/STORAGE.md` has the table):
//!
//! ```text
//! magic u32 | body_len u32 | crc32 u32 | seq u64 | timestamp_ns u64 | body
//! ```
//!
//! The checksum covers everything after itself, so a record is trusted
//! only whole: a flipped bit anywhere in its sequence, time or body fails
//! it. The magic is there for after damage: a reader that meets bytes which
//! are not a record searches forward for the magic followed by a record
//! whose checksum holds ([`resync`]), and goes on from there. A length
//! field alone could not do that, since a damaged length points anywhere.

use bytes::BufMut;

/// Marks the start of every record: the bytes `SFTR` (`0x5254_4653` as a
/// little-endian `u32`).
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"SFTR");
/// Bytes before a record's body.
pub const RECORD_HEADER_BYTES: usize = 28;
/// Largest body a record may have; a header claiming more is damage.
pub const RECORD_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Offset of `body_len` in a record.
const BODY_LEN_AT: usize = 4;
/// Offset of `crc32`.
const CHECKSUM_AT: usize = 8;
/// Offset of `seq`: the checksum covers from here to the body's end.
const SEQ_AT: usize = 12;
/// Offset of `timestamp_ns`.
const TIMESTAMP_AT: usize = 20;

/// Appends one record to `buf`. The caller has refused bodies over
/// [`RECORD_BODY_BYTES_MAX`].
pub(crate) fn encode_record(buf: &mut Vec<u8>, seq: u64, timestamp_ns: u64, body: &[u8]) {
    debug_assert!(body.len() <= RECORD_BODY_BYTES_MAX, "bodies are checked at append");
    let body_len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq.to_le_bytes());
    hasher.update(&timestamp_ns.to_le_bytes());
    hasher.update(body);
    buf.reserve(record_len(body.len()));
    buf.put_u32_le(RECORD_MAGIC);
    buf.put_u32_le(body_len);
    buf.put_u32_le(hasher.finalize());
    buf.put_u64_le(seq);
    buf.put_u64_le(timestamp_ns);
    buf.put_slice(body);
}

/// Bytes a record with a body of `body_len` bytes takes.
pub(crate) fn record_len(body_len: usize) -> usize {
    RECORD_HEADER_BYTES + body_len
}

/// A whole record found at an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    /// Its sequence.
    pub seq: u64,
    /// Its timestamp.
    pub timestamp_ns: u64,
    /// Where its body starts, relative to the slice parsed.
    pub body_start: usize,
    /// Its body's length.
    pub body_len: usize,
}

impl Found {
    /// Bytes the whole record takes.
    pub fn len(&self) -> usize {
        record_len(self.body_len)
    }
}

/// What is at an offset of a segment's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A whole record whose checksum holds.
    Whole(Found),
    /// Nothing: the end of the bytes.
    End,
    /// A plausible header, or its start, whose record does not fit in the
    /// bytes left.
    Incomplete,
    /// Bytes that are not a record: wrong magic, impossible length, or a
    /// checksum that fails.
    Bad,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Parses the record at `offset` of `bytes`.
pub(crate) fn parse_at(bytes: &[u8], offset: usize) -> Parsed {
    let left = bytes.len().saturating_sub(offset);
    if left == 0 {
        return Parsed::End;
    }
    if left < RECORD_HEADER_BYTES {
        return Parsed::Incomplete;
    }
    let Some(length) = claimed_len(bytes, offset) else {
        return Parsed::Bad;
    };
    if left < length {
        return Parsed::Incomplete;
    }
    let covered = &bytes[offset + SEQ_AT..offset + length];
    if crc32fast::hash(covered) != u32_at(bytes, offset + CHECKSUM_AT) {
        return Parsed::Bad;
    }
    Parsed::Whole(Found {
        seq: u64_at(bytes, offset + SEQ_AT),
        timestamp_ns: u64_at(bytes, offset + TIMESTAMP_AT),
        body_start: offset + RECORD_HEADER_BYTES,
        body_len: length - RECORD_HEADER_BYTES,
    })
}

/// The length of the whole record a header at `offset` announces, if the
/// header is there and plausible (the magic, a body within the bound):
/// lets a reader fetch a record larger than its chunk.
pub(crate) fn claimed_len(bytes: &[u8], offset: usize) -> Option<usize> {
    if bytes.len().saturating_sub(offset) < RECORD_HEADER_BYTES || u32_at(bytes, offset) != RECORD_MAGIC {
        return None;
    }
    let body_len = u32_at(bytes, offset + BODY_LEN_AT) as usize;
    (body_len <= RECORD_BODY_BYTES_MAX).then(|| record_len(body_len))
}

/// The first whole, valid record at or after `from` whose sequence is at
/// least `seq_min`, with its offset: where reading resumes after damage.
/// Older records found on the way (stale bytes) are passed over. Costs a
/// search for the magic plus a checksum per candidate.
pub(crate) fn resync(bytes: &[u8], from: usize, seq_min: u64) -> Option<(usize, Found)> {
    let magic = RECORD_MAGIC.to_le_bytes();
    let mut at = from;
    while at + RECORD_HEADER_BYTES <= bytes.len() {
        let skipped = bytes[at..].windows(magic.len()).position(|candidate| candidate == magic)?;
        at += skipped;
        if let Parsed::Whole(found) = parse_at(bytes, at) {
            if found.seq >= seq_min {
                return Some((at, found));
            }
            at += found.len();
            continue;
        }
        at += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_records() -> (Vec<u8>, usize) {
        let mut bytes = Vec::new();
        encode_record(&mut bytes, 7, 99, b"hello");
        let first_len = bytes.len();
        encode_record(&mut bytes, 8, 100, b"world!");
        (bytes, first_len)
    }

    #[test]
    fn records_round_trip() {
        let (bytes, first_len) = two_records();
        assert_eq!(&bytes[..4], b"SFTR");
        let Parsed::Whole(first) = parse_at(&bytes, 0) else { panic!("whole") };
        assert_eq!((first.seq, first.timestamp_ns, first.len()), (7, 99, first_len));
        assert_eq!(&bytes[first.body_start..first.body_start + first.body_len], b"hello");
        let Parsed::Whole(second) = parse_at(&bytes, first_len) else { panic!("whole") };
        assert_eq!(second.seq, 8);
        assert_eq!(parse_at(&bytes, first_len + second.len()), Parsed::End);
        assert_eq!(parse_at(&bytes[..bytes.len() - 1], first_len), Parsed::Incomplete);
        assert_eq!(parse_at(&bytes[..first_len + 3], first_len), Parsed::Incomplete);
    }

    #[test]
    fn every_flipped_bit_is_found_and_resync_finds_the_next_record() {
        let (bytes, first_len) = two_records();
        for bit in 0..first_len * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_ne!(parse_at(&damaged, 0), parse_at(&bytes, 0), "bit {bit} goes unnoticed");
            assert_eq!(resync(&damaged, 1, 8).map(|(at, found)| (at, found.seq)), Some((first_len, 8)));
        }
    }

    #[test]
    fn resync_passes_over_older_records_and_a_huge_length_is_bad() {
        let (bytes, _) = two_records();
        assert_eq!(resync(&bytes, 0, 8).map(|(_, found)| found.seq), Some(8));
        assert_eq!(resync(&bytes, 0, 9), None);
        let mut huge = bytes.clone();
        huge[BODY_LEN_AT..BODY_LEN_AT + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse_at(&huge, 0), Parsed::Bad);
        assert_eq!(claimed_len(&huge, 0), None);
    }
}
