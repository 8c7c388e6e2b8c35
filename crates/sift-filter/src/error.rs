//! Errors from parsing the text of a content filter.

use crate::language::FilterLanguage;

/// Longest piece of the filter text quoted in an error message, in
/// characters. Longer pieces are cut so that one bad token in a huge filter
/// does not produce a huge message.
const FRAGMENT_CHARS_MAX: usize = 32;

/// Why the text of a content filter could not be parsed.
///
/// Every variant names the language and the 0-based byte offset into the text
/// where the problem was found, so that a client can point at it. Parsing
/// never panics; every malformed input ends in one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The grammar allows something else at this point.
    #[error("{language}: at byte {position}: expected {expected}, found {found}")]
    Unexpected {
        /// The language being parsed.
        language: FilterLanguage,
        /// Byte offset of what was found.
        position: usize,
        /// What the grammar allows here, in words.
        expected: &'static str,
        /// What is there instead, in words (`end of input`, `` identifier `b` ``).
        found: String,
    },
    /// A numeric literal does not fit the type it denotes.
    #[error("{language}: at byte {position}: number {text} does not fit {range}")]
    NumberOutOfRange {
        /// The language being parsed.
        language: FilterLanguage,
        /// Byte offset of the literal.
        position: usize,
        /// The literal as written (possibly shortened).
        text: String,
        /// The type it does not fit, in words.
        range: &'static str,
    },
    /// The expression nests deeper than the parser allows.
    #[error("{language}: at byte {position}: expression nests more than {limit} levels deep")]
    TooDeep {
        /// The language being parsed.
        language: FilterLanguage,
        /// Byte offset where the limit was crossed.
        position: usize,
        /// The nesting limit.
        limit: usize,
    },
    /// The text is refused by the language's own compiler, such as a
    /// regular expression that does not parse or compiles too big.
    #[error("{language}: {}{problem}", at_byte(*position))]
    Invalid {
        /// The language being parsed.
        language: FilterLanguage,
        /// Byte offset of the problem, when it is at one place; `None` when it
        /// concerns the filter as a whole (a size limit, say).
        position: Option<usize>,
        /// What is wrong, in words.
        problem: String,
    },
}

impl FilterError {
    /// The language whose text was being parsed.
    pub fn language(&self) -> FilterLanguage {
        match self {
            FilterError::Unexpected { language, .. }
            | FilterError::NumberOutOfRange { language, .. }
            | FilterError::TooDeep { language, .. }
            | FilterError::Invalid { language, .. } => *language,
        }
    }

    /// The 0-based byte offset into the text where the problem was found;
    /// 0 when the problem concerns the filter as a whole.
    pub fn position(&self) -> usize {
        match self {
            FilterError::Unexpected { position, .. }
            | FilterError::NumberOutOfRange { position, .. }
            | FilterError::TooDeep { position, .. } => *position,
            FilterError::Invalid { position, .. } => position.unwrap_or(0),
        }
    }
}

/// `at byte N: ` for a problem at a known place, nothing otherwise.
fn at_byte(position: Option<usize>) -> String {
    position.map(|position| format!("at byte {position}: ")).unwrap_or_default()
}

/// A piece of filter text in backquotes for an error message, shortened to
/// [`FRAGMENT_CHARS_MAX`] characters.
pub(crate) fn quote_fragment(fragment: &str) -> String {
    let mut shortened: String = fragment.chars().take(FRAGMENT_CHARS_MAX).collect();
    if shortened.len() < fragment.len() {
        shortened.push('…');
    }
    format!("`{shortened}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_language_position_expected_and_found() {
        let error = FilterError::Unexpected {
            language: FilterLanguage::Sql,
            position: 7,
            expected: "an operand",
            found: "end of input".to_string(),
        };
        assert_eq!(error.to_string(), "sql: at byte 7: expected an operand, found end of input");
        assert_eq!(error.position(), 7);
        assert_eq!(error.language(), FilterLanguage::Sql);
    }

    #[test]
    fn long_fragments_are_shortened() {
        assert_eq!(quote_fragment("abc"), "`abc`");
        let long = "x".repeat(100);
        let quoted = quote_fragment(&long);
        assert!(quoted.chars().count() < 40, "{quoted}");
        assert!(quoted.ends_with("…`"));
    }
}
