//! The conditions of a conjunction, as the covering check sees them.
//!
//! A tags predicate, or a SQL literal that compares a property or header
//! with constants (comparison, BETWEEN, IN, IS NULL, a boolean property),
//! becomes a restriction of that identifier to a set of values. Anything
//! else in SQL (LIKE, arithmetic, two properties compared) stays an opaque
//! literal that only an identical literal implies.

use crate::compare::ComparisonOp;
use crate::covering::outcomes::{self, Outcomes, StringOrder};
use crate::covering::value_set::ValueSet;
use crate::sql::{Expr, HeaderField, Literal};
use crate::tags::TagPredicate;
use sift_core::Value;

/// What a condition constrains: a message property or a JMS header field.
/// The two never alias: in SQL `JMSPriority` is the header, while a tags
/// predicate on `JMSPriority` reads a property of that name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Identifier {
    /// A message property.
    Property(String),
    /// A JMS header field (SQL only).
    Header(HeaderField),
}

/// One condition of a conjunction.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Condition {
    /// True exactly when the identifier's value (or its absence) is in the set.
    Restrict {
        /// What is constrained.
        identifier: Identifier,
        /// The values for which the condition is true.
        allowed: ValueSet,
    },
    /// A SQL literal the check does not analyse.
    Opaque(Literal),
}

/// A SQL literal, classified.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Analysed {
    /// True for every message (`TRUE`, `NOT FALSE`): adds nothing to a conjunction.
    Always,
    /// True for no message (`FALSE`, or a constant that is not a boolean and
    /// so is UNKNOWN): the conjunction can never be true.
    Never,
    /// Anything else.
    Condition(Condition),
}

/// The condition a tags predicate imposes: tags order strings, and anything
/// that is not TRUE is false, so only the TRUE set matters.
pub(crate) fn tag_condition(predicate: &TagPredicate) -> Condition {
    let outcomes = outcomes::comparison(predicate.op, &predicate.value, StringOrder::Ordered);
    Condition::Restrict { identifier: Identifier::Property(predicate.name.clone()), allowed: outcomes.when_true }
}

/// Classifies a literal of a SQL selector's normal form.
pub(crate) fn analyse_literal(literal: &Literal) -> Analysed {
    if let Expr::Constant(constant) = &literal.atom {
        return match constant {
            Value::Bool(flag) if *flag != literal.negated => Analysed::Always,
            _ => Analysed::Never,
        };
    }
    match atom_outcomes(&literal.atom) {
        Some((identifier, outcomes)) => {
            let outcomes = if literal.negated { outcomes.not() } else { outcomes };
            Analysed::Condition(Condition::Restrict { identifier, allowed: outcomes.when_true })
        }
        None => Analysed::Condition(Condition::Opaque(literal.clone())),
    }
}

/// The identifier an operand names, if it is a bare property or header.
fn identifier(expr: &Expr) -> Option<Identifier> {
    match expr {
        Expr::Property(name) => Some(Identifier::Property(name.clone())),
        Expr::Header(field) => Some(Identifier::Header(*field)),
        _ => None,
    }
}

/// The identifier an atom constrains and its outcomes, when the atom
/// compares one identifier with constants only.
fn atom_outcomes(atom: &Expr) -> Option<(Identifier, Outcomes)> {
    let sql = StringOrder::EqualityOnly;
    match atom {
        Expr::Comparison { op, left, right } => match (left.as_ref(), right.as_ref()) {
            (operand, Expr::Constant(constant)) => {
                Some((identifier(operand)?, outcomes::comparison(*op, constant, sql)))
            }
            (Expr::Constant(constant), operand) => {
                Some((identifier(operand)?, outcomes::comparison(op.mirrored(), constant, sql)))
            }
            _ => None,
        },
        Expr::Between { operand, low, high, negated } => {
            let (Expr::Constant(low), Expr::Constant(high)) = (low.as_ref(), high.as_ref()) else {
                return None;
            };
            let at_least = outcomes::comparison(ComparisonOp::GreaterOrEqual, low, sql);
            let between = at_least.and(&outcomes::comparison(ComparisonOp::LessOrEqual, high, sql));
            Some((identifier(operand)?, negate_if(*negated, between)))
        }
        Expr::In { operand, list, negated } => {
            Some((identifier(operand)?, negate_if(*negated, outcomes::in_list(list))))
        }
        Expr::IsNull { operand, negated } => Some((identifier(operand)?, negate_if(*negated, outcomes::is_null()))),
        Expr::Property(_) | Expr::Header(_) => Some((identifier(atom)?, outcomes::boolean_property())),
        _ => None,
    }
}

fn negate_if(negated: bool, outcomes: Outcomes) -> Outcomes {
    if negated {
        outcomes.not()
    } else {
        outcomes
    }
}
