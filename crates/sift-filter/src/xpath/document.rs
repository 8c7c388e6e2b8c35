//! A parsed metadata document: the tree XPath expressions are evaluated on.
//!
//! Nodes are stored in document order in one vector, each with the index
//! just past its subtree, so that an element's descendants are a contiguous
//! range and its string-value is the text nodes in that range. Names and
//! text live in one string buffer. The same structure, built incrementally,
//! holds the subtrees the shared automaton captures while it streams.

use std::borrow::Cow;
use std::ops::Range;

use crate::xpath::reader::{read_xml, AttributeList, XmlSink};
use crate::xpath::xml_error::XmlError;

/// Index of a node in a document.
pub(crate) type NodeId = usize;

/// The root node (the document node, parent of the root element).
pub(crate) const ROOT: NodeId = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeKind {
    Root,
    Element { name: (usize, usize), attributes: (usize, usize) },
    Text((usize, usize)),
}

#[derive(Debug, Clone, Copy)]
struct Node {
    kind: NodeKind,
    /// Index just past the node's subtree.
    end: NodeId,
}

#[derive(Debug, Clone)]
struct AttributeRecord {
    owner: NodeId,
    name: (usize, usize),
    value: (usize, usize),
}

/// A well-formed XML document, parsed into a tree for XPath evaluation.
#[derive(Debug, Clone)]
pub struct XmlDocument {
    nodes: Vec<Node>,
    attributes: Vec<AttributeRecord>,
    strings: String,
    /// Elements opened and not yet closed while building.
    open: Vec<NodeId>,
}

impl XmlDocument {
    /// Parses `bytes` as a UTF-8 XML document, or says what is wrong, where
    /// and why. Documents are limited to [`crate::xpath::XML_DEPTH_MAX`]
    /// levels and [`crate::xpath::XML_ELEMENTS_MAX`] elements, and may not
    /// contain a DTD.
    pub fn parse(bytes: &[u8]) -> Result<XmlDocument, XmlError> {
        let mut document = XmlDocument::empty();
        document.parse_into(bytes)?;
        Ok(document)
    }

    /// The number of elements in the document.
    pub fn element_count(&self) -> usize {
        self.nodes.iter().filter(|node| matches!(node.kind, NodeKind::Element { .. })).count()
    }

    /// A document holding only the root node, to build on.
    pub(crate) fn empty() -> XmlDocument {
        XmlDocument {
            nodes: vec![Node { kind: NodeKind::Root, end: 1 }],
            attributes: Vec::new(),
            strings: String::new(),
            open: Vec::new(),
        }
    }

    /// Replaces the content with the document in `bytes`, reusing the
    /// buffers. On error the content is unspecified.
    pub(crate) fn parse_into(&mut self, bytes: &[u8]) -> Result<(), XmlError> {
        self.clear();
        read_xml(bytes, self)?;
        self.nodes[ROOT].end = self.nodes.len();
        Ok(())
    }

    /// Drops everything but the root node, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.nodes.truncate(1);
        self.nodes[ROOT].end = 1;
        self.attributes.clear();
        self.strings.clear();
        self.open.clear();
    }

    fn push_string(&mut self, text: &str) -> (usize, usize) {
        let start = self.strings.len();
        self.strings.push_str(text);
        (start, self.strings.len())
    }

    fn string(&self, (start, end): (usize, usize)) -> &str {
        &self.strings[start..end]
    }

    /// Appends an element as the last child of the innermost open element
    /// (or of the root) and opens it; returns its id.
    pub(crate) fn push_element(&mut self, name: &str, attributes: &AttributeList) -> NodeId {
        let id = self.nodes.len();
        let name = self.push_string(name);
        let first_attribute = self.attributes.len();
        for (attribute_name, value) in attributes.iter() {
            let name = self.push_string(attribute_name);
            let value = self.push_string(value);
            self.attributes.push(AttributeRecord { owner: id, name, value });
        }
        let kind = NodeKind::Element { name, attributes: (first_attribute, self.attributes.len()) };
        self.nodes.push(Node { kind, end: id + 1 });
        self.open.push(id);
        id
    }

    /// Appends a text node as the last child of the innermost open element.
    pub(crate) fn push_text(&mut self, text: &str) {
        let id = self.nodes.len();
        let span = self.push_string(text);
        self.nodes.push(Node { kind: NodeKind::Text(span), end: id + 1 });
    }

    /// Closes the innermost open element.
    pub(crate) fn close_element(&mut self) {
        if let Some(id) = self.open.pop() {
            self.nodes[id].end = self.nodes.len();
        }
    }

    /// The element's name, if the node is an element.
    pub(crate) fn element_name(&self, node: NodeId) -> Option<&str> {
        match self.nodes.get(node)?.kind {
            NodeKind::Element { name, .. } => Some(self.string(name)),
            _ => None,
        }
    }

    /// True for text nodes.
    pub(crate) fn is_text(&self, node: NodeId) -> bool {
        matches!(self.nodes.get(node).map(|node| node.kind), Some(NodeKind::Text(_)))
    }

    /// The node and its descendants, as a range of ids in document order.
    pub(crate) fn subtree(&self, node: NodeId) -> Range<NodeId> {
        node..self.nodes.get(node).map_or(node, |entry| entry.end)
    }

    /// The children of the root or of an element, in document order.
    pub(crate) fn children(&self, node: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let end = self.subtree(node).end;
        let mut next = node + 1;
        std::iter::from_fn(move || {
            let child = next;
            if child >= end {
                return None;
            }
            next = self.nodes[child].end;
            Some(child)
        })
    }

    /// The attribute ids of an element (empty for other nodes).
    pub(crate) fn attributes_of(&self, node: NodeId) -> Range<usize> {
        match self.nodes.get(node).map(|node| node.kind) {
            Some(NodeKind::Element { attributes: (start, end), .. }) => start..end,
            _ => 0..0,
        }
    }

    /// The element an attribute belongs to.
    pub(crate) fn attribute_owner(&self, attribute: usize) -> NodeId {
        self.attributes.get(attribute).map_or(ROOT, |record| record.owner)
    }

    /// An attribute's name.
    pub(crate) fn attribute_name(&self, attribute: usize) -> &str {
        self.attributes.get(attribute).map_or("", |record| self.string(record.name))
    }

    /// An attribute's (normalized) value.
    pub(crate) fn attribute_value(&self, attribute: usize) -> &str {
        self.attributes.get(attribute).map_or("", |record| self.string(record.value))
    }

    /// XPath's string-value of the root, an element or a text node: the
    /// text of the node, or of all text nodes beneath it, in document order.
    pub(crate) fn string_value(&self, node: NodeId) -> Cow<'_, str> {
        let mut texts = self.subtree(node).filter_map(|id| match self.nodes[id].kind {
            NodeKind::Text(span) => Some(self.string(span)),
            _ => None,
        });
        let Some(first) = texts.next() else {
            return Cow::Borrowed("");
        };
        match texts.next() {
            None => Cow::Borrowed(first),
            Some(second) => {
                let mut joined = String::with_capacity(first.len() + second.len());
                joined.push_str(first);
                joined.push_str(second);
                texts.for_each(|text| joined.push_str(text));
                Cow::Owned(joined)
            }
        }
    }
}

impl XmlSink for XmlDocument {
    fn start_element(&mut self, name: &str, attributes: &AttributeList) {
        self.push_element(name, attributes);
    }

    fn text(&mut self, text: &str) {
        self.push_text(text);
    }

    fn end_element(&mut self) {
        self.close_element();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_tree_in_document_order() {
        let document = XmlDocument::parse(b"<r a='1' b='2'>x<c>y</c><d/>z</r>").expect("well-formed");
        assert_eq!(document.element_count(), 3);
        let root_element = document.children(ROOT).next().expect("root element");
        assert_eq!(document.element_name(root_element), Some("r"));
        let children: Vec<NodeId> = document.children(root_element).collect();
        assert_eq!(children.len(), 4);
        assert!(document.is_text(children[0]));
        assert_eq!(document.element_name(children[1]), Some("c"));
        assert_eq!(document.string_value(root_element), "xyz");
        assert_eq!(document.string_value(children[1]), "y");
        assert_eq!(document.string_value(children[2]), "");
        let attributes = document.attributes_of(root_element);
        assert_eq!(attributes.len(), 2);
        assert_eq!(document.attribute_name(attributes.start), "a");
        assert_eq!(document.attribute_value(attributes.start + 1), "2");
        assert_eq!(document.attribute_owner(attributes.start), root_element);
    }

    #[test]
    fn parse_reports_malformed_input() {
        let error = XmlDocument::parse(b"<a><b></a>").expect_err("mismatched");
        assert!(matches!(error, XmlError::Syntax { .. }), "{error}");
        assert!(XmlDocument::parse(b"not xml").is_err());
    }
}
