//! What a predicate on one property makes of each value: the values for
//! which it is TRUE and those for which it is FALSE.
//!
//! Tags predicates are only ever true or false, and only the true set
//! matters. SQL predicates can also be UNKNOWN (a NULL, or a string compared
//! with a number), and `NOT p` is TRUE exactly where `p` is FALSE, so both
//! sets are kept: negation swaps them, and AND and OR combine them by the SQL
//! truth tables. A value in neither set is UNKNOWN.

use std::ops::Bound;
use std::sync::Arc;

use sift_core::Value;

use crate::compare::ComparisonOp;
use crate::covering::interval::{Interval, IntervalSet};
use crate::covering::value_set::{Number, ValueSet};

/// The values for which a predicate is TRUE and those for which it is FALSE.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcomes {
    /// Values that make the predicate TRUE.
    pub(crate) when_true: ValueSet,
    /// Values that make the predicate FALSE.
    pub(crate) when_false: ValueSet,
}

/// Whether a language orders strings (tags do) or only tests them for
/// equality (SQL, where `s < 'x'` is UNKNOWN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StringOrder {
    /// `<`, `<=`, `>` and `>=` compare strings by code point.
    Ordered,
    /// Only `=` and `<>` apply to strings.
    EqualityOnly,
}

impl Outcomes {
    /// SQL NOT.
    pub(crate) fn not(self) -> Outcomes {
        Outcomes { when_true: self.when_false, when_false: self.when_true }
    }

    /// SQL AND: TRUE when both are, FALSE when either is.
    pub(crate) fn and(&self, other: &Outcomes) -> Outcomes {
        Outcomes {
            when_true: self.when_true.intersection(&other.when_true),
            when_false: self.when_false.union(&other.when_false),
        }
    }

    /// SQL OR: TRUE when either is, FALSE when both are.
    pub(crate) fn or(&self, other: &Outcomes) -> Outcomes {
        Outcomes {
            when_true: self.when_true.union(&other.when_true),
            when_false: self.when_false.intersection(&other.when_false),
        }
    }
}

/// The opposite comparison: `a OP b` is false exactly when `a opposite(OP) b`
/// is true, for ordered values other than NaN.
fn opposite(op: ComparisonOp) -> ComparisonOp {
    match op {
        ComparisonOp::Equal => ComparisonOp::NotEqual,
        ComparisonOp::NotEqual => ComparisonOp::Equal,
        ComparisonOp::Less => ComparisonOp::GreaterOrEqual,
        ComparisonOp::LessOrEqual => ComparisonOp::Greater,
        ComparisonOp::Greater => ComparisonOp::LessOrEqual,
        ComparisonOp::GreaterOrEqual => ComparisonOp::Less,
    }
}

/// The values `x` of an ordered type with `x OP constant`.
fn op_intervals<T: Ord + Clone>(op: ComparisonOp, constant: T) -> IntervalSet<T> {
    let (low, high) = match op {
        ComparisonOp::Equal => (Bound::Included(constant.clone()), Bound::Included(constant)),
        ComparisonOp::NotEqual => {
            let below = Interval { low: Bound::Unbounded, high: Bound::Excluded(constant.clone()) };
            let above = Interval { low: Bound::Excluded(constant), high: Bound::Unbounded };
            return IntervalSet::from_intervals(vec![below, above]);
        }
        ComparisonOp::Less => (Bound::Unbounded, Bound::Excluded(constant)),
        ComparisonOp::LessOrEqual => (Bound::Unbounded, Bound::Included(constant)),
        ComparisonOp::Greater => (Bound::Excluded(constant), Bound::Unbounded),
        ComparisonOp::GreaterOrEqual => (Bound::Included(constant), Bound::Unbounded),
    };
    IntervalSet::from_intervals(vec![Interval { low, high }])
}

/// The outcomes of `property OP constant` in both languages: numbers compare
/// across integers and floats, NaN only satisfies `<>`, strings compare with
/// strings (ordered or not, per `strings`), booleans only with `=` and `<>`,
/// and everything else, absence included, is neither TRUE nor FALSE (tags
/// call that false, which is the same for matching).
pub(crate) fn comparison(op: ComparisonOp, constant: &Value, strings: StringOrder) -> Outcomes {
    let mut when_true = ValueSet::nothing();
    let mut when_false = ValueSet::nothing();
    match constant {
        Value::Int(_) | Value::Float(_) => match Number::from_value(constant) {
            Some(number) => {
                when_true.numbers = op_intervals(op, number);
                when_false.numbers = op_intervals(opposite(op), number);
                when_true.nan = op == ComparisonOp::NotEqual;
                when_false.nan = op != ComparisonOp::NotEqual;
            }
            // Against a NaN constant every number is unordered: only `<>` holds.
            None => {
                let numbers = if op == ComparisonOp::NotEqual { &mut when_true } else { &mut when_false };
                numbers.numbers = IntervalSet::all();
                numbers.nan = true;
            }
        },
        Value::Str(text) => {
            if op.is_equality() || strings == StringOrder::Ordered {
                when_true.strings = op_intervals(op, Arc::clone(text));
                when_false.strings = op_intervals(opposite(op), Arc::clone(text));
            }
        }
        Value::Bool(flag) => {
            if let Some(holds_when_equal) = op.holds_for_equality(true) {
                let index = usize::from(*flag);
                when_true.booleans[index] = holds_when_equal;
                when_true.booleans[1 - index] = !holds_when_equal;
                when_false.booleans[index] = !holds_when_equal;
                when_false.booleans[1 - index] = holds_when_equal;
            }
        }
    }
    Outcomes { when_true, when_false }
}

/// The outcomes of `property IS NULL`.
pub(crate) fn is_null() -> Outcomes {
    Outcomes { when_true: ValueSet::absent_only(), when_false: ValueSet::present() }
}

/// The outcomes of a property used as a condition: TRUE for the boolean
/// `true`, FALSE for `false`, UNKNOWN otherwise.
pub(crate) fn boolean_property() -> Outcomes {
    let mut when_true = ValueSet::nothing();
    let mut when_false = ValueSet::nothing();
    when_true.booleans[1] = true;
    when_false.booleans[0] = true;
    Outcomes { when_true, when_false }
}

/// The outcomes of a property compared with a list, as `IN` defines it: the
/// OR of `property = item` for each item. An empty list is FALSE for every
/// present value.
pub(crate) fn in_list(list: &[Value]) -> Outcomes {
    let empty = Outcomes { when_true: ValueSet::nothing(), when_false: ValueSet::present() };
    list.iter().fold(empty, |found, item| found.or(&comparison(ComparisonOp::Equal, item, StringOrder::EqualityOnly)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(value: i64) -> Value {
        Value::Int(value)
    }

    #[test]
    fn numeric_comparisons_give_ranges_and_their_complements() {
        let above = comparison(ComparisonOp::Greater, &int(100), StringOrder::EqualityOnly);
        let further = comparison(ComparisonOp::Greater, &Value::Float(200.5), StringOrder::EqualityOnly);
        assert!(further.when_true.is_subset_of(&above.when_true));
        assert!(!above.when_true.is_subset_of(&further.when_true));
        // NaN makes `x > 100` FALSE, so `NOT (x > 100)` holds for NaN, unlike `x <= 100`.
        assert!(above.when_false.nan);
        let at_most = comparison(ComparisonOp::LessOrEqual, &int(100), StringOrder::EqualityOnly);
        assert!(!above.clone().not().when_true.is_subset_of(&at_most.when_true));
        assert!(at_most.when_true.is_subset_of(&above.not().when_true));
    }

    #[test]
    fn strings_are_ordered_only_in_tags() {
        let text = Value::Str("m".into());
        assert!(comparison(ComparisonOp::Less, &text, StringOrder::EqualityOnly).when_true.is_empty());
        assert!(!comparison(ComparisonOp::Less, &text, StringOrder::Ordered).when_true.is_empty());
        let equal = comparison(ComparisonOp::Equal, &text, StringOrder::EqualityOnly);
        assert!(equal.when_true.numbers.is_empty() && !equal.when_true.strings.is_empty());
    }

    #[test]
    fn booleans_and_lists() {
        let not_true = comparison(ComparisonOp::NotEqual, &Value::Bool(true), StringOrder::EqualityOnly);
        assert_eq!(not_true.when_true.booleans, [true, false]);
        assert!(comparison(ComparisonOp::Less, &Value::Bool(true), StringOrder::Ordered).when_true.is_empty());
        let small = in_list(&[int(1), int(2)]);
        let large = in_list(&[int(1), int(2), int(3)]);
        assert!(small.when_true.is_subset_of(&large.when_true));
        assert!(large.clone().not().when_true.is_subset_of(&small.clone().not().when_true));
        // A string in the list makes NOT IN UNKNOWN, never TRUE, for strings it does not equal.
        let mixed = in_list(&[int(1), Value::Str("a".into())]).not();
        assert!(mixed.when_true.strings.is_empty());
        assert!(mixed.when_true.numbers.is_empty(), "a number against 'a' is UNKNOWN, so NOT IN is never TRUE");
        assert!(is_null().when_true.absent && !is_null().when_false.absent);
    }
}
