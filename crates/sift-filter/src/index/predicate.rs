//! The predicates the index interns: what each one tests, named by the
//! source that decides it for a message.
//!
//! A predicate here is a test whose truth for a message the index finds
//! without looking at every subscription: a comparison of one property or
//! header with a constant (found through that attribute's value indexes), a
//! regular expression over the topic (found by the regex sets), or an XPath
//! filter over the metadata document (found by the shared XPath automaton).
//! Equal predicates from different subscriptions are interned once, so each
//! is decided at most once per message however many subscriptions use it.

use std::hash::{Hash, Hasher};

use regex::Regex;
use sift_core::Value;

use crate::compare::ComparisonOp;
use crate::index::number::NumberKey;
use crate::sql::HeaderField;
use crate::xpath::XPathFilter;

/// The id of an interned predicate.
pub(crate) type PredicateId = usize;

/// What a value predicate looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Attribute {
    /// A message property, by its case-sensitive name.
    Property(Box<str>),
    /// A JMS header field (SQL selectors only).
    Header(HeaderField),
}

/// A constant an attribute can equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Constant {
    /// A boolean.
    Bool(bool),
    /// A number, canonical so that `1` and `1.0` are one constant.
    Number(NumberKey),
    /// A string.
    Text(Box<str>),
}

/// An ordering operator: the four comparisons a range index serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RangeOp {
    /// `attribute < bound`
    Less,
    /// `attribute <= bound`
    LessOrEqual,
    /// `attribute > bound`
    Greater,
    /// `attribute >= bound`
    GreaterOrEqual,
}

impl RangeOp {
    /// The range operator for an ordering comparison; `None` for `=` and `<>`.
    pub(crate) fn from_comparison(op: ComparisonOp) -> Option<RangeOp> {
        match op {
            ComparisonOp::Less => Some(RangeOp::Less),
            ComparisonOp::LessOrEqual => Some(RangeOp::LessOrEqual),
            ComparisonOp::Greater => Some(RangeOp::Greater),
            ComparisonOp::GreaterOrEqual => Some(RangeOp::GreaterOrEqual),
            ComparisonOp::Equal | ComparisonOp::NotEqual => None,
        }
    }
}

/// The constant side of a range predicate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Bound {
    /// A number; numbers order with numbers in both languages.
    Number(NumberKey),
    /// A string; only tags filters order strings (SQL leaves that UNKNOWN).
    Text(Box<str>),
}

/// What a value predicate requires of its attribute.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum ValueTest {
    /// The attribute has a value (SQL `IS NOT NULL`).
    Present,
    /// The attribute equals the constant, as both languages define `=`:
    /// numbers across integer and float, strings and booleans with their own
    /// type; NaN equals nothing.
    Equal(Constant),
    /// The attribute orders against the bound as the operator says; values
    /// of another type, and NaN, satisfy no range predicate.
    Range(RangeOp, Bound),
}

impl ValueTest {
    /// `attribute = value`, or `None` when nothing equals the value (NaN).
    pub(crate) fn equal(value: &Value) -> Option<ValueTest> {
        let constant = match value {
            Value::Bool(flag) => Constant::Bool(*flag),
            Value::Int(int) => Constant::Number(NumberKey::from_int(*int)),
            Value::Float(float) => Constant::Number(NumberKey::from_float(*float)?),
            Value::Str(text) => Constant::Text(text.as_ref().into()),
        };
        Some(ValueTest::Equal(constant))
    }

    /// `attribute OP value`, or `None` when nothing orders against the value:
    /// NaN, booleans, and strings unless `strings_order` (tags order strings,
    /// SQL does not).
    pub(crate) fn range(op: RangeOp, value: &Value, strings_order: bool) -> Option<ValueTest> {
        let bound = match value {
            Value::Int(int) => Bound::Number(NumberKey::from_int(*int)),
            Value::Float(float) => Bound::Number(NumberKey::from_float(*float)?),
            Value::Str(text) if strings_order => Bound::Text(text.as_ref().into()),
            Value::Str(_) | Value::Bool(_) => return None,
        };
        Some(ValueTest::Range(op, bound))
    }
}

/// A compiled regular expression over the topic, compared and hashed by its
/// text so that equal expressions intern as one predicate.
#[derive(Debug, Clone)]
pub(crate) struct TopicPattern(pub(crate) Regex);

impl PartialEq for TopicPattern {
    fn eq(&self, other: &TopicPattern) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for TopicPattern {}

impl Hash for TopicPattern {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_str().hash(state);
    }
}

/// A parsed XPath filter, compared and hashed by its canonical text (the
/// fully parenthesised form it displays as), so that subscriptions with the
/// same filter share one predicate even when they spaced it differently.
#[derive(Debug, Clone)]
pub(crate) struct XPathPattern {
    text: Box<str>,
    filter: XPathFilter,
}

impl XPathPattern {
    /// The pattern for `filter`.
    pub(crate) fn new(filter: &XPathFilter) -> XPathPattern {
        XPathPattern { text: filter.to_string().into_boxed_str(), filter: filter.clone() }
    }

    /// The filter the pattern stands for.
    pub(crate) fn filter(&self) -> &XPathFilter {
        &self.filter
    }
}

impl PartialEq for XPathPattern {
    fn eq(&self, other: &XPathPattern) -> bool {
        self.text == other.text
    }
}

impl Eq for XPathPattern {}

impl Hash for XPathPattern {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

/// A distinct predicate, named by the source that decides it.
///
/// Each source finds, for a message, the predicates of its kind that hold,
/// at a cost that grows with how many hold: the value indexes by lookup,
/// the regex sets by one pass over the topic, and the XPath automaton by
/// one streaming pass over the metadata document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum PredicateSource {
    /// A test on one attribute's value, found by the attribute's value
    /// indexes.
    Value {
        /// The property or header tested.
        attribute: Attribute,
        /// The test.
        test: ValueTest,
    },
    /// A regular expression over the topic, found by the regex sets.
    TopicRegex(TopicPattern),
    /// An XPath filter over the metadata document, found by the shared
    /// XPath automaton.
    Xpath(XPathPattern),
}

impl PredicateSource {
    /// True for an XPath predicate, whose source parses the metadata and so
    /// runs only for partitions that need it.
    pub(crate) fn is_xpath(&self) -> bool {
        matches!(self, PredicateSource::Xpath(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // A `Regex`'s interior mutability is its match cache, which the hash
    // (of the text) does not depend on.
    #[allow(clippy::mutable_key_type)]
    fn topic_patterns_compare_by_text() {
        let compile = |text: &str| TopicPattern(Regex::new(text).expect("compiles"));
        assert_eq!(compile("a+"), compile("a+"));
        assert_ne!(compile("a+"), compile("a*"));
        let mut interned = std::collections::HashSet::new();
        assert!(interned.insert(PredicateSource::TopicRegex(compile("a+"))));
        assert!(!interned.insert(PredicateSource::TopicRegex(compile("a+"))));
    }

    #[test]
    fn xpath_patterns_compare_by_canonical_text() {
        let pattern = |text: &str| XPathPattern::new(&XPathFilter::parse(text).expect("parses"));
        assert_eq!(pattern("/a[b=1]"), pattern("/a[ b = 1 ]"));
        assert_ne!(pattern("/a[b=1]"), pattern("/a[b=2]"));
        let mut interned = std::collections::HashSet::new();
        assert!(interned.insert(pattern("//a")));
        assert!(!interned.insert(pattern(" //a ")));
        assert!(PredicateSource::Xpath(pattern("//a")).is_xpath());
    }

    #[test]
    fn tests_from_constants_follow_the_comparison_rules() {
        assert_eq!(ValueTest::equal(&Value::Float(2.0)), ValueTest::equal(&Value::Int(2)));
        assert_eq!(ValueTest::equal(&Value::Float(f64::NAN)), None);
        assert_eq!(ValueTest::equal(&Value::Bool(true)), Some(ValueTest::Equal(Constant::Bool(true))));
        let text = Value::Str("IBM".into());
        assert_eq!(ValueTest::range(RangeOp::Less, &text, false), None);
        assert_eq!(
            ValueTest::range(RangeOp::Less, &text, true),
            Some(ValueTest::Range(RangeOp::Less, Bound::Text("IBM".into())))
        );
        assert_eq!(ValueTest::range(RangeOp::Less, &Value::Bool(true), true), None);
        assert_eq!(ValueTest::range(RangeOp::Less, &Value::Float(f64::NAN), true), None);
    }

    #[test]
    fn only_ordering_comparisons_are_ranges() {
        assert_eq!(RangeOp::from_comparison(ComparisonOp::Less), Some(RangeOp::Less));
        assert_eq!(RangeOp::from_comparison(ComparisonOp::GreaterOrEqual), Some(RangeOp::GreaterOrEqual));
        assert_eq!(RangeOp::from_comparison(ComparisonOp::Equal), None);
        assert_eq!(RangeOp::from_comparison(ComparisonOp::NotEqual), None);
    }
}
