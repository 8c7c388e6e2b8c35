//! Changing a replicated stream's brokers: `sift stream move NAME --from A
//! --to B`, and `sift stream members NAME --add B,C --remove A,D`.
//!
//! The broker that takes the request (a member of the group) does it in
//! three steps, each of which may be asked again after a failure:
//!
//! 1. each broker added is sent the stream's definition with the new
//!    members in a `RAFT` call of kind [`super::place::JOIN_KIND`]: it adds
//!    the stream and starts an empty replica marked as joining, which waits
//!    for the leader's log instead of forming a group;
//! 2. the group's leader is asked (here, or in a call of kind
//!    [`MEMBERS_KIND`] to wherever it is) to make the new brokers the
//!    voters: openraft adds each as a learner, sends it the log until it
//!    has caught up, and changes the voters through a joint configuration,
//!    so that a quorum of the old voters and of the new holds every entry
//!    committed meanwhile;
//! 3. each broker removed drops its replica and its files (a call of kind
//!    [`super::place::UNPLACE_KIND`]); one that cannot be reached is named
//!    in the reply, and keeps its files until `sift stream rm` there.
//!
//! The group keeps at least one voter and at most `REPLICAS_MAX`, as
//! `replicas` must be.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};
use sift_proto::ErrorCode;
use sift_raft::replica::AppendError;

use super::place::{JOIN_KIND, PLACE_WAIT, UNPLACE_KIND};
use super::{LinkTransport, Replication};
use crate::shared::BrokerShared;
use crate::store::registry::Refusal;
use crate::store::settings::REPLICAS_MAX;

/// The kind of a `RAFT` call that asks the leader to change the voters.
pub const MEMBERS_KIND: u8 = 18;
/// Longest a change of members may take, the new brokers' catching up on
/// the log included.
const MEMBERS_CHANGE_WAIT: Duration = Duration::from_secs(300);
/// The leader's answer when the change is committed.
const CHANGED: &[u8] = b"changed";
/// The answer of a broker that does not lead (any more).
const NOT_LEADER: &[u8] = b"not-leader";

/// A requested change: brokers to add and to remove, by name.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct MembersChange {
    /// The stream.
    pub name: String,
    /// Brokers to add.
    #[serde(default)]
    pub add: Vec<String>,
    /// Brokers to remove.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// Does `change` to its stream's group; the stream's info as this broker
/// sees it afterwards, with the removed brokers that kept their files.
pub(crate) async fn change_members(shared: &Arc<BrokerShared>, change: MembersChange) -> Result<Value, Refusal> {
    let stream = shared
        .storage
        .stream(&change.name)
        .ok_or_else(|| (ErrorCode::UnknownStream, format!("no stream {} on this broker", change.name)))?;
    let replication = stream.replication().cloned().ok_or_else(|| {
        (ErrorCode::InvalidField, format!("stream {} is not replicated: its brokers cannot change", change.name))
    })?;
    let replica = replication
        .replica()
        .ok_or_else(|| (ErrorCode::NoQuorum, format!("stream {}: this broker's replica is starting", change.name)))?;
    let current = replica.voters();
    let names = new_voters(shared, &current, &change)?;
    let mut definition = stream.definition.clone();
    definition.members = names.clone();
    definition.replicas = names.len() as u32;
    let body = Bytes::from(serde_json::to_vec(&definition).map_err(|error| (ErrorCode::Internal, error.to_string()))?);
    let transport = LinkTransport::new(shared.raft_calls.clone(), &shared.links);
    let mut voters: Vec<(u64, String)> =
        current.into_iter().filter(|(_, name)| !change.remove.contains(name)).collect();
    for added in &change.add {
        let placed = transport.call(added, &change.name, JOIN_KIND, body.clone(), PLACE_WAIT).await;
        match placed.as_deref().map(super::place::placed_node_id) {
            Ok(Some(id)) => voters.push((id, added.clone())),
            Ok(None) => {
                let message = format!("stream {}: broker {added} placed a replica that did not start", change.name);
                return Err((ErrorCode::StorageError, message));
            }
            Err(failure) => {
                let message = format!(
                    "stream {}: broker {added} did not take a replica ({failure}); nothing changed",
                    change.name
                );
                return Err((ErrorCode::StorageError, message));
            }
        }
    }
    at_leader(&replication, &transport, &voters).await?;
    let mut kept_files = Vec::new();
    for removed in &change.remove {
        let outcome = match removed == &**shared.links.name() {
            true => super::place::leave_group(shared, &change.name).await.map_err(|(_, why)| why),
            false => transport
                .call(removed, &change.name, UNPLACE_KIND, Bytes::new(), PLACE_WAIT)
                .await
                .map(|_| ())
                .map_err(|failure| failure.to_string()),
        };
        if let Err(why) = outcome {
            kept_files.push(json!({ "broker": removed, "why": why }));
        }
    }
    let info = shared.storage.stream(&change.name).map(|stream| stream.info_json());
    Ok(json!({ "name": change.name, "members": names, "stream": info, "removed_kept_files": kept_files }))
}

/// The voters after `change`, or why it cannot be made.
fn new_voters(
    shared: &BrokerShared,
    current: &[(u64, String)],
    change: &MembersChange,
) -> Result<Vec<String>, Refusal> {
    let current: Vec<String> = current.iter().map(|(_, name)| name.clone()).collect();
    let invalid = |message: String| Err((ErrorCode::InvalidField, message));
    if change.add.is_empty() && change.remove.is_empty() {
        return invalid(format!("stream {}: name brokers to add or to remove", change.name));
    }
    if let Some(member) = change.add.iter().find(|name| current.contains(name)) {
        return invalid(format!("stream {}: broker {member} is a member already ({current:?})", change.name));
    }
    if let Some(stranger) = change.remove.iter().find(|name| !current.contains(name)) {
        return invalid(format!("stream {}: broker {stranger} is not a member ({current:?})", change.name));
    }
    let reachable = shared.links.reachable_brokers();
    if let Some(unknown) = change.add.iter().find(|name| !reachable.contains(name)) {
        return invalid(format!("stream {}: broker {unknown} is not reachable from this broker", change.name));
    }
    let mut voters: Vec<String> = current.iter().filter(|name| !change.remove.contains(name)).cloned().collect();
    for added in &change.add {
        if !voters.contains(added) {
            voters.push(added.clone());
        }
    }
    if voters.is_empty() || voters.len() > REPLICAS_MAX as usize {
        return invalid(format!(
            "stream {}: the change leaves {} members {voters:?}; a group has 1 to {REPLICAS_MAX}",
            change.name,
            voters.len()
        ));
    }
    Ok(voters)
}

/// Has the group's leader make `voters` the voters, wherever it is,
/// through leader changes, within [`MEMBERS_CHANGE_WAIT`].
async fn at_leader(
    replication: &Replication,
    transport: &LinkTransport,
    voters: &[(u64, String)],
) -> Result<(), Refusal> {
    let replica = replication.replica().ok_or_else(|| {
        (ErrorCode::NoQuorum, format!("stream {}: this broker's replica is starting", replication.stream))
    })?;
    let body = Bytes::from(serde_json::to_vec(voters).map_err(|error| (ErrorCode::Internal, error.to_string()))?);
    let deadline = Instant::now() + MEMBERS_CHANGE_WAIT;
    let mut problem = String::from("no leader is known");
    while Instant::now() < deadline {
        let leader = replica.leader();
        let changed = match leader {
            Some(leader) if leader == replica.id() => match replica.change_voters(voters).await {
                Ok(()) => return Ok(()),
                Err(AppendError::NotLeader { .. }) => false,
                Err(AppendError::Failed(why)) => return Err((ErrorCode::StorageError, why)),
            },
            Some(leader) => {
                let name = replica.status().members.get(&leader).cloned().unwrap_or_default();
                let remaining = deadline.saturating_duration_since(Instant::now());
                match transport.call(&name, &replication.stream, MEMBERS_KIND, body.clone(), remaining).await {
                    Ok(answer) => &answer[..] == CHANGED,
                    Err(failure) => {
                        problem = failure.to_string();
                        false
                    }
                }
            }
            None => false,
        };
        if changed {
            return Ok(());
        }
        tokio::time::sleep(replication.settings.retry_wait(leader.is_some())).await;
    }
    let message =
        format!("stream {}: its members did not change within {MEMBERS_CHANGE_WAIT:?} ({problem})", replication.stream);
    Err((ErrorCode::NoQuorum, message))
}

/// Serves a call of kind [`MEMBERS_KIND`]: the voters changed here when
/// this broker leads, else [`NOT_LEADER`].
pub(crate) async fn serve_members(replication: &Replication, body: &[u8]) -> Result<Bytes, String> {
    let voters: Vec<(u64, String)> =
        serde_json::from_slice(body).map_err(|error| format!("a members change that does not parse: {error}"))?;
    let replica = replication.replica().ok_or_else(|| format!("the replica of {} is starting", replication.stream))?;
    match replica.change_voters(&voters).await {
        Ok(()) => Ok(Bytes::from_static(CHANGED)),
        Err(AppendError::NotLeader { .. }) => Ok(Bytes::from_static(NOT_LEADER)),
        Err(AppendError::Failed(why)) => Err(why),
    }
}
