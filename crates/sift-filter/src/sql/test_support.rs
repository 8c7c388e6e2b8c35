//! Helpers for the SQL tests: messages, and proptest strategies for random
//! messages and random well-formed selector trees.

use proptest::prelude::*;
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::compare::ComparisonOp;
use crate::sql::ast::{ArithmeticOp, Expr, HeaderField, UnaryOp};
use crate::sql::like::LikePattern;

/// Property names the random selectors and messages share.
const NAMES: [&str; 5] = ["a", "b", "s", "flag", "missing"];

/// A message with the given properties and default system fields.
pub(crate) fn message_with(properties: &[(&str, Value)]) -> Message {
    let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
    message.properties = properties.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
    message
}

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3_i64..4).prop_map(Value::Int),
        any::<i64>().prop_map(Value::Int),
        prop::sample::select(vec![0.0, -0.0, 0.5, 1.0, -2.5, 1e300, f64::NAN]).prop_map(Value::Float),
        prop::sample::select(vec!["", "x", "IBM", "it's", "_a%"]).prop_map(|text| Value::Str(text.into())),
        any::<bool>().prop_map(Value::Bool),
    ]
}

/// Random messages: each shared property absent or of any type, and random
/// system fields.
pub(crate) fn any_message() -> impl Strategy<Value = Message> {
    let properties = prop::collection::vec(prop::option::of(any_value()), NAMES.len());
    (properties, 0_u8..10, any::<u64>(), any::<u64>(), any::<bool>()).prop_map(
        |(values, priority, id, timestamp_ns, persistent)| {
            let mut message = message_with(&[]);
            message.properties =
                NAMES.iter().zip(values).filter_map(|(name, value)| Some((name.to_string(), value?))).collect();
            message.priority = Priority::new(priority).expect("priority in range");
            message.id = id;
            message.timestamp_ns = timestamp_ns;
            message.delivery_mode = if persistent { DeliveryMode::Persistent } else { DeliveryMode::Reliable };
            message
        },
    )
}

fn property() -> impl Strategy<Value = Expr> {
    prop::sample::select(NAMES.to_vec()).prop_map(|name| Expr::Property(name.to_string()))
}

fn numeric_leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        (-3_i64..4).prop_map(|int| Expr::Constant(Value::Int(int))),
        any::<i64>().prop_map(|int| Expr::Constant(Value::Int(int))),
        prop::num::f64::NORMAL.prop_map(|float| Expr::Constant(Value::Float(float))),
        prop::sample::select(vec![0.0, -0.0, 0.5, -2.5]).prop_map(|float| Expr::Constant(Value::Float(float))),
        property(),
        prop::sample::select(vec![HeaderField::Priority, HeaderField::Timestamp, HeaderField::Expiration])
            .prop_map(Expr::Header),
    ]
}

/// Numeric expressions: literals, properties, numeric headers, arithmetic.
fn numeric_expr() -> impl Strategy<Value = Expr> {
    numeric_leaf().prop_recursive(3, 12, 2, |inner| {
        let unary_op = prop::sample::select(vec![UnaryOp::Plus, UnaryOp::Minus]);
        let binary_op = prop::sample::select(vec![
            ArithmeticOp::Add,
            ArithmeticOp::Subtract,
            ArithmeticOp::Multiply,
            ArithmeticOp::Divide,
        ]);
        prop_oneof![
            (unary_op, inner.clone()).prop_map(|(op, operand)| Expr::Unary { op, operand: Box::new(operand) }),
            (binary_op, inner.clone(), inner).prop_map(|(op, left, right)| Expr::Arithmetic {
                op,
                left: Box::new(left),
                right: Box::new(right),
            }),
        ]
    })
}

/// Any value expression: numeric, string, boolean literal or property.
fn value_expr() -> impl Strategy<Value = Expr> {
    prop_oneof![
        3 => numeric_expr(),
        1 => prop::sample::select(vec!["", "x", "IBM", "it's"]).prop_map(|text| Expr::Constant(Value::Str(text.into()))),
        1 => prop::sample::select(vec![HeaderField::MessageId, HeaderField::DeliveryMode]).prop_map(Expr::Header),
        1 => any::<bool>().prop_map(|flag| Expr::Constant(Value::Bool(flag))),
    ]
}

fn comparison_op() -> impl Strategy<Value = ComparisonOp> {
    prop::sample::select(vec![
        ComparisonOp::Equal,
        ComparisonOp::NotEqual,
        ComparisonOp::Less,
        ComparisonOp::LessOrEqual,
        ComparisonOp::Greater,
        ComparisonOp::GreaterOrEqual,
    ])
}

fn like_pattern() -> impl Strategy<Value = LikePattern> {
    let patterns =
        vec![("%", None), ("I%", None), ("_", None), ("it's%", None), ("\\_%", Some('\\')), ("x!%", Some('!'))];
    prop::sample::select(patterns)
        .prop_map(|(pattern, escape)| LikePattern::new(pattern, escape).expect("test patterns compile"))
}

/// Predicates: everything that is a condition without AND, OR or NOT.
fn atom() -> impl Strategy<Value = Expr> {
    let in_items = prop::collection::vec(
        any_value().prop_filter("IN lists hold strings and numbers", |value| {
            !matches!(value, Value::Bool(_)) && !matches!(value, Value::Float(float) if float.is_nan())
        }),
        1..4,
    );
    prop_oneof![
        3 => (comparison_op(), value_expr(), value_expr())
            .prop_filter("booleans compare only for equality", |(op, left, right)| {
                let boolean = |side: &Expr| matches!(side, Expr::Constant(Value::Bool(_)));
                matches!(op, ComparisonOp::Equal | ComparisonOp::NotEqual) || !(boolean(left) || boolean(right))
            })
            .prop_map(|(op, left, right)| Expr::Comparison { op, left: Box::new(left), right: Box::new(right) }),
        1 => (numeric_expr(), numeric_expr(), numeric_expr(), any::<bool>()).prop_map(
            |(operand, low, high, negated)| Expr::Between {
                operand: Box::new(operand),
                low: Box::new(low),
                high: Box::new(high),
                negated,
            }
        ),
        1 => (value_expr(), in_items, any::<bool>()).prop_map(|(operand, list, negated)| Expr::In {
            operand: Box::new(operand),
            list,
            negated,
        }),
        1 => (value_expr(), like_pattern(), any::<bool>()).prop_map(|(operand, pattern, negated)| Expr::Like {
            operand: Box::new(operand),
            pattern,
            negated,
        }),
        1 => (value_expr(), any::<bool>()).prop_map(|(operand, negated)| Expr::IsNull {
            operand: Box::new(operand),
            negated,
        }),
        1 => property(),
        1 => any::<bool>().prop_map(|flag| Expr::Constant(Value::Bool(flag))),
    ]
}

/// Random well-typed selectors: predicates combined with NOT, AND, OR and
/// comparisons between conditions.
pub(crate) fn any_selector() -> impl Strategy<Value = Expr> {
    atom().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|operand| Expr::Not(Box::new(operand))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Expr::And),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Expr::Or),
            (prop::sample::select(vec![ComparisonOp::Equal, ComparisonOp::NotEqual]), inner.clone(), inner)
                .prop_map(|(op, left, right)| Expr::Comparison { op, left: Box::new(left), right: Box::new(right) }),
        ]
    })
}
