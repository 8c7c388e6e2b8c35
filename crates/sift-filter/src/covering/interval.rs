//! Finite unions of intervals over a totally ordered domain.
//!
//! Every predicate the covering check understands (`=`, `<>`, `<`, BETWEEN,
//! IN, NOT IN, ...) restricts a property to such a union, within one type.
//! Keeping the union normalised (sorted, disjoint, with a gap between
//! neighbours) makes inclusion a simple test: a connected interval lies in
//! the union only if it lies in one of its intervals.

use std::cmp::Ordering;
use std::ops::Bound;

/// One interval; `Unbounded` on a side reaches past every value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Interval<T> {
    pub(crate) low: Bound<T>,
    pub(crate) high: Bound<T>,
}

/// A normalised union of intervals.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IntervalSet<T> {
    intervals: Vec<Interval<T>>,
}

/// Orders two lower bounds: the one that admits more values comes first.
fn compare_lows<T: Ord>(left: &Bound<T>, right: &Bound<T>) -> Ordering {
    match (left, right) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(left), Bound::Excluded(right)) => left.cmp(right).then(Ordering::Less),
        (Bound::Excluded(left), Bound::Included(right)) => left.cmp(right).then(Ordering::Greater),
        (Bound::Included(left), Bound::Included(right)) | (Bound::Excluded(left), Bound::Excluded(right)) => {
            left.cmp(right)
        }
    }
}

/// Orders two upper bounds: the one that admits more values comes last.
fn compare_highs<T: Ord>(left: &Bound<T>, right: &Bound<T>) -> Ordering {
    match (left, right) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Greater,
        (_, Bound::Unbounded) => Ordering::Less,
        (Bound::Included(left), Bound::Excluded(right)) => left.cmp(right).then(Ordering::Greater),
        (Bound::Excluded(left), Bound::Included(right)) => left.cmp(right).then(Ordering::Less),
        (Bound::Included(left), Bound::Included(right)) | (Bound::Excluded(left), Bound::Excluded(right)) => {
            left.cmp(right)
        }
    }
}

/// True when no value lies between `high` and a later `low`, so the two
/// intervals overlap or touch and their union is one interval.
fn joins<T: Ord>(high: &Bound<T>, low: &Bound<T>) -> bool {
    match (high, low) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(high), Bound::Included(low)) => low <= high,
        (Bound::Included(high), Bound::Excluded(low)) | (Bound::Excluded(high), Bound::Included(low)) => low <= high,
        (Bound::Excluded(high), Bound::Excluded(low)) => low < high,
    }
}

impl<T: Ord + Clone> Interval<T> {
    /// Every value.
    pub(crate) fn all() -> Interval<T> {
        Interval { low: Bound::Unbounded, high: Bound::Unbounded }
    }

    /// True when no value lies in the interval (over a dense order; a
    /// discrete domain may have fewer values, which only makes sets smaller).
    fn is_empty(&self) -> bool {
        match (&self.low, &self.high) {
            (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
            (Bound::Included(low), Bound::Included(high)) => low > high,
            (Bound::Included(low) | Bound::Excluded(low), Bound::Included(high) | Bound::Excluded(high)) => low >= high,
        }
    }

    /// True when every value of `inner` is in `self`.
    fn contains(&self, inner: &Interval<T>) -> bool {
        compare_lows(&self.low, &inner.low).is_le() && compare_highs(&inner.high, &self.high).is_le()
    }

    /// The values in both.
    fn intersection(&self, other: &Interval<T>) -> Interval<T> {
        let low = if compare_lows(&self.low, &other.low).is_ge() { &self.low } else { &other.low };
        let high = if compare_highs(&self.high, &other.high).is_le() { &self.high } else { &other.high };
        Interval { low: low.clone(), high: high.clone() }
    }
}

impl<T: Ord + Clone> IntervalSet<T> {
    /// The empty set.
    pub(crate) fn empty() -> IntervalSet<T> {
        IntervalSet { intervals: Vec::new() }
    }

    /// Every value.
    pub(crate) fn all() -> IntervalSet<T> {
        IntervalSet { intervals: vec![Interval::all()] }
    }

    /// The union of `intervals`, normalised: empty intervals dropped, the
    /// rest sorted and merged where they overlap or touch.
    pub(crate) fn from_intervals(mut intervals: Vec<Interval<T>>) -> IntervalSet<T> {
        intervals.retain(|interval| !interval.is_empty());
        intervals.sort_by(|left, right| compare_lows(&left.low, &right.low));
        let mut merged: Vec<Interval<T>> = Vec::with_capacity(intervals.len());
        for interval in intervals {
            match merged.last_mut() {
                Some(last) if joins(&last.high, &interval.low) => {
                    if compare_highs(&interval.high, &last.high).is_gt() {
                        last.high = interval.high;
                    }
                }
                _ => merged.push(interval),
            }
        }
        IntervalSet { intervals: merged }
    }

    /// True when the set has no value.
    pub(crate) fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// True when every value of `self` is in `other`.
    pub(crate) fn is_subset_of(&self, other: &IntervalSet<T>) -> bool {
        self.intervals.iter().all(|inner| other.intervals.iter().any(|outer| outer.contains(inner)))
    }

    /// The values in either.
    pub(crate) fn union(&self, other: &IntervalSet<T>) -> IntervalSet<T> {
        IntervalSet::from_intervals(self.intervals.iter().chain(&other.intervals).cloned().collect())
    }

    /// The values in both.
    pub(crate) fn intersection(&self, other: &IntervalSet<T>) -> IntervalSet<T> {
        let pieces = self
            .intervals
            .iter()
            .flat_map(|left| other.intervals.iter().map(move |right| left.intersection(right)))
            .collect();
        IntervalSet::from_intervals(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(intervals: &[(Bound<i32>, Bound<i32>)]) -> IntervalSet<i32> {
        IntervalSet::from_intervals(intervals.iter().map(|(low, high)| Interval { low: *low, high: *high }).collect())
    }

    #[test]
    fn normalising_merges_touching_intervals_and_drops_empty_ones() {
        let touching = set(&[(Bound::Included(3), Bound::Included(5)), (Bound::Included(1), Bound::Excluded(3))]);
        assert_eq!(touching, set(&[(Bound::Included(1), Bound::Included(5))]));
        let apart = set(&[(Bound::Included(1), Bound::Excluded(3)), (Bound::Excluded(3), Bound::Included(5))]);
        assert!(!set(&[(Bound::Included(1), Bound::Included(5))]).is_subset_of(&apart));
        assert!(set(&[(Bound::Excluded(2), Bound::Excluded(2)), (Bound::Included(4), Bound::Included(3))]).is_empty());
        assert!(!set(&[(Bound::Included(2), Bound::Included(2))]).is_empty());
    }

    #[test]
    fn inclusion_union_and_intersection() {
        let above_one = set(&[(Bound::Excluded(1), Bound::Unbounded)]);
        let two_to_four = set(&[(Bound::Included(2), Bound::Included(4))]);
        assert!(two_to_four.is_subset_of(&above_one));
        assert!(!above_one.is_subset_of(&two_to_four));
        assert!(IntervalSet::<i32>::empty().is_subset_of(&two_to_four));
        assert!(above_one.is_subset_of(&IntervalSet::all()));
        let below_three = set(&[(Bound::Unbounded, Bound::Excluded(3))]);
        assert_eq!(above_one.intersection(&below_three), set(&[(Bound::Excluded(1), Bound::Excluded(3))]));
        assert_eq!(above_one.union(&below_three), IntervalSet::all());
        let one = set(&[(Bound::Included(1), Bound::Included(1))]);
        assert!(one.intersection(&above_one).is_empty());
    }
}
