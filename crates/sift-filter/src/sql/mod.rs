//! The `sql` filter language: Jakarta Messaging (JMS 2.0) message selectors.
//!
//! ```text
//! JMSPriority > 4 AND (sym IN ('IBM', 'HP') OR price * qty BETWEEN 1E3 AND 5E3)
//!     AND name LIKE 'report\_%' ESCAPE '\' AND region IS NOT NULL
//! ```
//!
//! Identifiers name message properties (case-sensitive, Java identifier
//! rules) or the header fields `JMSPriority`, `JMSTimestamp`,
//! `JMSMessageID`, `JMSDeliveryMode` and `JMSExpiration` ([`HeaderField`]).
//! Keywords (`AND OR NOT BETWEEN IN LIKE ESCAPE IS NULL TRUE FALSE`) are
//! case-insensitive and cannot be identifiers. Literals are strings in single
//! quotes (`''` for a quote), integers (optional `L` suffix), decimals and
//! exponent floats (optional `F`/`D` suffix), and `TRUE`/`FALSE`.
//!
//! Evaluation uses SQL three-valued logic ([`Truth`]): a missing property is
//! NULL, comparisons with NULL or between incompatible types are UNKNOWN, and
//! a selector matches only when it is TRUE. Where JMS is silent:
//!
//! - integer arithmetic that overflows is redone in floating point;
//! - division by zero (integer or float) is NULL;
//! - NaN compares as in IEEE 754 (`<>` is TRUE, everything else FALSE);
//! - IN also accepts numeric literals, and `x IN (a, b)` means
//!   `x = a OR x = b`;
//! - `BETWEEN` means `low <= x AND x <= high`;
//! - a LIKE escape character must be followed by `%`, `_` or itself.

mod arithmetic;
mod ast;
mod display;
mod dnf;
mod eval;
mod lexer;
mod like;
mod parser;
#[cfg(test)]
mod test_support;
mod truth;

use sift_core::Message;

pub use ast::{ArithmeticOp, Expr, HeaderField, UnaryOp};
pub use dnf::{evaluate_dnf, to_dnf, Literal, DNF_DISJUNCTS_MAX};
pub use like::{LikePattern, LikePatternError};
pub use parser::MAX_DEPTH;
pub use truth::Truth;

use crate::error::FilterError;

/// A parsed SQL selector.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlFilter {
    expr: Expr,
}

impl SqlFilter {
    /// Parses a selector, or says where and why it is malformed. The
    /// selector must be a condition: `a + 1` or `'x'` alone are refused.
    pub fn parse(text: &str) -> Result<SqlFilter, FilterError> {
        parser::parse(text).map(|expr| SqlFilter { expr })
    }

    /// A filter from an expression built by hand. Evaluation recurses over
    /// the tree, so it should be no deeper than [`MAX_DEPTH`], which parsing
    /// guarantees.
    pub fn from_expr(expr: Expr) -> SqlFilter {
        SqlFilter { expr }
    }

    /// The selector's syntax tree.
    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// The selector's truth for a message.
    pub fn evaluate(&self, message: &Message) -> Truth {
        self.expr.evaluate(message)
    }

    /// True when the selector is TRUE for the message (not FALSE or UNKNOWN).
    pub fn matches(&self, message: &Message) -> bool {
        self.evaluate(message).is_true()
    }

    /// The conditions of the top-level AND (see [`Expr::conjuncts`]).
    pub fn conjuncts(&self) -> Vec<&Expr> {
        self.expr.conjuncts()
    }

    /// The selector in disjunctive normal form, if small enough (see [`to_dnf`]).
    pub fn to_dnf(&self) -> Option<Vec<Vec<Literal>>> {
        to_dnf(&self.expr)
    }
}

impl std::fmt::Display for SqlFilter {
    /// The selector, fully parenthesised; it parses back to an equivalent one.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}", self.expr)
    }
}

impl Expr {
    /// The expression's truth as a condition for a message.
    pub fn evaluate(&self, message: &Message) -> Truth {
        eval::truth(self, message)
    }
}
