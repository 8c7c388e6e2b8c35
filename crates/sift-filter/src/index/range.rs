//! Range predicates on one attribute, sorted by bound, so that those a value
//! satisfies are found by one binary search each and then read off in order.
//!
//! For a value `v`, `attribute > c` holds exactly for the bounds `c < v`: a
//! prefix of the bounds in ascending order. Likewise `>=` holds for `c <= v`,
//! `<` for `c > v` and `<=` for `c >= v`, each a prefix or suffix. Ordered maps
//! (rather than sorted vectors) keep insertion and removal logarithmic when
//! many subscriptions use distinct bounds.
//!
//! [`admits`] states the same rule for one value and one bound, for the
//! clustered conjunctions that compare a value with their bounds directly
//! (see `cluster.rs`); a test below holds the two to agreement.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Included, Unbounded};

use crate::index::predicate::{PredicateId, RangeOp};

/// The range predicates on one attribute with bounds of one type `T`.
#[derive(Debug, Clone)]
pub(crate) struct RangeIndex<T> {
    less: BTreeMap<T, PredicateId>,
    less_or_equal: BTreeMap<T, PredicateId>,
    greater: BTreeMap<T, PredicateId>,
    greater_or_equal: BTreeMap<T, PredicateId>,
}

impl<T> Default for RangeIndex<T> {
    fn default() -> Self {
        RangeIndex {
            less: BTreeMap::new(),
            less_or_equal: BTreeMap::new(),
            greater: BTreeMap::new(),
            greater_or_equal: BTreeMap::new(),
        }
    }
}

impl<T: Ord> RangeIndex<T> {
    fn map_mut(&mut self, op: RangeOp) -> &mut BTreeMap<T, PredicateId> {
        match op {
            RangeOp::Less => &mut self.less,
            RangeOp::LessOrEqual => &mut self.less_or_equal,
            RangeOp::Greater => &mut self.greater,
            RangeOp::GreaterOrEqual => &mut self.greater_or_equal,
        }
    }

    /// Files predicate `id`, which is `attribute OP bound`.
    pub(crate) fn insert(&mut self, op: RangeOp, bound: T, id: PredicateId) {
        self.map_mut(op).insert(bound, id);
    }

    /// Removes the predicate `attribute OP bound`.
    pub(crate) fn remove<Q>(&mut self, op: RangeOp, bound: &Q)
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.map_mut(op).remove(bound);
    }

    /// Appends the ids of the predicates that `value` satisfies.
    pub(crate) fn collect<Q>(&self, value: &Q, satisfied: &mut Vec<PredicateId>)
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        // attribute > bound: the bounds below the value.
        satisfied.extend(self.greater.range::<Q, _>((Unbounded, Excluded(value))).map(|(_, id)| *id));
        satisfied.extend(self.greater_or_equal.range::<Q, _>((Unbounded, Included(value))).map(|(_, id)| *id));
        // attribute < bound: the bounds above the value.
        satisfied.extend(self.less.range::<Q, _>((Excluded(value), Unbounded)).map(|(_, id)| *id));
        satisfied.extend(self.less_or_equal.range::<Q, _>((Included(value), Unbounded)).map(|(_, id)| *id));
    }
}

/// True when `attribute OP bound` holds for an attribute whose value is
/// `value`: the predicates [`RangeIndex::collect`] would find for `value`.
pub(crate) fn admits<Q: Ord + ?Sized>(op: RangeOp, value: &Q, bound: &Q) -> bool {
    let ordering = value.cmp(bound);
    match op {
        RangeOp::Less => ordering == Ordering::Less,
        RangeOp::LessOrEqual => ordering != Ordering::Greater,
        RangeOp::Greater => ordering == Ordering::Greater,
        RangeOp::GreaterOrEqual => ordering != Ordering::Less,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: [RangeOp; 4] = [RangeOp::Less, RangeOp::LessOrEqual, RangeOp::Greater, RangeOp::GreaterOrEqual];

    #[test]
    fn finds_exactly_the_bounds_each_operator_allows() {
        let mut index: RangeIndex<i64> = RangeIndex::default();
        // Predicate id = 10 * op number + bound.
        for (number, op) in OPS.into_iter().enumerate() {
            for bound in 1..4 {
                index.insert(op, bound, 10 * number + bound as usize);
            }
        }
        let mut satisfied = Vec::new();
        index.collect(&2, &mut satisfied);
        satisfied.sort_unstable();
        // 2 < 3; 2 <= 2, 3; 2 > 1; 2 >= 1, 2.
        assert_eq!(satisfied, vec![3, 12, 13, 21, 31, 32]);
        index.remove(RangeOp::LessOrEqual, &2);
        satisfied.clear();
        index.collect(&2, &mut satisfied);
        assert_eq!(satisfied.len(), 5);
    }

    #[test]
    fn string_bounds_are_looked_up_by_str() {
        let mut index: RangeIndex<Box<str>> = RangeIndex::default();
        index.insert(RangeOp::Greater, "HP".into(), 1);
        index.insert(RangeOp::Greater, "JPM".into(), 2);
        let mut satisfied = Vec::new();
        index.collect("IBM", &mut satisfied);
        assert_eq!(satisfied, vec![1]);
        index.remove(RangeOp::Greater, "HP");
        satisfied.clear();
        index.collect("IBM", &mut satisfied);
        assert!(satisfied.is_empty());
    }

    #[test]
    fn admits_agrees_with_the_index() {
        let mut index: RangeIndex<i64> = RangeIndex::default();
        let bounds = -2..3_i64;
        // Predicate id = 10 * op number + bound + 2, so ids are not negative.
        let id = |number: usize, bound: i64| 10 * number + usize::try_from(bound + 2).expect("small");
        for (number, op) in OPS.into_iter().enumerate() {
            for bound in bounds.clone() {
                index.insert(op, bound, id(number, bound));
            }
        }
        for value in -3..4 {
            let mut satisfied = Vec::new();
            index.collect(&value, &mut satisfied);
            satisfied.sort_unstable();
            let mut admitted = Vec::new();
            for (number, op) in OPS.into_iter().enumerate() {
                admitted
                    .extend(bounds.clone().filter(|bound| admits(op, &value, bound)).map(|bound| id(number, bound)));
            }
            admitted.sort_unstable();
            assert_eq!(satisfied, admitted, "value {value}");
        }
    }
}
