//! `PUBLISH` from a client: the local entry to the [`crate::pipeline`].
//!
//! This is the hot path, and it never waits. The reader that decoded the
//! frame runs the pipeline's stages (validate, stamp, encode, store, route,
//! forward, deliver, confirm) and pushes a reference to one shared
//! [`Routed`] into each target's outbox. When a `block` queue is full for a
//! reliable message, the publish is *parked*: the [`Publisher`] remembers
//! which targets are left and its connection stops taking publishes (later
//! ones wait, in order) while it goes on reading acks, nacks, credit and
//! pings. That is what keeps a connection that both publishes and
//! subscribes from waiting on itself.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use sift_core::{DeliveryMode, MatchResult, Message};
use sift_proto::{publish_flags, Confirm, ConfirmStatus, ErrorCode, Frame, Publish};

use crate::conn::{send_refusal, ConnShared};
use crate::delivery::{push_batch, push_to, Pushed};
use crate::link::{Forwarded, LocalForward};
use crate::outbox::{Entry, Routed};
use crate::pipeline::{self, Pipeline, Refusal};
use crate::report::{DeliveryReport, ReportSink};
use crate::scheduler::{self, GroupsHere};
use crate::shared::BrokerShared;
use crate::store::gate::ConfirmGate;
use crate::store::stream::Stream;
use crate::subscription::SubRef;

/// Connections whose staging buffers a reader keeps between reads.
const STAGED_CONNECTIONS_MAX: usize = 64;

/// Best-effort copies staged for the subscriptions of one connection.
#[derive(Debug)]
struct StagedBatch {
    conn: Arc<ConnShared>,
    items: Vec<(SubRef, Entry)>,
}

/// A publish being served, and parked while a `block` queue is full.
///
/// Its targets are the plain subscriptions of the match, then one chosen
/// member per queue group; `next` is the first not yet served.
#[derive(Debug)]
struct Parked {
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

    /// Gives up: the message is lost for the targets not served (the
    /// publisher had no confirm, so a reliable client sends it again).
    fn abandon(self) {
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
struct ConfirmTo {
    request_id: u64,
    /// False for a best-effort publish that asked for no confirm.
    wanted: bool,
    gate: Option<Arc<ConfirmGate>>,
}

/// What a publish asked for besides its message.
#[derive(Debug, Clone, Copy)]
struct Asked {
    await_delivered: bool,
    await_timeout_ms: u32,
}

/// The publishing side of one client connection: its pipeline state, the
/// publish it may have parked and the best-effort copies staged during the
/// current read.
#[derive(Debug)]
pub(crate) struct Publisher {
    conn: Arc<ConnShared>,
    shared: Arc<BrokerShared>,
    pipeline: Pipeline,
    /// A publish waiting for space in a full `block` queue.
    parked: Option<Parked>,
    /// Best-effort copies staged during this read, per target connection.
    staged: Vec<StagedBatch>,
    /// The clock reading that stamps the messages of the current read, 0
    /// until the first of them needs it: they arrived together, and one
    /// reading per read keeps a clock call off each message.
    read_time_ns: u64,
}

impl Publisher {
    /// The publisher of connection `conn`.
    pub(crate) fn new(conn: Arc<ConnShared>, shared: Arc<BrokerShared>) -> Publisher {
        let pipeline = Pipeline::new(&shared.config);
        Publisher { conn, shared, pipeline, parked: None, staged: Vec::new(), read_time_ns: 0 }
    }

    /// Starts a read: its messages get a fresh time stamp.
    pub(crate) fn begin_read(&mut self) {
        self.read_time_ns = 0;
    }

    /// Ends a read: queues what was staged and publishes the counters.
    pub(crate) fn end_read(&mut self) {
        self.flush_staged();
        self.pipeline.flush_counters(&self.shared.stats);
    }

    /// Publishes this connection's batched counters (before a stats report).
    pub(crate) fn flush_counters(&mut self) {
        self.pipeline.flush_counters(&self.shared.stats);
    }

    /// True while a publish waits for space in a full queue.
    pub(crate) fn is_parked(&self) -> bool {
        self.parked.is_some()
    }

    /// The connection whose full queue holds the parked publish back.
    pub(crate) fn blocked_on(&self) -> Option<Arc<ConnShared>> {
        let parked = self.parked.as_ref()?;
        parked.target(parked.next).map(|target| target.conn.clone())
    }

    /// Tries the parked publish again; true when it is no longer parked.
    pub(crate) fn retry_parked(&mut self) -> bool {
        if let Some(parked) = self.parked.take() {
            self.continue_publish(parked);
        }
        self.parked.is_none()
    }

    /// Gives up the parked publish (the connection is closing).
    pub(crate) fn abandon_parked(&mut self) {
        if let Some(parked) = self.parked.take() {
            parked.abandon();
        }
    }

    /// Runs one publish through the pipeline. Leaves it parked when a
    /// `block` queue is full.
    pub(crate) fn publish(&mut self, publish: Publish) {
        let Publish { request_id, flags, await_timeout_ms, message } = publish;
        let mut message = *message;
        let await_delivered = flags & publish_flags::AWAIT_DELIVERED != 0;
        let asked = Asked { await_delivered, await_timeout_ms };
        if let Err(refusal) = pipeline::validate(&self.shared.config, &message) {
            return self.refuse(request_id, refusal);
        }
        if await_delivered && message.delivery_mode == DeliveryMode::BestEffort {
            // Waiting for acknowledgements only makes sense for messages that get them.
            message.delivery_mode = DeliveryMode::Reliable;
        }
        // A fire-and-forget publish (request id 0) gets no confirm even when
        // reliable: no publisher could tell it from another's. An MQTT QoS 0
        // publisher, whose every message is reliable, sends only these.
        let wanted = flags & publish_flags::CONFIRM != 0 || (message.delivery_mode.needs_ack() && request_id != 0);
        if let Err(refusal) = self.stamp(&mut message, flags & publish_flags::PUBLISHER_TIME != 0) {
            return self.refuse(request_id, refusal);
        }
        let release_ns = scheduler::release_ns_of(&message, message.timestamp_ns);
        if let (Some(_), Err(held_max)) = (release_ns, self.shared.scheduler.has_room()) {
            crate::stats::bump(&self.shared.stats.scheduled_refusals);
            let text = format!("the broker holds limits.scheduled_max = {held_max} messages for a later delivery time");
            return self.refuse(request_id, Refusal { code: ErrorCode::QueueFull, text });
        }
        let persistent = message.delivery_mode == DeliveryMode::Persistent;
        let streams = self.shared.storage.streams_for(&message.topic, persistent);
        // A message that is stored is encoded (and checked against the
        // frame limit) first, so that a refused publish is not stored.
        let encoded = match streams.is_empty() {
            true => None,
            false => match self.encode(&message, request_id) {
                Some(encoded) => Some(encoded),
                None => return,
            },
        };
        // A queue past its bound refuses before anything is stored.
        let queue_depth = self.shared.storage.queue_depth(&message.topic, &streams);
        if let Some(Err(waiting_max)) = queue_depth.as_ref().map(|depth| depth.admit()) {
            crate::stats::bump(&self.shared.stats.queue_full_refusals);
            let text = format!(
                "queue {} holds storage.queue_max_msgs = {waiting_max} messages waiting for a consumer; not stored",
                message.topic.as_str()
            );
            return self.refuse(request_id, Refusal { code: ErrorCode::QueueFull, text });
        }
        let Ok(gate) = self.store(&message, encoded.as_ref(), &streams, request_id) else {
            if let Some(depth) = queue_depth {
                depth.taken(); // Refused by the disk: it waits nowhere.
            }
            return;
        };
        let confirm_to = ConfirmTo { request_id, wanted, gate };
        let matches = self.pipeline.route(&self.shared.router, &message);
        match release_ns {
            Some(release_ns) => self.forward_and_hold(message, release_ns, &matches, &confirm_to, asked),
            None => self.forward_and_deliver(message, encoded, matches, confirm_to, asked),
        }
    }

    /// The stages after routing for a message with a later delivery time:
    /// forwarded to other brokers now (each holds its own copies), stored
    /// already, and held here for this broker's live subscribers until its
    /// time ([`crate::scheduler`]). The publisher is confirmed now; its
    /// await=delivered is not waited for.
    fn forward_and_hold(
        &mut self,
        message: Message,
        release_ns: u64,
        matches: &MatchResult<SubRef>,
        confirm_to: &ConfirmTo,
        asked: Asked,
    ) {
        self.forward(&message, matches, None, asked.await_timeout_ms);
        let matched = (matches.plain.len() + matches.groups.len()) as u32;
        self.shared.scheduler.hold(message, release_ns, GroupsHere::All);
        crate::stats::bump(&self.shared.stats.scheduled);
        self.confirm(confirm_to, ConfirmStatus::Accepted, matched);
    }

    /// Stamps the broker's fields: id, publisher, and the time, unless the
    /// publisher stamped its own (`publisher_time`), which must then lie
    /// within `limits.publisher_time_skew_ms_max` of the broker's clock.
    fn stamp(&mut self, message: &mut Message, publisher_time: bool) -> Result<(), Refusal> {
        let read_time_ns = self.read_time();
        if publisher_time {
            let skew_ns = message.timestamp_ns.abs_diff(read_time_ns);
            let skew_ns_max = self.shared.config.limits.publisher_time_skew_ms_max.saturating_mul(1_000_000);
            if skew_ns > skew_ns_max {
                let text = format!(
                    "timestamp_ns: the publisher's time is {} ms from the broker's clock; limits.publisher_time_skew_ms_max = {} (synchronise with TIME first)",
                    skew_ns / 1_000_000,
                    skew_ns_max / 1_000_000
                );
                return Err(Refusal { code: ErrorCode::InvalidField, text });
            }
        } else {
            message.timestamp_ns = read_time_ns;
            message.time_error_ns = 0;
        }
        message.id = self.shared.next_message_id.fetch_add(1, Ordering::Relaxed);
        message.publisher = self.conn.name.clone();
        self.pipeline.counters().published += 1;
        Ok(())
    }

    /// The time that stamps messages of the current read.
    fn read_time(&mut self) -> u64 {
        if self.read_time_ns == 0 {
            self.read_time_ns = self.shared.clock.now_ns();
        }
        self.read_time_ns
    }

    /// The encode stage; `None` when it refused the publish.
    fn encode(&mut self, message: &Message, request_id: u64) -> Option<Bytes> {
        match self.pipeline.encode(message) {
            Ok(encoded) => Some(encoded),
            Err(refusal) => {
                self.refuse(request_id, refusal);
                None
            }
        }
    }

    /// The store stage: appends `message` to the streams that hold it. A
    /// persistent message gets a [`ConfirmGate`] that holds its confirm
    /// until every append completed; it is refused at once (`Err`) while a
    /// stream's disk refuses writes. Other messages are stored without
    /// holding anything.
    fn store(
        &mut self,
        message: &Message,
        encoded: Option<&Bytes>,
        streams: &[Arc<Stream>],
        request_id: u64,
    ) -> Result<Option<Arc<ConfirmGate>>, ()> {
        let Some(encoded) = encoded else { return Ok(None) };
        let key = crate::replication::message_key(self.shared.links.name(), message);
        if message.delivery_mode != DeliveryMode::Persistent {
            pipeline::store_unconfirmed(streams, message, encoded, Some(key));
            return Ok(None);
        }
        if let Some((code, text)) =
            streams.iter().find_map(|stream| stream.refusal_while_failing(sift_core::system_now_ns()))
        {
            crate::stats::bump(&self.shared.stats.persistent_refused);
            self.refuse(request_id, Refusal { code, text });
            return Err(());
        }
        let gate = ConfirmGate::new(self.conn.clone(), request_id, streams.len());
        for stream in streams {
            stream.append_confirmed(message.timestamp_ns, encoded.clone(), key, gate.clone());
        }
        self.pipeline.counters().persistent_stored += 1;
        Ok(Some(gate))
    }

    /// The stages after routing: forward to other brokers, deliver to the
    /// local targets, confirm.
    fn forward_and_deliver(
        &mut self,
        message: Message,
        encoded: Option<Bytes>,
        matches: Arc<MatchResult<SubRef>>,
        confirm_to: ConfirmTo,
        asked: Asked,
    ) {
        let matched = (matches.plain.len() + matches.groups.len()) as u32;
        // Encoded before it is forwarded when a local target wants it and
        // the store stage did not need it: a publish refused here goes
        // nowhere.
        let encoded = match (encoded, matched) {
            (Some(encoded), _) => Some(encoded),
            (None, 0) => None,
            (None, _) => match self.encode(&message, confirm_to.request_id) {
                Some(encoded) => Some(encoded),
                None => return,
            },
        };
        let group_picks = self.pick_group_members(&matches, &message);
        let report = asked.await_delivered.then(|| self.start_report(&matches, &group_picks, &confirm_to));
        let forwarded = self.forward(&message, &matches, report.as_ref(), asked.await_timeout_ms);
        let Some(encoded) = encoded.filter(|_| matched > 0) else {
            return self.finish_remote_only(forwarded, report, &confirm_to, asked.await_timeout_ms);
        };
        if !message.delivery_mode.needs_ack() {
            // Best-effort: nothing to wait for and nothing to report; stage
            // the copies and be done.
            let routed = Arc::new(Routed::new(&message, encoded, None));
            for target in matches.plain.iter().chain(&group_picks) {
                self.stage(target.clone(), Entry::new(routed.clone()));
            }
            return self.confirm(&confirm_to, ConfirmStatus::Accepted, matched);
        }
        let routed = Arc::new(Routed::new(&message, encoded, report));
        let await_timeout_ms = asked.await_timeout_ms;
        self.continue_publish(Parked {
            routed,
            matches,
            group_picks,
            next: 0,
            failovers: 0,
            confirm_to,
            matched,
            await_timeout_ms,
        });
    }

    /// One member of each matched queue group: the message group's member
    /// when the message names one, else the next in turn.
    fn pick_group_members(&mut self, matches: &MatchResult<SubRef>, message: &Message) -> Vec<SubRef> {
        if matches.groups.is_empty() {
            return Vec::new();
        }
        let message_group = pipeline::message_group_of(message);
        let groups = matches.groups.iter();
        groups.filter_map(|(group, members)| self.pipeline.pick_member(group, members, message_group)).collect()
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

    /// The forward stage: into the broker network when some other broker
    /// may want it (§10.7); the queue groups that matched here stay here,
    /// and an await=delivered report waits for the brokers reached.
    fn forward(
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
            self.pipeline.counters().unmatched += 1;
            self.confirm(confirm_to, ConfirmStatus::NoSubscribers, 0);
            return;
        }
        match report {
            Some(report) => self.arm_report_timeout(report, await_timeout_ms),
            None => self.confirm(confirm_to, ConfirmStatus::Accepted, 0),
        }
    }

    /// Serves the targets of a publish in order until done or blocked.
    fn continue_publish(&mut self, mut parked: Parked) {
        while let Some(target) = parked.target(parked.next).cloned() {
            match push_to(&self.shared.stats, &target, Entry::new(parked.routed.clone())) {
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
                self.pipeline.counters().subscriber_gone += 1;
                parked.routed.report_lost(gone.key);
                false
            }
        }
    }

    /// Sets a best-effort copy aside for [`Publisher::flush_staged`].
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
                push_batch(&self.shared.stats, &batch.conn, &mut batch.items, &mut lost);
            }
        }
        self.pipeline.counters().subscriber_gone += lost;
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

    /// Sends a non-fatal `ERROR` for the publish `request_id`.
    fn refuse(&self, request_id: u64, refusal: Refusal) {
        send_refusal(&self.shared.stats, &self.conn, refusal.code, request_id, refusal.text);
    }
}
