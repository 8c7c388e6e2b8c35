//! Calls between brokers for replicated streams, over the broker links.
//!
//! A call is a `RAFT` frame naming the broker it goes to, a number of the
//! caller's, the stream and what is called; the answer is a `RAFT` frame
//! back with the `REPLY` flag and the same number (`FAILED` when the
//! callee could not serve it, its body saying why). Frames travel hop by
//! hop ([`crate::link`]'s `route_raft`), so a group's replicas need not be
//! neighbours, and cutting the links between two brokers cuts their calls.
//!
//! [`RaftCalls`] numbers the calls this broker makes and holds the
//! callers' waits, at most `storage.raft_calls_max`; [`LinkTransport`] is
//! what openraft and the publish forwarding call through. The other side,
//! taking `RAFT` frames off the links, is [`super::serve`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use sift_proto::link::{raft_flags, RaftFrame};
use sift_raft::network::{CallError, CallKind, Transport};
use tokio::sync::oneshot;

use crate::link::network::LinkNetwork;
use crate::stats::{bump, Stats};

/// The kind of a `RAFT` call that forwards a publish to the leader
/// (openraft's own calls are 1 to 3).
pub const PUBLISH_KIND: u8 = 16;

/// Why a call got no answer to use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// No path to the broker is known now, or its link queue is full.
    #[error("no way to broker {0} now")]
    Unreachable(String),
    /// No answer came in time.
    #[error("no answer from broker {to} within {timeout:?}")]
    Timeout {
        /// The broker called.
        to: String,
        /// How long the call waited.
        timeout: Duration,
    },
    /// `storage.raft_calls_max` calls await their answers already.
    #[error("storage.raft_calls_max = {0} calls await their answers")]
    Full(usize),
    /// The broker answered that it could not serve the call.
    #[error("broker {to} could not serve the call: {why}")]
    Refused {
        /// The broker called.
        to: String,
        /// What it said.
        why: String,
    },
}

/// What a waiting call is handed: the body, or why there is none (the
/// callee refused, or the link to it went down).
type Answer = Result<Bytes, CallFailure>;

/// The calls this broker waits on, and the calls it serves.
#[derive(Debug)]
pub struct RaftCalls {
    own_name: String,
    next_call_id: AtomicU64,
    /// Each waiting call's callee and where its answer goes.
    waiting: Mutex<HashMap<u64, (String, oneshot::Sender<Answer>)>>,
    serving: AtomicUsize,
    calls_max: usize,
    stats: Arc<Stats>,
}

/// Takes a call's wait out of the registry when the call ends, answered or
/// not (a timed-out call's late answer then finds nothing, and is dropped).
struct WaitGuard<'calls> {
    calls: &'calls RaftCalls,
    call_id: u64,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.calls.waiting().remove(&self.call_id);
    }
}

impl RaftCalls {
    /// The registry of the broker named `own_name`.
    pub fn new(own_name: &str, calls_max: usize, stats: Arc<Stats>) -> RaftCalls {
        RaftCalls {
            own_name: own_name.to_string(),
            next_call_id: AtomicU64::new(1),
            waiting: Mutex::default(),
            serving: AtomicUsize::new(0),
            calls_max,
            stats,
        }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (String, oneshot::Sender<Answer>)>> {
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Calls `kind` of the group of `stream` at the broker `to` with
    /// `body`; its answer, within `timeout`.
    pub async fn call(
        &self,
        links: &LinkNetwork,
        to: &str,
        stream: &str,
        kind: u8,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, CallFailure> {
        let call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed);
        let (sender, answer) = oneshot::channel();
        {
            let mut waiting = self.waiting();
            if waiting.len() >= self.calls_max {
                bump(&self.stats.raft_calls_full);
                return Err(CallFailure::Full(self.calls_max));
            }
            waiting.insert(call_id, (to.to_string(), sender));
        }
        let _guard = WaitGuard { calls: self, call_id };
        let frame = RaftFrame {
            to: to.to_string(),
            from: self.own_name.clone(),
            call_id,
            stream: stream.to_string(),
            kind,
            flags: 0,
            body,
        };
        bump(&self.stats.raft_calls_sent);
        if links.route_raft(frame, &self.stats).is_err() {
            bump(&self.stats.raft_calls_failed);
            return Err(CallFailure::Unreachable(to.to_string()));
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(Ok(body))) => Ok(body),
            Ok(Ok(Err(failure))) => {
                if matches!(failure, CallFailure::Unreachable(_)) {
                    bump(&self.stats.raft_calls_failed);
                }
                Err(failure)
            }
            Ok(Err(_)) | Err(_) => {
                bump(&self.stats.raft_calls_failed);
                Err(CallFailure::Timeout { to: to.to_string(), timeout })
            }
        }
    }

    /// Ends the calls waiting on the neighbour `peer`, whose link went
    /// down: the call or its answer went with it. (A call to a broker
    /// further away, routed through `peer`, waits out its time.)
    pub(crate) fn fail_calls_to(&self, peer: &str) {
        let mut waiting = self.waiting();
        let lost: Vec<u64> = waiting.iter().filter(|(_, (to, _))| to == peer).map(|(call_id, _)| *call_id).collect();
        for call_id in lost {
            if let Some((to, waiter)) = waiting.remove(&call_id) {
                let _ = waiter.send(Err(CallFailure::Unreachable(to)));
            }
        }
    }

    /// Hands a reply to the call waiting for it (none when it timed out).
    pub(crate) fn answer(&self, frame: RaftFrame) {
        let Some((to, waiter)) = self.waiting().remove(&frame.call_id) else { return };
        let answer = match frame.flags & raft_flags::FAILED {
            0 => Ok(frame.body),
            _ => Err(CallFailure::Refused { to, why: String::from_utf8_lossy(&frame.body).into_owned() }),
        };
        let _ = waiter.send(answer);
    }

    /// Counts a call served from now on; false past the bound.
    pub(crate) fn begin_serving(&self) -> bool {
        let serving = self.serving.fetch_add(1, Ordering::AcqRel);
        if serving >= self.calls_max {
            self.serving.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    pub(crate) fn end_serving(&self) {
        self.serving.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The broker links as openraft's transport between a group's replicas,
/// and as the way publishes are forwarded to a leader.
#[derive(Debug, Clone)]
pub struct LinkTransport {
    calls: Arc<RaftCalls>,
    /// Held weakly: the groups it serves belong to the broker.
    links: Weak<LinkNetwork>,
}

impl LinkTransport {
    /// A transport making `calls` over `links`.
    pub fn new(calls: Arc<RaftCalls>, links: &Arc<LinkNetwork>) -> LinkTransport {
        LinkTransport { calls, links: Arc::downgrade(links) }
    }

    /// Calls `kind` of the group of `stream` at the broker `to`.
    pub async fn call(
        &self,
        to: &str,
        stream: &str,
        kind: u8,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, CallFailure> {
        let Some(links) = self.links.upgrade() else { return Err(CallFailure::Unreachable(to.to_string())) };
        self.calls.call(&links, to, stream, kind, body, timeout).await
    }

    /// True when a path to the broker `name` is known now.
    pub fn reaches(&self, name: &str) -> bool {
        self.links.upgrade().is_some_and(|links| links.reachable_brokers().iter().any(|reached| reached == name))
    }

    /// The broker's counters.
    pub fn stats(&self) -> &Stats {
        &self.calls.stats
    }
}

impl Transport for LinkTransport {
    async fn call(
        &self,
        to: &str,
        stream: &str,
        kind: CallKind,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, CallError> {
        match LinkTransport::call(self, to, stream, kind.code(), request, timeout).await {
            Ok(answer) => Ok(answer),
            Err(CallFailure::Timeout { to, timeout }) => Err(CallError::Timeout { to, timeout }),
            // A broker that has no replica (yet), or is too busy, is as
            // good as unreachable: openraft backs off and tries again.
            Err(failure) => Err(CallError::Unreachable(failure.to_string())),
        }
    }
}
