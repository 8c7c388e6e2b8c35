//! Numbers as hash and order keys that agree exactly with how filters
//! compare numbers.
//!
//! Filters compare an integer with a float exactly (`compare.rs`), so `1`
//! equals `1.0` and `9007199254740993` does not equal `9007199254740992.0`.
//! A key puts every number in one canonical form, an integer when the value
//! is a whole number that fits an `i64` and a float otherwise, so that equal
//! numbers have equal keys (for the equality hash maps) and keys order as the
//! numbers do (for the range maps). NaN equals and orders with nothing, so it
//! has no key.

use std::cmp::Ordering;

use crate::compare::{compare_int_float, Scalar};

/// 2^63, the first float above every `i64`; floats from -2^63 up to but not
/// including it that are whole numbers convert to `i64` exactly.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// A number other than NaN, in canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NumberKey {
    /// A whole number that fits an `i64`, however it was written.
    Int(i64),
    /// The bits of any other float: fractional, infinite, or beyond the
    /// range of `i64`. Never NaN, never a whole number in `i64` range (so
    /// never zero, and so never negative zero).
    Float(u64),
}

impl NumberKey {
    /// The key of an integer.
    pub(crate) fn from_int(int: i64) -> NumberKey {
        NumberKey::Int(int)
    }

    /// The key of a float, or `None` for NaN.
    pub(crate) fn from_float(float: f64) -> Option<NumberKey> {
        if float.is_nan() {
            return None;
        }
        if float.trunc() == float && (-TWO_POW_63..TWO_POW_63).contains(&float) {
            // A whole number in range: the cast is exact, and -0.0 becomes 0.
            return Some(NumberKey::Int(float as i64));
        }
        Some(NumberKey::Float(float.to_bits()))
    }

    /// The key of a numeric scalar; `None` for NaN and for non-numbers.
    pub(crate) fn from_scalar(scalar: &Scalar<'_>) -> Option<NumberKey> {
        match scalar {
            Scalar::Int(int) => Some(NumberKey::from_int(*int)),
            Scalar::Float(float) => NumberKey::from_float(*float),
            Scalar::Bool(_) | Scalar::Str(_) => None,
        }
    }
}

impl Ord for NumberKey {
    fn cmp(&self, other: &NumberKey) -> Ordering {
        match (*self, *other) {
            (NumberKey::Int(left), NumberKey::Int(right)) => left.cmp(&right),
            // Neither is NaN or negative zero, where `total_cmp` would differ
            // from the numeric order.
            (NumberKey::Float(left), NumberKey::Float(right)) => f64::from_bits(left).total_cmp(&f64::from_bits(right)),
            (NumberKey::Int(left), NumberKey::Float(right)) => int_float(left, right),
            (NumberKey::Float(left), NumberKey::Int(right)) => int_float(right, left).reverse(),
        }
    }
}

impl PartialOrd for NumberKey {
    fn partial_cmp(&self, other: &NumberKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// How an integer orders against a key's float. The float is never NaN, so
/// the comparison always has an answer; the fallback only satisfies the
/// type.
fn int_float(int: i64, float_bits: u64) -> Ordering {
    compare_int_float(int, f64::from_bits(float_bits)).unwrap_or(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::compare::{compare, Comparison};

    #[test]
    fn whole_floats_in_range_are_integers() {
        assert_eq!(NumberKey::from_float(1.0), Some(NumberKey::Int(1)));
        assert_eq!(NumberKey::from_float(-0.0), Some(NumberKey::Int(0)));
        assert_eq!(NumberKey::from_float(-TWO_POW_63), Some(NumberKey::Int(i64::MIN)));
        assert_eq!(NumberKey::from_float(TWO_POW_63), Some(NumberKey::Float(TWO_POW_63.to_bits())));
        assert_eq!(NumberKey::from_float(0.5), Some(NumberKey::Float(0.5_f64.to_bits())));
        assert_eq!(NumberKey::from_float(f64::NAN), None);
        assert_eq!(NumberKey::from_scalar(&Scalar::Bool(true)), None);
    }

    #[test]
    fn keys_order_as_numbers() {
        let mut keys: Vec<NumberKey> = [f64::INFINITY, 2.5, -1.0, TWO_POW_63, f64::NEG_INFINITY, 0.25]
            .into_iter()
            .filter_map(NumberKey::from_float)
            .chain([NumberKey::from_int(2), NumberKey::from_int(i64::MAX)])
            .collect();
        keys.sort();
        let expected = [f64::NEG_INFINITY, -1.0, 0.25, 2.0, 2.5, i64::MAX as f64, TWO_POW_63, f64::INFINITY];
        assert_eq!(keys.len(), expected.len());
        assert_eq!(keys[3], NumberKey::Int(2));
        assert_eq!(keys[5], NumberKey::Int(i64::MAX));
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]));
    }

    fn any_number() -> impl Strategy<Value = Scalar<'static>> {
        prop_oneof![
            any::<i64>().prop_map(Scalar::Int),
            (-4_i64..4).prop_map(Scalar::Int),
            any::<f64>().prop_map(Scalar::Float),
            prop::sample::select(vec![0.0, -0.0, 1.0, -1.5, 1e300, TWO_POW_63, -TWO_POW_63]).prop_map(Scalar::Float),
        ]
    }

    proptest! {
        #[test]
        fn keys_agree_with_filter_comparison(left in any_number(), right in any_number()) {
            let keys = (NumberKey::from_scalar(&left), NumberKey::from_scalar(&right));
            match (compare(&left, &right), keys) {
                (Comparison::Numeric(Some(ordering)), (Some(left_key), Some(right_key))) => {
                    prop_assert_eq!(left_key.cmp(&right_key), ordering);
                    prop_assert_eq!(left_key == right_key, ordering.is_eq());
                }
                (Comparison::Numeric(None), (left_key, right_key)) => {
                    prop_assert!(left_key.is_none() || right_key.is_none());
                }
                (other, keys) => prop_assert!(false, "{:?} with keys {:?}", other, keys),
            }
        }
    }
}
