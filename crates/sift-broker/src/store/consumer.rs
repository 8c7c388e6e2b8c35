//! A stream consumer: reads a stream from its cursor and hands each stored
//! message that passes its filters to one of its subscribers.
//!
//! Replays (`--stream S --from ...`) and durable subscriptions are the same
//! thing here; a durable one also stores its position. Live messages reach
//! a consumer the same way as old ones: through the stream. The consumer
//! reads everything stored after its position, then waits for the stream's
//! appender to say that more was stored. Because the log is the only
//! source, there is no seam between replayed and live messages where one
//! could be lost or delivered twice.
//!
//! The consumer never reads further ahead than its subscribers' queues take:
//! a stream subscription's queue is bounded (`storage.stream_queue_capacity`)
//! and uses the `block` policy, so a full queue stops the consumer until the
//! subscriber acknowledges. Memory stays bounded however far behind it is.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sift_core::TopicFilter;
use sift_filter::ContentFilter;
use sift_proto::{Frame, GapReason};
use sift_store::{Gap, Record};
use tokio::sync::watch;

use super::cursor::Cursor;
use super::durable::DurableRecord;
use super::queue_depth::QueueDepth;
use super::stream::Stream;
use super::stream_reader::StreamReader;
use crate::conn::ConnShared;
use crate::delivery::{push_to, Pushed};
use crate::outbox::{topic_of_encoding, Entry, Routed, StreamPosition};
use crate::stats::{add, bump, Stats};
use crate::subscription::SubRef;

/// How long a consumer blocked on a full queue waits before it looks again,
/// in case the wake-up from the subscriber's writer came before it waited.
const BLOCKED_RECHECK: Duration = Duration::from_millis(50);

/// The longest a consumer with delayed messages sleeps before it reads the
/// clock again, so that a clock that jumps is followed.
const DELAY_RECHECK: Duration = Duration::from_secs(1);

/// Records handled in one pass before the consumer yields to other tasks.
const PASS_RECORDS_MAX: usize = 8_192;

/// The subscribers of a consumer, served in turn.
#[derive(Debug, Default)]
struct Members {
    list: Vec<SubRef>,
    turn: usize,
    /// True while a task runs the consumer.
    running: bool,
    /// The member each message group went to.
    groups: MessageGroups,
    /// The `CAUGHT_UP` markers of the members that asked for them, by
    /// member key.
    markers: HashMap<u64, Marker>,
    /// The members with a filter of their own (`MEMBER_FILTER`): each is
    /// given only what passes its subscription's content filter.
    selective: HashSet<u64>,
}

/// How a subscriber takes part in a consumer.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemberOptions {
    /// Send it `CAUGHT_UP` each time it has been given everything stored.
    pub caught_up_markers: bool,
    /// Its content filter is its own (`MEMBER_FILTER`), not the consumer's.
    pub own_filter: bool,
}

/// What a member that asked for `CAUGHT_UP` was given and told.
#[derive(Debug, Default, Clone, Copy)]
struct Marker {
    /// The highest sequence given to it.
    given_max: u64,
    /// The `last_seq` of the last `CAUGHT_UP` sent to it.
    told: Option<u64>,
}

impl Members {
    /// Notes that `member_key` was given the stored message `seq`.
    fn given(&mut self, member_key: u64, seq: u64) {
        if let Some(marker) = self.markers.get_mut(&member_key) {
            marker.given_max = marker.given_max.max(seq);
        }
    }
}

/// Which member each message group (`JMSXGroupID`) was given to, so that
/// the group's later messages go to it too while it stays (as ActiveMQ
/// keeps a group on its consumer). At most `storage.message_groups_max`
/// groups are remembered; past it the oldest is forgotten.
#[derive(Debug, Default)]
struct MessageGroups {
    owner_by_group: HashMap<Box<str>, u64>,
    /// The groups in `owner_by_group`, oldest first.
    oldest_first: VecDeque<Box<str>>,
}

impl MessageGroups {
    /// The member key `group` was given to.
    fn owner(&self, group: &str) -> Option<u64> {
        self.owner_by_group.get(group).copied()
    }

    /// Gives `group` to `member_key`; true when an older group had to be
    /// forgotten to stay within `groups_max`.
    fn assign(&mut self, group: &str, member_key: u64, groups_max: usize) -> bool {
        if let Some(owner) = self.owner_by_group.get_mut(group) {
            *owner = member_key;
            return false;
        }
        self.owner_by_group.insert(group.into(), member_key);
        self.oldest_first.push_back(group.into());
        let forget = self.oldest_first.len() > groups_max;
        if forget {
            if let Some(oldest) = self.oldest_first.pop_front() {
                self.owner_by_group.remove(&oldest);
            }
        }
        debug_assert_eq!(self.owner_by_group.len(), self.oldest_first.len());
        forget
    }
}

/// One consumer of one stream: a replay or a durable subscription.
#[derive(Debug)]
pub struct Consumer {
    /// The stream it reads.
    pub stream: Arc<Stream>,
    /// Where it stands.
    pub cursor: Arc<Cursor>,
    /// Its topic filter.
    pub topic_filter: TopicFilter,
    /// Its content filter, if any.
    pub content: Option<Arc<ContentFilter>>,
    /// The stored definition and position of a durable subscription.
    pub durable: Option<DurableRecord>,
    /// For a queue's durable: the count of what the queue holds, which
    /// goes down as the durable is done with its messages.
    pub depth: std::sync::OnceLock<Arc<QueueDepth>>,
    members: Mutex<Members>,
}

/// What one pass over the stream ended with.
enum Pass {
    /// Everything stored has been handled.
    CaughtUp,
    /// Every subscriber's queue is full; wait for space on this connection.
    Blocked(Arc<ConnShared>),
    /// No subscriber is left.
    NoMembers,
    /// The pass handled its share; go on after yielding.
    Yield,
}

/// What became of one stored message.
enum Offered {
    Delivered,
    PassedOver,
    Blocked(Arc<ConnShared>),
    NoMembers,
}

impl Consumer {
    /// A consumer of `stream` from `cursor`, with no subscriber yet.
    pub fn new(
        stream: Arc<Stream>,
        cursor: Arc<Cursor>,
        topic_filter: TopicFilter,
        content: Option<Arc<ContentFilter>>,
        durable: Option<DurableRecord>,
    ) -> Consumer {
        Consumer {
            stream,
            cursor,
            topic_filter,
            content,
            durable,
            depth: std::sync::OnceLock::new(),
            members: Mutex::new(Members::default()),
        }
    }

    fn members(&self) -> MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribers attached now.
    pub fn member_count(&self) -> usize {
        self.members().list.len()
    }

    /// Attaches a subscriber; returns true when no task runs the consumer
    /// (the caller starts one with [`run`]). Messages parked for want of a
    /// subscriber whose filter passes them are offered again.
    pub fn attach(&self, member: SubRef, options: MemberOptions) -> bool {
        let mut members = self.members();
        if options.caught_up_markers {
            members.markers.insert(member.key, Marker::default());
        }
        if options.own_filter {
            members.selective.insert(member.key);
        }
        members.list.push(member);
        let start = !members.running;
        members.running = true;
        drop(members);
        self.cursor.unpark();
        self.cursor.wake.notify_one();
        start
    }

    /// A message of the queue this durable reads is gone for good.
    fn taken_from_queue(&self) {
        if let Some(depth) = self.depth.get() {
            depth.taken();
        }
    }

    /// Sends the `CAUGHT_UP` markers due: to each member that asked and
    /// was given something since it was last told (or never was told).
    fn send_markers_due(&self) {
        let mut members = self.members();
        if members.markers.is_empty() {
            return;
        }
        let Members { list, markers, .. } = &mut *members;
        for member in list.iter() {
            let Some(marker) = markers.get_mut(&member.key) else { continue };
            if marker.told != Some(marker.given_max) {
                marker.told = Some(marker.given_max);
                member.conn.send_control(&Frame::CaughtUp { sub_id: member.sub_id, last_seq: marker.given_max });
            }
        }
    }

    /// Detaches a subscriber. The messages it held unacknowledged come back
    /// (`returned`) and go to the next subscriber, or wait for one.
    pub fn detach(&self, member_key: u64, unacked_seqs: impl IntoIterator<Item = u64>) {
        for seq in unacked_seqs {
            self.cursor.returned(seq);
        }
        let mut members = self.members();
        members.list.retain(|member| member.key != member_key);
        members.markers.remove(&member_key);
        members.selective.remove(&member_key);
        drop(members);
        self.persist();
        self.cursor.wake.notify_one();
    }

    /// Stores the position of a durable subscription if it changed. The
    /// write reaches the operating system before this returns, so a killed
    /// broker keeps it; it reaches the disk at the next position sync.
    pub fn persist(&self) {
        if let Some(durable) = &self.durable {
            if let Some(position) = self.cursor.take_position() {
                durable.store_position(&position);
                // A replicated stream's members keep it too.
                if let Some(replication) = self.stream.replication() {
                    replication.propose_position(&durable.definition.name, &position);
                }
            }
        }
    }

    /// Stops the task when no subscriber is left; false when one came back
    /// meanwhile (the task goes on).
    fn stop_if_idle(&self) -> bool {
        let mut members = self.members();
        if members.list.is_empty() {
            members.running = false;
            return true;
        }
        false
    }

    /// True when `topic` and the message pass this consumer's filters.
    fn wants(&self, record: &Record) -> Option<bool> {
        let topic = topic_of_encoding(&record.body)?;
        if !self.topic_filter.matches(&topic) {
            return Some(false);
        }
        match &self.content {
            None => Some(true),
            Some(filter) => {
                let message = sift_proto::decode_message(&record.body).ok()?;
                Some(filter.matches(&message))
            }
        }
    }
}

impl StreamPosition for Consumer {
    fn done(&self, seq: u64) {
        if self.cursor.acked(seq) {
            self.taken_from_queue();
        }
    }

    fn persist_and_wake(&self) {
        self.persist();
        self.cursor.wake.notify_one();
    }
}

/// What a consumer task uses of its broker, and nothing more: the counters,
/// the clock that decides expiry, how much to read at a time, and the
/// signal that the broker stops.
#[derive(Debug, Clone)]
pub struct ConsumerContext {
    /// The broker's counters.
    pub stats: Arc<Stats>,
    /// The broker's clock.
    pub clock: sift_core::Clock,
    /// `storage.read_batch_records`.
    pub read_batch_records: usize,
    /// `storage.read_batch_bytes`.
    pub read_batch_bytes: usize,
    /// `storage.message_groups_max`.
    pub message_groups_max: usize,
    /// `storage.parked_max`.
    pub parked_max: usize,
    /// Turns true when the broker shuts down.
    pub shutdown: watch::Receiver<bool>,
}

/// Runs `consumer` until it has no subscriber left or the broker stops.
pub async fn run(context: ConsumerContext, consumer: Arc<Consumer>) {
    let mut reader = consumer.stream.reader();
    let mut records = Vec::new();
    let mut shutdown = context.shutdown.clone();
    tokio::select! {
        () = catch_up(&consumer) => {}
        _ = shutdown.changed() => return,
    }
    loop {
        let appended = consumer.stream.appended.notified();
        let woken = consumer.cursor.wake.notified();
        tokio::pin!(appended, woken);
        appended.as_mut().enable();
        woken.as_mut().enable();
        consumer.cursor.release_due(context.clock.now_ns());
        let pass = one_pass(&context, &consumer, &mut reader, &mut records);
        consumer.persist();
        match pass {
            Pass::Yield => tokio::task::yield_now().await,
            Pass::NoMembers => {
                if consumer.stop_if_idle() {
                    return;
                }
            }
            Pass::CaughtUp => {
                consumer.send_markers_due();
                let until_release = consumer.cursor.next_release_ns().map(|release_ns| {
                    Duration::from_nanos(release_ns.saturating_sub(context.clock.now_ns())).min(DELAY_RECHECK)
                });
                tokio::select! {
                    _ = &mut appended => {}
                    _ = &mut woken => {}
                    () = tokio::time::sleep(until_release.unwrap_or_default()), if until_release.is_some() => {}
                    _ = shutdown.changed() => return,
                }
            }
            Pass::Blocked(conn) => {
                let space = conn.space.notified();
                tokio::select! {
                    _ = space => {}
                    _ = &mut woken => {}
                    _ = tokio::time::sleep(BLOCKED_RECHECK) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
        if *context.shutdown.borrow() {
            return;
        }
    }
}

/// A durable of a replicated stream gives its subscriber nothing before
/// this member has applied what the group had committed when it came: the
/// positions its acknowledgements at another member stored among it
/// (`crate::replication::durables`). Without a quorum it is served from
/// where this member stands, and may give acknowledged messages again.
async fn catch_up(consumer: &Consumer) {
    let (Some(durable), Some(replication)) = (&consumer.durable, consumer.stream.replication()) else { return };
    if let Err((_, why)) = replication.catch_up().await {
        tracing::warn!(
            stream = %consumer.stream.name(),
            durable = %durable.definition.name,
            %why,
            "a durable subscriber is served before this replica caught up with the group"
        );
    }
}

/// Serves returned messages, then reads on from the cursor.
fn one_pass(
    context: &ConsumerContext,
    consumer: &Arc<Consumer>,
    reader: &mut StreamReader,
    records: &mut Vec<Record>,
) -> Pass {
    if let Some(pass) = serve_returned(context, consumer, reader, records) {
        return pass;
    }
    let mut handled = 0;
    while handled < PASS_RECORDS_MAX {
        let from = consumer.cursor.next_read();
        // Parked messages wait for a subscriber whose filter passes them,
        // delayed ones for their time; past the bound the consumer reads no
        // further until one comes (everything it could give has been given).
        let until = consumer.stream.readable_seq();
        if from > until || consumer.cursor.held_back_count() >= context.parked_max {
            return Pass::CaughtUp;
        }
        records.clear();
        let outcome = match reader.read(from, until, context.read_batch_records, context.read_batch_bytes, records) {
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::warn!(stream = %consumer.stream.name(), %error, "cannot read the stream; a consumer waits");
                return Pass::CaughtUp;
            }
        };
        for gap in &outcome.gaps {
            if !report_gap(&context.stats, consumer, gap) {
                return Pass::NoMembers;
            }
        }
        // A replicated stream's own entries are no message: done at once.
        for seq in &outcome.skipped {
            consumer.cursor.pass_over_quietly(*seq);
        }
        if outcome.is_empty(records) {
            return Pass::CaughtUp;
        }
        for record in records.drain(..) {
            handled += 1;
            if consumer.cursor.is_done(record.seq) {
                continue;
            }
            match offer(context, consumer, record, false) {
                Offered::Delivered => {}
                Offered::PassedOver => {}
                Offered::Blocked(conn) => return Pass::Blocked(conn),
                Offered::NoMembers => return Pass::NoMembers,
            }
        }
    }
    Pass::Yield
}

/// Delivers again what a departed subscriber left unacknowledged, oldest first.
fn serve_returned(
    context: &ConsumerContext,
    consumer: &Arc<Consumer>,
    reader: &mut StreamReader,
    records: &mut Vec<Record>,
) -> Option<Pass> {
    while let Some(seq) = consumer.cursor.first_returned() {
        records.clear();
        let outcome = match reader.read(seq, seq, 1, 0, records) {
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::warn!(stream = %consumer.stream.name(), seq, %error, "cannot read a message to deliver again");
                consumer.cursor.passed_over(seq);
                continue;
            }
        };
        for gap in &outcome.gaps {
            if !report_gap(&context.stats, consumer, gap) {
                return Some(Pass::NoMembers);
            }
        }
        match records.pop() {
            Some(record) if record.seq == seq => match offer(context, consumer, record, true) {
                Offered::Blocked(conn) => return Some(Pass::Blocked(conn)),
                Offered::NoMembers => return Some(Pass::NoMembers),
                Offered::Delivered | Offered::PassedOver => {}
            },
            // Removed by retention or unreadable: the gap said so.
            _ => consumer.cursor.passed_over(seq),
        }
    }
    None
}

/// Tells a subscriber which stored messages it will never get, and marks
/// them done. Returns false, marking nothing, when no subscriber is there
/// to be told: a durable without its subscriber must tell it on resume.
fn report_gap(stats: &Stats, consumer: &Consumer, gap: &Gap) -> bool {
    if gap.count == 0 {
        return true;
    }
    let Some(member) = consumer.members().list.first().cloned() else { return false };
    let last = gap.first_seq + gap.count - 1;
    consumer.cursor.done_range(gap.first_seq, last);
    let reason = match gap.reason {
        sift_store::GapReason::Removed => GapReason::Removed,
        sift_store::GapReason::Damaged => GapReason::Damaged,
    };
    bump(&stats.stream_gaps);
    add(&stats.stream_gap_messages, gap.count);
    let frame = Frame::Gap { sub_id: member.sub_id, first_seq: gap.first_seq, count: gap.count, reason };
    member.conn.send_control(&frame);
    true
}

/// Hands a message of `group` to the member the group was given to, if
/// that member is still there: `None` when it is not (the caller picks one
/// in turn and gives it the group). A full queue blocks the consumer rather
/// than passing the message to another member, which would reorder the
/// group.
fn offer_to_group_owner(
    context: &ConsumerContext,
    consumer: &Arc<Consumer>,
    (routed, seq): (&Arc<Routed>, u64),
    group: &str,
    redelivered: bool,
) -> Option<Offered> {
    let owner = {
        let members = consumer.members();
        let owner_key = members.groups.owner(group)?;
        let owner = members.list.iter().find(|member| member.key == owner_key)?.clone();
        let own_filter = members.selective.contains(&owner_key);
        // Decoded only for an owner with a filter of its own.
        if own_filter && !admits(&owner, own_filter, routed.message()) {
            return None; // Its filter refuses this one: another member takes it.
        }
        owner
    };
    match give(context, consumer, &owner, (routed, seq), redelivered) {
        Pushed::Done => Some(Offered::Delivered),
        Pushed::Full => Some(Offered::Blocked(owner.conn.clone())),
        Pushed::Gone => None,
    }
}

/// Gives the stored message `seq` to `member`: in flight first (the
/// subscriber may acknowledge at once), then counted and noted for the
/// member's `CAUGHT_UP` when taken, or returned when not.
fn give(
    context: &ConsumerContext,
    consumer: &Consumer,
    member: &SubRef,
    (routed, seq): (&Arc<Routed>, u64),
    redelivered: bool,
) -> Pushed {
    consumer.cursor.delivered(seq);
    let entry = Entry { routed: routed.clone(), attempts: u32::from(redelivered) };
    let pushed = push_to(&context.stats, member, entry);
    match pushed {
        Pushed::Done => {
            bump(&context.stats.stream_deliveries);
            consumer.members().given(member.key, seq);
        }
        Pushed::Full | Pushed::Gone => consumer.cursor.returned(seq),
    }
    pushed
}

/// True unless `member` has a filter of its own (`own_filter`) that the
/// message (`None`: it did not decode) does not pass.
fn admits(member: &SubRef, own_filter: bool, message: Option<&sift_core::Message>) -> bool {
    !own_filter || message.is_some_and(|message| member.accepts(message))
}

/// Hands one stored message to the next subscriber whose queue has room;
/// `redelivered` for one a departed subscriber had and did not acknowledge,
/// which its `DELIVER` says (`REDELIVERED`, STOMP `redelivered:true`).
fn offer(context: &ConsumerContext, consumer: &Arc<Consumer>, record: Record, redelivered: bool) -> Offered {
    let seq = record.seq;
    match consumer.wants(&record) {
        Some(true) => {}
        Some(false) => {
            consumer.cursor.passed_over(seq);
            return Offered::PassedOver;
        }
        None => {
            tracing::warn!(stream = %consumer.stream.name(), seq, "a stored message does not decode; passed over");
            consumer.cursor.passed_over(seq);
            return Offered::PassedOver;
        }
    }
    let Some(routed) = Routed::stored(record.body, seq, consumer.clone() as Arc<dyn StreamPosition>) else {
        consumer.cursor.passed_over(seq);
        return Offered::PassedOver;
    };
    // Most stored messages have no expiry: no clock reading for them.
    if routed.expiry_ns != 0 && routed.is_expired(context.clock.now_ns()) {
        bump(&context.stats.dropped_expired);
        consumer.cursor.passed_over(seq);
        consumer.taken_from_queue();
        return Offered::PassedOver;
    }
    let routed = Arc::new(routed);
    let steering = sift_proto::routing_properties(&routed.encoded);
    if let Some(release_ns) = steering
        .delivery_time_ms
        .and_then(|time_ms| sift_core::message::release_ns_after(time_ms, context.clock.now_ns()))
    {
        consumer.cursor.delay(seq, release_ns);
        return Offered::PassedOver;
    }
    let message_group = steering.group;
    if let Some(group) = message_group {
        if let Some(offered) = offer_to_group_owner(context, consumer, (&routed, seq), group, redelivered) {
            return offered;
        }
    }
    offer_in_turn(context, consumer, (&routed, seq), message_group, redelivered)
}

/// Hands a message to the next member in turn whose queue has room and,
/// for a member with a filter of its own, whose filter passes it; parks it
/// when every member's own filter refuses it.
fn offer_in_turn(
    context: &ConsumerContext,
    consumer: &Arc<Consumer>,
    (routed, seq): (&Arc<Routed>, u64),
    message_group: Option<&str>,
    redelivered: bool,
) -> Offered {
    let (turn, count, selective) = {
        let mut members = consumer.members();
        members.turn = members.turn.wrapping_add(1);
        (members.turn, members.list.len(), !members.selective.is_empty())
    };
    // Decoded once, and only when some member has a filter of its own.
    let message = if selective { routed.message() } else { None };
    let (mut blocked_on, mut refused) = (None, 0);
    for offset in 0..count {
        // Looked up one at a time, under the lock only for the clone: the
        // list may shrink meanwhile, and the first try is nearly always it.
        let (member, own_filter) = {
            let members = consumer.members();
            match members.list.len() {
                0 => break,
                len => {
                    let member = members.list[(turn + offset) % len].clone();
                    let own_filter = members.selective.contains(&member.key);
                    (member, own_filter)
                }
            }
        };
        if !admits(&member, own_filter, message) {
            refused += 1;
            continue;
        }
        match give(context, consumer, &member, (routed, seq), redelivered) {
            Pushed::Done => {
                let forgot = message_group.is_some_and(|group| {
                    consumer.members().groups.assign(group, member.key, context.message_groups_max)
                });
                if forgot {
                    bump(&context.stats.message_groups_forgotten);
                }
                return Offered::Delivered;
            }
            Pushed::Full => blocked_on = blocked_on.or_else(|| Some(member.conn.clone())),
            Pushed::Gone => {}
        }
    }
    match blocked_on {
        Some(conn) => Offered::Blocked(conn),
        None if refused > 0 && refused == count => {
            bump(&context.stats.stream_parked);
            consumer.cursor.parked(seq);
            Offered::PassedOver
        }
        None => Offered::NoMembers,
    }
}

#[cfg(test)]
mod tests {
    use super::MessageGroups;

    #[test]
    fn message_groups_keep_their_member_and_forget_the_oldest_past_the_bound() {
        let mut groups = MessageGroups::default();
        assert!(!groups.assign("cart-1", 10, 2));
        assert!(!groups.assign("cart-2", 11, 2));
        assert!(!groups.assign("cart-1", 12, 2), "a group moved to another member is not a new one");
        assert_eq!((groups.owner("cart-1"), groups.owner("cart-2")), (Some(12), Some(11)));
        assert!(groups.assign("cart-3", 10, 2), "a third group passes the bound");
        assert_eq!(groups.owner("cart-1"), None, "the oldest is forgotten");
        assert_eq!((groups.owner("cart-2"), groups.owner("cart-3")), (Some(11), Some(10)));
    }
}
