//! Sift content filters: the languages a subscription uses to choose
//! messages by their properties, beyond the topic.
//!
//! - [`tags`]: a comma-separated conjunction of `name OP value` predicates,
//!   for simple subscriptions (`sym="IBM",price>100`).
//! - [`sql`]: Jakarta Messaging (JMS 2.0) message selectors, with SQL
//!   three-valued logic (`sym IN ('IBM','HP') AND price BETWEEN 100 AND 200`).
//! - [`regex_filter`]: a regular expression over the topic (`^orders\.(eu|us)\.`).
//! - [`xpath`]: XPath 1.0 over the XML metadata document
//!   (`/metadata/ATO[nickname='KTJR']`), matched many at a time by [`XPathSet`].
//!
//! [`index::ContentIndex`] finds, among many subscriptions, those whose
//! filter passes a message, at a cost that grows with what matches.
//!
//! Parsing reports malformed filters with the byte position and what was
//! expected ([`FilterError`]); matching never fails. The crate does no I/O,
//! so the broker, the client and the tests share it unchanged.

mod compare;
pub mod covering;
mod error;
pub mod index;
mod language;
pub mod regex_filter;
pub mod sql;
pub mod tags;
pub mod xpath;

use sift_core::Message;

pub use compare::ComparisonOp;
pub use covering::subscription_covers;
pub use error::FilterError;
pub use index::{ContentIndex, IndexScratch};
pub use language::{FilterLanguage, UnknownLanguage};
pub use regex_filter::RegexFilter;
pub use sql::{SqlFilter, Truth};
pub use tags::{TagFilter, TagPredicate};
pub use xpath::{XPathFilter, XPathScratch, XPathSet, XmlDocument, XmlError};

/// A parsed content filter in one of the supported languages.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentFilter {
    /// A tags filter.
    Tags(TagFilter),
    /// A SQL (JMS) selector.
    Sql(SqlFilter),
    /// A regular expression over the topic.
    Regex(RegexFilter),
    /// An XPath 1.0 expression over the XML metadata.
    Xpath(XPathFilter),
    /// Both filters, in any languages: a subscription's own filter and the
    /// restriction its user's grant carries (the broker's permissions).
    /// The index files it as the conjunctions of both, so it costs what
    /// one filter with the predicates of both costs. It is not written as
    /// text: its [`Display`](std::fmt::Display) and
    /// [`language`](ContentFilter::language) are the first filter's, the
    /// one the subscriber asked for, which passes everything it passes
    /// (what a broker link needs to advertise).
    And(Box<(ContentFilter, ContentFilter)>),
}

impl ContentFilter {
    /// Parses `text` as a filter in `language`.
    pub fn parse(language: FilterLanguage, text: &str) -> Result<ContentFilter, FilterError> {
        match language {
            FilterLanguage::Tags => TagFilter::parse(text).map(ContentFilter::Tags),
            FilterLanguage::Sql => SqlFilter::parse(text).map(ContentFilter::Sql),
            FilterLanguage::Regex => RegexFilter::parse(text).map(ContentFilter::Regex),
            FilterLanguage::Xpath => XPathFilter::parse(text).map(ContentFilter::Xpath),
        }
    }

    /// Both `first` and `second`.
    pub fn and(first: ContentFilter, second: ContentFilter) -> ContentFilter {
        ContentFilter::And(Box::new((first, second)))
    }

    /// The language the filter is written in (of an `And`, the first's).
    pub fn language(&self) -> FilterLanguage {
        match self {
            ContentFilter::And(both) => both.0.language(),
            ContentFilter::Tags(_) => FilterLanguage::Tags,
            ContentFilter::Sql(_) => FilterLanguage::Sql,
            ContentFilter::Regex(_) => FilterLanguage::Regex,
            ContentFilter::Xpath(_) => FilterLanguage::Xpath,
        }
    }

    /// True when the message passes the filter.
    pub fn matches(&self, message: &Message) -> bool {
        match self {
            ContentFilter::And(both) => both.0.matches(message) && both.1.matches(message),
            ContentFilter::Tags(filter) => filter.matches(message),
            ContentFilter::Sql(filter) => filter.matches(message),
            ContentFilter::Regex(filter) => filter.matches(message),
            ContentFilter::Xpath(filter) => filter.matches(message),
        }
    }
}

impl std::fmt::Display for ContentFilter {
    /// The filter as text in its own language; it parses back to an
    /// equivalent filter.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContentFilter::And(both) => write!(formatter, "{}", both.0),
            ContentFilter::Tags(filter) => write!(formatter, "{filter}"),
            ContentFilter::Sql(filter) => write!(formatter, "{filter}"),
            ContentFilter::Regex(filter) => write!(formatter, "{filter}"),
            ContentFilter::Xpath(filter) => write!(formatter, "{filter}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::{TopicName, Value};

    fn message() -> Message {
        let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
        message.properties =
            vec![("sym".to_string(), Value::Str("IBM".into())), ("price".to_string(), Value::Int(120))];
        message
    }

    #[test]
    fn parses_and_matches_in_each_language() {
        let cases = [
            (FilterLanguage::Tags, r#"sym="IBM",price>100"#, true),
            (FilterLanguage::Tags, "price<100", false),
            (FilterLanguage::Sql, "sym = 'IBM' AND price BETWEEN 100 AND 200", true),
            (FilterLanguage::Sql, "sym <> 'IBM'", false),
            (FilterLanguage::Regex, "^t$", true),
            (FilterLanguage::Regex, "^u", false),
        ];
        for (language, text, expected) in cases {
            let filter = ContentFilter::parse(language, text).expect("filter parses");
            assert_eq!(filter.language(), language);
            assert_eq!(filter.matches(&message()), expected, "{text}");
            let reparsed = ContentFilter::parse(language, &filter.to_string()).expect("display parses");
            assert_eq!(reparsed.matches(&message()), expected, "{filter}");
        }
    }

    #[test]
    fn errors_name_the_language() {
        let tags = ContentFilter::parse(FilterLanguage::Tags, "a=").expect_err("malformed");
        assert_eq!(tags.language(), FilterLanguage::Tags);
        let sql = ContentFilter::parse(FilterLanguage::Sql, "a = ").expect_err("malformed");
        assert_eq!(sql.to_string(), "sql: at byte 4: expected an operand, found end of input");
    }
}
