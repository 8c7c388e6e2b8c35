//! Topic names and topic filters.
//!
//! A topic is a dot-separated list of non-empty tokens (`jbi.basic.v1`). A
//! filter is the same with two wildcards: `*` stands for exactly one token and
//! `>`, allowed only as the last token, for one or more trailing tokens. These
//! are the NATS subject rules, which users of NATS, MQTT (`+`, `#`) and
//! ActiveMQ (`*`, `>`) all recognise. A `*` or `>` inside a longer token
//! (`b*`) is an ordinary character, in names and in filters alike.

/// Longest topic or topic filter accepted, in bytes. Protects the trie and the
/// match cache from pathological keys; the broker may set a lower limit.
pub const TOPIC_BYTES_MAX: usize = 1024;

/// Why a topic or a topic filter is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// Topics must have at least one token.
    #[error("topic is empty")]
    Empty,
    /// A token between dots is empty (`a..b`, `.a`, `a.`).
    #[error("topic {topic:?} has an empty token at byte {position}")]
    EmptyToken {
        /// The offending topic.
        topic: String,
        /// Byte offset of the empty token.
        position: usize,
    },
    /// The topic is longer than [`TOPIC_BYTES_MAX`].
    #[error("topic is {length} bytes, longer than the limit of {limit}")]
    TooLong {
        /// Actual length in bytes.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// Whitespace and control characters are not allowed in topics.
    #[error("topic {topic:?} contains whitespace or a control character at byte {position}")]
    BadCharacter {
        /// The offending topic.
        topic: String,
        /// Byte offset of the character.
        position: usize,
    },
    /// Wildcards belong in filters, not in the topic a message is published on.
    #[error("topic {topic:?} contains the wildcard {wildcard:?}; wildcards are only for subscriptions")]
    WildcardInName {
        /// The offending topic.
        topic: String,
        /// The wildcard found.
        wildcard: &'static str,
    },
    /// `>` must be the last token of a filter.
    #[error("filter {filter:?} misuses a wildcard at byte {position}: {reason}")]
    BadWildcard {
        /// The offending filter.
        filter: String,
        /// Byte offset of the token.
        position: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Checks the rules shared by names and filters in one pass over the bytes:
/// length, no whitespace or control characters, no empty token. Returns
/// whether some token is exactly `*` or `>` (a wildcard).
fn check_tokens(text: &str) -> Result<bool, TopicError> {
    if text.is_empty() {
        return Err(TopicError::Empty);
    }
    if text.len() > TOPIC_BYTES_MAX {
        return Err(TopicError::TooLong { length: text.len(), limit: TOPIC_BYTES_MAX });
    }
    let bytes = text.as_bytes();
    let mut token_length = 0usize;
    let mut has_wildcard = false;
    for (position, &byte) in bytes.iter().enumerate() {
        if byte == b'.' {
            if token_length == 0 {
                return Err(TopicError::EmptyToken { topic: text.to_string(), position });
            }
            has_wildcard |= token_length == 1 && matches!(bytes[position - 1], b'*' | b'>');
            token_length = 0;
        } else if byte <= b' ' || byte == 0x7f {
            return Err(TopicError::BadCharacter { topic: text.to_string(), position });
        } else {
            token_length += 1;
        }
    }
    if token_length == 0 {
        return Err(TopicError::EmptyToken { topic: text.to_string(), position: bytes.len() });
    }
    has_wildcard |= token_length == 1 && matches!(bytes[bytes.len() - 1], b'*' | b'>');
    // Non-ASCII text may hold Unicode whitespace or controls; check it the slow way.
    if !text.is_ascii() {
        if let Some(position) = text.find(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(TopicError::BadCharacter { topic: text.to_string(), position });
        }
    }
    Ok(has_wildcard)
}

/// A validated topic name, as a message is published on.
///
/// Reference counted: a message's topic is cloned into every delivery and
/// decoders reuse the topic of the previous message when it repeats, so a
/// clone must not allocate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicName(std::sync::Arc<str>);

impl TopicName {
    /// Validates `text` as a topic name: non-empty tokens, no wildcards.
    pub fn new(text: impl AsRef<str>) -> Result<TopicName, TopicError> {
        let text = text.as_ref();
        if check_tokens(text)? {
            let wildcard = if text.split('.').any(|token| token == "*") { "*" } else { ">" };
            return Err(TopicError::WildcardInName { topic: text.to_string(), wildcard });
        }
        Ok(TopicName(std::sync::Arc::from(text)))
    }

    /// The topic as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The dot-separated tokens.
    pub fn tokens(&self) -> std::str::Split<'_, char> {
        self.0.split('.')
    }
}

impl std::fmt::Display for TopicName {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// One token of a topic filter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FilterToken {
    /// Matches exactly this token.
    Literal(String),
    /// `*`: matches any one token.
    AnyOne,
    /// `>`: matches one or more trailing tokens; always last.
    Rest,
}

/// A validated topic filter (`a.*.c`, `a.>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicFilter {
    text: String,
    tokens: Vec<FilterToken>,
}

impl TopicFilter {
    /// Validates and tokenises a filter.
    pub fn new(text: impl Into<String>) -> Result<TopicFilter, TopicError> {
        let text = text.into();
        check_tokens(&text)?;
        let token_count = text.split('.').count();
        let mut tokens = Vec::with_capacity(token_count);
        let mut position = 0;
        for (index, token) in text.split('.').enumerate() {
            let parsed = match token {
                "*" => FilterToken::AnyOne,
                ">" if index + 1 == token_count => FilterToken::Rest,
                ">" => {
                    return Err(TopicError::BadWildcard {
                        filter: text.clone(),
                        position,
                        reason: "`>` must be the last token",
                    })
                }
                literal => FilterToken::Literal(literal.to_string()),
            };
            tokens.push(parsed);
            position += token.len() + 1;
        }
        Ok(TopicFilter { text, tokens })
    }

    /// The filter as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed tokens.
    pub fn tokens(&self) -> &[FilterToken] {
        &self.tokens
    }

    /// True when the filter has no wildcard, so it matches one topic only.
    pub fn is_literal(&self) -> bool {
        self.tokens.iter().all(|token| matches!(token, FilterToken::Literal(_)))
    }

    /// Evaluates the filter against one topic directly, without a trie. The
    /// trie must agree with this function; property tests check that it does.
    pub fn matches(&self, topic: &TopicName) -> bool {
        let mut names = topic.tokens();
        for (index, token) in self.tokens.iter().enumerate() {
            match token {
                FilterToken::Rest => {
                    debug_assert_eq!(index + 1, self.tokens.len(), "`>` is always last");
                    return names.next().is_some();
                }
                FilterToken::AnyOne => {
                    if names.next().is_none() {
                        return false;
                    }
                }
                FilterToken::Literal(literal) => {
                    if names.next() != Some(literal.as_str()) {
                        return false;
                    }
                }
            }
        }
        names.next().is_none()
    }

    /// True when every topic this filter's `other` matches is also matched by
    /// `self`, so a broker that already advertises `self` to its neighbours
    /// need not advertise `other`. Exact: when it answers false, some topic
    /// matches `other` and not `self`.
    pub fn covers(&self, other: &TopicFilter) -> bool {
        tokens_cover(&self.tokens, &other.tokens)
    }
}

/// Whether the token sequence `wide` matches every topic `narrow` matches.
///
/// Walks both sequences in step. Each token of `narrow` other than `>` stands
/// for exactly one topic token, so position by position: a literal in `wide`
/// needs the same literal in `narrow` (against `*` a different token is a
/// witness), `*` in `wide` takes any single-token position, and `>` in `wide`
/// takes whatever non-empty rest `narrow` has. A `>` in `narrow` stands for
/// unboundedly many tokens, so only a `>` in `wide` covers it.
fn tokens_cover(wide: &[FilterToken], narrow: &[FilterToken]) -> bool {
    let mut position = 0;
    loop {
        match (wide.get(position), narrow.get(position)) {
            (None, None) => return true,
            (Some(FilterToken::Rest), rest) => return rest.is_some(),
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(_), Some(FilterToken::Rest)) => return false,
            (Some(FilterToken::AnyOne), Some(_)) => {}
            (Some(FilterToken::Literal(wide_token)), Some(FilterToken::Literal(narrow_token))) => {
                if wide_token != narrow_token {
                    return false;
                }
            }
            (Some(FilterToken::Literal(_)), Some(FilterToken::AnyOne)) => return false,
        }
        position += 1;
    }
}

impl std::fmt::Display for TopicFilter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> TopicName {
        TopicName::new(text).expect("valid topic")
    }

    fn filter(text: &str) -> TopicFilter {
        TopicFilter::new(text).expect("valid filter")
    }

    #[test]
    fn names_reject_empty_tokens_wildcards_and_spaces() {
        assert_eq!(TopicName::new(""), Err(TopicError::Empty));
        assert!(matches!(TopicName::new("a..b"), Err(TopicError::EmptyToken { position: 2, .. })));
        assert!(matches!(TopicName::new(".a"), Err(TopicError::EmptyToken { position: 0, .. })));
        assert!(matches!(TopicName::new("a."), Err(TopicError::EmptyToken { .. })));
        assert!(matches!(TopicName::new("a.*"), Err(TopicError::WildcardInName { .. })));
        assert!(matches!(TopicName::new("a b"), Err(TopicError::BadCharacter { position: 1, .. })));
        let long = "a".repeat(TOPIC_BYTES_MAX + 1);
        assert!(matches!(TopicName::new(long), Err(TopicError::TooLong { .. })));
    }

    #[test]
    fn filters_place_wildcards_correctly() {
        assert!(TopicFilter::new("a.*.c").is_ok());
        assert!(TopicFilter::new(">").is_ok());
        assert!(matches!(TopicFilter::new("a.>.c"), Err(TopicError::BadWildcard { position: 2, .. })));
        // As in names, `*` or `>` inside a longer token is an ordinary character.
        assert!(TopicFilter::new("a.b*").expect("valid").matches(&name("a.b*")));
        assert!(!TopicFilter::new("a.b*").expect("valid").matches(&name("a.bc")));
    }

    #[test]
    fn wildcard_semantics() {
        assert!(filter("a.b").matches(&name("a.b")));
        assert!(!filter("a.b").matches(&name("a.b.c")));
        assert!(filter("a.*").matches(&name("a.b")));
        assert!(!filter("a.*").matches(&name("a")));
        assert!(!filter("a.*").matches(&name("a.b.c")));
        assert!(filter("a.>").matches(&name("a.b")));
        assert!(filter("a.>").matches(&name("a.b.c.d")));
        assert!(!filter("a.>").matches(&name("a")));
        assert!(filter(">").matches(&name("x")));
        assert!(filter("*.*.c").matches(&name("a.b.c")));
        assert!(!filter("a.*").is_literal() && filter("a.b").is_literal());
    }

    #[test]
    fn covering_follows_the_wildcards() {
        let cases = [
            ("a.b", "a.b", true),
            ("a.*", "a.b", true),
            ("a.b", "a.*", false),
            ("a.>", "a.b.c", true),
            ("a.>", "a.*", true),
            ("a.>", "a.*.>", true),
            ("a.*.>", "a.>", false),
            ("a.>", "a", false),
            (">", "a", true),
            (">", "*.>", true),
            ("*", ">", false),
            ("*.>", ">", false),
            ("*.*", "a.>", false),
            ("a.*", "a.b.c", false),
            ("a.*.c", "a.b.c", true),
            ("a.*.c", "a.b.d", false),
            // `b*` is a literal token, not a wildcard.
            ("a.b*", "a.bc", false),
            ("a.*", "a.b*", true),
            ("a.b*", "a.*", false),
            ("a.>", "a.b>", true),
        ];
        for (wide, narrow, expected) in cases {
            assert_eq!(filter(wide).covers(&filter(narrow)), expected, "{wide} covers {narrow}");
        }
    }
}
