//! Conjunctions that differ only in the bound of one range predicate, sorted
//! by that bound, so that those a value passes are one contiguous run found
//! by one binary search.
//!
//! In a cluster of `sym = 'S0042' AND price > N` selectors, each member
//! would compare the quote's price with its own `N` and about half would
//! pass. Sorted by `N`, the passing ones are exactly the members with
//! `N < price`: a prefix, whose keys are output without looking at the
//! others. The same holds for every operator (see `range.rs`): `>` and `>=`
//! pass a prefix, `<` and `<=` a suffix.
//!
//! Bounds and targets are kept in two parallel vectors, so that the binary
//! search reads only bounds and the output reads only targets. Equal bounds
//! are ordered by conjunction id, so that a member is found again by binary
//! search too: insertion and removal cost `O(log n)` comparisons plus the
//! shift of the entries after the position (a `memmove` of up to `n`
//! entries, `n` the run's length).

use std::borrow::Borrow;
use std::ops::Range;

use crate::index::predicate::RangeOp;
use crate::index::target::Target;

/// Targets sorted by the bound of their range predicate, of type `T`.
#[derive(Debug, Clone)]
pub(crate) struct SortedRun<T, K> {
    bounds: Vec<T>,
    targets: Vec<Target<K>>,
}

impl<T, K> Default for SortedRun<T, K> {
    fn default() -> Self {
        SortedRun { bounds: Vec::new(), targets: Vec::new() }
    }
}

impl<T: Ord, K> SortedRun<T, K> {
    /// How many targets are filed.
    pub(crate) fn len(&self) -> usize {
        self.targets.len()
    }

    /// Where the entry `(bound, conjunction)` is, or would be inserted.
    fn position<Q>(&self, bound: &Q, conjunction: usize) -> usize
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let first = self.bounds.partition_point(|filed| filed.borrow() < bound);
        let equal = self.bounds[first..].partition_point(|filed| filed.borrow() == bound);
        let among_equal = &self.targets[first..first + equal];
        first + among_equal.partition_point(|target| target.conjunction < conjunction)
    }

    /// Files `target`, whose range predicate has `bound`.
    pub(crate) fn insert(&mut self, bound: T, target: Target<K>) {
        let position = self.position(&bound, target.conjunction);
        self.bounds.insert(position, bound);
        self.targets.insert(position, target);
    }

    /// Takes out the target of `conjunction`, filed with `bound`; false
    /// when it is not there.
    pub(crate) fn remove<Q>(&mut self, bound: &Q, conjunction: usize) -> bool
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let position = self.position(bound, conjunction);
        let found = self.targets.get(position).is_some_and(|target| target.conjunction == conjunction);
        if found {
            self.bounds.remove(position);
            self.targets.remove(position);
        }
        found
    }

    /// The targets whose predicate `attribute OP bound` holds when the
    /// attribute's value is `value`: exactly those [`crate::index::range`]
    /// admits, as one slice.
    pub(crate) fn passing<Q>(&self, op: RangeOp, value: &Q) -> &[Target<K>]
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let range = self.passing_range(op, value);
        &self.targets[range]
    }

    fn passing_range<Q>(&self, op: RangeOp, value: &Q) -> Range<usize>
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let below = || self.bounds.partition_point(|bound| bound.borrow() < value);
        let not_above = || self.bounds.partition_point(|bound| bound.borrow() <= value);
        match op {
            // bound < value
            RangeOp::Greater => 0..below(),
            // bound <= value
            RangeOp::GreaterOrEqual => 0..not_above(),
            // bound > value
            RangeOp::Less => not_above()..self.bounds.len(),
            // bound >= value
            RangeOp::LessOrEqual => below()..self.bounds.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::range::admits;

    const OPS: [RangeOp; 4] = [RangeOp::Less, RangeOp::LessOrEqual, RangeOp::Greater, RangeOp::GreaterOrEqual];

    fn target(conjunction: usize) -> Target<usize> {
        Target { conjunction, subscription: conjunction, sole: true, key: conjunction }
    }

    /// The conjunctions of the passing targets, sorted.
    fn passing(run: &SortedRun<i64, usize>, op: RangeOp, value: i64) -> Vec<usize> {
        let mut conjunctions: Vec<usize> = run.passing(op, &value).iter().map(|target| target.conjunction).collect();
        conjunctions.sort_unstable();
        conjunctions
    }

    #[test]
    fn the_passing_run_is_what_admits_allows() {
        // Conjunction id = 10 * bound + copy, with repeated bounds.
        let bounds = [3_i64, -1, 2, 2, 0, 3, 2];
        for op in OPS {
            let mut run: SortedRun<i64, usize> = SortedRun::default();
            for (copy, bound) in bounds.iter().enumerate() {
                let id = usize::try_from(10 * (bound + 1)).expect("small") + copy;
                run.insert(*bound, target(id));
            }
            for value in -2..5 {
                let mut admitted: Vec<usize> = bounds
                    .iter()
                    .enumerate()
                    .filter(|(_, bound)| admits(op, &value, *bound))
                    .map(|(copy, bound)| usize::try_from(10 * (bound + 1)).expect("small") + copy)
                    .collect();
                admitted.sort_unstable();
                assert_eq!(passing(&run, op, value), admitted, "{op:?} {value}");
            }
        }
    }

    #[test]
    fn members_with_equal_bounds_are_removed_by_conjunction() {
        let mut run: SortedRun<i64, usize> = SortedRun::default();
        for (bound, conjunction) in [(5, 3), (5, 1), (4, 2), (5, 2), (6, 0)] {
            run.insert(bound, target(conjunction));
        }
        assert_eq!(run.len(), 5);
        assert!(!run.remove(&5, 9), "an unknown conjunction");
        assert!(!run.remove(&4, 1), "a known conjunction under another bound");
        assert!(run.remove(&5, 1));
        assert!(!run.remove(&5, 1), "already removed");
        assert_eq!(passing(&run, RangeOp::Greater, 6), vec![2, 2, 3]);
        assert!(run.remove(&4, 2));
        assert!(run.remove(&5, 2));
        assert_eq!(passing(&run, RangeOp::GreaterOrEqual, 6), vec![0, 3]);
        assert!(run.remove(&6, 0));
        assert!(run.remove(&5, 3));
        assert_eq!(run.len(), 0);
    }

    #[test]
    fn string_bounds_are_searched_by_str() {
        let mut run: SortedRun<Box<str>, usize> = SortedRun::default();
        run.insert("HP".into(), target(1));
        run.insert("JPM".into(), target(2));
        let keys = |op, value: &str| run.passing(op, value).iter().map(|target| target.key).collect::<Vec<_>>();
        assert_eq!(keys(RangeOp::Less, "IBM"), vec![2]);
        assert_eq!(keys(RangeOp::Greater, "IBM"), vec![1]);
        assert_eq!(keys(RangeOp::LessOrEqual, "HP"), vec![1, 2]);
    }
}
