//! Splits the text of a SQL selector into tokens.

use crate::compare::ComparisonOp;
use crate::error::{quote_fragment, FilterError};
use crate::language::FilterLanguage;

/// The reserved words of the selector grammar, matched case-insensitively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    And,
    Or,
    Not,
    Between,
    In,
    Like,
    Escape,
    Is,
    Null,
    True,
    False,
}

impl Keyword {
    const ALL: [(&'static str, Keyword); 11] = [
        ("AND", Keyword::And),
        ("OR", Keyword::Or),
        ("NOT", Keyword::Not),
        ("BETWEEN", Keyword::Between),
        ("IN", Keyword::In),
        ("LIKE", Keyword::Like),
        ("ESCAPE", Keyword::Escape),
        ("IS", Keyword::Is),
        ("NULL", Keyword::Null),
        ("TRUE", Keyword::True),
        ("FALSE", Keyword::False),
    ];

    /// The keyword a word spells, in any case.
    fn from_word(word: &str) -> Option<Keyword> {
        Keyword::ALL.into_iter().find(|(spelling, _)| spelling.eq_ignore_ascii_case(word)).map(|(_, keyword)| keyword)
    }
}

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind {
    /// A property or header-field name.
    Identifier(String),
    Keyword(Keyword),
    /// An exact numeric literal without its sign; it may exceed `i64::MAX`
    /// by one when it follows a minus sign, which the parser checks.
    Integer(u64),
    /// An approximate numeric literal without its sign; always finite.
    Float(f64),
    /// A string literal with `''` already turned into `'`.
    String(String),
    LeftParen,
    RightParen,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Compare(ComparisonOp),
    End,
}

/// A token and where it lies in the text, as byte offsets.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub(crate) kind: TokenKind,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Token {
    /// The token in words, for error messages.
    pub(crate) fn describe(&self, text: &str) -> String {
        let fragment = quote_fragment(&text[self.start..self.end]);
        match self.kind {
            TokenKind::End => "end of input".to_string(),
            TokenKind::Identifier(_) => format!("identifier {fragment}"),
            TokenKind::Keyword(_) => format!("keyword {fragment}"),
            TokenKind::Integer(_) | TokenKind::Float(_) => format!("number {fragment}"),
            TokenKind::String(_) => format!("string {fragment}"),
            _ => fragment,
        }
    }
}

/// Java identifier rules: a letter, `_` or `$` first.
pub(crate) fn is_identifier_start(character: char) -> bool {
    character.is_alphabetic() || character == '_' || character == '$'
}

/// Java identifier rules: then letters, digits, `_` or `$`.
pub(crate) fn is_identifier_part(character: char) -> bool {
    character.is_alphanumeric() || character == '_' || character == '$'
}

/// True when `word` is a keyword in some case, and so cannot name a property.
#[cfg(test)]
pub(crate) fn is_keyword(word: &str) -> bool {
    Keyword::from_word(word).is_some()
}

/// The tokens of `text`, ending with [`TokenKind::End`].
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token>, FilterError> {
    let mut lexer = Lexer { text, position: 0 };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let is_end = token.kind == TokenKind::End;
        tokens.push(token);
        if is_end {
            return Ok(tokens);
        }
    }
}

struct Lexer<'t> {
    text: &'t str,
    position: usize,
}

impl Lexer<'_> {
    fn peek_at(&self, position: usize) -> Option<char> {
        self.text.get(position..)?.chars().next()
    }

    fn unexpected_at(&self, position: usize, expected: &'static str) -> FilterError {
        let found = match self.peek_at(position) {
            None => "end of input".to_string(),
            Some(character) => format!("character {}", quote_fragment(character.encode_utf8(&mut [0; 4]))),
        };
        FilterError::Unexpected { language: FilterLanguage::Sql, position, expected, found }
    }

    fn next_token(&mut self) -> Result<Token, FilterError> {
        let rest = &self.text[self.position..];
        self.position += rest.len() - rest.trim_start().len();
        let start = self.position;
        let Some(character) = self.peek_at(start) else {
            return Ok(Token { kind: TokenKind::End, start, end: start });
        };
        let starts_number = character.is_ascii_digit()
            || (character == '.' && self.peek_at(start + 1).is_some_and(|next| next.is_ascii_digit()));
        let kind = if starts_number {
            self.number()?
        } else if is_identifier_start(character) {
            self.word()
        } else if character == '\'' {
            self.string()?
        } else {
            self.symbol(character)?
        };
        Ok(Token { kind, start, end: self.position })
    }

    /// The end of the run of ASCII digits that starts at `position`.
    fn skip_digits(&self, position: usize) -> usize {
        let rest = &self.text[position..];
        position + rest.find(|character: char| !character.is_ascii_digit()).unwrap_or(rest.len())
    }

    /// A numeric literal: digits with an optional fraction and exponent, then
    /// an optional Java type suffix (`L` for integers, `F` or `D` for floats).
    fn number(&mut self) -> Result<TokenKind, FilterError> {
        let text = self.text;
        let start = self.position;
        let mut end = self.skip_digits(start);
        let mut is_float = false;
        if self.peek_at(end) == Some('.') {
            is_float = true;
            end = self.skip_digits(end + 1);
        }
        if matches!(self.peek_at(end), Some('e' | 'E')) {
            is_float = true;
            let mut digits_start = end + 1;
            if matches!(self.peek_at(digits_start), Some('+' | '-')) {
                digits_start += 1;
            }
            end = self.skip_digits(digits_start);
            if end == digits_start {
                return Err(self.unexpected_at(end, "the digits of an exponent"));
            }
        }
        let literal = &text[start..end];
        match self.peek_at(end) {
            Some('l' | 'L') if !is_float => end += 1,
            Some('f' | 'F' | 'd' | 'D') => {
                is_float = true;
                end += 1;
            }
            _ => {}
        }
        // `12abc` or `1.2.3` is one malformed token, not a number followed
        // by something else.
        if self.peek_at(end).is_some_and(|next| is_identifier_part(next) || next == '.') {
            return Err(self.unexpected_at(end, "an operator, a parenthesis or white space after a number"));
        }
        self.position = end;
        let out_of_range = |range| FilterError::NumberOutOfRange {
            language: FilterLanguage::Sql,
            position: start,
            text: quote_fragment(literal),
            range,
        };
        if is_float {
            match literal.parse::<f64>() {
                Ok(float) if float.is_finite() => Ok(TokenKind::Float(float)),
                _ => Err(out_of_range("a 64-bit float")),
            }
        } else {
            literal.parse::<u64>().map(TokenKind::Integer).map_err(|_| out_of_range("a 64-bit integer"))
        }
    }

    fn word(&mut self) -> TokenKind {
        let start = self.position;
        let rest = &self.text[start..];
        let length = rest.find(|character| !is_identifier_part(character)).unwrap_or(rest.len());
        self.position += length;
        let word = &rest[..length];
        match Keyword::from_word(word) {
            Some(keyword) => TokenKind::Keyword(keyword),
            None => TokenKind::Identifier(word.to_string()),
        }
    }

    /// A string literal: single quotes, with `''` standing for one quote.
    fn string(&mut self) -> Result<TokenKind, FilterError> {
        let start = self.position;
        let mut content = String::new();
        let mut position = start + 1;
        loop {
            let Some(offset) = self.text[position..].find('\'') else {
                return Err(FilterError::Unexpected {
                    language: FilterLanguage::Sql,
                    position: start,
                    expected: "a closing `'` for the string that starts here",
                    found: "end of input".to_string(),
                });
            };
            content.push_str(&self.text[position..position + offset]);
            position += offset + 1;
            if self.peek_at(position) != Some('\'') {
                self.position = position;
                return Ok(TokenKind::String(content));
            }
            content.push('\'');
            position += 1;
        }
    }

    fn symbol(&mut self, character: char) -> Result<TokenKind, FilterError> {
        let next = self.peek_at(self.position + 1);
        let (kind, length) =
            match (character, next) {
                ('(', _) => (TokenKind::LeftParen, 1),
                (')', _) => (TokenKind::RightParen, 1),
                (',', _) => (TokenKind::Comma, 1),
                ('+', _) => (TokenKind::Plus, 1),
                ('-', _) => (TokenKind::Minus, 1),
                ('*', _) => (TokenKind::Star, 1),
                ('/', _) => (TokenKind::Slash, 1),
                ('=', _) => (TokenKind::Compare(ComparisonOp::Equal), 1),
                ('<', Some('>')) => (TokenKind::Compare(ComparisonOp::NotEqual), 2),
                ('<', Some('=')) => (TokenKind::Compare(ComparisonOp::LessOrEqual), 2),
                ('<', _) => (TokenKind::Compare(ComparisonOp::Less), 1),
                ('>', Some('=')) => (TokenKind::Compare(ComparisonOp::GreaterOrEqual), 2),
                ('>', _) => (TokenKind::Compare(ComparisonOp::Greater), 1),
                // A user who writes `sym = "IBM"` means a string: say how SQL
                // writes one rather than only that `"` is unexpected.
                ('"', _) => {
                    return Err(self
                        .unexpected_at(self.position, "an operand (strings take single quotes: 'IBM', not \"IBM\")"))
                }
                _ => {
                    return Err(self
                        .unexpected_at(self.position, "an operand, an operator or a parenthesis (not-equal is `<>`)"))
                }
            };
        self.position += length;
        Ok(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        tokenize(text).expect("text tokenizes").into_iter().map(|token| token.kind).collect()
    }

    fn error(text: &str) -> FilterError {
        tokenize(text).expect_err("text is malformed")
    }

    #[test]
    fn keywords_are_case_insensitive_and_identifiers_are_not() {
        assert_eq!(
            kinds("a between Between BETWEEN $x _y2 héllo"),
            vec![
                TokenKind::Identifier("a".to_string()),
                TokenKind::Keyword(Keyword::Between),
                TokenKind::Keyword(Keyword::Between),
                TokenKind::Keyword(Keyword::Between),
                TokenKind::Identifier("$x".to_string()),
                TokenKind::Identifier("_y2".to_string()),
                TokenKind::Identifier("héllo".to_string()),
                TokenKind::End,
            ]
        );
        assert!(is_keyword("null"));
        assert!(!is_keyword("nullable"));
    }

    #[test]
    fn numbers_follow_java_literal_forms() {
        let cases = [
            ("57", TokenKind::Integer(57)),
            ("57L", TokenKind::Integer(57)),
            ("57l", TokenKind::Integer(57)),
            ("7E3", TokenKind::Float(7000.0)),
            ("57.9E2", TokenKind::Float(5790.0)),
            ("1.5e-1", TokenKind::Float(0.15)),
            ("2.5F", TokenKind::Float(2.5)),
            ("2D", TokenKind::Float(2.0)),
            (".5", TokenKind::Float(0.5)),
            ("7.", TokenKind::Float(7.0)),
            ("9223372036854775808", TokenKind::Integer(1 << 63)),
        ];
        for (text, expected) in cases {
            assert_eq!(kinds(text), vec![expected, TokenKind::End], "{text}");
        }
    }

    #[test]
    fn malformed_numbers_are_errors_at_their_position() {
        let cases = [
            ("a = 12abc", 6),
            ("a = 1.2.3", 7),
            ("a = 1e", 6),
            ("a = 1e+", 7),
            ("a = 2.5L", 7),
            ("a = 99999999999999999999", 4),
            ("a = 1e999", 4),
        ];
        for (text, position) in cases {
            assert_eq!(error(text).position(), position, "{text}");
        }
        assert!(error("1e999").to_string().contains("does not fit a 64-bit float"));
    }

    #[test]
    fn strings_double_their_quotes() {
        assert_eq!(
            kinds("'it''s' '' ''''"),
            vec![
                TokenKind::String("it's".to_string()),
                TokenKind::String(String::new()),
                TokenKind::String("'".to_string()),
                TokenKind::End,
            ]
        );
        let unterminated = error("a = 'unterminated");
        assert_eq!(unterminated.position(), 4);
        assert_eq!(
            unterminated.to_string(),
            "sql: at byte 4: expected a closing `'` for the string that starts here, found end of input"
        );
        assert_eq!(error("'it''s").position(), 0);
    }

    #[test]
    fn operators_take_the_longest_spelling() {
        assert_eq!(
            kinds("<><=<>=>=()+-*/,"),
            vec![
                TokenKind::Compare(ComparisonOp::NotEqual),
                TokenKind::Compare(ComparisonOp::LessOrEqual),
                TokenKind::Compare(ComparisonOp::NotEqual),
                TokenKind::Compare(ComparisonOp::Equal),
                TokenKind::Compare(ComparisonOp::GreaterOrEqual),
                TokenKind::LeftParen,
                TokenKind::RightParen,
                TokenKind::Plus,
                TokenKind::Minus,
                TokenKind::Star,
                TokenKind::Slash,
                TokenKind::Comma,
                TokenKind::End,
            ]
        );
        let bang = error("a != 1");
        assert_eq!(bang.position(), 2);
        assert!(bang.to_string().contains("found character `!`"), "{bang}");
        let quoted = error("sym = \"IBM\"");
        assert!(quoted.to_string().contains("strings take single quotes: 'IBM'"), "{quoted}");
    }

    #[test]
    fn tokens_record_their_byte_span() {
        let tokens = tokenize("  ab <= 'x'").expect("tokenizes");
        let spans: Vec<(usize, usize)> = tokens.iter().map(|token| (token.start, token.end)).collect();
        assert_eq!(spans, vec![(2, 4), (5, 7), (8, 11), (11, 11)]);
        assert_eq!(tokens[2].describe("  ab <= 'x'"), "string `'x'`");
    }
}
