//! Link acknowledgements and re-routing of reliable messages (§10.8).
//!
//! Every `FORWARD` of a reliable message is *kept* per neighbour until a
//! cumulative `LINK_ACK` covers it: the neighbour then has it queued for its
//! own subscribers and links. TCP loses nothing while a link is up, so
//! nothing is sent twice then. When a link goes down its kept frames become
//! *stranded*, each with the brokers it was still to reach: for a frame sent
//! down the origin's tree, the brokers of the neighbour's subtree that want
//! it, computed before the topology forgets the link; for a re-routed frame,
//! its own targets. Whenever the topology changes, stranded messages are
//! sent, in the order they were kept, towards every target a path reaches
//! now, as re-routed `FORWARD`s with explicit targets; each broker on the
//! way passes them on along its own shortest paths. A link that comes back
//! is such a change, so a cut and restored link gets its messages again,
//! in order, before anything newer; a broker reachable over another path
//! gets them over that path at once.
//!
//! Brokers that already had a message (a frame whose ack was lost with the
//! link) drop the copy by origin and origin sequence. Messages published
//! while no path led to an interested broker are not kept: that broker's
//! interest was forgotten with the path, as §10.6 requires.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sift_net::BrokerName;

use crate::config::NetworkConfig;
use crate::stats::{bump, Stats};

use super::forward::Travelling;
use super::network::NetState;

/// One reliable `FORWARD` sent to a neighbour and not yet acknowledged.
#[derive(Debug)]
struct KeptFrame {
    link_sequence: u64,
    travelling: Arc<Travelling>,
    /// The targets of a re-routed frame; empty for one sent down the tree.
    targets: Vec<BrokerName>,
}

/// A reliable message whose link went down before it was acknowledged.
#[derive(Debug)]
struct Stranded {
    travelling: Arc<Travelling>,
    /// Brokers it still has to reach.
    targets: Vec<BrokerName>,
    since: Instant,
}

/// Kept and stranded reliable frames, and their bounds.
#[derive(Debug)]
pub(crate) struct Retransmission {
    kept: BTreeMap<BrokerName, VecDeque<KeptFrame>>,
    stranded: VecDeque<Stranded>,
    /// Most frames kept per neighbour, and most messages stranded in all.
    frames_max: usize,
    /// How long a stranded message waits for a path before it is dropped.
    stranded_expiry: Duration,
}

impl Retransmission {
    pub(crate) fn new(config: &NetworkConfig) -> Retransmission {
        Retransmission {
            kept: BTreeMap::new(),
            stranded: VecDeque::new(),
            frames_max: config.link_unacked_frames_max,
            stranded_expiry: Duration::from_millis(config.stranded_expiry_ms),
        }
    }

    /// Frames kept for every neighbour plus messages stranded.
    fn held(&self) -> usize {
        self.kept.values().map(VecDeque::len).sum::<usize>() + self.stranded.len()
    }

    fn update_gauge(&self, stats: &Stats) {
        stats.forward_frames_kept.store(self.held() as u64, Ordering::Relaxed);
    }
}

impl NetState {
    /// Keeps a reliable frame sent to `hop` until acknowledged or, when the
    /// link to `hop` is not up, strands it at once. False when the bound
    /// (`link_unacked_frames_max`) is reached: the frame is then not kept
    /// (counted) and the message may be lost on a link failure.
    pub(crate) fn keep_or_strand(
        &mut self,
        hop: &BrokerName,
        link_sequence: u64,
        travelling: &Arc<Travelling>,
        targets: Vec<BrokerName>,
        stats: &Stats,
    ) -> bool {
        if !self.links.contains_key(hop) {
            let targets = if targets.is_empty() { self.tree_targets(hop, travelling) } else { targets };
            return self.strand(travelling.clone(), targets, stats);
        }
        let retransmission = &mut self.forward.retransmission;
        let frames_max = retransmission.frames_max;
        let kept = retransmission.kept.entry(hop.clone()).or_default();
        if kept.len() >= frames_max {
            bump(&stats.forward_unacked_full_dropped);
            return false;
        }
        kept.push_back(KeptFrame { link_sequence, travelling: travelling.clone(), targets });
        retransmission.update_gauge(stats);
        true
    }

    /// `LINK_ACK` from `peer`: forgets every kept frame up to `up_to`.
    pub(crate) fn acked(&mut self, peer: &str, up_to: u64, stats: &Stats) {
        let retransmission = &mut self.forward.retransmission;
        let Some(kept) = retransmission.kept.get_mut(peer) else { return };
        while kept.front().is_some_and(|frame| frame.link_sequence <= up_to) {
            kept.pop_front();
        }
        retransmission.update_gauge(stats);
    }

    /// The link to `peer` is going down: strands its kept frames with the
    /// brokers each still has to reach. Called before the topology forgets
    /// the link, so that the origin's tree still shows `peer`'s subtree.
    pub(crate) fn strand_link(&mut self, peer: &str, stats: &Stats) {
        let Some(kept) = self.forward.retransmission.kept.remove(peer) else { return };
        let hop = BrokerName::from(peer);
        for frame in kept {
            let targets =
                if frame.targets.is_empty() { self.tree_targets(&hop, &frame.travelling) } else { frame.targets };
            self.strand(frame.travelling, targets, stats);
        }
    }

    /// Sends every stranded message towards its targets that a path reaches
    /// now, in the order they were stranded; drops those that waited longer
    /// than `stranded_expiry_ms` (counted) or have no target left.
    pub(crate) fn reroute_stranded(&mut self, stats: &Stats) {
        if self.forward.retransmission.stranded.is_empty() {
            return;
        }
        let tree = self.topology.tree(&self.own_name);
        let expiry = self.forward.retransmission.stranded_expiry;
        let stranded = std::mem::take(&mut self.forward.retransmission.stranded);
        for mut entry in stranded {
            if entry.since.elapsed() > expiry {
                bump(&stats.forward_stranded_expired);
                continue;
            }
            let (reachable, unreachable): (Vec<BrokerName>, Vec<BrokerName>) =
                entry.targets.into_iter().filter(|target| *target != self.own_name).partition(|target| {
                    tree.contains(target) && tree.first_hop(target).is_some_and(|hop| self.links.contains_key(&hop))
                });
            if !reachable.is_empty() {
                self.send_to_targets(&entry.travelling, reachable, stats);
            }
            if !unreachable.is_empty() {
                entry.targets = unreachable;
                self.forward.retransmission.stranded.push_back(entry);
            }
        }
        self.forward.retransmission.update_gauge(stats);
    }

    /// The brokers of `hop`'s subtree in the origin's tree that are to
    /// receive `travelling`.
    fn tree_targets(&mut self, hop: &BrokerName, travelling: &Travelling) -> Vec<BrokerName> {
        let wanting = self.wanting(&travelling.message);
        let tree = self.topology.tree(&travelling.origin);
        tree.subtree(hop).iter().filter(|broker| self.wants(broker, travelling, &wanting)).cloned().collect()
    }

    fn strand(&mut self, travelling: Arc<Travelling>, targets: Vec<BrokerName>, stats: &Stats) -> bool {
        if targets.is_empty() {
            return true;
        }
        let retransmission = &mut self.forward.retransmission;
        if retransmission.stranded.len() >= retransmission.frames_max {
            bump(&stats.forward_unacked_full_dropped);
            return false;
        }
        retransmission.stranded.push_back(Stranded { travelling, targets, since: Instant::now() });
        retransmission.update_gauge(stats);
        true
    }
}
