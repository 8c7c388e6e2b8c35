//! Arithmetic on selector values, with Java's numeric promotion.
//!
//! Integers stay integers while the result fits (so `7 / 2` is 3, truncating
//! as Java does); a result that overflows an i64 is computed in floating
//! point instead, rather than wrapping or being lost. A float on either side
//! makes the operation a float one. Division by zero, integer or float, is
//! NULL, so a selector that divides by zero is UNKNOWN rather than a panic or
//! an infinity. Anything that is not a number makes the result NULL.

use crate::compare::Scalar;
use crate::sql::ast::{ArithmeticOp, UnaryOp};

/// `left OP right`, or `None` (NULL) when it is undefined.
pub(crate) fn binary(op: ArithmeticOp, left: &Scalar<'_>, right: &Scalar<'_>) -> Option<Scalar<'static>> {
    match (left, right) {
        (Scalar::Int(left), Scalar::Int(right)) => integer(op, *left, *right),
        _ => float(op, as_float(left)?, as_float(right)?),
    }
}

/// `+operand` or `-operand`, or `None` (NULL) when it is not a number.
pub(crate) fn unary(op: UnaryOp, operand: &Scalar<'_>) -> Option<Scalar<'static>> {
    match (op, operand) {
        (UnaryOp::Plus, Scalar::Int(int)) => Some(Scalar::Int(*int)),
        (UnaryOp::Plus, Scalar::Float(float)) => Some(Scalar::Float(*float)),
        // Only i64::MIN has no integer negation; its float one is exact.
        (UnaryOp::Minus, Scalar::Int(int)) => {
            Some(int.checked_neg().map_or(Scalar::Float(-(*int as f64)), Scalar::Int))
        }
        (UnaryOp::Minus, Scalar::Float(float)) => Some(Scalar::Float(-float)),
        _ => None,
    }
}

fn as_float(scalar: &Scalar<'_>) -> Option<f64> {
    match scalar {
        Scalar::Int(int) => Some(*int as f64),
        Scalar::Float(float) => Some(*float),
        Scalar::Bool(_) | Scalar::Str(_) => None,
    }
}

fn integer(op: ArithmeticOp, left: i64, right: i64) -> Option<Scalar<'static>> {
    if op == ArithmeticOp::Divide && right == 0 {
        return None;
    }
    let exact = match op {
        ArithmeticOp::Add => left.checked_add(right),
        ArithmeticOp::Subtract => left.checked_sub(right),
        ArithmeticOp::Multiply => left.checked_mul(right),
        ArithmeticOp::Divide => left.checked_div(right),
    };
    match exact {
        Some(result) => Some(Scalar::Int(result)),
        None => float(op, left as f64, right as f64),
    }
}

fn float(op: ArithmeticOp, left: f64, right: f64) -> Option<Scalar<'static>> {
    let result = match op {
        ArithmeticOp::Add => left + right,
        ArithmeticOp::Subtract => left - right,
        ArithmeticOp::Multiply => left * right,
        ArithmeticOp::Divide if right == 0.0 => return None,
        ArithmeticOp::Divide => left / right,
    };
    Some(Scalar::Float(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn integers_stay_integers_and_divide_like_java() {
        assert_eq!(binary(ArithmeticOp::Add, &Scalar::Int(2), &Scalar::Int(3)), Some(Scalar::Int(5)));
        assert_eq!(binary(ArithmeticOp::Divide, &Scalar::Int(7), &Scalar::Int(2)), Some(Scalar::Int(3)));
        assert_eq!(binary(ArithmeticOp::Divide, &Scalar::Int(-7), &Scalar::Int(2)), Some(Scalar::Int(-3)));
    }

    #[test]
    fn floats_promote_the_other_side() {
        assert_eq!(binary(ArithmeticOp::Multiply, &Scalar::Int(2), &Scalar::Float(1.5)), Some(Scalar::Float(3.0)));
        assert_eq!(binary(ArithmeticOp::Divide, &Scalar::Float(7.0), &Scalar::Int(2)), Some(Scalar::Float(3.5)));
    }

    #[test]
    fn overflow_promotes_to_float() {
        assert_eq!(
            binary(ArithmeticOp::Add, &Scalar::Int(i64::MAX), &Scalar::Int(1)),
            Some(Scalar::Float(9_223_372_036_854_775_808.0))
        );
        assert_eq!(
            binary(ArithmeticOp::Divide, &Scalar::Int(i64::MIN), &Scalar::Int(-1)),
            Some(Scalar::Float(9_223_372_036_854_775_808.0))
        );
        assert_eq!(unary(UnaryOp::Minus, &Scalar::Int(i64::MIN)), Some(Scalar::Float(9_223_372_036_854_775_808.0)));
    }

    #[test]
    fn division_by_zero_is_null() {
        assert_eq!(binary(ArithmeticOp::Divide, &Scalar::Int(1), &Scalar::Int(0)), None);
        assert_eq!(binary(ArithmeticOp::Divide, &Scalar::Float(1.0), &Scalar::Float(0.0)), None);
        assert_eq!(binary(ArithmeticOp::Divide, &Scalar::Float(1.0), &Scalar::Int(0)), None);
        assert_eq!(binary(ArithmeticOp::Divide, &Scalar::Float(1.0), &Scalar::Float(-0.0)), None);
    }

    #[test]
    fn non_numbers_give_null() {
        let text = Scalar::Str(Cow::Borrowed("1"));
        assert_eq!(binary(ArithmeticOp::Add, &text, &Scalar::Int(1)), None);
        assert_eq!(binary(ArithmeticOp::Add, &Scalar::Int(1), &Scalar::Bool(true)), None);
        assert_eq!(unary(UnaryOp::Minus, &text), None);
        assert_eq!(unary(UnaryOp::Plus, &Scalar::Bool(false)), None);
    }
}
