//! Queue groups spanning brokers (§10.7): one member in the whole network
//! gets each message, and a member on the broker the message was published
//! at is preferred.
//!
//! The origin decides. Every broker advertises its members' interest with
//! the group's name, so the origin knows which brokers hold a member that
//! wants a message. A group with a willing local member is served locally
//! and not forwarded for. Otherwise the origin picks the nearest broker (by
//! path cost) with a willing member, taking turns among equally near ones,
//! and names it in the `FORWARD`'s group assignments; the message then goes
//! towards that broker as towards any interested one, and that broker alone
//! delivers it to one of its members. Deciding at the origin means that no
//! two brokers can both serve the group, whatever their views.

use sift_core::Message;
use sift_net::BrokerName;
use sift_proto::link::GroupAssignment;

use super::network::NetState;

impl NetState {
    /// The queue groups of `message` that no local member serves (those in
    /// `local_groups` are), each with the broker chosen to serve it.
    pub(crate) fn assign_groups(&mut self, message: &Message, local_groups: &[&str]) -> Vec<GroupAssignment> {
        let candidates = self.interest.remote.group_candidates(message);
        if candidates.is_empty() {
            return Vec::new();
        }
        let tree = self.topology.tree(&self.own_name);
        let mut assignments = Vec::new();
        let mut remaining = candidates.as_slice();
        while let Some((group, _)) = remaining.first() {
            let count = remaining.iter().take_while(|(other, _)| other == group).count();
            let (same_group, rest) = remaining.split_at(count);
            remaining = rest;
            if local_groups.contains(&group.as_str()) {
                continue;
            }
            // Nearest first; the candidates are sorted by name, so ties keep
            // a fixed order to take turns in.
            let reachable: Vec<(u64, &BrokerName)> = same_group
                .iter()
                .filter_map(|(_, broker)| tree.distance(broker).map(|distance| (distance, broker)))
                .collect();
            let Some(nearest) = reachable.iter().map(|(distance, _)| *distance).min() else { continue };
            let closest: Vec<&BrokerName> =
                reachable.iter().filter(|(distance, _)| *distance == nearest).map(|(_, broker)| *broker).collect();
            self.forward.group_turn = self.forward.group_turn.wrapping_add(1);
            let chosen = closest[self.forward.group_turn % closest.len()];
            assignments.push(GroupAssignment { group: group.clone(), broker: chosen.to_string() });
        }
        assignments
    }
}
