//! Best-effort message forwarding (§10.7): numbering the messages this
//! broker sends into the network, choosing next hops in the origin's
//! shortest-path tree, dropping duplicates and looping messages, and counting
//! traffic per neighbour.
//!
//! Every `FORWARD` is best-effort for now: `NEEDS_LINK_ACK` is never set and
//! no frame is kept for retransmission (§10.8 comes with reliable delivery
//! across links). Queue groups are served by the broker a message is
//! published to only: group entries of other brokers attract no forwarding,
//! and a forwarded message is delivered to plain subscriptions only.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use sift_core::Message;
use sift_net::{within_hop_limit, BrokerName, DuplicateFilter, HOP_LIMIT_DEFAULT};
use sift_proto::link::{Forward, LinkFrame};
use tokio::sync::mpsc::error::TrySendError;

use crate::config::RoutingMode;
use crate::stats::{bump, Stats};

use super::frames::encode;
use super::network::NetState;

/// Bytes of a frame's length prefix, which `max_frame_bytes` does not count.
const LENGTH_PREFIX_BYTES: usize = 4;

/// Messages and bytes of `FORWARD` frames exchanged with one neighbour,
/// kept across reconnections to the same broker name.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LinkTraffic {
    /// `FORWARD`s queued towards the neighbour.
    pub messages_forwarded: u64,
    /// Their encoded size, length prefixes included.
    pub bytes_forwarded: u64,
    /// `FORWARD`s received from the neighbour, duplicates included.
    pub messages_received: u64,
    /// Their encoded size, length prefixes included.
    pub bytes_received: u64,
}

/// Forwarding state, behind the network's lock with the topology it reads.
#[derive(Debug)]
pub(crate) struct ForwardState {
    mode: RoutingMode,
    hop_limit: u8,
    /// Where numbering starts (§10.5: the start time), for origin and link sequences.
    start_sequence: u64,
    /// The number of the next message this broker sends into the network.
    next_origin_sequence: u64,
    /// The next link sequence per neighbour name (§10.8: per pair of names).
    next_link_sequences: BTreeMap<BrokerName, u64>,
    duplicates: DuplicateFilter,
    traffic: BTreeMap<BrokerName, LinkTraffic>,
    /// True when a published message may have somewhere to go; read without
    /// the lock on every local publish.
    active: Arc<AtomicBool>,
}

impl ForwardState {
    pub(crate) fn new(mode: RoutingMode, start_sequence: u64, active: Arc<AtomicBool>) -> ForwardState {
        ForwardState {
            mode,
            hop_limit: HOP_LIMIT_DEFAULT,
            start_sequence,
            next_origin_sequence: start_sequence,
            next_link_sequences: BTreeMap::new(),
            duplicates: DuplicateFilter::default(),
            traffic: BTreeMap::new(),
            active,
        }
    }

    /// The traffic exchanged with `neighbour` so far.
    pub(crate) fn traffic(&self, neighbour: &str) -> LinkTraffic {
        self.traffic.get(neighbour).copied().unwrap_or_default()
    }

    fn next_link_sequence(&mut self, neighbour: &BrokerName) -> u64 {
        let next = self.next_link_sequences.entry(neighbour.clone()).or_insert(self.start_sequence);
        let sequence = *next;
        *next += 1;
        sequence
    }
}

impl NetState {
    /// Recomputes the flag local publishes check first: some link is up and,
    /// in interest mode, some other broker has interest.
    pub(crate) fn refresh_forwarding(&self) {
        let wanted = self.forward.mode == RoutingMode::Flood || !self.interest.remote.is_empty();
        self.forward.active.store(!self.links.is_empty() && wanted, Ordering::Relaxed);
    }

    /// Sends a message a local client published into the network, numbered
    /// with this broker's next origin sequence.
    pub(crate) fn forward_local(&mut self, message: &Message, stats: &Stats) {
        let sequence = self.forward.next_origin_sequence;
        self.forward.next_origin_sequence += 1;
        let origin = self.own_name.clone();
        self.send_forward(&origin, sequence, message, stats);
    }

    /// Takes a `FORWARD` received from `from` (`frame_bytes` long): counts
    /// it, drops a duplicate, sends it on down the origin's tree unless its
    /// hop count reached the limit, and returns the message to deliver here.
    pub(crate) fn receive_forward(
        &mut self,
        forward: Forward,
        from: &str,
        frame_bytes: usize,
        stats: &Stats,
    ) -> Option<Message> {
        let traffic = self.forward.traffic.entry(BrokerName::from(from)).or_default();
        traffic.messages_received += 1;
        traffic.bytes_received += frame_bytes as u64;
        // A message of this broker's own coming back went round a loop of
        // inconsistent views: it is a duplicate too.
        let own = forward.origin == *self.own_name;
        if own || !self.forward.duplicates.accept(&forward.origin, forward.origin_sequence) {
            bump(&stats.forward_duplicates_dropped);
            return None;
        }
        bump(&stats.forwards_received);
        let message = *forward.message;
        if within_hop_limit(message.hop_count, self.forward.hop_limit) {
            self.send_forward(&forward.origin, forward.origin_sequence, &message, stats);
        } else {
            bump(&stats.forward_hop_limit_dropped);
        }
        Some(message)
    }

    /// Queues one `FORWARD` of `origin`'s message on each next hop: the
    /// children of this broker in `origin`'s tree with interest below them
    /// (every child in flood mode), the hop count one more than received.
    fn send_forward(&mut self, origin: &str, origin_sequence: u64, message: &Message, stats: &Stats) {
        let hops = self.next_hops(origin, message);
        if hops.is_empty() {
            return;
        }
        let mut onward = message.clone();
        onward.hop_count = message.hop_count.saturating_add(1);
        let mut onward = Box::new(onward);
        for hop in hops {
            if !self.links.contains_key(&hop) {
                // The tree still lists a link that just went down.
                continue;
            }
            let link_sequence = self.forward.next_link_sequence(&hop);
            let frame =
                Forward { origin: origin.to_string(), origin_sequence, link_sequence, flags: 0, message: onward };
            let frame = LinkFrame::Forward(frame);
            if let Some(bytes) = encode(&frame) {
                self.queue_forward(&hop, bytes, stats);
            }
            let LinkFrame::Forward(frame) = frame else { return };
            onward = frame.message;
        }
    }

    /// The next hops of `origin`'s message from this broker.
    fn next_hops(&self, origin: &str, message: &Message) -> Vec<BrokerName> {
        let tree = self.topology.tree(origin);
        match self.forward.mode {
            RoutingMode::Flood => tree.next_hops_flood(&self.own_name),
            RoutingMode::Interest => {
                let remote = &self.interest.remote;
                tree.next_hops(&self.own_name, |broker| remote.wants_outside_groups(broker, message))
            }
        }
    }

    /// Queues one encoded `FORWARD` on the link to `hop`. Best-effort: a
    /// full send queue drops the frame (counted) instead of closing the link.
    fn queue_forward(&mut self, hop: &BrokerName, bytes: Bytes, stats: &Stats) {
        if bytes.len() - LENGTH_PREFIX_BYTES > self.frame_bytes_max {
            bump(&stats.link_errors);
            tracing::warn!(neighbour = %hop, bytes = bytes.len(), "FORWARD over max_frame_bytes not sent");
            return;
        }
        let Some(live) = self.links.get(hop) else { return };
        let length = bytes.len() as u64;
        match live.sender.try_send(bytes) {
            Ok(()) => {
                bump(&stats.messages_forwarded);
                let traffic = self.forward.traffic.entry(hop.clone()).or_default();
                traffic.messages_forwarded += 1;
                traffic.bytes_forwarded += length;
            }
            Err(TrySendError::Full(_)) => bump(&stats.forward_queue_full_dropped),
            Err(TrySendError::Closed(_)) => {}
        }
    }
}
