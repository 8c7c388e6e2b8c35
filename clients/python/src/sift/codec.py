"""The native protocol's frames, sans I/O (docs/PROTOCOL.md §2-§5).

Encoders turn requests into bytes; `FrameDecoder` turns the broker's byte
stream into frame objects. Nothing here touches a socket, so the codec can be
tested byte for byte against the protocol's worked examples.

Speed matters on two paths: encoding PUBLISH (one `struct` pack per message
when it has no properties, metadata or time error) and decoding DELIVER
(`unpack_from` on the received bytes, one copy of the payload).
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct
from typing import Iterable, Mapping, Union

from .errors import EncodeError
from .message import Delivery
from .types import CONFIRM_STATUSES, Confirm, Gap, GapReason, PropertyValue, ServerInfo

PROTOCOL_VERSION = 1
MAGIC = b"SIFT"
DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024

# Frame type codes (§3).
HELLO = 0x01
WELCOME = 0x02
PING = 0x03
PONG = 0x04
CLOSE = 0x05
TIME = 0x06
TIME_REPLY = 0x07
AUTH = 0x08
AUTH_OK = 0x09
PUBLISH = 0x10
CONFIRM = 0x11
SUBSCRIBE = 0x20
SUBSCRIBED = 0x21
UNSUBSCRIBE = 0x22
DELIVER = 0x30
ACK = 0x31
NACK = 0x32
FLOW = 0x33
GAP = 0x34
ADMIN = 0x60
ADMIN_REPLY = 0x61
ERROR = 0x7F

FRAME_NAMES = {
    HELLO: "HELLO", WELCOME: "WELCOME", PING: "PING", PONG: "PONG", CLOSE: "CLOSE",
    TIME: "TIME", TIME_REPLY: "TIME_REPLY", AUTH: "AUTH", AUTH_OK: "AUTH_OK",
    PUBLISH: "PUBLISH", CONFIRM: "CONFIRM", SUBSCRIBE: "SUBSCRIBE", SUBSCRIBED: "SUBSCRIBED",
    UNSUBSCRIBE: "UNSUBSCRIBE", DELIVER: "DELIVER", ACK: "ACK", NACK: "NACK", FLOW: "FLOW",
    GAP: "GAP", ADMIN: "ADMIN", ADMIN_REPLY: "ADMIN_REPLY", ERROR: "ERROR",
}

# AUTH methods (§6.1.1).
AUTH_PASSWORD = 1
AUTH_TOKEN = 2
"""A bearer token: a JWT signed with Ed25519 by an issuer of the broker's users file."""

# PUBLISH flags (§4.5).
PUBLISH_CONFIRM = 0x01
PUBLISH_AWAIT_DELIVERED = 0x02
PUBLISH_PUBLISHER_TIME = 0x04
"""The message's timestamp_ns and time_error_ns are the publisher's, already in the
broker's clock: the broker keeps them instead of stamping its own time."""
# SUBSCRIBE flags (§4.7).
SUBSCRIBE_CREDIT_MODE = 0x01
SUBSCRIBE_STREAM_SOURCE = 0x02
SUBSCRIBE_SHARED = 0x04
# DELIVER flags (§4.9).
DELIVER_REDELIVERED = 0x01
DELIVER_STREAM_SEQ = 0x02
# Message flags (§5).
MESSAGE_METADATA = 0x01
MESSAGE_TIME_ERROR = 0x02
"""A u32 `time_error_ns` follows `expiry_ns`; set iff time_error_ns != 0."""
# Property types (§5).
PROPERTY_BOOL = 0
PROPERTY_INT = 1
PROPERTY_FLOAT = 2
PROPERTY_STRING = 3

ACK_TAGS_MAX = 1024
"""Tags per ACK frame the client sends (§8.3); the format allows 65 535."""

_U8 = Struct(">B")
_U16 = Struct(">H")
_U32 = Struct(">I")
_U64 = Struct(">Q")
_I64 = Struct(">q")
_F64 = Struct(">d")
_FRAME_HEAD = Struct(">IB")
_PING = Struct(">IBQ")
_TIME = Struct(">IBQQ")
_TIME_REPLY = Struct(">IBQQQQ")
_SUB_ID = Struct(">IBI")
_NACK = Struct(">IBQB")
_FLOW = Struct(">IBII")
_ACK_HEAD = Struct(">IBH")
_HELLO_HEAD = Struct(">IB4sHHH")
_PUBLISH_HEAD = Struct(">IBQBIH")
# priority, delivery_mode, hop_count, message flags, id, sequence, timestamp_ns, expiry_ns;
# then (time_error_ns,) publisher length (always 0 from a client), property count.
_MESSAGE_FIXED_HEAD = Struct(">BBBBQQQQ")
_PUBLISHER_AND_COUNT = Struct(">HH")
_SUBSCRIBE_TAIL = Struct(">BBIIIBI")
_START = Struct(">BQ")
_ADMIN = Struct(">IBQB")
_AUTH_HEAD = Struct(">IBQB")

# Decoding.
_DELIVER_HEAD = Struct(">IQB")
_MESSAGE_AFTER_TOPIC = Struct(">BBBBQQQQH")
_WELCOME_TAIL = Struct(">QIIIIII")
_CONFIRM_HEAD = Struct(">QBIIH")
_ERROR_HEAD = Struct(">HQB")
_GAP = Struct(">IQQB")
_TIME_BODY = Struct(">QQ")
_TIME_REPLY_BODY = Struct(">QQQQ")


class ProtocolError(Exception):
    """The broker's byte stream cannot be trusted any more (a framing error)."""


class MalformedFrameError(ValueError):
    """A frame body that does not parse; the stream is still in step."""


# ---------------------------------------------------------------------------
# Encoding


def _str16(text: str | bytes, field: str) -> bytes:
    data = text.encode("utf-8") if isinstance(text, str) else text
    if len(data) > 0xFFFF:
        raise EncodeError(f"{field} is {len(data)} bytes; a str16 holds at most 65535")
    return _U16.pack(len(data)) + data


def encode_hello(client_name: str, version_min: int = PROTOCOL_VERSION, version_max: int = PROTOCOL_VERSION) -> bytes:
    """HELLO (§4.1): magic, the version range, the client's name."""
    name = client_name.encode("utf-8")
    if len(name) > 0xFFFF:
        raise EncodeError("client_name is too long")
    return _HELLO_HEAD.pack(11 + len(name), HELLO, MAGIC, version_min, version_max, len(name)) + name


def encode_auth(request_id: int, user: str, secret: str | bytes, method: int = AUTH_PASSWORD) -> bytes:
    """AUTH (§6.1.1): request id, method (1 password, 2 token), the user name, the secret.

    Errors name the field, never the secret's value.
    """
    tail = _str16(user, "user") + _str16(secret, "password" if method == AUTH_PASSWORD else "token")
    return _AUTH_HEAD.pack(10 + len(tail), AUTH, request_id, method) + tail


def encode_ping(nonce: int) -> bytes:
    return _PING.pack(9, PING, nonce)


def encode_pong(nonce: int) -> bytes:
    return _PING.pack(9, PONG, nonce)


def encode_close() -> bytes:
    return _FRAME_HEAD.pack(1, CLOSE)


def encode_time(request_id: int, origin_ns: int) -> bytes:
    """TIME: asks the peer for its clock; `origin_ns` is the sender's clock as it sends."""
    return _TIME.pack(17, TIME, request_id, origin_ns)


def encode_time_reply(request_id: int, origin_ns: int, receive_ns: int, transmit_ns: int) -> bytes:
    """TIME_REPLY: echoes `origin_ns` with the replier's clock when TIME arrived and when the reply left."""
    return _TIME_REPLY.pack(33, TIME_REPLY, request_id, origin_ns, receive_ns, transmit_ns)


def encode_properties(properties: Mapping[str, PropertyValue] | Iterable[tuple[str, PropertyValue]]) -> tuple[int, bytes]:
    """(count, bytes) of typed properties, in the order given (§5).

    Python types choose the wire type: bool, int (64-bit signed), float, str.
    """
    items = properties.items() if isinstance(properties, Mapping) else properties
    parts: list[bytes] = []
    count = 0
    for name, value in items:
        head = _str16(name, "property name")
        if value is True or value is False:
            parts.append(head + bytes((PROPERTY_BOOL, 1 if value else 0)))
        elif isinstance(value, int):
            if not -(1 << 63) <= value < (1 << 63):
                raise EncodeError(f"property {name!r}: {value} does not fit a 64-bit signed integer")
            parts.append(head + b"\x01" + _I64.pack(value))
        elif isinstance(value, float):
            parts.append(head + b"\x02" + _F64.pack(value))
        elif isinstance(value, str):
            data = value.encode("utf-8")
            parts.append(head + b"\x03" + _U32.pack(len(data)) + data)
        else:
            raise EncodeError(f"property {name!r}: {type(value).__name__} is not bool, int, float or str")
        count += 1
    if count > 0xFFFF:
        raise EncodeError("at most 65535 properties")
    return count, b"".join(parts)


# Struct of the whole head of a PUBLISH without properties or metadata, up to and
# including the payload length, by topic length: one pack call per message.
_simple_publish_structs: dict[int, Struct] = {}


def simple_publish_struct(topic_length: int) -> Struct:
    """The Struct of a PUBLISH head, topic and payload length for a message without properties,
    metadata or time error."""
    packer = _simple_publish_structs.get(topic_length)
    if packer is None:
        packer = Struct(f">IBQBIH{topic_length}sBBBBQQQQHHI")
        if len(_simple_publish_structs) < 1024:
            _simple_publish_structs[topic_length] = packer
    return packer


def fire_and_forget_layout(topic: bytes) -> tuple[bytes, Struct]:
    """(head, Struct) for fire-and-forget PUBLISH frames on `topic` without properties or metadata.

    `head` is the part that never changes (type, request id 0, flags 0,
    timeout 0, the topic); the Struct packs `length, head, priority, mode,
    sequence, payload length`, writing every other field (hop count, flags,
    id, timestamp, expiry, publisher, property count) as zero pad bytes, so a
    publish costs one `pack` call with six arguments.
    """
    head = _U8.pack(PUBLISH) + bytes(13) + _U16.pack(len(topic)) + topic
    return head, Struct(f">I{len(head)}sBB10xQ20xI")


def append_publish(
    out: bytearray,
    request_id: int,
    flags: int,
    await_timeout_ms: int,
    topic: bytes,
    payload: bytes,
    priority: int = 4,
    mode: int = 0,
    sequence: int = 0,
    expiry_ns: int = 0,
    property_count: int = 0,
    properties: bytes = b"",
    metadata: bytes | None = None,
    timestamp_ns: int = 0,
    time_error_ns: int = 0,
) -> None:
    """Appends a PUBLISH (§4.5) of an already encoded topic, properties and metadata to `out`.

    `timestamp_ns` and `time_error_ns` matter only with the PUBLISHER_TIME
    flag (the broker overwrites the timestamp otherwise); a non-zero
    `time_error_ns` sets the TIME_ERROR message flag and adds its u32 (§5).
    """
    t = len(topic)
    if t > 0xFFFF:
        raise EncodeError("topic is too long")
    if not 0 <= time_error_ns <= 0xFFFFFFFF:
        raise EncodeError(f"time_error_ns {time_error_ns} does not fit a u32")
    p = len(payload)
    if metadata is None and not property_count and not time_error_ns:
        # 14 + message (2 + t + 40 + 4 + p).
        out += simple_publish_struct(t).pack(
            60 + t + p, PUBLISH, request_id, flags, await_timeout_ms, t, topic,
            priority, mode, 0, 0, 0, sequence, timestamp_ns, expiry_ns, 0, 0, p,
        )
        out += payload
        return
    message_flags = 0 if metadata is None else MESSAGE_METADATA
    meta_length = 0 if metadata is None else 4 + len(metadata)
    length = 60 + t + len(properties) + meta_length + p
    if time_error_ns:
        message_flags |= MESSAGE_TIME_ERROR
        length += 4
    out += _PUBLISH_HEAD.pack(length, PUBLISH, request_id, flags, await_timeout_ms, t)
    out += topic
    # The fixed part stops before the publisher's str16, where the time error goes.
    out += _MESSAGE_FIXED_HEAD.pack(priority, mode, 0, message_flags, 0, sequence, timestamp_ns, expiry_ns)
    if time_error_ns:
        out += _U32.pack(time_error_ns)
    out += _PUBLISHER_AND_COUNT.pack(0, property_count)
    out += properties
    if metadata is not None:
        out += _U32.pack(len(metadata))
        out += metadata
    out += _U32.pack(p)
    out += payload


def encode_publish(request_id: int, flags: int, await_timeout_ms: int, topic: bytes, payload: bytes, **fields: object) -> bytes:
    """A PUBLISH as bytes; see `append_publish` for the fields."""
    out = bytearray()
    append_publish(out, request_id, flags, await_timeout_ms, topic, payload, **fields)  # type: ignore[arg-type]
    return bytes(out)


@dataclass(frozen=True)
class StreamSection:
    """The stream section of a SUBSCRIBE (§4.7): replay or durable."""

    stream: str = ""
    durable: str = ""
    start_kind: int = 0
    start_arg: int = 0


def encode_subscribe(
    sub_id: int,
    topic_filter: str,
    queue_group: str = "",
    filter_kind: int = 0,
    filter_text: str = "",
    ack_mode: int = 1,
    policy: int = 0xFF,
    policy_argument: int = 0,
    queue_capacity: int = 0,
    max_unacked: int = 0,
    flags: int = 0,
    initial_credit: int = 0,
    stream: StreamSection | None = None,
) -> bytes:
    """SUBSCRIBE (§4.7); `stream` adds the stream section and sets STREAM_SOURCE."""
    filter_bytes = filter_text.encode("utf-8")
    parts = [
        b"",  # the frame head, filled in below
        _U32.pack(sub_id),
        _str16(topic_filter, "topic filter"),
        _str16(queue_group, "queue group"),
        _U8.pack(filter_kind),
        _U32.pack(len(filter_bytes)),
        filter_bytes,
    ]
    if stream is not None:
        flags |= SUBSCRIBE_STREAM_SOURCE
    else:
        flags &= ~SUBSCRIBE_STREAM_SOURCE
    parts.append(_SUBSCRIBE_TAIL.pack(ack_mode, policy, policy_argument, queue_capacity, max_unacked, flags, initial_credit))
    if stream is not None:
        parts.append(_str16(stream.stream, "stream"))
        parts.append(_str16(stream.durable, "durable"))
        parts.append(_START.pack(stream.start_kind, stream.start_arg))
    body_length = sum(len(part) for part in parts)
    parts[0] = _FRAME_HEAD.pack(1 + body_length, SUBSCRIBE)
    return b"".join(parts)


def encode_unsubscribe(sub_id: int) -> bytes:
    return _SUB_ID.pack(5, UNSUBSCRIBE, sub_id)


def encode_ack(tags: list[int] | tuple[int, ...]) -> bytes:
    """ACK frames for `tags`, split into frames of at most ACK_TAGS_MAX tags (§4.10, §8.3)."""
    frames = []
    for start in range(0, len(tags), ACK_TAGS_MAX):
        chunk = tags[start:start + ACK_TAGS_MAX]
        frames.append(_ACK_HEAD.pack(3 + 8 * len(chunk), ACK, len(chunk)))
        frames.append(Struct(f">{len(chunk)}Q").pack(*chunk))
    return b"".join(frames)


def encode_nack(delivery_tag: int, requeue: bool) -> bytes:
    return _NACK.pack(10, NACK, delivery_tag, 1 if requeue else 0)


def encode_flow(sub_id: int, credit: int) -> bytes:
    return _FLOW.pack(9, FLOW, sub_id, credit)


def encode_admin(request_id: int, query: int) -> bytes:
    return _ADMIN.pack(10, ADMIN, request_id, query)


# ---------------------------------------------------------------------------
# Decoding


@dataclass(frozen=True)
class Subscribed:
    sub_id: int


@dataclass(frozen=True)
class Ping:
    nonce: int


@dataclass(frozen=True)
class Pong:
    nonce: int


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class TimeRequest:
    """TIME: the peer asks for our clock (answer with TIME_REPLY)."""

    request_id: int
    origin_ns: int


@dataclass(frozen=True)
class TimeReply:
    """TIME_REPLY: three of the four timestamps of a clock exchange; the requester reads the
    fourth (arrival) itself, as soon as the frame is decoded."""

    request_id: int
    origin_ns: int
    receive_ns: int
    transmit_ns: int


@dataclass(frozen=True)
class AuthOk:
    """AUTH_OK (§6.1.1): the sign-in of `request_id` succeeded; the session acts as `user`."""

    request_id: int
    user: str


@dataclass(frozen=True)
class ErrorFrame:
    code: int
    reference: int
    fatal: bool
    message: str


@dataclass(frozen=True)
class GapFrame:
    sub_id: int
    gap: Gap


@dataclass(frozen=True)
class AdminReply:
    request_id: int
    json: str


@dataclass(frozen=True)
class UnknownFrame:
    """A frame type this client does not read (skipped, as §2.2 prescribes)."""

    frame_type: int
    body: bytes


@dataclass(frozen=True)
class Malformed:
    """A frame whose body did not parse; skipped."""

    frame_type: int
    detail: str


Frame = Union[
    ServerInfo, Confirm, Subscribed, Delivery, GapFrame, Ping, Pong, Close, ErrorFrame, AdminReply,
    TimeRequest, TimeReply, AuthOk, UnknownFrame, Malformed,
]


def _utf8(view: memoryview, start: int, end: int, field: str) -> str:
    if end > len(view):
        raise MalformedFrameError(f"{field}: body too short")
    try:
        return str(view[start:end], "utf-8")
    except UnicodeDecodeError as error:
        raise MalformedFrameError(f"{field}: invalid UTF-8") from error


def _decode_properties(view: memoryview, offset: int, count: int) -> tuple[dict[str, PropertyValue], int]:
    properties: dict[str, PropertyValue] = {}
    for _ in range(count):
        (name_length,) = _U16.unpack_from(view, offset)
        offset += 2
        name = _utf8(view, offset, offset + name_length, "property name")
        offset += name_length
        kind = view[offset]
        offset += 1
        value: PropertyValue
        if kind == PROPERTY_STRING:
            (length,) = _U32.unpack_from(view, offset)
            offset += 4
            value = _utf8(view, offset, offset + length, "property value")
            offset += length
        elif kind == PROPERTY_INT:
            (value,) = _I64.unpack_from(view, offset)
            offset += 8
        elif kind == PROPERTY_FLOAT:
            (value,) = _F64.unpack_from(view, offset)
            offset += 8
        elif kind == PROPERTY_BOOL:
            value = view[offset] != 0
            offset += 1
        else:
            raise MalformedFrameError(f"property type {kind} is not 0-3")
        # Names may repeat; a lookup finds the first (§5).
        if name not in properties:
            properties[name] = value
    return properties, offset


def decode_deliver(view: memoryview, start: int, end: int) -> Delivery:
    """A DELIVER body (`view[start:end]`, after the type byte) as a `Delivery` (§4.9, §5)."""
    sub_id, tag, flags = _DELIVER_HEAD.unpack_from(view, start)
    offset = start + 13
    stream_seq = 0
    if flags & DELIVER_STREAM_SEQ:
        (stream_seq,) = _U64.unpack_from(view, offset)
        offset += 8
    (topic_length,) = _U16.unpack_from(view, offset)
    offset += 2
    topic = str(view[offset:offset + topic_length], "utf-8")
    offset += topic_length
    priority, mode, hops, message_flags, message_id, sequence, timestamp, expiry, publisher_length = (
        _MESSAGE_AFTER_TOPIC.unpack_from(view, offset)
    )
    offset += 38
    time_error = 0
    if message_flags & MESSAGE_TIME_ERROR:
        # The u32 sits between expiry_ns and the publisher: what was read as the
        # publisher length is its first two bytes.
        (time_error,) = _U32.unpack_from(view, offset - 2)
        (publisher_length,) = _U16.unpack_from(view, offset + 2)
        offset += 4
    publisher = str(view[offset:offset + publisher_length], "utf-8")
    offset += publisher_length
    (property_count,) = _U16.unpack_from(view, offset)
    offset += 2
    if property_count:
        properties, offset = _decode_properties(view, offset, property_count)
    else:
        properties = {}
    metadata = None
    if message_flags & MESSAGE_METADATA:
        (length,) = _U32.unpack_from(view, offset)
        offset += 4
        metadata = bytes(view[offset:offset + length])
        offset += length
    (payload_length,) = _U32.unpack_from(view, offset)
    offset += 4
    payload_end = offset + payload_length
    if payload_end != end:
        raise MalformedFrameError(
            "body too short for the payload" if payload_end > end else f"{end - payload_end} bytes left over after the last field"
        )
    payload = bytes(view[offset:payload_end])
    return Delivery(
        sub_id, tag, flags & DELIVER_REDELIVERED != 0, stream_seq, topic, priority, mode, hops,
        message_id, sequence, timestamp, expiry, publisher, properties, metadata, payload, time_error,
    )


def _decode_welcome(view: memoryview, start: int, end: int) -> ServerInfo:
    (version,) = _U16.unpack_from(view, start)
    (name_length,) = _U16.unpack_from(view, start + 2)
    name = _utf8(view, start + 4, start + 4 + name_length, "server_name")
    tail = start + 4 + name_length
    if end - tail != _WELCOME_TAIL.size:
        raise MalformedFrameError("WELCOME has the wrong length")
    connection_id, max_frame, max_payload, max_subs, max_filter, window, ack_timeout = _WELCOME_TAIL.unpack_from(view, tail)
    return ServerInfo(version, name, connection_id, max_frame, max_payload, max_subs, max_filter, window, ack_timeout)


def _decode_confirm(view: memoryview, start: int, end: int) -> Confirm:
    request_id, status, matched, acked, pending_count = _CONFIRM_HEAD.unpack_from(view, start)
    if status >= len(CONFIRM_STATUSES):
        raise MalformedFrameError(f"confirm status {status} is not 0-3")
    offset = start + _CONFIRM_HEAD.size
    pending = []
    for _ in range(pending_count):
        (length,) = _U16.unpack_from(view, offset)
        pending.append(_utf8(view, offset + 2, offset + 2 + length, "pending label"))
        offset += 2 + length
    (stream_length,) = _U16.unpack_from(view, offset)
    stream = _utf8(view, offset + 2, offset + 2 + stream_length, "stream")
    offset += 2 + stream_length
    (stream_seq,) = _U64.unpack_from(view, offset)
    if offset + 8 != end:
        raise MalformedFrameError(f"{end - offset - 8} bytes left over after the last field")
    return Confirm(CONFIRM_STATUSES[status], matched, acked, tuple(pending), stream, stream_seq, request_id)


def _decode_error(view: memoryview, start: int, end: int) -> ErrorFrame:
    code, reference, fatal = _ERROR_HEAD.unpack_from(view, start)
    (length,) = _U16.unpack_from(view, start + 11)
    message = _utf8(view, start + 13, start + 13 + length, "message")
    return ErrorFrame(code, reference, fatal != 0, message)


def _expect_length(frame_type: int, start: int, end: int, length: int) -> None:
    if end - start != length:
        raise MalformedFrameError(f"{FRAME_NAMES.get(frame_type, frame_type)} body is {end - start} bytes, not {length}")


def decode_body(frame_type: int, view: memoryview, start: int, end: int) -> Frame:
    """One frame from the broker, given its type and its body `view[start:end]`."""
    if frame_type == DELIVER:
        return decode_deliver(view, start, end)
    if frame_type == CONFIRM:
        return _decode_confirm(view, start, end)
    if frame_type == SUBSCRIBED:
        _expect_length(frame_type, start, end, 4)
        return Subscribed(_U32.unpack_from(view, start)[0])
    if frame_type == PING or frame_type == PONG:
        _expect_length(frame_type, start, end, 8)
        (nonce,) = _U64.unpack_from(view, start)
        return Ping(nonce) if frame_type == PING else Pong(nonce)
    if frame_type == TIME_REPLY:
        _expect_length(frame_type, start, end, 32)
        return TimeReply(*_TIME_REPLY_BODY.unpack_from(view, start))
    if frame_type == TIME:
        _expect_length(frame_type, start, end, 16)
        return TimeRequest(*_TIME_BODY.unpack_from(view, start))
    if frame_type == ERROR:
        return _decode_error(view, start, end)
    if frame_type == GAP:
        _expect_length(frame_type, start, end, 21)
        sub_id, first_seq, count, reason = _GAP.unpack_from(view, start)
        if reason > 1:
            raise MalformedFrameError(f"gap reason {reason} is not 0-1")
        return GapFrame(sub_id, Gap(first_seq, count, GapReason.REMOVED if reason == 0 else GapReason.DAMAGED))
    if frame_type == WELCOME:
        return _decode_welcome(view, start, end)
    if frame_type == CLOSE:
        _expect_length(frame_type, start, end, 0)
        return Close()
    if frame_type == AUTH_OK:
        (request_id,) = _U64.unpack_from(view, start)
        (length,) = _U16.unpack_from(view, start + 8)
        if start + 10 + length != end:
            raise MalformedFrameError("AUTH_OK has the wrong length")
        return AuthOk(request_id, _utf8(view, start + 10, end, "user"))
    if frame_type == ADMIN_REPLY:
        (request_id,) = _U64.unpack_from(view, start)
        (length,) = _U32.unpack_from(view, start + 8)
        return AdminReply(request_id, _utf8(view, start + 12, start + 12 + length, "json"))
    return UnknownFrame(frame_type, bytes(view[start:end]))


class FrameDecoder:
    """Cuts the broker's byte stream into frames (§2).

    `feed()` takes whatever the socket returned and gives back the complete
    frames. A partial frame is kept as a list of chunks and joined once it is
    complete, so a large frame arriving in many reads is copied once, not once
    per read. A length prefix of 0 or above `max_frame_bytes` raises
    `ProtocolError` (the stream cannot be trusted); a body that does not parse
    becomes a `Malformed` frame and the stream goes on.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._needed = 4

    def feed(self, data: bytes) -> list[Frame]:
        if self._chunks:
            self._chunks.append(data)
            self._buffered += len(data)
            if self._buffered < self._needed:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._buffered = 0
        frames: list[Frame] = []
        size = len(data)
        offset = 0
        max_frame = self.max_frame_bytes
        unpack_head = _FRAME_HEAD.unpack_from
        with memoryview(data) as view:
            while True:
                if size - offset < 5:
                    self._needed = 5
                    break
                length, frame_type = unpack_head(view, offset)
                if length == 0 or length > max_frame:
                    raise ProtocolError(
                        "frame with length 0" if length == 0 else f"frame of {length} bytes exceeds {max_frame}"
                    )
                end = offset + 4 + length
                if end > size:
                    self._needed = 4 + length
                    break
                try:
                    if frame_type == DELIVER:
                        frames.append(decode_deliver(view, offset + 5, end))
                    else:
                        frames.append(decode_body(frame_type, view, offset + 5, end))
                except (MalformedFrameError, IndexError, UnicodeDecodeError) as error:
                    frames.append(Malformed(frame_type, str(error)))
                except Exception as error:  # struct.error: a field past the end of the body
                    frames.append(Malformed(frame_type, f"body too short: {error}"))
                offset = end
        if offset < size:
            rest = data[offset:]
            self._chunks = [rest]
            self._buffered = len(rest)
        return frames
