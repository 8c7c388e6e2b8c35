//! Taking `RAFT` frames off the broker links: one for another broker is
//! passed on, a reply is handed to the call waiting for it, and a call is
//! served on a task of its own (at most `storage.raft_calls_max` at once:
//! past it the call is answered `FAILED`, and its caller tries again as it
//! would after a lost frame): openraft's calls on the stream's replica, a
//! forwarded publish by [`super::forward::serve_publish`].

use std::sync::Arc;

use bytes::Bytes;
use sift_proto::link::{raft_flags, RaftFrame};
use sift_raft::network::CallKind;

use super::calls::PUBLISH_KIND;
use super::identity::INTRODUCE_KIND;
use super::members::MEMBERS_KIND;
use super::place::{Placement, JOIN_KIND, PLACE_KIND, UNPLACE_KIND};
use super::rejoin::REJOIN_KIND;
use crate::shared::BrokerShared;
use crate::stats::bump;

/// The answer a call gets: the body, or why it could not be served.
type Answer = Result<Bytes, String>;

/// Takes a `RAFT` frame a link received.
pub(crate) fn receive(shared: &Arc<BrokerShared>, frame: RaftFrame) {
    if frame.to != **shared.links.name() {
        bump(&shared.stats.raft_frames_passed_on);
        let _ = shared.links.route_raft(frame, &shared.stats);
        return;
    }
    if frame.flags & raft_flags::REPLY != 0 {
        shared.raft_calls.answer(frame);
        return;
    }
    if !shared.raft_calls.begin_serving() {
        let why = format!("broker {} serves storage.raft_calls_max calls already", shared.links.name());
        return send_reply(shared, &frame, Err(why));
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        let answer = serve(&shared, &frame).await;
        shared.raft_calls.end_serving();
        bump(&shared.stats.raft_calls_served);
        send_reply(&shared, &frame, answer);
    });
}

/// Serves one call: openraft's, on the stream's replica, or a forwarded
/// publish.
async fn serve(shared: &Arc<BrokerShared>, frame: &RaftFrame) -> Answer {
    let own = shared.links.name();
    match frame.kind {
        PLACE_KIND => return super::place::serve_place(shared, &frame.body, Placement::Forming).await,
        JOIN_KIND => return super::place::serve_place(shared, &frame.body, Placement::Joining).await,
        UNPLACE_KIND => return super::place::serve_unplace(shared, &frame.stream).await,
        INTRODUCE_KIND => return serve_introduce(shared, &frame.from, &frame.body),
        _ => {}
    }
    let stream =
        shared.storage.stream(&frame.stream).ok_or_else(|| format!("broker {own} has no stream {}", frame.stream))?;
    let replication =
        stream.replication().ok_or_else(|| format!("stream {} is not replicated on broker {own}", frame.stream))?;
    if frame.kind == PUBLISH_KIND {
        return super::forward::serve_publish(replication, frame.body.clone()).await;
    }
    if frame.kind == MEMBERS_KIND {
        return super::members::serve_members(replication, &frame.body).await;
    }
    if frame.kind == REJOIN_KIND {
        return super::rejoin::serve_rejoin(replication, &frame.from, frame.body.clone()).await;
    }
    let kind = CallKind::from_code(frame.kind).ok_or_else(|| format!("unknown RAFT call kind {}", frame.kind))?;
    let replica =
        replication.replica().ok_or_else(|| format!("the replica of {} on {own} is starting", frame.stream))?;
    replica.serve(kind, frame.body.clone()).await.map_err(|error| error.to_string())
}

/// Serves an introduction: what the data id in `body` is to this broker.
fn serve_introduce(shared: &BrokerShared, from: &str, body: &[u8]) -> Answer {
    let data_id: [u8; 8] =
        body.try_into().map_err(|_| format!("an introduction of {} bytes (a data id is 8)", body.len()))?;
    let introduction =
        shared.data_ids.introduce(from, u64::from_be_bytes(data_id)).map_err(|error| error.to_string())?;
    Ok(Bytes::from_static(introduction.as_bytes()))
}

/// Sends the answer to `call` back to its caller.
fn send_reply(shared: &BrokerShared, call: &RaftFrame, answer: Answer) {
    let (flags, body) = match answer {
        Ok(body) => (raft_flags::REPLY, body),
        Err(why) => (raft_flags::REPLY | raft_flags::FAILED, Bytes::from(why)),
    };
    let reply = RaftFrame {
        to: call.from.clone(),
        from: shared.links.name().to_string(),
        call_id: call.call_id,
        stream: call.stream.clone(),
        kind: call.kind,
        flags,
        body,
    };
    let _ = shared.links.route_raft(reply, &shared.stats);
}
