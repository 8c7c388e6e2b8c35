//! Durable subscriptions of a replicated stream, replicated with it: a
//! durable made at one member, the positions its consumer stores and its
//! removal are state changes in the stream's own Raft log, which every
//! member applies in log order. So a durable subscriber that loses its
//! broker resumes on another member where the group last heard it stand.
//!
//! - A durable made here proposes [`StateChange::Durable`] (its definition
//!   and start); members that lack it make it, without a consumer.
//! - Each position its consumer stores proposes [`StateChange::Position`].
//!   One proposal per durable is under way at a time and the next carries
//!   the latest position (older ones are dropped), so a busy durable costs
//!   the group about one entry per round trip, not one per acknowledgement.
//! - A member applies a position to a durable whose cursor has nothing in
//!   flight (it advances the cursor, never moves it back, and stores it);
//!   a cursor with deliveries in flight is where the positions come from.
//! - A subscriber that attaches here is given nothing until this member
//!   has applied everything the group had committed when it came
//!   ([`Replication::catch_up`]): a member that was down, or behind, would
//!   otherwise give again everything acknowledged elsewhere meanwhile,
//!   and then pass over the positions that said so.
//!
//! What a failover can cost: acknowledgements of the last round trip, not
//! yet in the group's log, are delivered again on the new member (at least
//! once, as for an unacknowledged message); nothing acknowledged earlier
//! is, and nothing is missed.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::Replication;
use crate::store::cursor::StoredPosition;
use crate::store::durable::DurableDefinition;

/// A change to a replicated stream's state, as its log holds it (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StateChange {
    /// A durable subscription was made, starting past `ack_floor`.
    Durable {
        /// What it reads.
        definition: DurableDefinition,
        /// Every sequence at or below this was done when it was made.
        ack_floor: u64,
    },
    /// A durable's consumer stored this position.
    Position {
        /// The durable.
        name: String,
        /// Every sequence at or below this is done.
        ack_floor: u64,
        /// Done ranges above the floor, inclusive.
        done_above: Vec<(u64, u64)>,
    },
    /// A durable subscription was removed.
    DurableRemoved {
        /// The durable.
        name: String,
    },
    /// Changes nothing: a member that stored it and has applied it has
    /// applied everything committed before it ([`Replication::catch_up`]).
    Barrier,
}

impl StateChange {
    /// The change a log entry holds; `None` (logged) for one that does not
    /// parse, which a later version may have written.
    pub fn decode(bytes: &[u8]) -> Option<StateChange> {
        match serde_json::from_slice(bytes) {
            Ok(change) => Some(change),
            Err(error) => {
                tracing::warn!(%error, "a replicated stream's state change that does not parse is passed over");
                None
            }
        }
    }

    fn encode(&self) -> Option<Bytes> {
        serde_json::to_vec(self).ok().map(Bytes::from)
    }

    /// The position a `Position` change carries.
    pub fn position(ack_floor: u64, done_above: &[(u64, u64)]) -> StoredPosition {
        StoredPosition { ack_floor, done_above: done_above.to_vec() }
    }
}

/// One durable's position proposals: the latest not yet sent, and whether
/// one is under way.
#[derive(Debug, Default)]
pub(crate) struct PositionSlot {
    latest: Option<StoredPosition>,
    sending: bool,
}

/// Position proposals by durable name.
pub(crate) type PositionSlots = std::sync::Mutex<HashMap<String, PositionSlot>>;

impl Replication {
    /// Proposes `change` to the group, in the background (dropped, counted,
    /// past `storage.raft_calls_max` background appends).
    pub fn propose(self: &Arc<Self>, change: &StateChange) {
        let Some(state) = change.encode() else { return };
        if !self.begin_background() {
            return;
        }
        let replication = self.clone();
        tokio::spawn(async move {
            if let Err((_, why)) = replication.append_state_anywhere(state).await {
                tracing::debug!(stream = %replication.stream, %why, "a state change was not stored");
            }
            replication.end_background();
        });
    }

    /// Waits until this member has applied everything the group had
    /// committed when it was called: stores a [`StateChange::Barrier`] and
    /// waits to apply it. Within `storage.replicated_append_ms_max`, else
    /// `no_quorum`.
    pub async fn catch_up(&self) -> Result<u64, super::forward::AppendRefusal> {
        let Some(barrier) = StateChange::Barrier.encode() else { return Ok(0) };
        let deadline = tokio::time::Instant::now() + self.settings.append_wait;
        let seq = self.append_state_anywhere(barrier).await?;
        loop {
            let applied = self.appended.notified();
            tokio::pin!(applied);
            applied.as_mut().enable();
            if self.committed_seq() >= seq {
                return Ok(seq);
            }
            if tokio::time::timeout_at(deadline, applied).await.is_err() {
                let started = self.started_or_refusal()?;
                return Err(self.no_quorum(started, "this replica did not apply the group's log in time"));
            }
        }
    }

    /// Proposes the position the consumer of durable `name` stored; while
    /// one proposal of it is under way, the latest waits to follow it.
    pub fn propose_position(self: &Arc<Self>, name: &str, position: &StoredPosition) {
        {
            let mut slots = self.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let slot = slots.entry(name.to_string()).or_default();
            slot.latest = Some(position.clone());
            if slot.sending {
                return;
            }
            slot.sending = true;
        }
        let replication = self.clone();
        let name = name.to_string();
        tokio::spawn(async move { replication.send_positions(&name).await });
    }

    /// Sends the latest position of `name` until none is left to send.
    async fn send_positions(&self, name: &str) {
        loop {
            let position = {
                let mut slots = self.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let Some(slot) = slots.get_mut(name) else { return };
                match slot.latest.take() {
                    Some(position) => position,
                    None => {
                        slots.remove(name);
                        return;
                    }
                }
            };
            let change = StateChange::Position {
                name: name.to_string(),
                ack_floor: position.ack_floor,
                done_above: position.done_above,
            };
            let Some(state) = change.encode() else { continue };
            if let Err((_, why)) = self.append_state_anywhere(state).await {
                tracing::debug!(stream = %self.stream, durable = %name, %why, "a position was not stored by the group");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_changes_round_trip_and_garbage_is_passed_over() {
        let definition = DurableDefinition {
            name: "d".into(),
            stream: "orders".into(),
            topic_filter: "orders.>".into(),
            filter_kind: "none".into(),
            filter: String::new(),
            shared: false,
        };
        let changes = [
            StateChange::Durable { definition, ack_floor: 4 },
            StateChange::Position { name: "d".into(), ack_floor: 9, done_above: vec![(11, 12)] },
            StateChange::DurableRemoved { name: "d".into() },
            StateChange::Barrier,
        ];
        for change in changes {
            let bytes = change.encode().expect("encodes");
            assert_eq!(StateChange::decode(&bytes), Some(change));
        }
        assert_eq!(StateChange::decode(br#"{"op":"unknown"}"#), None);
    }
}
