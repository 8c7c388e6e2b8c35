//! `MANAGE`: streams and durable subscriptions, added, listed, described
//! and removed (`docs/PROTOCOL.md` §6.17). Requests and replies are JSON.

use serde_json::{json, Value};
use sift_proto::{ErrorCode, Frame, ManageOp};

use crate::session::Session;
use crate::shared::BrokerShared;
use crate::store::consumer::Consumer;
use crate::store::registry::Refusal;
use crate::store::settings::StreamDefinition;

/// Bytes of an `ADMIN_REPLY` besides its JSON: type, request id, length.
const REPLY_OVERHEAD_BYTES: usize = 1 + 8 + 4;

impl Session {
    /// Answers a `MANAGE` with an `ADMIN_REPLY`, or an `ERROR` naming what
    /// was refused.
    pub(crate) fn manage(&mut self, request_id: u64, op: ManageOp, body: &str) {
        if !self.may_manage(request_id, op, body) {
            return;
        }
        if let Some(change) = replicated_change(&self.shared, op, body) {
            // Placing a replicated stream, or stopping its replica, waits
            // for other brokers and for the replica: the reply comes later.
            let (shared, conn) = (self.shared.clone(), self.conn.clone());
            tokio::spawn(async move {
                let outcome = match change {
                    ReplicatedChange::Add(definition) => {
                        crate::replication::place::add_replicated(&shared, definition).await
                    }
                    ReplicatedChange::Remove(name) => crate::replication::place::remove_here(&shared, &name).await,
                    ReplicatedChange::Members(change) => {
                        crate::replication::members::change_members(&shared, change).await
                    }
                };
                send_reply(&shared, &conn, request_id, op, outcome);
            });
            return;
        }
        let may_read = |stream: &str| self.may_read_quietly(stream);
        let outcome = reply(&self.shared, op, body, &may_read);
        send_reply(&self.shared, &self.conn, request_id, op, outcome);
    }
}

/// A change to a replicated stream, answered once it is done.
enum ReplicatedChange {
    Add(StreamDefinition),
    Remove(String),
    Members(crate::replication::members::MembersChange),
}

/// The change `op` makes to a replicated stream, if it makes one.
fn replicated_change(shared: &BrokerShared, op: ManageOp, body: &str) -> Option<ReplicatedChange> {
    let request: Value = serde_json::from_str(body).ok()?;
    match op {
        ManageOp::StreamAdd => {
            let definition: StreamDefinition = serde_json::from_value(request).ok()?;
            definition.is_replicated().then_some(ReplicatedChange::Add(definition))
        }
        ManageOp::StreamRm => {
            let name = request.get("name")?.as_str()?;
            shared.storage.stream(name)?.replication()?;
            Some(ReplicatedChange::Remove(name.to_string()))
        }
        // A request that does not parse is refused by `reply`.
        ManageOp::StreamMembers => serde_json::from_value(request).ok().map(ReplicatedChange::Members),
        _ => None,
    }
}

/// Sends the reply to a `MANAGE`: its JSON, or the refusal.
fn send_reply(
    shared: &BrokerShared,
    conn: &crate::conn::ConnShared,
    request_id: u64,
    op: ManageOp,
    outcome: Result<Value, Refusal>,
) {
    let refuse = |code, message| crate::conn::send_refusal(&shared.stats, conn, code, request_id, message);
    match outcome {
        Ok(document) => {
            let json = document.to_string();
            let limit = shared.config.limits.max_frame_bytes as usize;
            if json.len() + REPLY_OVERHEAD_BYTES > limit {
                let message =
                    format!("the {} reply is {} bytes, more than max_frame_bytes = {limit}", op.name(), json.len());
                return refuse(ErrorCode::Internal, message);
            }
            conn.send_control(&Frame::AdminReply { request_id, json });
        }
        Err((code, message)) => refuse(code, message),
    }
}

/// The JSON reply to one `MANAGE` request; the lists hold only what
/// `may_read` allows.
fn reply(shared: &BrokerShared, op: ManageOp, body: &str, may_read: &dyn Fn(&str) -> bool) -> Result<Value, Refusal> {
    let request: Value = match body.trim() {
        "" => json!({}),
        text => serde_json::from_str(text)
            .map_err(|error| (ErrorCode::InvalidField, format!("{} request is not JSON: {error}", op.name())))?,
    };
    let storage = &shared.storage;
    match op {
        ManageOp::StreamAdd => {
            let definition: StreamDefinition = serde_json::from_value(request)
                .map_err(|error| (ErrorCode::InvalidField, format!("stream_add: {error}")))?;
            let stream = storage.add_stream(definition)?;
            shared.links.stream_interest(&stream, true, &shared.stats);
            Ok(stream.info_json())
        }
        ManageOp::StreamRm => {
            let name = name_of(op, &request)?;
            let stream = storage.remove_stream(name)?;
            shared.links.stream_interest(&stream, false, &shared.stats);
            Ok(json!({ "removed": name }))
        }
        ManageOp::StreamLs => {
            let streams: Vec<Value> = storage
                .streams()
                .iter()
                .filter(|stream| may_read(stream.name()))
                .map(|stream| stream.info_json())
                .collect();
            Ok(json!({ "streams": streams }))
        }
        ManageOp::StreamInfo => {
            let name = name_of(op, &request)?;
            let stream = storage.stream(name).ok_or_else(|| (ErrorCode::UnknownStream, format!("no stream {name}")))?;
            Ok(stream.info_json())
        }
        ManageOp::DurableLs => {
            let durables: Vec<Value> = storage
                .durables()
                .iter()
                .filter(|consumer| may_read(consumer.stream.name()))
                .map(|consumer| durable_json(consumer))
                .collect();
            Ok(json!({ "durables": durables }))
        }
        ManageOp::DurableInfo => {
            let name = name_of(op, &request)?;
            let consumer = storage
                .durable(name)
                .ok_or_else(|| (ErrorCode::UnknownDurable, format!("no durable subscription {name}")))?;
            Ok(durable_json(&consumer))
        }
        ManageOp::DurableRm => {
            let name = name_of(op, &request)?;
            let consumer = storage.remove_durable(name)?;
            shared.links.durable_interest(&consumer, false, &shared.stats);
            Ok(json!({ "removed": name }))
        }
        ManageOp::QueueDeclare => {
            let name = name_of(op, &request)?;
            let declared = storage.declare_queue(name, &shared.config.storage.queue_stream)?;
            if declared.stream_created {
                shared.links.stream_interest(&declared.stream, true, &shared.stats);
            }
            if let Some(topic) = declared.topic_added {
                shared.links.stream_topic_interest(topic, true, &shared.stats);
            }
            if declared.durable_created {
                shared.links.durable_interest(&declared.consumer, true, &shared.stats);
            }
            Ok(durable_json(&declared.consumer))
        }
        ManageOp::StreamMembers => {
            let why = "stream_members needs {\"name\": string, \"add\": [broker names], \"remove\": [broker names]}";
            Err((ErrorCode::InvalidField, why.to_string()))
        }
    }
}

/// The `name` field every single-object request carries.
fn name_of(op: ManageOp, request: &Value) -> Result<&str, Refusal> {
    request
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| (ErrorCode::InvalidField, format!("{} needs a \"name\" string", op.name())))
}

/// A durable subscription as the `durable_info` JSON of §6.17.
pub fn durable_json(consumer: &Consumer) -> Value {
    let position = consumer.cursor.position();
    let done_above: u64 = position.done_above.iter().map(|(first, last)| last - first + 1).sum();
    let last_seq = consumer.stream.readable_seq();
    let pending = last_seq.saturating_sub(position.ack_floor).saturating_sub(done_above);
    let (definition, stored_floor) = match &consumer.durable {
        Some(record) => (Some(&record.definition), record.stored_floor()),
        None => (None, 0),
    };
    json!({
        "name": definition.map(|definition| definition.name.clone()),
        "stream": consumer.stream.name(),
        "topic_filter": consumer.topic_filter.as_str(),
        "filter_kind": definition.map(|definition| definition.filter_kind.clone()),
        "filter": definition.map(|definition| definition.filter.clone()),
        "shared": definition.is_some_and(|definition| definition.shared),
        "ack_floor": position.ack_floor,
        "stored_ack_floor": stored_floor,
        "acked_above": done_above,
        "pending": pending,
        "in_flight": consumer.cursor.in_flight(),
        "consumers": consumer.member_count(),
    })
}
