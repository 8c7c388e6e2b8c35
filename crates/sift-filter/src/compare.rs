//! Comparison of typed values, shared by the tags and the SQL languages.
//!
//! Both languages compare numbers across `Int` and `Float`, strings with
//! strings and booleans with booleans, and treat anything else as
//! incompatible. They differ only in what they make of the outcome (a tags
//! predicate is false where a SQL comparison is UNKNOWN, and SQL forbids
//! ordering strings), so this module reports the outcome and leaves the verdict
//! to the language.

use std::borrow::Cow;
use std::cmp::Ordering;

use sift_core::Value;

/// A comparison operator, common to the tags and SQL languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComparisonOp {
    /// `=`
    Equal,
    /// `!=` in tags, `<>` in SQL.
    NotEqual,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
}

impl ComparisonOp {
    /// True when `left OP right` holds, given how `left` orders against `right`.
    pub fn holds(self, ordering: Ordering) -> bool {
        match self {
            ComparisonOp::Equal => ordering == Ordering::Equal,
            ComparisonOp::NotEqual => ordering != Ordering::Equal,
            ComparisonOp::Less => ordering == Ordering::Less,
            ComparisonOp::LessOrEqual => ordering != Ordering::Greater,
            ComparisonOp::Greater => ordering == Ordering::Greater,
            ComparisonOp::GreaterOrEqual => ordering != Ordering::Less,
        }
    }

    /// For values that can only be tested for equality (booleans, and
    /// strings in SQL): whether the operator holds, or `None` when the
    /// operator orders and so does not apply.
    pub fn holds_for_equality(self, equal: bool) -> Option<bool> {
        match self {
            ComparisonOp::Equal => Some(equal),
            ComparisonOp::NotEqual => Some(!equal),
            _ => None,
        }
    }

    /// The operator with its operands swapped: `c < x` is `x > c`. Rewrites
    /// that put the constant on the right (indexing, covering, XPath
    /// planning) all turn comparisons round with this.
    pub fn mirrored(self) -> ComparisonOp {
        match self {
            ComparisonOp::Less => ComparisonOp::Greater,
            ComparisonOp::LessOrEqual => ComparisonOp::GreaterOrEqual,
            ComparisonOp::Greater => ComparisonOp::Less,
            ComparisonOp::GreaterOrEqual => ComparisonOp::LessOrEqual,
            symmetric @ (ComparisonOp::Equal | ComparisonOp::NotEqual) => symmetric,
        }
    }

    /// True for `=` and `!=`/`<>`, the operators an equality index can serve.
    pub fn is_equality(self) -> bool {
        matches!(self, ComparisonOp::Equal | ComparisonOp::NotEqual)
    }

    /// How the operator is written in a SQL selector.
    pub fn sql_symbol(self) -> &'static str {
        match self {
            ComparisonOp::NotEqual => "<>",
            other => other.tags_symbol(),
        }
    }

    /// How the operator is written in a tags filter.
    pub fn tags_symbol(self) -> &'static str {
        match self {
            ComparisonOp::Equal => "=",
            ComparisonOp::NotEqual => "!=",
            ComparisonOp::Less => "<",
            ComparisonOp::LessOrEqual => "<=",
            ComparisonOp::Greater => ">",
            ComparisonOp::GreaterOrEqual => ">=",
        }
    }
}

/// A value being compared or computed with. Like [`Value`], but a string may
/// be borrowed from the message or the filter, so that evaluating a filter
/// does not touch reference counts or allocate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar<'a> {
    /// A boolean.
    Bool(bool),
    /// A 64-bit integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A string, borrowed where possible.
    Str(Cow<'a, str>),
}

impl<'a> Scalar<'a> {
    /// A view of a property value or a constant.
    pub(crate) fn from_value(value: &'a Value) -> Scalar<'a> {
        match value {
            Value::Bool(flag) => Scalar::Bool(*flag),
            Value::Int(int) => Scalar::Int(*int),
            Value::Float(float) => Scalar::Float(*float),
            Value::Str(text) => Scalar::Str(Cow::Borrowed(text)),
        }
    }

    /// The owned value.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Scalar::Bool(flag) => Value::Bool(flag),
            Scalar::Int(int) => Value::Int(int),
            Scalar::Float(float) => Value::Float(float),
            Scalar::Str(text) => Value::Str(text.into()),
        }
    }
}

/// The outcome of comparing two scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comparison {
    /// Two numbers; `None` when one is NaN, which is unordered.
    Numeric(Option<Ordering>),
    /// Two strings, ordered by Unicode code point.
    Text(Ordering),
    /// Two booleans, which are only equal or not.
    Boolean {
        /// Whether they are equal.
        equal: bool,
    },
    /// The types cannot be compared (string against number, and so on).
    Incompatible,
}

/// Compares two scalars, promoting integers to floats where types mix.
pub(crate) fn compare(left: &Scalar<'_>, right: &Scalar<'_>) -> Comparison {
    match (left, right) {
        (Scalar::Int(left), Scalar::Int(right)) => Comparison::Numeric(Some(left.cmp(right))),
        (Scalar::Float(left), Scalar::Float(right)) => Comparison::Numeric(left.partial_cmp(right)),
        (Scalar::Int(left), Scalar::Float(right)) => Comparison::Numeric(compare_int_float(*left, *right)),
        (Scalar::Float(left), Scalar::Int(right)) => {
            Comparison::Numeric(compare_int_float(*right, *left).map(Ordering::reverse))
        }
        (Scalar::Str(left), Scalar::Str(right)) => Comparison::Text(left.cmp(right)),
        (Scalar::Bool(left), Scalar::Bool(right)) => Comparison::Boolean { equal: left == right },
        _ => Comparison::Incompatible,
    }
}

/// Orders an integer against a float exactly. Converting the integer to a
/// float would round integers above 2^53, making for example
/// `9007199254740993 = 9007199254740992.0` true; comparing the float's whole
/// part as an integer and then its fraction avoids that.
pub(crate) fn compare_int_float(int: i64, float: f64) -> Option<Ordering> {
    // 2^63 is exactly representable, and every float at or above it (or below
    // -2^63) lies outside the range of i64, infinities included.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if float.is_nan() {
        return None;
    }
    if float >= TWO_POW_63 {
        return Some(Ordering::Less);
    }
    if float < -TWO_POW_63 {
        return Some(Ordering::Greater);
    }
    let whole = float.trunc();
    // In range and integral, so the cast is exact.
    let whole_int = whole as i64;
    match int.cmp(&whole_int) {
        Ordering::Equal => 0.0_f64.partial_cmp(&(float - whole)),
        unequal => Some(unequal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> Scalar<'_> {
        Scalar::Str(Cow::Borrowed(value))
    }

    #[test]
    fn integers_and_floats_compare_across_types() {
        assert_eq!(compare(&Scalar::Int(1), &Scalar::Float(1.0)), Comparison::Numeric(Some(Ordering::Equal)));
        assert_eq!(compare(&Scalar::Float(1.5), &Scalar::Int(1)), Comparison::Numeric(Some(Ordering::Greater)));
        assert_eq!(compare(&Scalar::Int(-2), &Scalar::Float(-1.5)), Comparison::Numeric(Some(Ordering::Less)));
        assert_eq!(compare(&Scalar::Int(-1), &Scalar::Float(-1.5)), Comparison::Numeric(Some(Ordering::Greater)));
    }

    #[test]
    fn integer_float_comparison_is_exact_beyond_two_pow_53() {
        let large = 9_007_199_254_740_993_i64;
        assert_eq!(compare_int_float(large, 9_007_199_254_740_992.0), Some(Ordering::Greater));
        assert_eq!(compare_int_float(i64::MAX, 9_223_372_036_854_775_808.0), Some(Ordering::Less));
        assert_eq!(compare_int_float(i64::MIN, -9_223_372_036_854_775_808.0), Some(Ordering::Equal));
        assert_eq!(compare_int_float(0, f64::INFINITY), Some(Ordering::Less));
        assert_eq!(compare_int_float(0, f64::NEG_INFINITY), Some(Ordering::Greater));
        assert_eq!(compare_int_float(0, f64::NAN), None);
    }

    #[test]
    fn strings_and_booleans_compare_only_with_their_own_type() {
        assert_eq!(compare(&text("a"), &text("b")), Comparison::Text(Ordering::Less));
        assert_eq!(compare(&Scalar::Bool(true), &Scalar::Bool(true)), Comparison::Boolean { equal: true });
        assert_eq!(compare(&text("1"), &Scalar::Int(1)), Comparison::Incompatible);
        assert_eq!(compare(&Scalar::Bool(true), &Scalar::Int(1)), Comparison::Incompatible);
        assert_eq!(compare(&Scalar::Float(0.0), &text("0")), Comparison::Incompatible);
    }

    #[test]
    fn operators_hold_according_to_the_ordering() {
        use ComparisonOp::*;
        let table = [
            (Equal, [false, true, false]),
            (NotEqual, [true, false, true]),
            (Less, [true, false, false]),
            (LessOrEqual, [true, true, false]),
            (Greater, [false, false, true]),
            (GreaterOrEqual, [false, true, true]),
        ];
        let orderings = [Ordering::Less, Ordering::Equal, Ordering::Greater];
        for (op, expected) in table {
            for (ordering, holds) in orderings.into_iter().zip(expected) {
                assert_eq!(op.holds(ordering), holds, "{op:?} {ordering:?}");
            }
        }
        assert_eq!(Less.holds_for_equality(true), None);
        assert_eq!(NotEqual.holds_for_equality(true), Some(false));
        assert_eq!(NotEqual.sql_symbol(), "<>");
        assert_eq!(NotEqual.tags_symbol(), "!=");
    }
}
