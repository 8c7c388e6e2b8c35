//! A Raft entry as a stream record's body.
//!
//! | Field | Type | Meaning |
//! |---|---|---|
//! | `kind` | `u8` | 0 blank, 1 an [`crate::Append`], 2 a membership |
//! | `term` | `u64` big-endian | the term of the leader that made it |
//! | `node_id` | `u64` big-endian | that leader |
//! | `index` | `u64` big-endian | its Raft index (the record's sequence minus one) |
//! | payload | rest | the appended body; a membership as JSON; nothing for a blank |
//!
//! The index is stored although the sequence implies it, so that a record
//! read back is checked to be the entry expected there.

use openraft::{CommittedLeaderId, EntryPayload};

use crate::{Append, LogId, TypeConfig};

/// An entry of this crate's groups.
pub type Entry = openraft::Entry<TypeConfig>;

/// Bytes before the payload.
const HEADER_BYTES: usize = 1 + 8 + 8 + 8;

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
}

/// The record body of `entry`.
pub fn encode(entry: &Entry) -> Result<Vec<u8>, serde_json::Error> {
    let (kind, payload) = match &entry.payload {
        EntryPayload::Blank => (0u8, Vec::new()),
        EntryPayload::Normal(Append(body)) => (1, body.clone()),
        EntryPayload::Membership(membership) => (2, serde_json::to_vec(membership)?),
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.push(kind);
    out.extend_from_slice(&entry.log_id.leader_id.term.to_be_bytes());
    out.extend_from_slice(&entry.log_id.leader_id.node_id.to_be_bytes());
    out.extend_from_slice(&entry.log_id.index.to_be_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// The entry a record body holds.
pub fn decode(bytes: &[u8]) -> Result<Entry, DecodeError> {
    if bytes.len() < HEADER_BYTES {
        return Err(DecodeError::Short(bytes.len()));
    }
    let number = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let log_id = LogId::new(CommittedLeaderId::new(number(1), number(9)), number(17));
    let payload = &bytes[HEADER_BYTES..];
    let payload = match bytes[0] {
        0 => EntryPayload::Blank,
        1 => EntryPayload::Normal(Append(payload.to_vec())),
        2 => EntryPayload::Membership(serde_json::from_slice(payload)?),
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

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::Membership;
    use std::collections::BTreeSet;

    #[test]
    fn every_kind_of_entry_round_trips() {
        let log_id = LogId::new(CommittedLeaderId::new(3, 2), 41);
        let members: BTreeSet<u64> = [1, 2, 3].into_iter().collect();
        let entries = [
            Entry { log_id, payload: EntryPayload::Blank },
            Entry { log_id, payload: EntryPayload::Normal(Append(b"order 1".to_vec())) },
            Entry { log_id, payload: EntryPayload::Membership(Membership::new(vec![members], None)) },
        ];
        for entry in entries {
            let bytes = encode(&entry).expect("encodes");
            assert_eq!(log_id_of(&bytes).expect("a log id"), log_id);
            assert_eq!(decode(&bytes).expect("decodes"), entry);
        }
        assert!(matches!(decode(&[1, 2]), Err(DecodeError::Short(2))));
        assert!(matches!(decode(&[9; HEADER_BYTES]), Err(DecodeError::Kind(9))));
    }
}
