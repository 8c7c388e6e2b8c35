//! Which literals of a SQL selector's normal form the value indexes serve.
//!
//! A conjunction passes only when every literal is TRUE, so a literal can be
//! replaced by indexed predicates exactly when it is TRUE for precisely the
//! messages that satisfy them; FALSE and UNKNOWN need not be told apart.
//! That holds for:
//!
//! - `attr = c` and `c = attr`, and `NOT (attr <> c)`: equality (see
//!   [`ValueTest::Equal`]); a NaN constant equals nothing and stays residual.
//! - `attr < c`, `<=`, `>`, `>=` (either way round) with a number: a range.
//!   Against a string or boolean SQL is always UNKNOWN, so these stay
//!   residual (they never pass).
//! - `attr BETWEEN low AND high` with numbers: two ranges, as BETWEEN is TRUE
//!   exactly when `low <= attr` and `attr <= high` both are.
//! - `attr IN (c1, c2, ...)`: TRUE exactly when one `attr = ci` is, so a set
//!   of alternatives that the caller may expand into one conjunction each.
//! - `attr IS NOT NULL` and `NOT (attr IS NULL)`: presence.
//! - a boolean property alone (`flag`, `NOT flag`): `flag = TRUE` (`FALSE`).
//!
//! Everything else stays residual, notably `<>` and NOT of an ordering (TRUE
//! for NaN, which no range finds), NOT BETWEEN, NOT IN, LIKE, IS NULL,
//! arithmetic and comparisons between two attributes. `JMSMessageID` is not
//! indexed, because its value is built per message.

use sift_core::Value;

use crate::compare::ComparisonOp;
use crate::index::predicate::{Attribute, PredicateSource, RangeOp, ValueTest};
use crate::sql::{Expr, HeaderField, Literal};

/// How a literal is served.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LiteralPlan {
    /// TRUE exactly when all these predicates hold.
    AllOf(Vec<PredicateSource>),
    /// TRUE exactly when one of these predicates holds (an IN list, without
    /// repeats); TRUE for no message when empty.
    AnyOf(Vec<PredicateSource>),
    /// Evaluated per candidate.
    Residual,
}

/// How the value indexes serve `literal`.
pub(crate) fn classify(literal: &Literal) -> LiteralPlan {
    let negated = literal.negated;
    let plan = match &literal.atom {
        Expr::Comparison { op, left, right } => comparison(*op, left, right, negated),
        // NOT cancels a NOT BETWEEN or NOT IN.
        Expr::Between { operand, low, high, negated: inner } if negated == *inner => between(operand, low, high),
        Expr::In { operand, list, negated: inner } if negated == *inner => in_list(operand, list),
        // IS [NOT] NULL is never UNKNOWN, so NOT swaps it exactly.
        Expr::IsNull { operand, negated: inner } if negated != *inner => {
            attribute(operand).map(|attribute| LiteralPlan::AllOf(vec![value_source(attribute, ValueTest::Present)]))
        }
        Expr::Property(name) => {
            let test = ValueTest::equal(&Value::Bool(!negated));
            test.map(|test| LiteralPlan::AllOf(vec![value_source(Attribute::Property(name.as_str().into()), test)]))
        }
        _ => None,
    };
    plan.unwrap_or(LiteralPlan::Residual)
}

fn value_source(attribute: Attribute, test: ValueTest) -> PredicateSource {
    PredicateSource::Value { attribute, test }
}

/// The attribute an operand names, if the value indexes can look it up.
fn attribute(expr: &Expr) -> Option<Attribute> {
    match expr {
        Expr::Property(name) => Some(Attribute::Property(name.as_str().into())),
        Expr::Header(HeaderField::MessageId) => None,
        Expr::Header(field) => Some(Attribute::Header(*field)),
        _ => None,
    }
}

fn constant(expr: &Expr) -> Option<&Value> {
    match expr {
        Expr::Constant(value) => Some(value),
        _ => None,
    }
}

fn comparison(op: ComparisonOp, left: &Expr, right: &Expr, negated: bool) -> Option<LiteralPlan> {
    // NOT (a <> c) is TRUE exactly when a = c is; other negations are not
    // single predicates (NOT (a < c) is also TRUE for NaN).
    let op = match (negated, op) {
        (false, op) => op,
        (true, ComparisonOp::NotEqual) => ComparisonOp::Equal,
        (true, _) => return None,
    };
    let (attribute, value, op) = match (attribute(left), constant(right)) {
        (Some(attribute), Some(value)) => (attribute, value, op),
        _ => (attribute(right)?, constant(left)?, op.mirrored()),
    };
    let test = match RangeOp::from_comparison(op) {
        Some(range_op) => ValueTest::range(range_op, value, false)?,
        None if op == ComparisonOp::Equal => ValueTest::equal(value)?,
        None => return None,
    };
    Some(LiteralPlan::AllOf(vec![value_source(attribute, test)]))
}

fn between(operand: &Expr, low: &Expr, high: &Expr) -> Option<LiteralPlan> {
    let attribute = attribute(operand)?;
    let low = ValueTest::range(RangeOp::GreaterOrEqual, constant(low)?, false)?;
    let high = ValueTest::range(RangeOp::LessOrEqual, constant(high)?, false)?;
    Some(LiteralPlan::AllOf(vec![value_source(attribute.clone(), low), value_source(attribute, high)]))
}

fn in_list(operand: &Expr, list: &[Value]) -> Option<LiteralPlan> {
    let attribute = attribute(operand)?;
    let mut alternatives: Vec<PredicateSource> = Vec::with_capacity(list.len());
    let mut seen = std::collections::HashSet::with_capacity(list.len());
    // An item that equals nothing (NaN) can never be the one that makes IN
    // TRUE, so it is left out.
    for test in list.iter().filter_map(ValueTest::equal) {
        if seen.insert(test.clone()) {
            alternatives.push(value_source(attribute.clone(), test));
        }
    }
    Some(LiteralPlan::AnyOf(alternatives))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::number::NumberKey;
    use crate::index::predicate::{Bound, Constant};
    use crate::sql::SqlFilter;

    /// The plan of the only literal of a one-literal selector.
    fn plan(selector: &str) -> LiteralPlan {
        let filter = SqlFilter::parse(selector).expect("parses");
        let disjuncts = filter.to_dnf().expect("small");
        assert_eq!(disjuncts.len(), 1, "{selector}");
        assert_eq!(disjuncts[0].len(), 1, "{selector}");
        classify(&disjuncts[0][0])
    }

    fn on(name: &str, test: ValueTest) -> PredicateSource {
        value_source(Attribute::Property(name.into()), test)
    }

    fn number(int: i64) -> NumberKey {
        NumberKey::from_int(int)
    }

    #[test]
    fn equalities_and_ranges_either_way_round() {
        let equal_one = on("a", ValueTest::Equal(Constant::Number(number(1))));
        assert_eq!(plan("a = 1"), LiteralPlan::AllOf(vec![equal_one.clone()]));
        assert_eq!(plan("1.0 = a"), LiteralPlan::AllOf(vec![equal_one.clone()]));
        assert_eq!(plan("NOT (a <> 1)"), LiteralPlan::AllOf(vec![equal_one]));
        let greater = on("a", ValueTest::Range(RangeOp::Greater, Bound::Number(number(5))));
        assert_eq!(plan("a > 5"), LiteralPlan::AllOf(vec![greater.clone()]));
        assert_eq!(plan("5 < a"), LiteralPlan::AllOf(vec![greater]));
        let text = on("s", ValueTest::Equal(Constant::Text("x".into())));
        assert_eq!(plan("s = 'x'"), LiteralPlan::AllOf(vec![text]));
    }

    #[test]
    fn between_in_presence_and_boolean_properties() {
        let between = plan("a BETWEEN 1 AND 2");
        let expected = vec![
            on("a", ValueTest::Range(RangeOp::GreaterOrEqual, Bound::Number(number(1)))),
            on("a", ValueTest::Range(RangeOp::LessOrEqual, Bound::Number(number(2)))),
        ];
        assert_eq!(between, LiteralPlan::AllOf(expected));
        assert_eq!(plan("NOT (a NOT BETWEEN 1 AND 2)"), between);
        let LiteralPlan::AnyOf(items) = plan("a IN (1, 1.0, 'x', 2)") else { panic!("IN is alternatives") };
        assert_eq!(items.len(), 3, "repeats are dropped");
        assert_eq!(plan("a IS NOT NULL"), LiteralPlan::AllOf(vec![on("a", ValueTest::Present)]));
        assert_eq!(plan("NOT (a IS NULL)"), plan("a IS NOT NULL"));
        assert_eq!(plan("flag"), LiteralPlan::AllOf(vec![on("flag", ValueTest::Equal(Constant::Bool(true)))]));
        assert_eq!(plan("NOT flag"), LiteralPlan::AllOf(vec![on("flag", ValueTest::Equal(Constant::Bool(false)))]));
        let header = plan("JMSPriority >= 4");
        let priority = value_source(
            Attribute::Header(HeaderField::Priority),
            ValueTest::Range(RangeOp::GreaterOrEqual, Bound::Number(number(4))),
        );
        assert_eq!(header, LiteralPlan::AllOf(vec![priority]));
    }

    #[test]
    fn everything_else_is_residual() {
        for selector in [
            "a <> 1",
            "NOT (a = 1)",
            "NOT (a < 1)",
            "s < 'x'",
            "a = b",
            "a + 1 = 2",
            "a NOT BETWEEN 1 AND 2",
            "a BETWEEN b AND 2",
            "a NOT IN (1)",
            "s LIKE 'x%'",
            "a IS NULL",
            "NOT (a IS NOT NULL)",
            "JMSMessageID = 'ID:1'",
            "JMSPriority + 1 > 2",
            "TRUE",
        ] {
            assert_eq!(plan(selector), LiteralPlan::Residual, "{selector}");
        }
    }
}
