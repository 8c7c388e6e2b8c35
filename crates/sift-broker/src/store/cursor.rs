//! A stream consumer's position: what it has read, what is in flight, and
//! what is done.
//!
//! Every stored message at or below the *ack floor* is done. Above it, a
//! message is one of: done (acknowledged, passed over by the filter, lost in
//! a gap), in flight (queued or written to a subscriber, not yet
//! acknowledged), returned (its subscriber left before acknowledging it: it
//! is delivered again), or not read yet (at or above `next_read`). Only the
//! floor and the done ranges above it are stored for a durable
//! subscription, so after a restart every message that was in flight is
//! delivered again: at least once, never lost.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use super::ranges::RangeSet;

/// Where a stored position says a consumer stands: the ack floor and the
/// done ranges above it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredPosition {
    /// Every sequence at or below this is done.
    pub ack_floor: u64,
    /// Done ranges above the floor, inclusive, in order, not touching it.
    pub done_above: Vec<(u64, u64)>,
}

/// The mutable part of a [`Cursor`].
#[derive(Debug, Default)]
struct CursorState {
    next_read: u64,
    ack_floor: u64,
    done: RangeSet,
    in_flight: BTreeSet<u64>,
    returned: BTreeSet<u64>,
    /// Waiting for a subscriber whose own filter passes them.
    parked: BTreeSet<u64>,
    /// Waiting for their delivery time: (release time in ns, sequence).
    delayed: BTreeSet<(u64, u64)>,
    /// Changed since the position was last handed to storage.
    dirty: bool,
}

impl CursorState {
    fn raise_floor(&mut self) {
        while let Some(last) = self.done.take_run_starting_at(self.ack_floor + 1) {
            self.ack_floor = last;
        }
        debug_assert!(!self.done.contains(self.ack_floor), "a done run still touches the floor");
        debug_assert!(self.in_flight.iter().all(|seq| *seq > self.ack_floor), "a message in flight is below the floor");
    }
}

/// One consumer's position in one stream, shared by the task that reads the
/// stream and the outboxes whose acknowledgements move it.
#[derive(Debug)]
pub struct Cursor {
    state: Mutex<CursorState>,
    /// Wakes the consumer task: an acknowledgement opened its window, a
    /// delivery came back, or a subscriber came or went.
    pub wake: Notify,
}

impl Cursor {
    /// A cursor whose first message to read is `first_seq`.
    pub fn starting_at(first_seq: u64) -> Cursor {
        let first_seq = first_seq.max(1);
        let state = CursorState { next_read: first_seq, ack_floor: first_seq - 1, ..CursorState::default() };
        Cursor { state: Mutex::new(state), wake: Notify::new() }
    }

    /// A cursor resuming from a stored position: everything in flight when
    /// it was stored is read again.
    pub fn resuming(position: &StoredPosition) -> Cursor {
        let mut done = RangeSet::new();
        for (first, last) in &position.done_above {
            if *last > position.ack_floor {
                done.insert_range((*first).max(position.ack_floor + 1), *last);
            }
        }
        let mut state = CursorState {
            next_read: position.ack_floor + 1,
            ack_floor: position.ack_floor,
            done,
            ..CursorState::default()
        };
        state.raise_floor();
        Cursor { state: Mutex::new(state), wake: Notify::new() }
    }

    fn lock(&self) -> MutexGuard<'_, CursorState> {
        // Every method leaves the state consistent before it can panic.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next sequence to read from the stream, passing over done ones.
    pub fn next_read(&self) -> u64 {
        let mut state = self.lock();
        let next = state.done.next_absent(state.next_read);
        state.next_read = next;
        next
    }

    /// The smallest sequence that came back from a departed subscriber; it
    /// stays returned until [`Cursor::delivered`] or [`Cursor::passed_over`].
    pub fn first_returned(&self) -> Option<u64> {
        self.lock().returned.first().copied()
    }

    /// True when `seq` needs no delivery: at or below the floor, or done.
    pub fn is_done(&self, seq: u64) -> bool {
        let state = self.lock();
        seq <= state.ack_floor || state.done.contains(seq)
    }

    /// `seq` was queued for a subscriber: it is in flight.
    pub fn delivered(&self, seq: u64) {
        let mut state = self.lock();
        state.in_flight.insert(seq);
        state.returned.remove(&seq);
        if seq >= state.next_read {
            state.next_read = seq + 1;
        }
    }

    /// `seq` will never be delivered to this consumer (the filter passed over
    /// it, it expired, or it is in a gap): it is done.
    pub fn passed_over(&self, seq: u64) {
        self.done_range(seq, seq);
    }

    /// Every sequence of `first..=last` is done (a gap, or a filtered run).
    pub fn done_range(&self, first: u64, last: u64) {
        let mut state = self.lock();
        if last <= state.ack_floor {
            return;
        }
        let first = first.max(state.ack_floor + 1);
        // Passed-over and lost sequences were never handed to a subscriber.
        debug_assert!(state.in_flight.range(first..=last).next().is_none(), "{first}..={last} is in flight");
        let returned: Vec<u64> = state.returned.range(first..=last).copied().collect();
        for seq in returned {
            state.returned.remove(&seq);
        }
        state.done.insert_range(first, last);
        if last >= state.next_read {
            state.next_read = last + 1;
        }
        state.raise_floor();
        state.dirty = true;
    }

    /// `seq` is no message (a replicated stream's own entry): done, without
    /// making the position worth storing. Each stored position of a
    /// replicated stream is itself such an entry; counting it as a change
    /// would store a position for every position stored.
    pub fn pass_over_quietly(&self, seq: u64) {
        let mut state = self.lock();
        if seq <= state.ack_floor || state.done.contains(seq) {
            return;
        }
        debug_assert!(!state.in_flight.contains(&seq), "an entry that is no message is never in flight");
        state.done.insert(seq);
        if seq >= state.next_read {
            state.next_read = seq + 1;
        }
        state.raise_floor();
    }

    /// Takes in `position`, stored by another replica's consumer of the
    /// same durable subscription (`crate::replication`): what it has done
    /// is done here too, and reading starts again at the floor. Only a
    /// cursor with nothing in flight takes it in (one without subscribers
    /// here, or whose subscriber has not been given anything yet): what a
    /// cursor has in flight is its own, and a position that came from
    /// elsewhere after that is passed over. True when the cursor moved.
    pub fn advance_to(&self, position: &StoredPosition) -> bool {
        let mut state = self.lock();
        if !state.in_flight.is_empty() {
            return false;
        }
        let before = (state.ack_floor, state.done.iter().collect::<Vec<_>>());
        let floor = state.ack_floor;
        if position.ack_floor > floor {
            state.done.insert_range(floor + 1, position.ack_floor);
        }
        for (first, last) in &position.done_above {
            if *last > floor {
                state.done.insert_range((*first).max(floor + 1), *last);
            }
        }
        state.raise_floor();
        let CursorState { done, returned, parked, delayed, ack_floor, .. } = &mut *state;
        let is_done = |seq: u64| seq <= *ack_floor || done.contains(seq);
        returned.retain(|seq| !is_done(*seq));
        parked.retain(|seq| !is_done(*seq));
        delayed.retain(|(_, seq)| !is_done(*seq));
        state.next_read = state.ack_floor + 1;
        let moved = before != (state.ack_floor, state.done.iter().collect::<Vec<_>>());
        state.dirty |= moved;
        moved
    }

    /// The subscriber acknowledged `seq` (or gave up on it for good); true
    /// when that made it done (it was in flight).
    pub fn acked(&self, seq: u64) -> bool {
        let mut state = self.lock();
        if !state.in_flight.remove(&seq) || seq <= state.ack_floor {
            return false;
        }
        state.done.insert(seq);
        state.raise_floor();
        state.dirty = true;
        true
    }

    /// `seq` was in flight to a subscriber that left without acknowledging
    /// it: it goes to the next one (or waits for one).
    pub fn returned(&self, seq: u64) {
        let mut state = self.lock();
        if state.in_flight.remove(&seq) {
            state.returned.insert(seq);
        }
    }

    /// `seq` waits for a subscriber whose own filter passes it (none of
    /// those attached does): it is neither in flight nor done, so the floor
    /// stays below it and a restart reads it again, and it is offered again
    /// when a subscriber attaches ([`Cursor::unpark`]).
    pub fn parked(&self, seq: u64) {
        let mut state = self.lock();
        state.in_flight.remove(&seq);
        state.returned.remove(&seq);
        state.parked.insert(seq);
        if seq >= state.next_read {
            state.next_read = seq + 1;
        }
        debug_assert!(seq > state.ack_floor, "a parked message is above the floor");
    }

    /// A subscriber came: every parked message is offered again.
    pub fn unpark(&self) {
        let mut state = self.lock();
        let parked = std::mem::take(&mut state.parked);
        state.returned.extend(parked);
    }

    /// Messages held back now: parked, or waiting for their time.
    pub fn held_back_count(&self) -> usize {
        let state = self.lock();
        state.parked.len() + state.delayed.len()
    }

    /// `seq` is not to be delivered before `release_ns` (its
    /// `JMSDeliveryTime`): like a parked message it is neither in flight nor
    /// done, and it is offered again once [`Cursor::release_due`] finds its
    /// time come.
    pub fn delay(&self, seq: u64, release_ns: u64) {
        let mut state = self.lock();
        state.in_flight.remove(&seq);
        state.returned.remove(&seq);
        state.delayed.insert((release_ns, seq));
        if seq >= state.next_read {
            state.next_read = seq + 1;
        }
        debug_assert!(seq > state.ack_floor, "a delayed message is above the floor");
    }

    /// Offers again every delayed message whose time is at or before
    /// `now_ns`.
    pub fn release_due(&self, now_ns: u64) {
        let mut state = self.lock();
        while let Some(&(release_ns, seq)) = state.delayed.first() {
            if release_ns > now_ns {
                break;
            }
            state.delayed.pop_first();
            state.returned.insert(seq);
        }
    }

    /// The earliest time a delayed message is due.
    pub fn next_release_ns(&self) -> Option<u64> {
        self.lock().delayed.first().map(|(release_ns, _)| *release_ns)
    }

    /// Messages delivered and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        let state = self.lock();
        state.in_flight.len() + state.returned.len()
    }

    /// The ack floor.
    pub fn ack_floor(&self) -> u64 {
        self.lock().ack_floor
    }

    /// The position to store, and whether it changed since the last call
    /// that took it.
    pub fn take_position(&self) -> Option<StoredPosition> {
        let mut state = self.lock();
        if !std::mem::take(&mut state.dirty) {
            return None;
        }
        Some(StoredPosition { ack_floor: state.ack_floor, done_above: state.done.iter().collect() })
    }

    /// The position now, changed or not.
    pub fn position(&self) -> StoredPosition {
        let state = self.lock();
        StoredPosition { ack_floor: state.ack_floor, done_above: state.done.iter().collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_from_another_replica_only_moves_an_idle_cursor_forward() {
        let cursor = Cursor::starting_at(1);
        for seq in 1..=2 {
            assert_eq!(cursor.next_read(), seq);
            cursor.delivered(seq);
        }
        cursor.acked(1);
        cursor.returned(2);
        let ahead = StoredPosition { ack_floor: 3, done_above: vec![(6, 7)] };
        assert!(cursor.advance_to(&ahead), "it moved");
        assert_eq!(cursor.position(), ahead);
        assert_eq!(cursor.first_returned(), None, "a message done elsewhere does not come back");
        assert_eq!(cursor.next_read(), 4, "reading starts again at the floor, passing over done ones");
        let behind = StoredPosition { ack_floor: 2, done_above: Vec::new() };
        assert!(!cursor.advance_to(&behind), "an older position changes nothing");
        assert_eq!(cursor.position(), ahead);
    }

    #[test]
    fn a_cursor_with_deliveries_in_flight_keeps_its_own_position() {
        let cursor = Cursor::starting_at(1);
        cursor.delivered(1);
        let elsewhere = StoredPosition { ack_floor: 5, done_above: Vec::new() };
        assert!(!cursor.advance_to(&elsewhere), "what is in flight here is this cursor's own");
        assert_eq!(cursor.ack_floor(), 0);
        assert!(cursor.acked(1));
        assert!(cursor.advance_to(&elsewhere), "with nothing in flight it takes the position in");
        assert_eq!((cursor.ack_floor(), cursor.next_read()), (5, 6));
    }

    #[test]
    fn acks_out_of_order_raise_the_floor_once_contiguous() {
        let cursor = Cursor::starting_at(1);
        for seq in 1..=4 {
            assert_eq!(cursor.next_read(), seq);
            cursor.delivered(seq);
        }
        cursor.acked(2);
        cursor.acked(4);
        assert_eq!(cursor.ack_floor(), 0);
        assert_eq!(cursor.position().done_above, [(2, 2), (4, 4)]);
        cursor.acked(1);
        assert_eq!(cursor.ack_floor(), 2);
        cursor.acked(3);
        assert_eq!(cursor.ack_floor(), 4);
        assert!(cursor.position().done_above.is_empty());
        assert_eq!(cursor.in_flight(), 0);
    }

    #[test]
    fn passed_over_runs_stay_one_range_behind_an_unacked_delivery() {
        let cursor = Cursor::starting_at(10);
        cursor.delivered(10);
        for seq in 11..10_000 {
            cursor.passed_over(seq);
        }
        assert_eq!(cursor.position(), StoredPosition { ack_floor: 9, done_above: vec![(11, 9_999)] });
        assert_eq!(cursor.next_read(), 10_000);
        cursor.acked(10);
        assert_eq!(cursor.ack_floor(), 9_999);
    }

    #[test]
    fn a_resumed_cursor_reads_again_what_was_in_flight() {
        let cursor = Cursor::starting_at(1);
        for seq in 1..=5 {
            cursor.delivered(seq);
        }
        cursor.acked(1);
        cursor.acked(3);
        let stored = cursor.take_position().expect("changed");
        assert!(cursor.take_position().is_none(), "taken once");
        let resumed = Cursor::resuming(&stored);
        assert_eq!(resumed.ack_floor(), 1);
        assert_eq!(resumed.next_read(), 2);
        resumed.delivered(2);
        assert_eq!(resumed.next_read(), 4, "3 was acknowledged before the restart");
    }

    #[test]
    fn returned_messages_go_out_again_first() {
        let cursor = Cursor::starting_at(1);
        cursor.delivered(1);
        cursor.delivered(2);
        cursor.returned(2);
        cursor.returned(9);
        assert_eq!(cursor.first_returned(), Some(2));
        cursor.delivered(2);
        assert_eq!(cursor.first_returned(), None, "9 was never in flight");
        cursor.acked(1);
        cursor.acked(2);
        assert_eq!(cursor.ack_floor(), 2);
    }

    #[test]
    fn parked_messages_hold_the_floor_and_come_back_when_a_subscriber_attaches() {
        let cursor = Cursor::starting_at(1);
        cursor.delivered(1);
        cursor.parked(1);
        cursor.passed_over(2);
        assert_eq!((cursor.held_back_count(), cursor.ack_floor(), cursor.next_read()), (1, 0, 3));
        assert_eq!(cursor.first_returned(), None, "parked until a subscriber attaches");
        cursor.unpark();
        assert_eq!((cursor.held_back_count(), cursor.first_returned()), (0, Some(1)));
        cursor.delivered(1);
        cursor.acked(1);
        assert_eq!(cursor.ack_floor(), 2);
    }

    #[test]
    fn delayed_messages_come_back_when_their_time_comes() {
        let cursor = Cursor::starting_at(1);
        cursor.delay(1, 500);
        cursor.delay(2, 200);
        assert_eq!((cursor.held_back_count(), cursor.next_release_ns(), cursor.next_read()), (2, Some(200), 3));
        cursor.release_due(199);
        assert_eq!(cursor.first_returned(), None, "nothing before its time");
        cursor.release_due(200);
        assert_eq!((cursor.first_returned(), cursor.next_release_ns()), (Some(2), Some(500)));
        assert_eq!(cursor.ack_floor(), 0, "the floor waits for the delayed message 1");
    }
}
