//! The parts of a conjunction the index does not serve from its predicate
//! sources, evaluated per candidate.
//!
//! A conjunction becomes a candidate once all its indexed predicates hold;
//! it passes when its residual tests hold too. A residual test is whatever
//! the value indexes cannot look up by value (`<>`, LIKE, NOT of an ordering,
//! IS NULL, arithmetic, comparisons between properties, ...) and, as a last
//! resort, a whole filter. Each is evaluated by the language's own evaluator,
//! so the index agrees with [`ContentFilter::matches`] by construction.

use sift_core::Message;

use crate::sql::Literal;
use crate::tags::TagPredicate;
use crate::ContentFilter;

/// A test evaluated for each candidate conjunction that carries it.
#[derive(Debug, Clone)]
pub(crate) enum Residual {
    /// A tags predicate without a value index (`!=`, or one that can never
    /// hold, such as an ordering against a boolean).
    Tag(TagPredicate),
    /// A literal of a SQL selector's normal form; it must be TRUE.
    Literal(Literal),
    /// A whole filter: a SQL selector whose normal form is too big to file
    /// as conjunctions.
    Filter(ContentFilter),
}

impl Residual {
    /// True when the test passes the message.
    pub(crate) fn holds(&self, message: &Message) -> bool {
        match self {
            Residual::Tag(predicate) => predicate.matches(message),
            Residual::Literal(literal) => literal.evaluate(message).is_true(),
            Residual::Filter(filter) => filter.matches(message),
        }
    }
}
