//! Parses the text of an XPath filter into an [`Expr`].
//!
//! Recursive descent over XPath 1.0's precedence levels, lowest first: `or`,
//! `and`, equality (`=`, `!=`), relational (`<`, `<=`, `>`, `>=`), unary
//! minus, then paths and primary expressions. As in XPath, `and` and `or`
//! are operators only where an operator can stand; elsewhere they are
//! element names, so `/and/or` is a path.

use crate::compare::ComparisonOp;
use crate::error::{quote_fragment, FilterError};
use crate::language::FilterLanguage;
use crate::xpath::ast::{Axis, Expr, Kind, LocationPath, NodeTest, Step, StringFunction};
use crate::xpath::lexer::{tokenize, Token, TokenKind};
use crate::xpath::{MAX_DEPTH, MAX_PARTS, MAX_TEXT_BYTES};

/// Parses a whole filter, which must be a path or a condition.
pub(crate) fn parse(text: &str) -> Result<Expr, FilterError> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(FilterError::Invalid {
            language: FilterLanguage::Xpath,
            position: None,
            problem: format!("the filter is longer than {MAX_TEXT_BYTES} bytes"),
        });
    }
    let tokens = tokenize(text)?;
    let mut parser = Parser { text, tokens, index: 0, nesting: 0, parts: 0 };
    let start = parser.peek().start;
    let expr = parser.disjunction()?;
    if parser.peek().kind != TokenKind::End {
        return Err(parser.unexpected("an operator (`and`, `or`, `=`, `!=`, `<`, `<=`, `>`, `>=`) or end of input"));
    }
    match expr.kind() {
        Kind::NodeSet | Kind::Boolean => Ok(expr),
        other => Err(FilterError::Unexpected {
            language: FilterLanguage::Xpath,
            position: start,
            expected: "a path or a condition",
            found: other.describe().to_string(),
        }),
    }
}

struct Parser<'t> {
    text: &'t str,
    /// Never empty: the lexer always ends the list with [`TokenKind::End`].
    tokens: Vec<Token>,
    index: usize,
    /// Open brackets, parentheses, function calls, signs and comparison
    /// chains around the current position.
    nesting: usize,
    /// Steps, operators and operands read so far.
    parts: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.tokens[self.index]
    }

    fn peek_kind_at(&self, offset: usize) -> &TokenKind {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.index + offset).min(last)].kind
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
        self.unexpected_token(self.peek(), expected)
    }

    fn unexpected_token(&self, token: &Token, expected: &'static str) -> FilterError {
        FilterError::Unexpected {
            language: FilterLanguage::Xpath,
            position: token.start,
            expected,
            found: token.describe(self.text),
        }
    }

    fn expect(&mut self, kind: TokenKind, expected: &'static str) -> Result<(), FilterError> {
        if self.peek().kind != kind {
            return Err(self.unexpected(expected));
        }
        self.advance();
        Ok(())
    }

    /// Counts one more level of nesting that starts at `position`.
    fn enter(&mut self, position: usize) -> Result<(), FilterError> {
        self.nesting += 1;
        if self.nesting > MAX_DEPTH {
            return Err(FilterError::TooDeep { language: FilterLanguage::Xpath, position, limit: MAX_DEPTH });
        }
        Ok(())
    }

    fn leave(&mut self, levels: usize) {
        self.nesting -= levels;
    }

    /// Counts one more step, operator or operand, starting at the current token.
    fn count_part(&mut self) -> Result<(), FilterError> {
        self.parts += 1;
        if self.parts > MAX_PARTS {
            return Err(FilterError::Invalid {
                language: FilterLanguage::Xpath,
                position: Some(self.peek().start),
                problem: format!("the filter has more than {MAX_PARTS} steps, operators and operands"),
            });
        }
        Ok(())
    }

    fn at_keyword(&self, keyword: &str) -> bool {
        matches!(&self.peek().kind, TokenKind::Name(name) if name == keyword)
    }

    fn disjunction(&mut self) -> Result<Expr, FilterError> {
        self.chain("or", Self::conjunction, Expr::Or)
    }

    fn conjunction(&mut self) -> Result<Expr, FilterError> {
        self.chain("and", Self::equality, Expr::And)
    }

    /// `operand (KEYWORD operand)*`, built into one n-ary node so that long
    /// chains stay shallow.
    fn chain(
        &mut self,
        keyword: &str,
        operand: fn(&mut Self) -> Result<Expr, FilterError>,
        build: fn(Vec<Expr>) -> Expr,
    ) -> Result<Expr, FilterError> {
        let first = operand(self)?;
        if !self.at_keyword(keyword) {
            return Ok(first);
        }
        let mut operands = vec![first];
        while self.at_keyword(keyword) {
            self.count_part()?;
            self.advance();
            operands.push(operand(self)?);
        }
        Ok(build(operands))
    }

    fn equality(&mut self) -> Result<Expr, FilterError> {
        self.comparisons(&[ComparisonOp::Equal, ComparisonOp::NotEqual], Self::relational)
    }

    fn relational(&mut self) -> Result<Expr, FilterError> {
        let operators =
            [ComparisonOp::Less, ComparisonOp::LessOrEqual, ComparisonOp::Greater, ComparisonOp::GreaterOrEqual];
        self.comparisons(&operators, Self::unary)
    }

    /// `operand (OP operand)*`, left-associative as in XPath. Each link of a
    /// chain deepens the tree, so it counts as a level of nesting.
    fn comparisons(
        &mut self,
        operators: &[ComparisonOp],
        operand: fn(&mut Self) -> Result<Expr, FilterError>,
    ) -> Result<Expr, FilterError> {
        let mut left = operand(self)?;
        let mut links = 0;
        while let TokenKind::Compare(op) = self.peek().kind {
            if !operators.contains(&op) {
                break;
            }
            self.count_part()?;
            let token = self.advance();
            links += 1;
            self.enter(token.start)?;
            let right = operand(self)?;
            left = Expr::Compare { op, left: Box::new(left), right: Box::new(right) };
        }
        self.leave(links);
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        if self.peek().kind != TokenKind::Minus {
            return self.path_or_primary();
        }
        self.count_part()?;
        let minus = self.advance();
        self.enter(minus.start)?;
        let operand = self.unary()?;
        self.leave(1);
        Ok(Expr::Negate(Box::new(operand)))
    }

    fn path_or_primary(&mut self) -> Result<Expr, FilterError> {
        match self.peek().kind.clone() {
            TokenKind::Slash => {
                self.count_part()?;
                self.advance();
                let mut steps = Vec::new();
                if self.starts_step() {
                    self.steps(&mut steps, false)?;
                }
                Ok(Expr::Path(LocationPath { absolute: true, steps }))
            }
            TokenKind::DoubleSlash => {
                self.advance();
                let mut steps = Vec::new();
                self.steps(&mut steps, true)?;
                Ok(Expr::Path(LocationPath { absolute: true, steps }))
            }
            TokenKind::Literal(text) => {
                self.count_part()?;
                self.advance();
                Ok(Expr::Literal(text))
            }
            TokenKind::Number(value) => {
                self.count_part()?;
                self.advance();
                Ok(Expr::Number(value))
            }
            TokenKind::LeftParen => self.parenthesised(),
            TokenKind::Name(name) if *self.peek_kind_at(1) == TokenKind::LeftParen && !is_node_type(&name) => {
                self.function_call(&name)
            }
            _ if self.starts_step() => {
                let mut steps = Vec::new();
                self.steps(&mut steps, false)?;
                Ok(Expr::Path(LocationPath { absolute: false, steps }))
            }
            _ => Err(self.unexpected("a path, a literal, a number, `(` or a function call")),
        }
    }

    fn parenthesised(&mut self) -> Result<Expr, FilterError> {
        let open = self.advance();
        self.enter(open.start)?;
        let inner = self.disjunction()?;
        self.expect(TokenKind::RightParen, "`)` or an operator")?;
        self.leave(1);
        Ok(inner)
    }

    fn starts_step(&self) -> bool {
        matches!(
            self.peek().kind,
            TokenKind::Name(_) | TokenKind::Star | TokenKind::At | TokenKind::Dot | TokenKind::DoubleDot
        )
    }

    /// `step (('/' | '//') step)*`, the first step preceded by `//` when
    /// `first_descendants`.
    fn steps(&mut self, steps: &mut Vec<Step>, first_descendants: bool) -> Result<(), FilterError> {
        steps.push(self.step(first_descendants)?);
        loop {
            let descendants = match self.peek().kind {
                TokenKind::Slash => false,
                TokenKind::DoubleSlash => true,
                _ => return Ok(()),
            };
            self.advance();
            steps.push(self.step(descendants)?);
        }
    }

    fn step(&mut self, descendants: bool) -> Result<Step, FilterError> {
        self.count_part()?;
        let token = self.advance();
        let (axis, test) = match &token.kind {
            TokenKind::Dot => {
                return Ok(Step { descendants, axis: Axis::SelfNode, test: NodeTest::Node, predicates: Vec::new() })
            }
            TokenKind::DoubleDot => {
                return Err(self.unexpected_token(&token, "a step (the parent step `..` is not supported)"))
            }
            TokenKind::At => {
                let test_token = self.advance();
                (Axis::Attribute, self.node_test(&test_token)?)
            }
            _ => (Axis::Child, self.node_test(&token)?),
        };
        let mut predicates = Vec::new();
        while self.peek().kind == TokenKind::LeftBracket {
            let open = self.advance();
            self.enter(open.start)?;
            predicates.push(self.disjunction()?);
            self.expect(TokenKind::RightBracket, "`]` or an operator")?;
            self.leave(1);
        }
        Ok(Step { descendants, axis, test, predicates })
    }

    /// A name test or node-type test that starts with `token`.
    fn node_test(&mut self, token: &Token) -> Result<NodeTest, FilterError> {
        const EXPECTED: &str = "a name, `*`, `text()` or `node()`";
        match &token.kind {
            TokenKind::Star => Ok(NodeTest::AnyName),
            TokenKind::Name(_) if self.peek().kind == TokenKind::DoubleColon => Err(self
                .unexpected_token(token, "a step (axis syntax `name::` is not supported: use `/`, `//`, `@` and `.`)")),
            TokenKind::Name(name) if self.peek().kind == TokenKind::LeftParen => {
                let test = match name.as_str() {
                    "text" => NodeTest::Text,
                    "node" => NodeTest::Node,
                    _ => return Err(self.unexpected_token(token, EXPECTED)),
                };
                self.advance();
                self.expect(TokenKind::RightParen, "`)`")?;
                Ok(test)
            }
            TokenKind::Name(name) => Ok(NodeTest::Name(name.clone())),
            _ => Err(self.unexpected_token(token, EXPECTED)),
        }
    }

    fn function_call(&mut self, name: &str) -> Result<Expr, FilterError> {
        let name_token = self.advance();
        let arity = match name {
            "not" => 1,
            "contains" | "starts-with" => 2,
            "true" | "false" => 0,
            _ => {
                return Err(self
                    .unexpected_token(&name_token, "a function: not(), contains(), starts-with(), true() or false()"))
            }
        };
        self.count_part()?;
        self.advance();
        self.enter(name_token.start)?;
        let mut arguments = Vec::new();
        if self.peek().kind != TokenKind::RightParen {
            arguments.push(self.disjunction()?);
            while self.peek().kind == TokenKind::Comma {
                self.advance();
                arguments.push(self.disjunction()?);
            }
        }
        self.expect(TokenKind::RightParen, "`,`, `)` or an operator")?;
        self.leave(1);
        if arguments.len() != arity {
            return Err(FilterError::Unexpected {
                language: FilterLanguage::Xpath,
                position: name_token.start,
                expected: arity_in_words(arity),
                found: format!("{} arguments to {}", arguments.len(), quote_fragment(name)),
            });
        }
        Ok(build_call(name, arguments))
    }
}

/// Names that start a node-type test rather than a function call.
fn is_node_type(name: &str) -> bool {
    matches!(name, "text" | "node" | "comment" | "processing-instruction")
}

fn arity_in_words(arity: usize) -> &'static str {
    match arity {
        0 => "no arguments",
        1 => "one argument",
        _ => "two arguments",
    }
}

/// The call of a known function with arguments already counted.
fn build_call(name: &str, arguments: Vec<Expr>) -> Expr {
    let mut arguments = arguments.into_iter().map(Box::new);
    let mut next = || arguments.next().unwrap_or_else(|| Box::new(Expr::Literal(String::new())));
    match name {
        "not" => Expr::Not(next()),
        "contains" => Expr::StringTest { function: StringFunction::Contains, haystack: next(), needle: next() },
        "starts-with" => Expr::StringTest { function: StringFunction::StartsWith, haystack: next(), needle: next() },
        other => Expr::Boolean(other == "true"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(text).expect_err("malformed").to_string()
    }

    #[test]
    fn jbi_filters_parse() {
        let ato = parse("/metadata/ATO[nickname='KTJR' and serialno='targ1234']").expect("parses");
        let Expr::Path(path) = ato else { panic!("a path") };
        assert!(path.absolute);
        assert_eq!(path.steps.len(), 2);
        assert_eq!(path.steps[1].predicates.len(), 1);
        let temporal = parse(
            "/metadata/BasicTemporal/beginning_date_time_group/year >= 2003 and \
             /metadata/BasicTemporal/ending_date_time_group/day <= 26",
        )
        .expect("parses");
        assert!(matches!(temporal, Expr::And(ref operands) if operands.len() == 2));
    }

    #[test]
    fn keywords_are_names_where_a_step_stands() {
        let expr = parse("/and/or or not(/not)").expect("parses");
        let Expr::Or(operands) = expr else { panic!("an or") };
        assert!(matches!(&operands[0], Expr::Path(path) if path.steps.len() == 2));
        assert!(matches!(&operands[1], Expr::Not(_)));
    }

    #[test]
    fn errors_name_position_and_expectation() {
        assert_eq!(error("/a[b = 1"), "xpath: at byte 8: expected `]` or an operator, found end of input");
        assert_eq!(
            error("/a = "),
            "xpath: at byte 5: expected a path, a literal, a number, `(` or a function call, found end of input"
        );
        assert_eq!(error("/a b"), "xpath: at byte 3: expected an operator (`and`, `or`, `=`, `!=`, `<`, `<=`, `>`, `>=`) or end of input, found name `b`");
        assert_eq!(
            error("/a/../b"),
            "xpath: at byte 3: expected a step (the parent step `..` is not supported), found `..`"
        );
        assert_eq!(error("count(/a)"), "xpath: at byte 0: expected a function: not(), contains(), starts-with(), true() or false(), found name `count`");
        assert_eq!(error("contains(/a)"), "xpath: at byte 0: expected two arguments, found 1 arguments to `contains`");
        assert_eq!(error("'text'"), "xpath: at byte 0: expected a path or a condition, found a string");
        assert_eq!(error("  1 "), "xpath: at byte 2: expected a path or a condition, found a number");
        assert_eq!(error("child::a"), "xpath: at byte 0: expected a step (axis syntax `name::` is not supported: use `/`, `//`, `@` and `.`), found name `child`");
        assert_eq!(
            error("/a/comment()"),
            "xpath: at byte 3: expected a name, `*`, `text()` or `node()`, found name `comment`"
        );
        assert_eq!(
            error(""),
            "xpath: at byte 0: expected a path, a literal, a number, `(` or a function call, found end of input"
        );
        assert_eq!(
            error("/a | /b"),
            "xpath: at byte 3: expected a path, a literal, a number, an operator or a bracket, found `|`"
        );
    }

    #[test]
    fn nesting_and_size_are_limited() {
        let deep = format!("{}/a{}", "(".repeat(MAX_DEPTH + 1), ")".repeat(MAX_DEPTH + 1));
        let error = parse(&deep).expect_err("too deep");
        assert!(matches!(error, FilterError::TooDeep { position: 32, limit: MAX_DEPTH, .. }), "{error}");
        let chain = vec!["/a = 1"; MAX_DEPTH + 2].join(" = ");
        assert!(matches!(parse(&chain), Err(FilterError::TooDeep { .. })));
        let wide = vec!["/a"; MAX_PARTS + 1].join(" or ");
        let error = parse(&wide).expect_err("too large");
        assert!(error.to_string().contains("more than"), "{error}");
        let long = format!("/a = '{}'", "x".repeat(MAX_TEXT_BYTES));
        assert!(matches!(parse(&long), Err(FilterError::Invalid { .. })));
    }

    #[test]
    fn steps_take_attributes_text_and_self() {
        let expr = parse("//item[@id = '7']/text()").expect("parses");
        let Expr::Path(path) = expr else { panic!("a path") };
        assert!(path.steps[0].descendants);
        assert_eq!(path.steps[1].test, NodeTest::Text);
        let Expr::Compare { left, .. } = &path.steps[0].predicates[0] else { panic!("a comparison") };
        assert!(matches!(&**left, Expr::Path(inner) if inner.steps[0].axis == Axis::Attribute));
        let dot = parse("/a[. = 'x']").expect("parses");
        assert!(dot.mentions_path());
    }
}
