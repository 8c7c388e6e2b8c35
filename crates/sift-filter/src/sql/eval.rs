//! Evaluates a selector against a message, in SQL three-valued logic.
//!
//! A missing property is NULL. Arithmetic with NULL is NULL, and a
//! comparison with NULL, or between values of incompatible types, is
//! UNKNOWN; AND, OR and NOT follow the SQL truth tables, so that for example
//! `NOT (s = 1)` is as UNKNOWN as `s = 1` when `s` is a string. Evaluation
//! never fails and never panics.

use sift_core::{Message, Value};

use crate::compare::{compare, Comparison, ComparisonOp, Scalar};
use crate::sql::arithmetic;
use crate::sql::ast::Expr;
use crate::sql::truth::Truth;

/// The truth of `expr` as a condition.
pub(crate) fn truth(expr: &Expr, message: &Message) -> Truth {
    match expr {
        Expr::Not(operand) => !truth(operand, message),
        Expr::And(operands) => all(operands, message),
        Expr::Or(operands) => any(operands, message),
        Expr::Comparison { op, left, right } => match (value(left, message), value(right, message)) {
            (Some(left), Some(right)) => comparison(*op, &left, &right),
            _ => Truth::Unknown,
        },
        Expr::Between { operand, low, high, negated } => negate_if(*negated, between(operand, low, high, message)),
        Expr::In { operand, list, negated } => negate_if(*negated, in_list(operand, list, message)),
        Expr::Like { operand, pattern, negated } => match value(operand, message) {
            Some(Scalar::Str(text)) => Truth::from_bool(pattern.matches(&text) != *negated),
            // A number is matched as its decimal text: a text door (STOMP,
            // MQTT, HTTP) types `12993` as an integer only when that is
            // exactly the text sent, so the pattern sees what the client
            // wrote.
            Some(Scalar::Int(int)) => Truth::from_bool(pattern.matches(&int.to_string()) != *negated),
            _ => Truth::Unknown,
        },
        Expr::IsNull { operand, negated } => Truth::from_bool(value(operand, message).is_none() != *negated),
        Expr::Constant(_) | Expr::Property(_) | Expr::Header(_) | Expr::Unary { .. } | Expr::Arithmetic { .. } => {
            match value(expr, message) {
                Some(Scalar::Bool(flag)) => Truth::from_bool(flag),
                _ => Truth::Unknown,
            }
        }
    }
}

fn negate_if(negated: bool, truth: Truth) -> Truth {
    if negated {
        !truth
    } else {
        truth
    }
}

/// SQL AND over the operands, stopping at the first FALSE, which decides it.
fn all(operands: &[Expr], message: &Message) -> Truth {
    let mut combined = Truth::True;
    for operand in operands {
        combined = combined.and(truth(operand, message));
        if combined == Truth::False {
            break;
        }
    }
    combined
}

/// SQL OR over the operands, stopping at the first TRUE, which decides it.
fn any(operands: &[Expr], message: &Message) -> Truth {
    let mut combined = Truth::False;
    for operand in operands {
        combined = combined.or(truth(operand, message));
        if combined == Truth::True {
            break;
        }
    }
    combined
}

/// `operand IN (list)`, defined as `operand = item1 OR operand = item2 ...`,
/// which makes it UNKNOWN when the operand is NULL, and UNKNOWN rather than
/// FALSE when no item is equal but some cannot be compared with it.
fn in_list(operand: &Expr, list: &[Value], message: &Message) -> Truth {
    let Some(operand) = value(operand, message) else {
        return Truth::Unknown;
    };
    let mut found = Truth::False;
    for item in list {
        found = found.or(comparison(ComparisonOp::Equal, &operand, &Scalar::from_value(item)));
        if found == Truth::True {
            break;
        }
    }
    found
}

/// The value of `expr`, or `None` for NULL. A condition's value is its
/// truth as a boolean, NULL when UNKNOWN.
pub(crate) fn value<'a>(expr: &'a Expr, message: &'a Message) -> Option<Scalar<'a>> {
    match expr {
        Expr::Constant(constant) => Some(Scalar::from_value(constant)),
        Expr::Property(name) => message.property(name).map(Scalar::from_value),
        Expr::Header(field) => Some(field.scalar(message)),
        Expr::Unary { op, operand } => arithmetic::unary(*op, &value(operand, message)?),
        Expr::Arithmetic { op, left, right } => {
            arithmetic::binary(*op, &value(left, message)?, &value(right, message)?)
        }
        condition => truth(condition, message).to_bool().map(Scalar::Bool),
    }
}

/// `left OP right` for two non-NULL values. Numbers compare across integer
/// and float; strings and booleans only support `=` and `<>`, as JMS says;
/// anything else is UNKNOWN. NaN follows IEEE 754: it is unequal to
/// everything and neither less nor greater than anything.
fn comparison(op: ComparisonOp, left: &Scalar<'_>, right: &Scalar<'_>) -> Truth {
    match compare(left, right) {
        Comparison::Numeric(Some(ordering)) => Truth::from_bool(op.holds(ordering)),
        Comparison::Numeric(None) => Truth::from_bool(op == ComparisonOp::NotEqual),
        Comparison::Text(ordering) => op.holds_for_equality(ordering.is_eq()).map_or(Truth::Unknown, Truth::from_bool),
        Comparison::Boolean { equal } => op.holds_for_equality(equal).map_or(Truth::Unknown, Truth::from_bool),
        Comparison::Incompatible => Truth::Unknown,
    }
}

/// `operand BETWEEN low AND high`, defined as `low <= operand AND operand <=
/// high`, which makes it UNKNOWN when the operand is NULL and FALSE when a
/// known bound already excludes it.
fn between(operand: &Expr, low: &Expr, high: &Expr, message: &Message) -> Truth {
    let Some(operand) = value(operand, message) else {
        return Truth::Unknown;
    };
    let bound = |bound: &Expr, op: ComparisonOp| match value(bound, message) {
        Some(bound) => comparison(op, &operand, &bound),
        None => Truth::Unknown,
    };
    bound(low, ComparisonOp::GreaterOrEqual).and(bound(high, ComparisonOp::LessOrEqual))
}

#[cfg(test)]
mod tests {
    use sift_core::{DeliveryMode, Priority};

    use crate::sql::test_support::message_with;
    use crate::sql::{SqlFilter, Truth};

    use super::*;

    fn evaluate(selector: &str, message: &Message) -> Truth {
        SqlFilter::parse(selector).unwrap_or_else(|error| panic!("{selector}: {error}")).evaluate(message)
    }

    fn check(message: &Message, cases: &[(&str, Truth)]) {
        for (selector, expected) in cases {
            assert_eq!(evaluate(selector, message), *expected, "{selector}");
        }
    }

    /// A message where `t` is TRUE, `f` FALSE and `u` missing (UNKNOWN).
    fn three_valued() -> Message {
        message_with(&[("t", Value::Bool(true)), ("f", Value::Bool(false))])
    }

    const TRUTHS: [(&str, Truth); 3] = [("t", Truth::True), ("f", Truth::False), ("u", Truth::Unknown)];

    #[test]
    fn and_or_not_follow_the_sql_truth_tables() {
        let message = three_valued();
        for (left, left_truth) in TRUTHS {
            assert_eq!(evaluate(&format!("NOT {left}"), &message), !left_truth, "NOT {left}");
            for (right, right_truth) in TRUTHS {
                let and = format!("{left} AND {right}");
                assert_eq!(evaluate(&and, &message), left_truth.and(right_truth), "{and}");
                let or = format!("{left} OR {right}");
                assert_eq!(evaluate(&or, &message), left_truth.or(right_truth), "{or}");
            }
        }
        // The tables themselves are checked in truth.rs; spot-check the
        // UNKNOWN rows here too, through the parser.
        check(
            &message,
            &[
                ("u AND f", Truth::False),
                ("u AND t", Truth::Unknown),
                ("u OR t", Truth::True),
                ("u OR f", Truth::Unknown),
                ("NOT u", Truth::Unknown),
                ("t AND t AND u", Truth::Unknown),
                ("f OR f OR t", Truth::True),
            ],
        );
    }

    #[test]
    fn missing_properties_are_null() {
        let message = message_with(&[]);
        check(
            &message,
            &[
                ("x = 1", Truth::Unknown),
                ("x <> 1", Truth::Unknown),
                ("NOT (x = 1)", Truth::Unknown),
                ("x + 1 > 0", Truth::Unknown),
                ("x IS NULL", Truth::True),
                ("x IS NOT NULL", Truth::False),
                ("x + 1 IS NULL", Truth::True),
            ],
        );
        assert!(!SqlFilter::parse("x <> 1").expect("parses").matches(&message));
    }

    #[test]
    fn numbers_promote_between_integer_and_float() {
        let message = message_with(&[("a", Value::Int(1)), ("b", Value::Float(2.5))]);
        check(
            &message,
            &[
                ("a = 1.0", Truth::True),
                ("a = 1", Truth::True),
                ("a < 1.5", Truth::True),
                ("b > 2", Truth::True),
                ("b = 2.5", Truth::True),
                ("a + b = 3.5", Truth::True),
                ("a * 2 = 2", Truth::True),
                ("7 / 2 = 3", Truth::True),
                ("7 / 2.0 = 3.5", Truth::True),
                ("-a = -1", Truth::True),
                ("+a = 1", Truth::True),
                ("a = 1L", Truth::True),
                ("b = 25E-1", Truth::True),
                ("b = 2.5F", Truth::True),
                ("2 + 3 * 4 = 14", Truth::True),
                ("(2 + 3) * 4 = 20", Truth::True),
                ("10 - 2 - 3 = 5", Truth::True),
                ("12 / 2 / 3 = 2", Truth::True),
                ("-2 * -3 = 6", Truth::True),
                ("- -1 = 1", Truth::True),
            ],
        );
    }

    #[test]
    fn arithmetic_overflow_and_division_by_zero() {
        let message = message_with(&[("zero", Value::Int(0)), ("big", Value::Int(i64::MAX))]);
        check(
            &message,
            &[
                ("1 / zero = 1", Truth::Unknown),
                ("NOT (1 / zero = 1)", Truth::Unknown),
                ("1.5 / 0 > 0", Truth::Unknown),
                ("1 / zero IS NULL", Truth::True),
                ("big + 1 > big", Truth::True),
                ("big + 1 = 9223372036854775808.0", Truth::True),
                ("-9223372036854775808 < 0", Truth::True),
                ("-(-9223372036854775808) > 0", Truth::True),
            ],
        );
    }

    #[test]
    fn incompatible_types_are_unknown() {
        let message = message_with(&[("s", Value::Str("1".into())), ("flag", Value::Bool(true)), ("n", Value::Int(1))]);
        check(
            &message,
            &[
                ("s = 1", Truth::Unknown),
                ("NOT (s = 1)", Truth::Unknown),
                ("s <> 1", Truth::Unknown),
                ("flag = 1", Truth::Unknown),
                ("n = TRUE", Truth::Unknown),
                ("flag < 1", Truth::Unknown),
                ("s > '0'", Truth::Unknown),
                ("s <= '1'", Truth::Unknown),
                ("s + 1 = 2", Truth::Unknown),
                ("-s = -1", Truth::Unknown),
                ("n", Truth::Unknown),
                ("s", Truth::Unknown),
                ("NOT n", Truth::Unknown),
            ],
        );
        assert!(!SqlFilter::parse("NOT (s = 1)").expect("parses").matches(&message));
    }

    #[test]
    fn strings_and_booleans_support_equality() {
        let message =
            message_with(&[("s", Value::Str("it's".into())), ("flag", Value::Bool(true)), ("off", Value::Bool(false))]);
        check(
            &message,
            &[
                ("s = 'it''s'", Truth::True),
                ("s <> 'its'", Truth::True),
                ("s = 'IT''S'", Truth::False),
                ("flag = TRUE", Truth::True),
                ("flag <> false", Truth::True),
                ("flag", Truth::True),
                ("NOT flag", Truth::False),
                ("off", Truth::False),
                ("NOT off", Truth::True),
                ("(flag = off) = FALSE", Truth::True),
                ("TRUE", Truth::True),
                ("FALSE", Truth::False),
            ],
        );
    }

    #[test]
    fn like_matches_percent_underscore_and_escape() {
        let cases = [
            ("phone LIKE '12%3'", "123", Truth::True),
            ("phone LIKE '12%3'", "12993", Truth::True),
            ("phone LIKE '12%3'", "1234", Truth::False),
            ("phone NOT LIKE '12%3'", "1234", Truth::True),
            ("phone LIKE 'l_se'", "lose", Truth::True),
            ("phone LIKE 'l_se'", "loose", Truth::False),
            ("phone LIKE '\\_%' ESCAPE '\\'", "_foo", Truth::True),
            ("phone LIKE '\\_%' ESCAPE '\\'", "bar", Truth::False),
            ("phone NOT LIKE '\\_%' ESCAPE '\\'", "bar", Truth::True),
            ("phone LIKE 'it''s%'", "it's here", Truth::True),
            ("phone like '%' escape '!'", "", Truth::True),
        ];
        for (selector, value, expected) in cases {
            let message = message_with(&[("phone", Value::Str(value.into()))]);
            assert_eq!(evaluate(selector, &message), expected, "{selector} on {value:?}");
        }
        let integer = message_with(&[("phone", Value::Int(12993)), ("minus", Value::Int(-12))]);
        check(
            &integer,
            &[
                ("phone LIKE '12%3'", Truth::True),
                ("phone NOT LIKE '12%3'", Truth::False),
                ("phone LIKE '1_3'", Truth::False),
                ("minus LIKE '-1_'", Truth::True),
            ],
        );
        let non_string = message_with(&[("phone", Value::Float(123.0)), ("flag", Value::Bool(true))]);
        check(
            &non_string,
            &[
                ("phone LIKE '12%'", Truth::Unknown),
                ("phone NOT LIKE '12%'", Truth::Unknown),
                ("flag LIKE 'true'", Truth::Unknown),
                ("missing LIKE '%'", Truth::Unknown),
                ("missing NOT LIKE '%'", Truth::Unknown),
            ],
        );
    }

    #[test]
    fn in_and_not_in_with_null() {
        let message = message_with(&[("country", Value::Str("UK".into())), ("n", Value::Int(2))]);
        check(
            &message,
            &[
                ("country IN ('UK', 'US', 'France')", Truth::True),
                ("country IN ('US', 'France')", Truth::False),
                ("country NOT IN ('US', 'France')", Truth::True),
                ("country NOT IN ('UK')", Truth::False),
                ("missing IN ('UK')", Truth::Unknown),
                ("missing NOT IN ('UK')", Truth::Unknown),
                ("n IN ('2')", Truth::Unknown),
                ("n NOT IN ('2')", Truth::Unknown),
                ("n IN (1, 2.0, -3)", Truth::True),
                ("n NOT IN (1, -3)", Truth::True),
                ("country IN ('US', 1)", Truth::Unknown),
                ("country IN ('UK', 1)", Truth::True),
            ],
        );
    }

    #[test]
    fn between_is_inclusive() {
        let message = message_with(&[("age", Value::Int(15)), ("s", Value::Str("m".into()))]);
        check(
            &message,
            &[
                ("age BETWEEN 15 AND 19", Truth::True),
                ("age BETWEEN 10 AND 15", Truth::True),
                ("age BETWEEN 16 AND 19", Truth::False),
                ("age BETWEEN 14.5 AND 15.5", Truth::True),
                ("age NOT BETWEEN 16 AND 19", Truth::True),
                ("age NOT BETWEEN 15 AND 19", Truth::False),
                ("age BETWEEN 19 AND 15", Truth::False),
                ("missing BETWEEN 1 AND 2", Truth::Unknown),
                ("missing NOT BETWEEN 1 AND 2", Truth::Unknown),
                ("age BETWEEN missing AND 10", Truth::False),
                ("age BETWEEN missing AND 20", Truth::Unknown),
                ("s BETWEEN 1 AND 2", Truth::Unknown),
                ("age BETWEEN 10 + 5 AND 20 AND age = 15", Truth::True),
            ],
        );
    }

    #[test]
    fn keywords_are_case_insensitive_and_identifiers_are_not() {
        let message = message_with(&[("a", Value::Int(2)), ("A", Value::Int(7))]);
        check(
            &message,
            &[
                ("a between 1 and 3", Truth::True),
                ("A BeTwEeN 1 AnD 3", Truth::False),
                ("a in (2) or not a is null", Truth::True),
                ("a Is Not Null and true", Truth::True),
                ("A = 7", Truth::True),
            ],
        );
    }

    #[test]
    fn header_fields_read_the_message() {
        let mut message = message_with(&[]);
        message.id = 42;
        message.priority = Priority::new(7).expect("valid priority");
        message.timestamp_ns = 5_000_000_123;
        message.delivery_mode = DeliveryMode::Persistent;
        message.expiry_ns = 0;
        check(
            &message,
            &[
                ("JMSPriority > 4", Truth::True),
                ("JMSPriority BETWEEN 0 AND 9", Truth::True),
                ("JMSTimestamp = 5000", Truth::True),
                ("JMSMessageID = 'ID:42'", Truth::True),
                ("JMSDeliveryMode = 'PERSISTENT'", Truth::True),
                ("JMSExpiration = 0", Truth::True),
                ("jmspriority IS NULL", Truth::True),
            ],
        );
        message.delivery_mode = DeliveryMode::BestEffort;
        check(&message, &[("JMSDeliveryMode = 'NON_PERSISTENT'", Truth::True)]);
    }

    #[test]
    fn nan_compares_as_in_ieee_754() {
        let message = message_with(&[("x", Value::Float(f64::NAN))]);
        check(
            &message,
            &[
                ("x = x", Truth::False),
                ("x <> 1", Truth::True),
                ("x < 1", Truth::False),
                ("x >= 1", Truth::False),
                ("x BETWEEN 0 AND 1", Truth::False),
            ],
        );
    }
}
