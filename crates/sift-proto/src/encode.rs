//! Frames to bytes.
//!
//! Encoding appends to a caller-owned `BytesMut`, so that a writer can batch
//! many frames into one buffer and one system call. The broker encodes each
//! published message once ([`encode_message`]) and then writes it to every
//! subscriber behind a small per-delivery prefix ([`encode_deliver_prefix`]).

use bytes::{BufMut, BytesMut};
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::frame::*;
use crate::LENGTH_PREFIX_BYTES;

/// Why a frame could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A field is longer than its length prefix can express.
    #[error("field {field} is {length} bytes, more than the {limit} its length prefix allows")]
    FieldTooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        length: usize,
        /// The most the prefix allows.
        limit: usize,
    },
    /// A list has more entries than its count prefix can express.
    #[error("{field} has {count} entries, more than the {limit} allowed")]
    TooManyEntries {
        /// The list.
        field: &'static str,
        /// Its length.
        count: usize,
        /// The most allowed.
        limit: usize,
    },
}

pub(crate) fn put_str16(buf: &mut BytesMut, field: &'static str, text: &str) -> Result<(), EncodeError> {
    let length = u16::try_from(text.len()).map_err(|_| EncodeError::FieldTooLong {
        field,
        length: text.len(),
        limit: u16::MAX as usize,
    })?;
    buf.put_u16(length);
    buf.put_slice(text.as_bytes());
    Ok(())
}

pub(crate) fn put_bytes32(buf: &mut BytesMut, field: &'static str, bytes: &[u8]) -> Result<(), EncodeError> {
    let length = u32::try_from(bytes.len()).map_err(|_| EncodeError::FieldTooLong {
        field,
        length: bytes.len(),
        limit: u32::MAX as usize,
    })?;
    buf.put_u32(length);
    buf.put_slice(bytes);
    Ok(())
}

pub(crate) fn count16(field: &'static str, count: usize) -> Result<u16, EncodeError> {
    u16::try_from(count).map_err(|_| EncodeError::TooManyEntries { field, count, limit: u16::MAX as usize })
}

/// Value type codes inside a property list.
pub(crate) mod value_type {
    pub const BOOL: u8 = 0;
    pub const INT: u8 = 1;
    pub const FLOAT: u8 = 2;
    pub const STR: u8 = 3;
}

/// A message's fields, borrowed: what the encoder needs, so that a caller
/// can encode a message without building (and later dropping) a [`Message`].
#[derive(Debug, Clone, Copy)]
pub struct MessageRef<'a> {
    /// The topic.
    pub topic: &'a str,
    /// Typed properties.
    pub properties: &'a [(String, Value)],
    /// XML metadata, if any.
    pub metadata: Option<&'a [u8]>,
    /// The payload.
    pub payload: &'a [u8],
    /// Broker-assigned id (0 from clients).
    pub id: u64,
    /// Publisher name (empty from clients: the broker stamps it).
    pub publisher: &'a str,
    /// Per-publisher sequence number.
    pub sequence: u64,
    /// Time of publication in nanoseconds (0 from clients, unless they
    /// stamp it themselves with `PUBLISHER_TIME`).
    pub timestamp_ns: u64,
    /// Bound on the timestamp's error in nanoseconds; 0 when exact.
    pub time_error_ns: u32,
    /// Priority 0-9.
    pub priority: Priority,
    /// Expiry in nanoseconds since the epoch, 0 for none.
    pub expiry_ns: u64,
    /// Delivery mode.
    pub delivery_mode: DeliveryMode,
    /// Broker hops so far.
    pub hop_count: u8,
}

impl<'a> MessageRef<'a> {
    /// Borrows every field of `message`.
    pub fn of(message: &'a Message) -> MessageRef<'a> {
        MessageRef {
            topic: message.topic.as_str(),
            properties: &message.properties,
            metadata: message.metadata.as_deref(),
            payload: &message.payload,
            id: message.id,
            publisher: &message.publisher,
            sequence: message.sequence,
            timestamp_ns: message.timestamp_ns,
            time_error_ns: message.time_error_ns,
            priority: message.priority,
            expiry_ns: message.expiry_ns,
            delivery_mode: message.delivery_mode,
            hop_count: message.hop_count,
        }
    }

    /// A best-effort message of default priority with only a topic and a
    /// payload: what a high-rate publisher sends most.
    pub fn payload_only(topic: &'a TopicName, payload: &'a [u8]) -> MessageRef<'a> {
        MessageRef {
            topic: topic.as_str(),
            properties: &[],
            metadata: None,
            payload,
            id: 0,
            publisher: "",
            sequence: 0,
            timestamp_ns: 0,
            time_error_ns: 0,
            priority: Priority::default(),
            expiry_ns: 0,
            delivery_mode: DeliveryMode::BestEffort,
            hop_count: 0,
        }
    }
}

/// Appends the encoding of `message` (the layout shared by `PUBLISH` and
/// `DELIVER`; see `docs/PROTOCOL.md`).
pub fn encode_message(buf: &mut BytesMut, message: &Message) -> Result<(), EncodeError> {
    encode_message_ref(buf, MessageRef::of(message))
}

/// [`encode_message`] of borrowed fields.
pub(crate) fn encode_message_ref(buf: &mut BytesMut, message: MessageRef<'_>) -> Result<(), EncodeError> {
    let metadata_len = message.metadata.map_or(0, |metadata| 4 + metadata.len());
    // One reservation for the common case (no properties), so that the puts
    // below do not each check for room.
    buf.reserve(
        2 + message.topic.len()
            + FIXED_BYTES
            + 4
            + 2
            + message.publisher.len()
            + 2
            + metadata_len
            + 4
            + message.payload.len(),
    );
    put_str16(buf, "topic", message.topic)?;
    let mut fixed = [0u8; FIXED_BYTES];
    fixed[0] = message.priority.level();
    fixed[1] = message.delivery_mode.code();
    fixed[2] = message.hop_count;
    let timed = message.time_error_ns != 0;
    if message.metadata.is_some() {
        fixed[3] |= message_flags::METADATA;
    }
    if timed {
        fixed[3] |= message_flags::TIME_ERROR;
    }
    let words = [message.id, message.sequence, message.timestamp_ns, message.expiry_ns];
    for (index, value) in words.into_iter().enumerate() {
        fixed[4 + index * 8..12 + index * 8].copy_from_slice(&value.to_be_bytes());
    }
    buf.extend_from_slice(&fixed);
    if timed {
        buf.put_u32(message.time_error_ns);
    }
    put_str16(buf, "publisher", message.publisher)?;
    buf.put_u16(count16("properties", message.properties.len())?);
    for (name, value) in message.properties {
        put_str16(buf, "property name", name)?;
        put_value(buf, value)?;
    }
    if let Some(metadata) = message.metadata {
        put_bytes32(buf, "metadata", metadata)?;
    }
    put_bytes32(buf, "payload", message.payload)
}

/// The body of `TIME` and `LINK_TIME`.
pub(crate) fn put_time(buf: &mut BytesMut, request_id: u64, origin_ns: u64) {
    buf.put_u64(request_id);
    buf.put_u64(origin_ns);
}

/// The body of `TIME_REPLY` and `LINK_TIME_REPLY`.
pub(crate) fn put_time_reply(buf: &mut BytesMut, reply: &TimeReply) {
    for word in [reply.request_id, reply.origin_ns, reply.receive_ns, reply.transmit_ns] {
        buf.put_u64(word);
    }
}

/// Bytes of the fixed part of a message: priority, mode, hop count, flags,
/// id, sequence, timestamp, expiry.
const FIXED_BYTES: usize = 4 + 4 * 8;

fn put_value(buf: &mut BytesMut, value: &Value) -> Result<(), EncodeError> {
    match value {
        Value::Bool(flag) => {
            buf.put_u8(value_type::BOOL);
            buf.put_u8(u8::from(*flag));
        }
        Value::Int(int) => {
            buf.put_u8(value_type::INT);
            buf.put_i64(*int);
        }
        Value::Float(float) => {
            buf.put_u8(value_type::FLOAT);
            buf.put_f64(*float);
        }
        Value::Str(text) => {
            buf.put_u8(value_type::STR);
            put_bytes32(buf, "property value", text.as_bytes())?;
        }
    }
    Ok(())
}

/// Length prefix value of a `DELIVER` whose encoded message is `body_len` bytes.
pub fn encoded_deliver_len(body_len: usize) -> usize {
    1 + 4 + 8 + 1 + body_len
}

/// Appends the head of a `DELIVER` frame; the caller appends the `body_len`
/// bytes of an already encoded message right after it.
pub fn encode_deliver_prefix(buf: &mut BytesMut, sub_id: u32, delivery_tag: u64, flags: u8, body_len: usize) {
    // A message body is bounded by the frame limit, which is a u32.
    let length = u32::try_from(encoded_deliver_len(body_len)).unwrap_or(u32::MAX);
    buf.put_u32(length);
    buf.put_u8(frame_type::DELIVER);
    buf.put_u32(sub_id);
    buf.put_u64(delivery_tag);
    buf.put_u8(flags);
}

/// Bytes of the stream sequence a stored message's `DELIVER` carries.
pub const STREAM_SEQ_BYTES: usize = 8;

/// Length prefix value of a `DELIVER` of a stored message (with its stream
/// sequence) whose encoded message is `body_len` bytes.
pub fn encoded_stream_deliver_len(body_len: usize) -> usize {
    encoded_deliver_len(body_len) + STREAM_SEQ_BYTES
}

/// Appends the head of a `DELIVER` of a stored message: `STREAM_SEQ` is set
/// and `stream_seq` follows the flags; the caller appends the stored
/// encoding of `body_len` bytes right after it.
pub fn encode_stream_deliver_prefix(
    buf: &mut BytesMut,
    sub_id: u32,
    delivery_tag: u64,
    flags: u8,
    stream_seq: u64,
    body_len: usize,
) {
    let length = u32::try_from(encoded_stream_deliver_len(body_len)).unwrap_or(u32::MAX);
    buf.put_u32(length);
    buf.put_u8(frame_type::DELIVER);
    buf.put_u32(sub_id);
    buf.put_u64(delivery_tag);
    buf.put_u8(flags | deliver_flags::STREAM_SEQ);
    buf.put_u64(stream_seq);
}

/// Length prefix value of a `QUERY_RESULT` whose encoded message is `body_len` bytes.
pub fn encoded_query_result_len(body_len: usize) -> usize {
    1 + 8 + 8 + body_len
}

/// Appends the head of a `QUERY_RESULT`; the caller appends the stored
/// encoding of `body_len` bytes right after it.
pub fn encode_query_result_prefix(buf: &mut BytesMut, request_id: u64, stream_seq: u64, body_len: usize) {
    let length = u32::try_from(encoded_query_result_len(body_len)).unwrap_or(u32::MAX);
    buf.put_u32(length);
    buf.put_u8(frame_type::QUERY_RESULT);
    buf.put_u64(request_id);
    buf.put_u64(stream_seq);
}

/// Appends a `PUBLISH` frame for `message` without cloning it.
pub fn encode_publish(
    buf: &mut BytesMut,
    request_id: u64,
    flags: u8,
    await_timeout_ms: u32,
    message: &Message,
) -> Result<(), EncodeError> {
    encode_publish_sequenced(buf, request_id, flags, await_timeout_ms, message, message.sequence)
}

/// [`encode_publish`] with `sequence` in place of the message's own, so that
/// a client can number a message it only borrows.
pub fn encode_publish_sequenced(
    buf: &mut BytesMut,
    request_id: u64,
    flags: u8,
    await_timeout_ms: u32,
    message: &Message,
    sequence: u64,
) -> Result<(), EncodeError> {
    encode_publish_ref(buf, request_id, flags, await_timeout_ms, MessageRef { sequence, ..MessageRef::of(message) })
}

/// Appends a `PUBLISH` frame for borrowed message fields.
pub fn encode_publish_ref(
    buf: &mut BytesMut,
    request_id: u64,
    flags: u8,
    await_timeout_ms: u32,
    message: MessageRef<'_>,
) -> Result<(), EncodeError> {
    framed(buf, frame_type::PUBLISH, |buf| {
        buf.put_u64(request_id);
        buf.put_u8(flags);
        buf.put_u32(await_timeout_ms);
        encode_message_ref(buf, message)
    })
}

/// Writes the length prefix and type around `body`, undoing on error.
pub(crate) fn framed(
    buf: &mut BytesMut,
    type_code: u8,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_u32(0);
    buf.put_u8(type_code);
    if let Err(error) = body(buf) {
        buf.truncate(start);
        return Err(error);
    }
    let length = buf.len() - start - LENGTH_PREFIX_BYTES;
    let Ok(length) = u32::try_from(length) else {
        buf.truncate(start);
        return Err(EncodeError::FieldTooLong { field: "frame", length, limit: u32::MAX as usize });
    };
    buf[start..start + LENGTH_PREFIX_BYTES].copy_from_slice(&length.to_be_bytes());
    Ok(())
}

impl Frame {
    /// Appends this frame to `buf`. On error `buf` is left as it was.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        if let Frame::Publish(publish) = self {
            return encode_publish(buf, publish.request_id, publish.flags, publish.await_timeout_ms, &publish.message);
        }
        framed(buf, self.type_code(), |buf| self.encode_body(buf))
    }

    fn encode_body(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Frame::Hello(hello) => {
                buf.put_slice(&crate::MAGIC);
                buf.put_u16(hello.version_min);
                buf.put_u16(hello.version_max);
                put_str16(buf, "client_name", &hello.client_name)?;
            }
            Frame::Welcome(welcome) => encode_welcome(buf, welcome)?,
            Frame::Ping { nonce } | Frame::Pong { nonce } => buf.put_u64(*nonce),
            Frame::Time { request_id, origin_ns } => put_time(buf, *request_id, *origin_ns),
            Frame::TimeReply(reply) => put_time_reply(buf, reply),
            Frame::Auth(auth) => {
                buf.put_u64(auth.request_id);
                buf.put_u8(auth.method.code());
                put_str16(buf, "user", &auth.user)?;
                put_str16(buf, "secret", &auth.secret)?;
            }
            Frame::AuthOk { request_id, user } => {
                buf.put_u64(*request_id);
                put_str16(buf, "user", user)?;
            }
            Frame::Close => {}
            Frame::Publish(_) => unreachable!("PUBLISH is encoded by encode_publish"),
            Frame::Confirm(confirm) => {
                buf.put_u64(confirm.request_id);
                buf.put_u8(confirm.status.code());
                buf.put_u32(confirm.matched);
                buf.put_u32(confirm.acked);
                buf.put_u16(count16("pending", confirm.pending.len())?);
                for label in &confirm.pending {
                    put_str16(buf, "pending subscriber", label)?;
                }
                put_str16(buf, "stream", &confirm.stream)?;
                buf.put_u64(confirm.stream_seq);
            }
            Frame::Subscribe(subscribe) => encode_subscribe(buf, subscribe)?,
            Frame::Subscribed { sub_id } | Frame::Unsubscribe { sub_id } => buf.put_u32(*sub_id),
            Frame::Deliver(deliver) => {
                buf.put_u32(deliver.sub_id);
                buf.put_u64(deliver.delivery_tag);
                match deliver.stream_seq {
                    0 => buf.put_u8(deliver.flags & !deliver_flags::STREAM_SEQ),
                    seq => {
                        buf.put_u8(deliver.flags | deliver_flags::STREAM_SEQ);
                        buf.put_u64(seq);
                    }
                }
                encode_message(buf, &deliver.message)?;
            }
            Frame::Gap { sub_id, first_seq, count, reason } => {
                buf.put_u32(*sub_id);
                buf.put_u64(*first_seq);
                buf.put_u64(*count);
                buf.put_u8(reason.code());
            }
            Frame::CaughtUp { sub_id, last_seq } => {
                buf.put_u32(*sub_id);
                buf.put_u64(*last_seq);
            }
            Frame::Query(query) => {
                buf.put_u64(query.request_id);
                put_str16(buf, "stream", &query.stream)?;
                put_str16(buf, "topic_filter", &query.topic_filter)?;
                buf.put_u8(query.filter_kind.code());
                put_bytes32(buf, "filter", query.filter.as_bytes())?;
                buf.put_u64(query.since_ns);
                buf.put_u64(query.until_ns);
                buf.put_u32(query.limit);
            }
            Frame::QueryResult { request_id, stream_seq, message } => {
                buf.put_u64(*request_id);
                buf.put_u64(*stream_seq);
                encode_message(buf, message)?;
            }
            Frame::QueryDone { request_id, matched, scanned, missed } => {
                buf.put_u64(*request_id);
                buf.put_u64(*matched);
                buf.put_u64(*scanned);
                buf.put_u64(*missed);
            }
            Frame::Manage { request_id, op, body } => {
                buf.put_u64(*request_id);
                buf.put_u8(op.code());
                put_bytes32(buf, "body", body.as_bytes())?;
            }
            Frame::Ack { delivery_tags } => {
                buf.put_u16(count16("delivery_tags", delivery_tags.len())?);
                for tag in delivery_tags {
                    buf.put_u64(*tag);
                }
            }
            Frame::Nack { delivery_tag, requeue } => {
                buf.put_u64(*delivery_tag);
                buf.put_u8(u8::from(*requeue));
            }
            Frame::Flow { sub_id, credit } => {
                buf.put_u32(*sub_id);
                buf.put_u32(*credit);
            }
            Frame::Admin { request_id, query } => {
                buf.put_u64(*request_id);
                buf.put_u8(query.code());
            }
            Frame::AdminReply { request_id, json } => {
                buf.put_u64(*request_id);
                put_bytes32(buf, "json", json.as_bytes())?;
            }
            Frame::Error(error) => {
                buf.put_u16(error.code.code());
                buf.put_u64(error.reference);
                buf.put_u8(u8::from(error.fatal));
                put_str16(buf, "error message", truncate_utf8(&error.message, u16::MAX as usize))?;
            }
        }
        Ok(())
    }
}

fn encode_welcome(buf: &mut BytesMut, welcome: &Welcome) -> Result<(), EncodeError> {
    buf.put_u16(welcome.version);
    put_str16(buf, "server_name", &welcome.server_name)?;
    buf.put_u64(welcome.connection_id);
    buf.put_u32(welcome.max_frame_bytes);
    buf.put_u32(welcome.max_payload_bytes);
    buf.put_u32(welcome.max_subscriptions);
    buf.put_u32(welcome.max_filter_bytes);
    buf.put_u32(welcome.publish_window);
    buf.put_u32(welcome.ack_timeout_ms);
    Ok(())
}

fn encode_subscribe(buf: &mut BytesMut, subscribe: &Subscribe) -> Result<(), EncodeError> {
    buf.put_u32(subscribe.sub_id);
    put_str16(buf, "topic_filter", &subscribe.topic_filter)?;
    put_str16(buf, "queue_group", &subscribe.queue_group)?;
    buf.put_u8(subscribe.filter_kind.code());
    put_bytes32(buf, "filter", subscribe.filter.as_bytes())?;
    buf.put_u8(match subscribe.ack_mode {
        AckMode::Auto => 0,
        AckMode::Client => 1,
    });
    let (policy_code, policy_argument) = subscribe.policy.map_or((POLICY_BROKER_DEFAULT, 0), QueuePolicy::to_wire);
    buf.put_u8(policy_code);
    buf.put_u32(policy_argument);
    buf.put_u32(subscribe.queue_capacity);
    buf.put_u32(subscribe.max_unacked);
    let flags = match subscribe.source {
        Some(_) => subscribe.flags | subscribe_flags::STREAM_SOURCE,
        None => subscribe.flags & !subscribe_flags::STREAM_SOURCE,
    };
    buf.put_u8(flags);
    buf.put_u32(subscribe.initial_credit);
    if let Some(source) = &subscribe.source {
        put_str16(buf, "stream", &source.stream)?;
        put_str16(buf, "durable", &source.durable)?;
        let (code, argument) = source.start.to_wire();
        buf.put_u8(code);
        buf.put_u64(argument);
    }
    Ok(())
}

/// The longest prefix of `text` of at most `limit` bytes that ends on a
/// character boundary. Used only for human-readable error text.
pub(crate) fn truncate_utf8(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
