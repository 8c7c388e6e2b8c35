//! Message forwarding (§10.7): numbering the messages this broker sends into
//! the network, choosing next hops in the origin's shortest-path tree (or
//! towards explicit targets for a re-routed message), dropping duplicates
//! and looping messages, and counting traffic per neighbour.
//!
//! Reliable messages travel in `FORWARD`s with `NEEDS_LINK_ACK`; keeping
//! them until acknowledged and re-routing them when a link goes down is
//! [`super::retransmit`]'s part. Queue groups spanning brokers are assigned
//! by the origin ([`super::groups`]); delivery reports travel back by
//! [`super::report_route`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sift_core::{MatchCache, Message};
use sift_net::{within_hop_limit, BrokerName, DuplicateFilter, SpTree, TopicInterest, HOP_LIMIT_DEFAULT};
use sift_proto::link::{encode_forward_ref, forward_flags, Forward, ForwardHeader, GroupAssignment};
use sift_proto::MessageRef;
use tokio::sync::mpsc::error::TrySendError;

use crate::config::{Config, RoutingMode};
use crate::report::DeliveryReport;
use crate::stats::{add, bump, Stats};

use super::hop_cache::HopCache;
use super::network::{CloseReason, NetState};
use super::report_route::ReportRegistry;
use super::retransmit::Retransmission;

/// Bytes of a frame's length prefix, which `max_frame_bytes` does not count.
const LENGTH_PREFIX_BYTES: usize = 4;

/// Room reserved per `FORWARD` beyond its topic, metadata and payload: the
/// header, names, assignments and properties of a typical message. A frame
/// that needs more grows the arena chunk, which stays correct.
const FORWARD_OVERHEAD_BYTES: usize = 512;

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

/// A message on its way through the network, as this broker holds it: what
/// sending it on, keeping it and re-routing it need.
#[derive(Debug)]
pub(crate) struct Travelling {
    /// The broker it was published at.
    pub(crate) origin: BrokerName,
    /// The origin's number for it.
    pub(crate) origin_sequence: u64,
    /// `NEEDS_LINK_ACK` and `AWAITS_REPORT`, as the origin set them.
    pub(crate) flags: u8,
    /// Queue groups the origin assigned to other brokers.
    pub(crate) groups: Vec<GroupAssignment>,
    /// With `AWAITS_REPORT`, how long the origin waits for reports.
    pub(crate) await_timeout_ms: u32,
    /// The message, with the hop count it arrived with (0 at the origin).
    pub(crate) message: Message,
}

impl Travelling {
    /// True for messages sent with `NEEDS_LINK_ACK`: kept until acknowledged.
    pub(crate) fn is_reliable(&self) -> bool {
        self.flags & forward_flags::NEEDS_LINK_ACK != 0
    }

    /// True when the origin awaits a `DELIVERY_REPORT` from every receiver.
    pub(crate) fn awaits_report(&self) -> bool {
        self.flags & forward_flags::AWAITS_REPORT != 0
    }

    /// True when some queue group of the message is `broker`'s to serve.
    pub(crate) fn assigned_to(&self, broker: &str) -> bool {
        self.groups.iter().any(|assignment| assignment.broker == broker)
    }
}

/// What the origin asks of [`NetState::forward_local`].
#[derive(Debug)]
pub(crate) struct LocalForward<'a> {
    /// The message as stamped.
    pub(crate) message: &'a Message,
    /// Queue groups a local member serves: not assigned to other brokers.
    pub(crate) local_groups: Vec<&'a str>,
    /// The publisher's await=delivered report, which then waits for every
    /// broker the message reaches, for `await_timeout_ms`.
    pub(crate) report: Option<&'a Arc<DeliveryReport>>,
    /// How long the publisher's report waits.
    pub(crate) await_timeout_ms: u32,
}

/// What [`NetState::forward_local`] did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Forwarded {
    /// Brokers the message is on its way to when a report was asked for;
    /// otherwise the links it was sent on. Zero when it went nowhere.
    pub(crate) receivers: usize,
}

/// Forwarding state, behind the network's lock with the topology it reads.
#[derive(Debug)]
pub(crate) struct ForwardState {
    pub(crate) mode: RoutingMode,
    hop_limit: u8,
    /// Where numbering starts (§10.5: the start time), for origin and link sequences.
    start_sequence: u64,
    /// The number of the next message this broker sends into the network.
    next_origin_sequence: u64,
    /// The next link sequence per neighbour (§10.8: per pair of names).
    next_link_sequences: BTreeMap<BrokerName, u64>,
    duplicates: DuplicateFilter,
    traffic: BTreeMap<BrokerName, LinkTraffic>,
    /// Reliable frames kept until acknowledged, and stranded ones.
    pub(crate) retransmission: Retransmission,
    /// Await=delivered reports of messages published here.
    pub(crate) reports: ReportRegistry,
    /// Turns among equally near brokers of one queue group.
    pub(crate) group_turn: usize,
    /// What other brokers' interest says per topic, for one interest
    /// generation; bounded by `delivery.match_cache_entries_max`.
    remote_cache: MatchCache<TopicInterest>,
    /// Next hops per origin and topic where nothing else decides them;
    /// bounded by `delivery.match_cache_entries_max`.
    hop_cache: HopCache,
    /// Where `FORWARD`s are encoded: chunks of `delivery.encode_arena_bytes`,
    /// each freed with the last frame encoded in it.
    arena: BytesMut,
    arena_bytes: usize,
    /// True when a published message may have somewhere to go; read without
    /// the lock on every local publish.
    active: Arc<AtomicBool>,
    /// What the neighbours the users file names may forward in and be
    /// forwarded (`[[broker]]`); others are limited by their certificate only.
    grants: std::collections::HashMap<String, sift_auth::BrokerGrant>,
}

impl ForwardState {
    pub(crate) fn new(broker_config: &Config, start_sequence: u64, active: Arc<AtomicBool>) -> ForwardState {
        let config = &broker_config.network;
        ForwardState {
            mode: config.routing,
            hop_limit: HOP_LIMIT_DEFAULT,
            start_sequence,
            next_origin_sequence: start_sequence,
            next_link_sequences: BTreeMap::new(),
            duplicates: DuplicateFilter::default(),
            traffic: BTreeMap::new(),
            retransmission: Retransmission::new(config),
            reports: ReportRegistry::new(config.awaited_reports_max),
            group_turn: 0,
            remote_cache: MatchCache::new(broker_config.delivery.match_cache_entries_max),
            hop_cache: HopCache::new(broker_config.delivery.match_cache_entries_max),
            arena: BytesMut::new(),
            arena_bytes: broker_config.delivery.encode_arena_bytes,
            active,
            grants: std::collections::HashMap::new(),
        }
    }

    /// Puts `grants` (the users file's `[[broker]]`s) in force for every
    /// message from now on.
    pub(crate) fn set_grants(&mut self, grants: Vec<sift_auth::BrokerGrant>) {
        self.grants = grants.into_iter().map(|grant| (grant.name.clone(), grant)).collect();
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
    /// with this broker's next origin sequence; assigns the queue groups no
    /// local member serves and registers the await=delivered report.
    pub(crate) fn forward_local(&mut self, request: LocalForward<'_>, stats: &Stats) -> Forwarded {
        let sequence = self.forward.next_origin_sequence;
        self.forward.next_origin_sequence += 1;
        let message = request.message;
        let groups = self.assign_groups(message, &request.local_groups);
        let flags = if message.delivery_mode.needs_ack() { forward_flags::NEEDS_LINK_ACK } else { 0 };
        let mut travelling = Travelling {
            origin: self.own_name.clone(),
            origin_sequence: sequence,
            flags,
            groups,
            await_timeout_ms: 0,
            message: message.clone(),
        };
        // The receivers are computed only for a report, which waits for
        // each of them; otherwise whether any link was used is enough.
        let receivers = if request.report.is_some() { self.receivers(&travelling) } else { Vec::new() };
        // Reports are asked for only when somebody will send one and the
        // origin has room to wait for it.
        if let Some(report) = request.report.filter(|_| !receivers.is_empty()) {
            if self.forward.reports.insert(sequence, report.clone(), stats) {
                for broker in &receivers {
                    report.expect_broker(broker.clone());
                }
                travelling.flags |= forward_flags::AWAITS_REPORT;
                travelling.await_timeout_ms = request.await_timeout_ms;
            }
        }
        let travelling = Arc::new(travelling);
        add(&stats.group_forwards, travelling.groups.len() as u64);
        let hops = self.send_down_tree(&travelling, stats);
        Forwarded { receivers: if request.report.is_some() { receivers.len() } else { hops } }
    }

    /// The brokers a message this broker originates reaches.
    fn receivers(&mut self, travelling: &Travelling) -> Vec<BrokerName> {
        let wanting = self.wanting(&travelling.message);
        let tree = self.topology.tree(&self.own_name);
        tree.reached_below(&self.own_name, |broker| self.wants(broker, travelling, &wanting))
    }

    /// The brokers whose interest outside queue groups wants `message`,
    /// sorted: from the per-topic cache of what their entries say, then the
    /// content filters that topic leaves to decide.
    pub(crate) fn wanting(&mut self, message: &Message) -> Vec<BrokerName> {
        self.topic_interest(message).wanting(message)
    }

    /// What other brokers' interest says about `message`'s topic, from the
    /// per-topic cache.
    fn topic_interest(&mut self, message: &Message) -> Arc<TopicInterest> {
        let generation = self.interest.remote.generation();
        let topic = message.topic.as_str();
        match self.forward.remote_cache.get(topic, generation) {
            Some(route) => route,
            None => {
                let route = Arc::new(self.interest.remote.topic_interest(&message.topic));
                self.forward.remote_cache.insert(topic, generation, route.clone());
                route
            }
        }
    }

    /// True when `broker` is to receive `travelling`: it is among the
    /// `wanting` brokers (every broker is, in flood mode), or the origin
    /// assigned it one of the message's groups.
    pub(crate) fn wants(&self, broker: &str, travelling: &Travelling, wanting: &[BrokerName]) -> bool {
        self.forward.mode == RoutingMode::Flood
            || travelling.assigned_to(broker)
            || wanting.binary_search_by(|held| (**held).cmp(broker)).is_ok()
    }

    /// Takes a `FORWARD` received from `from` (`frame_bytes` long): counts
    /// it, drops a duplicate, sends it on unless its hop count reached the
    /// limit, and returns it when it is to be delivered here.
    ///
    /// A re-routed frame (with targets) is sent on towards its other targets
    /// even when it is a duplicate here, since brokers beyond may not have
    /// it; it is delivered here only when this broker is one of its targets.
    pub(crate) fn receive_forward(
        &mut self,
        forward: Forward,
        from: &str,
        frame_bytes: usize,
        stats: &Stats,
    ) -> Option<Arc<Travelling>> {
        if let Some(grant) = self.forward.grants.get(from).filter(|grant| !grant.may_forward_in(&forward.message.topic))
        {
            // Outside what the neighbour may send: dropped, even in transit.
            bump(&stats.link_permission_drops);
            tracing::debug!(neighbour = %grant.name, topic = %forward.message.topic, "FORWARD outside forward_in dropped");
            return None;
        }
        // Looked up before inserting, so that a message costs no name allocation.
        let traffic = match self.forward.traffic.get_mut(from) {
            Some(traffic) => traffic,
            None => self.forward.traffic.entry(BrokerName::from(from)).or_default(),
        };
        traffic.messages_received += 1;
        traffic.bytes_received += frame_bytes as u64;
        let Forward { origin, origin_sequence, flags, groups, targets, await_timeout_ms, message, .. } = forward;
        let rerouted = !targets.is_empty();
        let targeted_here = targets.iter().any(|target| *target == *self.own_name);
        // A message of this broker's own coming back went round a loop of
        // inconsistent views: it is a duplicate too.
        let own = origin == *self.own_name;
        let first_time =
            !own && (!rerouted || targeted_here) && self.forward.duplicates.accept(&origin, origin_sequence);
        if !first_time && (!rerouted || targeted_here) {
            bump(&stats.forward_duplicates_dropped);
        }
        if !first_time && !rerouted {
            return None;
        }
        let origin = BrokerName::from(origin.as_str());
        let travelling =
            Arc::new(Travelling { origin, origin_sequence, flags, groups, await_timeout_ms, message: *message });
        if !within_hop_limit(travelling.message.hop_count, self.forward.hop_limit) {
            bump(&stats.forward_hop_limit_dropped);
        } else if rerouted {
            let onward: Vec<BrokerName> = targets
                .iter()
                .filter(|target| **target != *self.own_name)
                .map(|target| BrokerName::from(target.as_str()))
                .collect();
            self.send_to_targets(&travelling, onward, stats);
        } else {
            self.send_down_tree(&travelling, stats);
        }
        if first_time {
            bump(&stats.forwards_received);
            return Some(travelling);
        }
        None
    }

    /// Sends `travelling` to this broker's children in the origin's tree
    /// that lead to a broker that wants it (every child in flood mode);
    /// returns how many.
    pub(crate) fn send_down_tree(&mut self, travelling: &Arc<Travelling>, stats: &Stats) -> usize {
        let tree = self.topology.tree(&travelling.origin);
        let hops: Arc<[BrokerName]> = match self.forward.mode {
            RoutingMode::Flood => tree.next_hops_flood(&self.own_name).into(),
            RoutingMode::Interest => self.interest_hops(travelling, tree),
        };
        for hop in hops.iter() {
            self.send_one(travelling, hop, Vec::new(), stats);
        }
        hops.len()
    }

    /// The children of this broker in `tree` (the origin's) that lead to a
    /// broker wanting `travelling`. Kept per origin and topic
    /// ([`HopCache`]) when neither content filters nor queue-group
    /// assignments decide them.
    fn interest_hops(&mut self, travelling: &Travelling, tree: Arc<SpTree>) -> Arc<[BrokerName]> {
        let (origin, topic) = (&travelling.origin, travelling.message.topic.as_str());
        let generation = self.interest.remote.generation();
        let cacheable = travelling.groups.is_empty();
        if cacheable {
            if let Some(hops) = self.forward.hop_cache.get(origin, topic, &tree, generation) {
                return hops;
            }
        }
        let interest = self.topic_interest(&travelling.message);
        let wanting = interest.wanting(&travelling.message);
        let hops: Arc<[BrokerName]> =
            tree.next_hops(&self.own_name, |broker| self.wants(broker, travelling, &wanting)).into();
        if cacheable && interest.filtered.is_empty() {
            self.forward.hop_cache.insert(origin, topic, tree, generation, hops.clone());
        }
        hops
    }

    /// Sends a re-routed `travelling` towards `targets` along this broker's
    /// own shortest paths, one frame per first hop carrying the targets
    /// behind it. Targets no path reaches are left out.
    pub(crate) fn send_to_targets(&mut self, travelling: &Arc<Travelling>, targets: Vec<BrokerName>, stats: &Stats) {
        let tree = self.topology.tree(&self.own_name);
        let mut by_hop: BTreeMap<BrokerName, Vec<BrokerName>> = BTreeMap::new();
        for target in targets {
            if let Some(hop) = tree.first_hop(&target) {
                by_hop.entry(hop).or_default().push(target);
            }
        }
        for (hop, targets) in by_hop {
            bump(&stats.forwards_rerouted);
            self.send_one(travelling, &hop, targets, stats);
        }
    }

    /// Encodes one `FORWARD` of `travelling` for `hop` (with `targets` when
    /// re-routed), keeps it when reliable, and queues it.
    fn send_one(&mut self, travelling: &Arc<Travelling>, hop: &BrokerName, targets: Vec<BrokerName>, stats: &Stats) {
        let refused =
            self.forward.grants.get(&**hop).is_some_and(|grant| !grant.may_forward_out(&travelling.message.topic));
        if refused {
            bump(&stats.link_permission_drops);
            return;
        }
        let link_sequence = self.forward.next_link_sequence(hop);
        let target_names: Vec<String> = targets.iter().map(|target| target.to_string()).collect();
        let Some(bytes) = self.forward.encode(travelling, link_sequence, &target_names) else { return };
        if bytes.len() - LENGTH_PREFIX_BYTES > self.frame_bytes_max {
            bump(&stats.link_errors);
            tracing::warn!(neighbour = %hop, bytes = bytes.len(), "FORWARD over max_frame_bytes not sent");
            return;
        }
        if travelling.is_reliable() {
            // A frame for a link that is down is stranded instead; one that
            // cannot be kept is still sent, best-effort.
            self.keep_or_strand(hop, link_sequence, travelling, targets, stats);
            if !self.links.contains_key(hop) {
                return;
            }
        }
        self.queue_forward(hop, bytes, travelling.is_reliable(), stats);
    }

    /// Queues one encoded `FORWARD` on the link to `hop`. A full send queue
    /// drops a best-effort frame (counted); for a reliable one, which is
    /// kept, it closes the link so that the frame is re-routed.
    fn queue_forward(&mut self, hop: &BrokerName, bytes: Bytes, reliable: bool, stats: &Stats) {
        let Some(live) = self.links.get(hop) else { return };
        let length = bytes.len() as u64;
        match live.sender.try_send(bytes) {
            Ok(()) => {
                self.congestion.after_send(live.sender.capacity(), self.queue_frames);
                bump(&stats.messages_forwarded);
                let traffic = self.forward.traffic.entry(hop.clone()).or_default();
                traffic.messages_forwarded += 1;
                traffic.bytes_forwarded += length;
            }
            Err(TrySendError::Full(_)) if reliable => {
                if CloseReason::send(live, CloseReason::Overflow) {
                    bump(&stats.link_errors);
                    tracing::warn!(neighbour = %hop, "link send queue full with reliable messages: closing the link");
                }
            }
            Err(TrySendError::Full(_)) => bump(&stats.forward_queue_full_dropped),
            Err(TrySendError::Closed(_)) => {}
        }
    }
}

impl ForwardState {
    /// The `FORWARD` frame of `travelling` with the next hop count, in the
    /// next slice of the arena (a fresh chunk when the current one is full),
    /// so that a frame costs no allocation of its own.
    fn encode(&mut self, travelling: &Travelling, link_sequence: u64, targets: &[String]) -> Option<Bytes> {
        let header = ForwardHeader {
            origin: &travelling.origin,
            origin_sequence: travelling.origin_sequence,
            link_sequence,
            flags: travelling.flags,
            groups: &travelling.groups,
            targets,
            await_timeout_ms: travelling.await_timeout_ms,
        };
        let mut message = MessageRef::of(&travelling.message);
        message.hop_count = travelling.message.hop_count.saturating_add(1);
        let message_bytes = travelling.message.payload.len()
            + travelling.message.metadata.as_ref().map_or(0, |metadata| metadata.len())
            + travelling.message.topic.as_str().len();
        let needed = message_bytes + FORWARD_OVERHEAD_BYTES;
        if self.arena.capacity() < needed {
            self.arena = BytesMut::with_capacity(self.arena_bytes.max(needed));
        }
        match encode_forward_ref(&mut self.arena, header, message) {
            Ok(()) => Some(self.arena.split().freeze()),
            Err(error) => {
                self.arena.clear();
                tracing::error!(%error, "cannot encode FORWARD");
                None
            }
        }
    }
}
