//! Everything queued towards one connection: response frames, one bounded
//! queue per subscription, and the reliable deliveries awaiting an ack.
//!
//! The outbox is plain data behind the connection's mutex; it does no I/O and
//! never blocks. Publishers' readers [`Outbox::push`] into it, the
//! connection's writer [`Outbox::drain`]s it into a write buffer, and the
//! connection's own reader applies acks. Anything that must reach another
//! connection (a report's confirm) is returned as a [`ReportEvent`] and
//! handled by the caller after the lock is released, so that no code path
//! ever holds two outboxes at once.
//!
//! Invariants, checked by the tests: `pending_bytes` is the sum of the sizes
//! of queued deliveries plus unwritten control bytes; a subscription is in
//! `ready` at most once; `SubQueue::len` is the number of entries in its levels.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use sift_core::{Message, TopicName};
use sift_proto::{
    deliver_flags, encode_deliver_prefix, encode_stream_deliver_prefix, encoded_deliver_len,
    encoded_stream_deliver_len, AckMode, Frame, QueuePolicy,
};

use crate::budget::MemoryBudget;
use crate::report::DeliveryReport;

/// Message priorities 0..=9, one queue level each.
pub const PRIORITY_LEVELS: usize = 10;

/// Most deliveries taken from one subscription before the writer moves on to
/// the next ready one, so that one busy subscription cannot starve the others
/// on the same connection.
pub const DRAIN_TURN_MAX: usize = 64;

/// A message routed once and shared by all the queues it was put in.
///
/// It holds the encoded message and the few fields delivery needs, not the
/// decoded [`Message`]: a decoded message shares reference-counted parts
/// (the read buffer under its payload, the topic, the publisher name) with
/// every other message of its connection, and dropping those on the
/// subscriber's writer thread would bounce their counters between cores on
/// every message. The decoded message is dropped on the reader's thread.
#[derive(Debug)]
pub struct Routed {
    /// The message's encoding, written after each `DELIVER` prefix.
    pub encoded: Bytes,
    /// Delivery priority, 0-9.
    pub priority: u8,
    /// True for reliable messages: acknowledged and redelivered.
    pub needs_ack: bool,
    /// Absolute expiry in nanoseconds since the Unix epoch; 0 means never.
    pub expiry_ns: u64,
    /// The await=delivered report, if the publisher asked for one.
    pub report: Option<Arc<DeliveryReport>>,
    /// Set for a stored message read by a stream consumer: its stream
    /// sequence (carried in the `DELIVER`) and the consumer whose position
    /// its acknowledgement moves.
    pub stream: Option<StreamDelivery>,
    /// The message decoded from `encoded`, once for all of its deliveries
    /// that a front-end's door writer writes ([`Routed::message`]): with a
    /// thousand selector subscriptions, one message makes ten deliveries.
    decoded: std::sync::OnceLock<Option<Box<Message>>>,
}

/// A stream consumer as an outbox sees it: the position that a stream
/// subscriber's acknowledgements move. The consumer itself lives in the
/// store (`crate::store::consumer`), above connection data; the outbox
/// knows it only through this.
pub trait StreamPosition: Send + Sync + std::fmt::Debug {
    /// The subscriber is done with the stored message `seq`: acknowledged
    /// it, or it was given up for good.
    fn done(&self, seq: u64);

    /// Stores the position once for a batch of [`StreamPosition::done`]
    /// calls and wakes the consumer: its subscriber's window opened.
    fn persist_and_wake(&self);
}

/// A stored message on its way to a stream subscriber.
#[derive(Debug)]
pub struct StreamDelivery {
    /// Its sequence in the stream.
    pub seq: u64,
    /// The consumer that read it.
    pub consumer: Arc<dyn StreamPosition>,
}

/// Offset of the fixed fields (priority, mode, hop count, flags, id,
/// sequence, timestamp, expiry) after a message encoding's topic.
const FIXED_AFTER_TOPIC: usize = 2;
/// Offset of the expiry within the fixed fields.
const EXPIRY_OFFSET_IN_FIXED: usize = 4 + 3 * 8;
/// Offset of the time stamp within the fixed fields (after id and sequence).
const TIMESTAMP_OFFSET_IN_FIXED: usize = 4 + 2 * 8;

impl Routed {
    /// Routing facts of `message`, with its encoding.
    pub fn new(message: &Message, encoded: Bytes, report: Option<Arc<DeliveryReport>>) -> Routed {
        Routed {
            encoded,
            priority: message.priority.level(),
            needs_ack: message.delivery_mode.needs_ack(),
            expiry_ns: message.expiry_ns,
            report,
            stream: None,
            decoded: std::sync::OnceLock::new(),
        }
    }

    /// The message, decoded from its encoding the first time a delivery
    /// asks and kept for the others; `None` if it does not decode (the
    /// broker encoded it, or read it back checksummed: a bug, not input).
    pub fn message(&self) -> Option<&Message> {
        self.decoded.get_or_init(|| sift_proto::decode_message(&self.encoded).ok().map(Box::new)).as_deref()
    }

    /// A stored message for a stream subscriber, its routing facts read
    /// from its encoding (as the broker stored it); `None` when the
    /// encoding is too short to hold them.
    pub fn stored(encoded: Bytes, seq: u64, consumer: Arc<dyn StreamPosition>) -> Option<Routed> {
        let topic_len = usize::from(u16::from_be_bytes([*encoded.first()?, *encoded.get(1)?]));
        let fixed = FIXED_AFTER_TOPIC + topic_len;
        let priority = (*encoded.get(fixed)?).min(sift_core::message::PRIORITY_MAX);
        let expiry_at = fixed + EXPIRY_OFFSET_IN_FIXED;
        let expiry_ns = u64::from_be_bytes(encoded.get(expiry_at..expiry_at + 8)?.try_into().ok()?);
        Some(Routed {
            encoded,
            priority,
            // Every stored message is acknowledged by a stream subscriber:
            // its acknowledgement is what moves the consumer's position.
            needs_ack: true,
            expiry_ns,
            report: None,
            stream: Some(StreamDelivery { seq, consumer }),
            decoded: std::sync::OnceLock::new(),
        })
    }

    /// The broker's time stamp, read back from the encoding; 0 when the
    /// encoding is too short to hold it.
    pub fn timestamp_ns(&self) -> u64 {
        let encoded = &self.encoded;
        let Some(length_bytes) = encoded.get(..2) else { return 0 };
        let topic_len = usize::from(u16::from_be_bytes([length_bytes[0], length_bytes[1]]));
        let at = FIXED_AFTER_TOPIC + topic_len + TIMESTAMP_OFFSET_IN_FIXED;
        encoded.get(at..at + 8).and_then(|bytes| bytes.try_into().ok()).map_or(0, u64::from_be_bytes)
    }

    /// The stream sequence of a stored message, 0 otherwise.
    pub fn stream_seq(&self) -> u64 {
        self.stream.as_ref().map_or(0, |stream| stream.seq)
    }

    /// True when the message has an expiry and it is at or before `now_ns`.
    pub fn is_expired(&self, now_ns: u64) -> bool {
        self.expiry_ns != 0 && self.expiry_ns <= now_ns
    }

    /// Tells the await=delivered report, if any, that subscription `key`
    /// lost this message. Must not be called under an outbox lock (the
    /// report may confirm to its publisher); under a lock, collect
    /// [`failure_event`]s instead.
    pub fn report_lost(&self, key: u64) {
        if let Some(report) = &self.report {
            report.failed(key);
        }
    }

    /// The topic, read back from the encoding (the first field). Used off
    /// the hot path, when a departing subscriber's messages are re-routed.
    pub fn topic(&self) -> Option<TopicName> {
        topic_of_encoding(&self.encoded)
    }
}

/// The topic of an encoded message (its first field), or `None` when the
/// encoding is too short or the topic invalid.
pub fn topic_of_encoding(encoded: &[u8]) -> Option<TopicName> {
    let length = usize::from(u16::from_be_bytes([*encoded.first()?, *encoded.get(1)?]));
    let text = std::str::from_utf8(encoded.get(2..2 + length)?).ok()?;
    TopicName::new(text).ok()
}

/// One message in one subscription's queue.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The shared message.
    pub routed: Arc<Routed>,
    /// Times it was sent before; non-zero means redelivered.
    pub attempts: u32,
}

impl Entry {
    /// A first delivery of `routed`.
    pub fn new(routed: Arc<Routed>) -> Entry {
        Entry { routed, attempts: 0 }
    }

    /// Bytes this delivery takes on the wire, counted against pending bytes.
    pub fn size(&self) -> u64 {
        let body_len = self.routed.encoded.len();
        let frame_len = match self.routed.stream {
            Some(_) => encoded_stream_deliver_len(body_len),
            None => encoded_deliver_len(body_len),
        };
        (sift_proto::LENGTH_PREFIX_BYTES + frame_len) as u64
    }

    fn level(&self) -> usize {
        usize::from(self.routed.priority)
    }

    fn needs_ack(&self) -> bool {
        self.routed.needs_ack
    }
}

/// What happened to a report, to be applied outside the outbox lock.
#[derive(Debug)]
pub enum ReportEvent {
    /// The subscription acknowledged (or auto-acknowledged) the message.
    Acked(Arc<DeliveryReport>, u64),
    /// The subscription lost the message.
    Failed(Arc<DeliveryReport>, u64),
    /// A stream subscriber is done with the stored message of this
    /// sequence (acknowledged it, or it was given up for good).
    StreamDone(Arc<dyn StreamPosition>, u64),
}

impl ReportEvent {
    /// Applies the event to its report or consumer. A consumer's position
    /// is stored by the caller once per batch ([`crate::conn::apply_events`]).
    pub fn apply(self) {
        match self {
            ReportEvent::Acked(report, key) => report.acked(key),
            ReportEvent::Failed(report, key) => report.failed(key),
            ReportEvent::StreamDone(consumer, seq) => consumer.done(seq),
        }
    }
}

/// The event for `entry` having been given up by subscription `key`, if it
/// has a report or a stream consumer.
pub fn failure_event(entry: &Entry, key: u64) -> Option<ReportEvent> {
    if let Some(stream) = &entry.routed.stream {
        return Some(ReportEvent::StreamDone(stream.consumer.clone(), stream.seq));
    }
    entry.routed.report.clone().map(|report| ReportEvent::Failed(report, key))
}

/// The event for `entry` having been acknowledged by subscription `key`.
fn ack_event(entry: &Entry, key: u64) -> Option<ReportEvent> {
    if let Some(stream) = &entry.routed.stream {
        return Some(ReportEvent::StreamDone(stream.consumer.clone(), stream.seq));
    }
    entry.routed.report.clone().map(|report| ReportEvent::Acked(report, key))
}

/// Options of a subscription's queue.
#[derive(Debug, Clone, Copy)]
pub struct QueueOptions {
    /// Broker-wide key of the subscription.
    pub key: u64,
    /// Bound in messages.
    pub capacity: u32,
    /// What a full queue does.
    pub policy: QueuePolicy,
    /// How deliveries are acknowledged.
    pub ack_mode: AckMode,
    /// Most reliable deliveries in flight.
    pub max_unacked: u32,
    /// `Some(n)` in credit mode: deliveries allowed before more `FLOW`.
    pub credit: Option<u64>,
}

/// One subscription's bounded queue.
#[derive(Debug)]
struct SubQueue {
    options: QueueOptions,
    levels: [VecDeque<Entry>; PRIORITY_LEVELS],
    /// Bit `n` set when `levels[n]` is not empty.
    nonempty: u16,
    len: usize,
    unacked: u32,
    in_ready: bool,
}

impl SubQueue {
    fn new(options: QueueOptions) -> SubQueue {
        SubQueue { options, levels: Default::default(), nonempty: 0, len: 0, unacked: 0, in_ready: false }
    }

    fn capacity(&self) -> usize {
        match self.options.policy {
            QueuePolicy::KeepLast(count) => count.min(self.options.capacity) as usize,
            _ => self.options.capacity as usize,
        }
    }

    fn push_back(&mut self, entry: Entry) {
        let level = entry.level();
        self.levels[level].push_back(entry);
        self.nonempty |= 1 << level;
        self.len += 1;
    }

    fn push_front(&mut self, entry: Entry) {
        let level = entry.level();
        self.levels[level].push_front(entry);
        self.nonempty |= 1 << level;
        self.len += 1;
    }

    fn pop_level(&mut self, level: usize) -> Option<Entry> {
        let entry = self.levels[level].pop_front()?;
        if self.levels[level].is_empty() {
            self.nonempty &= !(1 << level);
        }
        self.len -= 1;
        Some(entry)
    }

    /// The oldest entry of the highest priority: the next to send.
    fn pop_next(&mut self) -> Option<Entry> {
        if self.nonempty == 0 {
            return None;
        }
        self.pop_level(15 - self.nonempty.leading_zeros() as usize)
    }

    /// The oldest entry of the lowest priority: the first to give up.
    fn pop_least_wanted(&mut self) -> Option<Entry> {
        if self.nonempty == 0 {
            return None;
        }
        self.pop_level(self.nonempty.trailing_zeros() as usize)
    }

    fn drain_all(&mut self) -> Vec<Entry> {
        let mut entries = Vec::with_capacity(self.len);
        while let Some(entry) = self.pop_next() {
            entries.push(entry);
        }
        entries
    }

    /// True when the writer may send this subscription's next entry.
    fn eligible(&self) -> bool {
        let window_open = self.options.ack_mode == AckMode::Auto || self.unacked < self.options.max_unacked;
        self.len > 0 && self.options.credit != Some(0) && window_open
    }
}

/// A reliable delivery written and not yet acknowledged.
#[derive(Debug)]
struct Unacked {
    sub_id: u32,
    entry: Entry,
    sent_at: Instant,
}

/// Why credit could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditError {
    /// No subscription with that id.
    UnknownSubscription,
    /// The subscription was not opened in credit mode.
    NotInCreditMode,
}

/// Result of [`Outbox::push`].
#[derive(Debug)]
pub enum PushOutcome {
    /// Queued; wake the writer if the flag says so.
    Queued {
        /// True when the writer was idle and must be woken.
        wake_writer: bool,
    },
    /// The queue was full and its policy dropped the new entry.
    Dropped(Entry),
    /// `keep-last` evicted this older entry to make room.
    Evicted(Entry),
    /// Full under `block` for a reliable entry: wait for space and retry.
    Full(Entry),
    /// Full under `disconnect`: the subscriber must be disconnected.
    Disconnect(Entry),
    /// The subscription or the connection is gone.
    Gone(Entry),
}

/// Everything queued towards one connection.
#[derive(Debug)]
pub struct Outbox {
    control: BytesMut,
    /// Control frames as values, for a local session (whose control frames
    /// all come this way, so that their order is kept): with their size as
    /// encoded, for `pending_bytes`.
    control_frames: Vec<(Frame, u64)>,
    /// The sum of `control_frames`' sizes.
    control_frames_bytes: u64,
    subs: HashMap<u32, SubQueue, rustc_hash::FxBuildHasher>,
    ready: VecDeque<u32>,
    unacked: HashMap<u64, Unacked, rustc_hash::FxBuildHasher>,
    next_tag: u64,
    pending: PendingBytes,
    max_pending_bytes: u64,
    closed: bool,
    writer_idle: bool,
}

impl Outbox {
    /// An empty outbox bounded by `max_pending_bytes` and by `budget`, which
    /// every outbox of the broker shares.
    pub fn with_budget(max_pending_bytes: u64, budget: Arc<MemoryBudget>) -> Outbox {
        let mut outbox = Outbox::new(max_pending_bytes);
        outbox.pending.budget = Some(budget);
        outbox
    }

    /// An empty outbox bounded by `max_pending_bytes` alone.
    pub fn new(max_pending_bytes: u64) -> Outbox {
        Outbox {
            control: BytesMut::new(),
            control_frames: Vec::new(),
            control_frames_bytes: 0,
            subs: HashMap::default(),
            ready: VecDeque::new(),
            unacked: HashMap::default(),
            next_tag: 1,
            pending: PendingBytes { bytes: 0, budget: None },
            max_pending_bytes,
            closed: false,
            writer_idle: false,
        }
    }

    /// Bytes queued and not yet handed to the writer.
    pub fn pending_bytes(&self) -> u64 {
        self.pending.bytes
    }

    /// True once the connection is closing: nothing new is accepted.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Stops accepting deliveries; what is queued may still be written.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Deliveries queued for `sub_id` (not counting unacknowledged ones).
    pub fn queued(&self, sub_id: u32) -> usize {
        self.subs.get(&sub_id).map_or(0, |sub| sub.len)
    }

    /// Reliable deliveries written and awaiting an ack.
    pub fn unacked_count(&self) -> usize {
        self.unacked.len()
    }

    /// Creates the queue of a new subscription.
    pub fn add_subscription(&mut self, sub_id: u32, options: QueueOptions) {
        self.subs.insert(sub_id, SubQueue::new(options));
    }

    /// Returns true (once) when the writer is idle and needs a wake-up.
    pub fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.writer_idle)
    }

    /// Appends an encoded control frame. Returns false when unwritten
    /// control frames alone exceed `max_pending_bytes`: the client is not
    /// reading its responses (the caller closes it). Deliveries do not count
    /// here; their queues have their own bounds and policies.
    pub fn push_control(&mut self, frame_bytes: &[u8]) -> bool {
        self.control.extend_from_slice(frame_bytes);
        self.pending.add(frame_bytes.len() as u64);
        self.control.len() as u64 <= self.max_pending_bytes
    }

    /// Appends a control frame as a value (a local session's), counted as
    /// `frame_bytes`; false as [`Outbox::push_control`].
    pub fn push_control_frame(&mut self, frame: Frame, frame_bytes: u64) -> bool {
        debug_assert!(self.control.is_empty(), "one connection's control frames come one way");
        self.control_frames.push((frame, frame_bytes));
        self.control_frames_bytes += frame_bytes;
        self.pending.add(frame_bytes);
        self.control_frames_bytes <= self.max_pending_bytes
    }

    /// Queues `entry` for subscription `sub_id`, applying its policy when full.
    pub fn push(&mut self, sub_id: u32, entry: Entry) -> PushOutcome {
        if self.closed {
            return PushOutcome::Gone(entry);
        }
        let over_bytes =
            self.pending.bytes + entry.size() > self.max_pending_bytes || self.pending.over_budget(entry.size());
        let Some(sub) = self.subs.get_mut(&sub_id) else {
            return PushOutcome::Gone(entry);
        };
        let mut outcome = PushOutcome::Queued { wake_writer: false };
        if sub.len >= sub.capacity() || over_bytes {
            match sub.options.policy {
                QueuePolicy::Block if entry.needs_ack() => return PushOutcome::Full(entry),
                QueuePolicy::Block | QueuePolicy::DropNew => return PushOutcome::Dropped(entry),
                QueuePolicy::Disconnect => return PushOutcome::Disconnect(entry),
                QueuePolicy::KeepLast(_) => match sub.pop_least_wanted() {
                    Some(evicted) => {
                        self.pending.sub(evicted.size());
                        outcome = PushOutcome::Evicted(evicted);
                    }
                    None => return PushOutcome::Dropped(entry),
                },
            }
        }
        self.pending.add(entry.size());
        sub.push_back(entry);
        self.mark_ready(sub_id);
        if let PushOutcome::Queued { wake_writer } = &mut outcome {
            *wake_writer = self.take_wake();
        } else {
            // An eviction also queued the new entry; the writer still needs waking.
            self.writer_idle = false;
        }
        outcome
    }

    /// Queues `entry` ignoring the bound: used when a queue-group member
    /// takes over messages that were already accounted to another member.
    pub fn push_unbounded(&mut self, sub_id: u32, entry: Entry) -> Result<bool, Entry> {
        if self.closed {
            return Err(entry);
        }
        let Some(sub) = self.subs.get_mut(&sub_id) else {
            return Err(entry);
        };
        self.pending.add(entry.size());
        sub.push_back(entry);
        self.mark_ready(sub_id);
        Ok(self.take_wake())
    }

    fn mark_ready(&mut self, sub_id: u32) {
        if let Some(sub) = self.subs.get_mut(&sub_id) {
            if !sub.in_ready && sub.eligible() {
                sub.in_ready = true;
                self.ready.push_back(sub_id);
            }
        }
    }
}

/// What [`Outbox::drain`] produced besides bytes.
#[derive(Debug, Default)]
pub struct Drained {
    /// Deliveries written into the buffer.
    pub delivered: u64,
    /// Deliveries dropped because their message had expired.
    pub expired: u64,
    /// Report events to apply after unlocking.
    pub events: Vec<ReportEvent>,
    /// The broker's time stamp of the first live (not stored) message
    /// written, 0 when none was: one latency sample per batch.
    pub sample_stamp_ns: u64,
}

impl Outbox {
    /// Moves control frames and then deliveries into `buf` until it holds
    /// `budget` bytes or nothing is eligible. Highest priority first within a
    /// subscription; ready subscriptions take turns.
    pub fn drain(&mut self, sink: &mut impl DrainSink, budget: usize, now_ns: u64, now: Instant) -> Drained {
        let mut drained = Drained::default();
        if !self.control.is_empty() {
            self.pending.sub(self.control.len() as u64);
            sink.control(&self.control);
            self.control.clear();
        }
        for (frame, frame_bytes) in std::mem::take(&mut self.control_frames) {
            self.pending.sub(frame_bytes);
            sink.control_frame(frame, frame_bytes as usize);
        }
        self.control_frames_bytes = 0;
        // Once closing, only the control frames (ending with the final ERROR
        // or CLOSE) are written: no delivery may follow the last frame.
        while sink.taken_bytes() < budget && !self.closed {
            let Some(sub_id) = self.ready.pop_front() else {
                break;
            };
            let Some(sub) = self.subs.get_mut(&sub_id) else {
                continue;
            };
            sub.in_ready = false;
            for _ in 0..DRAIN_TURN_MAX {
                if !sub.eligible() || sink.taken_bytes() >= budget {
                    break;
                }
                let Some(entry) = sub.pop_next() else { break };
                self.pending.sub(entry.size());
                if entry.routed.is_expired(now_ns) {
                    drained.expired += 1;
                    drained.events.extend(failure_event(&entry, sub.options.key));
                    continue;
                }
                let mut tag = 0;
                if entry.needs_ack() {
                    match sub.options.ack_mode {
                        AckMode::Client => {
                            tag = self.next_tag;
                            self.next_tag += 1;
                            sub.unacked += 1;
                            let unacked = Unacked { sub_id, entry: entry.clone(), sent_at: now };
                            self.unacked.insert(tag, unacked);
                        }
                        AckMode::Auto => drained.events.extend(ack_event(&entry, sub.options.key)),
                    }
                }
                if let Some(credit) = &mut sub.options.credit {
                    *credit -= 1;
                }
                let flags = if entry.attempts > 0 { deliver_flags::REDELIVERED } else { 0 };
                sink.deliver(sub_id, tag, flags, &entry.routed);
                drained.delivered += 1;
                if drained.sample_stamp_ns == 0 && entry.routed.stream.is_none() {
                    drained.sample_stamp_ns = entry.routed.timestamp_ns();
                }
            }
            if sub.eligible() {
                sub.in_ready = true;
                self.ready.push_back(sub_id);
            }
        }
        if sink.taken_bytes() == 0 {
            self.writer_idle = true;
        }
        drained
    }
}

/// An outbox that goes (its connection closed) gives back to the broker's
/// budget what it still counted.
impl Drop for Outbox {
    fn drop(&mut self) {
        if let Some(budget) = &self.pending.budget {
            budget.give_back(self.pending.bytes);
        }
    }
}

/// An outbox's queued bytes, counted against the broker's budget as well
/// (a field of its own, so that it can change while a queue is borrowed).
#[derive(Debug)]
struct PendingBytes {
    bytes: u64,
    /// The broker-wide budget the bytes also count against.
    budget: Option<Arc<MemoryBudget>>,
}

impl PendingBytes {
    /// Counts `bytes` more as queued, here and in the broker's budget.
    fn add(&mut self, bytes: u64) {
        self.bytes += bytes;
        if let Some(budget) = &self.budget {
            budget.take(bytes);
        }
    }

    /// Counts `bytes` as no longer queued, here and in the broker's budget.
    fn sub(&mut self, bytes: u64) {
        debug_assert!(self.bytes >= bytes, "pending bytes cover what leaves the outbox");
        self.bytes -= bytes;
        if let Some(budget) = &self.budget {
            budget.give_back(bytes);
        }
    }

    /// True when `bytes` more would pass the broker's budget.
    fn over_budget(&self, bytes: u64) -> bool {
        self.budget.as_ref().is_some_and(|budget| budget.would_exceed(bytes))
    }
}

/// Where [`Outbox::drain`] puts what it takes: a socket's write buffer
/// (encoded frames), or a local session's batch of frame values
/// (`crate::local`), so that one drain serves both adapters.
pub trait DrainSink {
    /// Bytes taken so far; the drain stops at its budget.
    fn taken_bytes(&self) -> usize;
    /// Takes encoded control frames (confirms, errors, replies).
    fn control(&mut self, encoded: &[u8]);
    /// Takes a control frame queued as a value, of `frame_bytes` encoded.
    fn control_frame(&mut self, frame: Frame, frame_bytes: usize);
    /// Takes one delivery of `routed` to subscription `sub_id`.
    fn deliver(&mut self, sub_id: u32, tag: u64, flags: u8, routed: &Routed);
}

/// A socket's write buffer: each delivery is its `DELIVER` prefix followed
/// by the message's shared encoding.
impl DrainSink for BytesMut {
    fn taken_bytes(&self) -> usize {
        self.len()
    }

    fn control(&mut self, encoded: &[u8]) {
        self.extend_from_slice(encoded);
    }

    fn control_frame(&mut self, frame: Frame, _frame_bytes: usize) {
        // Sockets queue their control frames encoded; this only keeps the
        // sink whole.
        let _ = frame.encode(self);
    }

    fn deliver(&mut self, sub_id: u32, tag: u64, flags: u8, routed: &Routed) {
        let body_len = routed.encoded.len();
        match routed.stream_seq() {
            0 => encode_deliver_prefix(self, sub_id, tag, flags, body_len),
            seq => encode_stream_deliver_prefix(self, sub_id, tag, flags, seq, body_len),
        }
        self.extend_from_slice(&routed.encoded);
    }
}

/// What an ack, nack or timeout scan changed.
#[derive(Debug, Default)]
pub struct Settled {
    /// Report events to apply after unlocking.
    pub events: Vec<ReportEvent>,
    /// Deliveries put back in their queue for another attempt.
    pub requeued: u64,
    /// Deliveries given up (nack without requeue, too many attempts).
    pub rejected: u64,
    /// Tags that were not awaiting an ack.
    pub unknown_tags: u64,
    /// True when the writer must be woken.
    pub wake_writer: bool,
}

impl Outbox {
    /// Applies acknowledgements.
    pub fn ack(&mut self, tags: &[u64]) -> Settled {
        let mut settled = Settled::default();
        for tag in tags {
            let Some(unacked) = self.unacked.remove(tag) else {
                settled.unknown_tags += 1;
                continue;
            };
            let Some(sub) = self.subs.get_mut(&unacked.sub_id) else {
                continue;
            };
            sub.unacked -= 1;
            settled.events.extend(ack_event(&unacked.entry, sub.options.key));
            self.mark_ready(unacked.sub_id);
        }
        settled.wake_writer = !self.ready.is_empty() && self.take_wake();
        settled
    }

    /// Applies a negative acknowledgement: requeue at the front, or drop.
    pub fn nack(&mut self, tag: u64, requeue: bool, max_redeliveries: u32) -> Settled {
        let mut settled = Settled::default();
        match self.unacked.remove(&tag) {
            Some(unacked) => self.retry(unacked, requeue, max_redeliveries, &mut settled),
            None => settled.unknown_tags += 1,
        }
        settled.wake_writer = !self.ready.is_empty() && self.take_wake();
        settled
    }

    /// Requeues every delivery unacknowledged for longer than `ack_timeout`,
    /// oldest first, at the front of its queue.
    pub fn requeue_expired(&mut self, now: Instant, ack_timeout: Duration, max_redeliveries: u32) -> Settled {
        let mut settled = Settled::default();
        let mut expired: Vec<u64> = self
            .unacked
            .iter()
            .filter(|(_, unacked)| now.saturating_duration_since(unacked.sent_at) >= ack_timeout)
            .map(|(tag, _)| *tag)
            .collect();
        // Pushing to the front in reverse tag order leaves the oldest first.
        expired.sort_unstable_by(|left, right| right.cmp(left));
        for tag in expired {
            if let Some(unacked) = self.unacked.remove(&tag) {
                self.retry(unacked, true, max_redeliveries, &mut settled);
            }
        }
        settled.wake_writer = !self.ready.is_empty() && self.take_wake();
        settled
    }

    fn retry(&mut self, unacked: Unacked, requeue: bool, max_redeliveries: u32, settled: &mut Settled) {
        let Some(sub) = self.subs.get_mut(&unacked.sub_id) else {
            return;
        };
        sub.unacked -= 1;
        let mut entry = unacked.entry;
        entry.attempts += 1;
        let exhausted = max_redeliveries > 0 && entry.attempts > max_redeliveries;
        if !requeue || exhausted {
            settled.rejected += 1;
            settled.events.extend(failure_event(&entry, sub.options.key));
        } else {
            settled.requeued += 1;
            self.pending.add(entry.size());
            sub.push_front(entry);
        }
        self.mark_ready(unacked.sub_id);
    }

    /// Adds delivery credit to a subscription opened in credit mode.
    pub fn add_credit(&mut self, sub_id: u32, credit: u32) -> Result<(), CreditError> {
        let Some(sub) = self.subs.get_mut(&sub_id) else {
            return Err(CreditError::UnknownSubscription);
        };
        let Some(current) = sub.options.credit.as_mut() else {
            return Err(CreditError::NotInCreditMode);
        };
        *current = current.saturating_add(u64::from(credit));
        self.mark_ready(sub_id);
        Ok(())
    }

    /// Removes a subscription's queue and returns everything it still held,
    /// oldest first: the unacknowledged deliveries (written once, so their
    /// attempt count goes up) and then the queued ones.
    pub fn remove_subscription(&mut self, sub_id: u32) -> Vec<Entry> {
        let Some(mut sub) = self.subs.remove(&sub_id) else { return Vec::new() };
        let mut tags: Vec<u64> =
            self.unacked.iter().filter(|(_, unacked)| unacked.sub_id == sub_id).map(|(tag, _)| *tag).collect();
        tags.sort_unstable();
        let mut entries: Vec<Entry> = tags
            .iter()
            .filter_map(|tag| self.unacked.remove(tag))
            .map(|unacked| Entry { attempts: unacked.entry.attempts + 1, ..unacked.entry })
            .collect();
        let queued = sub.drain_all();
        self.pending.sub(queued.iter().map(Entry::size).sum::<u64>());
        entries.extend(queued);
        self.ready.retain(|ready| *ready != sub_id);
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::{DeliveryMode, Priority, TopicName};

    fn entry(priority: u8, mode: DeliveryMode, payload: &str) -> Entry {
        let mut message = Message::new(TopicName::new("t").expect("valid"), payload.to_string());
        message.priority = Priority::new(priority).expect("0-9");
        message.delivery_mode = mode;
        let mut encoded = BytesMut::new();
        sift_proto::encode_message(&mut encoded, &message).expect("encodable");
        Entry::new(Arc::new(Routed::new(&message, encoded.freeze(), None)))
    }

    fn options(policy: QueuePolicy, capacity: u32, ack_mode: AckMode) -> QueueOptions {
        QueueOptions { key: 1, capacity, policy, ack_mode, max_unacked: 2, credit: None }
    }

    fn drain_payloads(outbox: &mut Outbox) -> Vec<(String, u64)> {
        let mut buf = BytesMut::new();
        outbox.drain(&mut buf, usize::MAX, 0, Instant::now());
        let mut decoder = sift_proto::Decoder::new(1 << 20);
        let mut payloads = Vec::new();
        while let Some(frame) = decoder.decode(&mut buf).expect("valid") {
            if let sift_proto::Frame::Deliver(deliver) = frame {
                let text = String::from_utf8(deliver.message.payload.to_vec()).expect("utf8");
                payloads.push((text, deliver.delivery_tag));
            }
        }
        payloads
    }

    /// The payload of a routed message, decoded from its encoding.
    fn payload_of(routed: &Routed) -> String {
        let mut buf = BytesMut::new();
        encode_deliver_prefix(&mut buf, 1, 0, 0, routed.encoded.len());
        buf.extend_from_slice(&routed.encoded);
        match sift_proto::Decoder::new(1 << 20).decode(&mut buf).expect("valid") {
            Some(sift_proto::Frame::Deliver(deliver)) => {
                String::from_utf8(deliver.message.payload.to_vec()).expect("utf8")
            }
            other => panic!("expected a delivery, got {other:?}"),
        }
    }

    #[test]
    fn the_topic_reads_back_from_the_encoding() {
        let routed = entry(4, DeliveryMode::BestEffort, "x").routed;
        assert_eq!(routed.topic(), Some(TopicName::new("t").expect("valid")));
    }

    fn texts(payloads: Vec<(String, u64)>) -> Vec<String> {
        payloads.into_iter().map(|(text, _)| text).collect()
    }

    #[test]
    fn higher_priority_goes_first_and_order_holds_within_a_priority() {
        let mut outbox = Outbox::new(u64::MAX);
        outbox.add_subscription(1, options(QueuePolicy::Block, 10, AckMode::Auto));
        for (priority, text) in [(1, "low1"), (1, "low2"), (9, "high1"), (4, "mid"), (9, "high2")] {
            assert!(matches!(
                outbox.push(1, entry(priority, DeliveryMode::BestEffort, text)),
                PushOutcome::Queued { .. }
            ));
        }
        assert_eq!(texts(drain_payloads(&mut outbox)), ["high1", "high2", "mid", "low1", "low2"]);
        assert_eq!(outbox.pending_bytes(), 0);
    }

    #[test]
    fn policies_apply_when_full() {
        let mut outbox = Outbox::new(u64::MAX);
        outbox.add_subscription(1, options(QueuePolicy::DropNew, 1, AckMode::Auto));
        outbox.add_subscription(2, options(QueuePolicy::KeepLast(2), 10, AckMode::Auto));
        outbox.add_subscription(3, options(QueuePolicy::Block, 1, AckMode::Auto));
        outbox.add_subscription(4, options(QueuePolicy::Disconnect, 1, AckMode::Auto));
        let best_effort = |text| entry(4, DeliveryMode::BestEffort, text);
        let reliable = |text| entry(4, DeliveryMode::Reliable, text);
        assert!(matches!(outbox.push(1, best_effort("a")), PushOutcome::Queued { .. }));
        assert!(matches!(outbox.push(1, best_effort("b")), PushOutcome::Dropped(_)));
        for text in ["a", "b", "c"] {
            outbox.push(2, best_effort(text));
        }
        assert_eq!(outbox.queued(2), 2, "keep-last:2 holds two");
        assert!(matches!(outbox.push(3, reliable("a")), PushOutcome::Queued { .. }));
        assert!(matches!(outbox.push(3, reliable("b")), PushOutcome::Full(_)));
        assert!(matches!(outbox.push(3, best_effort("c")), PushOutcome::Dropped(_)));
        assert!(matches!(outbox.push(4, best_effort("a")), PushOutcome::Queued { .. }));
        assert!(matches!(outbox.push(4, best_effort("b")), PushOutcome::Disconnect(_)));
        assert!(matches!(outbox.push(9, best_effort("x")), PushOutcome::Gone(_)));
        let mut drained = texts(drain_payloads(&mut outbox));
        drained.sort();
        // sub 1 keeps "a", keep-last keeps "b" and "c", block and disconnect keep their "a".
        assert_eq!(drained, ["a", "a", "a", "b", "c"]);
    }

    #[test]
    fn pending_bytes_bound_applies_across_subscriptions() {
        let sample = entry(4, DeliveryMode::BestEffort, "x");
        let mut outbox = Outbox::new(sample.size() * 2);
        outbox.add_subscription(1, options(QueuePolicy::DropNew, 100, AckMode::Auto));
        outbox.add_subscription(2, options(QueuePolicy::DropNew, 100, AckMode::Auto));
        assert!(matches!(outbox.push(1, sample.clone()), PushOutcome::Queued { .. }));
        assert!(matches!(outbox.push(2, sample.clone()), PushOutcome::Queued { .. }));
        assert!(matches!(outbox.push(1, sample), PushOutcome::Dropped(_)));
    }

    #[test]
    fn unacked_window_acks_and_timeouts() {
        let mut outbox = Outbox::new(u64::MAX);
        outbox.add_subscription(1, options(QueuePolicy::Block, 10, AckMode::Client));
        for text in ["a", "b", "c"] {
            outbox.push(1, entry(4, DeliveryMode::Reliable, text));
        }
        let first = drain_payloads(&mut outbox);
        assert_eq!(texts(first.clone()), ["a", "b"], "window of 2 unacked");
        let settled = outbox.ack(&[first[0].1]);
        assert_eq!(settled.unknown_tags, 0);
        assert_eq!(texts(drain_payloads(&mut outbox)), ["c"]);
        // b and c are unacked; time them out and they come back, in order.
        let later = Instant::now() + Duration::from_secs(10);
        let settled = outbox.requeue_expired(later, Duration::from_secs(1), 0);
        assert_eq!(settled.requeued, 2);
        assert_eq!(texts(drain_payloads(&mut outbox)), ["b", "c"]);
        assert_eq!(outbox.ack(&[12345]).unknown_tags, 1);
    }

    #[test]
    fn nack_requeues_or_rejects_and_max_redeliveries_holds() {
        let mut outbox = Outbox::new(u64::MAX);
        outbox.add_subscription(1, options(QueuePolicy::Block, 10, AckMode::Client));
        outbox.push(1, entry(4, DeliveryMode::Reliable, "a"));
        let tag = drain_payloads(&mut outbox)[0].1;
        assert_eq!(outbox.nack(tag, true, 1).requeued, 1);
        let tag = drain_payloads(&mut outbox)[0].1;
        assert_eq!(outbox.nack(tag, true, 1).rejected, 1, "second redelivery exceeds max_redeliveries = 1");
        assert!(drain_payloads(&mut outbox).is_empty());
    }

    #[test]
    fn credit_mode_sends_only_what_was_granted() {
        let mut outbox = Outbox::new(u64::MAX);
        let mut credit_options = options(QueuePolicy::Block, 10, AckMode::Auto);
        credit_options.credit = Some(1);
        outbox.add_subscription(1, credit_options);
        for text in ["a", "b", "c"] {
            outbox.push(1, entry(4, DeliveryMode::BestEffort, text));
        }
        assert_eq!(texts(drain_payloads(&mut outbox)), ["a"]);
        assert!(drain_payloads(&mut outbox).is_empty());
        assert_eq!(outbox.add_credit(1, 5), Ok(()));
        outbox.add_subscription(2, options(QueuePolicy::Block, 10, AckMode::Auto));
        assert_eq!(outbox.add_credit(2, 5), Err(CreditError::NotInCreditMode));
        assert_eq!(outbox.add_credit(3, 5), Err(CreditError::UnknownSubscription));
        assert_eq!(texts(drain_payloads(&mut outbox)), ["b", "c"]);
    }

    #[test]
    fn removing_a_subscription_returns_unacked_then_queued() {
        let mut outbox = Outbox::new(u64::MAX);
        outbox.add_subscription(1, options(QueuePolicy::Block, 10, AckMode::Client));
        for text in ["a", "b", "c"] {
            outbox.push(1, entry(4, DeliveryMode::Reliable, text));
        }
        drain_payloads(&mut outbox);
        let left: Vec<String> = outbox.remove_subscription(1).iter().map(|entry| payload_of(&entry.routed)).collect();
        assert_eq!(left, ["a", "b", "c"]);
        assert_eq!(outbox.pending_bytes(), 0);
        assert_eq!(outbox.unacked_count(), 0);
    }
}
