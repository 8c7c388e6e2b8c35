//! A group's messages between brokers: openraft's three calls (append
//! entries, vote, install snapshot) over whatever carries them, which the
//! broker gives as a [`Transport`] (its broker links), and their encoding.
//!
//! - `APPEND_ENTRIES` (kind 1): a request is a `u32` big-endian length, a
//!   JSON header (`vote`, `prev_log_id`, `leader_commit`), then each entry
//!   in [`entry_codec`]'s wire form, so that messages travel as bytes;
//! - `VOTE` (2) and `INSTALL_SNAPSHOT` (3): the request as JSON (both are
//!   small: a snapshot holds only the applied id and the membership);
//! - every answer is the JSON of openraft's `Result` for the call, so that
//!   a refusal (a higher term, a conflict) reaches the caller as openraft
//!   made it.
//!
//! Every request starts with the node id it is for (`u64` big-endian): a
//! broker whose replica is another incarnation (it came back without the
//! files that node held) refuses it, so that it never answers, and above
//! all never votes, as the node it no longer is.
//!
//! A call that finds no way to its broker is `Unreachable` to openraft
//! (which backs off before trying again); one that gets no answer in time
//! is a network error (tried again at once).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Raft, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::entry_codec::{self, DecodeError};
use crate::{LogId, TypeConfig};

/// Which of openraft's calls a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// Entries (or a heartbeat) from the leader.
    AppendEntries,
    /// A candidate's request for a vote.
    Vote,
    /// A chunk of the leader's snapshot.
    InstallSnapshot,
}

impl CallKind {
    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            CallKind::AppendEntries => 1,
            CallKind::Vote => 2,
            CallKind::InstallSnapshot => 3,
        }
    }

    /// The kind of a code; `None` for a code that is not one of these.
    pub fn from_code(code: u8) -> Option<CallKind> {
        match code {
            1 => Some(CallKind::AppendEntries),
            2 => Some(CallKind::Vote),
            3 => Some(CallKind::InstallSnapshot),
            _ => None,
        }
    }
}

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No way to the broker is known now, or it cannot serve the call.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// No answer came in time.
    #[error("no answer from broker {to} within {timeout:?}")]
    Timeout {
        /// The broker called.
        to: String,
        /// How long the call waited.
        timeout: Duration,
    },
}

/// What carries a group's calls to other brokers.
pub trait Transport: Clone + Send + Sync + 'static {
    /// Sends `request` of `kind`, for the group of `stream`, to the broker
    /// named `to`; its answer, within `timeout`.
    fn call(
        &self,
        to: &str,
        stream: &str,
        kind: CallKind,
        request: Bytes,
        timeout: Duration,
    ) -> impl Future<Output = Result<Bytes, CallError>> + Send;
}

/// Why a call's bytes are not what this module writes.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A bad JSON part.
    #[error("a Raft call's JSON does not parse: {0}")]
    Json(#[from] serde_json::Error),
    /// A bad entry.
    #[error(transparent)]
    Entry(#[from] DecodeError),
    /// A request shorter than its header says.
    #[error("a Raft call of {0} bytes is shorter than its header")]
    Short(usize),
    /// A request for a node id this replica is not.
    #[error("a Raft call for node {addressed} reached node {own} (another incarnation of the broker's replica)")]
    WrongNode {
        /// The node the call is for.
        addressed: u64,
        /// This replica's node.
        own: u64,
    },
}

/// The header of an `APPEND_ENTRIES` request.
#[derive(serde::Serialize, serde::Deserialize)]
struct AppendHeader {
    vote: Vote<u64>,
    prev_log_id: Option<LogId>,
    leader_commit: Option<LogId>,
}

/// Encodes an `APPEND_ENTRIES` request.
pub fn encode_append(request: &AppendEntriesRequest<TypeConfig>) -> Result<Bytes, WireError> {
    let header =
        AppendHeader { vote: request.vote, prev_log_id: request.prev_log_id, leader_commit: request.leader_commit };
    let header = serde_json::to_vec(&header)?;
    let mut out = BytesMut::with_capacity(4 + header.len());
    out.put_u32(header.len() as u32);
    out.extend_from_slice(&header);
    for entry in &request.entries {
        entry_codec::put_wire(entry, &mut out)?;
    }
    Ok(out.freeze())
}

/// Decodes an `APPEND_ENTRIES` request.
pub fn decode_append(mut wire: Bytes) -> Result<AppendEntriesRequest<TypeConfig>, WireError> {
    if wire.len() < 4 {
        return Err(WireError::Short(wire.len()));
    }
    let header_bytes = wire.get_u32() as usize;
    if wire.len() < header_bytes {
        return Err(WireError::Short(wire.len()));
    }
    let header: AppendHeader = serde_json::from_slice(&wire.split_to(header_bytes))?;
    let mut entries = Vec::new();
    while !wire.is_empty() {
        entries.push(entry_codec::take_wire(&mut wire)?);
    }
    Ok(AppendEntriesRequest {
        vote: header.vote,
        prev_log_id: header.prev_log_id,
        entries,
        leader_commit: header.leader_commit,
    })
}

fn json<T: Serialize>(value: &T) -> Result<Bytes, WireError> {
    Ok(Bytes::from(serde_json::to_vec(value)?))
}

fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, WireError> {
    Ok(serde_json::from_slice(bytes)?)
}

/// Puts the node id a request is for before it.
fn addressed(target: u64, request: Bytes) -> Bytes {
    let mut out = BytesMut::with_capacity(8 + request.len());
    out.put_u64(target);
    out.extend_from_slice(&request);
    out.freeze()
}

/// Serves a call that reached this broker for `raft`'s group (node `own`):
/// its answer.
pub async fn serve(raft: &Raft<TypeConfig>, own: u64, kind: CallKind, mut request: Bytes) -> Result<Bytes, WireError> {
    if request.len() < 8 {
        return Err(WireError::Short(request.len()));
    }
    let addressed = request.get_u64();
    if addressed != own {
        return Err(WireError::WrongNode { addressed, own });
    }
    match kind {
        CallKind::AppendEntries => json(&raft.append_entries(decode_append(request)?).await),
        CallKind::Vote => json(&raft.vote(from_json(&request)?).await),
        CallKind::InstallSnapshot => json(&raft.install_snapshot(from_json(&request)?).await),
    }
}

/// A group's network: a client per member, over `transport`.
#[derive(Clone)]
pub struct GroupNetwork<T: Transport> {
    transport: T,
    stream: Arc<str>,
}

impl<T: Transport> GroupNetwork<T> {
    /// The network of the group of `stream`.
    pub fn new(transport: T, stream: &str) -> GroupNetwork<T> {
        GroupNetwork { transport, stream: stream.into() }
    }
}

/// One member's client: calls to the broker its node names.
pub struct MemberClient<T: Transport> {
    transport: T,
    stream: Arc<str>,
    target: u64,
    broker: String,
}

impl<T: Transport> RaftNetworkFactory<TypeConfig> for GroupNetwork<T> {
    type Network = MemberClient<T>;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> MemberClient<T> {
        MemberClient {
            transport: self.transport.clone(),
            stream: self.stream.clone(),
            target,
            broker: node.addr.clone(),
        }
    }
}

impl<T: Transport> MemberClient<T> {
    /// Sends one call and decodes its answer as openraft's `Result`.
    async fn call<R: DeserializeOwned, E>(
        &self,
        kind: CallKind,
        request: Result<Bytes, WireError>,
        option: &RPCOption,
    ) -> Result<R, RPCError<u64, BasicNode, RaftError<u64, E>>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        let request = request.map_err(|error| RPCError::Network(NetworkError::new(&error)))?;
        let request = addressed(self.target, request);
        let answer = self.transport.call(&self.broker, &self.stream, kind, request, option.hard_ttl()).await.map_err(
            |error| match error {
                CallError::Unreachable(_) => RPCError::Unreachable(Unreachable::new(&error)),
                CallError::Timeout { .. } => RPCError::Network(NetworkError::new(&error)),
            },
        )?;
        let answer: Result<R, RaftError<u64, E>> =
            from_json(&answer).map_err(|error| RPCError::Network(NetworkError::new(&error)))?;
        answer.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }
}

impl<T: Transport> RaftNetwork<TypeConfig> for MemberClient<T> {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call(CallKind::AppendEntries, encode_append(&request), &option).await
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        self.call(CallKind::InstallSnapshot, json(&request), &option).await
    }

    async fn vote(
        &mut self,
        request: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call(CallKind::Vote, json(&request), &option).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Append;
    use openraft::{CommittedLeaderId, EntryPayload};

    #[test]
    fn an_append_request_round_trips_and_a_cut_one_is_refused() {
        let log_id = |index| LogId::new(CommittedLeaderId::new(2, 7), index);
        let entries = (4..7)
            .map(|index| crate::entry_codec::Entry {
                log_id: log_id(index),
                payload: EntryPayload::Normal(crate::StreamEntry::Messages(vec![Append {
                    timestamp_ns: index,
                    key: index,
                    body: Bytes::from(vec![index as u8; 9]),
                }])),
            })
            .collect();
        let request = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(2, 7),
            prev_log_id: Some(log_id(3)),
            entries,
            leader_commit: Some(log_id(2)),
        };
        let wire = encode_append(&request).expect("encodes");
        let decoded = decode_append(wire.clone()).expect("decodes");
        assert_eq!(
            (decoded.vote, decoded.prev_log_id, decoded.leader_commit, &decoded.entries),
            (request.vote, request.prev_log_id, request.leader_commit, &request.entries)
        );
        assert!(decode_append(wire.slice(..wire.len() - 3)).is_err());
        assert!(decode_append(wire.slice(..2)).is_err());
    }
}
