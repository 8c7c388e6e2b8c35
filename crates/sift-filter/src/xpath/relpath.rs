//! The relative paths that the value index reads from a captured element:
//! child element steps (`b`, `*`), possibly several, optionally ending in
//! `text()` or an attribute (`@x`, `@*`); no step at all is the element
//! itself (`.`).
//!
//! Such a path selects each node at most once from a given element, since
//! every node has one parent, so its nodes can be visited straight off the
//! captured tree, without the evaluator's node-set vectors, sorting or
//! merging.

use std::borrow::Cow;

use crate::xpath::ast::{Axis, LocationPath, NodeTest, Step};
use crate::xpath::document::{NodeId, XmlDocument};

/// One step of a [`RelPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum RelStep {
    /// The child elements with this name, or all of them (`*`).
    Child(Option<String>),
    /// The text children (`text()`); only as the last step.
    Text,
    /// The attribute with this name, or all of them (`@*`); only as the last step.
    Attribute(Option<String>),
}

/// A relative path of child steps, the kind the value index can read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RelPath {
    steps: Vec<RelStep>,
}

impl RelPath {
    /// The path as a [`RelPath`], if it has that shape: relative, no `//`,
    /// no predicates, `text()` and attributes only last. Steps `.` are
    /// left out, since they select the node they start from.
    pub(crate) fn from_path(path: &LocationPath) -> Option<RelPath> {
        if path.absolute {
            return None;
        }
        let kept: Vec<&Step> = path.steps.iter().filter(|step| !step.is_identity()).collect();
        let mut steps = Vec::with_capacity(kept.len());
        for (index, step) in kept.iter().enumerate() {
            if step.descendants || !step.predicates.is_empty() {
                return None;
            }
            let rel_step = rel_step(step)?;
            let last = index + 1 == kept.len();
            if !last && !matches!(rel_step, RelStep::Child(_)) {
                return None;
            }
            steps.push(rel_step);
        }
        Some(RelPath { steps })
    }

    /// Calls `visit` with the string-value of each node the path selects
    /// from `node`, in document order.
    pub(crate) fn for_each_value<'d>(
        &self,
        document: &'d XmlDocument,
        node: NodeId,
        visit: &mut impl FnMut(Cow<'d, str>),
    ) {
        visit_steps(&self.steps, document, node, visit);
    }
}

/// The [`RelStep`] for one step of a path, if it is one.
fn rel_step(step: &Step) -> Option<RelStep> {
    match (step.axis, &step.test) {
        (Axis::Child, NodeTest::Name(name)) => Some(RelStep::Child(Some(name.clone()))),
        (Axis::Child, NodeTest::AnyName) => Some(RelStep::Child(None)),
        (Axis::Child, NodeTest::Text) => Some(RelStep::Text),
        (Axis::Attribute, NodeTest::Name(name)) => Some(RelStep::Attribute(Some(name.clone()))),
        // On the attribute axis `node()` is every attribute, as `*` is.
        (Axis::Attribute, NodeTest::AnyName | NodeTest::Node) => Some(RelStep::Attribute(None)),
        _ => None,
    }
}

fn visit_steps<'d>(steps: &[RelStep], document: &'d XmlDocument, node: NodeId, visit: &mut impl FnMut(Cow<'d, str>)) {
    let Some((first, rest)) = steps.split_first() else {
        visit(document.string_value(node));
        return;
    };
    match first {
        RelStep::Child(name) => {
            for child in document.children(node) {
                let Some(child_name) = document.element_name(child) else { continue };
                if name.as_deref().is_none_or(|wanted| wanted == child_name) {
                    visit_steps(rest, document, child, visit);
                }
            }
        }
        RelStep::Text => {
            for child in document.children(node).filter(|&child| document.is_text(child)) {
                visit(document.string_value(child));
            }
        }
        RelStep::Attribute(name) => {
            for attribute in document.attributes_of(node) {
                if name.as_deref().is_none_or(|wanted| wanted == document.attribute_name(attribute)) {
                    visit(Cow::Borrowed(document.attribute_value(attribute)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xpath::ast::Expr;
    use crate::xpath::document::ROOT;
    use crate::xpath::parser::parse;

    fn rel_path(text: &str) -> Option<RelPath> {
        match parse(text).expect("parses") {
            Expr::Path(path) => RelPath::from_path(&path),
            other => panic!("not a path: {other:?}"),
        }
    }

    fn values(path: &str, xml: &str) -> Vec<String> {
        let document = XmlDocument::parse(xml.as_bytes()).expect("well-formed");
        let root_element = document.children(ROOT).next().expect("root element");
        let mut out = Vec::new();
        rel_path(path).expect("a relative path").for_each_value(&document, root_element, &mut |value| {
            out.push(value.into_owned());
        });
        out
    }

    #[test]
    fn recognises_child_paths_only() {
        for accepted in [".", "b", "./b", "b/c", "*/c", "b/text()", "text()", "@x", "@*", "b/@x"] {
            assert!(rel_path(accepted).is_some(), "{accepted}");
        }
        for refused in ["/b", "//b", ".//b", "b[1]", "b[c]", "@x/b", "text()/b", "node()", "b/node()"] {
            assert!(rel_path(refused).is_none(), "{refused}");
        }
        assert_eq!(rel_path("./b/."), rel_path("b"));
    }

    #[test]
    fn visits_every_selected_node() {
        let xml = "<r x='1'>t<b y='2'>u<c>5</c></b><b>v</b><d><c>6</c></d></r>";
        assert_eq!(values(".", xml), ["tu5v6"]);
        assert_eq!(values("b", xml), ["u5", "v"]);
        assert_eq!(values("*/c", xml), ["5", "6"]);
        assert_eq!(values("b/text()", xml), ["u", "v"]);
        assert_eq!(values("text()", xml), ["t"]);
        assert_eq!(values("@x", xml), ["1"]);
        assert_eq!(values("b/@*", xml), ["2"]);
        assert!(values("e", xml).is_empty());
    }
}
