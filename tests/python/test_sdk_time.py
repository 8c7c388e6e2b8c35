"""Time in the Python SDK: TIME / TIME_REPLY and the TIME_ERROR message field, the clock
filter, publisher-stamped publishes and the time-ordering buffer.

The first part needs no broker: codec round trips against hand-built bytes,
the clock arithmetic, the ordering rules one by one, and the client against a
tiny in-process fake broker. The last part runs against the real broker (the
`broker` fixture of conftest.py).
"""

import asyncio
import itertools
import struct
import time
from collections import deque

import pytest

import sift
from sdk_support import TIMEOUT, connect, eventually
from sift import codec
from sift.clock import ClockFilter, ClockNotSyncedError, ClockSample
from sift.ordering import OrderingBuffer, ordered

SECOND = 1_000_000_000


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(" ".join(text.split()))


def annotated_hex(text: str) -> bytes:
    """Bytes written as hex pairs, each line followed by a comment."""
    pairs = []
    for line in text.splitlines():
        for token in line.split():
            if len(token) != 2 or any(c not in "0123456789abcdef" for c in token):
                break
            pairs.append(token)
    return bytes.fromhex("".join(pairs))


# ---------------------------------------------------------------------------
# Codec


def test_time_frames_encode_per_the_layout_and_decode_back():
    time_frame = codec.encode_time(5, 0x0102030405060708)
    assert time_frame == hexbytes("00 00 00 11 06 00 00 00 00 00 00 00 05 01 02 03 04 05 06 07 08")
    reply = codec.encode_time_reply(5, 10, 20, 30)
    assert reply == hexbytes(
        """00 00 00 21 07 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00 0a
           00 00 00 00 00 00 00 14 00 00 00 00 00 00 00 1e"""
    )
    assert codec.FrameDecoder().feed(time_frame + reply) == [
        codec.TimeRequest(5, 0x0102030405060708),
        codec.TimeReply(5, 10, 20, 30),
    ]


def test_time_frames_of_the_wrong_length_are_skipped_as_malformed():
    short_time = hexbytes("00 00 00 09 06 00 00 00 00 00 00 00 05")
    long_reply = codec.encode_time_reply(1, 2, 3, 4)[4:] + b"\x00"
    frames = codec.FrameDecoder().feed(short_time + struct.pack(">I", len(long_reply)) + long_reply + codec.encode_close())
    assert [type(frame) for frame in frames] == [codec.Malformed, codec.Malformed, codec.Close]


def _deliver(message: bytes, sub_id: int = 1, tag: int = 0) -> bytes:
    body = struct.pack(">BIQB", codec.DELIVER, sub_id, tag, 0) + message
    return struct.pack(">I", len(body)) + body


# A message with TIME_ERROR (and metadata): the u32 time error sits between expiry_ns
# and the publisher, every later field four bytes further on (§5).
TIMED_MESSAGE = annotated_hex(
    """00 03 61 2e 62                 topic "a.b"
       05 01 00 03                    priority 5, reliable, hop 0, flags: metadata | time error
       00 00 00 00 00 00 00 2a        id 42
       00 00 00 00 00 00 00 07        sequence 7
       17 97 9c fe 36 2a 00 00        timestamp_ns 1 700 000 000 000 000 000
       00 00 00 00 00 00 00 00        expiry_ns
       00 01 e2 40                    time_error_ns 123 456
       00 04 64 65 6d 6f              publisher "demo"
       00 01 00 01 6b 01 00 00 00 00 00 00 00 09      1 property: "k" int 9
       00 00 00 04 3c 6d 2f 3e        metadata "<m/>"
       00 00 00 02 68 69              payload "hi"
"""
)


def test_deliver_with_the_time_error_flag_decodes_every_field():
    [delivery] = codec.FrameDecoder().feed(_deliver(TIMED_MESSAGE))
    assert isinstance(delivery, sift.Delivery)
    assert delivery.topic == "a.b" and (delivery.priority, delivery.mode) == (5, 1)
    assert (delivery.id, delivery.sequence) == (42, 7)
    assert delivery.timestamp_ns == 1_700_000_000_000_000_000
    assert delivery.time_error_ns == 123_456
    assert delivery.publisher == "demo"
    assert delivery.properties == {"k": 9}
    assert delivery.metadata == b"<m/>" and delivery.payload == b"hi"


def test_deliver_without_the_flag_has_no_time_error():
    message = bytearray(TIMED_MESSAGE)
    message[8] = codec.MESSAGE_METADATA
    del message[5 + 4 + 32:5 + 4 + 32 + 4]
    [delivery] = codec.FrameDecoder().feed(_deliver(bytes(message)))
    assert delivery.time_error_ns == 0 and delivery.publisher == "demo" and delivery.payload == b"hi"


def test_deliver_with_the_flag_but_no_room_for_the_field_is_malformed():
    message = TIMED_MESSAGE[:5 + 4 + 32 + 2]  # cut inside time_error_ns
    [frame] = codec.FrameDecoder().feed(_deliver(message))
    assert isinstance(frame, codec.Malformed)


def test_publish_with_a_time_error_carries_the_flag_and_the_field():
    count, properties = codec.encode_properties({"k": 9})
    flags = codec.PUBLISH_CONFIRM | codec.PUBLISH_PUBLISHER_TIME
    frame = codec.encode_publish(
        1 << 32, flags, 0, b"a.b", b"hi", priority=5, mode=1, sequence=7, property_count=count,
        properties=properties, metadata=b"<m/>", timestamp_ns=1_700_000_000_000_000_000, time_error_ns=123_456,
    )
    assert frame[4] == codec.PUBLISH and frame[13] == flags
    assert struct.unpack_from(">I", frame)[0] == len(frame) - 4
    # The client's message is the broker's, less id and publisher.
    expected = bytearray(TIMED_MESSAGE)
    expected[9:17] = bytes(8)  # id
    expected[45:51] = b"\x00\x00"  # publisher ""
    assert frame[18:] == bytes(expected)


def test_a_publish_message_decodes_back_with_its_time():
    for time_error in (0, 1, 0xFFFFFFFF):
        frame = codec.encode_publish(0, codec.PUBLISH_PUBLISHER_TIME, 0, b"t.x", b"payload", sequence=3,
                                     timestamp_ns=123_456_789, time_error_ns=time_error)
        [delivery] = codec.FrameDecoder().feed(_deliver(frame[18:]))
        assert (delivery.timestamp_ns, delivery.time_error_ns) == (123_456_789, time_error)
        assert (delivery.sequence, delivery.topic, delivery.payload) == (3, "t.x", b"payload")


def test_the_fast_publish_path_writes_the_timestamp_and_leaves_the_flags_clear():
    fast = codec.encode_publish(7, codec.PUBLISH_PUBLISHER_TIME, 0, b"a.b", b"payload", sequence=9,
                                timestamp_ns=0x1122334455667788)
    general = bytearray()
    general += struct.pack(">IBQBIH", 14 + 2 + 3 + 40 + 4 + 7, 0x10, 7, codec.PUBLISH_PUBLISHER_TIME, 0, 3) + b"a.b"
    general += struct.pack(">BBBBQQQQHH", 4, 0, 0, 0, 0, 9, 0x1122334455667788, 0, 0, 0)
    general += struct.pack(">I", 7) + b"payload"
    assert fast == bytes(general)
    head, packer = codec.fire_and_forget_layout(b"a.b")
    assert packer.pack(60 + 3 + 7, head, 4, 0, 9, 7) + b"payload" == codec.encode_publish(
        0, 0, 0, b"a.b", b"payload", sequence=9
    )


def test_a_time_error_beyond_a_u32_is_refused():
    with pytest.raises(sift.EncodeError):
        codec.encode_publish(0, 0, 0, b"t", b"", time_error_ns=1 << 32)


# ---------------------------------------------------------------------------
# Clock filter


def test_the_true_offset_is_within_the_bound_whatever_the_asymmetry():
    for offset, out_leg, back_leg, turnaround in itertools.product(
        (-3 * SECOND, -7, 0, 1, 5 * SECOND + 1), (0, 1, 2, 999, 40_000_001), (0, 1, 3, 1_000, 7_000_000), (0, 1, 25_000)
    ):
        origin = 1_700_000_000 * SECOND + 12_345
        receive = origin + out_leg + offset
        transmit = receive + turnaround
        arrival = transmit - offset + back_leg
        sample = ClockSample.from_exchange(origin, receive, transmit, arrival)
        assert sample.round_trip_ns == out_leg + back_leg
        assert abs(sample.offset_ns - offset) <= sample.error_ns(arrival), (offset, out_leg, back_leg, turnaround)


def test_a_negative_round_trip_is_clamped_to_zero():
    # The peer claims a turnaround longer than the whole exchange (clock steps, coarse clocks).
    sample = ClockSample.from_exchange(100, 1_000, 1_500, 200)
    assert sample.round_trip_ns == 0 and sample.error_ns(200) == 0


def test_the_filter_picks_the_sample_with_the_smallest_bound():
    clock_filter = ClockFilter()
    assert clock_filter.estimate(0) is None
    now = 1_000 * SECOND
    for offset, round_trip in ((10, 9_000), (20, 100), (30, 5_000)):
        clock_filter.add(ClockSample(offset, round_trip, now))
    estimate = clock_filter.estimate(now)
    assert (estimate.offset_ns, estimate.round_trip_ns, estimate.error_ns, estimate.samples) == (20, 100, 50, 3)


def test_the_filter_keeps_the_last_eight_samples():
    clock_filter = ClockFilter()
    clock_filter.add(ClockSample(-1, 2, 0))  # the best by far, but the oldest
    for index in range(8):
        clock_filter.add(ClockSample(index, 10_000 + index, 0))
    assert len(clock_filter) == 8
    assert [sample.offset_ns for sample in clock_filter.samples] == list(range(8))
    estimate = clock_filter.estimate(0)
    assert estimate.offset_ns == 0 and estimate.samples == 8


def test_the_bound_grows_with_age_until_a_newer_sample_wins():
    sample = ClockSample(offset_ns=0, round_trip_ns=1_001, taken_ns=0)
    assert sample.error_ns(0) == 501  # half the round trip, rounded up
    assert sample.error_ns(SECOND) == 501 + 50_000  # 50 ppm of one second
    assert sample.error_ns(1) == 502  # rounded up too
    clock_filter = ClockFilter()
    clock_filter.add(ClockSample(offset_ns=1, round_trip_ns=100, taken_ns=0))
    clock_filter.add(ClockSample(offset_ns=2, round_trip_ns=10_000, taken_ns=10 * SECOND))
    at_50_ms = clock_filter.estimate(50_000_000)
    assert (at_50_ms.offset_ns, at_50_ms.error_ns) == (1, 50 + 2_500)  # against 5 000 (no age: not yet taken)
    at_ten = clock_filter.estimate(10 * SECOND)
    assert (at_ten.offset_ns, at_ten.error_ns) == (2, 5_000)  # the old one is at 50 + 500 000 by now


def test_an_estimate_maps_between_the_clocks():
    clock_filter = ClockFilter()
    clock_filter.add_exchange(origin_ns=1_000, receive_ns=4_000_000_500, transmit_ns=4_000_000_600, arrival_ns=1_100)
    estimate = clock_filter.estimate(1_100)
    assert estimate.offset_ns == 3_999_999_500
    assert estimate.to_peer(2_000) == 4_000_001_500 and estimate.to_local(estimate.to_peer(2_000)) == 2_000


# ---------------------------------------------------------------------------
# Ordering buffer


def _buffer(**options):
    options.setdefault("max_entries", 1_000)
    options.setdefault("max_bytes", 1 << 30)
    options.setdefault("max_wait_s", 1_000.0)
    options.setdefault("release_factor", 0.5)
    return OrderingBuffer(**options)


def _counters(buffer):
    return (buffer.releases_by_entries, buffer.releases_by_bytes, buffer.releases_by_wait)


@pytest.mark.parametrize("factor", [0.49, 1.01, -1.0, float("nan")])
def test_a_release_factor_outside_half_to_one_is_refused(factor):
    with pytest.raises(ValueError, match="release_factor"):
        OrderingBuffer(10, 1_000, 1.0, factor)


def test_the_entries_rule_releases_half_in_timestamp_order():
    buffer = _buffer(max_entries=4)
    assert buffer.push("d", 40, 1, 0.0) == []
    assert buffer.push("a", 10, 1, 0.0) == []
    assert buffer.push("c", 30, 1, 0.0) == []
    assert buffer.push("b", 20, 1, 0.0) == ["a", "b"]
    assert _counters(buffer) == (1, 0, 0) and len(buffer) == 2 and buffer.released == 2
    assert buffer.flush() == ["c", "d"]


def test_the_entries_rule_with_factor_one_empties_the_buffer():
    buffer = _buffer(max_entries=3, release_factor=1.0)
    assert buffer.push(3, 3, 1, 0.0) == [] and buffer.push(1, 1, 1, 0.0) == []
    assert buffer.push(2, 2, 1, 0.0) == [1, 2, 3]
    assert len(buffer) == 0 and buffer.next_deadline() is None


def test_the_bytes_rule_releases_until_under_the_limit():
    buffer = _buffer(max_bytes=100)
    for item, timestamp in (("x3", 3), ("x1", 1), ("x2", 2)):
        assert buffer.push(item, timestamp, 30, 0.0) == []
    assert buffer.held_bytes == 90
    assert buffer.push("x0", 0, 30, 0.0) == ["x0", "x1"]
    assert _counters(buffer) == (0, 1, 0) and buffer.held_bytes == 60


def test_the_wait_rule_fires_when_the_first_arrival_has_waited():
    buffer = _buffer(max_wait_s=1.0)
    buffer.push("a", 10, 1, 0.0)
    buffer.push("b", 20, 1, 0.5)
    buffer.push("c", 30, 1, 0.6)
    buffer.push("d", 40, 1, 0.7)
    assert buffer.next_deadline() == 1.0
    assert buffer.poll(0.99) == []
    assert buffer.poll(1.0) == ["a", "b"]  # c and d have waited 0.4 s and 0.3 s: they stay
    assert _counters(buffer) == (0, 0, 1)
    assert buffer.next_deadline() == pytest.approx(1.6)
    assert buffer.poll(buffer.next_deadline()) == ["c"]


def test_releasing_goes_on_while_the_head_has_waited():
    buffer = _buffer(max_entries=4, max_wait_s=10.0)
    for item, timestamp in (("a", 1), ("b", 2), ("c", 3)):
        buffer.push(item, timestamp, 1, 0.0)
    # The entries rule asks for two; c has waited 20 s itself, so it goes too; d just came.
    assert buffer.push("d", 4, 1, 20.0) == ["a", "b", "c"]
    assert _counters(buffer) == (1, 0, 0) and len(buffer) == 1


def test_a_waiting_late_timestamped_arrival_releases_everything_before_it():
    buffer = _buffer(max_wait_s=1.0)
    buffer.push("first-in-but-last", 100, 1, 0.0)
    for index in range(5):
        buffer.push(index, index, 1, 0.5)
    assert buffer.poll(1.0) == [0, 1, 2, 3, 4, "first-in-but-last"]
    assert buffer.releases_by_wait >= 1 and len(buffer) == 0


def test_a_late_item_is_released_at_once_and_counted():
    buffer = _buffer(max_entries=2, release_factor=0.5)
    buffer.push("b", 20, 1, 0.0)
    assert buffer.push("a", 10, 1, 0.0) == ["a"]
    assert buffer.last_released_ns == 10
    assert buffer.push("late", 5, 1, 0.0) == ["late"]
    assert buffer.push("same", 10, 1, 0.0) == ["same"]  # equal to the last released: in order
    assert (buffer.late, buffer.released) == (1, 3)
    assert buffer.flush() == ["b"] and buffer.released == 4


class _FakeDelivery:
    def __init__(self, timestamp_ns):
        self.timestamp_ns = timestamp_ns
        self.payload = b"x"


class _FakeSubscription:
    """What `ordered` uses of a subscription: `next_nowait` and the async iterator."""

    def __init__(self):
        self.items = deque()
        self.ended = False
        self.changed = asyncio.Event()

    def add(self, *timestamps):
        self.items.extend(_FakeDelivery(timestamp) for timestamp in timestamps)
        self.changed.set()

    def end(self):
        self.ended = True
        self.changed.set()

    def next_nowait(self):
        return self.items.popleft() if self.items else None

    async def __anext__(self):
        while not self.items:
            if self.ended:
                raise StopAsyncIteration
            self.changed.clear()
            await self.changed.wait()
        return self.items.popleft()


async def _take(iterator, count):
    return [(await iterator.__anext__()).timestamp_ns for _ in range(count)]


async def test_ordered_releases_by_the_rules_and_flushes_at_the_end():
    subscription = _FakeSubscription()
    buffer = OrderingBuffer(max_entries=3, max_bytes=1 << 20, max_wait_s=3_600.0, release_factor=1.0)
    iterator = ordered(subscription, buffer)
    subscription.add(30, 10, 20, 60)
    assert await asyncio.wait_for(_take(iterator, 3), TIMEOUT) == [10, 20, 30]
    subscription.add(50)
    subscription.end()
    rest = await asyncio.wait_for(_take(iterator, 2), TIMEOUT)
    assert rest == [50, 60]
    with pytest.raises(StopAsyncIteration):
        await iterator.__anext__()


async def test_ordered_releases_on_the_wait_deadline_without_new_input():
    subscription = _FakeSubscription()
    buffer = OrderingBuffer(max_entries=100, max_bytes=1 << 20, max_wait_s=0.02, release_factor=0.5)
    iterator = ordered(subscription, buffer)
    subscription.add(2, 1)
    assert await asyncio.wait_for(_take(iterator, 2), TIMEOUT) == [1, 2]
    assert buffer.releases_by_wait >= 1


# ---------------------------------------------------------------------------
# The client against an in-process fake broker (no broker binary)


class FakeBroker:
    """Just enough of a broker: WELCOME, TIME_REPLY from a clock `offset_ns` off the system
    clock, CONFIRM for every publish asking for one, and CLOSE. Keeps the PUBLISH bodies."""

    def __init__(self, offset_ns=0, ask_time=False):
        self.offset_ns = offset_ns
        self.ask_time = ask_time
        self.publishes = asyncio.Queue()
        self.time_replies = asyncio.Queue()
        self.server = None
        self.port = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info):
        self.server.close()
        await self.server.wait_closed()

    def now(self):
        return time.time_ns() + self.offset_ns

    async def _serve(self, reader, writer):
        try:
            await self._read_frame(reader)  # HELLO
            name = b"fake"
            writer.write(struct.pack(">IBHH", 37 + len(name), codec.WELCOME, 1, len(name)) + name
                         + struct.pack(">QIIIIII", 1, 1 << 20, 1 << 19, 100, 4096, 64, 30_000))
            if self.ask_time:
                writer.write(codec.encode_time(77, self.now()))
            while True:
                frame_type, body = await self._read_frame(reader)
                if frame_type == codec.TIME:
                    receive = self.now()
                    request_id, origin = struct.unpack(">QQ", body)
                    writer.write(codec.encode_time_reply(request_id, origin, receive, self.now()))
                elif frame_type == codec.TIME_REPLY:
                    self.time_replies.put_nowait(struct.unpack(">QQQQ", body))
                elif frame_type == codec.PUBLISH:
                    self.publishes.put_nowait(body)
                    request_id, flags = struct.unpack_from(">QB", body)
                    if flags & codec.PUBLISH_CONFIRM:
                        writer.write(struct.pack(">IBQBIIHHQ", 30, codec.CONFIRM, request_id, 0, 1, 0, 0, 0, 0))
                elif frame_type == codec.CLOSE:
                    writer.write(codec.encode_close())
                    await writer.drain()
                    break
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    @staticmethod
    async def _read_frame(reader):
        (length,) = struct.unpack(">I", await reader.readexactly(4))
        body = await reader.readexactly(length)
        return body[0], body[1:]


def _publish_message(body):
    """The message of a PUBLISH body (after the type byte) decoded as the broker would deliver it."""
    [delivery] = codec.FrameDecoder().feed(_deliver(body[13:]))
    return delivery


def _shifted(offset_ns):
    return lambda: time.time_ns() + offset_ns


async def test_sync_clock_sees_a_client_clock_three_seconds_ahead():
    async with FakeBroker() as fake:
        async with await sift.connect("127.0.0.1", fake.port, clock=_shifted(3 * SECOND), clock_sync_interval=None) as client:
            assert client.clock_estimate() is None
            estimate = await client.sync_clock()
            assert estimate.samples == 8
            assert abs(estimate.offset_ns - (-3 * SECOND)) <= estimate.error_ns < SECOND
            assert client.clock_estimate().error_ns >= estimate.error_ns


async def test_sync_clock_sees_a_broker_clock_behind():
    async with FakeBroker(offset_ns=-2 * SECOND - 123) as fake:
        async with await sift.connect("127.0.0.1", fake.port, clock_sync_interval=None) as client:
            estimate = await client.sync_clock(samples=3)
            assert estimate.samples == 3
            assert abs(estimate.offset_ns - (-2 * SECOND - 123)) <= estimate.error_ns


async def test_a_publisher_time_publish_carries_the_time_in_the_brokers_clock():
    async with FakeBroker(offset_ns=SECOND) as fake:
        async with await sift.connect("127.0.0.1", fake.port, clock=_shifted(-4 * SECOND), clock_sync_interval=None) as client:
            before = fake.now()
            await client.publish("t.x", b"p", publisher_time=True)  # syncs first: no estimate yet
            after = fake.now()
            body = await asyncio.wait_for(fake.publishes.get(), TIMEOUT)
            assert body[8] == codec.PUBLISH_CONFIRM | codec.PUBLISH_PUBLISHER_TIME
            message = _publish_message(body)
            assert message.time_error_ns >= 1
            assert before - message.time_error_ns <= message.timestamp_ns <= after + message.time_error_ns

            # An explicit local time is carried over too, and the fast path stays for plain publishes.
            local = client._clock() - 5 * SECOND
            client.publish_nowait("t.x", b"q", publisher_time=True, timestamp_ns=local)
            client.publish_nowait("t.x", b"r")
            timed = _publish_message(await asyncio.wait_for(fake.publishes.get(), TIMEOUT))
            plain = await asyncio.wait_for(fake.publishes.get(), TIMEOUT)
            assert timed.payload == b"q" and timed.time_error_ns >= 1
            # Broker clock (system + 1 s) minus client clock (system - 4 s): 5 s.
            assert abs(timed.timestamp_ns - (local + 5 * SECOND)) <= timed.time_error_ns
            assert plain[8] == 0 and _publish_message(plain).time_error_ns == 0


async def test_publish_nowait_with_publisher_time_needs_an_estimate():
    async with FakeBroker() as fake:
        async with await sift.connect("127.0.0.1", fake.port, clock_sync_interval=None) as client:
            with pytest.raises(ClockNotSyncedError):
                client.publish_nowait("t.x", b"p", publisher_time=True)
            with pytest.raises(ValueError):
                client.publish_nowait("t.x", b"p", timestamp_ns=1)
            with pytest.raises(ValueError):
                await client.publish("t.x", b"p", timestamp_ns=1)


async def test_the_client_answers_time_with_its_own_clock():
    async with FakeBroker(ask_time=True) as fake:
        async with await sift.connect("127.0.0.1", fake.port, clock=_shifted(7 * SECOND), clock_sync_interval=None):
            request_id, origin, receive, transmit = await asyncio.wait_for(fake.time_replies.get(), TIMEOUT)
            # Read with the injected clock, 7 s ahead, after the fake broker's origin.
            assert request_id == 77
            assert origin + 7 * SECOND <= receive <= transmit <= time.time_ns() + 7 * SECOND


async def test_the_background_sync_makes_an_estimate_after_connect():
    async with FakeBroker(offset_ns=SECOND) as fake:
        async with await sift.connect("127.0.0.1", fake.port, clock_sync_interval=0.05) as client:
            await eventually(lambda: client.clock_estimate() is not None, what="a clock estimate")
            estimate = client.clock_estimate()
            assert abs(estimate.offset_ns - SECOND) <= estimate.error_ns
            await eventually(lambda: client.clock_estimate().samples == 8, what="a full clock filter")
        with pytest.raises(asyncio.CancelledError):  # close() stops it
            await client._clock_task


# ---------------------------------------------------------------------------
# Against the real broker


async def test_sync_clock_against_the_broker_with_a_client_three_seconds_ahead(broker):
    async with await connect(broker, clock=_shifted(3 * SECOND), clock_sync_interval=None) as client:
        estimate = await client.sync_clock()
        assert estimate.samples == 8
        assert abs(estimate.offset_ns - (-3 * SECOND)) <= estimate.error_ns < SECOND


async def test_a_publisher_time_publish_arrives_with_the_publishers_send_time(broker):
    shifted = _shifted(3 * SECOND)
    async with await connect(broker, name="subscriber") as subscriber, \
            await connect(broker, name="skewed", clock=shifted, clock_sync_interval=None) as publisher:
        subscription = await subscriber.subscribe("clock.>")
        before = time.time_ns()
        await publisher.publish("clock.stamped", b"stamped", publisher_time=True)
        after = time.time_ns()
        stamped = await subscription.next(timeout=TIMEOUT)
        assert stamped.payload == b"stamped" and stamped.publisher == "skewed"
        assert 1 <= stamped.time_error_ns < SECOND
        assert before - stamped.time_error_ns <= stamped.timestamp_ns <= after + stamped.time_error_ns

        # An explicit time in the publisher's clock: one second ago, wherever that clock is.
        before = time.time_ns()
        await publisher.publish("clock.explicit", b"explicit", publisher_time=True, timestamp_ns=shifted() - SECOND)
        after = time.time_ns()
        explicit = await subscription.next(timeout=TIMEOUT)
        error = explicit.time_error_ns
        assert before - SECOND - error <= explicit.timestamp_ns <= after - SECOND + error

        # Without publisher_time the broker stamps its own clock and there is no error.
        before = time.time_ns()
        await publisher.publish("clock.broker", b"broker")
        after = time.time_ns()
        plain = await subscription.next(timeout=TIMEOUT)
        assert plain.time_error_ns == 0 and before <= plain.timestamp_ns <= after


async def test_a_publisher_time_far_from_the_brokers_clock_is_refused(broker):
    async with await connect(broker, clock_sync_interval=None) as client:
        await client.sync_clock(samples=2)
        with pytest.raises(sift.InvalidFieldError):
            await client.publish("clock.x", b"x", publisher_time=True, timestamp_ns=time.time_ns() + 3_600 * SECOND)
        confirm = await client.publish("clock.x", b"x", publisher_time=True)  # the session goes on
        assert confirm.status == sift.ConfirmStatus.NO_SUBSCRIBERS


async def test_ordered_delivers_publisher_stamped_messages_in_send_order(broker):
    async with await connect(broker, name="subscriber") as subscriber, \
            await connect(broker, name="publisher", clock_sync_interval=None) as publisher:
        subscription = await subscriber.subscribe("ordered.>")
        await publisher.sync_clock()
        start = time.time_ns()
        # Published newest first: the broker routes them in that order.
        for offset_ms in (3, 2, 1):
            publisher.publish_nowait(f"ordered.{offset_ms}", b"%d" % offset_ms, publisher_time=True,
                                     timestamp_ns=start + offset_ms * 1_000_000)
        await publisher.flush()
        buffer = OrderingBuffer(max_entries=3, max_bytes=1 << 20, max_wait_s=TIMEOUT, release_factor=1.0)
        iterator = ordered(subscription, buffer)
        payloads = [(await asyncio.wait_for(iterator.__anext__(), TIMEOUT)).payload for _ in range(3)]
        assert payloads == [b"1", b"2", b"3"]
        assert buffer.releases_by_entries == 1 and buffer.late == 0


async def test_the_background_sync_estimates_the_brokers_clock(broker):
    async with await connect(broker, clock_sync_interval=0.05) as client:
        await eventually(lambda: client.clock_estimate() is not None, what="a clock estimate")
        estimate = client.clock_estimate()
        assert abs(estimate.offset_ns) <= estimate.error_ns
