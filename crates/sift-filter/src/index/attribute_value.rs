//! An attribute's value in the message being matched, as the scratch keeps
//! it for the range checks of clustered conjunctions.
//!
//! A clustered conjunction (see `cluster.rs`) tests its range predicates by
//! comparing the attribute's value with the bound rather than by looking
//! the predicate up among the satisfied ones, so that range predicates used
//! only by clustered conjunctions are never enumerated. The value is
//! recorded when the attribute is first looked up for the message. The
//! scratch outlives the message, so it cannot borrow the message's strings:
//! a number is kept as its [`NumberKey`], a string as where to find it
//! again.

use std::borrow::Cow;

use sift_core::{Message, Value};

use crate::compare::Scalar;
use crate::index::number::NumberKey;
use crate::index::predicate::{Bound, RangeOp};
use crate::index::range;
use crate::sql::HeaderField;

/// Where a string value sits in the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextAt {
    /// The property at this position of the message's property list.
    Property(usize),
    /// A header field whose value is a string.
    Header(HeaderField),
}

/// The value an attribute has in the current message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum AttributeValue {
    /// A number other than NaN.
    Number(NumberKey),
    /// A string, found again in the message when a check needs it.
    Text(TextAt),
    /// A value that orders with no bound: a boolean, or NaN.
    #[default]
    Unordered,
}

impl AttributeValue {
    /// The value of the property at `position` of the message's list.
    pub(crate) fn of_property(position: usize, scalar: &Scalar<'_>) -> AttributeValue {
        AttributeValue::of_scalar(scalar, TextAt::Property(position))
    }

    /// The value of the header `field`.
    pub(crate) fn of_header(field: HeaderField, scalar: &Scalar<'_>) -> AttributeValue {
        AttributeValue::of_scalar(scalar, TextAt::Header(field))
    }

    fn of_scalar(scalar: &Scalar<'_>, text_at: TextAt) -> AttributeValue {
        match scalar {
            Scalar::Int(_) | Scalar::Float(_) => {
                NumberKey::from_scalar(scalar).map_or(AttributeValue::Unordered, AttributeValue::Number)
            }
            Scalar::Str(_) => AttributeValue::Text(text_at),
            Scalar::Bool(_) => AttributeValue::Unordered,
        }
    }

    /// True when `attribute OP bound` holds for this value of `message`,
    /// exactly as the attribute's range index would have found it: numbers
    /// order with numbers by their keys, strings with strings, and nothing
    /// else orders at all.
    pub(crate) fn satisfies(&self, op: RangeOp, bound: &Bound, message: &Message) -> bool {
        match (self, bound) {
            (AttributeValue::Number(number), Bound::Number(bound)) => range::admits(op, number, bound),
            (AttributeValue::Text(text_at), Bound::Text(bound)) => {
                text(*text_at, message).is_some_and(|text| range::admits(op, text.as_ref(), &**bound))
            }
            _ => false,
        }
    }

    /// The string this value is in `message`; `None` for a number or an
    /// unordered value.
    pub(crate) fn text<'message>(&self, message: &'message Message) -> Option<Cow<'message, str>> {
        match self {
            AttributeValue::Text(text_at) => text(*text_at, message),
            AttributeValue::Number(_) | AttributeValue::Unordered => None,
        }
    }
}

/// The string at `text_at` in `message`; `None` only if the message is not
/// the one the value was recorded from.
fn text(text_at: TextAt, message: &Message) -> Option<Cow<'_, str>> {
    match text_at {
        TextAt::Property(position) => match &message.properties.get(position)?.1 {
            Value::Str(text) => Some(Cow::Borrowed(&**text)),
            _ => None,
        },
        TextAt::Header(field) => match field.scalar(message) {
            Scalar::Str(text) => Some(text),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use sift_core::TopicName;

    use super::*;

    fn message(properties: &[(&str, Value)]) -> Message {
        let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
        message.properties = properties.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
        message
    }

    #[test]
    fn numbers_order_across_integer_and_float() {
        let message = message(&[]);
        let half = AttributeValue::of_property(0, &Scalar::Float(2.5));
        let two = Bound::Number(NumberKey::from_int(2));
        assert!(half.satisfies(RangeOp::Greater, &two, &message));
        assert!(!half.satisfies(RangeOp::LessOrEqual, &two, &message));
        let whole = AttributeValue::of_property(0, &Scalar::Float(2.0));
        assert!(whole.satisfies(RangeOp::GreaterOrEqual, &two, &message));
        assert!(!whole.satisfies(RangeOp::Greater, &two, &message));
        let nan = AttributeValue::of_property(0, &Scalar::Float(f64::NAN));
        assert_eq!(nan, AttributeValue::Unordered);
        assert!(!nan.satisfies(RangeOp::Less, &two, &message));
    }

    #[test]
    fn strings_are_found_again_in_the_message() {
        let message = message(&[("n", Value::Int(1)), ("s", Value::Str("IBM".into()))]);
        let value = AttributeValue::of_property(1, &Scalar::from_value(&message.properties[1].1));
        assert_eq!(value, AttributeValue::Text(TextAt::Property(1)));
        assert!(value.satisfies(RangeOp::Greater, &Bound::Text("HP".into()), &message));
        assert!(!value.satisfies(RangeOp::Greater, &Bound::Text("JPM".into()), &message));
        assert!(!value.satisfies(RangeOp::Greater, &Bound::Number(NumberKey::from_int(0)), &message));
        assert_eq!(value.text(&message).as_deref(), Some("IBM"));
        let flag = AttributeValue::of_property(0, &Scalar::Bool(true));
        assert_eq!(flag.text(&message), None);
        assert!(!flag.satisfies(RangeOp::Less, &Bound::Text("x".into()), &message));
    }

    #[test]
    fn string_headers_are_read_from_the_message() {
        let message = message(&[]);
        let mode = HeaderField::DeliveryMode;
        let value = AttributeValue::of_header(mode, &mode.scalar(&message));
        assert_eq!(value, AttributeValue::Text(TextAt::Header(mode)));
        assert!(value.satisfies(RangeOp::Greater, &Bound::Text("A".into()), &message));
    }
}
