//! The ordered tests of one relative path and one operator, sorted by
//! threshold, so that the tests a document's values satisfy are found by
//! binary search.
//!
//! Under XPath 1.0's existential rule only the extremes of a path's
//! numbers matter: some number is `>= t` exactly when the largest is, and
//! `<= t` when the smallest is. So the tests that hold are a prefix (for
//! `>` and `>=`) or a suffix (for `<` and `<=`) of the sorted thresholds,
//! and for `!=` all of them but those equal to the only number seen, if
//! there is only one and no NaN.

use std::ops::Range;

use crate::compare::ComparisonOp;
use crate::xpath::value_index::TestId;

/// What a relative path's nodes came to as numbers, on one element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NumberSummary {
    /// How many nodes had a string-value that is a number.
    pub(crate) count: usize,
    /// The smallest and the largest of those numbers; meaningless at a count of zero.
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// True when some node's string-value is not a number.
    pub(crate) nan_seen: bool,
}

impl Default for NumberSummary {
    fn default() -> Self {
        NumberSummary { count: 0, min: f64::INFINITY, max: f64::NEG_INFINITY, nan_seen: false }
    }
}

impl NumberSummary {
    /// Counts one node's number, NaN included.
    pub(crate) fn add(&mut self, number: f64) {
        if number.is_nan() {
            self.nan_seen = true;
            return;
        }
        self.count += 1;
        self.min = self.min.min(number);
        self.max = self.max.max(number);
    }

    /// True when no node was seen at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0 && !self.nan_seen
    }
}

/// Tests of one operator (never `=`), each with a distinct threshold, in
/// ascending order of threshold. Thresholds are never NaN.
#[derive(Debug, Clone, Default)]
pub(crate) struct RangeTests {
    entries: Vec<(f64, TestId)>,
}

impl RangeTests {
    /// True when the array holds no test.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The number of tests.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Files `test` under `threshold`, which no other test has.
    pub(crate) fn insert(&mut self, threshold: f64, test: TestId) {
        let at = self.entries.partition_point(|&(existing, _)| existing < threshold);
        self.entries.insert(at, (threshold, test));
    }

    /// Drops the test under `threshold`, if there is one.
    pub(crate) fn remove(&mut self, threshold: f64) {
        let at = self.entries.partition_point(|&(existing, _)| existing < threshold);
        if self.entries.get(at).is_some_and(|&(existing, _)| existing == threshold) {
            self.entries.remove(at);
        }
    }

    /// Calls `mark` with each test that some of the summarised numbers
    /// satisfy under `op`.
    pub(crate) fn satisfied(&self, op: ComparisonOp, summary: &NumberSummary, mark: &mut impl FnMut(TestId)) {
        for range in self.satisfied_ranges(op, summary) {
            self.entries[range].iter().for_each(|&(_, test)| mark(test));
        }
    }

    /// The positions of the satisfied tests, as at most two ranges.
    fn satisfied_ranges(&self, op: ComparisonOp, summary: &NumberSummary) -> [Range<usize>; 2] {
        let length = self.entries.len();
        let below = |bound: f64| self.entries.partition_point(|&(threshold, _)| threshold < bound);
        let up_to = |bound: f64| self.entries.partition_point(|&(threshold, _)| threshold <= bound);
        let nothing = [0..0, 0..0];
        if op == ComparisonOp::NotEqual {
            return match (summary.nan_seen, summary.count) {
                (false, 0) => nothing,
                // One number, and nothing else: every threshold but that one.
                (false, _) if summary.min == summary.max => [0..below(summary.min), up_to(summary.min)..length],
                _ => [0..length, 0..0],
            };
        }
        if summary.count == 0 {
            return nothing;
        }
        match op {
            ComparisonOp::GreaterOrEqual => [0..up_to(summary.max), 0..0],
            ComparisonOp::Greater => [0..below(summary.max), 0..0],
            ComparisonOp::LessOrEqual => [below(summary.min)..length, 0..0],
            ComparisonOp::Less => [up_to(summary.min)..length, 0..0],
            _ => nothing,
        }
    }

    /// A guess at how often a test of `op` at `threshold` (which the array
    /// holds) is satisfied, taking the distinct thresholds subscribers
    /// chose as a picture of the values documents carry: `>= t` for the
    /// largest of n thresholds counts as 1/(n+1), for the smallest as n/(n+1).
    pub(crate) fn estimate(&self, op: ComparisonOp, threshold: f64) -> f64 {
        let length = self.entries.len() as f64;
        let position = self.entries.partition_point(|&(existing, _)| existing < threshold) as f64;
        match op {
            ComparisonOp::Greater | ComparisonOp::GreaterOrEqual => (length - position) / (length + 1.0),
            ComparisonOp::Less | ComparisonOp::LessOrEqual => (position + 1.0) / (length + 1.0),
            _ => 1.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THRESHOLDS: [f64; 5] = [2001.0, 2002.0, 2003.0, 2004.0, 2005.0];

    /// Tests numbered by threshold: test 0 is at 2001, test 4 at 2005.
    fn years() -> RangeTests {
        let mut tests = RangeTests::default();
        for (test, threshold) in THRESHOLDS.iter().enumerate().rev() {
            tests.insert(*threshold, test);
        }
        tests
    }

    fn summary(numbers: &[f64]) -> NumberSummary {
        let mut summary = NumberSummary::default();
        numbers.iter().for_each(|&number| summary.add(number));
        summary
    }

    fn satisfied(tests: &RangeTests, op: ComparisonOp, numbers: &[f64]) -> Vec<TestId> {
        let mut marked = Vec::new();
        tests.satisfied(op, &summary(numbers), &mut |test| marked.push(test));
        marked.sort_unstable();
        marked
    }

    #[test]
    fn extremes_decide_the_ordered_operators() {
        let tests = years();
        assert_eq!(satisfied(&tests, ComparisonOp::GreaterOrEqual, &[2003.0]), [0, 1, 2]);
        assert_eq!(satisfied(&tests, ComparisonOp::Greater, &[2003.0]), [0, 1]);
        assert_eq!(satisfied(&tests, ComparisonOp::LessOrEqual, &[2003.0]), [2, 3, 4]);
        assert_eq!(satisfied(&tests, ComparisonOp::Less, &[2003.0]), [3, 4]);
        assert_eq!(satisfied(&tests, ComparisonOp::GreaterOrEqual, &[1999.0, 2004.5, f64::NAN]), [0, 1, 2, 3]);
        assert_eq!(satisfied(&tests, ComparisonOp::Less, &[2004.5, 2002.0]), [2, 3, 4]);
        assert!(satisfied(&tests, ComparisonOp::GreaterOrEqual, &[f64::NAN]).is_empty(), "NaN orders with nothing");
        assert!(satisfied(&tests, ComparisonOp::Less, &[]).is_empty());
    }

    #[test]
    fn not_equal_holds_unless_every_node_is_the_threshold() {
        let tests = years();
        assert_eq!(satisfied(&tests, ComparisonOp::NotEqual, &[2003.0, 2003.0]), [0, 1, 3, 4]);
        assert_eq!(satisfied(&tests, ComparisonOp::NotEqual, &[2003.0, 2004.0]), [0, 1, 2, 3, 4]);
        assert_eq!(satisfied(&tests, ComparisonOp::NotEqual, &[2003.0, f64::NAN]), [0, 1, 2, 3, 4]);
        assert_eq!(satisfied(&tests, ComparisonOp::NotEqual, &[f64::NAN]), [0, 1, 2, 3, 4]);
        assert!(satisfied(&tests, ComparisonOp::NotEqual, &[]).is_empty());
    }

    #[test]
    fn insert_and_remove_keep_the_order() {
        let mut tests = years();
        tests.remove(2003.0);
        tests.remove(1.0);
        assert_eq!(tests.len(), 4);
        assert_eq!(satisfied(&tests, ComparisonOp::GreaterOrEqual, &[2003.0]), [0, 1]);
        tests.insert(2002.5, 9);
        assert_eq!(satisfied(&tests, ComparisonOp::GreaterOrEqual, &[2003.0]), [0, 1, 9]);
        for threshold in [2001.0, 2002.0, 2002.5, 2004.0, 2005.0] {
            tests.remove(threshold);
        }
        assert!(tests.is_empty());
    }

    #[test]
    fn estimates_follow_the_threshold_rank() {
        let tests = years();
        assert_eq!(tests.estimate(ComparisonOp::GreaterOrEqual, 2005.0), 1.0 / 6.0);
        assert_eq!(tests.estimate(ComparisonOp::GreaterOrEqual, 2001.0), 5.0 / 6.0);
        assert_eq!(tests.estimate(ComparisonOp::Less, 2001.0), 1.0 / 6.0);
        assert_eq!(tests.estimate(ComparisonOp::NotEqual, 2001.0), 1.0);
    }
}
