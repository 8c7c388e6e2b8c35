//! The sorted members of one cluster: conjunctions whose only predicate
//! besides the access predicate is one range predicate, and which have no
//! residual test, filed per (attribute, operator) in runs sorted by bound
//! (`sorted_run.rs`).
//!
//! A message that satisfies the access predicate passes exactly the members
//! whose range predicate its recorded attribute value satisfies, under the
//! rules of the range maps (`attribute_value.rs`): numbers order with number
//! bounds by their keys (integers and floats exactly, NaN with nothing),
//! strings with string bounds, and nothing else orders. Number and string
//! bounds are therefore kept in separate runs, and a value only searches the
//! run of its own type.

use sift_core::Message;

use crate::index::attribute_value::AttributeValue;
use crate::index::check::Check;
use crate::index::number::NumberKey;
use crate::index::predicate::{Bound, PredicateId, RangeOp};
use crate::index::scratch::Stamps;
use crate::index::sorted_run::SortedRun;
use crate::index::target::{emit_all, Target};

/// The range predicate a sorted member is filed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortedRange {
    /// The interned predicate, for releasing it.
    pub(crate) predicate: PredicateId,
    /// The attribute id whose recorded value is compared.
    pub(crate) attribute: usize,
    /// The operator.
    pub(crate) op: RangeOp,
    /// The constant side.
    pub(crate) bound: Bound,
}

impl SortedRange {
    /// The range predicate of a conjunction whose checks are `checks`, when
    /// they are exactly one range comparison.
    pub(crate) fn of_checks(checks: &[Check]) -> Option<SortedRange> {
        match checks {
            [Check::Range { predicate, attribute, op, bound }] => {
                Some(SortedRange { predicate: *predicate, attribute: *attribute, op: *op, bound: bound.clone() })
            }
            _ => None,
        }
    }
}

/// The members of one attribute and operator, by bound type.
#[derive(Debug, Clone)]
struct RangeRun<K> {
    attribute: usize,
    op: RangeOp,
    numbers: SortedRun<NumberKey, K>,
    texts: SortedRun<Box<str>, K>,
}

impl<K> RangeRun<K> {
    fn len(&self) -> usize {
        self.numbers.len() + self.texts.len()
    }
}

/// The sorted members of one cluster, one run per attribute and operator.
/// Clusters rarely mix more than one or two, so the runs are a short list
/// searched in order.
#[derive(Debug, Clone)]
pub(crate) struct RangeRuns<K> {
    runs: Vec<RangeRun<K>>,
}

impl<K> Default for RangeRuns<K> {
    fn default() -> Self {
        RangeRuns { runs: Vec::new() }
    }
}

impl<K> RangeRuns<K> {
    /// How many members are filed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.runs.iter().map(RangeRun::len).sum()
    }

    /// True when no member is filed.
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Files `target` by `range`.
    pub(crate) fn insert(&mut self, range: &SortedRange, target: Target<K>) {
        let found = self.runs.iter().position(|run| run.attribute == range.attribute && run.op == range.op);
        let index = found.unwrap_or_else(|| {
            let run = RangeRun {
                attribute: range.attribute,
                op: range.op,
                numbers: SortedRun::default(),
                texts: SortedRun::default(),
            };
            self.runs.push(run);
            self.runs.len() - 1
        });
        let Some(run) = self.runs.get_mut(index) else { return };
        match &range.bound {
            Bound::Number(number) => run.numbers.insert(*number, target),
            Bound::Text(text) => run.texts.insert(text.clone(), target),
        }
    }

    /// Takes out the member `conjunction` filed by `range`, dropping its run
    /// once empty; false when it is not there.
    pub(crate) fn remove(&mut self, range: &SortedRange, conjunction: usize) -> bool {
        let Some(index) = self.runs.iter().position(|run| run.attribute == range.attribute && run.op == range.op)
        else {
            return false;
        };
        let run = &mut self.runs[index];
        let removed = match &range.bound {
            Bound::Number(number) => run.numbers.remove(number, conjunction),
            Bound::Text(text) => run.texts.remove(&**text, conjunction),
        };
        if run.len() == 0 {
            self.runs.swap_remove(index);
        }
        removed
    }

    /// Appends the keys of the members that `message` passes to `out`, each
    /// subscription once; the message satisfies the cluster's access
    /// predicate, and its attribute values are recorded in `stamps`.
    pub(crate) fn emit(&self, message: &Message, stamps: &mut Stamps, out: &mut Vec<K>)
    where
        K: Clone,
    {
        for run in &self.runs {
            match stamps.attribute_value(run.attribute).copied() {
                Some(AttributeValue::Number(number)) => emit_all(run.numbers.passing(run.op, &number), stamps, out),
                Some(value @ AttributeValue::Text(_)) => {
                    if let Some(text) = value.text(message) {
                        emit_all(run.texts.passing(run.op, text.as_ref()), stamps, out);
                    }
                }
                // Absent, boolean or NaN: orders with no bound.
                Some(AttributeValue::Unordered) | None => {}
            }
        }
    }
}
