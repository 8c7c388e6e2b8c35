//! A set of sequence numbers kept as disjoint inclusive ranges.
//!
//! A stream consumer marks sequences *done* (acknowledged, skipped because
//! its filter did not pass them, or lost in a gap) in any order, while the
//! deliveries in flight hold back its ack floor. With a filter that passes
//! one message in a million, the done sequences above one unacknowledged
//! delivery can number millions, but they form a handful of runs: kept as
//! ranges, the set stays as small as the number of deliveries in flight.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent inclusive ranges of `u64`, by first element.
///
/// Invariant: for consecutive ranges `(a, b)` and `(c, d)`, `b + 1 < c`
/// (ranges that touch are merged), and `a <= b` for every range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> RangeSet {
        RangeSet::default()
    }

    /// True when `value` is in the set.
    pub fn contains(&self, value: u64) -> bool {
        self.ranges.range(..=value).next_back().is_some_and(|(_, last)| *last >= value)
    }

    /// Number of ranges (not of elements).
    #[cfg(test)]
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// True when nothing is in the set.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges in order, as `(first, last)` inclusive.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(first, last)| (*first, *last))
    }

    /// Adds `first..=last`, merging with any range it overlaps or touches.
    pub fn insert_range(&mut self, first: u64, last: u64) {
        debug_assert!(first <= last, "range {first}..={last} is empty");
        let mut merged_first = first;
        let mut merged_last = last;
        // The range starting at or before `first` may overlap or touch it.
        if let Some((&start, &end)) = self.ranges.range(..=first).next_back() {
            if end.saturating_add(1) >= first {
                merged_first = start;
                merged_last = merged_last.max(end);
                self.ranges.remove(&start);
            }
        }
        // Ranges starting inside or right after the new one are absorbed.
        let absorbed: Vec<(u64, u64)> = self
            .ranges
            .range(merged_first..=merged_last.saturating_add(1))
            .map(|(start, end)| (*start, *end))
            .collect();
        for (start, end) in absorbed {
            merged_last = merged_last.max(end);
            self.ranges.remove(&start);
        }
        self.ranges.insert(merged_first, merged_last);
        self.check();
    }

    /// Adds one value.
    pub fn insert(&mut self, value: u64) {
        self.insert_range(value, value);
    }

    /// Removes the range that starts at `first`, if it does, and returns
    /// its last element: used to move an ack floor up over a done run.
    pub fn take_run_starting_at(&mut self, first: u64) -> Option<u64> {
        self.ranges.remove(&first)
    }

    /// Removes every value up to and including `floor`.
    #[cfg(test)]
    pub fn remove_through(&mut self, floor: u64) {
        let below: Vec<(u64, u64)> = self.ranges.range(..=floor).map(|(start, end)| (*start, *end)).collect();
        for (start, end) in below {
            self.ranges.remove(&start);
            if end > floor {
                self.ranges.insert(floor + 1, end);
            }
        }
        self.check();
    }

    /// The first element at or after `value` that is *not* in the set.
    pub fn next_absent(&self, value: u64) -> u64 {
        match self.ranges.range(..=value).next_back() {
            Some((_, last)) if *last >= value => last.saturating_add(1),
            _ => value,
        }
    }

    fn check(&self) {
        if cfg!(debug_assertions) {
            let mut previous_last: Option<u64> = None;
            for (first, last) in &self.ranges {
                debug_assert!(first <= last, "range {first}..={last} is inverted");
                if let Some(previous) = previous_last {
                    debug_assert!(previous.saturating_add(1) < *first, "ranges touch or overlap at {first}");
                }
                previous_last = Some(*last);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn touching_ranges_merge() {
        let mut set = RangeSet::new();
        set.insert(5);
        set.insert(7);
        assert_eq!(set.range_count(), 2);
        set.insert(6);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(5, 7)]);
        set.insert_range(1, 4);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(1, 7)]);
        assert_eq!(set.next_absent(3), 8);
        assert_eq!(set.next_absent(9), 9);
        set.remove_through(3);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(4, 7)]);
        assert_eq!(set.take_run_starting_at(4), Some(7));
        assert!(set.is_empty());
    }

    proptest! {
        /// The set holds exactly the values inserted, minus those removed,
        /// whatever the order of insertions.
        #[test]
        fn behaves_like_a_set_of_values(
            inserts in proptest::collection::vec((0u64..200, 0u64..6), 0..60),
            floor in 0u64..200,
        ) {
            let mut set = RangeSet::new();
            let mut model = BTreeSet::new();
            for (first, width) in inserts {
                set.insert_range(first, first + width);
                model.extend(first..=first + width);
            }
            for value in 0..220 {
                prop_assert_eq!(set.contains(value), model.contains(&value), "value {}", value);
            }
            set.remove_through(floor);
            model.retain(|value| *value > floor);
            for value in 0..220 {
                prop_assert_eq!(set.contains(value), model.contains(&value), "after removal, value {}", value);
                let expected = (value..).find(|candidate| !model.contains(candidate)).unwrap_or(value);
                prop_assert_eq!(set.next_absent(value), expected);
            }
        }
    }
}
