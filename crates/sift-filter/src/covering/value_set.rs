//! Sets of property values, split by type, for deciding implication.
//!
//! A predicate on one property holds for some set of values of that property
//! (perhaps including "absent"). One predicate implies another exactly when
//! its set is a subset of the other's, so the covering check turns each
//! predicate it understands into such a set. The types are kept apart
//! because the languages never let a range on numbers say anything about
//! strings or booleans.

use std::cmp::Ordering;
use std::sync::Arc;

use sift_core::Value;

use crate::compare::compare_int_float;
use crate::covering::interval::IntervalSet;

/// A number that is not NaN, ordered by numeric value across integers and
/// floats exactly as the filter languages compare them (so `1 = 1.0` and
/// `-0.0 = 0.0`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Number {
    /// An integer.
    Int(i64),
    /// A float other than NaN.
    Float(f64),
}

impl Number {
    /// The number a value holds, or `None` for NaN and non-numbers.
    pub(crate) fn from_value(value: &Value) -> Option<Number> {
        match value {
            Value::Int(int) => Some(Number::Int(*int)),
            Value::Float(float) if !float.is_nan() => Some(Number::Float(*float)),
            _ => None,
        }
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Number) -> Ordering {
        // NaN is excluded by construction, so the partial orders are total
        // here; `Equal` is never reached as a fallback.
        match (self, other) {
            (Number::Int(left), Number::Int(right)) => left.cmp(right),
            (Number::Float(left), Number::Float(right)) => left.partial_cmp(right).unwrap_or(Ordering::Equal),
            (Number::Int(left), Number::Float(right)) => compare_int_float(*left, *right).unwrap_or(Ordering::Equal),
            (Number::Float(left), Number::Int(right)) => {
                compare_int_float(*right, *left).map_or(Ordering::Equal, Ordering::reverse)
            }
        }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Number) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Number {}

/// The values of one property for which a predicate has some outcome.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValueSet {
    /// Whether a message without the property is in the set.
    pub(crate) absent: bool,
    /// Whether `false` and `true` (in that order) are in the set.
    pub(crate) booleans: [bool; 2],
    /// Whether NaN is in the set.
    pub(crate) nan: bool,
    /// The numbers other than NaN in the set.
    pub(crate) numbers: IntervalSet<Number>,
    /// The strings in the set, ordered by code point.
    pub(crate) strings: IntervalSet<Arc<str>>,
}

impl ValueSet {
    /// No value at all.
    pub(crate) fn nothing() -> ValueSet {
        ValueSet {
            absent: false,
            booleans: [false; 2],
            nan: false,
            numbers: IntervalSet::empty(),
            strings: IntervalSet::empty(),
        }
    }

    /// Every value the property can have, but not its absence.
    pub(crate) fn present() -> ValueSet {
        ValueSet {
            absent: false,
            booleans: [true; 2],
            nan: true,
            numbers: IntervalSet::all(),
            strings: IntervalSet::all(),
        }
    }

    /// Every value, and absence too: what a conjunction that does not
    /// mention the property allows.
    pub(crate) fn everything() -> ValueSet {
        ValueSet { absent: true, ..ValueSet::present() }
    }

    /// Absence alone: the property is missing (SQL NULL).
    pub(crate) fn absent_only() -> ValueSet {
        ValueSet { absent: true, ..ValueSet::nothing() }
    }

    /// True when no message can have a value in the set.
    pub(crate) fn is_empty(&self) -> bool {
        !self.absent && self.booleans == [false; 2] && !self.nan && self.numbers.is_empty() && self.strings.is_empty()
    }

    /// True when every value of `self` is in `other`.
    pub(crate) fn is_subset_of(&self, other: &ValueSet) -> bool {
        (!self.absent || other.absent)
            && (!self.nan || other.nan)
            && self.booleans.iter().zip(other.booleans).all(|(inner, outer)| !inner || outer)
            && self.numbers.is_subset_of(&other.numbers)
            && self.strings.is_subset_of(&other.strings)
    }

    /// The values in either set.
    pub(crate) fn union(&self, other: &ValueSet) -> ValueSet {
        ValueSet {
            absent: self.absent || other.absent,
            booleans: [self.booleans[0] || other.booleans[0], self.booleans[1] || other.booleans[1]],
            nan: self.nan || other.nan,
            numbers: self.numbers.union(&other.numbers),
            strings: self.strings.union(&other.strings),
        }
    }

    /// The values in both sets.
    pub(crate) fn intersection(&self, other: &ValueSet) -> ValueSet {
        ValueSet {
            absent: self.absent && other.absent,
            booleans: [self.booleans[0] && other.booleans[0], self.booleans[1] && other.booleans[1]],
            nan: self.nan && other.nan,
            numbers: self.numbers.intersection(&other.numbers),
            strings: self.strings.intersection(&other.strings),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_order_across_integers_and_floats() {
        assert_eq!(Number::Int(1), Number::Float(1.0));
        assert_eq!(Number::Float(-0.0), Number::Float(0.0));
        assert!(Number::Int(9_007_199_254_740_993) > Number::Float(9_007_199_254_740_992.0));
        assert!(Number::Float(1.5) > Number::Int(1));
        assert!(Number::Float(f64::NEG_INFINITY) < Number::Int(i64::MIN));
        assert_eq!(Number::from_value(&Value::Float(f64::NAN)), None);
        assert_eq!(Number::from_value(&Value::Str("1".into())), None);
    }

    #[test]
    fn set_algebra_keeps_types_apart() {
        assert!(ValueSet::nothing().is_empty());
        assert!(ValueSet::present().is_subset_of(&ValueSet::everything()));
        assert!(!ValueSet::everything().is_subset_of(&ValueSet::present()));
        assert!(ValueSet::absent_only().intersection(&ValueSet::present()).is_empty());
        assert_eq!(ValueSet::absent_only().union(&ValueSet::present()), ValueSet::everything());
    }
}
