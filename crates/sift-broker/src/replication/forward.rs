//! Storing a message on a replicated stream's group from any of its
//! brokers: on the replica here when it leads, else forwarded to the
//! leader (a `RAFT` call of kind [`PUBLISH_KIND`]), following the group
//! through elections until a quorum has it or
//! `storage.replicated_append_ms_max` has passed (then `no_quorum`).
//!
//! A forwarded publish is stored by the leader it reaches, never passed
//! on: a broker that no longer leads answers with the leader it knows, and
//! the publishing broker tries there. A publish tried again after a lost
//! answer or a failover carries the same key, and the group stores it once
//! (`sift_raft::state_machine::AppliedState::seq_of_key`).
//!
//! The call's body: the wait the caller allows (`u32` ms), then `1`, the
//! message's time (`u64` ns), its key (`u64`) and the stored message; or
//! `3` and a change to the stream's state (a durable's position). The
//! answer:
//! `0` and the sequence (`u64`); `1` and the leader's node id (`u64`, 0 for
//! none known); `2` and why it failed (UTF-8).

use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use sift_proto::ErrorCode;
use sift_raft::replica::AppendError;
use sift_raft::{Append, StreamEntry};

use super::calls::PUBLISH_KIND;
use super::{Replication, Started};
use crate::stats::bump;

/// What a publish that was not stored gets: the code and why.
pub type AppendRefusal = (ErrorCode, String);

/// How a forwarded publish fared.
enum Forwarded {
    /// The leader stored it at this sequence.
    Stored(u64),
    /// Try again, once the group has (perhaps another) leader.
    Retry(String),
    /// The group failed it for good.
    Failed(String),
}

impl Replication {
    /// Stores `entry` on the group; its sequence once a quorum has it.
    pub async fn append_anywhere(&self, entry: StreamEntry) -> Result<u64, AppendRefusal> {
        let started = self.started_or_refusal()?;
        let deadline = Instant::now() + self.settings.append_wait;
        let mut problem = "no leader is known".to_string();
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(self.no_quorum(started, &problem));
            }
            let Ok(outcome) = tokio::time::timeout(remaining, append_here(started, entry.clone())).await else {
                return Err(self.no_quorum(started, "no quorum of its replicas stored it in time"));
            };
            let leader = match outcome {
                Ok(seq) => return Ok(self.stored(started, seq)),
                Err(AppendError::Failed(why)) => return Err((ErrorCode::StorageError, self.failure(&why))),
                Err(AppendError::NotLeader { leader }) => leader,
            };
            if let Some(leader) = leader {
                match self.forward(started, leader, &entry, remaining).await {
                    Forwarded::Stored(seq) => return Ok(self.stored(started, seq)),
                    Forwarded::Failed(why) => return Err((ErrorCode::StorageError, self.failure(&why))),
                    Forwarded::Retry(why) => problem = why,
                }
            }
            let wait = remaining.min(self.settings.election_wait);
            self.await_leader_other_than(started, leader, wait).await;
        }
    }

    fn stored(&self, started: &Started, seq: u64) -> u64 {
        bump(&started.transport.stats().replicated_appends);
        seq
    }

    fn no_quorum(&self, started: &Started, problem: &str) -> AppendRefusal {
        bump(&started.transport.stats().replicated_no_quorum);
        let text = format!(
            "persistent message not confirmed: stream {} has no quorum of its replicas {:?} within storage.replicated_append_ms_max = {} ms ({problem}); retry",
            self.stream,
            self.members,
            self.settings.append_wait.as_millis()
        );
        (ErrorCode::NoQuorum, text)
    }

    fn failure(&self, why: &str) -> String {
        format!("persistent message not stored in replicated stream {}: {why}", self.stream)
    }

    /// Sends `append` to the broker that leads, as node `leader`.
    async fn forward(&self, started: &Started, leader: u64, entry: &StreamEntry, wait: Duration) -> Forwarded {
        let Some(leader_name) = started.replica.status().members.get(&leader).cloned() else {
            return Forwarded::Retry(format!("leader {leader} is not among the members"));
        };
        bump(&started.transport.stats().replicated_forwarded);
        let body = encode_publish(entry, wait);
        let answer = started.transport.call(&leader_name, &self.stream, PUBLISH_KIND, body, wait).await;
        match answer.map(decode_answer) {
            Ok(Ok(PublishAnswer::Stored(seq))) => Forwarded::Stored(seq),
            Ok(Ok(PublishAnswer::NotLeader(_))) => Forwarded::Retry(format!("broker {leader_name} no longer leads")),
            Ok(Ok(PublishAnswer::Failed(why))) => Forwarded::Failed(why),
            Ok(Err(why)) => Forwarded::Failed(why),
            Err(failure) => Forwarded::Retry(failure.to_string()),
        }
    }

    /// Waits, at most `wait`, until the group knows a leader other than
    /// `leader`.
    async fn await_leader_other_than(&self, started: &Started, leader: Option<u64>, wait: Duration) {
        let condition = |metrics: &sift_raft::openraft::RaftMetrics<u64, sift_raft::openraft::BasicNode>| {
            metrics.current_leader.is_some() && metrics.current_leader != leader
        };
        let _ = started.replica.raft().wait(Some(wait)).metrics(condition, "another leader").await;
    }
}

/// Serves a publish forwarded here: stored when this replica leads.
pub(crate) async fn serve_publish(replication: &Replication, body: Bytes) -> Result<Bytes, String> {
    let started = replication.started_or_refusal().map_err(|(_, why)| why)?;
    let (wait, entry) = decode_publish(body)?;
    let answer = match tokio::time::timeout(wait, append_here(started, entry)).await {
        Err(_) => PublishAnswer::Failed("no quorum stored it in time".into()),
        Ok(Ok(seq)) => PublishAnswer::Stored(seq),
        Ok(Err(AppendError::NotLeader { leader })) => PublishAnswer::NotLeader(leader.unwrap_or(0)),
        Ok(Err(AppendError::Failed(why))) => PublishAnswer::Failed(why),
    };
    Ok(encode_answer(&answer))
}

/// Appends `entry` on the replica here: a message through the keys it
/// remembers, a state change as it is.
async fn append_here(started: &Started, entry: StreamEntry) -> Result<u64, AppendError> {
    match entry {
        StreamEntry::Message(append) => started.replica.append(append).await,
        StreamEntry::State(state) => started.replica.append_state(state).await,
    }
}

/// Bytes before a forwarded message: the wait, the kind, the time, the key.
const PUBLISH_HEADER_BYTES: usize = 4 + 1 + 8 + 8;

fn encode_publish(entry: &StreamEntry, wait: Duration) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u32(u32::try_from(wait.as_millis()).unwrap_or(u32::MAX));
    match entry {
        StreamEntry::Message(append) => {
            out.put_u8(1);
            out.put_u64(append.timestamp_ns);
            out.put_u64(append.key);
            out.extend_from_slice(&append.body);
        }
        StreamEntry::State(state) => {
            out.put_u8(3);
            out.extend_from_slice(state);
        }
    }
    out.freeze()
}

fn decode_publish(mut body: Bytes) -> Result<(Duration, StreamEntry), String> {
    let short = |length: usize| format!("a forwarded publish of {length} bytes is shorter than its header");
    if body.len() < 5 {
        return Err(short(body.len()));
    }
    let wait = Duration::from_millis(u64::from(body.get_u32()));
    match body.get_u8() {
        1 if body.len() >= PUBLISH_HEADER_BYTES - 5 => {
            let timestamp_ns = body.get_u64();
            let key = body.get_u64();
            Ok((wait, StreamEntry::Message(Append { timestamp_ns, key, body })))
        }
        1 => Err(short(body.len() + 5)),
        3 => Ok((wait, StreamEntry::State(body))),
        other => Err(format!("a forwarded publish of unknown kind {other}")),
    }
}

/// The answer to a forwarded publish.
#[derive(Debug, PartialEq, Eq)]
enum PublishAnswer {
    Stored(u64),
    NotLeader(u64),
    Failed(String),
}

fn encode_answer(answer: &PublishAnswer) -> Bytes {
    let mut out = BytesMut::new();
    match answer {
        PublishAnswer::Stored(seq) => {
            out.put_u8(0);
            out.put_u64(*seq);
        }
        PublishAnswer::NotLeader(leader) => {
            out.put_u8(1);
            out.put_u64(*leader);
        }
        PublishAnswer::Failed(why) => {
            out.put_u8(2);
            out.extend_from_slice(why.as_bytes());
        }
    }
    out.freeze()
}

fn decode_answer(mut body: Bytes) -> Result<PublishAnswer, String> {
    let malformed = || format!("a forwarded publish's answer of {} bytes does not parse", body.len());
    match body.first() {
        Some(0 | 1) if body.len() == 9 => {
            let tag = body.get_u8();
            let number = body.get_u64();
            Ok(if tag == 0 { PublishAnswer::Stored(number) } else { PublishAnswer::NotLeader(number) })
        }
        Some(2) => Ok(PublishAnswer::Failed(String::from_utf8_lossy(&body[1..]).into_owned())),
        _ => Err(malformed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_publish_and_its_answers_round_trip() {
        let message = Append { timestamp_ns: 5, key: 9, body: Bytes::from_static(b"stored message") };
        for entry in [StreamEntry::Message(message), StreamEntry::State(Bytes::from_static(b"{}"))] {
            let (wait, decoded) = decode_publish(encode_publish(&entry, Duration::from_millis(250))).expect("decodes");
            assert_eq!((wait, decoded), (Duration::from_millis(250), entry));
        }
        assert!(decode_publish(Bytes::from_static(b"shor")).is_err());
        assert!(decode_publish(Bytes::from_static(b"\0\0\0\x01\x01short")).is_err());
        assert!(decode_publish(Bytes::from_static(b"\0\0\0\x01\x09")).is_err());
        for answer in [PublishAnswer::Stored(7), PublishAnswer::NotLeader(3), PublishAnswer::Failed("disk".into())] {
            assert_eq!(decode_answer(encode_answer(&answer)).expect("decodes"), answer);
        }
        assert!(decode_answer(Bytes::from_static(&[0, 1])).is_err());
        assert!(decode_answer(Bytes::new()).is_err());
    }
}
