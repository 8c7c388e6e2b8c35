//! Recognises the residuals that the value index answers: comparisons of
//! a relative path with a constant, alone or as a conjunction inside one
//! predicate.
//!
//! ```text
//! . >= 2003                                 (from /m/year >= 2003)
//! @rev = 2                                  (from /m/ATO/@rev = 2)
//! .[nickname = 'KTJR' and serialno = 'targ1234']
//! ```
//!
//! Each comparison becomes a [`TestSpec`]: the path, and what some node of
//! it must satisfy, spelled out with XPath 1.0's rules for a node-set
//! against a constant. Against a string, `=` and `!=` compare the nodes'
//! string-values as strings; against a number, or with `<`, `<=`, `>`,
//! `>=`, each string-value is converted to a number first (the constant
//! too), and NaN compares false except under `!=`. A comparison that can
//! never hold (an ordering against the string `'x'`, which is NaN) or whose
//! constant is a boolean is left to the evaluator.

use crate::compare::ComparisonOp;
use crate::xpath::ast::{Axis, Expr, LocationPath, NodeTest};
use crate::xpath::document::{XmlDocument, ROOT};
use crate::xpath::eval::evaluate;
use crate::xpath::relpath::RelPath;
use crate::xpath::value::{string_to_number, NodeRef, Value};

/// A number that is not NaN, with `-0` and `0` made one, so that it can be
/// hashed and compared for equality as XPath compares numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct NumberKey(u64);

impl NumberKey {
    /// The key of `value`, or `None` for NaN, which equals nothing.
    pub(crate) fn new(value: f64) -> Option<NumberKey> {
        if value.is_nan() {
            return None;
        }
        // Adding zero turns -0 into +0 and leaves every other value alone.
        Some(NumberKey((value + 0.0).to_bits()))
    }

    /// The number.
    pub(crate) fn value(self) -> f64 {
        f64::from_bits(self.0)
    }
}

/// What an indexed test asks of the nodes its path selects: that some
/// node's string-value passes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum TestKind {
    /// The string-value equals the text (`path = 'text'`).
    TextEquals(Box<str>),
    /// The string-value differs from the text (`path != 'text'`).
    TextDiffers(Box<str>),
    /// The string-value, as a number, equals the number (`path = 3`).
    NumberEquals(NumberKey),
    /// The string-value, as a number, compares with the threshold by the
    /// operator, which is never `=` (`path >= 3`, `path != 3`, `path < '3'`).
    Ordered(ComparisonOp, NumberKey),
}

impl TestKind {
    /// True for the tests a hash lookup answers, which hold for one value.
    pub(crate) fn is_equality(&self) -> bool {
        matches!(self, TestKind::TextEquals(_) | TestKind::NumberEquals(_))
    }
}

/// One indexed comparison: a path from the captured element and its test.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TestSpec {
    pub(crate) path: RelPath,
    pub(crate) kind: TestKind,
}

/// The tests whose conjunction is the residual, if it has an indexed
/// shape: one comparison (`. >= 2003`, `@x = 'a'`), or the element itself
/// with predicates that are comparisons joined by `and`
/// (`.[b = 1 and c = 'x'][d > 2]`). Repeated tests are kept once.
pub(crate) fn indexed_tests(residual: &Expr) -> Option<Vec<TestSpec>> {
    let mut tests = Vec::new();
    match residual {
        Expr::Compare { .. } => tests.push(comparison(residual)?),
        Expr::Path(path) => {
            for predicate in own_predicates(path)? {
                conjuncts(predicate, &mut tests)?;
            }
        }
        _ => return None,
    }
    let mut unique: Vec<TestSpec> = Vec::with_capacity(tests.len());
    for test in tests {
        if !unique.contains(&test) {
            unique.push(test);
        }
    }
    Some(unique)
}

/// The predicates of a residual path that is only `.[…]`.
fn own_predicates(path: &LocationPath) -> Option<&[Expr]> {
    let [own] = path.steps.as_slice() else { return None };
    let plain_self = !path.absolute && !own.descendants && own.axis == Axis::SelfNode && own.test == NodeTest::Node;
    (plain_self && !own.predicates.is_empty()).then_some(own.predicates.as_slice())
}

/// Appends the comparisons of an `and` tree; `None` if another operator
/// or a comparison of another shape is in it.
fn conjuncts(expr: &Expr, tests: &mut Vec<TestSpec>) -> Option<()> {
    match expr {
        Expr::And(operands) => operands.iter().try_for_each(|operand| conjuncts(operand, tests)),
        Expr::Compare { .. } => {
            tests.push(comparison(expr)?);
            Some(())
        }
        _ => None,
    }
}

/// `relpath OP constant` or `constant OP relpath` as a test.
fn comparison(expr: &Expr) -> Option<TestSpec> {
    let Expr::Compare { op, left, right } = expr else { return None };
    let (path, op, constant) = match (&**left, &**right) {
        (Expr::Path(path), constant) if !constant.mentions_path() => (path, *op, constant),
        (constant, Expr::Path(path)) if !constant.mentions_path() => (path, op.mirrored(), constant),
        _ => return None,
    };
    let path = RelPath::from_path(path)?;
    let document = XmlDocument::empty();
    let kind = match evaluate(&document, constant, NodeRef::Node(ROOT)) {
        Value::Text(text) => text_test(op, &text)?,
        Value::Number(number) => number_test(op, number)?,
        Value::Boolean(_) | Value::Nodes(_) => return None,
    };
    Some(TestSpec { path, kind })
}

fn text_test(op: ComparisonOp, text: &str) -> Option<TestKind> {
    match op {
        ComparisonOp::Equal => Some(TestKind::TextEquals(text.into())),
        ComparisonOp::NotEqual => Some(TestKind::TextDiffers(text.into())),
        ordering => Some(TestKind::Ordered(ordering, NumberKey::new(string_to_number(text))?)),
    }
}

fn number_test(op: ComparisonOp, number: f64) -> Option<TestKind> {
    let key = NumberKey::new(number)?;
    match op {
        ComparisonOp::Equal => Some(TestKind::NumberEquals(key)),
        other => Some(TestKind::Ordered(other, key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xpath::formula::Formula;
    use crate::xpath::parser::parse;
    use crate::xpath::plan::{plan, Plan};

    /// The tests of the residual of a filter that is one atom.
    fn residual_tests(filter: &str) -> Option<Vec<TestKind>> {
        let Plan::Exact(Formula::Atom(spec)) = plan(&parse(filter).expect("parses")) else {
            panic!("{filter} is not one atom")
        };
        let residual = spec.residual.expect("a residual");
        indexed_tests(&residual).map(|tests| tests.into_iter().map(|test| test.kind).collect())
    }

    fn number(value: f64) -> NumberKey {
        NumberKey::new(value).expect("not NaN")
    }

    #[test]
    fn comparisons_follow_the_constant_type() {
        let ordered = |op, value| Some(vec![TestKind::Ordered(op, number(value))]);
        assert_eq!(residual_tests("/m/a = 'x'"), Some(vec![TestKind::TextEquals("x".into())]));
        assert_eq!(residual_tests("/m/a/@k != 'x'"), Some(vec![TestKind::TextDiffers("x".into())]));
        assert_eq!(residual_tests("/m/a/text() = 2"), Some(vec![TestKind::NumberEquals(number(2.0))]));
        assert_eq!(residual_tests("/m/a[b/c < ' 3 ']"), ordered(ComparisonOp::Less, 3.0));
        assert_eq!(residual_tests("/m/a[2003 <= .]"), ordered(ComparisonOp::GreaterOrEqual, 2003.0));
        assert_eq!(residual_tests("/m/a[b != -1]"), ordered(ComparisonOp::NotEqual, -1.0));
        assert_eq!(residual_tests("/m/a = -0"), residual_tests("/m/a = 0"), "-0 and 0 are one number");
    }

    #[test]
    fn conjunctions_inside_one_predicate() {
        let tests =
            residual_tests("/m/ATO[nickname = 'KTJR' and serialno = 'targ1234'][@rev >= 2 and nickname = 'KTJR']");
        assert_eq!(
            tests,
            Some(vec![
                TestKind::TextEquals("KTJR".into()),
                TestKind::TextEquals("targ1234".into()),
                TestKind::Ordered(ComparisonOp::GreaterOrEqual, number(2.0)),
            ])
        );
    }

    #[test]
    fn other_shapes_are_left_to_the_evaluator() {
        for refused in [
            "/m/a[b]",
            "/m/a[b = 1 or c = 2]",
            "/m/a[not(b = 1)]",
            "/m/a[b = 1]/c",
            "/m/a[b = 1] = 'x'",
            "/m/a[b = true()]",
            "/m/a[b = c]",
            "/m/a[b > 'x']",
            "/m/a = -'x'",
            "/m/a[b[1] = 2]",
            "/m/a[.//b = 2]",
            "/m/a[contains(b, 'x')]",
            "/m/a[b = 1 and contains(c, 'x')]",
        ] {
            assert_eq!(residual_tests(refused), None, "{refused}");
        }
    }
}
