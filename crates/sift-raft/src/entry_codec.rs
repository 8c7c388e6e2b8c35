//! A Raft entry as a stream record, and on the wire between brokers.
//!
//! A record's body:
//!
//! | Field | Type | Meaning |
//! |---|---|---|
//! | `kind` | `u8` | 0 blank, 1 a message ([`crate::Append`]), 2 a membership, 3 a state change ([`crate::StreamEntry::State`]) |
//! | `term` | `u64` big-endian | the term of the leader that made it |
//! | `node_id` | `u64` big-endian | that leader |
//! | `index` | `u64` big-endian | its Raft index (the record's sequence minus one) |
//! | payload | rest | a message's key (`u64` big-endian) and the message; a membership as JSON; a state change's bytes; nothing for a blank |
//!
//! The record's own time field holds the appended message's time (0 for
//! the others), so that replay by time works on a replicated stream as on
//! any. The index is stored although the sequence implies it, so that a
//! record read back is checked to be the entry expected there.
//!
//! On the wire an entry is its time (`u64` big-endian), the body's length
//! (`u32` big-endian) and the body.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use openraft::{CommittedLeaderId, EntryPayload};

use crate::{Append, LogId, StreamEntry, TypeConfig};

/// An entry of this crate's groups.
pub type Entry = openraft::Entry<TypeConfig>;

/// Bytes before the payload.
pub const HEADER_BYTES: usize = 1 + 8 + 8 + 8;
/// The kind byte of an appended message.
const KIND_APPEND: u8 = 1;
/// The kind byte of a state change.
const KIND_STATE: u8 = 3;
/// Bytes before an appended message: the header and its key.
const APPEND_HEADER_BYTES: usize = HEADER_BYTES + 8;

/// Why a record is not an entry.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the header.
    #[error("a Raft record of {0} bytes is shorter than its {HEADER_BYTES}-byte header")]
    Short(usize),
    /// An unknown kind byte.
    #[error("a Raft record of unknown kind {0}")]
    Kind(u8),
    /// A membership that is not the JSON this crate writes.
    #[error("a Raft membership record that does not parse: {0}")]
    Membership(#[from] serde_json::Error),
    /// An entry on the wire that ends early.
    #[error("an entry on the wire ends after {0} bytes")]
    Truncated(usize),
}

/// The record of `entry`: its time and its body.
pub fn encode(entry: &Entry) -> Result<(u64, Bytes), serde_json::Error> {
    let (kind, timestamp_ns, key, payload) = match &entry.payload {
        EntryPayload::Blank => (0u8, 0, None, Bytes::new()),
        EntryPayload::Normal(StreamEntry::Message(append)) => {
            (KIND_APPEND, append.timestamp_ns, Some(append.key), append.body.clone())
        }
        EntryPayload::Normal(StreamEntry::State(state)) => (KIND_STATE, 0, None, state.clone()),
        EntryPayload::Membership(membership) => (2, 0, None, Bytes::from(serde_json::to_vec(membership)?)),
    };
    let mut out = BytesMut::with_capacity(APPEND_HEADER_BYTES + payload.len());
    out.put_u8(kind);
    out.put_u64(entry.log_id.leader_id.term);
    out.put_u64(entry.log_id.leader_id.node_id);
    out.put_u64(entry.log_id.index);
    if let Some(key) = key {
        out.put_u64(key);
    }
    out.extend_from_slice(&payload);
    Ok((timestamp_ns, out.freeze()))
}

/// The entry a record holds.
pub fn decode(timestamp_ns: u64, bytes: &Bytes) -> Result<Entry, DecodeError> {
    let log_id = log_id_of(bytes)?;
    let payload = bytes.slice(HEADER_BYTES..);
    let payload = match bytes[0] {
        0 => EntryPayload::Blank,
        KIND_APPEND if bytes.len() < APPEND_HEADER_BYTES => return Err(DecodeError::Short(bytes.len())),
        KIND_APPEND => {
            let key = u64::from_be_bytes(payload[..8].try_into().unwrap_or([0; 8]));
            let body = bytes.slice(APPEND_HEADER_BYTES..);
            EntryPayload::Normal(StreamEntry::Message(Append { timestamp_ns, key, body }))
        }
        KIND_STATE => EntryPayload::Normal(StreamEntry::State(payload)),
        2 => EntryPayload::Membership(serde_json::from_slice(&payload)?),
        other => return Err(DecodeError::Kind(other)),
    };
    Ok(Entry { log_id, payload })
}

/// The log id a record body holds, without decoding its payload.
pub fn log_id_of(bytes: &[u8]) -> Result<LogId, DecodeError> {
    if bytes.len() < HEADER_BYTES {
        return Err(DecodeError::Short(bytes.len()));
    }
    let number = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    Ok(LogId::new(CommittedLeaderId::new(number(1), number(9)), number(17)))
}

/// The message a record body holds, sharing its bytes; `None` for the
/// group's own entries (blank and membership), which are no message.
pub fn message_of(body: &Bytes) -> Option<Bytes> {
    match body.first() {
        Some(&KIND_APPEND) if body.len() >= APPEND_HEADER_BYTES => Some(body.slice(APPEND_HEADER_BYTES..)),
        _ => None,
    }
}

/// Puts `entry` on the wire.
pub fn put_wire(entry: &Entry, out: &mut BytesMut) -> Result<(), serde_json::Error> {
    let (timestamp_ns, body) = encode(entry)?;
    out.put_u64(timestamp_ns);
    out.put_u32(body.len() as u32);
    out.extend_from_slice(&body);
    Ok(())
}

/// Takes one entry off the wire.
pub fn take_wire(wire: &mut Bytes) -> Result<Entry, DecodeError> {
    if wire.len() < 12 {
        return Err(DecodeError::Truncated(wire.len()));
    }
    let timestamp_ns = wire.get_u64();
    let length = wire.get_u32() as usize;
    if wire.len() < length {
        return Err(DecodeError::Truncated(wire.len()));
    }
    let body = wire.split_to(length);
    decode(timestamp_ns, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::Membership;
    use std::collections::BTreeSet;

    fn every_kind() -> Vec<Entry> {
        let log_id = LogId::new(CommittedLeaderId::new(3, 2), 41);
        let members: BTreeSet<u64> = [1, 2, 3].into_iter().collect();
        let append = Append { timestamp_ns: 17, key: 99, body: Bytes::from_static(b"order 1") };
        vec![
            Entry { log_id, payload: EntryPayload::Blank },
            Entry { log_id, payload: EntryPayload::Normal(StreamEntry::Message(append)) },
            Entry { log_id, payload: EntryPayload::Normal(StreamEntry::State(Bytes::from_static(b"{}"))) },
            Entry { log_id, payload: EntryPayload::Membership(Membership::new(vec![members], None)) },
        ]
    }

    #[test]
    fn every_kind_of_entry_round_trips_as_a_record() {
        for entry in every_kind() {
            let (timestamp_ns, bytes) = encode(&entry).expect("encodes");
            assert_eq!(log_id_of(&bytes).expect("a log id"), entry.log_id);
            assert_eq!(decode(timestamp_ns, &bytes).expect("decodes"), entry);
            let is_message = matches!(entry.payload, EntryPayload::Normal(StreamEntry::Message(_)));
            assert_eq!(message_of(&bytes).is_some(), is_message);
        }
        let short = Bytes::from_static(&[1, 2]);
        assert!(matches!(decode(0, &short), Err(DecodeError::Short(2))));
        assert!(matches!(decode(0, &Bytes::from(vec![9; HEADER_BYTES])), Err(DecodeError::Kind(9))));
        assert_eq!(message_of(&short), None);
        let (_, append) = encode(&every_kind()[1]).expect("encodes");
        assert_eq!(message_of(&append).as_deref(), Some(&b"order 1"[..]));
        assert!(matches!(decode(0, &append.slice(..HEADER_BYTES + 3)), Err(DecodeError::Short(_))));
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
        let results: Vec<_> = (0..4).map(|_| take_wire(&mut cut)).collect();
        assert!(matches!(results[3], Err(DecodeError::Truncated(_))));
    }
}
