//! XPath 1.0 values, their conversions and comparisons.
//!
//! The conversions follow the `boolean()`, `number()` and `string()`
//! functions of XPath 1.0, and comparisons follow its section 3.4: a
//! node-set compares true when some node's string-value (or, against a
//! number, that string converted to a number) compares true; against a
//! boolean, the node-set counts as its own emptiness test; between other
//! values, `=` and `!=` compare as booleans if either side is one, else as
//! numbers if either side is one, else as strings, and `<`, `<=`, `>`, `>=`
//! always compare as numbers.

use std::borrow::Cow;

use crate::compare::ComparisonOp;
use crate::xpath::document::{NodeId, XmlDocument};
use crate::xpath::lexer::is_xml_whitespace;

/// A node of a document: the root, an element or a text node, or an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NodeRef {
    /// The root, an element or a text node.
    Node(NodeId),
    /// An attribute, by its index in the document.
    Attribute(usize),
}

impl NodeRef {
    /// A key that sorts nodes in document order: an element's attributes
    /// come after it and before its children.
    pub(crate) fn order_key(self, document: &XmlDocument) -> (usize, usize) {
        match self {
            NodeRef::Node(node) => (node, 0),
            NodeRef::Attribute(attribute) => (document.attribute_owner(attribute), attribute + 1),
        }
    }

    /// XPath's string-value of the node.
    pub(crate) fn string_value(self, document: &XmlDocument) -> Cow<'_, str> {
        match self {
            NodeRef::Node(node) => document.string_value(node),
            NodeRef::Attribute(attribute) => Cow::Borrowed(document.attribute_value(attribute)),
        }
    }
}

/// The value of an XPath expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    /// Nodes in document order, without repeats.
    Nodes(Vec<NodeRef>),
    /// A boolean.
    Boolean(bool),
    /// A number (IEEE 754 double, as in XPath).
    Number(f64),
    /// A string.
    Text(Cow<'a, str>),
}

impl<'a> Value<'a> {
    /// XPath's `boolean()`.
    pub(crate) fn to_boolean(&self) -> bool {
        match self {
            Value::Nodes(nodes) => !nodes.is_empty(),
            Value::Boolean(value) => *value,
            Value::Number(value) => *value != 0.0 && !value.is_nan(),
            Value::Text(text) => !text.is_empty(),
        }
    }

    /// XPath's `number()`.
    pub(crate) fn to_number(&self, document: &XmlDocument) -> f64 {
        match self {
            Value::Nodes(_) => string_to_number(&self.to_text(document)),
            Value::Boolean(value) => f64::from(u8::from(*value)),
            Value::Number(value) => *value,
            Value::Text(text) => string_to_number(text),
        }
    }

    /// XPath's `string()`; for a node-set, the string-value of its first node.
    pub(crate) fn to_text<'d>(&'d self, document: &'d XmlDocument) -> Cow<'d, str> {
        match self {
            Value::Nodes(nodes) => nodes.first().map_or(Cow::Borrowed(""), |node| node.string_value(document)),
            Value::Boolean(value) => Cow::Borrowed(if *value { "true" } else { "false" }),
            Value::Number(value) => Cow::Owned(number_to_string(*value)),
            Value::Text(text) => Cow::Borrowed(text),
        }
    }
}

/// XPath's conversion of a string to a number: optional white space, an
/// optional minus, digits with an optional decimal point, optional white
/// space; anything else (an exponent, a plus sign, an empty string) is NaN.
pub(crate) fn string_to_number(text: &str) -> f64 {
    let trimmed = text.trim_matches(is_xml_whitespace);
    let unsigned = trimmed.strip_prefix('-').unwrap_or(trimmed);
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    let has_digits = !whole.is_empty() || !fraction.is_empty();
    if !has_digits || !all_digits(whole) || !all_digits(fraction) {
        return f64::NAN;
    }
    trimmed.parse().unwrap_or(f64::NAN)
}

/// XPath's conversion of a number to a string: integers without a decimal
/// point, no exponent, `NaN`, `Infinity` and `-Infinity`.
pub(crate) fn number_to_string(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else if value == 0.0 {
        // Negative zero prints as `0` too.
        "0".to_string()
    } else {
        // Rust prints floats in decimal without an exponent, as XPath does.
        format!("{value}")
    }
}

/// Whether `left OP right` holds under XPath 1.0's rules.
pub(crate) fn compare(document: &XmlDocument, op: ComparisonOp, left: &Value<'_>, right: &Value<'_>) -> bool {
    match (left, right) {
        (Value::Nodes(left_nodes), Value::Nodes(right_nodes)) => left_nodes.iter().any(|left_node| {
            let left_text = Value::Text(left_node.string_value(document));
            right_nodes.iter().any(|right_node| {
                compare_plain(document, op, &left_text, &Value::Text(right_node.string_value(document)))
            })
        }),
        (Value::Nodes(nodes), Value::Boolean(_)) => {
            compare_plain(document, op, &Value::Boolean(!nodes.is_empty()), right)
        }
        (Value::Boolean(_), Value::Nodes(nodes)) => {
            compare_plain(document, op, left, &Value::Boolean(!nodes.is_empty()))
        }
        (Value::Nodes(nodes), other) => {
            nodes.iter().any(|node| compare_plain(document, op, &Value::Text(node.string_value(document)), other))
        }
        (other, Value::Nodes(nodes)) => {
            nodes.iter().any(|node| compare_plain(document, op, other, &Value::Text(node.string_value(document))))
        }
        (left, right) => compare_plain(document, op, left, right),
    }
}

/// Compares two values that are not node-sets.
fn compare_plain(document: &XmlDocument, op: ComparisonOp, left: &Value<'_>, right: &Value<'_>) -> bool {
    if op.is_equality() {
        let equal = match (left, right) {
            (Value::Boolean(_), _) | (_, Value::Boolean(_)) => left.to_boolean() == right.to_boolean(),
            (Value::Number(_), _) | (_, Value::Number(_)) => left.to_number(document) == right.to_number(document),
            _ => left.to_text(document) == right.to_text(document),
        };
        return equal == (op == ComparisonOp::Equal);
    }
    compare_numbers(op, left.to_number(document), right.to_number(document))
}

/// `left OP right` for numbers: NaN is unordered, so only `!=` holds for it.
pub(crate) fn compare_numbers(op: ComparisonOp, left: f64, right: f64) -> bool {
    match left.partial_cmp(&right) {
        Some(ordering) => op.holds(ordering),
        None => op == ComparisonOp::NotEqual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_convert_to_numbers_by_xpath_rules() {
        assert_eq!(string_to_number(" 2003 "), 2003.0);
        assert_eq!(string_to_number("\n-1.5\t"), -1.5);
        assert_eq!(string_to_number(".5"), 0.5);
        assert_eq!(string_to_number("7."), 7.0);
        for not_a_number in ["", " ", "-", ".", "1e3", "+1", "0x10", "1 2", "September", "Infinity", "NaN"] {
            assert!(string_to_number(not_a_number).is_nan(), "{not_a_number:?}");
        }
    }

    #[test]
    fn numbers_convert_to_strings_by_xpath_rules() {
        assert_eq!(number_to_string(26.0), "26");
        assert_eq!(number_to_string(-0.0), "0");
        assert_eq!(number_to_string(0.25), "0.25");
        assert_eq!(number_to_string(1e21), "1000000000000000000000");
        assert_eq!(number_to_string(f64::NAN), "NaN");
        assert_eq!(number_to_string(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn plain_values_compare_by_the_strongest_type() {
        let document = XmlDocument::empty();
        let text = |value: &'static str| Value::Text(Cow::Borrowed(value));
        let holds = |op, left: &Value<'_>, right: &Value<'_>| compare(&document, op, left, right);
        assert!(holds(ComparisonOp::Equal, &text("1.0"), &Value::Number(1.0)));
        assert!(!holds(ComparisonOp::Equal, &text("1.0"), &text("1")));
        assert!(holds(ComparisonOp::Equal, &text("x"), &Value::Boolean(true)));
        assert!(holds(ComparisonOp::Less, &text("1"), &text("2")));
        assert!(!holds(ComparisonOp::Less, &text("a"), &text("b")), "strings do not order in XPath 1.0");
        assert!(holds(ComparisonOp::NotEqual, &Value::Number(f64::NAN), &Value::Number(f64::NAN)));
        assert!(!holds(ComparisonOp::LessOrEqual, &Value::Number(f64::NAN), &Value::Number(1.0)));
        assert!(holds(ComparisonOp::Equal, &Value::Nodes(Vec::new()), &Value::Boolean(false)));
        assert!(!holds(ComparisonOp::NotEqual, &Value::Nodes(Vec::new()), &text("x")));
    }
}
