//! Link-state records (§10.5): originating this broker's own, applying
//! received ones to the [`sift_net::Topology`], and flooding both.

use bytes::Bytes;
use sift_net::{BrokerName, LinkState};
use sift_proto::link::{LinkFrame, LinkState as LinkStateFrame, LinkStateEntry};
use tokio::sync::mpsc::error::TrySendError;

use crate::stats::{bump, Stats};

use super::frames::encode;
use super::network::{CloseReason, NetState};

/// The wire form of a record held in the topology.
fn to_frame(state: &LinkState) -> LinkFrame {
    LinkFrame::State(LinkStateFrame {
        origin: state.origin.to_string(),
        sequence: state.sequence,
        links: state
            .links
            .iter()
            .map(|(neighbour, cost)| LinkStateEntry { neighbour: neighbour.to_string(), cost: *cost })
            .collect(),
    })
}

/// The routing core's form of a received record.
fn from_frame(frame: &LinkStateFrame) -> LinkState {
    LinkState {
        origin: BrokerName::from(frame.origin.as_str()),
        sequence: frame.sequence,
        links: frame.links.iter().map(|entry| (BrokerName::from(entry.neighbour.as_str()), entry.cost)).collect(),
    }
}

impl NetState {
    /// Makes this broker's new record (its up links, next sequence), applies
    /// it to the topology and returns it encoded.
    pub(crate) fn originate(&mut self) -> Option<Bytes> {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let links = self.links.iter().map(|(name, live)| (name.clone(), live.cost)).collect();
        let state = LinkState { origin: self.own_name.clone(), sequence, links };
        let frame = to_frame(&state);
        if let Err(error) = self.topology.apply(state) {
            // Names were checked when the links came up; a failure is a bug.
            tracing::error!(%error, "cannot apply this broker's own link state");
        }
        encode(&frame)
    }

    /// Originates this broker's new record and queues it on every link.
    pub(crate) fn announce(&mut self, stats: &Stats) {
        if let Some(bytes) = self.originate() {
            self.flood(&bytes, None, stats);
        }
    }

    /// Queues every record held, except this broker's own (already sent by
    /// [`NetState::announce`], first), on the link to `peer`.
    pub(crate) fn send_all_records(&self, peer: &BrokerName, stats: &Stats) {
        let records: Vec<Bytes> = self
            .topology
            .states()
            .into_iter()
            .filter(|state| state.origin != self.own_name)
            .filter_map(|state| encode(&to_frame(state)))
            .collect();
        for bytes in records {
            self.queue(peer, bytes, stats);
        }
    }

    /// Applies a record received from `from`; a newer one is flooded on every
    /// other link. Records about this broker itself are dropped (§10.5).
    pub(crate) fn apply_received(&mut self, frame: LinkStateFrame, from: &str, stats: &Stats) {
        if frame.origin == *self.own_name {
            return;
        }
        match self.topology.apply(from_frame(&frame)) {
            Ok(applied) if applied.changed() => {
                if let Some(bytes) = encode(&LinkFrame::State(frame)) {
                    self.flood(&bytes, Some(from), stats);
                }
                self.forget_unreachable_interest(stats);
                self.reroute_stranded(stats);
            }
            Ok(_) => {}
            Err(error) => {
                bump(&stats.link_errors);
                tracing::warn!(neighbour = from, %error, "invalid LINK_STATE ignored");
            }
        }
    }

    /// Forgets the records of brokers that no path reaches any more (§10.5).
    ///
    /// Done when one of this broker's own links goes down, not when a record
    /// arrives: during a link-up the records of far brokers may arrive before
    /// those that connect them, and forgetting them then would lose them.
    pub(crate) fn forget_unreachable(&mut self) {
        let tree = self.topology.tree(&self.own_name);
        let gone: Vec<BrokerName> = self
            .topology
            .states()
            .into_iter()
            .map(|state| state.origin.clone())
            .filter(|origin| !tree.contains(origin))
            .collect();
        for origin in gone {
            tracing::debug!(broker = %origin, "broker unreachable: its link state is forgotten");
            self.topology.forget(&origin);
        }
    }

    /// Queues `bytes` on every link but `except`.
    fn flood(&self, bytes: &Bytes, except: Option<&str>, stats: &Stats) {
        for name in self.links.keys() {
            if except != Some(&**name) {
                self.queue(name, bytes.clone(), stats);
            }
        }
    }

    /// Queues `bytes` on the link to `peer`. A full queue means the peer does
    /// not keep up: the link is closed rather than losing a record silently
    /// (the reconnection sends every record again).
    pub(crate) fn queue(&self, peer: &str, bytes: Bytes, stats: &Stats) {
        let Some(live) = self.links.get(peer) else {
            return;
        };
        if let Err(TrySendError::Full(_)) = live.sender.try_send(bytes) {
            if CloseReason::send(live, CloseReason::Overflow) {
                bump(&stats.link_errors);
                tracing::warn!(neighbour = peer, "link send queue full (link_send_queue_frames): closing the link");
            }
        }
    }
}
