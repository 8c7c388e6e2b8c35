"""The MQTT 3.1.1 / 5.0 front-end with real third-party clients, paho-mqtt 2.2
and Debian's mosquitto_pub / mosquitto_sub, against a real broker per test:
QoS 0/1/2 and the exact QoS 2 handshake, wildcards and the topic mapping,
retained messages, wills, persistent sessions and takeover, shared
subscriptions, MQTT 5 properties (user properties, `sift-sql` content
filters, message expiry, topic aliases, subscription identifiers, no-local),
bad input, and messages crossing between MQTT, STOMP, the native protocol
and the `sift` command line.

paho calls back on its own network thread and the mosquitto tools print on
their own: the tests wait on queues fed from there, never for a fixed time.
To show that something did not arrive, a sentinel is published after it and
waited for. A hand-written socket (`RawMqtt`) sends what well-behaved
clients never send. Every client and process a test starts is stopped by its
fixture, pass or fail.
"""

import asyncio
import queue
import socket
import struct
import subprocess
import threading

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

import sift
from conftest import start_broker
from sdk_support import TIMEOUT, broker_config, connect, sift_pub
from stomp_support import stomp_client, take

V311, V5 = mqtt.MQTTv311, mqtt.MQTTv5
VERSIONS = [pytest.param(V311, id="v311"), pytest.param(V5, id="v5")]
SENTINEL = b"sentinel"


def properties(packet_type, user=(), **fields):
    """MQTT 5 properties for paho: `user` is a list of (name, value) user
    properties, the other fields are paho's names (`ContentType`, ...)."""
    result = Properties(packet_type)
    if user:
        result.UserProperty = list(user)
    for name, value in fields.items():
        setattr(result, name, value)
    return result


def user_properties(message):
    """The user properties of a received message, as a dict."""
    return dict(getattr(message.properties, "UserProperty", None) or [])


def received(messages):
    """(topic, payload) of each message: what most assertions compare."""
    return [(message.topic, message.payload) for message in messages]


class Mqtt:
    """A paho client on its own network thread. CONNACKs, SUBACKs, messages
    and disconnections go on queues the test waits on. It never reconnects
    by itself: each connection a test makes is one it asked for."""

    def __init__(self, broker, client_id, version=V5, clean=True, manual_ack=False):
        self.broker = broker
        self.client_id = client_id
        self.version = version
        self.clean = clean
        self.paho = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version,
            clean_session=None if version == V5 else clean,
            reconnect_on_failure=False, manual_ack=manual_ack,
        )
        self.messages = queue.Queue()
        self.connacks = queue.Queue()
        self.subacks = queue.Queue()
        self.disconnects = queue.Queue()
        self.connack_properties = None
        self.suback_properties = None
        self.finished = False
        self.paho.on_connect = lambda _c, _u, flags, reason, props: self.connacks.put((flags.session_present, reason, props))
        self.paho.on_subscribe = lambda _c, _u, mid, reasons, props: self.subacks.put(
            (mid, [reason.value for reason in reasons], props))
        self.paho.on_message = lambda _c, _u, message: self.messages.put(message)
        self.paho.on_disconnect = lambda _c, _u, _f, reason, props: self.disconnects.put((reason, props))

    def connect(self, session_expiry=None, will=None, keepalive=60):
        """CONNECT and wait for the CONNACK; returns its session present flag.

        `will` is (topic, payload, qos, retain, will properties or None)."""
        if will is not None:
            topic, payload, qos, retain, will_properties = will
            self.paho.will_set(topic, payload, qos, retain, will_properties)
        options = {}
        if self.version == V5:
            connect_properties = Properties(PacketTypes.CONNECT)
            if session_expiry is not None:
                connect_properties.SessionExpiryInterval = session_expiry
            options = {"clean_start": self.clean, "properties": connect_properties}
        self.paho.connect(self.broker.mqtt_host, self.broker.mqtt_port, keepalive, **options)
        self.paho.loop_start()
        present, reason, connack_properties = self.connacks.get(timeout=TIMEOUT)
        assert not reason.is_failure, f"CONNACK refused: {reason}"
        self.connack_properties = connack_properties
        return bool(present)

    def subscribe(self, topic_filter, qos=1, subscribe_properties=None, **options):
        """SUBSCRIBE to one filter and wait for the SUBACK; returns its reason
        code (the QoS granted, or 0x80 and up). `options` are MQTT 5's
        `noLocal`, `retainAsPublished` and `retainHandling`."""
        entry = (topic_filter, SubscribeOptions(qos=qos, **options)) if self.version == V5 else (topic_filter, qos)
        result, mid = self.paho.subscribe([entry], properties=subscribe_properties)
        assert result == mqtt.MQTT_ERR_SUCCESS, result
        acked, codes, self.suback_properties = self.subacks.get(timeout=TIMEOUT)
        assert acked == mid
        return codes[0]

    def publish(self, topic, payload, qos=1, retain=False, publish_properties=None, user=None):
        """PUBLISH; at QoS 1 and 2, wait until the broker acknowledged it
        (PUBACK, or the PUBREC-PUBREL-PUBCOMP exchange)."""
        if user is not None:
            publish_properties = publish_properties or Properties(PacketTypes.PUBLISH)
            publish_properties.UserProperty = list(user)
        info = self.paho.publish(topic, payload, qos=qos, retain=retain, properties=publish_properties)
        assert info.rc == mqtt.MQTT_ERR_SUCCESS, info.rc
        if qos:
            info.wait_for_publish(TIMEOUT)
            assert info.is_published(), f"no acknowledgement for the QoS {qos} publish on {topic!r}"
        return info

    def next(self):
        """The next message received (fails after TIMEOUT seconds)."""
        try:
            return self.messages.get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no message for {self.client_id!r} within {TIMEOUT} s") from None

    def until_sentinel(self, count=1):
        """The messages received until `count` sentinels came (sentinels left out).

        MQTT keeps the order of one topic's messages only, so a test that
        publishes on several topics sends a sentinel on each of them."""
        seen = []
        while count:
            message = self.next()
            if message.payload == SENTINEL:
                count -= 1
            else:
                seen.append(message)
        return seen

    def close(self, reason=None):
        """DISCONNECT (MQTT 5: with `reason`) and stop the network thread."""
        if self.finished:
            return
        self.finished = True
        if self.paho.is_connected():
            if reason is None:
                self.paho.disconnect()
            else:
                self.paho.disconnect(reasoncode=ReasonCode(PacketTypes.DISCONNECT, identifier=reason))
        self.paho.loop_stop()

    def drop(self):
        """Ends the connection without DISCONNECT, as a crashing client would."""
        self.finished = True
        self.paho.loop_stop()
        sock = self.paho.socket()
        if sock is not None:
            sock.close()


# A hand-written MQTT connection, for the packets paho would never send.

CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 2, 3, 4, 5, 6, 7
SUBSCRIBE, SUBACK, DISCONNECT = 8, 9, 14

# MQTT 5 property identifiers and their wire types.
PROPERTY_TYPES = {
    0x01: "byte", 0x02: "u32", 0x03: "str", 0x08: "str", 0x09: "bin", 0x0B: "varint", 0x11: "u32",
    0x12: "str", 0x13: "u16", 0x15: "str", 0x16: "bin", 0x17: "byte", 0x18: "u32", 0x19: "byte",
    0x1A: "str", 0x1C: "str", 0x1F: "str", 0x21: "u16", 0x22: "u16", 0x23: "u16", 0x24: "byte",
    0x25: "byte", 0x26: "pair", 0x27: "u32", 0x28: "byte", 0x29: "byte", 0x2A: "byte",
}
SESSION_EXPIRY, WILL_DELAY, MAXIMUM_PACKET_SIZE = 0x11, 0x18, 0x27


def varint(number):
    out = bytearray()
    while True:
        byte, number = number % 128, number // 128
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


def string(data):
    data = data.encode() if isinstance(data, str) else data
    return struct.pack("!H", len(data)) + data


def packet(first_byte, body):
    return bytes([first_byte]) + varint(len(body)) + body


def encode_properties(items):
    """MQTT 5 properties from (identifier, value) pairs."""
    body = b""
    for identifier, value in items:
        kind = PROPERTY_TYPES[identifier]
        if kind == "byte":
            encoded = bytes([value])
        elif kind == "u16":
            encoded = struct.pack("!H", value)
        elif kind == "u32":
            encoded = struct.pack("!I", value)
        elif kind == "varint":
            encoded = varint(value)
        elif kind == "pair":
            encoded = string(value[0]) + string(value[1])
        else:
            encoded = string(value)
        body += bytes([identifier]) + encoded
    return varint(len(body)) + body


def decode_properties(data, offset):
    """({identifier: value}, offset after them) of the properties at `offset`."""

    def read_varint(at):
        number, shift = 0, 0
        while True:
            byte = data[at]
            number += (byte & 0x7F) << shift
            shift, at = shift + 7, at + 1
            if not byte & 0x80:
                return number, at

    def read_string(at):
        (length,) = struct.unpack_from("!H", data, at)
        return data[at + 2:at + 2 + length], at + 2 + length

    length, offset = read_varint(offset)
    end, found = offset + length, {}
    while offset < end:
        identifier = data[offset]
        offset += 1
        kind = PROPERTY_TYPES[identifier]
        if kind == "byte":
            value, offset = data[offset], offset + 1
        elif kind == "u16":
            (value,), offset = struct.unpack_from("!H", data, offset), offset + 2
        elif kind == "u32":
            (value,), offset = struct.unpack_from("!I", data, offset), offset + 4
        elif kind == "varint":
            value, offset = read_varint(offset)
        elif kind == "pair":
            name, offset = read_string(offset)
            text, offset = read_string(offset)
            value = (name.decode(), text.decode())
        else:
            value, offset = read_string(offset)
            value = value.decode() if kind == "str" else value
        if identifier in (0x0B, 0x26):  # subscription identifiers and user properties repeat
            found.setdefault(identifier, []).append(value)
        else:
            found[identifier] = value
    return found, offset


class RawMqtt:
    """A plain socket speaking MQTT byte by byte."""

    def __init__(self, broker, version=5):
        self.version = version
        self.sock = socket.create_connection((broker.mqtt_host, broker.mqtt_port), timeout=TIMEOUT)

    def send(self, data):
        self.sock.sendall(data)

    def _exactly(self, count):
        data = b""
        while len(data) < count:
            try:
                chunk = self.sock.recv(count - len(data))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            data += chunk
        return data

    def read_packet(self):
        """(packet type, flags, body) of the next packet, or None once the broker closed the connection."""
        first = self._exactly(1)
        if first is None:
            return None
        length, shift = 0, 0
        while True:
            byte = self._exactly(1)
            if byte is None:
                return None
            length += (byte[0] & 0x7F) << shift
            shift += 7
            if not byte[0] & 0x80:
                break
        body = self._exactly(length) if length else b""
        if body is None:
            return None
        return first[0] >> 4, first[0] & 0x0F, body

    def expect(self, packet_type):
        received_packet = self.read_packet()
        assert received_packet is not None, f"connection closed, packet type {packet_type} expected"
        assert received_packet[0] == packet_type, received_packet
        return received_packet

    def connect(self, client_id, clean=True, keepalive=60, connect_properties=(), will=None, level=None):
        """CONNECT; returns (session present, reason code, CONNACK properties).

        `will` is (topic, payload, qos, will properties)."""
        level = level or (5 if self.version == 5 else 4)
        flags = 0x02 if clean else 0
        payload = string(client_id)
        if will is not None:
            topic, will_payload, qos, will_properties = will
            flags |= 0x04 | (qos << 3)
            payload += (encode_properties(will_properties) if self.version == 5 else b"") + string(topic) + string(will_payload)
        variable = string("MQTT") + bytes([level, flags]) + struct.pack("!H", keepalive)
        if self.version == 5:
            variable += encode_properties(connect_properties)
        self.send(packet(0x10, variable + payload))
        _, _, body = self.expect(CONNACK)
        connack_properties = decode_properties(body, 2)[0] if self.version == 5 else {}
        return bool(body[0] & 1), body[1], connack_properties

    def publish(self, topic, payload, qos=0, packet_id=0, dup=False, retain=False):
        first = 0x30 | (0x08 if dup else 0) | (qos << 1) | (0x01 if retain else 0)
        body = string(topic) + (struct.pack("!H", packet_id) if qos else b"")
        body += (encode_properties(()) if self.version == 5 else b"") + payload
        self.send(packet(first, body))

    def ack(self, packet_type, packet_id):
        """PUBACK, PUBREC, PUBREL or PUBCOMP for `packet_id` (reason code omitted: success)."""
        self.send(packet((packet_type << 4) | (0x02 if packet_type == PUBREL else 0), struct.pack("!H", packet_id)))

    def subscribe(self, packet_id, topic_filter, qos):
        body = struct.pack("!H", packet_id) + (encode_properties(()) if self.version == 5 else b"")
        self.send(packet(0x82, body + string(topic_filter) + bytes([qos])))
        _, _, suback = self.expect(SUBACK)
        return suback[-1]

    def parse_publish(self, flags, body):
        """(topic, packet id, qos, dup, payload) of a PUBLISH."""
        qos = (flags >> 1) & 3
        (length,) = struct.unpack_from("!H", body, 0)
        topic, offset = body[2:2 + length].decode(), 2 + length
        packet_id = 0
        if qos:
            (packet_id,) = struct.unpack_from("!H", body, offset)
            offset += 2
        if self.version == 5:
            offset = decode_properties(body, offset)[1]
        return topic, packet_id, qos, bool(flags & 0x08), body[offset:]

    def until_closed(self):
        """Every packet the broker sends until it closes the connection."""
        packets = []
        while (received_packet := self.read_packet()) is not None:
            packets.append(received_packet)
        return packets

    def close(self):
        self.sock.close()


# Debian's mosquitto command-line clients.

class MosquittoSub:
    """mosquitto_sub in its own process; its lines are read on a thread.
    `-d` prints the SUBACK ("Subscribed (mid: ...)"), so a test can wait for
    the subscription; each message is one `MSG|topic|qos|retain|user properties|payload` line."""

    FORMAT = "MSG|%t|%q|%r|%P|%p"

    def __init__(self, broker, *args, version="mqttv311"):
        # stdbuf: mosquitto_sub's debug lines are stdio-buffered on a pipe.
        self.process = subprocess.Popen(
            ["stdbuf", "-oL", "mosquitto_sub", "-h", broker.mqtt_host, "-p", str(broker.mqtt_port),
             "-V", version, "-d", "-F", self.FORMAT, *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _line(self):
        try:
            line = self.lines.get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"mosquitto_sub printed nothing within {TIMEOUT} s") from None
        assert line is not None, f"mosquitto_sub ended (exit status {self.process.poll()})"
        return line

    def wait_subscribed(self):
        """Waits for the SUBACK; returns the QoS granted as printed."""
        while not (line := self._line()).startswith("Subscribed (mid:"):
            pass
        return line.rsplit(":", 1)[1].strip()

    def next_message(self):
        """The next message: {topic, qos, retain, properties (a set of "name:value"), payload}."""
        while not (line := self._line()).startswith("MSG|"):
            pass
        _, topic, qos, retain, user, payload = line.split("|", 5)
        return {"topic": topic, "qos": int(qos), "retain": int(retain),
                "properties": set(user.split(" ")) - {""}, "payload": payload}

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=TIMEOUT)


def mosquitto_pub(broker, *args, version="mqttv311"):
    """Runs mosquitto_pub to completion (QoS 1 and 2: until acknowledged)."""
    completed = subprocess.run(
        ["mosquitto_pub", "-h", broker.mqtt_host, "-p", str(broker.mqtt_port), "-V", version, *args],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert completed.returncode == 0, completed.stderr


@pytest.fixture
def broker():
    """A broker per test, as conftest's, whose MQTT connect timeout (60 s) is
    far beyond the tests' waits: a connection closed for bad input cannot be
    mistaken for one closed for not sending CONNECT in time."""
    running = start_broker(extra_args=("--config", broker_config("[mqtt]\nconnect_timeout_ms = 60000\n")))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def clients(broker):
    """Makes paho clients on the test's broker (connected unless `connect=False`) and closes them all at the end."""
    made = []

    def make(client_id, version=V5, clean=True, manual_ack=False, connect=True, **connect_options):
        client = Mqtt(broker, client_id, version, clean, manual_ack)
        made.append(client)
        if connect:
            client.connect(**connect_options)
        return client

    yield make
    for client in reversed(made):
        client.close()


@pytest.fixture
def raw(broker):
    """Makes hand-written MQTT connections and closes them all at the end."""
    made = []

    def make(version=5):
        connection = RawMqtt(broker, version)
        made.append(connection)
        return connection

    yield make
    for connection in made:
        connection.close()


@pytest.fixture
def tools(broker):
    """Starts mosquitto_sub processes and stops each by its Popen at the end."""
    started = []

    def sub(*args, version="mqttv311"):
        process = MosquittoSub(broker, *args, version=version)
        started.append(process)
        return process

    yield sub
    for process in started:
        process.stop()


def let_broker_time_pass(clients, raw, seconds):
    """Waits, on the broker's own clock, until `seconds` have passed: a client
    whose will is delayed by `seconds` drops its connection, and the wait is
    for its will. No sleep in the test itself."""
    watcher = clients(f"clock-watcher-{seconds}")
    assert watcher.subscribe("clock/#", qos=1) == 1
    dying = raw()
    dying.connect(f"clock-{seconds}", connect_properties=[(SESSION_EXPIRY, 60)],
                  will=("clock/tick", b"tick", 1, [(WILL_DELAY, seconds)]))
    dying.close()
    assert received([watcher.next()]) == [("clock/tick", b"tick")]
    watcher.close()


# QoS


@pytest.mark.parametrize("version", VERSIONS)
def test_qos_0_1_and_2_publishes_arrive_at_their_qos(clients, version):
    subscriber = clients("qos-sub", version)
    assert subscriber.subscribe("qos/+", qos=2) == 2
    publisher = clients("qos-pub", version)
    for qos in (0, 1, 2):
        publisher.publish(f"qos/{qos}", f"at qos {qos}".encode(), qos=qos)
    arrived = {}
    for _ in range(3):
        message = subscriber.next()
        arrived[message.topic] = (message.payload, message.qos, message.retain)
    assert arrived == {f"qos/{qos}": (f"at qos {qos}".encode(), qos, False) for qos in (0, 1, 2)}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_subscriber_gets_the_lower_of_the_publish_qos_and_its_granted_qos(clients, version):
    at_most_1 = clients("downgrade-1", version)
    assert at_most_1.subscribe("down/#", qos=1) == 1
    at_most_0 = clients("downgrade-0", version)
    assert at_most_0.subscribe("down/#", qos=0) == 0
    publisher = clients("downgrade-pub", version)
    publisher.publish("down/two", b"published at 2", qos=2)
    publisher.publish("down/one", b"published at 1", qos=1)
    for subscriber, granted in ((at_most_1, 1), (at_most_0, 0)):
        arrived = {message.topic: message.qos for message in (subscriber.next(), subscriber.next())}
        assert arrived == {"down/two": granted, "down/one": granted}, granted


@pytest.mark.parametrize("version", VERSIONS)
def test_the_qos_2_handshake_is_exact_and_a_resent_publish_is_delivered_once(raw, version):
    level = 5 if version == V5 else 4
    subscriber = raw(level)
    assert subscriber.connect("exact-sub")[1] == 0
    assert subscriber.subscribe(1, "exact/#", 2) == 2
    publisher = raw(level)
    assert publisher.connect("exact-pub")[1] == 0

    publisher.publish("exact/once", b"once", qos=2, packet_id=7)
    assert struct.unpack_from("!H", publisher.expect(PUBREC)[2])[0] == 7
    # The PUBREC went astray, as far as the publisher knows: it sends the PUBLISH again, with DUP.
    publisher.publish("exact/once", b"once", qos=2, packet_id=7, dup=True)
    assert struct.unpack_from("!H", publisher.expect(PUBREC)[2])[0] == 7
    publisher.ack(PUBREL, 7)
    assert struct.unpack_from("!H", publisher.expect(PUBCOMP)[2])[0] == 7

    _, flags, body = subscriber.expect(PUBLISH)
    topic, packet_id, qos, dup, payload = subscriber.parse_publish(flags, body)
    assert (topic, qos, dup, payload) == ("exact/once", 2, False, b"once")
    subscriber.ack(PUBREC, packet_id)
    _, _, pubrel = subscriber.expect(PUBREL)
    assert struct.unpack_from("!H", pubrel)[0] == packet_id
    subscriber.ack(PUBCOMP, packet_id)

    publisher.publish("exact/once", SENTINEL, qos=2, packet_id=8)
    publisher.expect(PUBREC)
    publisher.ack(PUBREL, 8)
    publisher.expect(PUBCOMP)
    _, flags, body = subscriber.expect(PUBLISH)
    assert subscriber.parse_publish(flags, body)[4] == SENTINEL, "the resent PUBLISH was delivered twice"


# Topics


@pytest.mark.parametrize("version", VERSIONS)
def test_plus_matches_one_level_and_hash_the_rest_including_the_parent(clients, version):
    filters = ["home/+/temp", "home/#", "home/kitchen/#"]
    subscribers = []
    for number, topic_filter in enumerate(filters):
        subscriber = clients(f"wild-{number}", version)
        assert subscriber.subscribe(topic_filter) == 1
        subscribers.append(subscriber)
    publisher = clients("wild-pub", version)
    topics = ["home/kitchen/temp", "home/hall/temp", "home/kitchen", "home", "home/kitchen/temp/raw",
              "home/kitchen/light", "homes/x", "house/kitchen/temp", "hom"]
    for topic in topics:
        publisher.publish(topic, topic.encode())
    for topic in topics:
        publisher.publish(topic, SENTINEL)
    expected = {
        "home/+/temp": ["home/kitchen/temp", "home/hall/temp"],
        "home/#": ["home/kitchen/temp", "home/hall/temp", "home/kitchen", "home", "home/kitchen/temp/raw",
                   "home/kitchen/light"],
        "home/kitchen/#": ["home/kitchen/temp", "home/kitchen", "home/kitchen/temp/raw", "home/kitchen/light"],
    }
    for topic_filter, subscriber in zip(filters, subscribers):
        arrived = subscriber.until_sentinel(count=len(expected[topic_filter]))
        assert sorted(message.topic for message in arrived) == sorted(expected[topic_filter]), topic_filter


EMPTY_LEVEL_TOPICS = ["a//b", "/lead", "trail/", "//", "dots.in.a/level", "per%cent/x", "with space/x", "x/*", "x/>"]


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_levels_and_odd_characters_round_trip(clients, version):
    everything = clients("levels-all", version)
    assert everything.subscribe("#") == 1
    by_level = clients("levels-plus", version)
    for topic_filter in ("a/+/b", "+/lead", "trail/+"):
        assert by_level.subscribe(topic_filter) == 1
    publisher = clients("levels-pub", version)
    for topic in EMPTY_LEVEL_TOPICS:
        publisher.publish(topic, topic.encode())
    for topic in EMPTY_LEVEL_TOPICS:
        publisher.publish(topic, SENTINEL)
    arrived = everything.until_sentinel(count=len(EMPTY_LEVEL_TOPICS))
    assert sorted(received(arrived)) == sorted((topic, topic.encode()) for topic in EMPTY_LEVEL_TOPICS)
    assert sorted(message.topic for message in by_level.until_sentinel(count=3)) == ["/lead", "a//b", "trail/"]


def test_topics_starting_with_dollar_are_not_matched_by_leading_wildcards(clients):
    leading = []
    for number, topic_filter in enumerate(("#", "+/status", "+/#")):
        subscriber = clients(f"dollar-leading-{number}")
        assert subscriber.subscribe(topic_filter) == 1
        leading.append(subscriber)
    dollar = clients("dollar-explicit")
    assert dollar.subscribe("$app/#") == 1
    publisher = clients("dollar-pub")
    publisher.publish("$app/status", b"dollar")
    assert received([dollar.next()]) == [("$app/status", b"dollar")]
    publisher.publish("app/status", SENTINEL)
    for subscriber, topic_filter in zip(leading, ("#", "+/status", "+/#")):
        assert received(subscriber.until_sentinel()) == [], topic_filter


# Retained messages


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_messages_are_sent_to_new_subscriptions_and_deleted_by_an_empty_payload(clients, version):
    publisher = clients("retain-pub", version)
    publisher.publish("state/door", b"open", retain=True)
    publisher.publish("state/light", b"on", retain=True)
    publisher.publish("state/window", b"not kept")

    first = clients("retain-first", version)
    assert first.subscribe("state/+") == 1
    kept = {message.topic: (message.payload, message.retain) for message in (first.next(), first.next())}
    assert kept == {"state/door": (b"open", True), "state/light": (b"on", True)}
    publisher.publish("state/door", b"closed", retain=True)
    live = first.next()
    assert (live.topic, live.payload, live.retain) == ("state/door", b"closed", False), "a live delivery has retain 0"
    first.close()

    publisher.publish("state/light", b"", retain=True)  # deletes it
    second = clients("retain-second", version)
    assert second.subscribe("state/+") == 1
    publisher.publish("state/door", SENTINEL)
    publisher.publish("state/light", SENTINEL)
    assert [(message.topic, message.payload, message.retain) for message in second.until_sentinel(count=2)] == [
        ("state/door", b"closed", True)]


def test_retain_handling_and_retain_as_published(clients):
    publisher = clients("rh-pub")
    publisher.publish("rh/topic", b"kept", retain=True)
    never = clients("rh-never")
    assert never.subscribe("rh/#", retainHandling=2) == 1
    if_new = clients("rh-if-new")
    assert if_new.subscribe("rh/+", retainHandling=1) == 1
    always = clients("rh-always")
    assert always.subscribe("rh/+", retainHandling=0) == 1
    as_published = clients("rh-as-published")
    assert as_published.subscribe("rh/topic", retainHandling=2, retainAsPublished=True) == 1

    for subscriber in (if_new, always):
        message = subscriber.next()
        assert (message.payload, message.retain) == (b"kept", True)
    # Subscribing again: handling 1 sends nothing (not a new subscription), handling 0 sends again.
    assert if_new.subscribe("rh/+", retainHandling=1) == 1
    assert always.subscribe("rh/+", retainHandling=0) == 1
    message = always.next()
    assert (message.payload, message.retain) == (b"kept", True)

    publisher.publish("rh/topic", b"live", retain=True)
    publisher.publish("rh/topic", SENTINEL)
    for subscriber, retain_flag in ((never, False), (if_new, False), (always, False), (as_published, True)):
        assert [(message.payload, message.retain) for message in subscriber.until_sentinel()] == [(b"live", retain_flag)]


# Wills


def test_a_will_is_published_when_a_client_dies_but_not_after_a_clean_disconnect(broker, clients, tools):
    watcher = clients("will-watcher")
    assert watcher.subscribe("wills/#") == 1

    # mosquitto_sub -E subscribes, then ends with DISCONNECT: no will.
    clean = subprocess.run(
        ["mosquitto_sub", "-h", broker.mqtt_host, "-p", str(broker.mqtt_port), "-E", "-t", "nothing/here",
         "--will-topic", "wills/clean", "--will-payload", "must not be published", "--will-qos", "1"],
        capture_output=True, timeout=TIMEOUT,
    )
    assert clean.returncode == 0

    # A mosquitto_sub killed without a chance to say goodbye: its will is published.
    doomed = tools("-t", "nothing/here", "--will-topic", "wills/killed", "--will-payload", "gone", "--will-qos", "1")
    doomed.wait_subscribed()
    doomed.stop()
    assert received([watcher.next()]) == [("wills/killed", b"gone")]

    # MQTT 5: DISCONNECT with reason 0x04 asks for the will.
    asking = clients("will-asking", connect=False)
    asking.connect(will=("wills/asked", b"asked for", 1, False, None))
    asking.close(reason=0x04)
    assert received([watcher.next()]) == [("wills/asked", b"asked for")]

    publisher = clients("will-pub")
    publisher.publish("wills/sentinel", SENTINEL)
    assert received(watcher.until_sentinel()) == []


def test_a_delayed_will_is_cancelled_by_a_reconnect_in_time(clients, raw):
    watcher = clients("delay-watcher")
    assert watcher.subscribe("wills/#") == 1
    returning = raw()
    returning.connect("returning", connect_properties=[(SESSION_EXPIRY, 60)],
                      will=("wills/returning", b"returning", 1, [(WILL_DELAY, 1)]))
    leaving = raw()
    leaving.connect("leaving", connect_properties=[(SESSION_EXPIRY, 60)],
                    will=("wills/leaving", b"leaving", 1, [(WILL_DELAY, 2)]))
    returning.close()
    leaving.close()
    back = raw()
    present, code, _ = back.connect("returning", clean=False, connect_properties=[(SESSION_EXPIRY, 60)])
    assert (present, code) == (True, 0)
    # The will delayed by 2 s arrives; the one delayed by 1 s would have come first.
    assert received([watcher.next()]) == [("wills/leaving", b"leaving")]
    publisher = clients("delay-pub")
    publisher.publish("wills/sentinel", SENTINEL)
    assert received(watcher.until_sentinel()) == []


# Sessions


@pytest.mark.parametrize("version", VERSIONS)
def test_a_persistent_session_keeps_its_subscriptions_and_queued_messages(clients, version):
    keeper = clients("keeper", version, clean=False, session_expiry=300)
    assert keeper.subscribe("queued/#") == 1
    keeper.close()

    publisher = clients("queued-pub", version)
    for number in range(3):
        publisher.publish("queued/job", f"job-{number}".encode())
    publisher.publish("elsewhere/job", b"not subscribed")

    returning = clients("keeper", version, clean=False, connect=False)
    assert returning.connect(session_expiry=300) is True, "CONNACK session present"
    arrivals = [returning.next() for _ in range(3)]
    assert [(message.payload, message.qos) for message in arrivals] == [(f"job-{number}".encode(), 1) for number in range(3)]
    publisher.publish("queued/job", SENTINEL)
    assert received(returning.until_sentinel()) == [], "each queued message once"
    returning.close()

    # A clean start ends the session: no subscription, nothing kept.
    fresh = clients("keeper", version, clean=True, connect=False)
    assert fresh.connect() is False
    assert fresh.subscribe("probe") == 1
    publisher.publish("queued/job", b"to nobody")
    publisher.publish("probe", SENTINEL)
    assert received(fresh.until_sentinel()) == []


def test_an_mqtt5_session_without_expiry_ends_with_its_connection(clients, raw):
    short = raw()
    assert short.connect("short-lived", clean=False, connect_properties=[(SESSION_EXPIRY, 0)])[:2] == (False, 0)
    assert short.subscribe(1, "short/#", 1) == 1
    short.send(packet(0xE0, b""))  # DISCONNECT, normal
    short.sock.shutdown(socket.SHUT_WR)
    # The broker closes its side once it took the DISCONNECT: a CONNECT now
    # cannot be taken for a takeover of a connection still open.
    assert short.until_closed() == []
    again = clients("short-lived", clean=False, connect=False)
    assert again.connect(session_expiry=0) is False


@pytest.mark.parametrize("version", VERSIONS)
def test_unacknowledged_deliveries_are_resent_with_dup_when_the_session_returns(clients, version):
    forgetful = clients("forgetful", version, clean=False, manual_ack=True, session_expiry=300)
    assert forgetful.subscribe("dup/#") == 1
    publisher = clients("dup-pub", version)
    publisher.publish("dup/task", b"task")
    first = forgetful.next()
    assert (first.payload, first.dup) == (b"task", False)
    forgetful.drop()  # no PUBACK, no DISCONNECT

    returning = clients("forgetful", version, clean=False, connect=False)
    assert returning.connect(session_expiry=300) is True
    again = returning.next()
    assert (again.topic, again.payload, again.qos, again.dup) == ("dup/task", b"task", 1, True)
    publisher.publish("dup/task", SENTINEL)
    assert received(returning.until_sentinel()) == [], "acknowledged: not resent again"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_second_connection_with_the_same_client_id_takes_the_session_over(clients, version):
    first = clients("twin", version, clean=False, session_expiry=300)
    assert first.subscribe("twin/#") == 1
    second = clients("twin", version, clean=False, connect=False)
    assert second.connect(session_expiry=300) is True
    reason, _ = first.disconnects.get(timeout=TIMEOUT)
    if version == V5:
        assert reason.value == 0x8E, f"DISCONNECT {reason} (0x8E session taken over expected)"
    publisher = clients("twin-pub", version)
    publisher.publish("twin/news", b"for the session")
    assert received([second.next()]) == [("twin/news", b"for the session")], "the subscription came with the session"
    assert first.messages.empty()


def test_a_shared_subscription_gives_each_message_to_one_member(clients):
    publisher = clients("share-pub")
    publisher.publish("jobs/retained", b"retained", retain=True)
    everyone = clients("share-everyone")
    assert everyone.subscribe("jobs/+", retainHandling=2) == 1
    arrivals = queue.Queue()
    for worker in ("worker-1", "worker-2"):
        member = clients(worker)
        member.paho.on_message = lambda _c, _u, message, worker=worker: arrivals.put((worker, message.payload))
        assert member.subscribe("$share/workers/jobs/+") == 1
    jobs = [f"job-{number}".encode() for number in range(20)]
    for job in jobs:
        publisher.publish("jobs/new", job)
    # Sentinels follow until each member had one: a member's deliveries keep
    # their order, so then every job it would get has arrived.
    bodies, sentinels_seen = [], set()
    for _ in range(50):
        if len(sentinels_seen) == 2:
            break
        publisher.publish("jobs/new", SENTINEL)
        while True:
            worker, body = arrivals.get(timeout=TIMEOUT)
            if body == SENTINEL:
                sentinels_seen.add(worker)
                break
            bodies.append(body)
    assert sentinels_seen == {"worker-1", "worker-2"}, "both members get messages"
    assert sorted(bodies) == sorted(jobs), "each job exactly once, no retained message on a shared subscription"
    assert [everyone.next().payload for _ in jobs] == jobs, "a plain subscription still gets every job"


# MQTT 5 properties


def test_user_properties_and_the_standard_properties_round_trip(clients):
    v5 = clients("props-v5")
    assert v5.subscribe("props/#") == 1
    v311 = clients("props-v311", V311)
    assert v311.subscribe("props/#") == 1
    publisher = clients("props-pub")
    user = [("sym", "IBM"), ("price", "12.5"), ("lots", "3"), ("firm", "true"), ("note", "hello world")]
    publisher.publish("props/quote", b"IBM 12.5", publish_properties=properties(
        PacketTypes.PUBLISH, user=user, ContentType="text/plain", ResponseTopic="props/replies",
        CorrelationData=b"request-42"))
    message = v5.next()
    assert (message.topic, message.payload) == ("props/quote", b"IBM 12.5")
    assert user_properties(message) == dict(user)
    assert message.properties.ContentType == "text/plain"
    assert message.properties.ResponseTopic == "props/replies"
    assert message.properties.CorrelationData == b"request-42"
    assert received([v311.next()]) == [("props/quote", b"IBM 12.5")]


def test_message_expiry_drops_expired_messages_and_delivers_the_remaining_interval(clients, raw):
    online = clients("expiry-online")
    assert online.subscribe("exp/#") == 1
    offline = clients("expiry-offline", clean=False, session_expiry=300)
    assert offline.subscribe("exp/#") == 1
    offline.close()

    publisher = clients("expiry-pub")
    for payload, expiry in ((b"short", 1), (b"long", 300), (b"forever", None)):
        publish_properties = properties(PacketTypes.PUBLISH, MessageExpiryInterval=expiry) if expiry else None
        publisher.publish("exp/news", payload, publish_properties=publish_properties)
    intervals = {}
    for _ in range(3):
        message = online.next()
        intervals[message.payload] = getattr(message.properties, "MessageExpiryInterval", None)
    assert 0 < intervals[b"short"] <= 1 and 0 < intervals[b"long"] <= 300 and intervals[b"forever"] is None, intervals

    let_broker_time_pass(clients, raw, 2)
    returning = clients("expiry-offline", clean=False, connect=False)
    assert returning.connect(session_expiry=300) is True
    publisher.publish("exp/news", SENTINEL)
    kept = returning.until_sentinel()
    assert [message.payload for message in kept] == [b"long", b"forever"], "the expired message is not delivered"
    assert 0 < kept[0].properties.MessageExpiryInterval <= 299, "what is left of the interval"


def test_topic_aliases_set_by_a_paho_publisher(clients):
    subscriber = clients("alias-sub")
    assert subscriber.subscribe("alias/#") == 1
    publisher = clients("alias-pub")
    maximum = getattr(publisher.connack_properties, "TopicAliasMaximum", 0)
    assert maximum >= 2, "CONNACK announces Topic Alias Maximum"

    def alias(number):
        return properties(PacketTypes.PUBLISH, TopicAlias=number)

    publisher.publish("alias/a/rather/long/topic", b"first", publish_properties=alias(1))
    publisher.publish("", b"second", publish_properties=alias(1))
    publisher.publish("alias/other", b"third", publish_properties=alias(2))
    publisher.publish("", b"fourth", publish_properties=alias(1))
    publisher.publish("alias/remapped", b"fifth", publish_properties=alias(1))
    publisher.publish("", b"sixth", publish_properties=alias(1))
    publisher.publish("", b"seventh", publish_properties=alias(2))
    assert received(subscriber.next() for _ in range(7)) == [
        ("alias/a/rather/long/topic", b"first"), ("alias/a/rather/long/topic", b"second"),
        ("alias/other", b"third"), ("alias/a/rather/long/topic", b"fourth"),
        ("alias/remapped", b"fifth"), ("alias/remapped", b"sixth"), ("alias/other", b"seventh"),
    ]

    # paho itself, not the helper: the broker may answer before paho's publish() returns.
    publisher.paho.publish("alias/too-far", b"refused", qos=0, properties=alias(maximum + 1))
    reason, _ = publisher.disconnects.get(timeout=TIMEOUT)
    assert reason.value == 0x94, f"DISCONNECT {reason} (0x94 topic alias invalid expected)"


def test_subscription_identifiers_and_no_local(clients):
    client = clients("ids")
    for identifier, topic_filter in ((1, "sid/+"), (2, "sid/#")):
        assert client.subscribe(topic_filter, subscribe_properties=properties(
            PacketTypes.SUBSCRIBE, SubscriptionIdentifier=identifier)) == 1
    other = clients("ids-other")
    other.publish("sid/x", b"both")
    other.publish("sid/a/b", b"deep")
    other.publish("sid/x", SENTINEL)
    other.publish("sid/a/b", SENTINEL)
    # One copy carrying both identifiers, or a copy per subscription: MQTT allows either.
    identifiers, sentinel_identifiers = {}, {}
    while sentinel_identifiers != {"sid/x": {1, 2}, "sid/a/b": {2}}:
        message = client.next()
        found = sentinel_identifiers if message.payload == SENTINEL else identifiers
        found.setdefault(message.topic, set()).update(getattr(message.properties, "SubscriptionIdentifier", []))
    assert identifiers == {"sid/x": {1, 2}, "sid/a/b": {2}}

    assert client.subscribe("nl/topic", noLocal=True) == 1
    assert other.subscribe("nl/topic") == 1
    client.publish("nl/topic", b"mine")
    assert received([other.next()]) == [("nl/topic", b"mine")]
    other.publish("nl/topic", SENTINEL)
    assert received(client.until_sentinel()) == [], "no-local: not sent back to its publisher"


# Content filters


SELECTORS = [
    ("price > 100", ["q0", "q2", "q4"]),
    ("sym = 'IBM' AND price > 100", ["q0"]),
    ("sym IN ('IBM', 'MSFT') OR lots < 2", ["q0", "q1", "q2"]),
    ("sym LIKE 'I%'", ["q0", "q1", "q3"]),
    ("NOT (price BETWEEN 50 AND 150)", ["q2", "q3"]),
    ("region IS NULL", ["q0", "q1", "q3"]),
    ("lots * price >= 300", ["q0", "q2", "q3", "q4"]),
    ("sym <> 'IBM'", ["q2", "q3", "q4"]),
]

QUOTES = [
    {"sym": "IBM", "price": "120", "lots": "3"},
    {"sym": "IBM", "price": "90", "lots": "1"},
    {"sym": "MSFT", "price": "300", "lots": "1", "region": "us"},
    {"sym": "INTC", "price": "40", "lots": "10"},
    {"sym": "ACME", "price": "150", "lots": "2", "region": "eu"},
]


async def test_sift_sql_selects_what_stomp_selectors_and_native_sql_select(broker, clients):
    native = await connect(broker)
    stomp_connection, stomp_seen = stomp_client(broker, "pytest-mqtt")
    try:
        subscriber = clients("sql-sub")
        publisher = clients("sql-pub")
        for index, (selector, expected) in enumerate(SELECTORS):
            full = f"({selector}) OR sentinel = 'yes'"
            native_subscription = await native.subscribe(f"sel.case{index}", sql=full)
            stomp_connection.subscribe(destination=f"/topic/sel.case{index}", id=str(index), ack="auto",
                                       headers={"selector": full, "receipt": f"sub-{index}"})
            assert await take(stomp_seen.receipts) == f"sub-{index}"
            assert subscriber.subscribe(f"sel/case{index}", subscribe_properties=properties(
                PacketTypes.SUBSCRIBE, user=[("sift-sql", full)])) == 1
            for number, quote in enumerate(QUOTES):
                await asyncio.to_thread(publisher.publish, f"sel/case{index}", f"q{number}".encode(),
                                        user=list(quote.items()))
            await asyncio.to_thread(publisher.publish, f"sel/case{index}", SENTINEL, user=[("sentinel", "yes")])

            over_mqtt = [message.payload.decode() for message in await asyncio.to_thread(subscriber.until_sentinel)]
            over_stomp = []
            while (frame := await take(stomp_seen.messages)).body != SENTINEL.decode():
                over_stomp.append(frame.body)
            over_native = []
            while (delivery := await native_subscription.next(timeout=TIMEOUT)).payload != SENTINEL:
                over_native.append(delivery.payload.decode())
            assert over_mqtt == expected, selector
            assert over_stomp == expected and over_native == expected, selector
    finally:
        stomp_connection.disconnect()
        await native.close()


def test_tags_and_regex_filters_and_a_bad_selector_is_refused_by_its_suback(clients):
    subscriber = clients("filters-sub")
    publisher = clients("filters-pub")

    def filtered(language, expression):
        return properties(PacketTypes.SUBSCRIBE, user=[(language, expression)])

    assert subscriber.subscribe("bad/+", subscribe_properties=filtered("sift-sql", "price >")) == 0x83
    # MQTT 5's reason string says why, with the position in the selector.
    reason = subscriber.suback_properties.ReasonString
    assert reason.startswith("bad/+: ") and "sql: at byte 7: expected an operand" in reason, reason

    assert subscriber.subscribe("tags/+", subscribe_properties=filtered("sift-tags", 'sym="IBM",price>100')) == 1
    for number, quote in enumerate(QUOTES):
        publisher.publish("tags/quote", f"q{number}".encode(), user=list(quote.items()))
    publisher.publish("tags/quote", SENTINEL, user=[("sym", "IBM"), ("price", "999")])
    assert [message.payload for message in subscriber.until_sentinel()] == [b"q0"]

    assert subscriber.subscribe("rx/+", subscribe_properties=filtered("sift-regex", r"^rx\.(a|c)$")) == 1
    for level in ("a", "b", "c"):
        publisher.publish(f"rx/{level}", level.encode())
    for level in ("a", "c"):
        publisher.publish(f"rx/{level}", SENTINEL)
    assert sorted(received(subscriber.until_sentinel(count=2))) == [("rx/a", b"a"), ("rx/c", b"c")]


# mosquitto_pub and mosquitto_sub


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_pub_reaches_mosquitto_sub(broker, tools, version):
    subscriber = tools("-q", "1", "-t", "tools/#", version=version)
    assert subscriber.wait_subscribed() == "1"
    user = ["-D", "publish", "user-property", "sym", "IBM", "-D", "publish", "user-property", "price", "12.5"]
    mosquitto_pub(broker, "-q", "1", "-t", "tools/quote", "-m", "IBM 12.5", *(user if version == "mqttv5" else []),
                  version=version)
    assert subscriber.next_message() == {
        "topic": "tools/quote", "qos": 1, "retain": 0, "payload": "IBM 12.5",
        "properties": {"sym:IBM", "price:12.5"} if version == "mqttv5" else set(),
    }
    mosquitto_pub(broker, "-q", "0", "-t", "tools/fast", "-m", "at most once", version=version)
    message = subscriber.next_message()
    assert (message["topic"], message["qos"], message["payload"]) == ("tools/fast", 0, "at most once")


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_retained_message_set_received_and_removed(broker, tools, version):
    mosquitto_pub(broker, "-r", "-q", "1", "-t", "tools/kept", "-m", "kept", version=version)
    once = subprocess.run(
        ["mosquitto_sub", "-h", broker.mqtt_host, "-p", str(broker.mqtt_port), "-V", version, "-C", "1",
         "-W", str(int(TIMEOUT)), "-t", "tools/#", "-F", "%r|%t|%p"],
        capture_output=True, text=True, timeout=TIMEOUT + 5,
    )
    assert (once.returncode, once.stdout) == (0, "1|tools/kept|kept\n")
    mosquitto_pub(broker, "-r", "-n", "-q", "1", "-t", "tools/kept", version=version)
    after = tools("-q", "1", "-t", "tools/#", version=version)
    after.wait_subscribed()
    mosquitto_pub(broker, "-q", "1", "-t", "tools/next", "-m", "sentinel", version=version)
    message = after.next_message()
    assert (message["topic"], message["retain"], message["payload"]) == ("tools/next", 0, "sentinel")


# Bad input


def test_bad_input_gets_a_reason_code_and_a_close_without_disturbing_others(clients, raw):
    bystander = clients("bystander")
    assert bystander.subscribe("calm/#") == 1

    def refused(connection, codes):
        """The connection closes, after a DISCONNECT with one of `codes` (MQTT 5) or nothing (3.1.1)."""
        packets = connection.until_closed()
        if codes:
            assert len(packets) == 1 and packets[0][0] == DISCONNECT and packets[0][2][0] in codes, packets
        else:
            assert packets == [], packets

    garbage = raw()
    garbage.send(b"\x00\x11GARBAGE, NOT MQTT\xff\xff\xff\xff")
    assert all(packet_type != CONNACK for packet_type, _, _ in garbage.until_closed())

    http = raw()
    http.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert all(packet_type != CONNACK for packet_type, _, _ in http.until_closed())

    reserved = raw()
    assert reserved.connect("bad-reserved")[1] == 0
    reserved.send(b"\x00\x00")
    refused(reserved, {0x81, 0x82})

    twice = raw()
    assert twice.connect("bad-twice")[1] == 0
    twice.send(packet(0x10, string("MQTT") + bytes([5, 0x02]) + struct.pack("!H", 60) + encode_properties(())
                      + string("bad-twice")))
    refused(twice, {0x81, 0x82})

    wildcard = raw()
    assert wildcard.connect("bad-wildcard")[1] == 0
    wildcard.publish("calm/+/topic", b"wildcards are for filters", qos=1, packet_id=1)
    refused(wildcard, {0x82, 0x90})

    wildcard_311 = raw(4)
    assert wildcard_311.connect("bad-wildcard-311")[1] == 0
    wildcard_311.publish("calm/#", b"wildcards are for filters")
    refused(wildcard_311, None)

    oversized = raw()
    _, code, connack_properties = oversized.connect("bad-oversized")
    assert code == 0 and MAXIMUM_PACKET_SIZE in connack_properties, "CONNACK announces Maximum Packet Size"
    # Only the fixed header and the start of the topic: the length alone must be enough to refuse it.
    oversized.send(bytes([0x30]) + varint(connack_properties[MAXIMUM_PACKET_SIZE] + 1) + string("calm/big"))
    refused(oversized, {0x95})

    unknown_level = raw(4)
    unknown_level.send(packet(0x10, string("MQTT") + bytes([42, 0x02]) + struct.pack("!H", 60) + string("bad-level")))
    answer = unknown_level.until_closed()
    assert all(packet_type == CONNACK and body[1] != 0 for packet_type, _, body in answer), answer

    publisher = clients("calm-pub")
    publisher.publish("calm/still", b"still here")
    assert received([bystander.next()]) == [("calm/still", b"still here")]
    assert bystander.disconnects.empty()


# Across protocols


async def test_mqtt_publishes_reach_native_and_stomp_subscribers_with_typed_properties(broker, clients):
    native = await connect(broker)
    stomp_connection, stomp_seen = stomp_client(broker, "pytest-mqtt")
    try:
        to_native = await native.subscribe("cross.to-native", sql="price > 10")
        stomp_connection.subscribe(destination="/topic/cross.to-native", id="x", ack="auto",
                                   headers={"selector": "price > 10", "receipt": "s"})
        assert await take(stomp_seen.receipts) == "s"
        publisher = clients("cross-pub")
        quote = properties(PacketTypes.PUBLISH, ContentType="text/plain", ResponseTopic="cross/replies",
                           CorrelationData=b"request-42", user=[
                               ("sym", "IBM"), ("price", "12.5"), ("lots", "3"), ("firm", "true"),
                               ("sift-priority", "7")])
        await asyncio.to_thread(publisher.publish, "cross/to-native", b"from mqtt", 1, False, quote)
        delivery = await to_native.next(timeout=TIMEOUT)
        assert (delivery.topic, delivery.payload) == ("cross.to-native", b"from mqtt")
        assert delivery.properties == {"sym": "IBM", "price": 12.5, "lots": 3, "firm": True,
                                       "content-type": "text/plain", "response-topic": "cross/replies",
                                       "correlation-data": "request-42"}
        assert delivery.priority == 7 and delivery.mode == sift.DeliveryMode.RELIABLE
        frame = await take(stomp_seen.messages)
        assert frame.body == "from mqtt"
        assert (frame.headers["sym"], frame.headers["price"], frame.headers["priority"]) == ("IBM", "12.5", "7")

        await asyncio.to_thread(publisher.publish, "cross/to-native", b"cheap", 0, False, None, [("price", "11")])
        delivery = await to_native.next(timeout=TIMEOUT)
        # QoS 0 is a reliable message (flow-controlled, never dropped by a
        # full queue) that remembers its QoS for MQTT subscribers.
        assert (delivery.payload, delivery.mode, delivery.properties) == (b"cheap", sift.DeliveryMode.RELIABLE,
                                                                          {"price": 11, "mqtt-qos": 0})
        await asyncio.to_thread(publisher.publish, "cross/to-native", b"stored", 1, False, None,
                                [("price", "11"), ("sift-mode", "persistent")])
        delivery = await to_native.next(timeout=TIMEOUT)
        assert (delivery.payload, delivery.mode, delivery.properties) == (b"stored", sift.DeliveryMode.PERSISTENT,
                                                                          {"price": 11})
        await asyncio.to_thread(publisher.publish, "cross/to-native", b"too cheap", 1, False, None, [("price", "5")])
        await asyncio.to_thread(publisher.publish, "cross/to-native", SENTINEL, 1, False, None, [("price", "99")])
        assert (await to_native.next(timeout=TIMEOUT)).payload == SENTINEL, "the SQL filter saw price 5 as a number"
    finally:
        stomp_connection.disconnect()
        await native.close()


async def test_native_stomp_and_cli_publishes_reach_mqtt_subscribers(broker, clients):
    native = await connect(broker)
    stomp_connection, stomp_seen = stomp_client(broker, "pytest-mqtt")
    try:
        v5 = clients("to-mqtt-v5")
        assert v5.subscribe("cross/to-mqtt/#", qos=2) == 2
        v311 = clients("to-mqtt-v311", V311)
        assert v311.subscribe("cross/to-mqtt/#", qos=2) == 2

        await native.publish("cross.to-mqtt.native", b"from native", mode="reliable", properties={
            "sym": "IBM", "price": 12.5, "lots": 3, "firm": True, "content-type": "application/json"})
        message = await take(v5.messages)
        assert (message.topic, message.payload, message.qos) == ("cross/to-mqtt/native", b"from native", 1)
        assert user_properties(message) == {"sym": "IBM", "price": "12.5", "lots": "3", "firm": "true"}
        assert message.properties.ContentType == "application/json"
        message = await take(v311.messages)
        assert (message.topic, message.payload, message.qos) == ("cross/to-mqtt/native", b"from native", 1)

        await native.publish("cross.to-mqtt.native", b"best effort", priority=8)
        message = await take(v5.messages)
        assert (message.payload, message.qos, user_properties(message)) == (b"best effort", 0, {"sift-priority": "8"})
        assert (await take(v311.messages)).qos == 0

        stomp_connection.send(destination="/topic/cross.to-mqtt.stomp", body="from stomp",
                              headers={"sym": "HP", "price": "99.5", "receipt": "sent"})
        assert await take(stomp_seen.receipts) == "sent"
        message = await take(v5.messages)
        assert (message.topic, message.payload, message.qos) == ("cross/to-mqtt/stomp", b"from stomp", 1)
        assert user_properties(message)["sym"] == "HP" and user_properties(message)["price"] == "99.5"
        assert (await take(v311.messages)).payload == b"from stomp"

        await sift_pub(broker, "--topic", "cross.to-mqtt.cli", "--payload", "from the CLI", "--prop", "qty=3",
                       "--mode", "reliable")
        message = await take(v5.messages)
        assert (message.topic, message.payload, message.qos) == ("cross/to-mqtt/cli", b"from the CLI", 1)
        assert user_properties(message) == {"qty": "3"}
    finally:
        stomp_connection.disconnect()
        await native.close()


TOPIC_MAPPING = [
    ("sensors/kitchen/temp", "sensors.kitchen.temp"),
    ("a//b", "a.%.b"),
    ("/lead", "%.lead"),
    ("trail/", "trail.%"),
    ("v1.2/x", "v1%2E2.x"),
    ("100%/x", "100%25.x"),
    ("hello world", "hello%20world"),
    ("*/>", "%2A.%3E"),
]


async def test_topics_map_between_mqtt_and_sift_both_ways(broker, clients):
    native = await connect(broker)
    try:
        everything = await native.subscribe(">")
        publisher = clients("mapping-pub")
        for mqtt_topic, sift_topic in TOPIC_MAPPING:
            await asyncio.to_thread(publisher.publish, mqtt_topic, mqtt_topic.encode())
            delivery = await everything.next(timeout=TIMEOUT)
            assert (delivery.topic, delivery.payload) == (sift_topic, mqtt_topic.encode())
        exact = await native.subscribe("a.%.b")
        await asyncio.to_thread(publisher.publish, "a//b", b"exactly")
        assert (await exact.next(timeout=TIMEOUT)).payload == b"exactly"
        await everything.unsubscribe()

        subscriber = clients("mapping-sub")
        assert subscriber.subscribe("#") == 1
        for mqtt_topic, sift_topic in TOPIC_MAPPING + [("pct/50%", "pct.50%")]:
            await native.publish(sift_topic, sift_topic.encode())
            message = await take(subscriber.messages)
            assert (message.topic, message.payload) == (mqtt_topic, sift_topic.encode())

        parent = clients("mapping-parent")
        assert parent.subscribe("parent/#") == 1
        for topic in ("parent", "parent.child", "parents"):
            await native.publish(topic, topic.encode())
        for topic in ("parent", "parent.child"):
            await native.publish(topic, SENTINEL)
        assert sorted(received(await asyncio.to_thread(parent.until_sentinel, 2))) == [
            ("parent", b"parent"), ("parent/child", b"parent.child")]
    finally:
        await native.close()


async def test_mosquitto_tools_and_the_sift_cli_cross_protocols(broker, tools):
    native = await connect(broker)
    try:
        subscriber = tools("-q", "1", "-t", "tools/cli/#", version="mqttv5")
        assert await asyncio.to_thread(subscriber.wait_subscribed) == "1"
        await sift_pub(broker, "--topic", "tools.cli.quote", "--payload", "from sift pub", "--prop", "sym=IBM",
                       "--prop", "price=12.5", "--mode", "reliable")
        assert await asyncio.to_thread(subscriber.next_message) == {
            "topic": "tools/cli/quote", "qos": 1, "retain": 0, "payload": "from sift pub",
            "properties": {"sym:IBM", "price:12.5"}}

        quotes = await native.subscribe("tools.quotes.*", sql="sym = 'IBM' AND price > 10")
        for price in ("5", "12.5"):
            await asyncio.to_thread(
                mosquitto_pub, broker, "-q", "1", "-t", "tools/quotes/nyse", "-m", f"IBM {price}",
                "-D", "publish", "user-property", "sym", "IBM", "-D", "publish", "user-property", "price", price,
                version="mqttv5")
        delivery = await quotes.next(timeout=TIMEOUT)
        assert (delivery.topic, delivery.payload) == ("tools.quotes.nyse", b"IBM 12.5")
        assert delivery.properties == {"sym": "IBM", "price": 12.5}
        assert delivery.mode == sift.DeliveryMode.RELIABLE
    finally:
        await native.close()
