//! Disjunctive normal form of a selector, for subscription indexes.
//!
//! An index wants a selector as an OR of ANDs of simple predicates, so that
//! each AND can be filed under one of its equality or range predicates. The
//! conversion pushes NOT down to the predicates (De Morgan) and distributes
//! AND over OR. Both steps hold in SQL's three-valued logic, so the normal
//! form evaluates exactly like the selector, UNKNOWN included. Distribution
//! can blow up exponentially, so the conversion gives up past
//! [`DNF_DISJUNCTS_MAX`] disjuncts.

use sift_core::Message;

use crate::sql::ast::Expr;
use crate::sql::truth::Truth;

/// Most disjuncts (ANDs) [`to_dnf`] produces before giving up.
pub const DNF_DISJUNCTS_MAX: usize = 64;

/// A predicate or its negation, as it appears in a normal form.
#[derive(Debug, Clone, PartialEq)]
pub struct Literal {
    /// True when the literal is `NOT atom`.
    pub negated: bool,
    /// A predicate with no AND, OR or NOT at its top: a comparison, BETWEEN,
    /// IN, LIKE, IS NULL, or a boolean value such as a property or TRUE.
    pub atom: Expr,
}

impl Literal {
    /// The literal's truth for a message.
    pub fn evaluate(&self, message: &Message) -> Truth {
        let truth = self.atom.evaluate(message);
        if self.negated {
            !truth
        } else {
            truth
        }
    }
}

/// The selector as an OR of ANDs of literals, or `None` when that would take
/// more than [`DNF_DISJUNCTS_MAX`] ANDs. An empty OR is FALSE and an empty
/// AND is TRUE, as in [`evaluate_dnf`].
pub fn to_dnf(expr: &Expr) -> Option<Vec<Vec<Literal>>> {
    normal_form(expr, false)
}

/// Evaluates a normal form produced by [`to_dnf`].
pub fn evaluate_dnf(disjuncts: &[Vec<Literal>], message: &Message) -> Truth {
    disjuncts.iter().fold(Truth::False, |any, conjuncts| {
        let all = conjuncts.iter().fold(Truth::True, |all, literal| all.and(literal.evaluate(message)));
        any.or(all)
    })
}

/// The normal form of `expr`, or of `NOT expr` when `negated`.
fn normal_form(expr: &Expr, negated: bool) -> Option<Vec<Vec<Literal>>> {
    match (expr, negated) {
        (Expr::Not(operand), _) => normal_form(operand, !negated),
        // NOT (a AND b) is NOT a OR NOT b, so it is a union like a OR b.
        (Expr::Or(operands), false) | (Expr::And(operands), true) => union(operands, negated),
        (Expr::And(operands), false) | (Expr::Or(operands), true) => product(operands, negated),
        (atom, _) => Some(vec![vec![Literal { negated, atom: atom.clone() }]]),
    }
}

/// The disjuncts of every operand, together.
fn union(operands: &[Expr], negated: bool) -> Option<Vec<Vec<Literal>>> {
    let mut disjuncts = Vec::new();
    for operand in operands {
        disjuncts.extend(normal_form(operand, negated)?);
        if disjuncts.len() > DNF_DISJUNCTS_MAX {
            return None;
        }
    }
    Some(disjuncts)
}

/// AND distributed over the operands' disjuncts: one disjunct for each way of
/// picking a disjunct from every operand.
fn product(operands: &[Expr], negated: bool) -> Option<Vec<Vec<Literal>>> {
    let mut disjuncts: Vec<Vec<Literal>> = vec![Vec::new()];
    for operand in operands {
        let factor = normal_form(operand, negated)?;
        if disjuncts.len().saturating_mul(factor.len()) > DNF_DISJUNCTS_MAX {
            return None;
        }
        let mut combined = Vec::with_capacity(disjuncts.len() * factor.len());
        for left in &disjuncts {
            for right in &factor {
                let mut conjunction = left.clone();
                conjunction.extend(right.iter().cloned());
                combined.push(conjunction);
            }
        }
        disjuncts = combined;
    }
    Some(disjuncts)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sift_core::Value;

    use super::*;
    use crate::sql::test_support::{any_message, any_selector, message_with};
    use crate::sql::SqlFilter;

    /// The normal form of a selector, each literal printed, for comparing.
    fn dnf_text(text: &str) -> Option<Vec<Vec<String>>> {
        let filter = SqlFilter::parse(text).expect("parses");
        filter.to_dnf().map(|disjuncts| {
            disjuncts
                .into_iter()
                .map(|conjuncts| {
                    conjuncts
                        .into_iter()
                        .map(|literal| format!("{}{}", if literal.negated { "NOT " } else { "" }, literal.atom))
                        .collect()
                })
                .collect()
        })
    }

    #[test]
    fn distributes_and_over_or() {
        assert_eq!(
            dnf_text("a = 1 AND (b = 2 OR c = 3)"),
            Some(vec![
                vec!["(a = 1)".to_string(), "(b = 2)".to_string()],
                vec!["(a = 1)".to_string(), "(c = 3)".to_string()],
            ])
        );
    }

    #[test]
    fn pushes_not_down_to_the_predicates() {
        assert_eq!(
            dnf_text("NOT (a = 1 OR NOT b BETWEEN 1 AND 2)"),
            Some(vec![vec!["NOT (a = 1)".to_string(), "(b BETWEEN 1 AND 2)".to_string()]])
        );
        assert_eq!(
            dnf_text("NOT (a = 1 AND b = 2)"),
            Some(vec![vec!["NOT (a = 1)".to_string()], vec!["NOT (b = 2)".to_string()]])
        );
        assert_eq!(dnf_text("flag"), Some(vec![vec!["flag".to_string()]]));
    }

    #[test]
    fn gives_up_past_the_disjunct_limit() {
        // Seven two-way ORs under an AND make 2^7 = 128 disjuncts.
        let selector = (0..7).map(|index| format!("(a = {index} OR b = {index})")).collect::<Vec<_>>().join(" AND ");
        assert_eq!(dnf_text(&selector), None);
        let six = (0..6).map(|index| format!("(a = {index} OR b = {index})")).collect::<Vec<_>>().join(" AND ");
        assert_eq!(dnf_text(&six).map(|disjuncts| disjuncts.len()), Some(64));
    }

    #[test]
    fn empty_chains_keep_their_meaning() {
        let message = message_with(&[("a", Value::Int(1))]);
        let always = to_dnf(&Expr::And(Vec::new())).expect("small");
        assert_eq!(evaluate_dnf(&always, &message), Truth::True);
        let never = to_dnf(&Expr::Or(Vec::new())).expect("small");
        assert_eq!(evaluate_dnf(&never, &message), Truth::False);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn normal_form_evaluates_like_the_selector(
            expr in any_selector(),
            messages in prop::collection::vec(any_message(), 4),
        ) {
            if let Some(disjuncts) = to_dnf(&expr) {
                prop_assert!(disjuncts.len() <= DNF_DISJUNCTS_MAX);
                for message in &messages {
                    prop_assert_eq!(evaluate_dnf(&disjuncts, message), expr.evaluate(message), "{}", expr);
                }
            }
        }
    }
}
