//! Splits the text of an XPath filter into tokens.
//!
//! Names are not told apart from operator names (`and`, `or`) or function
//! names here: XPath decides by the position in the grammar, so the parser
//! does.

use crate::compare::ComparisonOp;
use crate::error::{quote_fragment, FilterError};
use crate::language::FilterLanguage;

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind {
    /// An NCName or a QName (`prefix:local`).
    Name(String),
    /// A string literal without its quotes.
    Literal(String),
    /// A number literal; finite, not negative.
    Number(f64),
    Slash,
    DoubleSlash,
    LeftParen,
    RightParen,
    LeftBracket,
    RightBracket,
    Dot,
    DoubleDot,
    At,
    Comma,
    Star,
    Minus,
    /// `::`, which only axis syntax uses; the parser refuses it with a hint.
    DoubleColon,
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
            TokenKind::Name(_) => format!("name {fragment}"),
            TokenKind::Literal(_) => format!("string {fragment}"),
            TokenKind::Number(_) => format!("number {fragment}"),
            _ => fragment,
        }
    }
}

/// Characters that may start a name: XML's NameStartChar, approximated by
/// Unicode letters and `_`.
pub(crate) fn is_name_start(character: char) -> bool {
    character.is_alphabetic() || character == '_'
}

/// Characters that may continue a name: XML's NameChar without `:`,
/// approximated by Unicode letters, digits, `_`, `-`, `.` and `·`.
pub(crate) fn is_name_part(character: char) -> bool {
    character.is_alphanumeric() || matches!(character, '_' | '-' | '.' | '\u{B7}')
}

/// XML's white space, the only white space XPath allows between tokens.
pub(crate) fn is_xml_whitespace(character: char) -> bool {
    matches!(character, ' ' | '\t' | '\r' | '\n')
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
    fn rest(&self) -> &str {
        &self.text[self.position..]
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.rest().get(offset..).and_then(|rest| rest.chars().next())
    }

    fn unexpected(&self, expected: &'static str) -> FilterError {
        let found = match self.peek_at(0) {
            None => "end of input".to_string(),
            Some(character) => quote_fragment(character.encode_utf8(&mut [0; 4])),
        };
        FilterError::Unexpected { language: FilterLanguage::Xpath, position: self.position, expected, found }
    }

    fn next_token(&mut self) -> Result<Token, FilterError> {
        let rest = self.rest();
        self.position += rest.len() - rest.trim_start_matches(is_xml_whitespace).len();
        let start = self.position;
        let kind = match self.peek_at(0) {
            None => TokenKind::End,
            Some(character) => self.token_kind(character)?,
        };
        Ok(Token { kind, start, end: self.position })
    }

    /// Reads the token that starts with `character`, moving past it.
    fn token_kind(&mut self, character: char) -> Result<TokenKind, FilterError> {
        if character.is_ascii_digit() || (character == '.' && self.peek_at(1).is_some_and(|next| next.is_ascii_digit()))
        {
            return self.number();
        }
        if character == '\'' || character == '"' {
            return self.literal(character);
        }
        if is_name_start(character) {
            return Ok(TokenKind::Name(self.name()?));
        }
        // Two-character symbols first, so that `//` is not read as `/`.
        let symbols = [
            ("//", TokenKind::DoubleSlash),
            ("..", TokenKind::DoubleDot),
            ("::", TokenKind::DoubleColon),
            ("!=", TokenKind::Compare(ComparisonOp::NotEqual)),
            ("<=", TokenKind::Compare(ComparisonOp::LessOrEqual)),
            (">=", TokenKind::Compare(ComparisonOp::GreaterOrEqual)),
            ("/", TokenKind::Slash),
            ("(", TokenKind::LeftParen),
            (")", TokenKind::RightParen),
            ("[", TokenKind::LeftBracket),
            ("]", TokenKind::RightBracket),
            (".", TokenKind::Dot),
            ("@", TokenKind::At),
            (",", TokenKind::Comma),
            ("*", TokenKind::Star),
            ("-", TokenKind::Minus),
            ("=", TokenKind::Compare(ComparisonOp::Equal)),
            ("<", TokenKind::Compare(ComparisonOp::Less)),
            (">", TokenKind::Compare(ComparisonOp::Greater)),
        ];
        for (symbol, kind) in symbols {
            if self.rest().starts_with(symbol) {
                self.position += symbol.len();
                return Ok(kind);
            }
        }
        Err(self.unexpected("a path, a literal, a number, an operator or a bracket"))
    }

    /// `Digits ('.' Digits?)? | '.' Digits`: XPath has no exponent and no sign.
    fn number(&mut self) -> Result<TokenKind, FilterError> {
        let start = self.position;
        let digits =
            |text: &str| text.len() - text.trim_start_matches(|character: char| character.is_ascii_digit()).len();
        self.position += digits(self.rest());
        if self.rest().starts_with('.') {
            self.position += 1;
            self.position += digits(self.rest());
        }
        let literal = &self.text[start..self.position];
        match literal.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(TokenKind::Number(value)),
            _ => Err(FilterError::NumberOutOfRange {
                language: FilterLanguage::Xpath,
                position: start,
                text: quote_fragment(literal),
                range: "a finite 64-bit float",
            }),
        }
    }

    /// A literal in single or double quotes; XPath 1.0 has no escapes, so a
    /// literal cannot contain its own quote.
    fn literal(&mut self, quote: char) -> Result<TokenKind, FilterError> {
        let body_start = self.position + 1;
        match self.text[body_start..].find(quote) {
            Some(length) => {
                self.position = body_start + length + 1;
                Ok(TokenKind::Literal(self.text[body_start..body_start + length].to_string()))
            }
            None => {
                self.position = self.text.len();
                Err(self.unexpected(if quote == '\'' { "a closing `'`" } else { "a closing `\"`" }))
            }
        }
    }

    /// An NCName, or a QName when a `:` joins two NCNames.
    fn name(&mut self) -> Result<String, FilterError> {
        let start = self.position;
        self.take_name_part();
        if self.peek_at(0) == Some(':') && self.peek_at(1).is_some_and(is_name_start) {
            self.position += 1;
            self.take_name_part();
        } else if self.peek_at(0) == Some(':') && self.peek_at(1) == Some('*') {
            self.position += 1;
            return Err(self.unexpected("a local name after the prefix (`prefix:*` is not supported)"));
        }
        Ok(self.text[start..self.position].to_string())
    }

    fn take_name_part(&mut self) {
        let rest = self.rest();
        let mut characters = rest.char_indices();
        let mut length = rest.len();
        // The first character is a name start; the caller checked it.
        characters.next();
        for (offset, character) in characters {
            if !is_name_part(character) {
                length = offset;
                break;
            }
        }
        self.position += length;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        tokenize(text).expect("tokenizes").into_iter().map(|token| token.kind).collect()
    }

    #[test]
    fn splits_paths_operators_and_literals() {
        assert_eq!(
            kinds("//a-b/@c[. != 'x y'] >= 2.5"),
            vec![
                TokenKind::DoubleSlash,
                TokenKind::Name("a-b".into()),
                TokenKind::Slash,
                TokenKind::At,
                TokenKind::Name("c".into()),
                TokenKind::LeftBracket,
                TokenKind::Dot,
                TokenKind::Compare(ComparisonOp::NotEqual),
                TokenKind::Literal("x y".into()),
                TokenKind::RightBracket,
                TokenKind::Compare(ComparisonOp::GreaterOrEqual),
                TokenKind::Number(2.5),
                TokenKind::End,
            ]
        );
    }

    #[test]
    fn numbers_follow_xpath_syntax() {
        assert_eq!(kinds(".5"), vec![TokenKind::Number(0.5), TokenKind::End]);
        assert_eq!(kinds("7."), vec![TokenKind::Number(7.0), TokenKind::End]);
        assert_eq!(kinds(".."), vec![TokenKind::DoubleDot, TokenKind::End]);
        let huge = format!("1{}", "0".repeat(400));
        let error = tokenize(&huge).expect_err("overflows");
        assert!(matches!(error, FilterError::NumberOutOfRange { position: 0, .. }), "{error}");
    }

    #[test]
    fn qualified_names_keep_their_prefix() {
        assert_eq!(kinds("jbi:ATO"), vec![TokenKind::Name("jbi:ATO".into()), TokenKind::End]);
        assert_eq!(kinds("child::a")[1], TokenKind::DoubleColon);
    }

    #[test]
    fn errors_point_at_the_problem() {
        let error = tokenize("/a = 'open").expect_err("unterminated");
        assert_eq!(error.to_string(), "xpath: at byte 10: expected a closing `'`, found end of input");
        let error = tokenize("/a # 1").expect_err("bad character");
        assert_eq!(error.position(), 3);
    }
}
