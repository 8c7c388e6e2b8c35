//! How a content filter is filed: as conjunctions of indexed predicates plus
//! residual tests, the filter passing exactly when one conjunction does.
//!
//! - A tags filter is one conjunction; `=` and the orderings are indexed,
//!   `!=` is residual.
//! - A SQL selector is put in disjunctive normal form ([`crate::sql::to_dnf`])
//!   and each disjunct becomes a conjunction (see `sql_literal.rs` for which
//!   literals are indexed). One IN list per conjunction may be expanded
//!   into one conjunction per item. A selector whose normal form is too big
//!   is one residual-only conjunction.
//! - A regex filter is one conjunction of one topic-regex predicate.
//! - An XPath filter is one conjunction of one XPath predicate: the filter
//!   whole, decided with all the others in one pass over the metadata by
//!   the shared automaton (`xpath_source.rs`). Splitting it further would
//!   gain nothing, as the automaton already shares common paths and tests
//!   values only where the structure matches.

use crate::index::predicate::{Attribute, PredicateSource, RangeOp, TopicPattern, ValueTest, XPathPattern};
use crate::index::residual::Residual;
use crate::index::sql_literal::{classify, LiteralPlan};
use crate::sql::{Literal, SqlFilter};
use crate::tags::{TagFilter, TagPredicate};
use crate::{ComparisonOp, ContentFilter};

/// Most conjunctions one filter is filed as. The normal form alone is
/// bounded by [`crate::sql::DNF_DISJUNCTS_MAX`]; IN lists are expanded only
/// within this budget and otherwise stay residual, so that one subscription
/// cannot fill the index.
pub const CONJUNCTIONS_PER_FILTER_MAX: usize = 1024;

/// One conjunction of a filter, before its predicates are interned.
#[derive(Debug, Clone)]
pub(crate) struct ConjunctionPlan {
    /// Predicates that must all hold; repeats are allowed.
    pub(crate) predicates: Vec<PredicateSource>,
    /// Tests that must all pass once the predicates hold.
    pub(crate) residual: Vec<Residual>,
}

/// The conjunctions `filter` is filed as; none when it can never pass.
pub(crate) fn plan(filter: &ContentFilter) -> Vec<ConjunctionPlan> {
    match filter {
        ContentFilter::Tags(tags) => vec![plan_tags(tags)],
        ContentFilter::Sql(selector) => plan_sql(selector),
        ContentFilter::Regex(regex) => {
            vec![single(PredicateSource::TopicRegex(TopicPattern(regex.regex().clone())))]
        }
        ContentFilter::Xpath(xpath) => vec![single(PredicateSource::Xpath(XPathPattern::new(xpath)))],
        ContentFilter::And(both) => plan_and(&both.0, &both.1),
    }
}

/// Every conjunction of `first` joined with every one of `second`, so that
/// both filters' predicates are looked up in the index. When that would
/// be more than [`CONJUNCTIONS_PER_FILTER_MAX`] conjunctions, `first`'s
/// conjunctions carry `second` whole as a residual test instead.
fn plan_and(first: &ContentFilter, second: &ContentFilter) -> Vec<ConjunctionPlan> {
    let firsts = plan(first);
    let seconds = plan(second);
    if firsts.len().saturating_mul(seconds.len()) > CONJUNCTIONS_PER_FILTER_MAX {
        return firsts
            .into_iter()
            .map(|mut conjunction| {
                conjunction.residual.push(Residual::Filter(second.clone()));
                conjunction
            })
            .collect();
    }
    let mut joined = Vec::with_capacity(firsts.len() * seconds.len());
    for left in &firsts {
        for right in &seconds {
            let mut predicates = left.predicates.clone();
            predicates.extend(right.predicates.iter().cloned());
            let mut residual = left.residual.clone();
            residual.extend(right.residual.iter().cloned());
            joined.push(ConjunctionPlan { predicates, residual });
        }
    }
    joined
}

/// A conjunction of one predicate and no residual test.
fn single(predicate: PredicateSource) -> ConjunctionPlan {
    ConjunctionPlan { predicates: vec![predicate], residual: Vec::new() }
}

/// A residual-only conjunction holding the whole filter.
fn whole(filter: ContentFilter) -> ConjunctionPlan {
    ConjunctionPlan { predicates: Vec::new(), residual: vec![Residual::Filter(filter)] }
}

fn plan_tags(tags: &TagFilter) -> ConjunctionPlan {
    let mut conjunction = ConjunctionPlan { predicates: Vec::new(), residual: Vec::new() };
    for predicate in &tags.predicates {
        match tag_source(predicate) {
            Some(source) => conjunction.predicates.push(source),
            None => conjunction.residual.push(Residual::Tag(predicate.clone())),
        }
    }
    conjunction
}

/// The indexed predicate a tags predicate is, if any. Tags compare as SQL
/// does except that a missing property is FALSE rather than UNKNOWN (the
/// same to a conjunction) and strings order, so string bounds are ranges.
fn tag_source(predicate: &TagPredicate) -> Option<PredicateSource> {
    let test = match RangeOp::from_comparison(predicate.op) {
        Some(op) => ValueTest::range(op, &predicate.value, true)?,
        None if predicate.op == ComparisonOp::Equal => ValueTest::equal(&predicate.value)?,
        None => return None,
    };
    Some(PredicateSource::Value { attribute: Attribute::Property(predicate.name.as_str().into()), test })
}

fn plan_sql(selector: &SqlFilter) -> Vec<ConjunctionPlan> {
    let Some(disjuncts) = selector.to_dnf() else {
        return vec![whole(ContentFilter::Sql(selector.clone()))];
    };
    let mut plans = Vec::with_capacity(disjuncts.len());
    for (index, literals) in disjuncts.iter().enumerate() {
        // Leave room for at least one conjunction per later disjunct.
        let later = disjuncts.len() - index - 1;
        let budget = CONJUNCTIONS_PER_FILTER_MAX.saturating_sub(plans.len() + later);
        plans.extend(plan_sql_conjunction(literals, budget));
    }
    plans
}

/// The conjunctions for one disjunct of a normal form, at most `budget` of
/// them unless the budget is 0 (then one).
fn plan_sql_conjunction(literals: &[Literal], budget: usize) -> Vec<ConjunctionPlan> {
    let mut predicates = Vec::new();
    let mut residual = Vec::new();
    let mut in_lists = Vec::new();
    for literal in literals {
        match classify(literal) {
            LiteralPlan::AllOf(sources) => predicates.extend(sources),
            LiteralPlan::AnyOf(alternatives) => in_lists.push((literal, alternatives)),
            LiteralPlan::Residual => residual.push(Residual::Literal(literal.clone())),
        }
    }
    // An IN list is expanded only when the conjunction has no equality of its
    // own: an equality already makes it a candidate for few messages, and
    // expanding would multiply the conjunctions for little gain.
    let has_equality =
        predicates.iter().any(|source| matches!(source, PredicateSource::Value { test: ValueTest::Equal(_), .. }));
    let mut expanded = None;
    for (literal, alternatives) in in_lists {
        if expanded.is_none() && !has_equality && alternatives.len() <= budget {
            expanded = Some(alternatives);
        } else {
            residual.push(Residual::Literal(literal.clone()));
        }
    }
    let Some(alternatives) = expanded else {
        return vec![ConjunctionPlan { predicates, residual }];
    };
    alternatives
        .into_iter()
        .map(|alternative| {
            let mut with_item = predicates.clone();
            with_item.push(alternative);
            ConjunctionPlan { predicates: with_item, residual: residual.clone() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FilterLanguage;

    fn plans(language: FilterLanguage, text: &str) -> Vec<ConjunctionPlan> {
        plan(&ContentFilter::parse(language, text).expect("parses"))
    }

    /// (indexed predicates, residual tests) per conjunction.
    fn shape(language: FilterLanguage, text: &str) -> Vec<(usize, usize)> {
        plans(language, text).iter().map(|plan| (plan.predicates.len(), plan.residual.len())).collect()
    }

    #[test]
    fn tags_index_equalities_and_orderings() {
        assert_eq!(shape(FilterLanguage::Tags, r#"a=1,b>2,sym="IBM",c!=3,flag<true"#), vec![(3, 2)]);
        assert_eq!(shape(FilterLanguage::Tags, "s>abc"), vec![(1, 0)], "tags order strings");
    }

    #[test]
    fn sql_disjuncts_become_conjunctions() {
        assert_eq!(shape(FilterLanguage::Sql, "a = 1 AND (b > 2 OR s LIKE 'x%')"), vec![(2, 0), (1, 1)]);
        assert_eq!(shape(FilterLanguage::Sql, "a <> 1"), vec![(0, 1)]);
        assert!(plans(FilterLanguage::Sql, "FALSE OR FALSE").iter().all(|plan| plan.predicates.is_empty()));
    }

    #[test]
    fn one_in_list_expands_when_there_is_no_equality() {
        assert_eq!(shape(FilterLanguage::Sql, "s IN ('a', 'b', 'c') AND b > 1"), vec![(2, 0); 3]);
        assert_eq!(shape(FilterLanguage::Sql, "s IN ('a', 'b') AND t IN ('c', 'd')"), vec![(1, 1); 2]);
        assert_eq!(shape(FilterLanguage::Sql, "s IN ('a', 'b') AND a = 1"), vec![(1, 1)]);
        let huge = (0..=CONJUNCTIONS_PER_FILTER_MAX).map(|item| item.to_string()).collect::<Vec<_>>().join(", ");
        assert_eq!(shape(FilterLanguage::Sql, &format!("a IN ({huge})")), vec![(0, 1)], "over budget");
    }

    #[test]
    fn an_xpath_filter_is_one_predicate() {
        let xpath = plans(FilterLanguage::Xpath, "/metadata/ATO[nickname = 'KTJR'] or not(//Orig)");
        assert_eq!(xpath.len(), 1);
        assert!(xpath[0].residual.is_empty());
        assert!(matches!(xpath[0].predicates[..], [PredicateSource::Xpath(_)]));
    }

    #[test]
    fn oversized_selectors_and_regexes() {
        let selector = (0..7).map(|index| format!("(a = {index} OR b = {index})")).collect::<Vec<_>>().join(" AND ");
        assert_eq!(shape(FilterLanguage::Sql, &selector), vec![(0, 1)]);
        let regex = plans(FilterLanguage::Regex, "^a");
        assert_eq!(regex.len(), 1);
        assert!(matches!(regex[0].predicates[..], [PredicateSource::TopicRegex(_)]));
    }
}
