//! One record on disk, and finding records in a segment's bytes.
//!
//! Layout, little-endian: `magic u32 | body_len u32 | crc32 u32 | seq u64 |
//! timestamp_ns u64 | body`. The checksum covers everything after itself.
//! The magic lets a reader find the next record after damage.

use bytes::BufMut;

/// Marks the start of every record ("SFTR" as little-endian bytes).
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"SFTR");
/// Bytes before a record's body.
pub const RECORD_HEADER_BYTES: usize = 28;
/// Largest body a record may have; a header claiming more is damage.
pub const RECORD_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Appends one record.
pub fn encode_record(buf: &mut Vec<u8>, seq: u64, timestamp_ns: u64, body: &[u8]) {
    debug_assert!(body.len() <= RECORD_BODY_BYTES_MAX);
    buf.put_u32_le(RECORD_MAGIC);
    buf.put_u32_le(body.len() as u32);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq.to_le_bytes());
    hasher.update(&timestamp_ns.to_le_bytes());
    hasher.update(body);
    buf.put_u32_le(hasher.finalize());
    buf.put_u64_le(seq);
    buf.put_u64_le(timestamp_ns);
    buf.put_slice(body);
}

/// Bytes a record of `body_len` takes.
pub fn record_len(body_len: usize) -> usize {
    RECORD_HEADER_BYTES + body_len
}

/// A whole record found at an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
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
pub enum Parsed {
    /// A whole record whose checksum holds.
    Whole(Found),
    /// Nothing: the end of the bytes.
    End,
    /// A header or body that does not fit in the bytes left.
    Incomplete,
    /// Bytes that are not a whole, valid record.
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
pub fn parse_at(bytes: &[u8], offset: usize) -> Parsed {
    let left = bytes.len().saturating_sub(offset);
    if left == 0 {
        return Parsed::End;
    }
    if left < RECORD_HEADER_BYTES {
        return Parsed::Incomplete;
    }
    if u32_at(bytes, offset) != RECORD_MAGIC {
        return Parsed::Bad;
    }
    let body_len = u32_at(bytes, offset + 4) as usize;
    if body_len > RECORD_BODY_BYTES_MAX {
        return Parsed::Bad;
    }
    if left < record_len(body_len) {
        return Parsed::Incomplete;
    }
    let checksum = u32_at(bytes, offset + 8);
    let covered = &bytes[offset + 12..offset + record_len(body_len)];
    if crc32fast::hash(covered) != checksum {
        return Parsed::Bad;
    }
    Parsed::Whole(Found {
        seq: u64_at(bytes, offset + 12),
        timestamp_ns: u64_at(bytes, offset + 20),
        body_start: offset + RECORD_HEADER_BYTES,
        body_len,
    })
}

/// The body length a header at `offset` claims, if the header is there
/// and plausible: lets a reader fetch a record larger than its chunk.
pub fn claimed_len(bytes: &[u8], offset: usize) -> Option<usize> {
    if bytes.len().saturating_sub(offset) < RECORD_HEADER_BYTES || u32_at(bytes, offset) != RECORD_MAGIC {
        return None;
    }
    let body_len = u32_at(bytes, offset + 4) as usize;
    (body_len <= RECORD_BODY_BYTES_MAX).then(|| record_len(body_len))
}

/// The offset of the first whole, valid record at or after `from`.
pub fn resync(bytes: &[u8], from: usize) -> Option<(usize, Found)> {
    let magic = RECORD_MAGIC.to_le_bytes();
    let mut at = from;
    while at + RECORD_HEADER_BYTES <= bytes.len() {
        let window = &bytes[at..];
        let next = window.windows(4).position(|candidate| candidate == magic)?;
        at += next;
        if let Parsed::Whole(found) = parse_at(bytes, at) {
            return Some((at, found));
        }
        at += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_found() {
        let mut bytes = Vec::new();
        encode_record(&mut bytes, 7, 99, b"hello");
        encode_record(&mut bytes, 8, 100, b"world!");
        let Parsed::Whole(first) = parse_at(&bytes, 0) else { panic!("whole") };
        assert_eq!(
            (first.seq, first.timestamp_ns, &bytes[first.body_start..first.body_start + 5]),
            (7, 99, &b"hello"[..])
        );
        let Parsed::Whole(second) = parse_at(&bytes, first.len()) else { panic!("whole") };
        assert_eq!(second.seq, 8);
        assert_eq!(parse_at(&bytes, first.len() + second.len()), Parsed::End);
        assert_eq!(parse_at(&bytes[..bytes.len() - 1], first.len()), Parsed::Incomplete);
        let mut damaged = bytes.clone();
        damaged[RECORD_HEADER_BYTES + 1] ^= 1;
        assert_eq!(parse_at(&damaged, 0), Parsed::Bad);
        assert_eq!(resync(&damaged, 1).map(|(at, found)| (at, found.seq)), Some((first.len(), 8)));
    }
}
