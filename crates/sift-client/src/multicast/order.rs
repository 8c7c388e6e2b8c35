//! Publisher order over NORM, which completes objects in the order their
//! repairs finish: each publisher numbers its messages, and the receiver
//! holds early ones until the gap before them fills, or reports the gap
//! as missed when it cannot fill (a lost best-effort message, a repair no
//! longer possible, or a receiver that joined late).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use sift_core::Message;

/// Messages held per publisher while a gap before them is open. A repair
/// takes a few group round trips (longer on a loaded host) while the
/// publisher goes on at its rate: at 10,000 messages a second, 4,096 would
/// give a gap up after 0.4 s, before NORM has repaired it.
pub const REORDER_HELD_MAX: usize = 65_536;
/// A first message heard with a sequence above this is taken for a late
/// join: what came before is reported missed at once. At or below it, the
/// earlier messages are held for as any gap, since a receiver present from
/// the start whose first packets were lost gets them repaired: NORM
/// completes objects out of order.
pub const JOIN_GAP_HELD_MAX: u64 = 64;
/// Bytes of payload held per publisher while a gap is open.
pub const REORDER_HELD_BYTES_MAX: usize = 64 * 1024 * 1024;

/// What the reorder stage lets out.
#[derive(Debug, PartialEq)]
pub enum Ordered {
    /// The next message of its publisher.
    Message(Box<Message>),
    /// Messages `first ..= last` of `publisher` never came.
    Missed {
        /// The publisher's NORM node id.
        publisher: u32,
        /// First sequence missed.
        first: u64,
        /// Last sequence missed.
        last: u64,
    },
}

#[derive(Debug, Default)]
struct PublisherState {
    /// The next sequence to let out.
    next: u64,
    held: BTreeMap<u64, Box<Message>>,
    /// Payload bytes of `held`.
    held_bytes: usize,
    /// When the oldest open gap was first seen.
    gap_since: Option<Instant>,
}

/// Per-publisher reordering.
#[derive(Debug)]
pub struct Reorder {
    publishers: HashMap<u32, PublisherState>,
    wait: Duration,
}

impl Reorder {
    /// Holds early messages up to `wait` for the gap before them.
    pub fn new(wait: Duration) -> Reorder {
        Reorder { publishers: HashMap::new(), wait }
    }

    /// Takes message `message` of `publisher`; appends what can go out.
    pub fn push(&mut self, publisher: u32, message: Box<Message>, now: Instant, out: &mut Vec<Ordered>) {
        let sequence = message.sequence;
        let state = self.publishers.entry(publisher).or_insert_with(|| {
            // The first message heard from a publisher: far into its
            // sequence, what came before was sent before this receiver
            // joined; near its start, it may be on its way (repaired).
            if sequence > JOIN_GAP_HELD_MAX + 1 {
                out.push(Ordered::Missed { publisher, first: 1, last: sequence - 1 });
                return PublisherState { next: sequence, ..PublisherState::default() };
            }
            PublisherState { next: 1, ..PublisherState::default() }
        });
        if sequence < state.next || state.held.contains_key(&sequence) {
            return; // A duplicate.
        }
        state.held_bytes += message.payload.len();
        state.held.insert(sequence, message);
        if state.held.len() > REORDER_HELD_MAX || state.held_bytes > REORDER_HELD_BYTES_MAX {
            // Too far behind to wait: give the gap up.
            skip_gap(publisher, state, out);
        }
        release(state, now, out);
    }

    /// Gives up gaps open for longer than the wait; appends what goes out.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<Ordered>) {
        for (&publisher, state) in &mut self.publishers {
            if state.gap_since.is_some_and(|since| now.saturating_duration_since(since) >= self.wait) {
                skip_gap(publisher, state, out);
                release(state, now, out);
            }
        }
    }

    /// NORM gave up an object of `publisher` (its repairs are no longer
    /// available): the oldest open gap will not fill, so it is reported
    /// now rather than after the wait.
    pub fn lost(&mut self, publisher: u32, now: Instant, out: &mut Vec<Ordered>) {
        if let Some(state) = self.publishers.get_mut(&publisher) {
            if state.gap_since.is_some() {
                skip_gap(publisher, state, out);
                release(state, now, out);
            }
        }
    }

    /// When the oldest open gap times out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.publishers.values().filter_map(|state| state.gap_since).min().map(|since| since + self.wait)
    }
}

/// Lets out the held messages that follow `next` without a gap.
fn release(state: &mut PublisherState, now: Instant, out: &mut Vec<Ordered>) {
    let before = state.next;
    while let Some(message) = state.held.remove(&state.next) {
        state.held_bytes -= message.payload.len();
        out.push(Ordered::Message(message));
        state.next += 1;
    }
    // The wait runs from when the gap now first in line opened: a gap
    // that filled hands the clock on to the next one, which opened later
    // (under steady loss a gap is always open, but none for long).
    state.gap_since = match (state.held.is_empty(), state.next == before) {
        (true, _) => None,
        (false, true) => Some(state.gap_since.unwrap_or(now)),
        (false, false) => Some(now),
    };
}

/// Reports the gap before the first held message as missed.
fn skip_gap(publisher: u32, state: &mut PublisherState, out: &mut Vec<Ordered>) {
    let Some(&first_held) = state.held.keys().next() else { return };
    if first_held > state.next {
        out.push(Ordered::Missed { publisher, first: state.next, last: first_held - 1 });
    }
    state.next = first_held;
    state.gap_since = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::TopicName;

    fn message(sequence: u64) -> Box<Message> {
        let mut message = Message::new(TopicName::new("t").expect("topic"), sequence.to_string());
        message.sequence = sequence;
        Box::new(message)
    }

    fn sequences(out: &[Ordered]) -> Vec<String> {
        out.iter()
            .map(|item| match item {
                Ordered::Message(message) => message.sequence.to_string(),
                Ordered::Missed { first, last, .. } => format!("missed {first}-{last}"),
            })
            .collect()
    }

    #[test]
    fn early_messages_wait_for_the_gap_and_a_late_joiner_is_told() {
        let mut reorder = Reorder::new(Duration::from_secs(1));
        let now = Instant::now();
        let mut out = Vec::new();
        for sequence in [105, 107, 106, 108] {
            reorder.push(1, message(sequence), now, &mut out);
        }
        assert_eq!(sequences(&out), ["missed 1-104", "105", "106", "107", "108"]);
    }

    #[test]
    fn a_publishers_first_messages_repaired_late_are_waited_for() {
        let wait = Duration::from_secs(1);
        let mut reorder = Reorder::new(wait);
        let now = Instant::now();
        let mut out = Vec::new();
        reorder.push(1, message(3), now, &mut out);
        reorder.push(1, message(1), now, &mut out);
        assert_eq!(sequences(&out), ["1"]);
        reorder.push(1, message(2), now, &mut out);
        assert_eq!(sequences(&out), ["1", "2", "3"]);
        // Never repaired: given up after the wait, as any gap.
        reorder.push(2, message(2), now, &mut out);
        reorder.expire(now + wait, &mut out);
        assert_eq!(sequences(&out), ["1", "2", "3", "missed 1-1", "2"]);
    }

    #[test]
    fn a_gap_that_does_not_fill_is_reported_after_the_wait() {
        let mut reorder = Reorder::new(Duration::from_millis(100));
        let now = Instant::now();
        let mut out = Vec::new();
        reorder.push(1, message(1), now, &mut out);
        reorder.push(1, message(3), now, &mut out);
        reorder.push(1, message(1), now, &mut out);
        assert_eq!(sequences(&out), ["1"]);
        assert_eq!(reorder.next_deadline(), Some(now + Duration::from_millis(100)));
        reorder.expire(now + Duration::from_millis(100), &mut out);
        assert_eq!(sequences(&out), ["1", "missed 2-2", "3"]);
        assert_eq!(reorder.next_deadline(), None);
    }

    #[test]
    fn each_gap_gets_the_whole_wait_under_steady_loss() {
        let wait = Duration::from_millis(100);
        let mut reorder = Reorder::new(wait);
        let start = Instant::now();
        let mut out = Vec::new();
        // Gaps open one after another, so some gap is always open; each
        // fills 80 ms after it opened, within the wait.
        reorder.push(1, message(1), start, &mut out);
        reorder.push(1, message(3), start, &mut out);
        let later = start + Duration::from_millis(80);
        reorder.push(1, message(5), later, &mut out);
        reorder.push(1, message(2), later, &mut out);
        reorder.expire(start + Duration::from_millis(150), &mut out);
        assert_eq!(sequences(&out), ["1", "2", "3"], "gap 4 opened at 80 ms: not due at 150 ms");
        reorder.push(1, message(4), start + Duration::from_millis(160), &mut out);
        assert_eq!(sequences(&out), ["1", "2", "3", "4", "5"]);
    }

    #[test]
    fn a_lost_object_gives_the_oldest_gap_up_at_once() {
        let mut reorder = Reorder::new(Duration::from_secs(60));
        let now = Instant::now();
        let mut out = Vec::new();
        for sequence in [1, 3, 5] {
            reorder.push(7, message(sequence), now, &mut out);
        }
        reorder.lost(8, now, &mut out);
        assert_eq!(sequences(&out), ["1"], "another publisher's loss changes nothing");
        reorder.lost(7, now, &mut out);
        assert_eq!(sequences(&out), ["1", "missed 2-2", "3"]);
        reorder.push(7, message(4), now, &mut out);
        assert_eq!(sequences(&out), ["1", "missed 2-2", "3", "4", "5"]);
    }
}
