//! LIKE patterns: `%` stands for any run of characters (possibly none) and `_`
//! for exactly one character; an optional escape character makes the `%`,
//! `_` or escape character after it literal.

/// Why a LIKE pattern is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LikePatternError {
    /// The pattern ends with the escape character, which escapes nothing.
    #[error("the pattern ends with the escape character")]
    DanglingEscape,
    /// The escape character is followed by something other than `%`, `_` or
    /// itself. SQL calls this an invalid escape sequence; refusing it catches
    /// patterns written for another escape convention.
    #[error("the escape character is followed by {0:?}, not by %, _ or itself")]
    InvalidEscape(char),
}

/// One element of a compiled pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatternPart {
    /// This exact character.
    Literal(char),
    /// `_`: any one character.
    AnyCharacter,
    /// `%`: any run of characters, possibly empty.
    AnyRun,
}

/// A compiled LIKE pattern, with the text it was compiled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikePattern {
    pattern: String,
    escape: Option<char>,
    parts: Vec<PatternPart>,
}

impl LikePattern {
    /// Compiles `pattern`, in which `escape` (if any) makes the next `%`,
    /// `_` or escape character literal.
    pub fn new(pattern: &str, escape: Option<char>) -> Result<LikePattern, LikePatternError> {
        let mut parts = Vec::new();
        let mut characters = pattern.chars();
        while let Some(character) = characters.next() {
            let part = if Some(character) == escape {
                match characters.next() {
                    None => return Err(LikePatternError::DanglingEscape),
                    Some(escaped) if escaped == '%' || escaped == '_' || Some(escaped) == escape => {
                        PatternPart::Literal(escaped)
                    }
                    Some(other) => return Err(LikePatternError::InvalidEscape(other)),
                }
            } else {
                match character {
                    '%' => PatternPart::AnyRun,
                    '_' => PatternPart::AnyCharacter,
                    other => PatternPart::Literal(other),
                }
            };
            parts.push(part);
        }
        Ok(LikePattern { pattern: pattern.to_string(), escape, parts })
    }

    /// The pattern as written (without SQL quote escaping).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The escape character, if the pattern has one.
    pub fn escape(&self) -> Option<char> {
        self.escape
    }

    /// The characters every match starts with: the pattern up to its first
    /// wildcard, escapes resolved. An index can use it as a prefix key.
    pub fn literal_prefix(&self) -> String {
        self.parts
            .iter()
            .map_while(|part| match part {
                PatternPart::Literal(character) => Some(*character),
                _ => None,
            })
            .collect()
    }

    /// True when the whole of `text` matches the pattern (case-sensitive).
    ///
    /// The classic wildcard algorithm: walk pattern and text together and, on
    /// a mismatch, let the most recent `%` swallow one more character. Only
    /// the latest `%` needs revisiting, so matching takes at most
    /// pattern × text steps, never exponential time.
    pub fn matches(&self, text: &str) -> bool {
        let mut part_index = 0;
        let mut text_position = 0;
        // Where to resume after the latest `%`: the part after it, and the
        // text position it has swallowed up to.
        let mut resume: Option<(usize, usize)> = None;
        loop {
            let next_character = text[text_position..].chars().next();
            match (self.parts.get(part_index), next_character) {
                (Some(PatternPart::AnyRun), _) => {
                    part_index += 1;
                    resume = Some((part_index, text_position));
                    continue;
                }
                (Some(part), Some(character)) if part_accepts(*part, character) => {
                    part_index += 1;
                    text_position += character.len_utf8();
                    continue;
                }
                (None, None) => return true,
                _ => {}
            }
            let Some((resume_part, swallowed_to)) = resume else {
                return false;
            };
            let Some(swallowed) = text[swallowed_to..].chars().next() else {
                return false;
            };
            text_position = swallowed_to + swallowed.len_utf8();
            part_index = resume_part;
            resume = Some((resume_part, text_position));
        }
    }
}

/// True when a non-`%` part accepts the character.
fn part_accepts(part: PatternPart, character: char) -> bool {
    match part {
        PatternPart::Literal(expected) => expected == character,
        PatternPart::AnyCharacter | PatternPart::AnyRun => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn like(pattern: &str, text: &str) -> bool {
        LikePattern::new(pattern, None).expect("pattern compiles").matches(text)
    }

    #[test]
    fn percent_matches_any_run() {
        assert!(like("12%3", "123"));
        assert!(like("12%3", "12993"));
        assert!(!like("12%3", "1234"));
        assert!(like("%", ""));
        assert!(like("%%", "abc"));
        assert!(like("a%b%c", "axxbyyc"));
        assert!(!like("a%b%c", "axxbyy"));
    }

    #[test]
    fn underscore_matches_exactly_one_character() {
        assert!(like("l_se", "lose"));
        assert!(!like("l_se", "loose"));
        assert!(!like("_", ""));
        assert!(like("_", "é"), "one character, two bytes");
        assert!(like("__", "日本"));
    }

    #[test]
    fn matching_is_case_sensitive_and_whole_string() {
        assert!(!like("abc", "ABC"));
        assert!(!like("ab", "abc"));
        assert!(!like("bc", "abc"));
        assert!(like("", ""));
        assert!(!like("", "a"));
    }

    #[test]
    fn escape_makes_wildcards_literal() {
        let underscored = LikePattern::new("\\_%", Some('\\')).expect("compiles");
        assert!(underscored.matches("_foo"));
        assert!(!underscored.matches("bar"));
        let percent = LikePattern::new("100!%", Some('!')).expect("compiles");
        assert!(percent.matches("100%"));
        assert!(!percent.matches("1000"));
        let itself = LikePattern::new("a!!b", Some('!')).expect("compiles");
        assert!(itself.matches("a!b"));
        assert_eq!(percent.literal_prefix(), "100%");
        assert_eq!(underscored.literal_prefix(), "_");
    }

    #[test]
    fn bad_escapes_are_errors() {
        assert_eq!(LikePattern::new("ab\\", Some('\\')), Err(LikePatternError::DanglingEscape));
        assert_eq!(LikePattern::new("\\n", Some('\\')), Err(LikePatternError::InvalidEscape('n')));
    }

    /// A slow but obviously correct matcher to check the fast one against.
    fn reference_match(parts: &[PatternPart], text: &[char]) -> bool {
        match parts.split_first() {
            None => text.is_empty(),
            Some((PatternPart::AnyRun, rest)) => (0..=text.len()).any(|skip| reference_match(rest, &text[skip..])),
            Some((part, rest)) => text
                .split_first()
                .is_some_and(|(first, others)| part_accepts(*part, *first) && reference_match(rest, others)),
        }
    }

    proptest! {
        #[test]
        fn agrees_with_a_backtracking_reference(pattern in "[ab%_]{0,8}", text in "[abé]{0,10}") {
            let compiled = LikePattern::new(&pattern, None).expect("no escape, always compiles");
            let characters: Vec<char> = text.chars().collect();
            prop_assert_eq!(compiled.matches(&text), reference_match(&compiled.parts, &characters));
        }
    }
}
