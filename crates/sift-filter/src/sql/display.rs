//! Prints a selector back as text.
//!
//! Every compound expression is printed in parentheses, so the text reads
//! back (with [`crate::sql::SqlFilter::parse`]) as an expression that
//! evaluates the same on every message, whatever the precedence rules. The
//! exceptions are trees the parser cannot produce: property names that are
//! not identifiers or are keywords, and non-finite float constants (which
//! print as `inf` and `NaN`).

use std::fmt::{self, Display, Formatter, Write};

use sift_core::Value;

use crate::sql::ast::{Expr, UnaryOp};

impl Display for Expr {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Constant(value) => write_constant(formatter, value),
            Expr::Property(name) => formatter.write_str(name),
            Expr::Header(field) => formatter.write_str(field.name()),
            Expr::Unary { op, operand } => {
                let sign = match op {
                    UnaryOp::Plus => '+',
                    UnaryOp::Minus => '-',
                };
                write!(formatter, "({sign}{operand})")
            }
            Expr::Arithmetic { op, left, right } => {
                write!(formatter, "({left} {} {right})", op.symbol())
            }
            Expr::Comparison { op, left, right } => {
                write!(formatter, "({left} {} {right})", op.sql_symbol())
            }
            Expr::Between { operand, low, high, negated } => {
                write!(formatter, "({operand} {}BETWEEN {low} AND {high})", not(*negated))
            }
            Expr::In { operand, list, negated } => {
                write!(formatter, "({operand} {}IN (", not(*negated))?;
                for (index, item) in list.iter().enumerate() {
                    if index > 0 {
                        formatter.write_str(", ")?;
                    }
                    write_list_item(formatter, item)?;
                }
                formatter.write_str("))")
            }
            Expr::Like { operand, pattern, negated } => {
                write!(formatter, "({operand} {}LIKE ", not(*negated))?;
                write_string(formatter, pattern.pattern())?;
                if let Some(escape) = pattern.escape() {
                    formatter.write_str(" ESCAPE ")?;
                    write_string(formatter, escape.encode_utf8(&mut [0; 4]))?;
                }
                formatter.write_char(')')
            }
            Expr::IsNull { operand, negated } => {
                write!(formatter, "({operand} IS {}NULL)", not(*negated))
            }
            Expr::Not(operand) => write!(formatter, "(NOT {operand})"),
            Expr::And(operands) => write_chain(formatter, operands, "AND", "TRUE"),
            Expr::Or(operands) => write_chain(formatter, operands, "OR", "FALSE"),
        }
    }
}

fn not(negated: bool) -> &'static str {
    if negated {
        "NOT "
    } else {
        ""
    }
}

/// `(a KEYWORD b KEYWORD c)`, or the chain's identity when it is empty.
fn write_chain(formatter: &mut Formatter<'_>, operands: &[Expr], keyword: &str, empty: &str) -> fmt::Result {
    if operands.is_empty() {
        return formatter.write_str(empty);
    }
    formatter.write_char('(')?;
    for (index, operand) in operands.iter().enumerate() {
        if index > 0 {
            write!(formatter, " {keyword} ")?;
        }
        write!(formatter, "{operand}")?;
    }
    formatter.write_char(')')
}

/// A string literal: single quotes, with quotes inside doubled.
fn write_string(formatter: &mut Formatter<'_>, text: &str) -> fmt::Result {
    formatter.write_char('\'')?;
    for (index, piece) in text.split('\'').enumerate() {
        if index > 0 {
            formatter.write_str("''")?;
        }
        formatter.write_str(piece)?;
    }
    formatter.write_char('\'')
}

/// A constant. Negative numbers are parenthesised, so that `a - -1` prints
/// as `(a - (-1))` rather than the ambiguous-looking `a--1`. Floats print
/// with a point or an exponent so that they read back as floats.
fn write_constant(formatter: &mut Formatter<'_>, value: &Value) -> fmt::Result {
    match value {
        Value::Bool(true) => formatter.write_str("TRUE"),
        Value::Bool(false) => formatter.write_str("FALSE"),
        Value::Int(int) if *int < 0 => write!(formatter, "({int})"),
        Value::Float(float) if float.is_sign_negative() => write!(formatter, "({float:?})"),
        other => write_list_item(formatter, other),
    }
}

/// An IN-list item, where a sign needs no parentheses.
fn write_list_item(formatter: &mut Formatter<'_>, value: &Value) -> fmt::Result {
    match value {
        Value::Str(text) => write_string(formatter, text),
        Value::Float(float) => write!(formatter, "{float:?}"),
        Value::Int(int) => write!(formatter, "{int}"),
        Value::Bool(flag) => write!(formatter, "{}", if *flag { "TRUE" } else { "FALSE" }),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sift_core::Value;

    use crate::sql::test_support::{any_message, any_selector, message_with};
    use crate::sql::{Expr, LikePattern, SqlFilter};

    fn round_trip(text: &str) -> String {
        SqlFilter::parse(text).unwrap_or_else(|error| panic!("{text}: {error}")).to_string()
    }

    #[test]
    fn prints_fully_parenthesised_selectors() {
        let cases = [
            ("a = 1 AND b <> 'it''s' OR NOT c", "(((a = 1) AND (b <> 'it''s')) OR (NOT c))"),
            ("a NOT BETWEEN -1 AND 2.5", "(a NOT BETWEEN (-1) AND 2.5)"),
            ("a not in ('x', -2)", "(a NOT IN ('x', -2))"),
            ("a LIKE '\\_%' ESCAPE '\\'", "(a LIKE '\\_%' ESCAPE '\\')"),
            ("a IS NOT NULL", "(a IS NOT NULL)"),
            ("JMSPriority * 2 >= 1E3", "((JMSPriority * 2) >= 1000.0)"),
            ("flag", "flag"),
            ("TRUE", "TRUE"),
            ("a - -1 = 0", "((a - (-1)) = 0)"),
        ];
        for (text, printed) in cases {
            assert_eq!(round_trip(text), printed, "{text}");
        }
    }

    #[test]
    fn empty_chains_print_their_identity() {
        assert_eq!(Expr::And(Vec::new()).to_string(), "TRUE");
        assert_eq!(Expr::Or(Vec::new()).to_string(), "FALSE");
        let like = Expr::Like {
            operand: Box::new(Expr::Property("a".to_string())),
            pattern: LikePattern::new("x'%", None).expect("compiles"),
            negated: true,
        };
        assert_eq!(like.to_string(), "(a NOT LIKE 'x''%')");
        assert_eq!(Expr::Constant(Value::Float(-0.0)).to_string(), "(-0.0)");
    }

    #[test]
    fn printed_selectors_evaluate_the_same() {
        let message = message_with(&[("a", Value::Int(3))]);
        let text = "a - 1 - 1 = 1 AND 2 * a / 3 = 2";
        let filter = SqlFilter::parse(text).expect("parses");
        let reparsed = SqlFilter::parse(&filter.to_string()).expect("printed text parses");
        assert!(filter.matches(&message));
        assert!(reparsed.matches(&message));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn printing_then_parsing_preserves_evaluation(
            expr in any_selector(),
            messages in prop::collection::vec(any_message(), 4),
        ) {
            let text = expr.to_string();
            let reparsed = SqlFilter::parse(&text)
                .map_err(|error| TestCaseError::fail(format!("{text}: {error}")))?;
            for message in &messages {
                prop_assert_eq!(reparsed.evaluate(message), expr.evaluate(message), "{}", text);
            }
        }
    }
}
