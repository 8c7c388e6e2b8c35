//! Covering between subscriptions: when one filter passes every message
//! another passes.
//!
//! Linked brokers tell each other which messages their subscribers want. A
//! broker that has already advertised a subscription need not advertise one
//! it covers, since its neighbours send it those messages anyway. Answering
//! "covers" wrongly would lose messages, so [`ContentFilter::covers`] is
//! sound: it answers true only when it has proved coverage, and false when
//! it cannot tell. It is precise for the common cases:
//!
//! - a tags filter covers one that has its predicates and more, or narrower
//!   ranges (`price>100` covers `price>200`; `x>=5` covers `x=5`);
//! - a SQL selector covers another when each disjunct of the other's
//!   disjunctive normal form is covered by some disjunct of its own; a
//!   literal comparing a property or header with constants (`=`, `<>`, `<`,
//!   `<=`, `>`, `>=`, BETWEEN, IN, IS NULL, a boolean property, and their
//!   negations) is compared as the set of values it accepts, under SQL's
//!   three-valued logic and typing (numbers across integer and float, NaN
//!   equal to nothing, strings only `=`/`<>`, a range on numbers saying
//!   nothing about strings); any other literal only by being identical;
//! - tags and SQL filters are compared with each other through the same
//!   sets, each with its own typing rules;
//! - regular expressions and XPath filters cover only a filter written
//!   identically (XPath: parsed identically), since deciding inclusion of
//!   regular or XPath languages is out of proportion to the gain;
//! - any filter covers a filter equal to it, and having no content filter
//!   covers every content filter.

mod condition;
mod interval;
mod normal_form;
mod outcomes;
#[cfg(test)]
mod tests;
mod value_set;

use sift_core::TopicFilter;

use crate::covering::normal_form::{form_covers, sql_form, tags_form, Conjunction};
use crate::ContentFilter;

impl ContentFilter {
    /// True when every message `other` passes is also passed by `self`, so a
    /// broker advertising `self` need not advertise `other`. Never true
    /// falsely; false when coverage cannot be established (see the
    /// [module documentation](crate::covering) for what is recognised).
    pub fn covers(&self, other: &ContentFilter) -> bool {
        if self == other {
            return true;
        }
        match (normal_form(self), normal_form(other)) {
            (Some(wide), Some(narrow)) => form_covers(&wide, &narrow),
            _ => false,
        }
    }
}

/// The filter as an OR of conjunctions, for the languages that reduce to
/// one; `None` for regular expressions, XPath, and SQL selectors whose
/// normal form is too large.
fn normal_form(filter: &ContentFilter) -> Option<Vec<Conjunction>> {
    match filter {
        ContentFilter::Tags(tags) => Some(tags_form(tags)),
        ContentFilter::Sql(sql) => sql_form(sql),
        ContentFilter::Regex(_) | ContentFilter::Xpath(_) | ContentFilter::And(_) => None,
    }
}

/// True when subscription A (topic filter and optional content filter)
/// receives every message subscription B receives, so that B need not be
/// advertised where A is. A message reaches a subscription when its topic
/// matches and its content passes, so A covers B when A's topic filter
/// covers B's and A's content filter, if any, covers B's. A content filter
/// on A against none on B is treated as not covering (it usually rejects
/// something), which is safe.
pub fn subscription_covers(
    topic_a: &TopicFilter,
    content_a: Option<&ContentFilter>,
    topic_b: &TopicFilter,
    content_b: Option<&ContentFilter>,
) -> bool {
    if !topic_a.covers(topic_b) {
        return false;
    }
    match (content_a, content_b) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(filter_a), Some(filter_b)) => filter_a.covers(filter_b),
    }
}
