//! Interest propagation (§10.6): this broker's own table, originated from
//! its local subscriptions; every other broker's table, learned from
//! `INTEREST` increments and full resync brackets; flooding both; resync on
//! link-up; forgetting unreachable brokers' tables.
//!
//! All of it runs under [`super::network::LinkNetwork`]'s lock, like link
//! state, so that queueing a resync on a new link and queueing increments
//! are ordered: a link never sees an increment before the copy it follows.

use std::collections::BTreeMap;

use bytes::Bytes;
use sift_net::{Advertiser, BrokerName, Interest, InterestEntry, InterestUpdate};
use sift_proto::link::{Interest as InterestFrame, InterestChange, LinkFrame};

use crate::stats::{add, bump, Stats};
use crate::subscription::Subscription;

use super::bracket::Bracket;
use super::error::LinkError;
use super::frames::encode;
use super::interest_wire::{bracket_frames, from_add, split_changes, to_add, to_change};
use super::network::NetState;

/// This broker's own interest and what it knows of everyone else's.
#[derive(Debug)]
pub(crate) struct InterestState {
    /// Own entries: reference-counted, covered ones held back.
    pub(crate) local: Advertiser,
    /// Own interest sequence: that of the last increment sent (§10.5: starts
    /// at the start time).
    pub(crate) own_sequence: u64,
    /// Other brokers' entries by the keys they chose.
    pub(crate) remote: Interest<u64>,
    /// The sequence held per other broker; an origin here with no entries
    /// has an empty table.
    pub(crate) sequences: BTreeMap<BrokerName, u64>,
}

impl InterestState {
    pub(crate) fn new(start_sequence: u64) -> InterestState {
        InterestState {
            local: Advertiser::new(),
            own_sequence: start_sequence,
            remote: Interest::new(),
            sequences: BTreeMap::new(),
        }
    }
}

/// The interest entry a local subscription stands for.
pub(crate) fn entry_of(subscription: &Subscription) -> InterestEntry {
    InterestEntry {
        topic: subscription.topic_filter.clone(),
        content: subscription.content.as_deref().cloned(),
        group: subscription.group.as_deref().map(str::to_string),
    }
}

impl NetState {
    /// Sends `updates` of this broker's own table as increments on every
    /// link, one sequence per frame.
    pub(crate) fn originate_interest(&mut self, updates: Vec<InterestUpdate>, stats: &Stats) {
        if updates.is_empty() {
            return;
        }
        let changes = updates.iter().map(to_change).collect();
        for group in split_changes(&self.own_name, changes, self.frame_bytes_max) {
            self.interest.own_sequence += 1;
            let frame = InterestFrame {
                origin: self.own_name.to_string(),
                sequence: self.interest.own_sequence,
                changes: group,
            };
            if let Some(bytes) = encode(&LinkFrame::Interest(frame)) {
                self.flood_interest(&bytes, None, stats);
            }
        }
    }

    /// Queues a full copy of every table held, own first, on the link to
    /// `peer` (§10.6, on every link-up).
    pub(crate) fn send_interest_resync(&self, peer: &BrokerName, stats: &Stats) {
        let own: Vec<_> = self.interest.local.advertised().into_iter().map(|(key, entry)| to_add(key, entry)).collect();
        self.queue_bracket(peer, &self.own_name, self.interest.own_sequence, own, stats);
        for (origin, sequence) in &self.interest.sequences {
            let adds = self.interest.remote.entries(origin).map(|(key, entry)| to_add(*key, entry)).collect();
            self.queue_bracket(peer, origin, *sequence, adds, stats);
        }
    }

    fn queue_bracket(
        &self,
        peer: &str,
        origin: &str,
        sequence: u64,
        adds: Vec<sift_proto::link::InterestAdd>,
        stats: &Stats,
    ) {
        for frame in bracket_frames(origin, sequence, adds, self.frame_bytes_max) {
            let is_interest = matches!(frame, LinkFrame::Interest(_));
            if let Some(bytes) = encode(&frame) {
                self.queue(peer, bytes, stats);
                if is_interest {
                    bump(&stats.interest_updates_sent);
                }
            }
        }
    }

    /// Applies an increment received from `from` (§10.6): an old one is
    /// dropped, the next one applied and flooded, a gap ends the link.
    pub(crate) fn apply_interest(&mut self, frame: InterestFrame, from: &str, stats: &Stats) -> Result<(), LinkError> {
        if frame.origin == *self.own_name {
            return Ok(());
        }
        let held = self.interest.sequences.get(frame.origin.as_str()).copied();
        match held {
            Some(last) if frame.sequence <= last => return Ok(()),
            Some(last) if frame.sequence == last + 1 => {}
            _ => {
                let held = held.map_or_else(|| "no state".to_string(), |last| format!("sequence {last}"));
                return Err(LinkError::InterestOutOfOrder(format!(
                    "INTEREST {:?} #{} where this broker holds {held}",
                    frame.origin, frame.sequence
                )));
            }
        }
        let origin = BrokerName::from(frame.origin.as_str());
        for change in &frame.changes {
            self.apply_change(&origin, change, from, stats);
        }
        self.interest.sequences.insert(origin, frame.sequence);
        self.update_entry_gauge(stats);
        if let Some(bytes) = encode(&LinkFrame::Interest(frame)) {
            self.flood_interest(&bytes, Some(from), stats);
        }
        Ok(())
    }

    fn apply_change(&mut self, origin: &BrokerName, change: &InterestChange, from: &str, stats: &Stats) {
        match change {
            InterestChange::Add(add) => match from_add(add) {
                Ok(entry) => {
                    self.interest.remote.add(origin, add.key, entry);
                }
                Err(error) => {
                    // Unusable here, but the frame still floods on: other
                    // brokers decide for themselves.
                    bump(&stats.link_errors);
                    tracing::warn!(neighbour = from, broker = %origin, %error, "interest entry ignored");
                    self.interest.remote.remove(origin, &add.key);
                }
            },
            InterestChange::Remove { key } => {
                self.interest.remote.remove(origin, key);
            }
        }
    }

    /// Applies a complete bracket received from `from` (§10.6): a copy newer
    /// than what is held replaces the table and is flooded; others are
    /// discarded.
    pub(crate) fn apply_bracket(&mut self, bracket: Bracket, from: &str, stats: &Stats) {
        bump(&stats.interest_resyncs_received);
        if bracket.origin == *self.own_name {
            return;
        }
        let held = self.interest.sequences.get(bracket.origin.as_str()).copied();
        if held.is_some_and(|last| bracket.sequence <= last) {
            return;
        }
        let origin = BrokerName::from(bracket.origin.as_str());
        self.interest.remote.remove_broker(&origin);
        for add in &bracket.adds {
            self.apply_change(&origin, &InterestChange::Add(add.clone()), from, stats);
        }
        self.interest.sequences.insert(origin, bracket.sequence);
        self.update_entry_gauge(stats);
        let frames = bracket_frames(&bracket.origin, bracket.sequence, bracket.adds, self.frame_bytes_max);
        let encoded: Vec<Bytes> = frames.iter().filter_map(encode).collect();
        let peers: Vec<BrokerName> = self.links.keys().filter(|name| ***name != *from).cloned().collect();
        for peer in peers {
            for bytes in &encoded {
                self.queue(&peer, bytes.clone(), stats);
            }
            add(&stats.interest_updates_sent, (encoded.len() - 2) as u64);
        }
    }

    /// Forgets the tables of brokers no path reaches any more (§10.5).
    ///
    /// Unlike link state, interest is forgotten on every topology change: an
    /// unreachable broker's subscribers cannot be served, and a table that a
    /// transient partition dropped is copied again by the resync of the link
    /// that heals it.
    pub(crate) fn forget_unreachable_interest(&mut self, stats: &Stats) {
        let tree = self.topology.tree(&self.own_name);
        let gone: Vec<BrokerName> =
            self.interest.sequences.keys().filter(|origin| !tree.contains(origin)).cloned().collect();
        for origin in &gone {
            tracing::debug!(broker = %origin, "broker unreachable: its interest is forgotten");
            self.interest.sequences.remove(origin);
            self.interest.remote.remove_broker(origin);
        }
        if !gone.is_empty() {
            self.update_entry_gauge(stats);
        }
    }

    fn flood_interest(&self, bytes: &Bytes, except: Option<&str>, stats: &Stats) {
        for name in self.links.keys() {
            if except != Some(&**name) {
                self.queue(name, bytes.clone(), stats);
                bump(&stats.interest_updates_sent);
            }
        }
    }

    fn update_entry_gauge(&self, stats: &Stats) {
        let held = self.interest.remote.total_len() as u64;
        stats.interest_entries.store(held, std::sync::atomic::Ordering::Relaxed);
        self.refresh_forwarding();
    }
}
