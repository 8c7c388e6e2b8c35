//! The `regex` filter language: a regular expression over the message topic.
//!
//! ```text
//! ^orders\.(eu|us)\.[0-9]+$
//! ```
//!
//! The syntax is that of the `regex` crate (Perl-like, Unicode-aware, no
//! look-around or back-references, so matching takes linear time). A message
//! matches when the expression matches somewhere in its topic; anchor it with
//! `^` and `$` to match the whole topic. Compiled expressions are limited to
//! [`REGEX_SIZE_LIMIT`] bytes, so that a subscriber cannot make the broker
//! build a huge automaton.

use regex::{Regex, RegexBuilder};
use sift_core::Message;

use crate::error::FilterError;
use crate::language::FilterLanguage;

/// Largest compiled size of one filter's regular expression, in bytes (the
/// `regex` crate's approximate measure). Generous for expressions over topic
/// names, and small enough that a hostile one cannot eat the broker's memory.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// A parsed regex filter: a compiled regular expression over the topic.
#[derive(Debug, Clone)]
pub struct RegexFilter {
    regex: Regex,
}

impl RegexFilter {
    /// Compiles `text`, or says where and why it is not a valid expression.
    pub fn parse(text: &str) -> Result<RegexFilter, FilterError> {
        RegexBuilder::new(text)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map(|regex| RegexFilter { regex })
            .map_err(|error| compile_error(text, &error))
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        self.regex.as_str()
    }

    /// The compiled expression.
    pub fn regex(&self) -> &Regex {
        &self.regex
    }

    /// True when the expression matches the message's topic.
    pub fn matches(&self, message: &Message) -> bool {
        self.regex.is_match(message.topic.as_str())
    }
}

impl PartialEq for RegexFilter {
    /// Two filters are equal when they are written the same way; compiled
    /// automata cannot be compared.
    fn eq(&self, other: &RegexFilter) -> bool {
        self.as_str() == other.as_str()
    }
}

impl std::fmt::Display for RegexFilter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// The filter error for an expression the `regex` crate refused.
///
/// The `regex` crate reports syntax errors as preformatted text only, so the
/// expression is parsed again with `regex-syntax` (the same parser, with the
/// same defaults) to learn the position and the bare reason.
fn compile_error(text: &str, error: &regex::Error) -> FilterError {
    let (position, problem) = match error {
        regex::Error::CompiledTooBig(limit) => {
            (None, format!("the expression compiles to more than the limit of {limit} bytes"))
        }
        other => match regex_syntax::Parser::new().parse(text) {
            Err(regex_syntax::Error::Parse(parse)) => (Some(parse.span().start.offset), parse.kind().to_string()),
            Err(regex_syntax::Error::Translate(translate)) => {
                (Some(translate.span().start.offset), translate.kind().to_string())
            }
            // Not a syntax error after all (or a kind of error this version
            // does not know): report the `regex` crate's own words.
            _ => (None, other.to_string()),
        },
    };
    FilterError::Invalid { language: FilterLanguage::Regex, position, problem }
}

#[cfg(test)]
mod tests {
    use sift_core::TopicName;

    use super::*;

    fn on_topic(topic: &str) -> Message {
        Message::new(TopicName::new(topic).expect("valid topic"), "")
    }

    #[test]
    fn matches_anywhere_in_the_topic_unless_anchored() {
        let loose = RegexFilter::parse(r"eu\.[0-9]+").expect("compiles");
        assert!(loose.matches(&on_topic("orders.eu.42")));
        assert!(loose.matches(&on_topic("orders.eu.42.extra")));
        assert!(!loose.matches(&on_topic("orders.us.42")));
        let anchored = RegexFilter::parse(r"^orders\.(eu|us)\.[0-9]+$").expect("compiles");
        assert!(anchored.matches(&on_topic("orders.us.7")));
        assert!(!anchored.matches(&on_topic("orders.us.7.extra")));
        assert!(!anchored.matches(&on_topic("x.orders.us.7")));
    }

    #[test]
    fn syntax_errors_name_the_position_and_the_reason() {
        let cases = [("a(b", 1, "unclosed group"), ("ab)", 2, "unopened group"), ("x{2,1}", 1, "invalid")];
        for (text, position, reason) in cases {
            let error = RegexFilter::parse(text).expect_err("malformed");
            assert_eq!(error.language(), FilterLanguage::Regex);
            assert_eq!(error.position(), position, "{text}: {error}");
            let message = error.to_string();
            assert!(message.starts_with(&format!("regex: at byte {position}: ")), "{message}");
            assert!(message.contains(reason), "{message}");
        }
    }

    #[test]
    fn oversized_expressions_are_refused_as_a_whole() {
        // Each `\w` is Unicode-aware and compiles to a large class.
        let huge = r"\w".repeat(200);
        let error = RegexFilter::parse(&huge).expect_err("too big");
        assert!(matches!(error, FilterError::Invalid { position: None, .. }), "{error:?}");
        assert!(error.to_string().starts_with("regex: the expression compiles to more than"), "{error}");
    }

    #[test]
    fn display_and_equality_use_the_text() {
        let filter = RegexFilter::parse("a+b").expect("compiles");
        assert_eq!(filter.to_string(), "a+b");
        assert_eq!(RegexFilter::parse(&filter.to_string()), Ok(filter.clone()));
        assert_ne!(RegexFilter::parse("a+c").expect("compiles"), filter);
    }
}
