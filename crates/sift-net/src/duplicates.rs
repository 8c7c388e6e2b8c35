//! Dropping the duplicates that inconsistent views can cause.
//!
//! Every origin broker numbers the messages it sends into the network. A
//! receiving broker remembers, per origin, the highest sequence seen and
//! which of the [`DUPLICATE_WINDOW`] sequences below it have arrived: a
//! sequence seen before is a duplicate. A sequence older than the window
//! cannot be told apart from a duplicate and is dropped too, since forwarding
//! a message twice is the failure being prevented (reliable delivery resends
//! what is lost). Memory is fixed: one window per origin, at most
//! `origins_max` origins, the least recently heard one forgotten first.

use rustc_hash::FxHashMap;

use crate::topology::BrokerName;

/// Sequences remembered below the highest one seen, per origin. Messages
/// overtaking each other by more than this many are dropped.
pub const DUPLICATE_WINDOW: u64 = 1024;

/// Default bound on the origins remembered at once.
pub const DUPLICATE_ORIGINS_MAX_DEFAULT: usize = 4096;

const WORD_BITS: u64 = u64::BITS as u64;
const WINDOW_WORDS: usize = (DUPLICATE_WINDOW / WORD_BITS) as usize;

/// One origin's window: bit `sequence % DUPLICATE_WINDOW` is set when that
/// sequence (within the window below `highest`) has arrived.
#[derive(Debug, Clone)]
struct Window {
    highest: u64,
    seen: [u64; WINDOW_WORDS],
    /// When this origin was last heard, in calls to `accept`, for eviction.
    last_heard: u64,
}

impl Window {
    fn new(sequence: u64, now: u64) -> Window {
        let mut window = Window { highest: sequence, seen: [0; WINDOW_WORDS], last_heard: now };
        window.set(sequence);
        window
    }

    fn accept(&mut self, sequence: u64) -> bool {
        if sequence > self.highest {
            self.advance(sequence);
            self.set(sequence);
            return true;
        }
        if self.highest - sequence >= DUPLICATE_WINDOW || self.is_set(sequence) {
            return false;
        }
        self.set(sequence);
        true
    }

    /// Moves the top of the window to `sequence`, clearing the bits of the
    /// sequences it skips, which are now unseen slots of the window.
    fn advance(&mut self, sequence: u64) {
        if sequence - self.highest >= DUPLICATE_WINDOW {
            self.seen = [0; WINDOW_WORDS];
        } else {
            for skipped in self.highest + 1..=sequence {
                self.clear(skipped);
            }
        }
        self.highest = sequence;
    }

    fn slot(sequence: u64) -> (usize, u64) {
        let bit = sequence % DUPLICATE_WINDOW;
        ((bit / WORD_BITS) as usize, 1 << (bit % WORD_BITS))
    }

    fn set(&mut self, sequence: u64) {
        let (word, mask) = Window::slot(sequence);
        self.seen[word] |= mask;
    }

    fn clear(&mut self, sequence: u64) {
        let (word, mask) = Window::slot(sequence);
        self.seen[word] &= !mask;
    }

    fn is_set(&self, sequence: u64) -> bool {
        let (word, mask) = Window::slot(sequence);
        self.seen[word] & mask != 0
    }
}

/// Per-origin windows of recently seen message sequences.
#[derive(Debug, Clone)]
pub struct DuplicateFilter {
    windows: FxHashMap<BrokerName, Window>,
    origins_max: usize,
    clock: u64,
}

impl Default for DuplicateFilter {
    fn default() -> Self {
        DuplicateFilter::new(DUPLICATE_ORIGINS_MAX_DEFAULT)
    }
}

impl DuplicateFilter {
    /// A filter remembering at most `origins_max` origins (at least one).
    pub fn new(origins_max: usize) -> DuplicateFilter {
        DuplicateFilter { windows: FxHashMap::default(), origins_max: origins_max.max(1), clock: 0 }
    }

    /// True the first time `(origin, sequence)` is offered within the window;
    /// false for a repeat or a sequence too old to tell.
    pub fn accept(&mut self, origin: &str, sequence: u64) -> bool {
        self.clock += 1;
        if let Some(window) = self.windows.get_mut(origin) {
            window.last_heard = self.clock;
            return window.accept(sequence);
        }
        if self.windows.len() >= self.origins_max {
            self.evict_least_recent();
        }
        self.windows.insert(origin.into(), Window::new(sequence, self.clock));
        true
    }

    /// Forgets an origin (e.g. when it leaves the topology).
    pub fn forget(&mut self, origin: &str) {
        self.windows.remove(origin);
    }

    /// Number of origins remembered; never more than the bound.
    pub fn origins(&self) -> usize {
        self.windows.len()
    }

    /// A linear scan, paid only when a new origin arrives at a full table.
    fn evict_least_recent(&mut self) {
        let oldest = self.windows.iter().min_by_key(|(_, window)| window.last_heard).map(|(name, _)| name.clone());
        if let Some(oldest) = oldest {
            self.windows.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_dropped_and_gaps_filled() {
        let mut filter = DuplicateFilter::default();
        assert!(filter.accept("a", 5));
        assert!(!filter.accept("a", 5));
        assert!(filter.accept("a", 3), "an earlier sequence arriving late is new");
        assert!(!filter.accept("a", 3));
        assert!(filter.accept("b", 5), "origins are independent");
        assert!(filter.accept("a", 7));
        assert!(filter.accept("a", 6));
        assert!(!filter.accept("a", 6));
    }

    #[test]
    fn sequences_older_than_the_window_are_dropped() {
        let mut filter = DuplicateFilter::default();
        assert!(filter.accept("a", 0));
        assert!(filter.accept("a", DUPLICATE_WINDOW));
        assert!(!filter.accept("a", 0));
        assert!(filter.accept("a", 1));
        assert!(filter.accept("a", 3 * DUPLICATE_WINDOW));
        assert!(!filter.accept("a", 2 * DUPLICATE_WINDOW));
        assert!(filter.accept("a", 2 * DUPLICATE_WINDOW + 1));
    }

    #[test]
    fn advancing_clears_reused_slots() {
        let mut filter = DuplicateFilter::default();
        assert!(filter.accept("a", 1));
        assert!(filter.accept("a", DUPLICATE_WINDOW + 2));
        // Slot of 1 + DUPLICATE_WINDOW was used by 1 and must read as unseen now.
        assert!(filter.accept("a", DUPLICATE_WINDOW + 1));
    }

    #[test]
    fn the_least_recently_heard_origin_is_forgotten_first() {
        let mut filter = DuplicateFilter::new(2);
        assert!(filter.accept("a", 1));
        assert!(filter.accept("b", 1));
        assert!(!filter.accept("a", 1));
        assert!(filter.accept("c", 1));
        assert_eq!(filter.origins(), 2);
        assert!(!filter.accept("a", 1), "a was heard more recently than b");
        assert!(filter.accept("b", 1), "b was forgotten");
        filter.forget("b");
        assert_eq!(filter.origins(), 1);
    }
}
