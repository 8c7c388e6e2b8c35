//! Prints an XPath expression back as text.
//!
//! Every operator is printed in parentheses, so the text parses back (with
//! [`crate::xpath::XPathFilter::parse`]) to the same tree whatever the
//! precedence rules. The exceptions are trees the parser cannot produce: a
//! literal holding both kinds of quote, non-finite or negative number
//! literals, and `.` with predicates.

use std::fmt::{self, Display, Formatter, Write};

use crate::xpath::ast::{Axis, Expr, LocationPath, NodeTest, Step};

impl Display for Expr {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Or(operands) => write_chain(formatter, operands, "or"),
            Expr::And(operands) => write_chain(formatter, operands, "and"),
            Expr::Compare { op, left, right } => write!(formatter, "({left} {} {right})", op.tags_symbol()),
            Expr::Negate(operand) => write!(formatter, "(-{operand})"),
            Expr::Not(operand) => write!(formatter, "not({operand})"),
            Expr::StringTest { function, haystack, needle } => {
                write!(formatter, "{}({haystack}, {needle})", function.name())
            }
            Expr::Boolean(value) => formatter.write_str(if *value { "true()" } else { "false()" }),
            Expr::Literal(text) => write_literal(formatter, text),
            Expr::Number(value) => write!(formatter, "{value}"),
            Expr::Path(path) => write!(formatter, "{path}"),
        }
    }
}

/// `(a KEYWORD b KEYWORD c)`; a chain of one operand is just the operand.
fn write_chain(formatter: &mut Formatter<'_>, operands: &[Expr], keyword: &str) -> fmt::Result {
    formatter.write_char('(')?;
    for (index, operand) in operands.iter().enumerate() {
        if index > 0 {
            write!(formatter, " {keyword} ")?;
        }
        write!(formatter, "{operand}")?;
    }
    formatter.write_char(')')
}

/// A literal in single quotes, or in double quotes when it holds a single
/// quote: XPath 1.0 literals have no escapes.
fn write_literal(formatter: &mut Formatter<'_>, text: &str) -> fmt::Result {
    let quote = if text.contains('\'') { '"' } else { '\'' };
    write!(formatter, "{quote}{text}{quote}")
}

impl Display for LocationPath {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        if self.absolute && self.steps.is_empty() {
            // A bare `/` followed by an operator name would read the name as
            // a step (`/ or /a` is `/or/a`), so the root stands in parentheses.
            return formatter.write_str("(/)");
        }
        for (index, step) in self.steps.iter().enumerate() {
            let separator = match (index, self.absolute, step.descendants) {
                (_, _, true) if index == 0 && !self.absolute => ".//",
                (_, _, true) => "//",
                (0, false, false) => "",
                _ => "/",
            };
            write!(formatter, "{separator}{step}")?;
        }
        Ok(())
    }
}

impl Display for Step {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        match (self.axis, &self.test) {
            (Axis::SelfNode, NodeTest::Node) => formatter.write_char('.')?,
            (Axis::SelfNode, test) => write!(formatter, "self::{test}")?,
            (Axis::Attribute, test) => write!(formatter, "@{test}")?,
            (Axis::Child, test) => write!(formatter, "{test}")?,
        }
        for predicate in &self.predicates {
            write!(formatter, "[{predicate}]")?;
        }
        Ok(())
    }
}

impl Display for NodeTest {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        match self {
            NodeTest::Name(name) => formatter.write_str(name),
            NodeTest::AnyName => formatter.write_char('*'),
            NodeTest::Text => formatter.write_str("text()"),
            NodeTest::Node => formatter.write_str("node()"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::xpath::parser::parse;

    fn round_trip(text: &str) -> String {
        let expr = parse(text).expect("parses");
        let printed = expr.to_string();
        assert_eq!(parse(&printed).expect("printed text parses"), expr, "{printed}");
        printed
    }

    #[test]
    fn prints_parenthesised_and_parses_back() {
        assert_eq!(
            round_trip("/metadata/ATO[nickname='KTJR' and serialno='targ1234']"),
            "/metadata/ATO[((nickname = 'KTJR') and (serialno = 'targ1234'))]"
        );
        assert_eq!(round_trip("//a/@b >= -1.5 or not(x)"), "((//a/@b >= (-1.5)) or not(x))");
        assert_eq!(round_trip("a//text()[contains(., \"it's\")]"), "a//text()[contains(., \"it's\")]");
        assert_eq!(round_trip("(/) or /*/node()[1]"), "((/) or /*/node()[1])");
        assert_eq!(round_trip(".//x"), ".//x");
        assert_eq!(round_trip("true() = starts-with('ab', 'a')"), "(true() = starts-with('ab', 'a'))");
    }
}
