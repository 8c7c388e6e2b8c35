//! A Raft entry as stream records, and on the wire between brokers.
//!
//! An entry is one or more records of the stream's log: a batch of
//! messages ([`StreamEntry::Messages`]) is a record per message, so that
//! each message keeps a stream sequence of its own and consumers read
//! messages, not batches; every other entry is one record. Each record's
//! body starts with a header:
//!
//! | Field | Type | Meaning |
//! |---|---|---|
//! | `kind` | `u8` | 0 blank, 1 a message, 2 a membership, 3 a state change |
//! | `term` | `u64` big-endian | the term of the leader that made the entry |
//! | `node_id` | `u64` big-endian | that leader |
//! | `index` | `u64` big-endian | the entry's Raft index |
//! | `part` | `u32` big-endian | this record's place among the entry's records, from 0 |
//! | `parts` | `u32` big-endian | how many records the entry has |
//! | `key` | `u64` big-endian | a message's key ([`Append::key`]); messages only |
//! | payload | rest | the message; a membership as JSON; a state change's bytes; nothing for a blank |
//!
//! The record's own time field holds the message's time (0 for the
//! others), so that replay by time works on a replicated stream as on any.
//! `part` and `parts` let a reader put an entry back together and see
//! that it has all of it.
//!
//! On the wire an entry is its record count (`u32` big-endian), then each
//! record's time (`u64`), length (`u32`) and body.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use openraft::{CommittedLeaderId, EntryPayload};

use crate::{Append, LogId, StreamEntry, TypeConfig};

/// An entry of this crate's groups.
pub type Entry = openraft::Entry<TypeConfig>;

/// Bytes of every record's header.
pub const HEADER_BYTES: usize = 1 + 8 + 8 + 8 + 4 + 4;
/// Bytes before a message: the header and its key.
const MESSAGE_HEADER_BYTES: usize = HEADER_BYTES + 8;
const KIND_BLANK: u8 = 0;
const KIND_MESSAGE: u8 = 1;
const KIND_MEMBERSHIP: u8 = 2;
const KIND_STATE: u8 = 3;
/// Most records an entry may have on the wire: a bound on what a peer
/// makes this broker allocate.
const WIRE_RECORDS_MAX: u32 = 1 << 20;

/// Why records are not an entry.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the header.
    #[error("a Raft record of {0} bytes is shorter than its header")]
    Short(usize),
    /// An unknown kind byte.
    #[error("a Raft record of unknown kind {0}")]
    Kind(u8),
    /// A membership that is not the JSON this crate writes.
    #[error("a Raft membership record that does not parse: {0}")]
    Membership(#[from] serde_json::Error),
    /// Records that are not one whole entry.
    #[error("Raft records that are not one whole entry: {0}")]
    Parts(String),
    /// An entry on the wire that ends early.
    #[error("an entry on the wire ends after {0} bytes")]
    Truncated(usize),
}

/// What every record's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// The kind byte.
    pub kind: u8,
    /// The entry's log id.
    pub log_id: LogId,
    /// This record's place in the entry.
    pub part: u32,
    /// The entry's record count.
    pub parts: u32,
}

/// How many records `entry` takes in the log.
pub fn records_of(entry: &Entry) -> u64 {
    match &entry.payload {
        EntryPayload::Normal(StreamEntry::Messages(messages)) => messages.len().max(1) as u64,
        _ => 1,
    }
}

fn header(out: &mut BytesMut, kind: u8, log_id: &LogId, part: u32, parts: u32) {
    out.put_u8(kind);
    out.put_u64(log_id.leader_id.term);
    out.put_u64(log_id.leader_id.node_id);
    out.put_u64(log_id.index);
    out.put_u32(part);
    out.put_u32(parts);
}

/// The records of `entry`: each one's time and body, in order.
pub fn encode(entry: &Entry) -> Result<Vec<(u64, Bytes)>, serde_json::Error> {
    let log_id = &entry.log_id;
    let single = |kind: u8, payload: &[u8]| {
        let mut out = BytesMut::with_capacity(HEADER_BYTES + payload.len());
        header(&mut out, kind, log_id, 0, 1);
        out.extend_from_slice(payload);
        vec![(0, out.freeze())]
    };
    Ok(match &entry.payload {
        EntryPayload::Blank => single(KIND_BLANK, &[]),
        EntryPayload::Membership(membership) => single(KIND_MEMBERSHIP, &serde_json::to_vec(membership)?),
        EntryPayload::Normal(StreamEntry::State(state)) => single(KIND_STATE, state),
        // An empty batch is never proposed; as a blank it keeps its index.
        EntryPayload::Normal(StreamEntry::Messages(messages)) if messages.is_empty() => single(KIND_BLANK, &[]),
        EntryPayload::Normal(StreamEntry::Messages(messages)) => {
            let parts = messages.len() as u32;
            let mut records = Vec::with_capacity(messages.len());
            for (part, message) in messages.iter().enumerate() {
                let mut out = BytesMut::with_capacity(MESSAGE_HEADER_BYTES + message.body.len());
                header(&mut out, KIND_MESSAGE, log_id, part as u32, parts);
                out.put_u64(message.key);
                out.extend_from_slice(&message.body);
                records.push((message.timestamp_ns, out.freeze()));
            }
            records
        }
    })
}

/// The header of a record's body.
pub fn header_of(bytes: &[u8]) -> Result<RecordHeader, DecodeError> {
    if bytes.len() < HEADER_BYTES {
        return Err(DecodeError::Short(bytes.len()));
    }
    let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
    let log_id = LogId::new(CommittedLeaderId::new(u64_at(1), u64_at(9)), u64_at(17));
    Ok(RecordHeader { kind: bytes[0], log_id, part: u32_at(25), parts: u32_at(29) })
}

/// The entry `records` (each one's time and body, in order) make.
pub fn decode(records: &[(u64, Bytes)]) -> Result<Entry, DecodeError> {
    let Some((_, first)) = records.first() else { return Err(DecodeError::Parts("no record".into())) };
    let head = header_of(first)?;
    if head.parts as usize != records.len() {
        return Err(DecodeError::Parts(format!(
            "{} of {} records of entry {}",
            records.len(),
            head.parts,
            head.log_id
        )));
    }
    let payload = first.slice(HEADER_BYTES..);
    let payload = match head.kind {
        KIND_BLANK => EntryPayload::Blank,
        KIND_MEMBERSHIP => EntryPayload::Membership(serde_json::from_slice(&payload)?),
        KIND_STATE => EntryPayload::Normal(StreamEntry::State(payload)),
        KIND_MESSAGE => {
            let mut messages = Vec::with_capacity(records.len());
            for (part, (timestamp_ns, body)) in records.iter().enumerate() {
                let record = header_of(body)?;
                if record.part as usize != part || record.log_id != head.log_id || body.len() < MESSAGE_HEADER_BYTES {
                    return Err(DecodeError::Parts(format!("record {part} of entry {} is out of place", head.log_id)));
                }
                let key = u64::from_be_bytes(body[HEADER_BYTES..MESSAGE_HEADER_BYTES].try_into().unwrap_or([0; 8]));
                messages.push(Append { timestamp_ns: *timestamp_ns, key, body: body.slice(MESSAGE_HEADER_BYTES..) });
            }
            EntryPayload::Normal(StreamEntry::Messages(messages))
        }
        other => return Err(DecodeError::Kind(other)),
    };
    Ok(Entry { log_id: head.log_id, payload })
}

/// The message a record body holds, sharing its bytes; `None` for the
/// group's own records (blank, membership, state), which are no message.
pub fn message_of(body: &Bytes) -> Option<Bytes> {
    match body.first() {
        Some(&KIND_MESSAGE) if body.len() >= MESSAGE_HEADER_BYTES => Some(body.slice(MESSAGE_HEADER_BYTES..)),
        _ => None,
    }
}

/// Puts `entry` on the wire.
pub fn put_wire(entry: &Entry, out: &mut BytesMut) -> Result<(), serde_json::Error> {
    let records = encode(entry)?;
    out.put_u32(records.len() as u32);
    for (timestamp_ns, body) in records {
        out.put_u64(timestamp_ns);
        out.put_u32(body.len() as u32);
        out.extend_from_slice(&body);
    }
    Ok(())
}

/// Takes one entry off the wire.
pub fn take_wire(wire: &mut Bytes) -> Result<Entry, DecodeError> {
    if wire.len() < 4 {
        return Err(DecodeError::Truncated(wire.len()));
    }
    let count = wire.get_u32();
    if count == 0 || count > WIRE_RECORDS_MAX {
        return Err(DecodeError::Parts(format!("an entry of {count} records on the wire")));
    }
    let mut records = Vec::with_capacity((count as usize).min(wire.len() / 12));
    for _ in 0..count {
        if wire.len() < 12 {
            return Err(DecodeError::Truncated(wire.len()));
        }
        let timestamp_ns = wire.get_u64();
        let length = wire.get_u32() as usize;
        if wire.len() < length {
            return Err(DecodeError::Truncated(wire.len()));
        }
        records.push((timestamp_ns, wire.split_to(length)));
    }
    decode(&records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::Membership;
    use std::collections::BTreeSet;

    fn every_kind() -> Vec<Entry> {
        let log_id = LogId::new(CommittedLeaderId::new(3, 2), 41);
        let members: BTreeSet<u64> = [1, 2, 3].into_iter().collect();
        let message =
            |key: u64, body: &'static [u8]| Append { timestamp_ns: 17 + key, key, body: Bytes::from_static(body) };
        vec![
            Entry { log_id, payload: EntryPayload::Blank },
            Entry { log_id, payload: EntryPayload::Normal(StreamEntry::Messages(vec![message(9, b"order 1")])) },
            Entry {
                log_id,
                payload: EntryPayload::Normal(StreamEntry::Messages(vec![message(1, b"a"), message(2, b"bb")])),
            },
            Entry { log_id, payload: EntryPayload::Normal(StreamEntry::State(Bytes::from_static(b"{}"))) },
            Entry { log_id, payload: EntryPayload::Membership(Membership::new(vec![members], None)) },
        ]
    }

    #[test]
    fn every_kind_of_entry_round_trips_as_records() {
        for entry in every_kind() {
            let records = encode(&entry).expect("encodes");
            assert_eq!(records.len() as u64, records_of(&entry));
            for (part, (_, body)) in records.iter().enumerate() {
                let head = header_of(body).expect("a header");
                assert_eq!((head.log_id, head.part as usize, head.parts as usize), (entry.log_id, part, records.len()));
            }
            assert_eq!(decode(&records).expect("decodes"), entry);
            let is_message = matches!(entry.payload, EntryPayload::Normal(StreamEntry::Messages(_)));
            assert_eq!(records.iter().all(|(_, body)| message_of(body).is_some()), is_message);
        }
        let batch = encode(&every_kind()[2]).expect("encodes");
        assert_eq!(message_of(&batch[1].1).as_deref(), Some(&b"bb"[..]));
        assert!(matches!(decode(&batch[..1]), Err(DecodeError::Parts(_))), "a part of an entry is not one");
        let swapped = [batch[1].clone(), batch[0].clone()];
        assert!(decode(&swapped).is_err(), "records out of order are refused");
        assert!(matches!(header_of(&[1, 2]), Err(DecodeError::Short(2))));
        let mut unknown = BytesMut::new();
        header(&mut unknown, 9, &every_kind()[0].log_id, 0, 1);
        assert!(matches!(decode(&[(0, unknown.freeze())]), Err(DecodeError::Kind(9))));
    }

    #[test]
    fn entries_round_trip_on_the_wire_and_a_cut_one_is_refused() {
        let mut wire = BytesMut::new();
        for entry in every_kind() {
            put_wire(&entry, &mut wire).expect("encodes");
        }
        let whole = wire.freeze();
        let mut reading = whole.clone();
        for entry in every_kind() {
            assert_eq!(take_wire(&mut reading).expect("decodes"), entry);
        }
        assert!(reading.is_empty());
        let mut cut = whole.slice(..whole.len() - 1);
        let results: Vec<_> = (0..every_kind().len()).map(|_| take_wire(&mut cut)).collect();
        assert!(results.last().is_some_and(Result::is_err));
        assert!(take_wire(&mut Bytes::from_static(&[0, 0, 0, 0])).is_err(), "an entry of no record");
    }
}
