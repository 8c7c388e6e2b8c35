//! Delivery at a later time (JMS 2.0 delivery delay).
//!
//! A message whose `JMSDeliveryTime` property (milliseconds since the
//! epoch, [`sift_core::DELIVERY_TIME_PROPERTY`]) lies ahead of the broker's
//! clock is accepted, stored and forwarded as any other, but reaches no
//! subscriber before that time:
//!
//! - its copies for this broker's live subscribers wait here, in a heap
//!   ordered by release time, and are routed when the time comes, to the
//!   subscriptions there are then (another broker that receives it holds
//!   its own copies the same way);
//! - a stream consumer (a queue, a durable subscriber) that reads it before
//!   its time sets it aside in its cursor until then
//!   ([`crate::store::cursor::Cursor::delay`]), so that a stored message
//!   keeps its delay across a restart.
//!
//! The heap holds at most `limits.scheduled_max` messages; a publish that
//! would pass it is refused (`queue_full`) before anything is stored. What
//! the heap holds is in memory only: live subscribers do not outlive a
//! broker either.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sift_core::{MatchResult, Message, DELIVERY_TIME_PROPERTY};
use tokio::sync::Notify;

use crate::delivery::{push_to, Pushed};
use crate::outbox::{Entry, Routed};
use crate::pipeline::{self, Pipeline};
use crate::shared::BrokerShared;
use crate::stats::bump;
use crate::subscription::SubRef;

/// The longest the release task sleeps before it reads the clock again, so
/// that a clock that jumps is followed.
const RELEASE_RECHECK: Duration = Duration::from_secs(1);

/// The release time of `message` in nanoseconds since the epoch, when it
/// names one later than `now_ns`.
pub(crate) fn release_ns_of(message: &Message, now_ns: u64) -> Option<u64> {
    match message.property(DELIVERY_TIME_PROPERTY) {
        Some(sift_core::Value::Int(time_ms)) => sift_core::message::release_ns_after(*time_ms, now_ns),
        _ => None,
    }
}

/// Which queue groups a held message is for when it is released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupsHere {
    /// Every group with a member here (a publish on this broker).
    All,
    /// Only these (the groups another broker assigned to this one).
    Only(Vec<Arc<str>>),
}

/// One message waiting for its time.
#[derive(Debug)]
struct Held {
    release_ns: u64,
    /// Arrival order, so that messages of one time leave in order.
    order: u64,
    message: Box<Message>,
    groups: GroupsHere,
}

impl PartialEq for Held {
    fn eq(&self, other: &Held) -> bool {
        (self.release_ns, self.order) == (other.release_ns, other.order)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Held) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Held) -> std::cmp::Ordering {
        (self.release_ns, self.order).cmp(&(other.release_ns, other.order))
    }
}

/// The messages waiting for their time, earliest first.
#[derive(Debug, Default)]
struct Heap {
    held: BinaryHeap<Reverse<Held>>,
    next_order: u64,
}

/// The broker's scheduled messages and the bound on them.
#[derive(Debug)]
pub struct Scheduler {
    heap: Mutex<Heap>,
    /// Wakes the release task when an earlier message comes.
    wake: Notify,
    held_max: usize,
}

impl Scheduler {
    /// A scheduler of at most `held_max` messages.
    pub fn new(held_max: usize) -> Scheduler {
        Scheduler { heap: Mutex::new(Heap::default()), wake: Notify::new(), held_max }
    }

    fn heap(&self) -> std::sync::MutexGuard<'_, Heap> {
        self.heap.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Messages waiting now.
    pub fn held(&self) -> usize {
        self.heap().held.len()
    }

    /// Whether one more message may wait; otherwise the bound.
    pub fn has_room(&self) -> Result<(), usize> {
        match self.held() < self.held_max {
            true => Ok(()),
            false => Err(self.held_max),
        }
    }

    /// Keeps `message` until `release_ns`.
    pub(crate) fn hold(&self, message: Message, release_ns: u64, groups: GroupsHere) {
        let mut heap = self.heap();
        let order = heap.next_order;
        heap.next_order += 1;
        let earliest = heap.held.peek().is_none_or(|Reverse(first)| release_ns < first.release_ns);
        heap.held.push(Reverse(Held { release_ns, order, message: Box::new(message), groups }));
        drop(heap);
        if earliest {
            self.wake.notify_one();
        }
    }

    /// Takes the messages due at `now_ns`, in release order.
    fn take_due(&self, now_ns: u64) -> Vec<Held> {
        let mut heap = self.heap();
        let mut due = Vec::new();
        while heap.held.peek().is_some_and(|Reverse(first)| first.release_ns <= now_ns) {
            if let Some(Reverse(held)) = heap.held.pop() {
                due.push(held);
            }
        }
        due
    }

    /// The earliest release time waiting.
    fn next_release_ns(&self) -> Option<u64> {
        self.heap().held.peek().map(|Reverse(first)| first.release_ns)
    }
}

/// Releases held messages at their time until the broker stops.
pub(crate) async fn run(shared: Arc<BrokerShared>) {
    let mut pipeline = Pipeline::new(&shared.config);
    let mut shutdown = shared.shutdown_watch();
    loop {
        let now_ns = shared.clock.now_ns();
        for held in shared.scheduler.take_due(now_ns) {
            release(&shared, &mut pipeline, held);
        }
        pipeline.flush_counters(&shared.stats);
        let wait = match shared.scheduler.next_release_ns() {
            Some(release_ns) => Duration::from_nanos(release_ns.saturating_sub(shared.clock.now_ns())),
            None => RELEASE_RECHECK,
        };
        tokio::select! {
            () = tokio::time::sleep(wait.min(RELEASE_RECHECK)) => {}
            () = shared.scheduler.wake.notified() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

/// Routes a message whose time came to this broker's subscriptions now:
/// every plain one, and one member of each group it is for. A full queue
/// or a departed subscriber loses its copy (counted), as for a forwarded
/// message: nobody waits on the publish any more.
fn release(shared: &BrokerShared, pipeline: &mut Pipeline, held: Held) {
    let message = &*held.message;
    let matches = pipeline.route(&shared.router, message);
    let targets = targets(pipeline, &matches, message, &held.groups);
    if targets.is_empty() {
        return;
    }
    let Ok(encoded) = pipeline.encode(message) else {
        tracing::warn!(topic = %message.topic.as_str(), "a scheduled message cannot be encoded; dropped");
        return;
    };
    let routed = Arc::new(Routed::new(message, encoded, None));
    for target in &targets {
        match push_to(&shared.stats, target, Entry::new(routed.clone())) {
            Pushed::Done => {}
            Pushed::Full => bump(&shared.stats.dropped_queue_full),
            Pushed::Gone => bump(&shared.stats.scheduled_subscriber_gone),
        }
    }
    bump(&shared.stats.scheduled_released);
}

/// The plain subscriptions, and a member of each group the message is for.
fn targets(
    pipeline: &mut Pipeline,
    matches: &MatchResult<SubRef>,
    message: &Message,
    groups: &GroupsHere,
) -> Vec<SubRef> {
    let mut targets = matches.plain.clone();
    let message_group = pipeline::message_group_of(message);
    for (group, members) in matches.groups.iter() {
        let wanted = match groups {
            GroupsHere::All => true,
            GroupsHere::Only(names) => names.iter().any(|name| name == group),
        };
        if let Some(member) = wanted.then(|| pipeline.pick_member(group, members, message_group)).flatten() {
            targets.push(member);
        }
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::{TopicName, Value};

    fn message(name: &str) -> Message {
        Message::new(TopicName::new(name).expect("a topic"), bytes::Bytes::new())
    }

    #[test]
    fn messages_leave_in_release_order_and_in_arrival_order_within_one_time() {
        let scheduler = Scheduler::new(10);
        scheduler.hold(message("c"), 30, GroupsHere::All);
        scheduler.hold(message("a"), 10, GroupsHere::All);
        scheduler.hold(message("b"), 10, GroupsHere::All);
        assert_eq!(scheduler.next_release_ns(), Some(10));
        let topics =
            |due: Vec<Held>| due.iter().map(|held| held.message.topic.as_str().to_string()).collect::<Vec<_>>();
        assert_eq!(topics(scheduler.take_due(9)), Vec::<String>::new(), "nothing before its time");
        assert_eq!(topics(scheduler.take_due(20)), ["a", "b"]);
        assert_eq!(topics(scheduler.take_due(30)), ["c"]);
        assert_eq!(scheduler.held(), 0);
    }

    #[test]
    fn the_heap_is_bounded_and_only_a_later_time_is_held() {
        let scheduler = Scheduler::new(1);
        assert_eq!(scheduler.has_room(), Ok(()));
        scheduler.hold(message("a"), 10, GroupsHere::All);
        assert_eq!(scheduler.has_room(), Err(1));
        let mut delayed = message("d");
        delayed.properties.push((DELIVERY_TIME_PROPERTY.to_string(), Value::Int(5)));
        assert_eq!(release_ns_of(&delayed, 4_000_000), Some(5_000_000));
        assert_eq!(release_ns_of(&delayed, 5_000_000), None, "due already");
        assert_eq!(release_ns_of(&message("plain"), 0), None);
    }
}
