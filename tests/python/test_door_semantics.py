"""One table of delivery semantics, run unchanged through every door.

Sift serves its native protocol, STOMP, MQTT and HTTP with one session
machine: a front-end only translates, and the broker's core alone matches
topics and content filters, picks queue-group members, takes
acknowledgements and redelivers (docs/ARCHITECTURE.md, "Front-ends: one
session code for every door" and "Delivery semantics and where they live").
So a case of delivery semantics must come out the same whichever door its
clients use. This file checks that with real third-party clients:

- `native`: the project's Python SDK (`sift`);
- `stomp`: stomp.py, STOMP 1.2;
- `mqtt`: paho-mqtt, MQTT 5;
- `http-sse`: `POST /v1/messages` to publish, an HTTP subscription read as
  server-sent events to receive;
- `http-ws`: one WebSocket session (`/v1/ws`) per client for both.

`ROWS` is the table: each row names a case, gives its steps (a function of
a door) and the outcome every door must produce. The rows: an exact topic,
one- and many-level wildcards, publisher order, a queue group (each message
to one member), a SQL content filter, a nack that redelivers, an
unacknowledged message delivered again to a durable subscriber after its
connection closes, queue-group failover of an unacknowledged message, and a
payload over limits.max_payload_bytes refused in each door's own form. The steps see only the
small interface every door adapter has: `subscribe(topic, sql=, queue=,
ack=, durable=)` opens a subscriber on a connection of its own, `publish`
and `publish_all` send reliable messages (STOMP's and MQTT QoS 1's default)
on the door's publishing connection, and a subscriber's `next()` gives a
`Received` with `ack()` and `nack()`. Topics in the table are Sift topics;
each adapter maps them to its door's form (`/topic/...`, `a/+/#`) and back.

A row that a door cannot express lists the door with the reason; that case
is skipped with the reason. A door that can express a row but answers
differently is a finding: the case is kept and marked as a strict xfail
that says precisely how it differs.

Tests wait for events, never for time: what must not arrive is shown by a
sentinel published after it, and every wait has a deadline that fails the
test. Each case has its own broker (limits.max_payload_bytes lowered to
PAYLOAD_LIMIT) and closes every client it opened.
"""

import asyncio
import base64
import dataclasses
import itertools
import json
import os
import re
import threading
import urllib.request
from typing import Awaitable, Callable, Optional

import pytest
import stomp
from paho.mqtt.packettypes import PacketTypes
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as websocket_connect

import sift
from conftest import start_broker
from http_support import deliveries
from sdk_support import TIMEOUT, broker_config, connect, http_json
from stomp_support import stomp_client
from test_mqtt import Mqtt, properties as mqtt_properties

PAYLOAD_LIMIT = 1024
SENTINEL = b"sentinel"


@pytest.fixture
def broker():
    """conftest's broker, with a small payload limit for the limit row and an
    acknowledgement timeout far beyond the test, so that every redelivery a
    row sees comes from a nack or a closed connection, not from the timer."""
    config = broker_config(f"[limits]\nmax_payload_bytes = {PAYLOAD_LIMIT}\n\n"
                           "[delivery]\nack_timeout_ms = 300000\n")
    try:
        running = start_broker(extra_args=("--config", config))
    finally:
        os.unlink(config)
    try:
        yield running
    finally:
        running.stop()
        running.process.stdout.close()


# What every door gives the rows.


class Refused(Exception):
    """The broker refused a publish; `answer` is how the door said so."""

    def __init__(self, answer):
        super().__init__(answer)
        self.answer = answer


@dataclasses.dataclass
class Received:
    """One delivery, whatever the door: its Sift topic, payload, whether the
    broker marked it redelivered, and the door's acknowledgements (None
    where the door has none)."""

    topic: str
    payload: bytes
    redelivered: bool
    acknowledge: Optional[Callable[[], Awaitable[None]]] = None
    refuse: Optional[Callable[[], Awaitable[None]]] = None

    async def ack(self):
        assert self.acknowledge is not None, "this delivery cannot be acknowledged by its client"
        await self.acknowledge()

    async def nack(self):
        assert self.refuse is not None, "this door has no negative acknowledgement"
        await self.refuse()


class Subscriber:
    """One subscription on a connection of its own. Its client hands each
    delivery to `deliver` (from any thread); `next` waits for the next one."""

    def __init__(self):
        self.loop = asyncio.get_running_loop()
        self.inbox = asyncio.Queue()
        self.closed = False

    def deliver(self, received):
        self.loop.call_soon_threadsafe(self.inbox.put_nowait, received)

    async def next(self, timeout=TIMEOUT):
        try:
            return await asyncio.wait_for(self.inbox.get(), timeout)
        except TimeoutError:
            raise AssertionError(f"no delivery within {timeout} s") from None

    async def close(self):
        """Closes the connection (once); what it left unacknowledged is the broker's to redeliver."""
        if not self.closed:
            self.closed = True
            await self.disconnect()

    async def disconnect(self):
        raise NotImplementedError


class Door:
    """A door's adapter: makes subscribers and publishes, and closes
    everything it opened in `close`."""

    name = ""
    # How the door says the broker refused a publish over max_payload_bytes
    # (a pattern of the `answer` of its Refused), as its documentation gives it.
    payload_limit_answer = ""

    def __init__(self, broker):
        self.broker = broker
        self.numbers = itertools.count(1)
        self.subscribers = []

    async def subscribe(self, topic, *, sql=None, queue=None, ack="auto", durable=None):
        """A new connection subscribed to `topic` (a Sift topic filter) with
        the SQL selector `sql`, in the queue group `queue`, acknowledged by
        the client (`ack="client"`) or by the door (`"auto"`), and `durable`:
        a subscription of that name that outlives its connection."""
        raise NotImplementedError

    async def publish(self, topic, payload, *, properties=None, mode="reliable"):
        """Publishes and waits for the broker's answer; raises Refused if it refused."""
        raise NotImplementedError

    async def publish_all(self, topic, payloads):
        """Publishes `payloads` in order, without waiting between them where
        the door allows it, and returns once all were confirmed."""
        for payload in payloads:
            await self.publish(topic, payload)

    def track(self, subscriber):
        self.subscribers.append(subscriber)
        return subscriber

    async def close(self):
        """Closes every subscriber and the publisher, all of them even when
        one close fails (then that failure is raised)."""
        failures = []
        for close in [subscriber.close for subscriber in self.subscribers] + [self.close_publisher]:
            try:
                await close()
            except Exception as error:
                failures.append(error)
        if failures:
            raise failures[0]

    async def close_publisher(self):
        raise NotImplementedError


# The native door: the Python SDK.


class NativeSubscriber(Subscriber):
    """A client of its own whose subscription a task reads; with `ack="auto"`
    the SDK acknowledges each delivery as the task takes it."""

    def __init__(self, client, subscription, manual):
        super().__init__()
        self.client = client
        self.reader = asyncio.ensure_future(self.read(subscription, manual))

    async def read(self, subscription, manual):
        async for delivery in subscription:
            settle = manual and delivery.needs_ack
            self.deliver(Received(delivery.topic, delivery.payload, delivery.redelivered,
                                  delivery.ack if settle else None, delivery.nack if settle else None))

    async def disconnect(self):
        self.reader.cancel()
        await self.client.close()


class NativeDoor(Door):
    name = "native"
    payload_limit_answer = "LimitExceededError max_payload_bytes"

    def __init__(self, broker):
        super().__init__(broker)
        self.publisher = None

    async def subscribe(self, topic, *, sql=None, queue=None, ack="auto", durable=None):
        client = await connect(self.broker, name=f"door-native-{next(self.numbers)}", reconnect=False)
        try:
            subscription = await client.subscribe(topic, sql=sql, queue=queue, durable=durable,
                                                  ack="manual" if ack == "client" else "auto")
        except BaseException:
            await client.close()
            raise
        return self.track(NativeSubscriber(client, subscription, manual=ack == "client"))

    async def connected_publisher(self):
        if self.publisher is None:
            self.publisher = await connect(self.broker, name="door-native-publisher", reconnect=False)
        return self.publisher

    async def publish(self, topic, payload, *, properties=None, mode="reliable"):
        publisher = await self.connected_publisher()
        try:
            await publisher.publish(topic, payload, properties=properties, mode=mode)
        except sift.BrokerError as error:
            raise Refused(f"{type(error).__name__} {error.code}") from error

    async def publish_all(self, topic, payloads):
        # The client writes its publishes in the order they are made and
        # waits for their confirms together.
        publisher = await self.connected_publisher()
        await asyncio.gather(*(publisher.publish(topic, payload, mode="reliable") for payload in payloads))

    async def close_publisher(self):
        if self.publisher is not None:
            await self.publisher.close()


# The STOMP door: stomp.py.


class StompRelay(stomp.ConnectionListener):
    """Hands what a stomp.py connection receives on its own thread to the
    test's event loop: MESSAGE frames to `on_frame`, RECEIPT and ERROR
    frames to `answers`, in order."""

    def __init__(self, on_frame):
        self.loop = asyncio.get_running_loop()
        self.on_frame = on_frame
        self.answers = asyncio.Queue()
        self.disconnected = asyncio.Event()

    def on_message(self, frame):
        self.on_frame(frame)

    def on_receipt(self, frame):
        self.loop.call_soon_threadsafe(self.answers.put_nowait, frame)

    def on_error(self, frame):
        self.loop.call_soon_threadsafe(self.answers.put_nowait, frame)

    def on_disconnected(self):
        self.loop.call_soon_threadsafe(self.disconnected.set)

    async def answer(self, receipt):
        """The RECEIPT or ERROR that answers the frame sent with `receipt`."""
        frame = await asyncio.wait_for(self.answers.get(), TIMEOUT)
        assert frame.headers.get("receipt-id") == receipt, f"{frame.cmd} {frame.headers} {frame.body}"
        return frame


class StompConnection:
    """A stomp.py connection (stomp_support's) with its relay, and receipts
    numbered for it. Made by `open`."""

    def __init__(self, connection):
        self.connection = connection
        self.relay = StompRelay(lambda frame: None)
        self.connection.set_listener("relay", self.relay)
        self.receipts = itertools.count(1)

    @classmethod
    async def open(cls, broker, name, client_id=None):
        connection, _ = await asyncio.to_thread(stomp_client, broker, name, client_id)
        return cls(connection)

    def receipt(self):
        return f"r{next(self.receipts)}"

    async def confirmed(self, send):
        """Calls `send(receipt)` and waits for its RECEIPT (or the ERROR that answers it)."""
        receipt = self.receipt()
        send(receipt)
        return await self.relay.answer(receipt)

    async def close(self):
        if self.connection.is_connected():
            await asyncio.to_thread(self.connection.disconnect)


class StompSubscriber(Subscriber):
    def __init__(self, stomp_connection):
        super().__init__()
        self.stomp = stomp_connection
        stomp_connection.relay.on_frame = lambda frame: self.deliver(self.received(frame))

    def received(self, frame):
        """A MESSAGE as a Received; its `ack` header is what ACK and NACK
        name (each sent with a receipt, which is awaited)."""
        stomp = self.stomp
        topic = frame.headers["destination"].split("/", 2)[2]
        tag = frame.headers.get("ack")

        async def ack():
            await stomp.confirmed(lambda receipt: stomp.connection.ack(tag, receipt=receipt))

        async def nack():
            await stomp.confirmed(lambda receipt: stomp.connection.nack(tag, receipt=receipt))

        payload = frame.body.encode() if isinstance(frame.body, str) else frame.body
        return Received(topic, payload, frame.headers.get("redelivered") == "true",
                        ack if tag else None, nack if tag else None)

    async def disconnect(self):
        await self.stomp.close()


class StompDoor(Door):
    name = "stomp"
    payload_limit_answer = r"ERROR send refused: broker refused: max_payload_bytes .*, then closed"

    def __init__(self, broker):
        super().__init__(broker)
        self.publisher = None

    async def subscribe(self, topic, *, sql=None, queue=None, ack="auto", durable=None):
        # A durable subscription is named by CONNECT's client-id and the
        # subscription name, so a later connection can resume it.
        subscriber = self.track(StompSubscriber(await StompConnection.open(
            self.broker, f"door-stomp-{next(self.numbers)}", client_id=f"door-{durable}" if durable else None)))
        if queue is not None:
            # A /queue/ destination names the topic and the queue group at once.
            assert queue == topic, "over STOMP a queue group is named after its topic"
        headers = {}
        if sql is not None:
            headers["selector"] = sql
        if durable is not None:
            headers["activemq.subscriptionName"] = durable
        mode = "client-individual" if ack == "client" else "auto"
        destination = f"/queue/{topic}" if queue else f"/topic/{topic}"
        answer = await subscriber.stomp.confirmed(lambda receipt: subscriber.stomp.connection.subscribe(
            destination=destination, id="s", ack=mode, headers={**headers, "receipt": receipt}))
        assert answer.cmd == "RECEIPT", f"SUBSCRIBE answered {answer.cmd}: {answer.body}"
        return subscriber

    async def connected_publisher(self):
        if self.publisher is None:
            self.publisher = await StompConnection.open(self.broker, "door-stomp-publisher")
        return self.publisher

    @staticmethod
    def headers(properties, mode):
        return {**{name: str(value) for name, value in (properties or {}).items()}, "sift-mode": mode}

    async def publish(self, topic, payload, *, properties=None, mode="reliable"):
        publisher = await self.connected_publisher()
        headers = self.headers(properties, mode)
        answer = await publisher.confirmed(lambda receipt: publisher.connection.send(
            destination=f"/topic/{topic}", body=payload, headers={**headers, "receipt": receipt}))
        if answer.cmd == "ERROR":
            # The broker closes the connection after an ERROR, as the spec
            # requires; the next publish opens another one.
            await asyncio.wait_for(publisher.relay.disconnected.wait(), TIMEOUT)
            self.publisher = None
            raise Refused(f"ERROR {answer.headers.get('message')}: {answer.body}, then closed")
        assert answer.cmd == "RECEIPT", answer.cmd

    async def publish_all(self, topic, payloads):
        # SENDs without a receipt go at once; the receipt of the last one
        # follows the confirms of all before it.
        publisher = await self.connected_publisher()
        for payload in payloads[:-1]:
            publisher.connection.send(destination=f"/topic/{topic}", body=payload,
                                      headers=self.headers(None, "reliable"))
        await self.publish(topic, payloads[-1])

    async def close_publisher(self):
        if self.publisher is not None:
            await self.publisher.close()


# The MQTT door: paho-mqtt, MQTT 5, through test_mqtt's client wrapper.


def mqtt_filter(topic):
    """A Sift topic (filter) in MQTT's form: `.` is `/`, `*` is `+`, `>` is `#`."""
    return topic.replace(".", "/").replace("*", "+").replace(">", "#")


class MqttSubscriber(Subscriber):
    """A paho client (test_mqtt's `Mqtt`) whose messages become Received:
    DUP is MQTT's redelivered mark, and PUBACK its only acknowledgement,
    sent by hand when `manual`."""

    def __init__(self, client, manual):
        super().__init__()
        self.client = client
        self.manual = manual
        client.paho.on_message = lambda _client, _user, message: self.deliver(self.received(message))

    def received(self, message):
        async def ack():
            self.client.paho.ack(message.mid, message.qos)

        return Received(message.topic.replace("/", "."), message.payload, bool(message.dup),
                        ack if self.manual and message.qos > 0 else None)

    async def disconnect(self):
        await asyncio.to_thread(self.client.close)


class MqttDoor(Door):
    name = "mqtt"
    payload_limit_answer = "PUBACK 0x80"

    def __init__(self, broker):
        super().__init__(broker)
        self.publisher = None
        self.pubacks = {}

    async def subscribe(self, topic, *, sql=None, queue=None, ack="auto", durable=None):
        # A durable subscription is a session that outlives its connection
        # (clean start 0, a session expiry), named by its client id.
        client_id = f"door-{durable}" if durable else f"door-mqtt-{next(self.numbers)}"
        manual = ack == "client"
        subscriber = self.track(MqttSubscriber(Mqtt(self.broker, client_id, clean=durable is None, manual_ack=manual),
                                               manual))
        await asyncio.to_thread(subscriber.client.connect, session_expiry=300 if durable else None)
        topic_filter = mqtt_filter(topic) if queue is None else f"$share/{queue}/{mqtt_filter(topic)}"
        options = mqtt_properties(PacketTypes.SUBSCRIBE, user=[("sift-sql", sql)]) if sql else None
        granted = await asyncio.to_thread(subscriber.client.subscribe, topic_filter, 1, options)
        assert granted == 1, f"SUBACK 0x{granted:02X} for {topic_filter}"
        return subscriber

    async def connected_publisher(self):
        if self.publisher is None:
            self.publisher = Mqtt(self.broker, "door-mqtt-publisher")
            self.publisher.paho.on_publish = lambda _c, _u, mid, reason, _p: self.pubacks.__setitem__(mid, reason)
            await asyncio.to_thread(self.publisher.connect)
        return self.publisher

    async def publish(self, topic, payload, *, properties=None, mode="reliable"):
        publisher = await self.connected_publisher()
        user = [(name, str(value)) for name, value in (properties or {}).items()]
        if mode != "reliable":
            user.append(("sift-mode", mode))
        # QoS 1: a reliable message, and the PUBACK carries the broker's answer.
        info = await asyncio.to_thread(publisher.publish, mqtt_filter(topic), payload, 1, False, None, user or None)
        reason = self.pubacks.pop(info.mid)
        if reason.is_failure:
            raise Refused(f"PUBACK 0x{reason.value:02X}")

    async def publish_all(self, topic, payloads):
        # paho writes the PUBLISH packets at once; then each PUBACK is awaited.
        publisher = await self.connected_publisher()
        sent = [publisher.paho.publish(mqtt_filter(topic), payload, qos=1) for payload in payloads]
        for info in sent:
            await asyncio.to_thread(info.wait_for_publish, TIMEOUT)
            assert info.is_published() and not self.pubacks.pop(info.mid).is_failure

    async def close_publisher(self):
        if self.publisher is not None:
            await asyncio.to_thread(self.publisher.close)


# The HTTP doors: JSON deliveries, server-sent events, WebSockets.


def received_from_json(delivery, acknowledge=None, refuse=None):
    """A delivery in HTTP's JSON form (docs/HTTP.md, "Messages as JSON") as a Received."""
    text = delivery["payload"]
    payload = base64.b64decode(text) if delivery["payload_encoding"] == "base64" else text.encode()
    return Received(delivery["topic"], payload, delivery["redelivered"], acknowledge, refuse)


def envelope(topic, payload, properties, mode):
    """The JSON publish envelope of docs/HTTP.md (payloads here are text)."""
    return {"topic": topic, "payload": payload.decode(), "properties": properties or {}, "mode": mode}


class EventStreamSubscriber(Subscriber):
    """An HTTP subscription read as server-sent events by a thread of its own.
    Closing deletes the subscription, which ends the stream and so the thread."""

    def __init__(self, broker, subscription_id, response):
        super().__init__()
        self.broker = broker
        self.id = subscription_id
        self.reader = threading.Thread(target=self.read, args=(response,), daemon=True)
        self.reader.start()

    def read(self, response):
        for delivery in deliveries(response):
            self.deliver(received_from_json(delivery))

    async def disconnect(self):
        url = f"{self.broker.http_url}/v1/subscriptions/{self.id}"
        status, answer = await asyncio.to_thread(http_json, "DELETE", url)
        assert status == 204, answer
        await asyncio.to_thread(self.reader.join, TIMEOUT)
        assert not self.reader.is_alive(), "the event stream did not end with its subscription"


class EventStreamDoor(Door):
    name = "http-sse"
    payload_limit_answer = "413 max_payload_bytes"

    async def subscribe(self, topic, *, sql=None, queue=None, ack="auto", durable=None):
        # An event stream acknowledges each event as it is handed to the
        # connection: the client has no acknowledgement of its own.
        assert ack == "auto" and durable is None, "an event stream is acknowledged by the front-end"
        request = {"topic": topic, **({"sql": sql} if sql else {}), **({"queue": queue} if queue else {})}
        url = f"{self.broker.http_url}/v1/subscriptions"
        status, created = await asyncio.to_thread(http_json, "POST", url, request)
        assert status == 201, created
        # The subscription collects from its creation; the stream is open
        # (and attached) once its answer's head has arrived.
        events = self.broker.http_url + created["events"]
        response = await asyncio.to_thread(urllib.request.urlopen, events, timeout=TIMEOUT)
        return self.track(EventStreamSubscriber(self.broker, created["id"], response))

    async def publish(self, topic, payload, *, properties=None, mode="reliable"):
        status, answer = await asyncio.to_thread(http_json, "POST", f"{self.broker.http_url}/v1/messages",
                                                 envelope(topic, payload, properties, mode))
        if status == 200 or (status, answer.get("error")) == (404, "no_subscribers"):
            return
        raise Refused(f"{status} {answer.get('error')}")

    async def close_publisher(self):
        pass  # each publish was a request of its own


class WebSocketSession:
    """One WebSocket session (`/v1/ws`), read by a thread of its own:
    `deliver` messages go to `on_delivery`, every other message to `answers`.
    Made by `open`."""

    def __init__(self, socket, on_delivery):
        self.loop = asyncio.get_running_loop()
        self.answers = asyncio.Queue()
        self.on_delivery = on_delivery
        self.requests = itertools.count(1)
        self.socket = socket
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    @classmethod
    async def open(cls, broker, on_delivery=lambda message: None):
        url = broker.http_url.replace("http://", "ws://") + "/v1/ws"
        return cls(await asyncio.to_thread(websocket_connect, url, open_timeout=TIMEOUT), on_delivery)

    def read(self):
        try:
            for text in self.socket:
                message = json.loads(text)
                if message["op"] == "deliver":
                    self.on_delivery(message)
                else:
                    self.loop.call_soon_threadsafe(self.answers.put_nowait, message)
        except ConnectionClosed:
            pass

    def send(self, **message):
        self.socket.send(json.dumps(message))

    async def answer(self):
        return await asyncio.wait_for(self.answers.get(), TIMEOUT)

    async def close(self):
        self.socket.close()
        await asyncio.to_thread(self.reader.join, TIMEOUT)
        assert not self.reader.is_alive(), "the WebSocket reader did not end"


class WebSocketSubscriber(Subscriber):
    def __init__(self, session):
        super().__init__()
        self.session = session

    async def disconnect(self):
        await self.session.close()


class WebSocketDoor(Door):
    name = "http-ws"
    payload_limit_answer = "error max_payload_bytes"

    def __init__(self, broker):
        super().__init__(broker)
        self.publisher = None

    async def subscribe(self, topic, *, sql=None, queue=None, ack="auto", durable=None):
        session = await WebSocketSession.open(self.broker)
        subscriber = self.track(WebSocketSubscriber(session))
        session.on_delivery = lambda message: subscriber.deliver(self.received(session, message))
        options = {"sql": sql, "queue": queue, "durable": durable}
        subscriber.session.send(op="subscribe", id="s", topic=topic, ack=ack,
                                **{name: value for name, value in options.items() if value is not None})
        assert await subscriber.session.answer() == {"op": "subscribed", "id": "s"}
        return subscriber

    @staticmethod
    def received(session, message):
        """A `deliver` message as a Received; its `tag` (present when the
        client must acknowledge) is what `ack` and `nack` name."""
        tag = message.get("tag")

        async def ack():
            session.send(op="ack", tag=tag)

        async def nack():
            session.send(op="nack", tag=tag)

        return received_from_json(message["message"], ack if tag else None, nack if tag else None)

    async def connected_publisher(self):
        if self.publisher is None:
            self.publisher = await WebSocketSession.open(self.broker)
        return self.publisher

    def send_publish(self, publisher, topic, payload, properties=None, mode="reliable"):
        request = f"p{next(publisher.requests)}"
        publisher.send(op="publish", request=request, **envelope(topic, payload, properties, mode))
        return request

    @staticmethod
    def check(answer, request):
        assert answer.get("request") == request, answer
        if answer["op"] == "error":
            raise Refused(f"error {answer['error']}")
        assert answer["op"] == "confirm" and answer["status"] in ("accepted", "no_subscribers"), answer

    async def publish(self, topic, payload, *, properties=None, mode="reliable"):
        publisher = await self.connected_publisher()
        request = self.send_publish(publisher, topic, payload, properties, mode)
        self.check(await publisher.answer(), request)

    async def publish_all(self, topic, payloads):
        # The publishes of one socket reach the broker in the order sent;
        # their confirms may come back in any order, each naming its request.
        publisher = await self.connected_publisher()
        requests = [self.send_publish(publisher, topic, payload) for payload in payloads]
        answers = {}
        while len(answers) < len(requests):
            answer = await publisher.answer()
            answers[answer.get("request")] = answer
        for request in requests:
            self.check(answers[request], request)

    async def close_publisher(self):
        if self.publisher is not None:
            await self.publisher.close()


DOORS = {door.name: door for door in (NativeDoor, StompDoor, MqttDoor, EventStreamDoor, WebSocketDoor)}


# Steps the rows share.


async def until_sentinel(subscriber):
    """(topic, payload) of each delivery before the sentinel."""
    seen = []
    while (received := await subscriber.next()).payload != SENTINEL:
        seen.append((received.topic, received.payload))
    return seen


class Merged:
    """The deliveries of several subscribers in one queue, as (subscriber's
    index, Received), while it runs."""

    def __init__(self, subscribers):
        self.arrivals = asyncio.Queue()
        self.readers = [asyncio.ensure_future(self.read(index, subscriber))
                        for index, subscriber in enumerate(subscribers)]

    async def read(self, index, subscriber):
        while True:
            self.arrivals.put_nowait((index, await subscriber.inbox.get()))

    async def next(self):
        return await asyncio.wait_for(self.arrivals.get(), TIMEOUT)

    def stop(self):
        for reader in self.readers:
            reader.cancel()


# The rows' steps. Each returns what it observed; the row says what it must be.


async def exact_topic(door):
    """A subscriber to `sem.exact.mine` gets the message on its topic and
    not the one on `sem.exact.other`, published before it."""
    mine = await door.subscribe("sem.exact.mine")
    await door.publish("sem.exact.other", b"other")
    await door.publish("sem.exact.mine", b"mine")
    await door.publish("sem.exact.mine", SENTINEL)
    return await until_sentinel(mine)


async def one_level_wildcard(door):
    """`sem.one.*` matches one more token: not two, not a sibling topic."""
    subscriber = await door.subscribe("sem.one.*")
    for topic in ("sem.one.a", "sem.one.a.b", "sem.two.a", "sem.one.b"):
        await door.publish(topic, topic.encode())
    await door.publish("sem.one.end", SENTINEL)
    return await until_sentinel(subscriber)


async def many_level_wildcard(door):
    """`sem.many.>` matches one or more tokens after `sem.many`, and not
    `sem.manyx.a`. (The parent `sem.many` itself is left out on purpose:
    MQTT's `#` also matches its parent level, which the MQTT door maps to a
    second subscription, as docs/PROTOCOLS.md says; the native `>` does not.)"""
    subscriber = await door.subscribe("sem.many.>")
    for topic in ("sem.many.a", "sem.many.a.b.c", "sem.manyx.a"):
        await door.publish(topic, topic.encode())
    await door.publish("sem.many.end", SENTINEL)
    return await until_sentinel(subscriber)


ORDER_COUNT = 50


async def publisher_order(door):
    """Messages from one publisher, sent without waiting between them where
    the door allows it, arrive in the order they were published."""
    subscriber = await door.subscribe("sem.order")
    await door.publish_all("sem.order", [b"%d" % number for number in range(ORDER_COUNT)])
    return [(await subscriber.next()).payload for _ in range(ORDER_COUNT)]


JOBS = [b"job-%d" % number for number in range(10)]


async def queue_group(door):
    """Two members of the queue group `sem.jobs`: each job reaches exactly
    one of them, and both get jobs. Sentinels follow until each member had
    one: a member's deliveries keep their order, so by then every job it
    would get has arrived."""
    members = [await door.subscribe("sem.jobs", queue="sem.jobs") for _ in range(2)]
    for job in JOBS:
        await door.publish("sem.jobs", job)
    merged = Merged(members)
    jobs_by_member, sentinels_by = {0: [], 1: []}, set()
    try:
        for _ in range(20):
            if len(sentinels_by) == 2:
                break
            await door.publish("sem.jobs", SENTINEL)
            while True:
                index, received = await merged.next()
                if received.payload == SENTINEL:
                    sentinels_by.add(index)
                    break
                jobs_by_member[index].append(received.payload)
    finally:
        merged.stop()
    return {
        "jobs received": sorted(jobs_by_member[0] + jobs_by_member[1]),
        "members with jobs": sum(1 for jobs in jobs_by_member.values() if jobs),
        "members with a sentinel": len(sentinels_by),
    }


QUOTES = [
    (b"ibm-120", {"sym": "IBM", "price": 120}),
    (b"ibm-90", {"sym": "IBM", "price": 90}),
    (b"hp-150", {"sym": "HP", "price": 150}),
    (b"ibm-101", {"sym": "IBM", "price": 101}),
]


async def content_filter(door):
    """A SQL selector (native `sql`, STOMP `selector`, MQTT 5 `sift-sql`,
    HTTP `sql`) on property values typed by each door's rules: a string and
    an integer compared."""
    subscriber = await door.subscribe("sem.quotes", sql="sym = 'IBM' AND price > 100")
    for payload, quote in QUOTES:
        await door.publish("sem.quotes", payload, properties=quote)
    await door.publish("sem.quotes", SENTINEL, properties={"sym": "IBM", "price": 1000})
    return [payload for _, payload in await until_sentinel(subscriber)]


def redelivery(first, again, after):
    """What a redelivery row observed: the payloads of the first delivery,
    of the delivery again and of what came after it (the sentinel, when
    nothing else came again), and the redelivered mark of the first two."""
    return {"first": first.payload, "again": again.payload, "then": after.payload,
            "first marked redelivered": first.redelivered, "again marked redelivered": again.redelivered}


PAYLOADS = ("first", "again", "then")
MARKS = ("first marked redelivered", "again marked redelivered")


async def nack_redelivers(door):
    """A client-acknowledged subscriber refuses a reliable message: the
    broker delivers it again, marked redelivered; once acknowledged it does
    not come back."""
    subscriber = await door.subscribe("sem.work", ack="client")
    await door.publish("sem.work", b"task")
    first = await subscriber.next()
    await first.nack()
    again = await subscriber.next()
    await again.ack()
    await door.publish("sem.work", SENTINEL)
    sentinel = await subscriber.next()
    await sentinel.ack()
    return redelivery(first, again, sentinel)


async def unacked_after_close(door):
    """A durable, client-acknowledged subscriber takes a persistent message
    and closes its connection without acknowledging it; a new connection
    resuming the subscription gets it again, marked redelivered, and once it
    is acknowledged, nothing more before the sentinel."""
    first_connection = await door.subscribe("sem.keep", ack="client", durable="keeper")
    await door.publish("sem.keep", b"kept", mode="persistent")
    first = await first_connection.next()
    await first_connection.close()
    resumed = await door.subscribe("sem.keep", ack="client", durable="keeper")
    again = await resumed.next()
    await again.ack()
    await door.publish("sem.keep", SENTINEL, mode="persistent")
    sentinel = await resumed.next()
    await sentinel.ack()
    return redelivery(first, again, sentinel)


async def queue_failover(door):
    """Two client-acknowledged members of the queue group `sem.tasks`; the
    one that got the task closes its connection without acknowledging it:
    the broker hands the task to the other member, marked redelivered."""
    members = [await door.subscribe("sem.tasks", queue="sem.tasks", ack="client") for _ in range(2)]
    await door.publish("sem.tasks", b"task")
    merged = Merged(members)
    try:
        holder, first = await merged.next()
    finally:
        merged.stop()
    await members[holder].close()
    survivor = members[1 - holder]
    again = await survivor.next()
    await again.ack()
    await door.publish("sem.tasks", SENTINEL)
    sentinel = await survivor.next()
    await sentinel.ack()
    return redelivery(first, again, sentinel)


async def payload_limit(door):
    """A payload one byte over limits.max_payload_bytes is refused in the
    door's own form (`Door.payload_limit_answer`) and reaches nobody; one of
    exactly the limit goes through."""
    subscriber = await door.subscribe("sem.big")
    try:
        await door.publish("sem.big", b"x" * (PAYLOAD_LIMIT + 1))
        refusal = "accepted"
    except Refused as refused:
        documented = re.fullmatch(door.payload_limit_answer, refused.answer, re.DOTALL)
        refusal = "refused as documented" if documented else refused.answer
    await door.publish("sem.big", b"y" * PAYLOAD_LIMIT)
    await door.publish("sem.big", SENTINEL)
    return {"over the limit": refusal,
            "received sizes": [len(payload) for _, payload in await until_sentinel(subscriber)]}


# The table.


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    steps: Callable
    expected: object
    # The keys of the observed outcome (a dict) this row compares; all when empty.
    only: tuple = ()
    # Doors that cannot express the row, each with the reason.
    excluded: dict = dataclasses.field(default_factory=dict)
    # Doors that can express it but answer otherwise: strict xfails, each
    # with the difference found.
    differs: dict = dataclasses.field(default_factory=dict)

    def outcome(self, observed):
        return {key: observed[key] for key in self.only} if self.only else observed


NO_CLIENT_ACK_OVER_SSE = ("an event stream is acknowledged by the front-end as each event is handed to the "
                          "connection: its client has no ack or nack, so it cannot hold a delivery unacknowledged")
NO_NACK_IN_MQTT = "MQTT has no negative acknowledgement: a client can only withhold its PUBACK"
MQTT_DUP_IS_NOT_REDELIVERED = (
    "MQTT has no redelivered mark: DUP says that this PUBLISH is a retransmission of one sent to the same "
    "session before (MQTT 5.0 section 3.3.1.1), so a message handed over from another member must go without it")
ROWS = [
    Row("exact topic", exact_topic, [("sem.exact.mine", b"mine")]),
    Row("one-level wildcard", one_level_wildcard, [("sem.one.a", b"sem.one.a"), ("sem.one.b", b"sem.one.b")]),
    Row("many-level wildcard", many_level_wildcard,
        [("sem.many.a", b"sem.many.a"), ("sem.many.a.b.c", b"sem.many.a.b.c")]),
    Row("publisher order", publisher_order, [b"%d" % number for number in range(ORDER_COUNT)]),
    Row("queue group: each message to one member", queue_group,
        {"jobs received": sorted(JOBS), "members with jobs": 2, "members with a sentinel": 2}),
    Row("content filter", content_filter, [b"ibm-120", b"ibm-101"]),
    Row("nack redelivers, marked", nack_redelivers,
        {"first": b"task", "again": b"task", "then": SENTINEL,
         "first marked redelivered": False, "again marked redelivered": True},
        excluded={"mqtt": NO_NACK_IN_MQTT, "http-sse": NO_CLIENT_ACK_OVER_SSE}),
    Row("unacknowledged message delivered again after the connection closes", unacked_after_close,
        {"first": b"kept", "again": b"kept", "then": SENTINEL}, only=PAYLOADS,
        excluded={"http-sse": NO_CLIENT_ACK_OVER_SSE}),
    Row("unacknowledged message delivered again after the connection closes is marked redelivered",
        unacked_after_close, {"first marked redelivered": False, "again marked redelivered": True}, only=MARKS,
        excluded={"http-sse": NO_CLIENT_ACK_OVER_SSE}),
    Row("queue group failover of an unacknowledged message", queue_failover,
        {"first": b"task", "again": b"task", "then": SENTINEL}, only=PAYLOADS,
        excluded={"http-sse": NO_CLIENT_ACK_OVER_SSE}),
    Row("queue group failover of an unacknowledged message is marked redelivered", queue_failover,
        {"first marked redelivered": False, "again marked redelivered": True}, only=MARKS,
        excluded={"http-sse": NO_CLIENT_ACK_OVER_SSE, "mqtt": MQTT_DUP_IS_NOT_REDELIVERED}),
    Row("payload over max_payload_bytes refused", payload_limit,
        {"over the limit": "refused as documented", "received sizes": [PAYLOAD_LIMIT]}),
]


def cases():
    """(row, door) for every row and door; excluded doors are skipped with
    their reason, differing ones are strict xfails."""
    for row in ROWS:
        assert set(row.excluded) | set(row.differs) <= set(DOORS), row.name
        for door in DOORS:
            marks = []
            if door in row.excluded:
                marks.append(pytest.mark.skip(reason=f"{door} cannot express it: {row.excluded[door]}"))
            if door in row.differs:
                marks.append(pytest.mark.xfail(strict=True, reason=row.differs[door]))
            yield pytest.param(row, door, marks=marks, id=f"{row.name}-{door}")


@pytest.mark.parametrize("row, door_name", list(cases()))
async def test_every_door_gives_the_rows_outcome(broker, row, door_name):
    door = DOORS[door_name](broker)
    try:
        observed = await row.steps(door)
    finally:
        await door.close()
    assert row.outcome(observed) == row.expected, f"{row.name} through {door_name}"
