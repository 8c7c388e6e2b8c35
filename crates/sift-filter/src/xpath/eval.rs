//! Evaluates an XPath expression on a document tree: the reference
//! semantics that the shared automaton must reproduce.

use std::borrow::Cow;

use crate::xpath::ast::{Axis, Expr, LocationPath, NodeTest, Step};
use crate::xpath::document::{XmlDocument, ROOT};
use crate::xpath::value::{compare, NodeRef, Value};

/// The value of `expr` with `context` as the context node.
pub(crate) fn evaluate<'a>(document: &'a XmlDocument, expr: &'a Expr, context: NodeRef) -> Value<'a> {
    Evaluator { document }.evaluate(expr, context)
}

/// True when `expr`, converted to a boolean, holds with `context` as the
/// context node: a node-set is true when it is not empty.
pub(crate) fn holds(document: &XmlDocument, expr: &Expr, context: NodeRef) -> bool {
    evaluate(document, expr, context).to_boolean()
}

/// True when `expr` holds with the root as the context node, as a filter.
pub(crate) fn holds_at_root(document: &XmlDocument, expr: &Expr) -> bool {
    holds(document, expr, NodeRef::Node(ROOT))
}

struct Evaluator<'a> {
    document: &'a XmlDocument,
}

impl<'a> Evaluator<'a> {
    fn evaluate(&self, expr: &'a Expr, context: NodeRef) -> Value<'a> {
        let document = self.document;
        match expr {
            Expr::Or(operands) => {
                Value::Boolean(operands.iter().any(|operand| self.evaluate(operand, context).to_boolean()))
            }
            Expr::And(operands) => {
                Value::Boolean(operands.iter().all(|operand| self.evaluate(operand, context).to_boolean()))
            }
            Expr::Compare { op, left, right } => {
                let left = self.evaluate(left, context);
                let right = self.evaluate(right, context);
                Value::Boolean(compare(document, *op, &left, &right))
            }
            Expr::Negate(operand) => Value::Number(-self.evaluate(operand, context).to_number(document)),
            Expr::Not(operand) => Value::Boolean(!self.evaluate(operand, context).to_boolean()),
            Expr::StringTest { function, haystack, needle } => {
                let haystack = self.evaluate(haystack, context);
                let needle = self.evaluate(needle, context);
                Value::Boolean(function.holds(&haystack.to_text(document), &needle.to_text(document)))
            }
            Expr::Boolean(value) => Value::Boolean(*value),
            Expr::Literal(text) => Value::Text(Cow::Borrowed(text)),
            Expr::Number(value) => Value::Number(*value),
            Expr::Path(path) => Value::Nodes(self.select(path, context)),
        }
    }

    /// The nodes a path selects from `context`, in document order.
    fn select(&self, path: &'a LocationPath, context: NodeRef) -> Vec<NodeRef> {
        let mut current = vec![if path.absolute { NodeRef::Node(ROOT) } else { context }];
        for step in &path.steps {
            current = self.apply_step(step, &current);
            if current.is_empty() {
                break;
            }
        }
        current
    }

    /// One step from every node of `contexts` (in document order), merged
    /// into document order without repeats.
    fn apply_step(&self, step: &'a Step, contexts: &[NodeRef]) -> Vec<NodeRef> {
        let mut selected = Vec::new();
        // A `//` step from a node inside a subtree already walked finds
        // nothing new, since the step from each descendant depends only on
        // that descendant; skipping it keeps `//a//b` linear.
        let mut walked_until = 0;
        for &context in contexts {
            match context {
                NodeRef::Node(node) if step.descendants => {
                    if node < walked_until {
                        continue;
                    }
                    let subtree = self.document.subtree(node);
                    walked_until = subtree.end;
                    for descendant in subtree {
                        self.apply_axis(step, NodeRef::Node(descendant), &mut selected);
                    }
                }
                // An attribute's descendant-or-self is itself.
                _ => self.apply_axis(step, context, &mut selected),
            }
        }
        selected.sort_by_key(|node| node.order_key(self.document));
        selected.dedup();
        selected
    }

    /// Appends the nodes the step's axis, test and predicates keep from one
    /// context node, in document order.
    fn apply_axis(&self, step: &'a Step, context: NodeRef, out: &mut Vec<NodeRef>) {
        let start = out.len();
        let document = self.document;
        match (step.axis, context) {
            (Axis::Child, NodeRef::Node(node)) => out.extend(
                document.children(node).filter(|&child| self.node_passes(&step.test, child)).map(NodeRef::Node),
            ),
            (Axis::Attribute, NodeRef::Node(node)) => out.extend(
                document
                    .attributes_of(node)
                    .filter(|&attribute| attribute_passes(&step.test, document.attribute_name(attribute)))
                    .map(NodeRef::Attribute),
            ),
            (Axis::SelfNode, NodeRef::Node(node)) if self.node_passes(&step.test, node) => out.push(context),
            (Axis::SelfNode, NodeRef::Attribute(_)) if step.test == NodeTest::Node => out.push(context),
            _ => {}
        }
        for predicate in &step.predicates {
            let candidates: Vec<NodeRef> = out.drain(start..).collect();
            for (index, candidate) in candidates.into_iter().enumerate() {
                if self.predicate_holds(predicate, candidate, index + 1) {
                    out.push(candidate);
                }
            }
        }
    }

    /// A predicate whose value is a number keeps the node at that position
    /// (counted from 1); any other value is converted to a boolean.
    fn predicate_holds(&self, predicate: &'a Expr, node: NodeRef, position: usize) -> bool {
        match self.evaluate(predicate, node) {
            Value::Number(wanted) => wanted == position as f64,
            other => other.to_boolean(),
        }
    }

    /// Whether the root, an element or a text node passes a node test.
    fn node_passes(&self, test: &NodeTest, node: usize) -> bool {
        match test {
            NodeTest::Name(name) => self.document.element_name(node) == Some(name.as_str()),
            NodeTest::AnyName => self.document.element_name(node).is_some(),
            NodeTest::Text => self.document.is_text(node),
            NodeTest::Node => true,
        }
    }
}

/// Whether an attribute passes a node test on the attribute axis.
fn attribute_passes(test: &NodeTest, name: &str) -> bool {
    match test {
        NodeTest::Name(wanted) => wanted == name,
        NodeTest::AnyName | NodeTest::Node => true,
        NodeTest::Text => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xpath::parser::parse;

    const DOCUMENT: &str = "<r><a id='1'>x<b>2</b></a><a id='2'><b>10</b><b>3</b><c><b>7</b></c></a>t</r>";

    fn filter_holds(text: &str) -> bool {
        let document = XmlDocument::parse(DOCUMENT.as_bytes()).expect("well-formed");
        holds_at_root(&document, &parse(text).expect("parses"))
    }

    fn selected(text: &str) -> Vec<String> {
        let document = XmlDocument::parse(DOCUMENT.as_bytes()).expect("well-formed");
        let expr = parse(text).expect("parses");
        let Value::Nodes(nodes) = evaluate(&document, &expr, NodeRef::Node(ROOT)) else { panic!("a node-set") };
        nodes.into_iter().map(|node| node.string_value(&document).into_owned()).collect()
    }

    #[test]
    fn paths_select_in_document_order() {
        assert_eq!(selected("/r/a/b"), ["2", "10", "3"]);
        assert_eq!(selected("//b"), ["2", "10", "3", "7"]);
        assert_eq!(selected("/r//a//b"), ["2", "10", "3", "7"]);
        assert_eq!(selected("//a/@id"), ["1", "2"]);
        assert_eq!(selected("/r/*/c/b"), ["7"]);
        assert_eq!(selected("/r/text()"), ["t"]);
        assert_eq!(selected("/r/a/text()"), ["x"]);
        assert_eq!(selected("//a[@id = 2]/b"), ["10", "3"]);
        assert_eq!(selected("/r/a[b = 3]/@id"), ["2"]);
        assert_eq!(selected("/r/node()"), ["x2", "1037", "t"]);
        assert_eq!(selected("/r/a/."), ["x2", "1037"]);
        assert_eq!(selected("/r/a[.//b = 7]/@*"), ["2"]);
    }

    #[test]
    fn positional_predicates_count_per_parent() {
        assert_eq!(selected("//b[1]"), ["2", "10", "7"]);
        assert_eq!(selected("/r/a[2]/b[2]"), ["3"]);
        assert_eq!(selected("/r/a/b[1][. > 5]"), ["10"]);
        assert_eq!(selected("/r/a/b[. > 1][2]"), ["3"]);
    }

    #[test]
    fn comparisons_follow_xpath_rules() {
        assert!(filter_holds("//b > 9"), "some b is greater than 9");
        assert!(filter_holds("//b < 3"));
        assert!(!filter_holds("//b > 10"));
        assert!(filter_holds("//b = '10'"));
        assert!(!filter_holds("//b = '10.0'"), "strings compare as strings");
        assert!(filter_holds("//b = 10.0"), "numbers compare as numbers");
        assert!(filter_holds("//b != 2"), "some b differs from 2");
        assert!(filter_holds("/r/a/b = /r/a/c/b or //b[. = 7]"));
        assert!(filter_holds("/none = false()"));
        assert!(!filter_holds("/none != 'x'"), "an empty node-set compares false");
        assert!(filter_holds("9 < //b"));
        assert!(filter_holds("-(//a/@id) = -1"), "negation takes the first node's number");
    }

    #[test]
    fn string_functions_use_the_first_node() {
        assert!(filter_holds("contains(/r, 'x2')"));
        assert!(filter_holds("starts-with(//b, '2')"));
        assert!(!filter_holds("starts-with(//b, '1')"), "only the first b counts");
        assert!(filter_holds("not(contains(//a, 'zz')) and true()"));
    }
}
