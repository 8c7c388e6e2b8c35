//! Forwarding to a replicated stream's leader: a batch of messages from a
//! member that does not lead ([`super::submit`]), or a change to the
//! stream's state ([`Replication::append_state_anywhere`]), sent in one
//! `RAFT` call of kind [`PUBLISH_KIND`].
//!
//! The leader puts a forwarded batch in its own queue, in order, so that
//! it is batched with the messages published there; a broker that no
//! longer leads answers with the leader it knows and stores nothing, and
//! the member tries there. Nothing is forwarded twice over: a forwarded
//! call is never passed on.
//!
//! The call's body: the wait the caller allows (`u32` ms), then `1`, the
//! message count (`u32`) and each message's time (`u64` ns), key (`u64`),
//! length (`u32`) and bytes; or `3` and a state change's bytes. The
//! answer: `0`, the count (`u32`) and each sequence (`u64`); `1` and the
//! leader's node id (`u64`, 0 for none known); `2`, an error code (`u16`)
//! and why (UTF-8).

use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use sift_proto::ErrorCode;
use sift_raft::replica::AppendError;
use sift_raft::Append;
use tokio::sync::oneshot;

use super::calls::PUBLISH_KIND;
use super::submit::Done;
use super::{Replication, Started};
use crate::stats::bump;

/// What a publish that was not stored gets: the code and why.
pub type AppendRefusal = (ErrorCode, String);

/// Most messages a forwarded batch may hold: a bound on what a peer makes
/// this broker allocate.
const FORWARDED_MESSAGES_MAX: u32 = 1 << 16;

/// What is forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Forwardable {
    Messages(Vec<Append>),
    State(Bytes),
}

/// How a forwarded call fared.
pub(crate) enum Forwarded {
    /// The leader stored it: each message's sequence (or the state's).
    Stored(Vec<u64>),
    /// Try again, once the group has (perhaps another) leader.
    Retry(String),
    /// The group failed it for good.
    Failed(String),
}

/// The answer to a forwarded call.
#[derive(Debug, PartialEq, Eq)]
enum PublishAnswer {
    Stored(Vec<u64>),
    NotLeader(u64),
    Refused(ErrorCode, String),
}

impl Replication {
    /// Stores a change to the stream's state on the group, here or at the
    /// leader, through leader changes; its sequence once a quorum has it.
    pub async fn append_state_anywhere(&self, state: Bytes) -> Result<u64, AppendRefusal> {
        let started = self.started_or_refusal()?;
        let deadline = Instant::now() + self.settings.append_wait;
        let mut problem = "no leader is known".to_string();
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(self.no_quorum(started, &problem));
            }
            let Ok(outcome) = tokio::time::timeout(remaining, started.replica.append_state(state.clone())).await else {
                return Err(self.no_quorum(started, "no quorum of its replicas stored it in time"));
            };
            let leader = match outcome {
                Ok(seq) => return Ok(seq),
                Err(AppendError::Failed(why)) => return Err((ErrorCode::StorageError, self.failure(&why))),
                Err(AppendError::NotLeader { leader }) => leader,
            };
            if let Some(leader) = leader {
                match self.call_leader(started, leader, Forwardable::State(state.clone()), remaining).await {
                    Forwarded::Stored(seqs) => return Ok(seqs.first().copied().unwrap_or_default()),
                    Forwarded::Failed(why) => return Err((ErrorCode::StorageError, self.failure(&why))),
                    Forwarded::Retry(why) => problem = why,
                }
            }
            let wait = remaining.min(self.settings.retry_wait(leader.is_some()));
            self.await_leader_other_than(started, leader, wait).await;
        }
    }

    /// Sends a batch of messages to the broker that leads, as node `leader`.
    pub(crate) async fn forward(
        &self,
        started: &Started,
        leader: u64,
        appends: Vec<Append>,
        wait: Duration,
    ) -> Forwarded {
        bump(&started.transport.stats().replicated_forwarded);
        self.call_leader(started, leader, Forwardable::Messages(appends), wait).await
    }

    async fn call_leader(&self, started: &Started, leader: u64, what: Forwardable, wait: Duration) -> Forwarded {
        let Some(leader_name) = started.replica.status().members.get(&leader).cloned() else {
            return Forwarded::Retry(format!("leader {leader} is not among the members"));
        };
        let body = encode_publish(&what, wait);
        let answer = started.transport.call(&leader_name, &self.stream, PUBLISH_KIND, body, wait).await;
        match answer.map(decode_answer) {
            Ok(Ok(PublishAnswer::Stored(seqs))) => Forwarded::Stored(seqs),
            Ok(Ok(PublishAnswer::NotLeader(_))) => Forwarded::Retry(format!("broker {leader_name} no longer leads")),
            Ok(Ok(PublishAnswer::Refused(ErrorCode::NoQuorum, why))) => Forwarded::Retry(why),
            Ok(Ok(PublishAnswer::Refused(_, why))) => Forwarded::Failed(why),
            Ok(Err(why)) => Forwarded::Failed(why),
            Err(failure) => Forwarded::Retry(failure.to_string()),
        }
    }

    pub(crate) fn no_quorum(&self, started: &Started, problem: &str) -> AppendRefusal {
        bump(&started.transport.stats().replicated_no_quorum);
        let text = format!(
            "persistent message not confirmed: stream {} has no quorum of its replicas {:?} within storage.replicated_append_ms_max = {} ms ({problem}); retry",
            self.stream,
            self.voters(),
            self.settings.append_wait.as_millis()
        );
        (ErrorCode::NoQuorum, text)
    }

    pub(crate) fn failure(&self, why: &str) -> String {
        format!("persistent message not stored in replicated stream {}: {why}", self.stream)
    }

    /// Waits, at most `wait`, until the group knows a leader other than
    /// `leader`.
    pub(crate) async fn await_leader_other_than(&self, started: &Started, leader: Option<u64>, wait: Duration) {
        let condition = |metrics: &sift_raft::openraft::RaftMetrics<u64, sift_raft::openraft::BasicNode>| {
            metrics.current_leader.is_some() && metrics.current_leader != leader
        };
        let _ = started.replica.raft().wait(Some(wait)).metrics(condition, "another leader").await;
    }
}

/// Serves a call forwarded here: stored when this replica leads.
pub(crate) async fn serve_publish(replication: &Replication, body: Bytes) -> Result<Bytes, String> {
    let started = replication.started_or_refusal().map_err(|(_, why)| why)?;
    let (wait, what) = decode_publish(body)?;
    let leader = started.replica.leader();
    if leader != Some(started.replica.id()) {
        return Ok(encode_answer(&PublishAnswer::NotLeader(leader.unwrap_or(0))));
    }
    let answer = match what {
        Forwardable::State(state) => match tokio::time::timeout(wait, started.replica.append_state(state)).await {
            Err(_) => PublishAnswer::Refused(ErrorCode::NoQuorum, "no quorum stored it in time".into()),
            Ok(Ok(seq)) => PublishAnswer::Stored(vec![seq]),
            Ok(Err(AppendError::NotLeader { leader })) => PublishAnswer::NotLeader(leader.unwrap_or(0)),
            Ok(Err(AppendError::Failed(why))) => PublishAnswer::Refused(ErrorCode::StorageError, why),
        },
        Forwardable::Messages(appends) => store_forwarded(replication, appends).await,
    };
    Ok(encode_answer(&answer))
}

/// Queues forwarded messages here, in their order, and waits for each one's
/// sequence.
async fn store_forwarded(replication: &Replication, appends: Vec<Append>) -> PublishAnswer {
    let mut answers = Vec::with_capacity(appends.len());
    for append in appends {
        let (sender, answer) = oneshot::channel();
        replication.submit(append, Done::Answer(sender));
        answers.push(answer);
    }
    let mut seqs = Vec::with_capacity(answers.len());
    for answer in answers {
        match answer.await {
            Ok(Ok(seq)) => seqs.push(seq),
            Ok(Err((code, why))) => return PublishAnswer::Refused(code, why),
            Err(_) => return PublishAnswer::Refused(ErrorCode::StorageError, "the replica stopped".into()),
        }
    }
    PublishAnswer::Stored(seqs)
}

fn encode_publish(what: &Forwardable, wait: Duration) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u32(u32::try_from(wait.as_millis()).unwrap_or(u32::MAX));
    match what {
        Forwardable::Messages(appends) => {
            out.put_u8(1);
            out.put_u32(appends.len() as u32);
            for append in appends {
                out.put_u64(append.timestamp_ns);
                out.put_u64(append.key);
                out.put_u32(append.body.len() as u32);
                out.extend_from_slice(&append.body);
            }
        }
        Forwardable::State(state) => {
            out.put_u8(3);
            out.extend_from_slice(state);
        }
    }
    out.freeze()
}

fn decode_publish(mut body: Bytes) -> Result<(Duration, Forwardable), String> {
    let short = |length: usize| format!("a forwarded publish ends early ({length} bytes left)");
    if body.len() < 5 {
        return Err(short(body.len()));
    }
    let wait = Duration::from_millis(u64::from(body.get_u32()));
    match body.get_u8() {
        1 => {
            if body.len() < 4 {
                return Err(short(body.len()));
            }
            let count = body.get_u32();
            if count == 0 || count > FORWARDED_MESSAGES_MAX {
                return Err(format!("a forwarded batch of {count} messages"));
            }
            let mut appends = Vec::with_capacity((count as usize).min(body.len() / 20));
            for _ in 0..count {
                if body.len() < 20 {
                    return Err(short(body.len()));
                }
                let (timestamp_ns, key, length) = (body.get_u64(), body.get_u64(), body.get_u32() as usize);
                if body.len() < length {
                    return Err(short(body.len()));
                }
                appends.push(Append { timestamp_ns, key, body: body.split_to(length) });
            }
            Ok((wait, Forwardable::Messages(appends)))
        }
        3 => Ok((wait, Forwardable::State(body))),
        other => Err(format!("a forwarded publish of unknown kind {other}")),
    }
}

fn encode_answer(answer: &PublishAnswer) -> Bytes {
    let mut out = BytesMut::new();
    match answer {
        PublishAnswer::Stored(seqs) => {
            out.put_u8(0);
            out.put_u32(seqs.len() as u32);
            for seq in seqs {
                out.put_u64(*seq);
            }
        }
        PublishAnswer::NotLeader(leader) => {
            out.put_u8(1);
            out.put_u64(*leader);
        }
        PublishAnswer::Refused(code, why) => {
            out.put_u8(2);
            out.put_u16(code.code());
            out.extend_from_slice(why.as_bytes());
        }
    }
    out.freeze()
}

fn decode_answer(mut body: Bytes) -> Result<PublishAnswer, String> {
    let malformed = |length: usize| format!("a forwarded publish's answer of {length} bytes does not parse");
    let length = body.len();
    match body.first() {
        Some(0) if length >= 5 => {
            body.advance(1);
            let count = body.get_u32() as usize;
            if body.len() != count * 8 {
                return Err(malformed(length));
            }
            Ok(PublishAnswer::Stored((0..count).map(|_| body.get_u64()).collect()))
        }
        Some(1) if length == 9 => {
            body.advance(1);
            Ok(PublishAnswer::NotLeader(body.get_u64()))
        }
        Some(2) if length >= 3 => {
            body.advance(1);
            let code = ErrorCode::from_code(body.get_u16());
            Ok(PublishAnswer::Refused(code, String::from_utf8_lossy(&body).into_owned()))
        }
        _ => Err(malformed(length)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_publish_and_its_answers_round_trip() {
        let message = |key: u64| Append { timestamp_ns: 5, key, body: Bytes::from(vec![key as u8; key as usize]) };
        let batch = Forwardable::Messages(vec![message(1), message(2), message(0)]);
        for what in [batch, Forwardable::State(Bytes::from_static(b"{}"))] {
            let (wait, decoded) = decode_publish(encode_publish(&what, Duration::from_millis(250))).expect("decodes");
            assert_eq!((wait, decoded), (Duration::from_millis(250), what));
        }
        assert!(decode_publish(Bytes::from_static(b"shor")).is_err());
        assert!(decode_publish(Bytes::from_static(b"\0\0\0\x01\x01\0\0\0\x02short")).is_err());
        assert!(decode_publish(Bytes::from_static(b"\0\0\0\x01\x01\0\0\0\0")).is_err(), "an empty batch");
        assert!(decode_publish(Bytes::from_static(b"\0\0\0\x01\x09")).is_err());
        let answers = [
            PublishAnswer::Stored(vec![7, 8]),
            PublishAnswer::NotLeader(3),
            PublishAnswer::Refused(ErrorCode::NoQuorum, "no quorum".into()),
        ];
        for answer in answers {
            assert_eq!(decode_answer(encode_answer(&answer)).expect("decodes"), answer);
        }
        assert!(decode_answer(Bytes::from_static(&[0, 0, 0, 0, 2, 1])).is_err());
        assert!(decode_answer(Bytes::new()).is_err());
    }
}
