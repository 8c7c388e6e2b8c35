//! Bytes to frames.
//!
//! The decoder checks the length prefix against the frame limit before it
//! buffers anything, so a peer cannot make us hold more than one frame's worth
//! of memory. A frame whose body does not parse is consumed whole and reported
//! as [`DecodeError::Malformed`]: the stream is still in step, and the caller
//! decides whether to go on. A bad length prefix is fatal, because after it
//! the frame boundaries cannot be found again.

use std::sync::Arc;

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::encode::value_type;
use crate::frame::*;
use crate::{AdminQuery, ErrorCode, GapReason, ManageOp, Query, StartPosition, StreamSource, LENGTH_PREFIX_BYTES};

/// Why bytes could not be decoded into a frame.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The length prefix exceeds the frame limit; the stream cannot be trusted.
    #[error("frame of {length} bytes exceeds max_frame_bytes = {limit}")]
    FrameTooLarge {
        /// The announced length.
        length: u32,
        /// The limit.
        limit: u32,
    },
    /// A length prefix of zero: there is not even a type byte.
    #[error("frame with length 0 has no type byte")]
    EmptyFrame,
    /// The frame was consumed but its body is invalid.
    #[error("malformed {frame} frame: {detail}")]
    Malformed {
        /// Name of the frame type (or `UNKNOWN`).
        frame: &'static str,
        /// Request or subscription id, when it was read before the error.
        reference: u64,
        /// The error code to answer with.
        code: ErrorCode,
        /// What is wrong, where.
        detail: String,
    },
}

impl DecodeError {
    /// True when the stream cannot be parsed any further.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, DecodeError::Malformed { .. })
    }

    /// The error code to report to the peer.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::FrameTooLarge { .. } => ErrorCode::FrameTooLarge,
            DecodeError::EmptyFrame => ErrorCode::Malformed,
            DecodeError::Malformed { code, .. } => *code,
        }
    }

    /// The request or subscription id the error concerns, or 0.
    pub fn reference(&self) -> u64 {
        match self {
            DecodeError::Malformed { reference, .. } => *reference,
            _ => 0,
        }
    }
}

/// A streaming frame decoder with a frame size limit.
///
/// One decoder serves one connection. It remembers the topic and the
/// publisher of the last message it decoded: on a stream they usually
/// repeat, and then the new message shares them (a byte comparison and a
/// reference count) instead of copying, validating and allocating again.
#[derive(Debug, Clone)]
pub struct Decoder {
    max_frame_bytes: u32,
    recent: Recent,
}

/// The last topic and publisher seen, for reuse.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recent {
    topic: Option<TopicName>,
    publisher: Option<Arc<str>>,
}

impl Decoder {
    /// A decoder refusing frames longer than `max_frame_bytes`.
    pub fn new(max_frame_bytes: u32) -> Decoder {
        Decoder { max_frame_bytes, recent: Recent::default() }
    }

    /// The frame limit in force.
    pub fn max_frame_bytes(&self) -> u32 {
        self.max_frame_bytes
    }

    /// Changes the frame limit (after the handshake, say).
    pub fn set_max_frame_bytes(&mut self, max_frame_bytes: u32) {
        self.max_frame_bytes = max_frame_bytes;
    }

    /// Takes one frame off the front of `buf`, or returns `Ok(None)` when
    /// `buf` does not yet hold a whole frame (reserving room for it).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
        let parse = |reader: &mut Reader<'_, '_>, type_code| reader.frame(type_code);
        decode_frame(buf, self.max_frame_bytes, &mut self.recent, frame_name, parse, Frame::message_mut)
    }
}

/// One frame off the front of `buf`, for any frame set: the length prefix
/// checked first ([`whole_frame`]), the body parsed by `parse` from a
/// borrowed slice, then the frame taken off the buffer with the byte fields
/// of the message `message_of` finds in it carved out ([`carve`]). A body
/// that does not parse is consumed whole. Shared by the client and the link
/// decoders, so that both frame, check and report alike.
pub(crate) fn decode_frame<F>(
    buf: &mut BytesMut,
    max_frame_bytes: u32,
    recent: &mut Recent,
    name_of: fn(u8) -> &'static str,
    parse: impl FnOnce(&mut Reader<'_, '_>, u8) -> FieldResult<F>,
    message_of: impl FnOnce(&mut F) -> Option<&mut Message>,
) -> Result<Option<F>, DecodeError> {
    let Some(total) = whole_frame(buf, max_frame_bytes)? else {
        return Ok(None);
    };
    let type_code = buf[LENGTH_PREFIX_BYTES];
    let body = &buf[BODY_OFFSET..total];
    match parse_body(name_of(type_code), body, recent, |reader| parse(reader, type_code)) {
        Ok((mut frame, carved)) => {
            carve(buf, total, carved, message_of(&mut frame));
            Ok(Some(frame))
        }
        Err(error) => {
            buf.advance(total);
            Err(error)
        }
    }
}

impl Frame {
    /// The message a frame carries, if any: where its byte fields go.
    fn message_mut(&mut self) -> Option<&mut Message> {
        match self {
            Frame::Publish(publish) => Some(&mut publish.message),
            Frame::Deliver(deliver) => Some(&mut deliver.message),
            Frame::QueryResult { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// Checks the length prefix at the front of `buf` against `max_frame_bytes`
/// before anything is buffered, and returns the frame's size on the wire
/// once `buf` holds all of it (`Ok(None)`, with room reserved, until then).
/// Used by [`decode_frame`], so every frame set frames the same way.
fn whole_frame(buf: &mut BytesMut, max_frame_bytes: u32) -> Result<Option<usize>, DecodeError> {
    if buf.len() < LENGTH_PREFIX_BYTES {
        return Ok(None);
    }
    let length = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if length > max_frame_bytes {
        return Err(DecodeError::FrameTooLarge { length, limit: max_frame_bytes });
    }
    if length == 0 {
        return Err(DecodeError::EmptyFrame);
    }
    let total = LENGTH_PREFIX_BYTES + length as usize;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    Ok(Some(total))
}

/// Decodes a message encoded alone (by `encode_message`), as the broker keeps
/// it for delivery. Byte fields share `encoded`.
pub fn decode_message(encoded: &Bytes) -> Result<Message, DecodeError> {
    let mut recent = Recent::default();
    let mut reader = Reader { body: encoded, offset: 0, reference: 0, recent: &mut recent, carved: Carved::default() };
    let malformed = |(code, detail)| DecodeError::Malformed { frame: "message", reference: 0, code, detail };
    let mut message = reader.message().map_err(malformed)?;
    if reader.remaining() > 0 {
        let detail = format!("{} bytes left over after the payload", reader.remaining());
        return Err(malformed((ErrorCode::Malformed, detail)));
    }
    message.metadata = reader.carved.metadata.map(|range| encoded.slice(range));
    if let Some(range) = reader.carved.payload {
        message.payload = encoded.slice(range);
    }
    Ok(message)
}

/// Where a frame's body starts in the buffer: after the length and the type.
const BODY_OFFSET: usize = LENGTH_PREFIX_BYTES + 1;

/// Takes the frame of `total` bytes off `buf`, moving its byte fields
/// (metadata, payload) into the frame's message, if it has one, as shared
/// slices of the buffer: one reference count each, no copy.
fn carve(buf: &mut BytesMut, total: usize, carved: Carved, message: Option<&mut Message>) {
    let mut consumed = 0;
    let mut take = |range: Range<usize>| {
        if range.is_empty() {
            return Bytes::new();
        }
        buf.advance(BODY_OFFSET + range.start - consumed);
        consumed = BODY_OFFSET + range.end;
        buf.split_to(range.len()).freeze()
    };
    let metadata = carved.metadata.map(&mut take);
    let payload = carved.payload.map(&mut take);
    buf.advance(total - consumed);
    let Some(message) = message else {
        return;
    };
    message.metadata = metadata;
    if let Some(payload) = payload {
        message.payload = payload;
    }
}

/// Ranges (in the frame body) of the byte fields the parse found; they are
/// cut out of the buffer once the whole frame is known to be valid.
#[derive(Debug, Default)]
pub(crate) struct Carved {
    metadata: Option<Range<usize>>,
    payload: Option<Range<usize>>,
}

/// Parses one frame body (after the type byte) with `parse`, and reports
/// failures and left-over bytes as [`DecodeError::Malformed`] naming `frame`.
fn parse_body<T>(
    frame: &'static str,
    body: &[u8],
    recent: &mut Recent,
    parse: impl FnOnce(&mut Reader<'_, '_>) -> FieldResult<T>,
) -> Result<(T, Carved), DecodeError> {
    let mut reader = Reader { body, offset: 0, reference: 0, recent, carved: Carved::default() };
    let parsed = parse(&mut reader).map_err(|(code, detail)| DecodeError::Malformed {
        frame,
        reference: reader.reference,
        code,
        detail,
    })?;
    let left_over = reader.remaining();
    if left_over > 0 {
        return Err(DecodeError::Malformed {
            frame,
            reference: reader.reference,
            code: ErrorCode::Malformed,
            detail: format!("{left_over} bytes left over after the last field"),
        });
    }
    Ok((parsed, reader.carved))
}

pub(crate) type FieldResult<T> = Result<T, (ErrorCode, String)>;

/// True when `chunk` starts with a str16 field equal to `recent`. The
/// comparison is in place: a repeated string is neither copied nor
/// validated again.
fn starts_with_str16(chunk: &[u8], recent: &str) -> bool {
    let field_len = 2 + recent.len();
    chunk.len() >= field_len
        && usize::from(u16::from_be_bytes([chunk[0], chunk[1]])) == recent.len()
        && &chunk[2..field_len] == recent.as_bytes()
}

/// Bytes of a message between its topic and its publisher: priority, mode,
/// hop count, flags, then id, sequence, timestamp and expiry.
const MESSAGE_FIXED_BYTES: usize = 4 + 4 * 8;

/// The error for a field that runs past the end of the frame; out of line,
/// so that the checks on the hot path stay small enough to inline.
#[cold]
fn short_field(field: &str, bytes: usize, left: usize) -> (ErrorCode, String) {
    (ErrorCode::Malformed, format!("{field}: needs {bytes} bytes, only {left} left"))
}

pub(crate) fn malformed<T>(detail: String) -> FieldResult<T> {
    Err((ErrorCode::Malformed, detail))
}

/// Reads fields off a borrowed frame body, remembering the request or
/// subscription id so that errors can refer to it.
pub(crate) struct Reader<'frame, 'recent> {
    pub(crate) body: &'frame [u8],
    pub(crate) offset: usize,
    /// What an error about this frame refers to (see `DecodeError::reference`).
    pub(crate) reference: u64,
    recent: &'recent mut Recent,
    carved: Carved,
}

impl<'frame> Reader<'frame, '_> {
    pub(crate) fn remaining(&self) -> usize {
        self.body.len() - self.offset
    }

    #[inline]
    pub(crate) fn need(&self, field: &str, bytes: usize) -> FieldResult<()> {
        if self.remaining() < bytes {
            return Err(short_field(field, bytes, self.remaining()));
        }
        Ok(())
    }

    /// The next `length` bytes, borrowed from the frame.
    #[inline]
    fn bytes(&mut self, field: &str, length: usize) -> FieldResult<&'frame [u8]> {
        self.need(field, length)?;
        let start = self.offset;
        self.offset += length;
        Ok(&self.body[start..self.offset])
    }

    #[inline]
    fn array<const N: usize>(&mut self, field: &str) -> FieldResult<[u8; N]> {
        let bytes = self.bytes(field, N)?;
        let mut array = [0u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    #[inline]
    pub(crate) fn u8(&mut self, field: &str) -> FieldResult<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    #[inline]
    pub(crate) fn u16(&mut self, field: &str) -> FieldResult<u16> {
        self.array(field).map(u16::from_be_bytes)
    }

    #[inline]
    pub(crate) fn u32(&mut self, field: &str) -> FieldResult<u32> {
        self.array(field).map(u32::from_be_bytes)
    }

    #[inline]
    pub(crate) fn u64(&mut self, field: &str) -> FieldResult<u64> {
        self.array(field).map(u64::from_be_bytes)
    }

    /// A u32-prefixed byte field, as the range it occupies in the body.
    #[inline]
    fn bytes32_range(&mut self, field: &str) -> FieldResult<Range<usize>> {
        let length = self.u32(field)? as usize;
        self.need(field, length)?;
        let start = self.offset;
        self.offset += length;
        Ok(start..self.offset)
    }

    /// A u32-prefixed byte field, copied.
    pub(crate) fn bytes32(&mut self, field: &str) -> FieldResult<bytes::Bytes> {
        let range = self.bytes32_range(field)?;
        Ok(bytes::Bytes::copy_from_slice(&self.body[range]))
    }

    fn utf8(field: &str, bytes: &[u8]) -> FieldResult<String> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_owned()),
            Err(error) => malformed(format!("{field}: invalid UTF-8 at byte {}", error.valid_up_to())),
        }
    }

    pub(crate) fn str16(&mut self, field: &str) -> FieldResult<String> {
        let length = self.u16(field)? as usize;
        let bytes = self.bytes(field, length)?;
        Self::utf8(field, bytes)
    }

    pub(crate) fn str32(&mut self, field: &str) -> FieldResult<String> {
        let length = self.u32(field)? as usize;
        let bytes = self.bytes(field, length)?;
        Self::utf8(field, bytes)
    }

    fn frame(&mut self, type_code: u8) -> FieldResult<Frame> {
        use frame_type::*;
        Ok(match type_code {
            HELLO => Frame::Hello(self.hello()?),
            WELCOME => Frame::Welcome(self.welcome()?),
            PING => Frame::Ping { nonce: self.u64("nonce")? },
            PONG => Frame::Pong { nonce: self.u64("nonce")? },
            TIME => Frame::Time { request_id: self.u64("request_id")?, origin_ns: self.u64("origin_ns")? },
            TIME_REPLY => Frame::TimeReply(self.time_reply()?),
            AUTH => Frame::Auth(self.auth()?),
            AUTH_OK => Frame::AuthOk { request_id: self.request_id()?, user: self.str16("user")? },
            CLOSE => Frame::Close,
            PUBLISH => Frame::Publish(self.publish()?),
            CONFIRM => Frame::Confirm(self.confirm()?),
            SUBSCRIBE => Frame::Subscribe(self.subscribe()?),
            SUBSCRIBED => Frame::Subscribed { sub_id: self.sub_id()? },
            UNSUBSCRIBE => Frame::Unsubscribe { sub_id: self.sub_id()? },
            DELIVER => Frame::Deliver(self.deliver()?),
            ACK => self.ack()?,
            NACK => Frame::Nack { delivery_tag: self.u64("delivery_tag")?, requeue: self.u8("requeue")? != 0 },
            FLOW => Frame::Flow { sub_id: self.sub_id()?, credit: self.u32("credit")? },
            ADMIN => self.admin()?,
            ADMIN_REPLY => self.admin_reply()?,
            ERROR => Frame::Error(self.error()?),
            GAP => self.gap()?,
            CAUGHT_UP => Frame::CaughtUp { sub_id: self.sub_id()?, last_seq: self.u64("last_seq")? },
            QUERY => self.query()?,
            QUERY_RESULT => self.query_result()?,
            QUERY_DONE => self.query_done()?,
            MANAGE => self.manage()?,
            unknown => {
                self.offset = self.body.len();
                return Err((ErrorCode::UnexpectedFrame, format!("unknown frame type 0x{unknown:02x}")));
            }
        })
    }

    /// The body of `TIME_REPLY` and `LINK_TIME_REPLY`.
    pub(crate) fn time_reply(&mut self) -> FieldResult<TimeReply> {
        Ok(TimeReply {
            request_id: self.u64("request_id")?,
            origin_ns: self.u64("origin_ns")?,
            receive_ns: self.u64("receive_ns")?,
            transmit_ns: self.u64("transmit_ns")?,
        })
    }

    fn auth(&mut self) -> FieldResult<crate::Auth> {
        let request_id = self.request_id()?;
        let code = self.u8("method")?;
        let Some(method) = crate::AuthMethod::from_code(code) else {
            return Err((
                ErrorCode::InvalidField,
                format!("method: unknown code {code}, expected 1 (password) or 2 (token)"),
            ));
        };
        Ok(crate::Auth { request_id, method, user: self.str16("user")?, secret: self.str16("secret")? })
    }

    fn request_id(&mut self) -> FieldResult<u64> {
        let request_id = self.u64("request_id")?;
        self.reference = request_id;
        Ok(request_id)
    }

    fn admin(&mut self) -> FieldResult<Frame> {
        let request_id = self.request_id()?;
        let code = self.u8("query")?;
        let Some(query) = AdminQuery::from_code(code) else {
            return Err((ErrorCode::InvalidField, format!("query: unknown code {code}, expected 1-3")));
        };
        Ok(Frame::Admin { request_id, query })
    }

    fn admin_reply(&mut self) -> FieldResult<Frame> {
        let request_id = self.request_id()?;
        Ok(Frame::AdminReply { request_id, json: self.str32("json")? })
    }

    fn sub_id(&mut self) -> FieldResult<u32> {
        let sub_id = self.u32("sub_id")?;
        self.reference = u64::from(sub_id);
        Ok(sub_id)
    }

    fn hello(&mut self) -> FieldResult<Hello> {
        let magic = self.bytes("magic", 4)?;
        if magic[..] != crate::MAGIC {
            return malformed(format!("magic: expected \"SIFT\", got {:?}", magic));
        }
        Ok(Hello {
            version_min: self.u16("version_min")?,
            version_max: self.u16("version_max")?,
            client_name: self.str16("client_name")?,
        })
    }

    fn welcome(&mut self) -> FieldResult<Welcome> {
        Ok(Welcome {
            version: self.u16("version")?,
            server_name: self.str16("server_name")?,
            connection_id: self.u64("connection_id")?,
            max_frame_bytes: self.u32("max_frame_bytes")?,
            max_payload_bytes: self.u32("max_payload_bytes")?,
            max_subscriptions: self.u32("max_subscriptions")?,
            max_filter_bytes: self.u32("max_filter_bytes")?,
            publish_window: self.u32("publish_window")?,
            ack_timeout_ms: self.u32("ack_timeout_ms")?,
        })
    }

    fn publish(&mut self) -> FieldResult<Publish> {
        let request_id = self.u64("request_id")?;
        self.reference = request_id;
        Ok(Publish {
            request_id,
            flags: self.u8("flags")?,
            await_timeout_ms: self.u32("await_timeout_ms")?,
            message: Box::new(self.message()?),
        })
    }

    fn confirm(&mut self) -> FieldResult<Confirm> {
        let request_id = self.u64("request_id")?;
        self.reference = request_id;
        let status_code = self.u8("status")?;
        let Some(status) = ConfirmStatus::from_code(status_code) else {
            return malformed(format!("status: unknown code {status_code}"));
        };
        let matched = self.u32("matched")?;
        let acked = self.u32("acked")?;
        let count = self.u16("pending count")?;
        let mut pending = Vec::with_capacity(usize::from(count).min(self.remaining() / 2));
        for _ in 0..count {
            pending.push(self.str16("pending subscriber")?);
        }
        let stream = self.str16("stream")?;
        let stream_seq = self.u64("stream_seq")?;
        Ok(Confirm { request_id, status, matched, acked, pending, stream, stream_seq })
    }

    fn subscribe(&mut self) -> FieldResult<Subscribe> {
        let sub_id = self.sub_id()?;
        let topic_filter = self.str16("topic_filter")?;
        let queue_group = self.str16("queue_group")?;
        let kind_code = self.u8("filter_kind")?;
        let Some(filter_kind) = FilterKind::from_code(kind_code) else {
            return Err((ErrorCode::InvalidFilter, format!("filter_kind: unknown language code {kind_code}")));
        };
        let filter = self.str32("filter")?;
        let ack_mode = match self.u8("ack_mode")? {
            0 => AckMode::Auto,
            1 => AckMode::Client,
            other => return Err((ErrorCode::InvalidField, format!("ack_mode: unknown code {other}"))),
        };
        let policy_code = self.u8("policy")?;
        let policy_argument = self.u32("policy_argument")?;
        let policy = match QueuePolicy::from_wire(policy_code, policy_argument) {
            Some(QueuePolicy::KeepLast(0)) => {
                let detail = "policy: keep-last needs a count above 0".to_string();
                return Err((ErrorCode::InvalidField, detail));
            }
            Some(policy) => Some(policy),
            None if policy_code == POLICY_BROKER_DEFAULT => None,
            None => {
                return Err((ErrorCode::InvalidField, format!("policy: unknown code {policy_code}")));
            }
        };
        let queue_capacity = self.u32("queue_capacity")?;
        let max_unacked = self.u32("max_unacked")?;
        let flags = self.u8("flags")?;
        let initial_credit = self.u32("initial_credit")?;
        let source = self.stream_section(flags)?;
        Ok(Subscribe {
            sub_id,
            topic_filter,
            queue_group,
            filter_kind,
            filter,
            ack_mode,
            policy,
            queue_capacity,
            max_unacked,
            flags,
            initial_credit,
            source,
        })
    }

    /// The stream section of a `SUBSCRIBE`, which follows `initial_credit`
    /// exactly when `flags` has `STREAM_SOURCE`. A mismatch either way is
    /// malformed, with its own message naming the field: without it, a
    /// section sent with the flag forgotten would read as "bytes left over"
    /// and a flag without its section as a short `stream` field, and both
    /// hide the real mistake from whoever wrote the encoder.
    fn stream_section(&mut self, flags: u8) -> FieldResult<Option<StreamSource>> {
        let flagged = flags & subscribe_flags::STREAM_SOURCE != 0;
        match (flagged, self.remaining()) {
            (false, 0) => Ok(None),
            (false, extra) => malformed(format!(
                "flags: STREAM_SOURCE is clear, yet {extra} bytes follow initial_credit (a stream section needs the flag)"
            )),
            (true, 0) => {
                malformed("stream: flags has STREAM_SOURCE but no stream section follows initial_credit".to_string())
            }
            (true, _) => self.stream_source().map(Some),
        }
    }

    fn stream_source(&mut self) -> FieldResult<StreamSource> {
        let stream = self.str16("stream")?;
        let durable = self.str16("durable")?;
        let code = self.u8("start")?;
        let argument = self.u64("start_arg")?;
        let Some(start) = StartPosition::from_wire(code, argument) else {
            return Err((ErrorCode::InvalidField, format!("start: unknown code {code}, expected 0-4")));
        };
        Ok(StreamSource { stream, durable, start })
    }

    fn deliver(&mut self) -> FieldResult<Deliver> {
        let sub_id = self.sub_id()?;
        let delivery_tag = self.u64("delivery_tag")?;
        let flags = self.u8("flags")?;
        let stream_seq = match flags & deliver_flags::STREAM_SEQ {
            0 => 0,
            _ => self.u64("stream_seq")?,
        };
        Ok(Deliver { sub_id, delivery_tag, flags, stream_seq, message: Box::new(self.message()?) })
    }

    fn gap(&mut self) -> FieldResult<Frame> {
        let sub_id = self.sub_id()?;
        let first_seq = self.u64("first_seq")?;
        let count = self.u64("count")?;
        let code = self.u8("reason")?;
        let Some(reason) = GapReason::from_code(code) else {
            return Err((ErrorCode::InvalidField, format!("reason: unknown code {code}, expected 0-1")));
        };
        Ok(Frame::Gap { sub_id, first_seq, count, reason })
    }

    fn query(&mut self) -> FieldResult<Frame> {
        let request_id = self.request_id()?;
        let stream = self.str16("stream")?;
        let topic_filter = self.str16("topic_filter")?;
        let kind_code = self.u8("filter_kind")?;
        let Some(filter_kind) = FilterKind::from_code(kind_code) else {
            return Err((ErrorCode::InvalidFilter, format!("filter_kind: unknown language code {kind_code}")));
        };
        Ok(Frame::Query(Query {
            request_id,
            stream,
            topic_filter,
            filter_kind,
            filter: self.str32("filter")?,
            since_ns: self.u64("since_ns")?,
            until_ns: self.u64("until_ns")?,
            limit: self.u32("limit")?,
        }))
    }

    fn query_result(&mut self) -> FieldResult<Frame> {
        let request_id = self.request_id()?;
        let stream_seq = self.u64("stream_seq")?;
        Ok(Frame::QueryResult { request_id, stream_seq, message: Box::new(self.message()?) })
    }

    fn query_done(&mut self) -> FieldResult<Frame> {
        let request_id = self.request_id()?;
        Ok(Frame::QueryDone {
            request_id,
            matched: self.u64("matched")?,
            scanned: self.u64("scanned")?,
            missed: self.u64("missed")?,
        })
    }

    fn manage(&mut self) -> FieldResult<Frame> {
        let request_id = self.request_id()?;
        let code = self.u8("op")?;
        let Some(op) = ManageOp::from_code(code) else {
            return Err((ErrorCode::InvalidField, format!("op: unknown code {code}, expected 1-7")));
        };
        Ok(Frame::Manage { request_id, op, body: self.str32("body")? })
    }

    fn ack(&mut self) -> FieldResult<Frame> {
        let count = usize::from(self.u16("count")?);
        self.need("delivery_tags", count * 8)?;
        let mut delivery_tags = Vec::with_capacity(count);
        for _ in 0..count {
            delivery_tags.push(self.u64("delivery_tag")?);
        }
        Ok(Frame::Ack { delivery_tags })
    }

    fn error(&mut self) -> FieldResult<ErrorFrame> {
        let code = ErrorCode::from_code(self.u16("code")?);
        let reference = self.u64("reference")?;
        self.reference = reference;
        Ok(ErrorFrame { code, reference, fatal: self.u8("fatal")? != 0, message: self.str16("message")? })
    }

    /// A message whose byte fields are left empty: their ranges go to
    /// [`Carved`], to be cut out of the buffer by [`carve`].
    pub(crate) fn message(&mut self) -> FieldResult<Message> {
        let topic = self.topic()?;
        // The fixed part: four bytes and four u64s, checked once.
        let fixed: [u8; MESSAGE_FIXED_BYTES] = self.array("message header")?;
        let [priority_level, mode_code, hop_count, flags] = [fixed[0], fixed[1], fixed[2], fixed[3]];
        let word = |index: usize| {
            let start = 4 + index * 8;
            u64::from_be_bytes(fixed[start..start + 8].try_into().unwrap_or([0; 8]))
        };
        let priority = Priority::new(priority_level).map_err(|error| (ErrorCode::InvalidField, error.to_string()))?;
        let Some(delivery_mode) = DeliveryMode::from_code(mode_code) else {
            return Err((ErrorCode::InvalidField, format!("delivery_mode: unknown code {mode_code}")));
        };
        let time_error_ns = match flags & message_flags::TIME_ERROR {
            0 => 0,
            _ => self.u32("time_error_ns")?,
        };
        let publisher = self.publisher()?;
        let properties = self.properties()?;
        if flags & message_flags::METADATA != 0 {
            self.carved.metadata = Some(self.bytes32_range("metadata")?);
        }
        self.carved.payload = Some(self.bytes32_range("payload")?);
        Ok(Message {
            topic,
            properties,
            metadata: None,
            payload: Bytes::new(),
            id: word(0),
            publisher,
            sequence: word(1),
            timestamp_ns: word(2),
            time_error_ns,
            priority,
            expiry_ns: word(3),
            delivery_mode,
            hop_count,
        })
    }

    /// The topic, shared with the previous message's when the bytes match.
    fn topic(&mut self) -> FieldResult<TopicName> {
        if let Some(recent) = &self.recent.topic {
            if starts_with_str16(&self.body[self.offset..], recent.as_str()) {
                self.offset += 2 + recent.as_str().len();
                return Ok(recent.clone());
            }
        }
        let text = self.str16("topic")?;
        let topic = TopicName::new(&text).map_err(|error| (ErrorCode::InvalidTopic, error.to_string()))?;
        self.recent.topic = Some(topic.clone());
        Ok(topic)
    }

    /// The publisher, shared with the previous message's when the bytes match.
    fn publisher(&mut self) -> FieldResult<Arc<str>> {
        if let Some(recent) = &self.recent.publisher {
            if starts_with_str16(&self.body[self.offset..], recent) {
                self.offset += 2 + recent.len();
                return Ok(recent.clone());
            }
        }
        let publisher: Arc<str> = Arc::from(self.str16("publisher")?);
        self.recent.publisher = Some(publisher.clone());
        Ok(publisher)
    }

    fn properties(&mut self) -> FieldResult<Vec<(String, Value)>> {
        let count = usize::from(self.u16("property count")?);
        // Each property takes at least 4 bytes, so a small body cannot make us
        // reserve a large vector.
        let mut properties = Vec::with_capacity(count.min(self.remaining() / 4));
        for _ in 0..count {
            let name = self.str16("property name")?;
            let value = match self.u8("property type")? {
                value_type::BOOL => Value::Bool(self.u8("bool value")? != 0),
                value_type::INT => Value::Int(self.u64("int value")? as i64),
                value_type::FLOAT => Value::Float(f64::from_bits(self.u64("float value")?)),
                value_type::STR => Value::Str(self.str32("string value")?.into()),
                other => return malformed(format!("property {name:?}: unknown value type {other}")),
            };
            properties.push((name, value));
        }
        Ok(properties)
    }
}
