//! The names the JMS mapping keeps in a Sift message, shared by both
//! directions of [`crate::message_in`] and [`crate::message_out`].
//!
//! A JMS message crosses Sift as an ordinary message: its body in the
//! payload, its header fields and properties as properties, so that every
//! other door (STOMP, MQTT, HTTP, native) reads the same fields by the same
//! names and a selector sees them through the same index. What has no other
//! place is kept in a few `sift.jms.*` properties, which the AMQP door
//! turns back into the AMQP sections a JMS client expects.

/// The JMS message kind (`x-opt-jms-msg-type`): `message`, `object`, `map`,
/// `bytes`, `stream` or `text`. Absent on messages from other doors.
pub const BODY_TYPE: &str = "sift.jms.type";
/// The kind of node `JMSReplyTo` names: `queue`, `topic`, `temp-queue` or
/// `temp-topic`.
pub const REPLY_TO_TYPE: &str = "sift.jms.reply_to_type";
/// Application properties whose AMQP type is not the one a Sift value
/// reads back as (a long for integers, a double for floats): `name=type`
/// pairs joined by `,`, the type one of `byte`, `short`, `int`, `float`,
/// `char`, so that `getIntProperty` reads an int property as an int.
pub const PROPERTY_TYPES: &str = "sift.jms.types";

/// `JMSMessageID` as the sending client set it (`ID:...`), kept across
/// redeliveries and doors.
pub const MESSAGE_ID: &str = "JMSMessageID";
/// `JMSCorrelationID`.
pub const CORRELATION_ID: &str = "JMSCorrelationID";
/// `JMSType` (AMQP `subject`).
pub const TYPE: &str = "JMSType";
/// `JMSReplyTo`: the address replies go to.
pub const REPLY_TO: &str = "JMSReplyTo";
/// `JMSDeliveryTime` (the annotation `x-opt-delivery-time`, or now plus
/// `x-opt-delivery-delay`): no consumer gets the message before it.
pub const DELIVERY_TIME: &str = sift_core::DELIVERY_TIME_PROPERTY;
/// `JMSXGroupID` (AMQP `group-id`): keeps a group on one queue consumer.
pub const GROUP_ID: &str = sift_core::GROUP_PROPERTY;
/// `JMSXGroupSeq` (AMQP `group-sequence`).
pub const GROUP_SEQUENCE: &str = "JMSXGroupSeq";
/// `JMSXUserID` (AMQP `user-id`).
pub const USER_ID: &str = "JMSXUserID";
/// The AMQP `content-type` (an ObjectMessage's
/// `application/x-java-serialized-object`); the same name MQTT 5 uses.
pub const CONTENT_TYPE: &str = "content-type";

/// The JMS message kinds and their `x-opt-jms-msg-type` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyType {
    /// A plain `Message`: no body.
    Message,
    /// `ObjectMessage`: a serialized Java object.
    Object,
    /// `MapMessage`: a map of primitive values.
    Map,
    /// `BytesMessage`.
    Bytes,
    /// `StreamMessage`: a list of primitive values.
    Stream,
    /// `TextMessage`.
    Text,
}

impl BodyType {
    /// Every kind, in code order.
    pub const ALL: [BodyType; 6] =
        [BodyType::Message, BodyType::Object, BodyType::Map, BodyType::Bytes, BodyType::Stream, BodyType::Text];

    /// The `x-opt-jms-msg-type` byte.
    pub fn code(self) -> i8 {
        match self {
            BodyType::Message => 0,
            BodyType::Object => 1,
            BodyType::Map => 2,
            BodyType::Bytes => 3,
            BodyType::Stream => 4,
            BodyType::Text => 5,
        }
    }

    /// The kind of a `x-opt-jms-msg-type` byte.
    pub fn of_code(code: i8) -> Option<BodyType> {
        BodyType::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// The name kept in [`BODY_TYPE`].
    pub fn name(self) -> &'static str {
        match self {
            BodyType::Message => "message",
            BodyType::Object => "object",
            BodyType::Map => "map",
            BodyType::Bytes => "bytes",
            BodyType::Stream => "stream",
            BodyType::Text => "text",
        }
    }

    /// The kind a [`BODY_TYPE`] value names.
    pub fn of_name(name: &str) -> Option<BodyType> {
        BodyType::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// The kinds of node a JMS destination names, with their
/// `x-opt-jms-dest` / `x-opt-jms-reply-to` codes and link capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    /// A `Queue`: one consumer takes each message.
    Queue,
    /// A `Topic`: every subscriber gets each message.
    Topic,
    /// A `TemporaryQueue`.
    TempQueue,
    /// A `TemporaryTopic`.
    TempTopic,
}

impl NodeType {
    const ALL: [NodeType; 4] = [NodeType::Queue, NodeType::Topic, NodeType::TempQueue, NodeType::TempTopic];

    /// The annotation byte.
    pub fn code(self) -> i8 {
        match self {
            NodeType::Queue => 0,
            NodeType::Topic => 1,
            NodeType::TempQueue => 2,
            NodeType::TempTopic => 3,
        }
    }

    /// The kind of an annotation byte.
    pub fn of_code(code: i8) -> Option<NodeType> {
        NodeType::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// The link capability naming it (also the [`REPLY_TO_TYPE`] value).
    pub fn capability(self) -> &'static str {
        match self {
            NodeType::Queue => "queue",
            NodeType::Topic => "topic",
            NodeType::TempQueue => "temporary-queue",
            NodeType::TempTopic => "temporary-topic",
        }
    }

    /// The kind a capability (or [`REPLY_TO_TYPE`] value) names.
    pub fn of_capability(capability: &str) -> Option<NodeType> {
        NodeType::ALL.into_iter().find(|kind| kind.capability() == capability)
    }

    /// True for the kinds one consumer takes each message of.
    pub fn is_queue(self) -> bool {
        matches!(self, NodeType::Queue | NodeType::TempQueue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_read_back() {
        for kind in BodyType::ALL {
            assert_eq!(BodyType::of_code(kind.code()), Some(kind));
            assert_eq!(BodyType::of_name(kind.name()), Some(kind));
        }
        for kind in NodeType::ALL {
            assert_eq!(NodeType::of_code(kind.code()), Some(kind));
            assert_eq!(NodeType::of_capability(kind.capability()), Some(kind));
        }
        assert_eq!(BodyType::of_code(9), None);
    }
}
