"""The Python SDK's codec against the byte-exact examples of docs/PROTOCOL.md (§4, §5, §9)."""

import struct

import pytest

from sift import codec
from sift.errors import BrokerError, InvalidFilterError
from sift.message import Delivery
from sift.types import Confirm, ConfirmStatus, Gap, GapReason, ServerInfo, StartKind, StartPosition, rfc3339_to_ns


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(" ".join(text.split()))


HELLO = hexbytes("00 00 00 0f 01 53 49 46 54 00 01 00 01 00 04 64 65 6d 6f")
WELCOME = hexbytes(
    """00 00 00 29 02 00 01 00 04 73 69 66 74 00 00 00
       00 00 00 00 01 00 80 00 00 00 40 00 00 00 00 27
       10 00 00 10 00 00 00 04 00 00 00 75 30"""
)
SUBSCRIBE = hexbytes(
    """00 00 00 29 20 00 00 00 01 00 08 6f 72 64 65 72
       73 2e 3e 00 00 00 00 00 00 00 01 ff 00 00 00 00
       00 00 00 00 00 00 00 00 00 00 00 00 00"""
)
SUBSCRIBED = hexbytes("00 00 00 05 21 00 00 00 01")
PUBLISH = hexbytes(
    """00 00 00 56 10 00 00 00 01 00 00 00 00 01 00 00
       00 00 00 0a 6f 72 64 65 72 73 2e 6e 65 77 04 01
       00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
       00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00
       00 00 00 00 00 01 00 03 71 74 79 01 00 00 00 00
       00 00 00 03 00 00 00 02 68 69"""
)
CONFIRM = hexbytes(
    """00 00 00 1e 11 00 00 00 01 00 00 00 00 00 00 00
       00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00
       00 00"""
)
DELIVER = hexbytes(
    """00 00 00 5a 30 00 00 00 01 00 00 00 00 00 00 00
       01 00 00 0a 6f 72 64 65 72 73 2e 6e 65 77 04 01
       00 00 00 00 00 00 00 00 12 34 00 00 00 00 00 00
       00 01 17 97 9c fe 36 2a 00 00 00 00 00 00 00 00
       00 00 00 04 64 65 6d 6f 00 01 00 03 71 74 79 01
       00 00 00 00 00 00 00 03 00 00 00 02 68 69"""
)
ACK = hexbytes("00 00 00 0b 31 00 01 00 00 00 00 00 00 00 01")


def test_hello_matches_the_worked_example():
    assert codec.encode_hello("demo") == HELLO


def test_welcome_decodes_to_the_limits():
    [info] = codec.FrameDecoder().feed(WELCOME)
    assert info == ServerInfo(
        version=1, server_name="sift", connection_id=1, max_frame_bytes=8_388_608,
        max_payload_bytes=4_194_304, max_subscriptions=10_000, max_filter_bytes=4096,
        publish_window=1024, ack_timeout_ms=30_000,
    )


def test_subscribe_with_default_options_matches_the_worked_example():
    assert codec.encode_subscribe(1, "orders.>") == SUBSCRIBE


def test_subscribed_decodes():
    assert codec.FrameDecoder().feed(SUBSCRIBED) == [codec.Subscribed(1)]


def test_publish_matches_the_worked_example():
    count, properties = codec.encode_properties({"qty": 3})
    frame = codec.encode_publish(
        1 << 32, codec.PUBLISH_CONFIRM, 0, b"orders.new", b"hi",
        priority=4, mode=1, sequence=1, property_count=count, properties=properties,
    )
    assert frame == PUBLISH


def test_publish_without_properties_takes_the_fast_path_with_the_same_layout():
    fast = codec.encode_publish(7, 0, 0, b"a.b", b"payload", sequence=9)
    general = bytearray()
    general += struct.pack(">IBQBIH", 14 + 2 + 3 + 40 + 4 + 7, 0x10, 7, 0, 0, 3) + b"a.b"
    general += struct.pack(">BBBBQQQQHH", 4, 0, 0, 0, 0, 9, 0, 0, 0, 0)
    general += struct.pack(">I", 7) + b"payload"
    assert fast == bytes(general)


def test_message_with_metadata_and_three_property_types_matches_section_5():
    expected_message = hexbytes(
        """00 01 74 04 00 00 01
           00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
           00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
           00 00 00 03
           00 01 62 00 01
           00 01 66 02 3f f8 00 00 00 00 00 00
           00 01 73 03 00 00 00 01 78
           00 00 00 04 3c 6d 2f 3e
           00 00 00 00"""
    )
    count, properties = codec.encode_properties({"b": True, "f": 1.5, "s": "x"})
    frame = codec.encode_publish(0, 0, 0, b"t", b"", property_count=count, properties=properties, metadata=b"<m/>")
    assert frame[18:] == expected_message
    assert struct.unpack(">I", frame[:4])[0] == 14 + len(expected_message)


def test_confirm_decodes():
    [confirm] = codec.FrameDecoder().feed(CONFIRM)
    assert confirm == Confirm(ConfirmStatus.ACCEPTED, matched=1)
    assert confirm.request_id == 1 << 32


def test_incomplete_confirm_with_a_pending_label_decodes():
    frame = hexbytes(
        """00 00 00 28 11 00 00 00 01 00 00 00 01 03 00 00
           00 02 00 00 00 01 00 01 00 08 64 65 6d 6f 23 31
           2f 31 00 00 00 00 00 00 00 00 00 00"""
    )
    [confirm] = codec.FrameDecoder().feed(frame)
    assert confirm == Confirm(ConfirmStatus.INCOMPLETE, matched=2, acked=1, pending=("demo#1/1",))
    assert confirm.request_id == 4294967297


def test_persistent_confirm_carries_its_stream_and_sequence():
    frame = hexbytes(
        """00 00 00 24 11 00 00 00 01 00 00 00 00 00 00 00
           00 00 00 00 00 00 00 00 00 06 6f 72 64 65 72 73
           00 00 00 00 00 00 00 07"""
    )
    [confirm] = codec.FrameDecoder().feed(frame)
    assert confirm == Confirm(ConfirmStatus.ACCEPTED, matched=0, stream="orders", stream_seq=7)


def test_deliver_decodes_every_message_field():
    [delivery] = codec.FrameDecoder().feed(DELIVER)
    assert isinstance(delivery, Delivery)
    assert (delivery.sub_id, delivery.delivery_tag, delivery.redelivered, delivery.stream_seq) == (1, 1, False, 0)
    assert delivery.topic == "orders.new"
    assert (delivery.priority, delivery.mode, delivery.hop_count) == (4, 1, 0)
    assert delivery.id == 4660
    assert delivery.sequence == 1
    assert delivery.timestamp_ns == 1_700_000_000_000_000_000
    assert delivery.expiry_ns == 0
    assert delivery.publisher == "demo"
    assert delivery.properties == {"qty": 3}
    assert delivery.metadata is None
    assert delivery.payload == b"hi"


def test_deliver_with_stream_seq_and_redelivered_flag():
    body = bytearray(DELIVER[4:])
    body[13] = codec.DELIVER_REDELIVERED | codec.DELIVER_STREAM_SEQ
    body[14:14] = struct.pack(">Q", 42)
    [delivery] = codec.FrameDecoder().feed(struct.pack(">I", len(body)) + bytes(body))
    assert delivery.redelivered and delivery.stream_seq == 42 and delivery.payload == b"hi"


def test_ack_matches_the_worked_example():
    assert codec.encode_ack([1]) == ACK


def test_ack_splits_into_frames_of_1024_tags():
    frames = codec.encode_ack(list(range(1, 2050)))
    lengths = []
    offset = 0
    while offset < len(frames):
        (length,) = struct.unpack_from(">I", frames, offset)
        lengths.append(length)
        offset += 4 + length
    assert lengths == [3 + 8 * 1024, 3 + 8 * 1024, 3 + 8 * 1]


def test_fixed_size_frames():
    assert codec.encode_ping(7) == hexbytes("00 00 00 09 03 00 00 00 00 00 00 00 07")
    assert codec.encode_close() == hexbytes("00 00 00 01 05")
    assert len(codec.encode_nack(5, True)) == 14
    assert len(codec.encode_flow(1, 10)) == 13
    assert len(codec.encode_unsubscribe(1)) == 9
    assert codec.FrameDecoder().feed(hexbytes("00 00 00 09 03 00 00 00 00 00 00 00 07")) == [codec.Ping(7)]
    assert codec.FrameDecoder().feed(hexbytes("00 00 00 01 05")) == [codec.Close()]


def test_error_frame_decodes():
    frame = hexbytes("00 00 00 0f 7f 00 0a 00 00 00 00 00 00 00 02 00 00 01 78")
    assert codec.FrameDecoder().feed(frame) == [codec.ErrorFrame(code=10, reference=2, fatal=False, message="x")]


def test_gap_decodes():
    frame = hexbytes(
        """00 00 00 16 34 00 00 00 01 00 00 00 00 00 00 00
           05 00 00 00 00 00 00 00 03 00"""
    )
    assert codec.FrameDecoder().feed(frame) == [codec.GapFrame(1, Gap(5, 3, GapReason.REMOVED))]


def test_frames_split_anywhere_are_reassembled():
    stream = WELCOME + SUBSCRIBED + CONFIRM + DELIVER
    whole = codec.FrameDecoder().feed(stream)
    for cut in range(1, len(stream)):
        decoder = codec.FrameDecoder()
        frames = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert [type(frame) for frame in frames] == [type(frame) for frame in whole]
    byte_by_byte = codec.FrameDecoder()
    frames = [frame for index in range(len(stream)) for frame in byte_by_byte.feed(stream[index:index + 1])]
    assert len(frames) == 4 and frames[3].payload == b"hi"


def test_a_malformed_body_is_skipped_and_the_stream_goes_on():
    bad = hexbytes("00 00 00 06 21 00 00 00 01 ff")  # SUBSCRIBED with a byte left over
    frames = codec.FrameDecoder().feed(bad + SUBSCRIBED)
    assert isinstance(frames[0], codec.Malformed)
    assert frames[1] == codec.Subscribed(1)


def test_framing_errors_are_fatal():
    with pytest.raises(codec.ProtocolError):
        codec.FrameDecoder().feed(hexbytes("00 00 00 00 05"))
    with pytest.raises(codec.ProtocolError):
        codec.FrameDecoder(max_frame_bytes=100).feed(hexbytes("00 00 01 00 05"))


def test_subscribe_with_a_stream_section():
    frame = codec.encode_subscribe(
        3, "a.>", filter_kind=2, filter_text="x = 1", flags=codec.SUBSCRIBE_SHARED,
        stream=codec.StreamSection("orders", "d1", int(StartKind.LAST), 5),
    )
    (length,) = struct.unpack_from(">I", frame)
    assert length == 46 + 3 + 0 + 5 + 6 + 2
    assert frame.endswith(b"\x00\x06orders\x00\x02d1" + struct.pack(">BQ", 2, 5))
    flags_offset = 4 + 1 + 4 + 2 + 3 + 2 + 1 + 4 + 5 + 1 + 1 + 4 + 4 + 4
    assert frame[flags_offset] == codec.SUBSCRIBE_SHARED | codec.SUBSCRIBE_STREAM_SOURCE


def test_property_types_round_trip_through_a_deliver():
    count, encoded = codec.encode_properties({"b": False, "i": -(1 << 63), "f": -0.25, "s": "été"})
    assert count == 4
    properties, end = codec._decode_properties(memoryview(encoded), 0, count)
    assert properties == {"b": False, "i": -(1 << 63), "f": -0.25, "s": "été"}
    assert end == len(encoded)


def test_unencodable_properties_are_refused():
    with pytest.raises(ValueError):
        codec.encode_properties({"big": 1 << 63})
    with pytest.raises(ValueError):
        codec.encode_properties({"list": [1]})


def test_start_positions_parse_like_the_cli():
    assert StartPosition.parse("first") == StartPosition(StartKind.FIRST)
    assert StartPosition.parse("last:5") == StartPosition(StartKind.LAST, 5)
    assert StartPosition.parse("seq:9") == StartPosition(StartKind.SEQ, 9)
    assert StartPosition.parse("time:2026-11-24T18:00:00Z").argument == rfc3339_to_ns("2026-11-24T18:00:00Z")
    assert rfc3339_to_ns("2026-11-24T19:00:00.25+01:00") == rfc3339_to_ns("2026-11-24T18:00:00Z") + 250_000_000
    assert rfc3339_to_ns("1970-01-01T00:00:00.000000001Z") == 1
    with pytest.raises(ValueError):
        StartPosition.parse("last")


def test_broker_errors_are_typed_by_code():
    error = BrokerError.from_frame(11, "content filter: sql: at byte 7: expected an operand", reference=1)
    assert isinstance(error, InvalidFilterError)
    assert (error.code, error.number, error.position) == ("invalid_filter", 11, 7)
    unknown = BrokerError.from_frame(999, "?")
    assert type(unknown) is BrokerError and unknown.code == "unknown" and unknown.number == 999


def test_the_fire_and_forget_layout_equals_the_general_encoder():
    topic, payload = b"bench.data", b"x" * 128
    head, packer = codec.fire_and_forget_layout(topic)
    fast = packer.pack(60 + len(topic) + len(payload), head, 7, 1, 99, len(payload)) + payload
    assert fast == codec.encode_publish(0, 0, 0, topic, payload, priority=7, mode=1, sequence=99)
