//! The message model of DESIGN §1: what a publisher sends and a subscriber gets.
//!
//! A message is a topic, typed properties (the JMS message properties and the
//! GES tag=value pairs), an optional XML metadata document (what XPath
//! subscriptions look at), an opaque payload, and system fields that the
//! broker stamps or carries. The payload and the metadata are `Bytes` so that
//! a message can be fanned out to many subscribers without copying them.

use bytes::Bytes;

use crate::topic::TopicName;

/// Highest message priority; priorities run from 0 (lowest) to 9, as in JMS.
pub const PRIORITY_MAX: u8 = 9;

/// Priority a message gets when the publisher does not choose one (JMS default).
pub const PRIORITY_DEFAULT: u8 = 4;

/// The property that puts a message in a message group (JMS's name for
/// it, which every door keeps): a queue group, or the consumers sharing a
/// durable subscription, give every message of one group (the property's
/// string value) to the same member, so that one consumer sees the group
/// in order (`docs/PROTOCOL.md` §6.8).
pub const GROUP_PROPERTY: &str = "JMSXGroupID";

/// The property that holds a message back until a time (JMS 2.0's
/// `JMSDeliveryTime`, which every door keeps): an integer, milliseconds
/// since the epoch. No subscriber gets the message before then
/// (`docs/PROTOCOL.md` §6.12).
pub const DELIVERY_TIME_PROPERTY: &str = "JMSDeliveryTime";

/// The property that names a message for duplicate detection on a
/// replicated stream (as NATS JetStream's `Nats-Msg-Id`): a publisher that
/// sends a message again after a lost confirm gives it the same value, and
/// the stream stores it once while it remembers the id
/// (`storage.replicated_keys_max` messages; docs/STORAGE.md).
pub const MSG_ID_PROPERTY: &str = "Sift-Msg-Id";

/// A delivery time (`time_ms`, milliseconds since the epoch) as
/// nanoseconds, when it is later than `now_ns`: when a message is held
/// back. Times at or before the epoch hold nothing back.
pub fn release_ns_after(time_ms: i64, now_ns: u64) -> Option<u64> {
    let release_ns = u64::try_from(time_ms).ok()?.saturating_mul(1_000_000);
    (release_ns > now_ns).then_some(release_ns)
}

/// The empty publisher name, shared so that `Message::new` does not allocate it.
fn empty_publisher() -> std::sync::Arc<str> {
    static EMPTY: std::sync::LazyLock<std::sync::Arc<str>> = std::sync::LazyLock::new(|| std::sync::Arc::from(""));
    EMPTY.clone()
}

/// A typed property value.
///
/// Four types, as in JMS selectors and GES tag=value events. Strings are
/// reference counted (`Arc<str>`) so that cloning a message is cheap.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `true` or `false`.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit IEEE float.
    Float(f64),
    /// A UTF-8 string.
    Str(std::sync::Arc<str>),
}

impl Value {
    /// Parses a command-line style value, typed by its form: `true`/`false`,
    /// integers (in their plain decimal form), decimals, and otherwise strings. A value in double quotes is
    /// always a string, without the quotes, so `"42"` is the string `42`.
    pub fn parse_typed(text: &str) -> Value {
        if text.len() >= 2 && text.starts_with('"') && text.ends_with('"') {
            return Value::Str(text[1..text.len() - 1].into());
        }
        match text {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
        // An integer only in its one decimal form (no sign `+`, no leading
        // zeros), so that its text is the number's text: `007` and `+5`
        // stay strings, and a string operation (SQL `LIKE`) on the number
        // sees what was written.
        if let Ok(int) = text.parse::<i64>() {
            if int.to_string() == text {
                return Value::Int(int);
            }
            return Value::Str(text.into());
        }
        let looks_numeric = text.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
        if looks_numeric {
            if let Ok(float) = text.parse::<f64>() {
                return Value::Float(float);
            }
        }
        Value::Str(text.into())
    }

    /// The name of this value's type, for messages and JSON output.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(value) => write!(formatter, "{value}"),
            Value::Int(value) => write!(formatter, "{value}"),
            Value::Float(value) => write!(formatter, "{value:?}"),
            Value::Str(value) => write!(formatter, "{value:?}"),
        }
    }
}

/// How hard the system tries to deliver a message (DESIGN §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeliveryMode {
    /// At most once; never blocks the publisher.
    #[default]
    BestEffort,
    /// At least once, in publisher order; confirmed, acknowledged, redelivered.
    Reliable,
    /// Reliable and stored durably before it is confirmed.
    Persistent,
}

impl DeliveryMode {
    /// The wire code of the mode.
    pub fn code(self) -> u8 {
        match self {
            DeliveryMode::BestEffort => 0,
            DeliveryMode::Reliable => 1,
            DeliveryMode::Persistent => 2,
        }
    }

    /// The mode with the given wire code, if any.
    pub fn from_code(code: u8) -> Option<DeliveryMode> {
        match code {
            0 => Some(DeliveryMode::BestEffort),
            1 => Some(DeliveryMode::Reliable),
            2 => Some(DeliveryMode::Persistent),
            _ => None,
        }
    }

    /// True when the subscriber must acknowledge the message.
    pub fn needs_ack(self) -> bool {
        !matches!(self, DeliveryMode::BestEffort)
    }

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            DeliveryMode::BestEffort => "best-effort",
            DeliveryMode::Reliable => "reliable",
            DeliveryMode::Persistent => "persistent",
        }
    }
}

impl std::str::FromStr for DeliveryMode {
    type Err = MessageError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "best-effort" => Ok(DeliveryMode::BestEffort),
            "reliable" => Ok(DeliveryMode::Reliable),
            "persistent" => Ok(DeliveryMode::Persistent),
            other => Err(MessageError::UnknownDeliveryMode(other.to_string())),
        }
    }
}

/// A message priority, 0 (lowest) to 9 (highest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(u8);

impl Priority {
    /// A priority, or an error when it is above 9.
    pub fn new(level: u8) -> Result<Priority, MessageError> {
        if level > PRIORITY_MAX {
            return Err(MessageError::PriorityOutOfRange(level));
        }
        Ok(Priority(level))
    }

    /// The numeric level, 0-9.
    pub fn level(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority(PRIORITY_DEFAULT)
    }
}

/// Why a message or one of its fields is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MessageError {
    /// Priorities run from 0 to 9.
    #[error("priority {0} is out of range 0-9")]
    PriorityOutOfRange(u8),
    /// The delivery mode is not one of best-effort, reliable, persistent.
    #[error("unknown delivery mode {0:?}: expected best-effort, reliable or persistent")]
    UnknownDeliveryMode(String),
}

/// One message, as published and as delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The topic the message is published on.
    pub topic: TopicName,
    /// Typed properties in publisher order; names are case-sensitive.
    pub properties: Vec<(String, Value)>,
    /// Optional XML metadata document (JBI metadata); bytes as sent.
    pub metadata: Option<Bytes>,
    /// Opaque payload; never interpreted or re-encoded by the broker.
    pub payload: Bytes,
    /// Broker-assigned id, unique within a broker run; 0 until stamped.
    pub id: u64,
    /// Name of the publishing client, stamped by the broker from the
    /// handshake. Reference counted: every message of a connection shares it.
    pub publisher: std::sync::Arc<str>,
    /// Publisher's own sequence number for this message.
    pub sequence: u64,
    /// When the message was sent, in nanoseconds since the Unix epoch by the
    /// clock of whoever holds it: the broker's acceptance time, or the
    /// publisher's own reading when it asked to stamp it (carried into each
    /// holder's clock on the way, see [`crate::clock`]).
    pub timestamp_ns: u64,
    /// How far `timestamp_ns` may be from the true instant in the holder's
    /// clock: 0 for a reading of that clock, else the sum of the clock
    /// offset bounds of the hops it crossed. Saturates at `u32::MAX`.
    pub time_error_ns: u32,
    /// Delivery priority, higher first.
    pub priority: Priority,
    /// Absolute expiry in nanoseconds since the Unix epoch; 0 means never.
    pub expiry_ns: u64,
    /// How hard to try to deliver it.
    pub delivery_mode: DeliveryMode,
    /// Number of broker-to-broker hops taken so far.
    pub hop_count: u8,
}

impl Message {
    /// A best-effort message with default priority and no properties.
    pub fn new(topic: TopicName, payload: impl Into<Bytes>) -> Message {
        Message {
            topic,
            properties: Vec::new(),
            metadata: None,
            payload: payload.into(),
            id: 0,
            publisher: empty_publisher(),
            sequence: 0,
            timestamp_ns: 0,
            time_error_ns: 0,
            priority: Priority::default(),
            expiry_ns: 0,
            delivery_mode: DeliveryMode::BestEffort,
            hop_count: 0,
        }
    }

    /// The value of a property, if the message has it. A linear scan: messages
    /// carry a handful of properties, where a scan beats hashing.
    pub fn property(&self, name: &str) -> Option<&Value> {
        self.properties.iter().find(|(candidate, _)| candidate == name).map(|(_, value)| value)
    }

    /// True when the message has an expiry and it is at or before `now_ns`.
    pub fn is_expired(&self, now_ns: u64) -> bool {
        self.expiry_ns != 0 && self.expiry_ns <= now_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_typed_follows_the_form_of_the_text() {
        assert_eq!(Value::parse_typed("true"), Value::Bool(true));
        assert_eq!(Value::parse_typed("false"), Value::Bool(false));
        assert_eq!(Value::parse_typed("42"), Value::Int(42));
        assert_eq!(Value::parse_typed("-7"), Value::Int(-7));
        assert_eq!(Value::parse_typed("2.5"), Value::Float(2.5));
        assert_eq!(Value::parse_typed("1e3"), Value::Float(1000.0));
        assert_eq!(Value::parse_typed("KTJR"), Value::Str("KTJR".into()));
        assert_eq!(Value::parse_typed("\"42\""), Value::Str("42".into()));
        assert_eq!(Value::parse_typed("inf"), Value::Str("inf".into()));
        assert_eq!(Value::parse_typed("nan"), Value::Str("nan".into()));
    }

    #[test]
    fn priority_is_bounded() {
        assert!(Priority::new(9).is_ok());
        assert_eq!(Priority::new(10), Err(MessageError::PriorityOutOfRange(10)));
    }

    #[test]
    fn expiry_zero_means_never() {
        let mut message = Message::new(TopicName::new("a.b").expect("valid"), "x");
        assert!(!message.is_expired(u64::MAX));
        message.expiry_ns = 100;
        assert!(message.is_expired(100));
        assert!(!message.is_expired(99));
    }

    #[test]
    fn delivery_mode_codes_round_trip() {
        for mode in [DeliveryMode::BestEffort, DeliveryMode::Reliable, DeliveryMode::Persistent] {
            assert_eq!(DeliveryMode::from_code(mode.code()), Some(mode));
            assert_eq!(mode.name().parse::<DeliveryMode>(), Ok(mode));
        }
        assert_eq!(DeliveryMode::from_code(3), None);
    }
}
