//! `PUBLISH`: check, stamp, match, queue, confirm.
//!
//! This is the hot path, and it never waits. The reader that decoded the
//! frame matches the message, encodes it once into one shared [`Routed`], and
//! pushes a reference into each matching subscriber's outbox. When a `block`
//! queue is full for a reliable message, the publish is *parked*: the
//! session remembers which targets are left and stops taking publishes from
//! this connection (later ones wait, in order) while it goes on reading acks,
//! nacks, credit and pings. That is what keeps a connection that both
//! publishes and subscribes from waiting on itself.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sift_core::{DeliveryMode, MatchResult, Message};
use sift_filter::XmlDocument;
use sift_proto::{
    encode_message, encoded_deliver_len, publish_flags, Confirm, ConfirmStatus, EncodeError, ErrorCode, Frame, Publish,
};

use crate::connection::Session;
use crate::delivery::{push_batch, push_to, Pushed};
use crate::link::{Forwarded, LocalForward};
use crate::outbox::{Entry, Routed};
use crate::report::{DeliveryReport, ReportSink};
use crate::store::gate::ConfirmGate;
use crate::subscription::SubRef;

/// Nanoseconds since the Unix epoch, or 0 if the clock is before it.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
}

/// Metadata, when present, must be a well-formed XML document: XPath
/// subscriptions are matched against it, and a publisher learns at once that
/// it sent something no XPath filter could read.
fn check_metadata(message: &Message) -> Result<(), String> {
    match &message.metadata {
        Some(metadata) => XmlDocument::parse(metadata)
            .map(|_| ())
            .map_err(|error| format!("metadata is not a well-formed XML document: {error}")),
        None => Ok(()),
    }
}

/// Room reserved per message beyond its topic, metadata and payload: the
/// fixed fields, the publisher name and a few properties.
const ENCODED_OVERHEAD_BYTES: usize = 128;

/// Connections whose staging buffers a reader keeps between reads.
const STAGED_CONNECTIONS_MAX: usize = 64;

/// Best-effort copies staged for the subscriptions of one connection.
#[derive(Debug)]
pub struct StagedBatch {
    conn: Arc<crate::connection::ConnShared>,
    items: Vec<(SubRef, Entry)>,
}

/// A publish being served, and parked while a `block` queue is full.
///
/// Its targets are the plain subscriptions of the match, then one chosen
/// member per queue group; `next` is the first not yet served.
#[derive(Debug)]
pub struct Parked {
    routed: Arc<Routed>,
    matches: Arc<MatchResult<SubRef>>,
    /// The member chosen in each queue group, in group order (empty, and so
    /// not allocated, when no group matched).
    group_picks: Vec<SubRef>,
    next: usize,
    /// Fail-overs tried for the current target, bounded by its group's size.
    failovers: usize,
    confirm_to: ConfirmTo,
    matched: u32,
    await_timeout_ms: u32,
}

impl Parked {
    fn target(&self, index: usize) -> Option<&SubRef> {
        let plain = &self.matches.plain;
        plain.get(index).or_else(|| self.group_picks.get(index - plain.len()))
    }

    /// The subscription whose full queue holds the publish back.
    pub fn blocked_on(&self) -> Option<&SubRef> {
        self.target(self.next)
    }

    /// Gives up: the message is lost for the targets not served (the
    /// publisher had no confirm, so a reliable client sends it again).
    pub fn abandon(self) {
        let total = self.matches.plain.len() + self.group_picks.len();
        for index in self.next..total {
            if let Some(target) = self.target(index) {
                self.routed.report_lost(target.key);
            }
        }
    }
}

/// Where the confirm of one publish goes: straight to the publisher, or,
/// for a persistent message, through the gate that also waits for the store.
#[derive(Debug, Clone)]
pub(crate) struct ConfirmTo {
    request_id: u64,
    /// False for a best-effort publish that asked for no confirm.
    wanted: bool,
    gate: Option<Arc<ConfirmGate>>,
}

impl Session {
    /// Handles one publish, stage by stage: validate, stamp, match, store,
    /// forward, deliver, confirm. Leaves `self.parked` set when a `block`
    /// queue is full.
    pub(crate) fn publish(&mut self, publish: Publish) {
        let Publish { request_id, flags, await_timeout_ms, message } = publish;
        let mut message = *message;
        if let Err((code, text)) = self.validate(&message) {
            self.refuse(code, request_id, text);
            return;
        }
        let await_delivered = flags & publish_flags::AWAIT_DELIVERED != 0;
        if await_delivered && message.delivery_mode == DeliveryMode::BestEffort {
            // Waiting for acknowledgements only makes sense for messages that get them.
            message.delivery_mode = DeliveryMode::Reliable;
        }
        let wanted = flags & publish_flags::CONFIRM != 0 || message.delivery_mode.needs_ack();
        self.stamp(&mut message);
        let matches = self.match_subscriptions(&message);
        let matched = (matches.plain.len() + matches.groups.len()) as u32;
        let persistent = message.delivery_mode == DeliveryMode::Persistent;
        let streams = self.shared.storage.streams_for(&message.topic, persistent);
        // Encoded (and checked against the frame limit) before anything is
        // stored or forwarded, so that a refused publish goes nowhere.
        let encoded = match matched > 0 || !streams.is_empty() {
            true => match self.encode_checked(&message, request_id) {
                Some(encoded) => Some(encoded),
                None => return,
            },
            false => None,
        };
        let Ok(gate) = self.store(&message, encoded.as_ref(), &streams, request_id) else { return };
        let confirm_to = ConfirmTo { request_id, wanted, gate };
        let group_picks = self.pick_group_members(&matches);
        let report = await_delivered.then(|| self.start_report(&matches, &group_picks, &confirm_to));
        let forwarded = self.forward_published(&message, &matches, report.as_ref(), await_timeout_ms);
        let Some(encoded) = encoded.filter(|_| matched > 0) else {
            self.finish_remote_only(forwarded, report, &confirm_to, await_timeout_ms);
            return;
        };
        if !message.delivery_mode.needs_ack() {
            // Best-effort: nothing to wait for and nothing to report; stage
            // the copies and be done.
            let routed = Arc::new(Routed::new(&message, encoded, None));
            for target in matches.plain.iter().chain(&group_picks) {
                self.stage(target.clone(), Entry::new(routed.clone()));
            }
            self.confirm(&confirm_to, ConfirmStatus::Accepted, matched);
            return;
        }
        let routed = Arc::new(Routed::new(&message, encoded, report));
        let parked =
            Parked { routed, matches, group_picks, next: 0, failovers: 0, confirm_to, matched, await_timeout_ms };
        self.continue_publish(parked);
    }

    /// The checks at ingress: payload size, metadata well-formed.
    fn validate(&self, message: &Message) -> Result<(), (ErrorCode, String)> {
        let max_payload_bytes = self.shared.config.limits.max_payload_bytes;
        if message.payload.len() > max_payload_bytes as usize {
            let text = format!("payload is {} bytes; max_payload_bytes = {max_payload_bytes}", message.payload.len());
            return Err((ErrorCode::PayloadTooLarge, text));
        }
        check_metadata(message).map_err(|error| (ErrorCode::InvalidField, error))
    }

    /// Stamps the broker's fields: id, publisher, time.
    fn stamp(&mut self, message: &mut Message) {
        message.id = self.shared.next_message_id.fetch_add(1, Ordering::Relaxed);
        message.publisher = self.conn.name.clone();
        message.timestamp_ns = self.read_time();
        self.counters.published += 1;
    }

    /// The local subscriptions that want `message`: the topic through the
    /// match cache, then the content index when the route names partitions.
    fn match_subscriptions(&mut self, message: &Message) -> Arc<MatchResult<SubRef>> {
        let route = self.shared.router.route(&message.topic, &mut self.cache, &mut self.counters);
        if route.is_topic_only() {
            route.matches.clone()
        } else {
            Arc::new(self.shared.router.select(&route, message, &mut self.index_scratch))
        }
    }

    /// Appends `message` to the streams that hold it. A persistent message
    /// gets a [`ConfirmGate`] that holds its confirm until every append
    /// completed; it is refused at once (`Err`) while a stream's disk
    /// refuses writes. Other messages are stored without holding anything.
    fn store(
        &mut self,
        message: &Message,
        encoded: Option<&Bytes>,
        streams: &[Arc<crate::store::stream::Stream>],
        request_id: u64,
    ) -> Result<Option<Arc<ConfirmGate>>, ()> {
        let Some(encoded) = encoded.filter(|_| !streams.is_empty()) else { return Ok(None) };
        if message.delivery_mode != DeliveryMode::Persistent {
            for stream in streams {
                stream.append_unconfirmed(message.timestamp_ns, encoded.clone());
            }
            return Ok(None);
        }
        if let Some(refusal) = streams.iter().find_map(|stream| stream.refusal_while_failing(now_ns())) {
            crate::stats::bump(&self.shared.stats.persistent_refused);
            self.refuse(refusal.0, request_id, refusal.1);
            return Err(());
        }
        let gate = ConfirmGate::new(self.conn.clone(), request_id, streams.len());
        for stream in streams {
            stream.append_confirmed(message.timestamp_ns, encoded.clone(), gate.clone());
        }
        self.counters.persistent_stored += 1;
        Ok(Some(gate))
    }

    /// The await=delivered report of a publish: one ack owed by each target.
    fn start_report(
        &self,
        matches: &MatchResult<SubRef>,
        group_picks: &[SubRef],
        confirm_to: &ConfirmTo,
    ) -> Arc<DeliveryReport> {
        let sink = ReportSink::Publisher {
            conn: self.conn.clone(),
            request_id: confirm_to.request_id,
            gate: confirm_to.gate.clone(),
        };
        let matched = (matches.plain.len() + matches.groups.len()) as u32;
        let report = DeliveryReport::new(sink, matched);
        for target in matches.plain.iter().chain(group_picks) {
            report.expect(target.key, target.label.clone());
        }
        report
    }

    /// Encodes `message` for delivery and checks the `DELIVER` frame's size;
    /// `None` when the publish was refused.
    fn encode_checked(&mut self, message: &Message, request_id: u64) -> Option<Bytes> {
        let encoded = match self.encode_for_delivery(message) {
            Ok(encoded) => encoded,
            Err(error) => {
                self.refuse(ErrorCode::InvalidField, request_id, error.to_string());
                return None;
            }
        };
        let max_frame_bytes = self.shared.config.limits.max_frame_bytes;
        let deliver_bytes = encoded_deliver_len(encoded.len());
        if deliver_bytes > max_frame_bytes as usize {
            let text = format!("the delivery would be {deliver_bytes} bytes; max_frame_bytes = {max_frame_bytes}");
            self.refuse(ErrorCode::FrameTooLarge, request_id, text);
            return None;
        }
        Some(encoded)
    }

    /// Sends a published message into the broker network when some other
    /// broker may want it (§10.7): the queue groups that matched here stay
    /// here, and an await=delivered report waits for the brokers reached.
    fn forward_published(
        &self,
        message: &Message,
        matches: &MatchResult<SubRef>,
        report: Option<&Arc<DeliveryReport>>,
        requested_timeout_ms: u32,
    ) -> Forwarded {
        if !self.shared.links.forwarding_active() {
            return Forwarded::default();
        }
        let local_groups = matches.groups.iter().map(|(name, _)| &**name).collect();
        let await_timeout_ms = self.await_timeout_ms(requested_timeout_ms);
        let request = LocalForward { message, local_groups, report, await_timeout_ms };
        self.shared.links.forward_local(request, &self.shared.stats)
    }

    /// Confirms a publish that matched nothing here: `no_subscribers` when it
    /// went nowhere else either; otherwise accepted, or (await=delivered)
    /// once the brokers it went to have reported.
    fn finish_remote_only(
        &mut self,
        forwarded: Forwarded,
        report: Option<Arc<DeliveryReport>>,
        confirm_to: &ConfirmTo,
        await_timeout_ms: u32,
    ) {
        if forwarded.receivers == 0 {
            self.counters.unmatched += 1;
            self.confirm(confirm_to, ConfirmStatus::NoSubscribers, 0);
            return;
        }
        match report {
            Some(report) => self.arm_report_timeout(report, await_timeout_ms),
            None => self.confirm(confirm_to, ConfirmStatus::Accepted, 0),
        }
    }

    /// The time that stamps messages of the current read.
    fn read_time(&mut self) -> u64 {
        if self.read_time_ns == 0 {
            self.read_time_ns = now_ns();
        }
        self.read_time_ns
    }

    /// Encodes `message` once for all its deliveries, in the next slice of
    /// the encode arena (a fresh chunk when the current one is full).
    fn encode_for_delivery(&mut self, message: &Message) -> Result<Bytes, EncodeError> {
        let metadata_len = message.metadata.as_ref().map_or(0, |metadata| metadata.len());
        let needed = ENCODED_OVERHEAD_BYTES + message.topic.as_str().len() + metadata_len + message.payload.len();
        if self.encode_arena.capacity() < needed {
            let chunk_bytes = self.shared.config.delivery.encode_arena_bytes;
            self.encode_arena = BytesMut::with_capacity(chunk_bytes.max(needed));
            self.counters.encode_arena_chunks += 1;
        }
        if let Err(error) = encode_message(&mut self.encode_arena, message) {
            self.encode_arena.clear();
            return Err(error);
        }
        Ok(self.encode_arena.split().freeze())
    }

    /// One member of each matched queue group; each group takes turns among
    /// its members on its own.
    fn pick_group_members(&mut self, matches: &MatchResult<SubRef>) -> Vec<SubRef> {
        let mut picks = Vec::new();
        for (group, members) in &matches.groups {
            let turn = match self.group_turns.get_mut(group) {
                Some(turn) => turn,
                None => self.group_turns.entry(group.clone()).or_insert(0),
            };
            *turn = turn.wrapping_add(1);
            picks.push(members[*turn % members.len()].clone());
        }
        picks
    }

    /// Serves the targets of a publish in order until done or blocked.
    pub(crate) fn continue_publish(&mut self, mut parked: Parked) {
        while let Some(target) = parked.target(parked.next).cloned() {
            match push_to(&self.shared, &target, Entry::new(parked.routed.clone())) {
                Pushed::Done => {}
                Pushed::Full => {
                    if self.parked.is_none() {
                        crate::stats::bump(&self.shared.stats.publisher_blocked);
                    }
                    self.parked = Some(parked);
                    return;
                }
                Pushed::Gone => {
                    if self.fail_over(&mut parked, &target) {
                        continue;
                    }
                }
            }
            parked.next += 1;
            parked.failovers = 0;
        }
        self.finish_publish(parked);
    }

    /// The target went away between matching and queuing. A queue-group
    /// target is replaced by another live member (true: serve it next);
    /// otherwise the copy is counted lost (false).
    fn fail_over(&mut self, parked: &mut Parked, gone: &SubRef) -> bool {
        let pick_index = parked.next.checked_sub(parked.matches.plain.len());
        let members = gone
            .group
            .as_ref()
            .and_then(|group| parked.matches.groups.iter().find(|(name, _)| name == group))
            .map(|(_, members)| members.as_slice())
            .unwrap_or_default();
        let alternative = members.iter().find(|member| member.key != gone.key && !member.conn.is_closing());
        match (pick_index, alternative) {
            (Some(pick_index), Some(member)) if parked.failovers < members.len() => {
                if let Some(report) = &parked.routed.report {
                    report.reassign(gone.key, member.key, member.label.clone());
                }
                parked.group_picks[pick_index] = member.clone();
                parked.failovers += 1;
                true
            }
            _ => {
                self.counters.subscriber_gone += 1;
                parked.routed.report_lost(gone.key);
                false
            }
        }
    }

    /// Sets a best-effort copy aside for [`Session::flush_staged`].
    fn stage(&mut self, target: SubRef, entry: Entry) {
        let conn_id = target.conn.id;
        match self.staged.iter_mut().find(|batch| batch.conn.id == conn_id) {
            Some(batch) => batch.items.push((target, entry)),
            None => {
                let conn = target.conn.clone();
                self.staged.push(StagedBatch { conn, items: vec![(target, entry)] });
            }
        }
    }

    /// Queues everything staged, one lock and one wake-up per connection.
    pub(crate) fn flush_staged(&mut self) {
        let mut lost = 0;
        for batch in &mut self.staged {
            if !batch.items.is_empty() {
                push_batch(&self.shared, &batch.conn, &mut batch.items, &mut lost);
            }
        }
        self.counters.subscriber_gone += lost;
        // Keep the buffers of live connections for the next read; forget the rest.
        self.staged.retain(|batch| !batch.conn.is_closing());
        self.staged.truncate(STAGED_CONNECTIONS_MAX);
    }

    fn finish_publish(&mut self, parked: Parked) {
        match &parked.routed.report {
            Some(report) => self.arm_report_timeout(report.clone(), parked.await_timeout_ms),
            None => self.confirm(&parked.confirm_to, ConfirmStatus::Accepted, parked.matched),
        }
    }

    /// How long an await=delivered publish waits, from what it asked for.
    fn await_timeout_ms(&self, requested_ms: u32) -> u32 {
        let delivery = &self.shared.config.delivery;
        match requested_ms {
            0 => delivery.await_timeout_ms_default,
            requested => requested.min(delivery.await_timeout_ms_max),
        }
    }

    fn arm_report_timeout(&self, report: Arc<DeliveryReport>, requested_ms: u32) {
        report.time_out_after(self.await_timeout_ms(requested_ms), self.shared.shutdown_watch());
    }

    /// Confirms a publish, through its gate when it is persistent; a
    /// best-effort publish that asked for no confirm gets none.
    fn confirm(&self, confirm_to: &ConfirmTo, status: ConfirmStatus, matched: u32) {
        let confirm = Confirm {
            request_id: confirm_to.request_id,
            status,
            matched,
            acked: 0,
            pending: Vec::new(),
            stream: String::new(),
            stream_seq: 0,
        };
        match &confirm_to.gate {
            Some(gate) => gate.confirm(confirm),
            None if confirm_to.wanted => self.conn.send_control(&Frame::Confirm(confirm)),
            None => {}
        }
    }
}
