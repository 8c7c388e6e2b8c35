//! Placing a replicated stream on brokers of the network (`sift stream add
//! NAME --topic T --replicas 3`), and removing this broker's replica.
//!
//! The broker that takes the request chooses the members when the request
//! names none: itself first, then the brokers it reaches in the fewest
//! hops (by name among equals). It sends each other member a `RAFT` call
//! of kind [`PLACE_KIND`] carrying the definition (with the members); each
//! adds the stream, stores its definition and starts its replica, and the
//! group forms as it would from the configuration. Placing is idempotent:
//! a member that has the stream with the same definition answers yes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use sift_proto::ErrorCode;

use super::LinkTransport;
use crate::shared::BrokerShared;
use crate::store::registry::Refusal;
use crate::store::settings::StreamDefinition;
use crate::store::stream::Stream;

/// The kind of a `RAFT` call that places a replicated stream on a broker.
pub const PLACE_KIND: u8 = 17;
/// The kind of a `RAFT` call that places a replica joining a group that
/// exists ([`super::members`]).
pub const JOIN_KIND: u8 = 19;
/// The kind of a `RAFT` call that removes a broker's replica once the group
/// no longer counts it ([`super::members`]).
pub const UNPLACE_KIND: u8 = 20;
/// How long a member has to answer a placement.
pub(crate) const PLACE_WAIT: Duration = Duration::from_secs(10);

/// How a replica placed here comes into its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// With the group: the members form it together.
    Forming,
    /// Into a group that exists: it waits for the leader's log.
    Joining,
}

/// Adds the replicated stream `definition` to its members (chosen here
/// when it names none); the stream's info as this broker sees it, or the
/// placement when this broker is not a member.
pub(crate) async fn add_replicated(
    shared: &Arc<BrokerShared>,
    mut definition: StreamDefinition,
) -> Result<Value, Refusal> {
    let own = shared.links.name().to_string();
    if definition.members.is_empty() {
        definition.members = choose_members(shared, &own, definition.replicas as usize)?;
    }
    definition.parse(shared.storage.config()).map_err(|error| (ErrorCode::InvalidField, error))?;
    let body = Bytes::from(serde_json::to_vec(&definition).map_err(|error| (ErrorCode::Internal, error.to_string()))?);
    let transport = LinkTransport::new(shared.raft_calls.clone(), &shared.links);
    let mut failures = Vec::new();
    let mut local = None;
    for member in &definition.members {
        if *member == own {
            match add_here(shared, definition.clone(), Placement::Forming).await {
                Ok(stream) => local = Some(stream),
                Err((_, why)) => failures.push(format!("{member}: {why}")),
            }
            continue;
        }
        if let Err(failure) = transport.call(member, &definition.name, PLACE_KIND, body.clone(), PLACE_WAIT).await {
            failures.push(format!("{member}: {failure}"));
        }
    }
    if !failures.is_empty() {
        let message = format!(
            "stream {} was not placed on every member of {:?} ({}); `sift stream add` again once they are reachable",
            definition.name,
            definition.members,
            failures.join("; ")
        );
        return Err((ErrorCode::StorageError, message));
    }
    Ok(match local {
        Some(stream) => stream.info_json(),
        None => json!({ "name": definition.name, "replicas": definition.replicas, "members": definition.members }),
    })
}

/// This broker and the reachable brokers nearest to it, `count` in all.
fn choose_members(shared: &BrokerShared, own: &str, count: usize) -> Result<Vec<String>, Refusal> {
    let mut others: Vec<(u32, String)> = shared
        .links
        .reachable_brokers()
        .into_iter()
        .filter(|name| name != own)
        .map(|name| (shared.links.shortest_path_hops(&name).unwrap_or(u32::MAX), name))
        .collect();
    others.sort();
    if others.len() + 1 < count {
        let message = format!(
            "replicas = {count} needs {count} brokers; this broker reaches {} ({:?})",
            others.len() + 1,
            others.iter().map(|(_, name)| name).collect::<Vec<_>>()
        );
        return Err((ErrorCode::InvalidField, message));
    }
    Ok(std::iter::once(own.to_string()).chain(others.into_iter().map(|(_, name)| name).take(count - 1)).collect())
}

/// Adds the replicated stream here and starts its replica; the stream
/// this broker has already when its definition is the same (or, for a
/// joining replica, when it is replicated).
pub(crate) async fn add_here(
    shared: &Arc<BrokerShared>,
    definition: StreamDefinition,
    placement: Placement,
) -> Result<Arc<Stream>, Refusal> {
    let stream = match shared.storage.stream(&definition.name) {
        Some(existing) if existing.definition == definition => existing,
        Some(existing) if placement == Placement::Joining && existing.replication().is_some() => existing,
        Some(_) => {
            let message = format!("stream {} exists here with another definition", definition.name);
            return Err((ErrorCode::StreamExists, message));
        }
        None => shared.storage.add_stream(definition)?,
    };
    let Some(replication) = stream.replication() else {
        return Err((ErrorCode::InvalidField, format!("stream {} is not replicated", stream.name())));
    };
    if placement == Placement::Joining && replication.replica().is_none() {
        replication.mark_joining().map_err(|why| (ErrorCode::StorageError, why))?;
    }
    let context = start_context(shared, super::rejoin::Arrival::Placed);
    replication.start(shared.links.name(), context).await.map_err(|why| (ErrorCode::StorageError, why))?;
    Ok(stream)
}

/// What a replica of this broker starts with: calls over the broker
/// links, applied state changes to the storage, the broker's data ids.
pub(crate) fn start_context(shared: &BrokerShared, arrival: super::rejoin::Arrival) -> super::StartContext {
    super::StartContext {
        transport: LinkTransport::new(shared.raft_calls.clone(), &shared.links),
        sink: super::storage_sink(&shared.storage),
        data_ids: shared.data_ids.clone(),
        arrival,
    }
}

/// Serves a placement call (of kind [`PLACE_KIND`] or [`JOIN_KIND`]): the
/// definition's stream added here; the answer is `placed` and the node id
/// of its replica (decimal).
pub(crate) async fn serve_place(
    shared: &Arc<BrokerShared>,
    body: &[u8],
    placement: Placement,
) -> Result<Bytes, String> {
    let definition: StreamDefinition =
        serde_json::from_slice(body).map_err(|error| format!("a placement that does not parse: {error}"))?;
    let stream = add_here(shared, definition, placement).await.map_err(|(_, why)| why)?;
    let id = stream.replication().and_then(|replication| replication.replica()).map(|replica| replica.id());
    Ok(Bytes::from(format!("placed {}", id.unwrap_or(0))))
}

/// The node id in a placement's answer.
pub(crate) fn placed_node_id(answer: &[u8]) -> Option<u64> {
    std::str::from_utf8(answer).ok()?.strip_prefix("placed ")?.parse().ok().filter(|id| *id != 0)
}

/// Serves a call of kind [`UNPLACE_KIND`]: this broker's replica of
/// `stream` removed, files and all (done already when it has none).
pub(crate) async fn serve_unplace(shared: &Arc<BrokerShared>, stream: &str) -> Result<Bytes, String> {
    leave_group(shared, stream).await.map(|_| Bytes::from_static(b"removed")).map_err(|(_, why)| why)
}

/// Takes this broker out of the group of `stream` for good, once the group
/// no longer counts it: its copies of the group's durable subscriptions go
/// (the other members keep them; refused while a consumer reads one here),
/// then its replica and files. Done already when it has no such stream.
pub(crate) async fn leave_group(shared: &Arc<BrokerShared>, stream: &str) -> Result<(), Refusal> {
    if shared.storage.stream(stream).is_none() {
        return Ok(());
    }
    for consumer in shared.storage.durables() {
        let Some(record) = consumer.durable.as_ref().filter(|_| consumer.stream.name() == stream) else { continue };
        let removed = shared.storage.remove_durable_here(&record.definition.name)?;
        shared.links.durable_interest(&removed, false, &shared.stats);
    }
    remove_here(shared, stream).await.map(|_| ())
}

/// Stops this broker's replica of `name` and removes its files (the other
/// members keep theirs).
pub(crate) async fn remove_here(shared: &Arc<BrokerShared>, name: &str) -> Result<Value, Refusal> {
    // Checked before the replica stops: a stopped replica would never
    // apply the removal of the durables that hold the stream here.
    shared.storage.may_remove_stream(name)?;
    if let Some(replication) = shared.storage.stream(name).as_ref().and_then(|stream| stream.replication().cloned()) {
        replication.stop().await;
    }
    let stream = shared.storage.remove_stream(name)?;
    shared.links.stream_interest(&stream, false, &shared.stats);
    Ok(json!({ "removed": name }))
}
