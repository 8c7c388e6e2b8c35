//! Parses the text of a SQL selector into an [`Expr`].
//!
//! Recursive descent over the precedence levels, lowest first: OR, AND, NOT,
//! then the predicates (comparison, BETWEEN, IN, LIKE, IS NULL) over
//! arithmetic, which is parsed by precedence climbing (`+ -` below `* /`,
//! unary signs above both).
//!
//! The parser also tracks what kind of value each subexpression has where
//! the text makes it plain (a comparison is a condition, `a + 1` a number, a
//! string literal a string), so that selectors that could never be TRUE,
//! such as `a + 1` or `NOT 'x'`, are refused with a position instead of
//! silently matching nothing. A property's type is only known at match time,
//! so properties are accepted anywhere.

use sift_core::Value;

use crate::compare::ComparisonOp;
use crate::error::{quote_fragment, FilterError};
use crate::language::FilterLanguage;
use crate::sql::ast::{ArithmeticOp, Expr, HeaderField, UnaryOp};
use crate::sql::lexer::{tokenize, Keyword, Token, TokenKind};
use crate::sql::like::{LikePattern, LikePatternError};

/// How deeply a selector may nest (parentheses, NOT, signs, and the height of
/// the syntax tree). Parsing and evaluation recurse over the tree, so the
/// limit keeps hostile selectors from overflowing the stack.
pub const MAX_DEPTH: usize = 64;

/// What the text says about the value of a subexpression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A condition: comparison, logical operator, predicate, TRUE or FALSE.
    Boolean,
    /// A number: numeric literal, arithmetic, numeric header field.
    Numeric,
    /// A string literal or string header field.
    Text,
    /// A property, whose type depends on the message.
    Unknown,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Boolean => "a boolean expression",
            Kind::Numeric => "a numeric expression",
            Kind::Text => "a string",
            Kind::Unknown => "an identifier",
        }
    }
}

/// A parsed subexpression with what the parser knows about it.
struct Parsed {
    expr: Expr,
    kind: Kind,
    /// Byte offset where its text starts, for errors about it.
    start: usize,
    /// Height of its syntax tree; a leaf has height 1.
    height: usize,
}

/// Parses a whole selector, which must be a condition.
pub(crate) fn parse(text: &str) -> Result<Expr, FilterError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser { text, tokens, index: 0, nesting: 0 };
    let selector = parser.disjunction()?;
    if parser.peek().kind != TokenKind::End {
        return Err(parser.unexpected("an operator or end of input"));
    }
    parser.require_boolean(selector).map(|parsed| parsed.expr)
}

/// The binding power of an arithmetic operator: higher binds tighter.
fn binding_power(op: ArithmeticOp) -> u8 {
    match op {
        ArithmeticOp::Add | ArithmeticOp::Subtract => 1,
        ArithmeticOp::Multiply | ArithmeticOp::Divide => 2,
    }
}

struct Parser<'t> {
    text: &'t str,
    /// Never empty: the lexer always ends the list with [`TokenKind::End`].
    tokens: Vec<Token>,
    index: usize,
    /// Open parentheses, NOTs and signs around the current position.
    nesting: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.tokens[self.index]
    }

    /// Moves past the current token, returning it; stays at the end.
    fn advance(&mut self) -> Token {
        let token = self.tokens[self.index].clone();
        if token.kind != TokenKind::End {
            self.index += 1;
        }
        token
    }

    fn unexpected(&self, expected: &'static str) -> FilterError {
        FilterError::Unexpected {
            language: FilterLanguage::Sql,
            position: self.peek().start,
            expected,
            found: self.peek().describe(self.text),
        }
    }

    /// Consumes the keyword if it is next, returning where it started.
    fn eat_keyword(&mut self, keyword: Keyword) -> Option<usize> {
        (self.peek().kind == TokenKind::Keyword(keyword)).then(|| self.advance().start)
    }

    fn expect_keyword(&mut self, keyword: Keyword, expected: &'static str) -> Result<(), FilterError> {
        match self.eat_keyword(keyword) {
            Some(_) => Ok(()),
            None => Err(self.unexpected(expected)),
        }
    }

    /// Counts one more level of nesting that starts at `position`.
    fn enter(&mut self, position: usize) -> Result<(), FilterError> {
        self.nesting += 1;
        if self.nesting > MAX_DEPTH {
            return Err(FilterError::TooDeep { language: FilterLanguage::Sql, position, limit: MAX_DEPTH });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting -= 1;
    }

    /// Wraps a new node whose tallest child has `child_height`, refusing
    /// trees taller than [`MAX_DEPTH`].
    fn node(&self, expr: Expr, kind: Kind, start: usize, child_height: usize) -> Result<Parsed, FilterError> {
        let height = child_height + 1;
        if height > MAX_DEPTH {
            return Err(FilterError::TooDeep { language: FilterLanguage::Sql, position: start, limit: MAX_DEPTH });
        }
        Ok(Parsed { expr, kind, start, height })
    }

    fn require_kind(parsed: Parsed, accepted: Kind, expected: &'static str) -> Result<Parsed, FilterError> {
        if parsed.kind == accepted || parsed.kind == Kind::Unknown {
            return Ok(parsed);
        }
        Err(FilterError::Unexpected {
            language: FilterLanguage::Sql,
            position: parsed.start,
            expected,
            found: parsed.kind.describe().to_string(),
        })
    }

    fn require_boolean(&self, parsed: Parsed) -> Result<Parsed, FilterError> {
        Self::require_kind(parsed, Kind::Boolean, "a boolean expression")
    }

    fn require_numeric(&self, parsed: Parsed) -> Result<Parsed, FilterError> {
        Self::require_kind(parsed, Kind::Numeric, "a numeric expression")
    }

    fn disjunction(&mut self) -> Result<Parsed, FilterError> {
        self.chain(Keyword::Or, Self::conjunction, Expr::Or)
    }

    fn conjunction(&mut self) -> Result<Parsed, FilterError> {
        self.chain(Keyword::And, Self::negation, Expr::And)
    }

    /// `operand (KEYWORD operand)*`, built into one n-ary node so that long
    /// chains stay shallow.
    fn chain(
        &mut self,
        keyword: Keyword,
        operand: fn(&mut Self) -> Result<Parsed, FilterError>,
        build: fn(Vec<Expr>) -> Expr,
    ) -> Result<Parsed, FilterError> {
        let first = operand(self)?;
        if self.peek().kind != TokenKind::Keyword(keyword) {
            return Ok(first);
        }
        let start = first.start;
        let mut height = first.height;
        let mut operands = vec![self.require_boolean(first)?.expr];
        while self.eat_keyword(keyword).is_some() {
            let next = operand(self)?;
            let next = self.require_boolean(next)?;
            height = height.max(next.height);
            operands.push(next.expr);
        }
        self.node(build(operands), Kind::Boolean, start, height)
    }

    fn negation(&mut self) -> Result<Parsed, FilterError> {
        let Some(start) = self.eat_keyword(Keyword::Not) else {
            return self.predicate();
        };
        self.enter(start)?;
        let operand = self.negation()?;
        self.leave();
        let operand = self.require_boolean(operand)?;
        self.node(Expr::Not(Box::new(operand.expr)), Kind::Boolean, start, operand.height)
    }

    /// An arithmetic expression, possibly followed by a comparison or one
    /// of the BETWEEN, IN, LIKE and IS NULL predicates.
    fn predicate(&mut self) -> Result<Parsed, FilterError> {
        let left = self.arithmetic(1)?;
        match self.peek().kind {
            TokenKind::Compare(op) => {
                let op_start = self.peek().start;
                self.advance();
                let right = self.arithmetic(1)?;
                Self::check_boolean_order(op, op_start, &left, &right)?;
                let height = left.height.max(right.height);
                let expr = Expr::Comparison { op, left: Box::new(left.expr), right: Box::new(right.expr) };
                self.node(expr, Kind::Boolean, left.start, height)
            }
            TokenKind::Keyword(Keyword::Not) => {
                self.advance();
                self.negatable_predicate(left, true)
            }
            TokenKind::Keyword(Keyword::Between | Keyword::In | Keyword::Like) => self.negatable_predicate(left, false),
            TokenKind::Keyword(Keyword::Is) => self.is_null(left),
            _ => Ok(left),
        }
    }

    /// JMS compares booleans only with `=` and `<>`: `TRUE > 0` has no
    /// meaning, so it is refused where it is written rather than left to
    /// evaluate as UNKNOWN on every message.
    fn check_boolean_order(
        op: ComparisonOp,
        op_start: usize,
        left: &Parsed,
        right: &Parsed,
    ) -> Result<(), FilterError> {
        let ordering = !matches!(op, ComparisonOp::Equal | ComparisonOp::NotEqual);
        if ordering && (left.kind == Kind::Boolean || right.kind == Kind::Boolean) {
            return Err(FilterError::Unexpected {
                language: FilterLanguage::Sql,
                position: op_start,
                expected: "= or <> (a boolean compares only for equality)",
                found: format!("{} with a boolean expression", op.sql_symbol()),
            });
        }
        Ok(())
    }

    fn negatable_predicate(&mut self, operand: Parsed, negated: bool) -> Result<Parsed, FilterError> {
        match self.peek().kind {
            TokenKind::Keyword(Keyword::Between) => self.between(operand, negated),
            TokenKind::Keyword(Keyword::In) => self.in_list(operand, negated),
            TokenKind::Keyword(Keyword::Like) => self.like(operand, negated),
            _ => Err(self.unexpected("BETWEEN, IN or LIKE after NOT")),
        }
    }

    fn between(&mut self, operand: Parsed, negated: bool) -> Result<Parsed, FilterError> {
        self.advance();
        let operand = self.require_numeric(operand)?;
        let low = self.arithmetic(1)?;
        let low = self.require_numeric(low)?;
        self.expect_keyword(Keyword::And, "`AND`")?;
        let high = self.arithmetic(1)?;
        let high = self.require_numeric(high)?;
        let height = operand.height.max(low.height).max(high.height);
        let expr = Expr::Between {
            operand: Box::new(operand.expr),
            low: Box::new(low.expr),
            high: Box::new(high.expr),
            negated,
        };
        self.node(expr, Kind::Boolean, operand.start, height)
    }

    fn in_list(&mut self, operand: Parsed, negated: bool) -> Result<Parsed, FilterError> {
        self.advance();
        if self.peek().kind != TokenKind::LeftParen {
            return Err(self.unexpected("`(`"));
        }
        self.advance();
        let mut list = Vec::new();
        loop {
            list.push(self.list_literal()?);
            match self.peek().kind {
                TokenKind::Comma => self.advance(),
                TokenKind::RightParen => break,
                _ => return Err(self.unexpected("`,` or `)`")),
            };
        }
        self.advance();
        let expr = Expr::In { operand: Box::new(operand.expr), list, negated };
        self.node(expr, Kind::Boolean, operand.start, operand.height)
    }

    /// One item of an IN list: a string literal, or (an extension to JMS)
    /// a numeric literal with an optional sign.
    fn list_literal(&mut self) -> Result<Value, FilterError> {
        let token = self.peek().clone();
        match token.kind {
            TokenKind::String(text) => {
                self.advance();
                Ok(Value::Str(text.into()))
            }
            TokenKind::Plus | TokenKind::Minus => {
                self.advance();
                let negative = token.kind == TokenKind::Minus;
                match self.numeric_literal(negative, token.start)? {
                    Some(value) => Ok(value),
                    None => Err(self.unexpected("a number after the sign")),
                }
            }
            _ => match self.numeric_literal(false, token.start)? {
                Some(value) => Ok(value),
                None => Err(self.unexpected("a string or numeric literal")),
            },
        }
    }

    fn like(&mut self, operand: Parsed, negated: bool) -> Result<Parsed, FilterError> {
        self.advance();
        let pattern_token = self.peek().clone();
        let TokenKind::String(pattern_text) = &pattern_token.kind else {
            return Err(self.unexpected("a string literal pattern"));
        };
        self.advance();
        let escape = match self.eat_keyword(Keyword::Escape) {
            Some(_) => Some(self.escape_character()?),
            None => None,
        };
        let pattern = LikePattern::new(pattern_text, escape).map_err(|error| FilterError::Unexpected {
            language: FilterLanguage::Sql,
            position: pattern_token.start,
            expected: match error {
                LikePatternError::DanglingEscape => "a pattern that does not end with its escape character",
                LikePatternError::InvalidEscape(_) => {
                    "only `%`, `_` or the escape character after the escape character"
                }
            },
            found: pattern_token.describe(self.text),
        })?;
        let expr = Expr::Like { operand: Box::new(operand.expr), pattern, negated };
        self.node(expr, Kind::Boolean, operand.start, operand.height)
    }

    fn escape_character(&mut self) -> Result<char, FilterError> {
        if let TokenKind::String(text) = &self.peek().kind {
            let mut characters = text.chars();
            if let (Some(escape), None) = (characters.next(), characters.next()) {
                self.advance();
                return Ok(escape);
            }
        }
        Err(self.unexpected("a one-character string after ESCAPE"))
    }

    fn is_null(&mut self, operand: Parsed) -> Result<Parsed, FilterError> {
        self.advance();
        let negated = self.eat_keyword(Keyword::Not).is_some();
        self.expect_keyword(Keyword::Null, if negated { "`NULL`" } else { "`NULL` or `NOT NULL`" })?;
        let expr = Expr::IsNull { operand: Box::new(operand.expr), negated };
        self.node(expr, Kind::Boolean, operand.start, operand.height)
    }

    /// Arithmetic by precedence climbing: operands bound at least as tightly
    /// as `min_power`, left-associative.
    fn arithmetic(&mut self, min_power: u8) -> Result<Parsed, FilterError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek().kind {
                TokenKind::Plus => ArithmeticOp::Add,
                TokenKind::Minus => ArithmeticOp::Subtract,
                TokenKind::Star => ArithmeticOp::Multiply,
                TokenKind::Slash => ArithmeticOp::Divide,
                _ => return Ok(left),
            };
            let power = binding_power(op);
            if power < min_power {
                return Ok(left);
            }
            self.advance();
            let right = self.arithmetic(power + 1)?;
            let left_operand = self.require_numeric(left)?;
            let right_operand = self.require_numeric(right)?;
            let start = left_operand.start;
            let height = left_operand.height.max(right_operand.height);
            let expr = Expr::Arithmetic { op, left: Box::new(left_operand.expr), right: Box::new(right_operand.expr) };
            left = self.node(expr, Kind::Numeric, start, height)?;
        }
    }

    fn unary(&mut self) -> Result<Parsed, FilterError> {
        let sign = self.peek().clone();
        let op = match sign.kind {
            TokenKind::Plus => UnaryOp::Plus,
            TokenKind::Minus => UnaryOp::Minus,
            _ => return self.primary(),
        };
        self.advance();
        // A sign right before a numeric literal is part of the literal, so
        // that -9223372036854775808 (which is i64::MIN but whose digits alone
        // overflow) can be written, and negative constants stay constants.
        if let Some(value) = self.numeric_literal(op == UnaryOp::Minus, sign.start)? {
            return Ok(Parsed { expr: Expr::Constant(value), kind: Kind::Numeric, start: sign.start, height: 1 });
        }
        self.enter(sign.start)?;
        let operand = self.unary()?;
        self.leave();
        let operand = self.require_numeric(operand)?;
        let expr = Expr::Unary { op, operand: Box::new(operand.expr) };
        self.node(expr, Kind::Numeric, sign.start, operand.height)
    }

    /// Consumes a numeric literal if one is next, applying the sign (which
    /// starts at `start` when there is one).
    fn numeric_literal(&mut self, negative: bool, start: usize) -> Result<Option<Value>, FilterError> {
        let token = self.peek();
        let value = match token.kind {
            TokenKind::Float(magnitude) => Value::Float(if negative { -magnitude } else { magnitude }),
            TokenKind::Integer(magnitude) => {
                let signed = if negative { -i128::from(magnitude) } else { i128::from(magnitude) };
                let int = i64::try_from(signed).map_err(|_| FilterError::NumberOutOfRange {
                    language: FilterLanguage::Sql,
                    position: start,
                    text: quote_fragment(&self.text[start..token.end]),
                    range: "a 64-bit integer",
                })?;
                Value::Int(int)
            }
            _ => return Ok(None),
        };
        self.advance();
        Ok(Some(value))
    }

    fn primary(&mut self) -> Result<Parsed, FilterError> {
        let start = self.peek().start;
        if let Some(value) = self.numeric_literal(false, start)? {
            return Ok(Parsed { expr: Expr::Constant(value), kind: Kind::Numeric, start, height: 1 });
        }
        let (expr, kind) = match &self.peek().kind {
            TokenKind::String(text) => (Expr::Constant(Value::Str(text.as_str().into())), Kind::Text),
            TokenKind::Keyword(Keyword::True) => (Expr::Constant(Value::Bool(true)), Kind::Boolean),
            TokenKind::Keyword(Keyword::False) => (Expr::Constant(Value::Bool(false)), Kind::Boolean),
            TokenKind::Identifier(name) => match HeaderField::from_name(name) {
                Some(field) if field.is_string() => (Expr::Header(field), Kind::Text),
                Some(field) => (Expr::Header(field), Kind::Numeric),
                None => (Expr::Property(name.clone()), Kind::Unknown),
            },
            TokenKind::LeftParen => return self.parenthesised(),
            _ => return Err(self.unexpected("an operand")),
        };
        self.advance();
        Ok(Parsed { expr, kind, start, height: 1 })
    }

    fn parenthesised(&mut self) -> Result<Parsed, FilterError> {
        let start = self.advance().start;
        self.enter(start)?;
        let inner = self.disjunction()?;
        if self.peek().kind != TokenKind::RightParen {
            return Err(self.unexpected("`)`"));
        }
        self.advance();
        self.leave();
        Ok(Parsed { start, ..inner })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse_ok(text: &str) -> Expr {
        parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    fn parse_error(text: &str) -> FilterError {
        let error = parse(text).expect_err("selector is malformed");
        assert_eq!(error.language(), FilterLanguage::Sql);
        error
    }

    fn property(name: &str) -> Box<Expr> {
        Box::new(Expr::Property(name.to_string()))
    }

    fn int(value: i64) -> Box<Expr> {
        Box::new(Expr::Constant(Value::Int(value)))
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        let cases = [
            ("a = ", 4, "expected an operand, found end of input"),
            ("a = 1 b", 6, "expected an operator or end of input, found identifier `b`"),
            ("(a = 1", 6, "expected `)`, found end of input"),
            ("a = 1)", 5, "expected an operator or end of input, found `)`"),
            ("a LIKE 5", 7, "expected a string literal pattern, found number `5`"),
            ("'unterminated", 0, "expected a closing `'`"),
            ("", 0, "expected an operand, found end of input"),
            ("a = = 1", 4, "expected an operand, found `=`"),
            ("a NOT = 1", 6, "expected BETWEEN, IN or LIKE after NOT, found `=`"),
            ("a BETWEEN 1 OR 2", 12, "expected `AND`, found keyword `OR`"),
            ("a IN 'x'", 5, "expected `(`, found string `'x'`"),
            ("a IN ()", 6, "expected a string or numeric literal, found `)`"),
            ("a IN ('x' 'y')", 10, "expected `,` or `)`"),
            ("a IN (TRUE)", 6, "expected a string or numeric literal, found keyword `TRUE`"),
            ("a IN (-'x')", 7, "expected a number after the sign"),
            ("a IS 1", 5, "expected `NULL` or `NOT NULL`, found number `1`"),
            ("a IS NOT TRUE", 9, "expected `NULL`, found keyword `TRUE`"),
            ("a LIKE 'x' ESCAPE 'ab'", 18, "expected a one-character string after ESCAPE"),
            ("a LIKE 'x\\' ESCAPE '\\'", 7, "does not end with its escape character"),
            ("a LIKE '\\n' ESCAPE '\\'", 7, "after the escape character"),
            ("NULL = a", 0, "expected an operand, found keyword `NULL`"),
            ("and = 1", 0, "expected an operand, found keyword `and`"),
            ("a = 9223372036854775808", 4, "does not fit a 64-bit integer"),
            ("a = -9223372036854775809", 4, "does not fit a 64-bit integer"),
        ];
        for (text, position, message) in cases {
            let error = parse_error(text);
            assert_eq!(error.position(), position, "{text}: {error}");
            assert!(error.to_string().contains(message), "{text}: {error}");
        }
        assert_eq!(parse_error("a = ").to_string(), "sql: at byte 4: expected an operand, found end of input");
    }

    #[test]
    fn selectors_must_be_conditions() {
        let cases = [
            ("a + 1", 0, "found a numeric expression"),
            ("1", 0, "found a numeric expression"),
            ("'x'", 0, "found a string"),
            ("JMSMessageID", 0, "found a string"),
            ("NOT 5", 4, "found a numeric expression"),
            ("a = 1 AND 2", 10, "found a numeric expression"),
            ("(a + 1) OR b", 0, "found a numeric expression"),
        ];
        for (text, position, found) in cases {
            let error = parse_error(text);
            assert_eq!(error.position(), position, "{text}: {error}");
            let message = error.to_string();
            assert!(message.contains("expected a boolean expression"), "{text}: {message}");
            assert!(message.contains(found), "{text}: {message}");
        }
    }

    #[test]
    fn booleans_compare_only_for_equality() {
        for (text, position) in [("TRUE > 0", 5), ("FALSE > 0", 6), ("a < TRUE", 2), ("(a = 1) >= (b = 2)", 8)] {
            let error = parse_error(text);
            assert_eq!(error.position(), position, "{text}: {error}");
            assert!(error.to_string().contains("a boolean compares only for equality"), "{text}: {error}");
        }
        for text in ["TRUE = a", "a <> FALSE", "(a = 1) = (b = 2)"] {
            parse_ok(text);
        }
    }

    #[test]
    fn arithmetic_needs_numbers() {
        let cases = [
            ("'a' + 1 = 2", 0, "found a string"),
            ("a + TRUE = 2", 4, "found a boolean expression"),
            ("-'a' = 1", 1, "found a string"),
            ("a BETWEEN 'a' AND 'c'", 10, "found a string"),
            ("(a = 1) * 2 = 2", 0, "found a boolean expression"),
        ];
        for (text, position, found) in cases {
            let error = parse_error(text);
            assert_eq!(error.position(), position, "{text}: {error}");
            let message = error.to_string();
            assert!(message.contains("expected a numeric expression"), "{text}: {message}");
            assert!(message.contains(found), "{text}: {message}");
        }
    }

    #[test]
    fn precedence_runs_or_and_not_predicate_additive_multiplicative_unary() {
        let expr = parse_ok("a = 1 OR NOT b = 2 AND c");
        let expected = Expr::Or(vec![
            Expr::Comparison { op: ComparisonOp::Equal, left: property("a"), right: int(1) },
            Expr::And(vec![
                Expr::Not(Box::new(Expr::Comparison { op: ComparisonOp::Equal, left: property("b"), right: int(2) })),
                Expr::Property("c".to_string()),
            ]),
        ]);
        assert_eq!(expr, expected);
        let arithmetic = parse_ok("a - b * -c + 2 > 0");
        assert_eq!(arithmetic.to_string(), "(((a - (b * (-c))) + 2) > 0)");
    }

    #[test]
    fn signs_fold_into_numeric_literals() {
        assert_eq!(
            parse_ok("a = -9223372036854775808"),
            Expr::Comparison { op: ComparisonOp::Equal, left: property("a"), right: int(i64::MIN) }
        );
        assert_eq!(parse_ok("a IN (-1, +2.5, 'x')").to_string(), "(a IN (-1, 2.5, 'x'))");
    }

    #[test]
    fn header_fields_are_recognised_by_exact_name() {
        let expr = parse_ok("JMSPriority > jmsPriority");
        assert_eq!(
            expr,
            Expr::Comparison {
                op: ComparisonOp::Greater,
                left: Box::new(Expr::Header(HeaderField::Priority)),
                right: property("jmsPriority"),
            }
        );
    }

    #[test]
    fn nesting_is_limited() {
        let nested = |depth: usize| format!("{}a = 1{}", "(".repeat(depth), ")".repeat(depth));
        assert!(parse(&nested(MAX_DEPTH - 1)).is_ok());
        let error = parse_error(&nested(100_000));
        assert!(matches!(error, FilterError::TooDeep { limit: MAX_DEPTH, .. }), "{error}");
        let nots = format!("{}a", "NOT ".repeat(100_000));
        assert!(matches!(parse_error(&nots), FilterError::TooDeep { .. }));
        let signs = format!("{}a = 1", "-".repeat(100_000));
        assert!(matches!(parse_error(&signs), FilterError::TooDeep { .. }));
        let sum = format!("a{} = 1", " + a".repeat(100_000));
        assert!(matches!(parse_error(&sum), FilterError::TooDeep { .. }));
    }

    #[test]
    fn long_and_or_chains_stay_shallow() {
        let chain = vec!["a = 1"; 10_000].join(" AND ");
        let Expr::And(operands) = parse_ok(&chain) else {
            panic!("an AND chain parses as an AND");
        };
        assert_eq!(operands.len(), 10_000);
        let disjunction = vec!["(a = 1 AND b = 2)"; 1_000].join(" OR ");
        assert!(parse(&disjunction).is_ok());
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,60}") {
            let _ = parse(&text);
        }

        #[test]
        fn selector_like_text_never_panics(
            words in prop::collection::vec(
                prop::sample::select(vec![
                    "a", "b", "JMSPriority", "1", "-", "+", "*", "/", "2.5", "1e3", "'x'", "''", "(", ")", ",",
                    "=", "<>", "<", ">=", "AND", "OR", "NOT", "BETWEEN", "IN", "LIKE", "ESCAPE", "'\\'",
                    "IS", "NULL", "TRUE", "FALSE", "9223372036854775808",
                ]),
                0..16,
            )
        ) {
            let text = words.join(" ");
            if let Ok(expr) = parse(&text) {
                // Whatever parses prints as text that parses again.
                prop_assert!(parse(&expr.to_string()).is_ok(), "{} printed as {}", text, expr);
            }
        }
    }
}
