//! The `xpath` filter language: XPath 1.0 over a message's XML metadata.
//!
//! ```text
//! /metadata/ATO[nickname='KTJR' and serialno='targ1234']
//! /metadata/BasicTemporal/beginning_date_time_group/year >= 2003
//!     and /metadata/BasicTemporal/ending_date_time_group/day <= 26
//! ```
//!
//! A filter is an XPath expression evaluated with the document root as the
//! context node; it matches when its value is a non-empty node-set or the
//! boolean true. The language is the part of XPath 1.0 that filters need:
//!
//! - location paths, absolute (`/a/b`) or relative (`a/b`, which from the
//!   root is the same), with `/` (child), `//` (descendant), `*`, `@name`,
//!   `@*`, `.`, `text()` and `node()`;
//! - predicates `[...]` on any step, where relative paths start at the
//!   step's node and a number keeps the node at that position (`[1]`);
//! - comparisons `= != < <= > >=` with XPath 1.0's rules (a node-set
//!   compares true when some node's string-value does; against a number
//!   that string is converted to a number, `" 2003 "` being 2003 and
//!   `"x"` NaN), `and`, `or`, `not()`, `contains()`, `starts-with()`,
//!   `true()`, `false()`, unary minus, string and number literals and
//!   parentheses.
//!
//! Names match as written, prefix included (`jbi:ATO` matches elements
//! written `jbi:ATO`): there is no namespace context to resolve prefixes
//! with. Not supported: other axes and `..`, unions (`|`), arithmetic,
//! variables, and the other functions; they are refused with a position.
//!
//! [`XPathFilter`] evaluates one filter on a parsed [`XmlDocument`].
//! [`XPathSet`] holds many filters and matches them all in one streaming
//! pass over the metadata, so that the cost of matching grows with what
//! matches rather than with the number of filters:
//!
//! - element paths are shared in one automaton (in the manner of YFilter),
//!   each filter planned into atoms, a path prefix ending at a *capture*
//!   state plus a residual decided on the captured element's subtree;
//! - residuals that compare relative paths with constants
//!   (`/m/year >= 2003`, `/m/ATO[nickname = 'KTJR' and serialno = 'x']`)
//!   are not evaluated per filter but answered by a *value index*: tests
//!   grouped per (capture state, relative path), equalities in hash maps
//!   from constant to test, orderings in arrays sorted by threshold, so
//!   that at each captured element's end tag every group reads its path
//!   once and finds the satisfied tests by lookup and binary search, a
//!   conjunction holding only when its tests hold on one same element;
//! - after the pass, a filter is evaluated only when one of its
//!   *triggers* holds, a necessary condition chosen rare (a test, or an
//!   equality together with another test) and checked with a few more
//!   necessary tests as guards, so that the filters evaluated are nearly
//!   those that match.
//!
//! Other residuals are evaluated on the captured subtree, and filters the
//! automaton cannot decide at all on the whole document tree, only when
//! their structure matched. Adding and removing filters is incremental.

mod ast;
mod atoms;
mod automaton;
mod collect;
mod display;
mod document;
mod entities;
mod eval;
mod formula;
mod guards;
mod lexer;
mod matcher;
mod parser;
mod plan;
mod program;
mod range_tests;
mod reader;
mod relpath;
mod scratch;
mod set;
mod test_marks;
mod trigger_lists;
mod triggers;
mod value;
mod value_group;
mod value_index;
mod value_test;
mod xml_error;

#[cfg(test)]
mod jbi_tests;

use sift_core::Message;

pub use ast::{Axis, Expr, Kind, LocationPath, NodeTest, Step, StringFunction};
pub use document::XmlDocument;
pub use scratch::XPathScratch;
pub use set::XPathSet;
pub use xml_error::XmlError;

use crate::error::FilterError;

/// How deeply a filter may nest (brackets, parentheses, function calls,
/// signs and chained comparisons). Parsing and evaluation recurse over the
/// tree, so the limit keeps hostile filters from overflowing the stack.
pub const MAX_DEPTH: usize = 32;

/// How many steps, operators and operands a filter may have, so that one
/// subscription cannot make every document's evaluation expensive.
pub const MAX_PARTS: usize = 1024;

/// How long a filter's text may be, in bytes.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;

/// How deeply elements of a metadata document may nest.
pub const XML_DEPTH_MAX: usize = 64;

/// How many elements a metadata document may have.
pub const XML_ELEMENTS_MAX: usize = 10_000;

/// How many attributes one element of a metadata document may have.
pub const XML_ELEMENT_ATTRIBUTES_MAX: usize = 256;

/// How many attributes a metadata document may have in all.
pub const XML_ATTRIBUTES_MAX: usize = 20_000;

/// A parsed XPath filter.
#[derive(Debug, Clone, PartialEq)]
pub struct XPathFilter {
    expr: Expr,
}

impl XPathFilter {
    /// Parses a filter, or says where and why it is malformed. The filter
    /// must be a path or a condition: a string or number alone is refused.
    pub fn parse(text: &str) -> Result<XPathFilter, FilterError> {
        parser::parse(text).map(|expr| XPathFilter { expr })
    }

    /// The filter's syntax tree.
    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// True when the filter matches the document: its value is a non-empty
    /// node-set or true. This is the reference semantics for [`XPathSet`].
    pub fn matches_document(&self, document: &XmlDocument) -> bool {
        eval::holds_at_root(document, &self.expr)
    }

    /// True when the message has metadata that is a well-formed document
    /// and the filter matches it; false when the metadata is absent or
    /// malformed.
    pub fn matches(&self, message: &Message) -> bool {
        let Some(metadata) = &message.metadata else {
            return false;
        };
        XmlDocument::parse(metadata).is_ok_and(|document| self.matches_document(&document))
    }
}

impl std::fmt::Display for XPathFilter {
    /// The filter, fully parenthesised; it parses back to the same tree.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}", self.expr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentFilter, FilterLanguage};

    #[test]
    fn errors_name_the_language_and_position() {
        let error = XPathFilter::parse("/metadata/ATO[nickname = ]").expect_err("malformed");
        assert_eq!(error.language(), FilterLanguage::Xpath);
        assert_eq!(error.position(), 25);
        assert_eq!(
            error.to_string(),
            "xpath: at byte 25: expected a path, a literal, a number, `(` or a function call, found `]`"
        );
    }

    #[test]
    fn content_filter_reports_syntax_errors_and_holds_valid_filters() {
        let malformed = ContentFilter::parse(FilterLanguage::Xpath, "/a[").expect_err("malformed");
        assert_eq!(malformed.position(), 3);
        let valid = ContentFilter::parse(FilterLanguage::Xpath, "/a[b > 1]").expect("valid");
        assert_eq!(valid.language(), FilterLanguage::Xpath);
        let mut message = Message::new(sift_core::TopicName::new("t").expect("topic"), "");
        message.metadata = Some(b"<a><b>2</b></a>".to_vec().into());
        assert!(valid.matches(&message));
        message.metadata = Some(b"<a><b>0</b></a>".to_vec().into());
        assert!(!valid.matches(&message));
    }

    #[test]
    fn display_reparses_to_an_equal_filter() {
        let filter =
            XPathFilter::parse("//ATO[@rev >= 2 or not(starts-with(serialno, 'targ'))]/nickname").expect("parses");
        assert_eq!(XPathFilter::parse(&filter.to_string()), Ok(filter));
    }
}
