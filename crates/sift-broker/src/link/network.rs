//! The broker's view of its links: which are up, what the cluster's
//! topology is, and the queue of frames towards each link.
//!
//! Everything lives behind one mutex, held only for short, non-awaiting
//! steps, so that registering a link, originating this broker's new link
//! state and queueing it on every link happen as one step: no frame can be
//! queued on a link before its `LINK_WELCOME`, and no link misses a state.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sift_core::ClockEstimate;
use sift_net::{BrokerName, Topology};
use sift_proto::link::Forward;
use tokio::sync::{mpsc, watch};

use crate::config::Config;
use crate::stats::{bump, Stats};
use crate::subscription::Subscription;

use super::congestion::LinkCongestion;
use super::error::LinkError;
use super::forward::{ForwardState, Forwarded, LinkTraffic, LocalForward, Travelling};
use super::interest::{entry_of, InterestState};

/// One link that is up, as [`crate::RunningBroker::links`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// The broker at the other end.
    pub neighbour: String,
    /// The peer's address (the dialled address, or where an accepted link came from).
    pub address: String,
    /// The agreed cost: the larger of the two ends' costs.
    pub cost: u32,
    /// Time since the handshake completed.
    pub connected_for: Duration,
    /// `FORWARD` traffic with this neighbour, since this broker started.
    pub traffic: LinkTraffic,
    /// The neighbour's clock as of the last `LINK_TIME_REPLY`; `None` before it.
    pub clock: Option<ClockEstimate>,
}

/// A content filter as (language name, filter text).
pub type ContentText = Option<(String, String)>;

/// One entry of another broker's interest: (broker, topic filter, content filter).
pub type RemoteInterest = (String, String, ContentText);

/// One entry this broker advertises: (topic filter, content filter).
pub type AdvertisedInterest = (String, ContentText);

/// A link attempt that failed most recently, per dialled address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkFailure {
    /// The dialled address.
    pub address: String,
    /// Why the last attempt failed.
    pub error: String,
}

/// A link that is up.
#[derive(Debug)]
pub(crate) struct LiveLink {
    /// Tells apart successive links to the same neighbour.
    pub(crate) id: u64,
    pub(crate) address: String,
    pub(crate) cost: u32,
    pub(crate) since: Instant,
    /// True when this broker dialled the link, false when it accepted it.
    pub(crate) dialled_here: bool,
    /// Encoded frames for the link's writer; bounded by `link_send_queue_frames`.
    pub(crate) sender: mpsc::Sender<Bytes>,
    /// Set to true to make the link's session end.
    pub(crate) close: watch::Sender<CloseReason>,
    /// The session's latest estimate of the neighbour's clock.
    pub(crate) clock: Option<ClockEstimate>,
}

/// Why a link's session is told to end, through [`LiveLink::close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// Not told to close.
    Open,
    /// Its send queue filled up: the peer does not keep up.
    Overflow,
    /// Another link to the same broker won the tie-break (§10.4).
    Replaced,
}

impl CloseReason {
    /// Asks `live`'s session to end for `reason`; true the first time.
    pub(crate) fn send(live: &LiveLink, reason: CloseReason) -> bool {
        live.close.send_replace(reason) == CloseReason::Open
    }
}

/// What a session gets back from [`LinkNetwork::register`].
#[derive(Debug)]
pub(crate) struct Registered {
    pub(crate) id: u64,
    pub(crate) sender: mpsc::Sender<Bytes>,
    pub(crate) receiver: mpsc::Receiver<Bytes>,
    pub(crate) close: watch::Receiver<CloseReason>,
}

/// The state behind [`LinkNetwork`]'s lock.
#[derive(Debug)]
pub(crate) struct NetState {
    pub(crate) own_name: BrokerName,
    pub(crate) topology: Topology,
    /// Up links by neighbour name; ordered so that frames go out in a
    /// deterministic order.
    pub(crate) links: BTreeMap<BrokerName, LiveLink>,
    /// This broker's next link-state sequence (§10.5: starts at the start time).
    pub(crate) next_sequence: u64,
    /// Own and remote interest (§10.6).
    pub(crate) interest: InterestState,
    /// Largest frame a peer accepts (`max_frame_bytes`); interest is cut to fit.
    pub(crate) frame_bytes_max: usize,
    /// Message forwarding (§10.7).
    pub(crate) forward: ForwardState,
    /// Set when a link queue fills up; shared with the link writers.
    pub(crate) congestion: Arc<LinkCongestion>,
    /// Capacity of each link's send queue.
    pub(crate) queue_frames: usize,
    next_link_id: u64,
}

/// This broker's links and topology, shared by the listener, the dialers,
/// every link session and [`crate::RunningBroker`].
#[derive(Debug)]
pub struct LinkNetwork {
    name: BrokerName,
    queue_frames: usize,
    state: Mutex<NetState>,
    /// [`NetState::refresh_forwarding`]'s flag, read without the lock.
    forwarding: Arc<AtomicBool>,
    /// Link queues filling up: readers that feed links wait on it.
    congestion: Arc<LinkCongestion>,
    /// Longest such wait.
    stall_max: Duration,
    failures: Mutex<HashMap<String, String>>,
}

impl LinkNetwork {
    /// No links yet; the topology holds only this broker's own empty state.
    /// Frames are kept within `limits.max_frame_bytes`, which the cluster
    /// shares.
    pub fn new(broker_config: &Config, start_ns: u64) -> LinkNetwork {
        let config = &broker_config.network;
        let frame_bytes_max = broker_config.limits.max_frame_bytes as usize;
        let name = BrokerName::from(config.name.as_str());
        let forwarding = Arc::new(AtomicBool::new(false));
        let congestion = Arc::new(LinkCongestion::default());
        let mut state = NetState {
            own_name: name.clone(),
            topology: Topology::new(),
            links: BTreeMap::new(),
            next_sequence: start_ns,
            interest: InterestState::new(start_ns),
            frame_bytes_max,
            forward: ForwardState::new(broker_config, start_ns, forwarding.clone()),
            congestion: congestion.clone(),
            queue_frames: config.link_send_queue_frames,
            next_link_id: 1,
        };
        // The broker is in its own topology from the start, so that its
        // shortest-path tree exists (holding only itself) before any link.
        let _ = state.originate();
        LinkNetwork {
            name,
            queue_frames: config.link_send_queue_frames,
            state: Mutex::new(state),
            forwarding,
            congestion,
            stall_max: Duration::from_millis(config.link_stall_ms_max),
            failures: Mutex::default(),
        }
    }

    /// Puts the users file's `[[broker]]` grants in force: what each named
    /// neighbour may forward here and be forwarded.
    pub fn set_broker_grants(&self, grants: Vec<sift_auth::BrokerGrant>) {
        self.lock().forward.set_grants(grants);
    }

    /// This broker's name on the network.
    pub fn name(&self) -> &BrokerName {
        &self.name
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, NetState> {
        // Updates below do not panic midway, so a poisoned lock still guards
        // consistent data.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn failures(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a link up with `peer` (`dialled_here` when this broker
    /// dialled it), queues `first` (the acceptor's `LINK_WELCOME`) before
    /// anything else on it, originates and floods this broker's new link
    /// state and sends the new link every record held. Refuses a link to
    /// itself; of two links to one broker keeps one ([`NetState::keeps_new_link`]).
    pub(crate) fn register(
        &self,
        peer: &str,
        address: &str,
        cost: u32,
        first: Option<Bytes>,
        dialled_here: bool,
        stats: &Stats,
    ) -> Result<Registered, LinkError> {
        let mut state = self.lock();
        if peer == &*state.own_name {
            return Err(LinkError::DuplicateName(format!("the peer is named {peer:?}, like this broker")));
        }
        if let Some(existing) = state.links.get(peer) {
            if !state.keeps_new_link(peer, existing.dialled_here, dialled_here) {
                if !existing.dialled_here && !dialled_here {
                    // Not the two-way dial of one pair: someone named like
                    // a linked neighbour dialled in.
                    tracing::info!(
                        peer,
                        "refused a second link from a broker of this name: a restart not yet noticed, \
                         or two brokers share the name"
                    );
                }
                return Err(LinkError::AlreadyLinked(format!("a link to a broker named {peer:?} is already up")));
            }
            // The new link wins the tie-break: the old one ends as if it
            // had gone down (its reliable frames are stranded and then sent
            // again over the new one).
            CloseReason::send(existing, CloseReason::Replaced);
            state.drop_link(peer, stats);
        }
        let (sender, receiver) = mpsc::channel(self.queue_frames);
        if let Some(first) = first {
            // The queue is new and its capacity is at least one.
            let _ = sender.try_send(first);
        }
        let (close, close_watch) = watch::channel(CloseReason::Open);
        let id = state.next_link_id;
        state.next_link_id += 1;
        let live = LiveLink {
            id,
            address: address.to_string(),
            cost,
            since: Instant::now(),
            dialled_here,
            sender: sender.clone(),
            close,
            clock: None,
        };
        let name = BrokerName::from(peer);
        state.links.insert(name.clone(), live);
        bump(&stats.links_up);
        bump(&stats.links_established);
        state.announce(stats);
        state.send_all_records(&name, stats);
        state.send_interest_resync(&name, stats);
        state.refresh_forwarding();
        state.reroute_stranded(stats);
        Ok(Registered { id, sender, receiver, close: close_watch })
    }

    /// Forgets link `id` to `peer` (not a newer link to the same broker),
    /// then originates and floods this broker's new link state and forgets
    /// brokers no longer reachable.
    /// Records the latest estimate of `peer`'s clock, for [`Self::links`].
    pub(crate) fn set_clock(&self, peer: &str, id: u64, estimate: ClockEstimate) {
        let mut state = self.lock();
        if let Some(live) = state.links.get_mut(peer).filter(|live| live.id == id) {
            live.clock = Some(estimate);
        }
    }

    pub(crate) fn deregister(&self, peer: &str, id: u64, stats: &Stats) {
        let mut state = self.lock();
        if state.links.get(peer).is_none_or(|live| live.id != id) {
            return;
        }
        state.drop_link(peer, stats);
    }

    /// Waits, boundedly, while some link's send queue is nearly full
    /// (see [`super::congestion`]); returns at once otherwise.
    pub(crate) async fn wait_while_congested(&self, stats: &Stats) {
        self.congestion.wait(self.stall_max, stats).await;
    }

    /// The flag link writers clear once their queue drained.
    pub(crate) fn congestion(&self) -> Arc<LinkCongestion> {
        self.congestion.clone()
    }

    /// True when a locally published message may have to be forwarded: a
    /// link is up and (in interest mode) another broker has interest. One
    /// relaxed load, so that a broker without links pays nothing more.
    pub(crate) fn forwarding_active(&self) -> bool {
        self.forwarding.load(Ordering::Relaxed)
    }

    /// Forwards a message a local client published to the brokers that
    /// want it (§10.7).
    pub(crate) fn forward_local(&self, request: LocalForward<'_>, stats: &Stats) -> Forwarded {
        self.lock().forward_local(request, stats)
    }

    /// Takes a `FORWARD` received from `from`: sends it on and returns the
    /// message to deliver locally, or `None` for a duplicate.
    pub(crate) fn receive_forward(
        &self,
        forward: Forward,
        from: &str,
        frame_bytes: usize,
        stats: &Stats,
    ) -> Option<Arc<Travelling>> {
        self.lock().receive_forward(forward, from, frame_bytes, stats)
    }

    /// `LINK_ACK` from `peer` (§10.8).
    pub(crate) fn acked(&self, peer: &str, up_to_link_sequence: u64, stats: &Stats) {
        self.lock().acked(peer, up_to_link_sequence, stats);
    }

    /// A local subscription was added to the router: updates this broker's
    /// own interest and floods what changed in it.
    pub(crate) fn local_subscribed(&self, subscription: &Subscription, stats: &Stats) {
        let entry = entry_of(subscription);
        let mut state = self.lock();
        let updates = state.interest.local.add(entry);
        state.originate_interest(updates, stats);
    }

    /// A local subscription was removed from the router: the counterpart
    /// of [`LinkNetwork::local_subscribed`].
    pub(crate) fn local_unsubscribed(&self, subscription: &Subscription, stats: &Stats) {
        let entry = entry_of(subscription);
        let mut state = self.lock();
        let updates = state.interest.local.remove(&entry);
        state.originate_interest(updates, stats);
    }

    /// A stream was opened (`added`) or removed here. A stream is an
    /// interested party like a subscription: the network sends this broker
    /// the messages on its topics, wherever they are published.
    pub(crate) fn stream_interest(&self, stream: &crate::store::stream::Stream, added: bool, stats: &Stats) {
        // A replicated stream's group stores the messages published at its
        // brokers itself: copies forwarded to them would not be stored.
        if stream.replication().is_some() {
            return;
        }
        for topic in stream.topic_filters() {
            self.stream_topic_interest(topic, added, stats);
        }
    }

    /// One topic of a stream, added (`added`) or removed here: the interest
    /// [`LinkNetwork::stream_interest`] gives each of a stream's topics.
    pub(crate) fn stream_topic_interest(&self, topic: sift_core::TopicFilter, added: bool, stats: &Stats) {
        let entry = sift_net::InterestEntry { topic, content: None, group: None };
        self.change_local_interest(entry, added, stats);
    }

    /// A durable subscription was created or loaded (`added`) or removed
    /// here. One that reads the `default` stream is what makes this broker
    /// store persistent messages published elsewhere, so it is advertised
    /// like a subscription; a named stream advertises its own topics.
    pub(crate) fn durable_interest(&self, consumer: &crate::store::consumer::Consumer, added: bool, stats: &Stats) {
        if consumer.stream.name() != crate::store::DEFAULT_STREAM {
            return;
        }
        let entry = sift_net::InterestEntry {
            topic: consumer.topic_filter.clone(),
            content: consumer.content.as_deref().cloned(),
            group: None,
        };
        self.change_local_interest(entry, added, stats);
    }

    fn change_local_interest(&self, entry: sift_net::InterestEntry, added: bool, stats: &Stats) {
        let mut state = self.lock();
        let updates = match added {
            true => state.interest.local.add(entry),
            false => state.interest.local.remove(&entry),
        };
        state.originate_interest(updates, stats);
    }

    /// Every other broker's interest held here: (broker, topic filter,
    /// content filter as (language, text)), sorted.
    pub fn remote_interest(&self) -> Vec<RemoteInterest> {
        let state = self.lock();
        let remote = &state.interest.remote;
        let mut found: Vec<RemoteInterest> = remote
            .brokers()
            .flat_map(|broker| {
                remote
                    .entries(broker)
                    .map(move |(_, entry)| (broker.to_string(), entry.topic.as_str().to_string(), entry.content_text()))
            })
            .collect();
        found.sort();
        found
    }

    /// What this broker advertises for its own subscriptions: (topic filter,
    /// content filter as (language, text)), sorted.
    pub fn advertised_interest(&self) -> Vec<AdvertisedInterest> {
        let state = self.lock();
        let mut found: Vec<AdvertisedInterest> = state
            .interest
            .local
            .advertised()
            .into_iter()
            .map(|(_, entry)| (entry.topic.as_str().to_string(), entry.content_text()))
            .collect();
        found.sort();
        found
    }

    /// Remembers why the last attempt to dial `address` failed.
    pub(crate) fn record_failure(&self, address: &str, error: &LinkError) {
        self.failures().insert(address.to_string(), error.to_string());
    }

    /// Forgets the failure of `address` once a link to it is up.
    pub(crate) fn clear_failure(&self, address: &str) {
        self.failures().remove(address);
    }

    /// The links that are up, by neighbour name.
    pub fn links(&self) -> Vec<LinkInfo> {
        let state = self.lock();
        let now = Instant::now();
        state
            .links
            .iter()
            .map(|(name, live)| LinkInfo {
                neighbour: name.to_string(),
                address: live.address.clone(),
                cost: live.cost,
                connected_for: now.saturating_duration_since(live.since),
                traffic: state.forward.traffic(name),
                clock: live.clock,
            })
            .collect()
    }

    /// The last failure of each dialled address whose link is not up, by address.
    pub fn failures_snapshot(&self) -> Vec<LinkFailure> {
        let mut failures: Vec<LinkFailure> = self
            .failures()
            .iter()
            .map(|(address, error)| LinkFailure { address: address.clone(), error: error.clone() })
            .collect();
        failures.sort_by(|left, right| left.address.cmp(&right.address));
        failures
    }

    /// Names of the brokers this one can reach over links both ends
    /// advertise (itself included), sorted.
    pub fn reachable_brokers(&self) -> Vec<String> {
        let state = self.lock();
        let tree = state.topology.tree(&state.own_name);
        let mut names: Vec<String> = tree.subtree(&state.own_name).iter().map(|name| name.to_string()).collect();
        names.sort();
        names
    }

    /// Links on the shortest path from this broker to `broker`, or `None`
    /// when it cannot be reached.
    pub fn shortest_path_hops(&self, broker: &str) -> Option<u32> {
        let state = self.lock();
        state.topology.tree(&state.own_name).hops(broker)
    }
}

impl NetState {
    /// Of two links to `peer`, the one dialled by the broker whose name
    /// sorts first is kept. Both ends apply the rule to the same two
    /// connections, so when two brokers dial each other at once they keep
    /// the same one instead of each refusing the other's. Between two
    /// links dialled by the same broker the one up already stays.
    fn keeps_new_link(&self, peer: &str, existing_dialled_here: bool, new_dialled_here: bool) -> bool {
        let preferred_here = *self.own_name < *peer;
        existing_dialled_here != preferred_here && new_dialled_here == preferred_here
    }

    /// Forgets the link to `peer`: strands its kept reliable frames, then
    /// originates and floods this broker's new link state, forgets brokers
    /// no longer reachable and re-routes what was stranded.
    fn drop_link(&mut self, peer: &str, stats: &Stats) {
        // Before the topology forgets the link: the origins' trees still
        // show which brokers the kept frames were to reach.
        self.strand_link(peer, stats);
        self.links.remove(peer);
        stats.links_up.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.announce(stats);
        self.forget_unreachable();
        self.forget_unreachable_interest(stats);
        self.refresh_forwarding();
        self.reroute_stranded(stats);
    }
}
