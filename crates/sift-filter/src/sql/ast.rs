//! The syntax tree of a SQL message selector.
//!
//! The types are public so that a subscription index can look inside a
//! selector, for example to pull equality and range predicates out of a
//! conjunction ([`Expr::conjuncts`]) or a disjunctive normal form
//! ([`crate::sql::to_dnf`]).

use std::borrow::Cow;

use sift_core::{DeliveryMode, Message, Value};

use crate::compare::{ComparisonOp, Scalar};
use crate::sql::like::LikePattern;

/// A JMS header field that a selector can refer to by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderField {
    /// `JMSPriority`: the priority level, an integer 0-9.
    Priority,
    /// `JMSTimestamp`: when the broker accepted the message, an integer in
    /// milliseconds since the Unix epoch.
    Timestamp,
    /// `JMSMessageID`: the string `ID:` followed by the message id in decimal.
    MessageId,
    /// `JMSDeliveryMode`: the string `PERSISTENT` for persistent messages and
    /// `NON_PERSISTENT` for the others.
    DeliveryMode,
    /// `JMSExpiration`: the expiry, an integer in milliseconds since the Unix
    /// epoch, or 0 when the message never expires.
    Expiration,
}

impl HeaderField {
    /// Every header field.
    pub const ALL: [HeaderField; 5] = [
        HeaderField::Priority,
        HeaderField::Timestamp,
        HeaderField::MessageId,
        HeaderField::DeliveryMode,
        HeaderField::Expiration,
    ];

    /// The identifier that names the field in a selector.
    pub fn name(self) -> &'static str {
        match self {
            HeaderField::Priority => "JMSPriority",
            HeaderField::Timestamp => "JMSTimestamp",
            HeaderField::MessageId => "JMSMessageID",
            HeaderField::DeliveryMode => "JMSDeliveryMode",
            HeaderField::Expiration => "JMSExpiration",
        }
    }

    /// The field an identifier names, if any; identifiers are case-sensitive.
    pub fn from_name(name: &str) -> Option<HeaderField> {
        HeaderField::ALL.into_iter().find(|field| field.name() == name)
    }

    /// True for the fields whose value is a string rather than an integer.
    pub fn is_string(self) -> bool {
        matches!(self, HeaderField::MessageId | HeaderField::DeliveryMode)
    }

    /// The field's value for a message.
    pub fn value(self, message: &Message) -> Value {
        self.scalar(message).into_value()
    }

    /// The field's value for a message, without allocating for the
    /// delivery mode, which evaluation asks for often.
    pub(crate) fn scalar(self, message: &Message) -> Scalar<'static> {
        const NANOS_PER_MILLI: u64 = 1_000_000;
        // u64::MAX nanoseconds is about 1.8e13 milliseconds, so the
        // millisecond fields always fit in an i64.
        let millis = |nanos: u64| Scalar::Int((nanos / NANOS_PER_MILLI) as i64);
        match self {
            HeaderField::Priority => Scalar::Int(i64::from(message.priority.level())),
            HeaderField::Timestamp => millis(message.timestamp_ns),
            HeaderField::MessageId => Scalar::Str(Cow::Owned(format!("ID:{}", message.id))),
            HeaderField::DeliveryMode => Scalar::Str(Cow::Borrowed(match message.delivery_mode {
                DeliveryMode::Persistent => "PERSISTENT",
                DeliveryMode::BestEffort | DeliveryMode::Reliable => "NON_PERSISTENT",
            })),
            HeaderField::Expiration => millis(message.expiry_ns),
        }
    }
}

/// A unary arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `+x`: the number itself.
    Plus,
    /// `-x`: the number negated.
    Minus,
}

/// A binary arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithmeticOp {
    /// `+`
    Add,
    /// `-`
    Subtract,
    /// `*`
    Multiply,
    /// `/` (integer division truncates toward zero, as in Java).
    Divide,
}

impl ArithmeticOp {
    /// How the operator is written.
    pub fn symbol(self) -> &'static str {
        match self {
            ArithmeticOp::Add => "+",
            ArithmeticOp::Subtract => "-",
            ArithmeticOp::Multiply => "*",
            ArithmeticOp::Divide => "/",
        }
    }
}

/// A selector expression.
///
/// Evaluating a value expression (constants, properties, header fields,
/// arithmetic) gives a value or NULL; evaluating a condition gives a
/// [`crate::sql::Truth`]. A condition used as a value is a boolean, or NULL
/// when UNKNOWN, and a value used as a condition is UNKNOWN unless it is a
/// boolean.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal: string, integer, float, TRUE or FALSE.
    Constant(Value),
    /// A message property; NULL when the message lacks it.
    Property(String),
    /// A JMS header field.
    Header(HeaderField),
    /// `+x` or `-x`.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        operand: Box<Expr>,
    },
    /// `left OP right` with an arithmetic operator.
    Arithmetic {
        /// The operator.
        op: ArithmeticOp,
        /// The left operand.
        left: Box<Expr>,
        /// The right operand.
        right: Box<Expr>,
    },
    /// `left OP right` with a comparison operator.
    Comparison {
        /// The operator.
        op: ComparisonOp,
        /// The left operand.
        left: Box<Expr>,
        /// The right operand.
        right: Box<Expr>,
    },
    /// `operand [NOT] BETWEEN low AND high`, bounds included.
    Between {
        /// The value tested.
        operand: Box<Expr>,
        /// The lower bound.
        low: Box<Expr>,
        /// The upper bound.
        high: Box<Expr>,
        /// True for `NOT BETWEEN`.
        negated: bool,
    },
    /// `operand [NOT] IN (literal, ...)`.
    In {
        /// The value tested.
        operand: Box<Expr>,
        /// The literals, strings or (an extension to JMS) numbers.
        list: Vec<Value>,
        /// True for `NOT IN`.
        negated: bool,
    },
    /// `operand [NOT] LIKE 'pattern' [ESCAPE 'c']`.
    Like {
        /// The value tested.
        operand: Box<Expr>,
        /// The compiled pattern.
        pattern: LikePattern,
        /// True for `NOT LIKE`.
        negated: bool,
    },
    /// `operand IS [NOT] NULL`.
    IsNull {
        /// The value tested.
        operand: Box<Expr>,
        /// True for `IS NOT NULL`.
        negated: bool,
    },
    /// `NOT condition`.
    Not(Box<Expr>),
    /// `a AND b AND ...`: an unparenthesised chain is one node. Empty is TRUE.
    And(Vec<Expr>),
    /// `a OR b OR ...`: an unparenthesised chain is one node. Empty is FALSE.
    Or(Vec<Expr>),
}

impl Expr {
    /// The conditions of a top-level AND, nested ANDs flattened; a selector
    /// that is not an AND is its own single conjunct. The selector holds
    /// exactly when every conjunct does.
    pub fn conjuncts(&self) -> Vec<&Expr> {
        let mut conjuncts = Vec::new();
        collect_conjuncts(self, &mut conjuncts);
        conjuncts
    }
}

fn collect_conjuncts<'e>(expr: &'e Expr, conjuncts: &mut Vec<&'e Expr>) {
    match expr {
        Expr::And(operands) => {
            for operand in operands {
                collect_conjuncts(operand, conjuncts);
            }
        }
        other => conjuncts.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::{Priority, TopicName};

    #[test]
    fn header_fields_read_the_system_fields() {
        let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
        message.id = 42;
        message.timestamp_ns = 1_700_000_000_123_456_789;
        message.priority = Priority::new(7).expect("valid priority");
        message.delivery_mode = DeliveryMode::Reliable;
        assert_eq!(HeaderField::Priority.value(&message), Value::Int(7));
        assert_eq!(HeaderField::Timestamp.value(&message), Value::Int(1_700_000_000_123));
        assert_eq!(HeaderField::MessageId.value(&message), Value::Str("ID:42".into()));
        assert_eq!(HeaderField::DeliveryMode.value(&message), Value::Str("NON_PERSISTENT".into()));
        assert_eq!(HeaderField::Expiration.value(&message), Value::Int(0));
        message.delivery_mode = DeliveryMode::Persistent;
        message.expiry_ns = u64::MAX;
        assert_eq!(HeaderField::DeliveryMode.value(&message), Value::Str("PERSISTENT".into()));
        assert_eq!(HeaderField::Expiration.value(&message), Value::Int(18_446_744_073_709));
    }

    #[test]
    fn header_names_are_case_sensitive() {
        for field in HeaderField::ALL {
            assert_eq!(HeaderField::from_name(field.name()), Some(field));
        }
        assert_eq!(HeaderField::from_name("jmspriority"), None);
    }

    #[test]
    fn conjuncts_flatten_nested_ands() {
        let atom = |name: &str| Expr::Property(name.to_string());
        let expr =
            Expr::And(vec![atom("a"), Expr::And(vec![atom("b"), atom("c")]), Expr::Or(vec![atom("d"), atom("e")])]);
        let names: Vec<String> = expr.conjuncts().into_iter().map(|conjunct| format!("{conjunct:?}")).collect();
        assert_eq!(names.len(), 4);
        assert_eq!(atom("a").conjuncts(), vec![&atom("a")]);
    }
}
