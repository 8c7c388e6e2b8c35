"""One permission matrix, asked through every door: the same user gets the
same decision for the same action whichever door it comes through, each
door says so in its own words, and nothing outside a user's grant ever
arrives (docs/SECURITY.md: "Every door hands the credentials to the
broker's session machine, which decides").

One broker, a users file with three users and no anonymous access, and a
stream `orders` on `orders.>` that `writer` adds over HTTP:

- `writer`: publish, subscribe `orders.>`, reads the stream, manages it
  (adding a stream needs `manage_streams`; `admin` does not imply it), admin;
- `eu_reader`: subscribe `orders.>` restricted by `region = 'EU'`, reads
  the stream;
- `outsider`: publish and subscribe `public.>` only.

The decision every door must give (`DECISIONS`):

    action               writer   eu_reader            outsider
    publish              allowed  denied               denied
    subscribe            allowed  allowed, EU only     denied
    subscribe_filtered   allowed  allowed, EU only     denied
    replay               allowed  allowed, EU only     denied
    query                allowed  allowed, EU only     denied
    durable              allowed  denied (restricted)  denied
    queue_group          allowed  allowed, EU only     denied
    admin                allowed  denied               denied

How each door expresses each action (`-`: it cannot, and the cell is
skipped with the reason in `CANNOT`):

    action              native (SDK)      http (Basic)          sse                   websocket      stomp (stomp.py)           mqtt 5 (paho)
    publish             publish()         POST /v1/messages     -                     op publish     SEND + receipt             PUBLISH QoS 1
    subscribe           subscribe()       POST subscriptions,   POST subscriptions,   op subscribe   /topic/orders.>            orders/+
                                          callback              GET .../events
    subscribe_filtered  sql=              "sql"                 "sql"                 "sql"          selector                   user property sift-sql
    replay              start=seq:N       "stream", "start"     "stream", "start"     same           -                          -
    query               `sift query` CLI  GET .../messages      -                     -              -                          -
    durable             durable=          "durable"             "durable"             "durable"      activemq.subscriptionName  -
    queue_group         queue=            "queue"               "queue"               "queue"        /queue/orders.>            $share/G/orders/+
    admin               admin("stats")    GET /v1/admin/stats   -                     -              -                          -

A refusal in each door's words: native `permission_denied` (the SDK's
`BrokerError.code`, the CLI's `broker refused: permission_denied`), HTTP
and SSE `403` with `{"error": "permission_denied"}`, WebSocket
`{"op": "error", "error": "permission_denied"}`, STOMP an `ERROR` frame
naming `permission_denied`, MQTT 5 reason code 0x87 (Not authorized) in
SUBACK or PUBACK. MQTT's `orders/#` would also take the topic `orders`,
which `orders.>` does not cover, so its subscription is `orders/+`.

Content. Every allowed read gets one batch of orders, US and EU, big and
small, followed by a sentinel order (EU, amount 99) that every reader may
see: the reader collects until the sentinel, and the collected list must be
exactly what its grant and its own filter let through, in order. That
proves what did not arrive without waiting for a quiet period. A publish
is checked the same way by a `writer` observer: the probe arrives before
the sentinel when the publish was allowed, and not at all when it was not.

Every cell closes what it opened; the `broker` fixture then waits until no
connection holds a subscription, so no member of a queue group or
subscriber of one cell can take a message of the next.
"""

import asyncio
import base64
import dataclasses
import json
import os
import queue
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

import pytest
import stomp
from paho.mqtt.packettypes import PacketTypes
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as websocket_connect

import sift
from conftest import password_hash, sift_binary, start_broker
from http_support import CallbackReceiver, deliveries
from sdk_support import TIMEOUT, until_sentinel
from test_mqtt import Mqtt, properties as mqtt_properties

PASSWORDS = {"writer": "quill-and-ink", "eu_reader": "brussels-sprout", "outsider": "over-the-fence"}
USERS = ("writer", "eu_reader", "outsider")
DOORS = ("native", "http", "sse", "websocket", "stomp", "mqtt")
ACTIONS = ("publish", "subscribe", "subscribe_filtered", "replay", "query", "durable", "queue_group", "admin")
ALLOWED, DENIED = "allowed", "denied"

DECISIONS = {
    "publish": {"writer": ALLOWED, "eu_reader": DENIED, "outsider": DENIED},
    "subscribe": {"writer": ALLOWED, "eu_reader": ALLOWED, "outsider": DENIED},
    "subscribe_filtered": {"writer": ALLOWED, "eu_reader": ALLOWED, "outsider": DENIED},
    "replay": {"writer": ALLOWED, "eu_reader": ALLOWED, "outsider": DENIED},
    "query": {"writer": ALLOWED, "eu_reader": ALLOWED, "outsider": DENIED},
    # "A restricted grant cannot read a durable" (docs/SECURITY.md).
    "durable": {"writer": ALLOWED, "eu_reader": DENIED, "outsider": DENIED},
    "queue_group": {"writer": ALLOWED, "eu_reader": ALLOWED, "outsider": DENIED},
    "admin": {"writer": ALLOWED, "eu_reader": DENIED, "outsider": DENIED},
}

CANNOT = {
    ("sse", "publish"): "an event stream only carries a subscription's deliveries (publishing is the http door's)",
    ("sse", "query"): "a query answers NDJSON over plain HTTP (the http door's), not events",
    ("sse", "admin"): "the admin reports are plain HTTP GETs (the http door's), not events",
    ("websocket", "query"): "the WebSocket has no query op",
    ("websocket", "admin"): "the WebSocket has no admin op",
    ("stomp", "replay"): "STOMP has no start position: a SUBSCRIBE is live, a durable one starts new",
    ("stomp", "query"): "STOMP has no archive query",
    ("stomp", "admin"): "STOMP has no admin reports",
    ("mqtt", "replay"): "MQTT has no replay of a stream (retained messages are one per topic)",
    ("mqtt", "query"): "MQTT has no archive query",
    ("mqtt", "durable"): "MQTT names no durable subscription of a stream (mqtt.session_stream is the broker's setting)",
    ("mqtt", "admin"): "MQTT has no admin reports",
}

# The batch every allowed read gets: (payload, region, amount). The US
# orders are what eu_reader's grant forbids; the small ones what the own
# filter `amount > 10` leaves out. The sentinel order is allowed to all.
BATCH = (
    ("us-50", "US", 50),
    ("eu-5", "EU", 5),
    ("us-5", "US", 5),
    ("eu-20", "EU", 20),
    ("us-500", "US", 500),
)
SENTINEL = "sentinel"
SENTINEL_ORDER = (SENTINEL, "EU", 99)
OWN_FILTER = "amount > 10"
PROBE = ("probe", "EU", 20)

# What each reader collects before the sentinel: (user, with the own filter).
SEES = {
    ("writer", False): ["us-50", "eu-5", "us-5", "eu-20", "us-500"],
    ("writer", True): ["us-50", "eu-20", "us-500"],
    ("eu_reader", False): ["eu-5", "eu-20"],
    ("eu_reader", True): ["eu-20"],
}


def expected_content(action, user):
    """What an allowed cell must receive, exactly and in order."""
    if action == "publish":
        return ["probe"]  # the observer sees the probe, then the sentinel
    if action == "admin":
        return None
    return SEES[(user, action == "subscribe_filtered")]


# The broker.


def users_file_text():
    hashes = {user: password_hash(password) for user, password in PASSWORDS.items()}
    # No [anonymous] section: clients that do not sign in may do nothing.
    return f"""
[[user]]
name = "writer"
password_hash = "{hashes['writer']}"
publish = ["orders.>"]
subscribe = ["orders.>"]
streams = ["orders"]
manage_streams = ["orders"]   # to add the stream below; admin does not imply it
admin = true

[[user]]
name = "eu_reader"
password_hash = "{hashes['eu_reader']}"
subscribe = [{{ topic = "orders.>", where = "region = 'EU'" }}]
streams = ["orders"]

[[user]]
name = "outsider"
password_hash = "{hashes['outsider']}"
publish = ["public.>"]
subscribe = ["public.>"]
"""


def basic(user):
    token = base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()
    return f"Basic {token}"


def http_call(broker, method, path, user=None, body=None):
    """(status, body bytes) of one HTTP request, signed in as `user` (Basic)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(broker.http_url + path, data=data, method=method)
    if body is not None:
        request.add_header("content-type", "application/json")
    if user is not None:
        request.add_header("Authorization", basic(user))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


@pytest.fixture(scope="module")
def matrix_broker(tmp_path_factory):
    path = tmp_path_factory.mktemp("permission-matrix") / "users.toml"
    path.write_text(users_file_text())
    running = start_broker(extra_args=("--users", str(path)))
    try:
        status, answer = http_call(running, "POST", "/v1/streams", "writer",
                                   {"name": "orders", "topics": ["orders.>"]})
        assert status == 201, answer
        yield running
    finally:
        running.stop()
        running.process.stdout.close()


async def native_client(broker, user, name):
    return await sift.connect(broker.host, broker.port, user=user, password=PASSWORDS[user], name=name,
                              reconnect=False)


@pytest.fixture
async def broker(matrix_broker):
    """The module's broker; after the test, waits until no connection holds
    a subscription (every client of the test is gone at the broker)."""
    yield matrix_broker
    admin = await native_client(matrix_broker, "writer", "matrix-cleanup")
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            report = await admin.admin("subscriptions")
            held = [(connection["client"], subscription["topic"])
                    for connection in report["connections"] for subscription in connection["subscriptions"]]
            if not held:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"subscriptions still held after the test: {held}")
            await asyncio.sleep(0.01)
    finally:
        await admin.close()


class Writer:
    """`writer` on the native door: publishes the batches and observes."""

    def __init__(self, client):
        self.client = client

    async def publish_order(self, topic, order):
        payload, region, amount = order
        confirm = await self.client.publish(topic, payload.encode(), properties={"region": region, "amount": amount},
                                            mode="persistent")
        assert confirm.stream == "orders", confirm
        return confirm.stream_seq

    async def publish_batch(self, topic):
        """The batch, then the sentinel; returns the stream sequence of the first."""
        first = None
        for order in (*BATCH, SENTINEL_ORDER):
            sequence = await self.publish_order(topic, order)
            first = first or sequence
        return first


# What every door returns.


@dataclasses.dataclass
class Outcome:
    """A door's decision (`allowed`, `denied`, or `other` for any other
    answer), its words, and what arrived (None where nothing is read)."""

    decision: str
    answer: str
    received: Optional[list] = None


def refused(is_permission, answer):
    return Outcome(DENIED if is_permission else "other", answer)


@dataclasses.dataclass
class Request:
    """A subscription request in Sift's terms; each door maps it."""

    topic: str
    sql: Optional[str] = None
    queue: Optional[str] = None
    durable: Optional[str] = None
    stream: Optional[str] = None
    start: Optional[str] = None


def take_until_sentinel(source, what):
    """Payloads from a thread-fed queue until the sentinel (left out). None
    on the queue means the source ended."""
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            item = source.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"{what}: no sentinel within {TIMEOUT} s; received {seen}") from None
        if item is None:
            raise AssertionError(f"{what}: ended before the sentinel; received {seen}")
        if isinstance(item, dict):
            item = payload_text(item)  # a callback's delivery, as JSON
        if item == SENTINEL:
            return seen
        seen.append(item)


def payload_text(message):
    """The payload of a delivery as JSON (HTTP, SSE, WebSocket)."""
    if message.get("payload_encoding") == "base64":
        return base64.b64decode(message["payload"]).decode()
    return message["payload"]


class Reader:
    """An open subscription of some door, and the door's words for it."""

    def __init__(self, take, what, answer):
        self._take = take
        self.what = what
        self.answer = answer

    async def until_sentinel(self):
        return await self._take()


def thread_reader(source, what, answer):
    return Reader(lambda: asyncio.to_thread(take_until_sentinel, source, what), what, answer)


# The doors.


class NativeDoor:
    """The Python SDK signed in with user and password; `sift query` with
    `--user` and SIFT_PASSWORD for the archive query, which the SDK lacks."""

    def __init__(self, broker, user):
        self.broker = broker
        self.user = user
        self.client = None

    async def connected(self):
        if self.client is None:
            self.client = await native_client(self.broker, self.user, f"matrix-native-{self.user}")
        return self.client

    async def publish(self, topic, order):
        payload, region, amount = order
        client = await self.connected()
        try:
            confirm = await client.publish(topic, payload.encode(), properties={"region": region, "amount": amount},
                                           mode="reliable")
        except sift.BrokerError as error:
            return refused(error.code == "permission_denied", f"ERROR {error.code}: {error.message}")
        return Outcome(ALLOWED, f"CONFIRM {confirm.status}")

    async def open(self, request):
        client = await self.connected()
        try:
            subscription = await client.subscribe(request.topic, sql=request.sql, queue=request.queue,
                                                  durable=request.durable, stream=request.stream,
                                                  start=request.start)
        except sift.BrokerError as error:
            return refused(error.code == "permission_denied", f"ERROR {error.code}: {error.message}")

        async def take():
            return [payload.decode() for payload in await until_sentinel(subscription, SENTINEL.encode())]

        return Reader(take, f"native {self.user} {request}", f"SUBSCRIBED {subscription.id}")

    async def query(self, topic):
        process = await asyncio.create_subprocess_exec(
            sift_binary(), "query", "--server", self.broker.native, "--user", self.user, "--stream", "orders",
            "--topic", topic, "--format", "json",
            env=dict(os.environ, SIFT_PASSWORD=PASSWORDS[self.user]),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), TIMEOUT)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        if process.returncode != 0:
            text = stderr.decode().strip()
            return refused("permission_denied" in text, f"sift query exit {process.returncode}: {text}")
        lines = [json.loads(line) for line in stdout.decode().splitlines() if line.strip()]
        return Outcome(ALLOWED, "sift query exit 0", [payload_text(line) for line in lines if "payload" in line])

    async def admin(self):
        client = await self.connected()
        try:
            report = await client.admin("stats")
        except sift.BrokerError as error:
            return refused(error.code == "permission_denied", f"ERROR {error.code}: {error.message}")
        return Outcome(ALLOWED, f"ADMIN_REPLY stats ({len(report)} keys)")

    async def close(self):
        if self.client is not None:
            await self.client.close()


def http_refusal(status, raw):
    try:
        code = json.loads(raw).get("error")
    except ValueError:
        code = None
    return refused(status == 403 and code == "permission_denied", f"HTTP {status} {raw.decode(errors='replace')}")


def subscription_body(request):
    body = {"topic": request.topic}
    for field in ("sql", "queue", "durable", "stream", "start"):
        if getattr(request, field) is not None:
            body[field] = getattr(request, field)
    return body


class HttpDoor:
    """Plain HTTP with `Authorization: Basic`: publish, subscriptions that
    deliver to a callback URL, the archive query and the admin reports."""

    def __init__(self, broker, user):
        self.broker = broker
        self.user = user
        self.subscriptions = []
        self.receiver = None

    async def call(self, method, path, body=None):
        return await asyncio.to_thread(http_call, self.broker, method, path, self.user, body)

    async def publish(self, topic, order):
        payload, region, amount = order
        status, raw = await self.call("POST", "/v1/messages", {
            "topic": topic, "payload": payload, "properties": {"region": region, "amount": amount},
            "mode": "reliable"})
        if status == 200 or (status == 404 and json.loads(raw).get("error") == "no_subscribers"):
            return Outcome(ALLOWED, f"HTTP {status} {raw.decode()}")
        return http_refusal(status, raw)

    async def open(self, request):
        self.receiver = CallbackReceiver()
        status, raw = await self.call("POST", "/v1/subscriptions",
                                      {**subscription_body(request), "callback": self.receiver.url})
        if status != 201:
            return http_refusal(status, raw)
        self.subscriptions.append(json.loads(raw)["id"])
        return thread_reader(self.receiver.received, f"http callback {self.user} {request}",
                             f"HTTP {status} {raw.decode()}")

    async def query(self, topic):
        path = "/v1/streams/orders/messages?" + urllib.parse.urlencode({"topic": topic})
        status, raw = await self.call("GET", path)
        if status != 200:
            return http_refusal(status, raw)
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        assert "done" in lines[-1], lines[-1]
        return Outcome(ALLOWED, f"HTTP 200 {lines[-1]}", [payload_text(line) for line in lines if "payload" in line])

    async def admin(self):
        status, raw = await self.call("GET", "/v1/admin/stats")
        if status != 200:
            return http_refusal(status, raw)
        return Outcome(ALLOWED, f"HTTP 200 ({len(json.loads(raw))} keys)")

    async def close(self):
        for subscription in self.subscriptions:
            status, raw = await self.call("DELETE", f"/v1/subscriptions/{subscription}")
            assert status == 204, raw
        if self.receiver is not None:
            await asyncio.to_thread(self.receiver.stop)


class EventStream:
    """A subscription's server-sent events, read by a thread: each
    delivery's payload goes on `payloads`, then None when the stream ends."""

    def __init__(self, response):
        self.payloads = queue.Queue()
        self.thread = threading.Thread(target=self.read, args=(response,), daemon=True)
        self.thread.start()

    def read(self, response):
        try:
            for delivery in deliveries(response):
                self.payloads.put(payload_text(delivery))
        except (OSError, ValueError):
            pass
        finally:
            self.payloads.put(None)


def open_events(broker, subscription, user):
    """GET the subscription's event stream as `user` (None: no credentials);
    (status, EventStream or the refusal's body)."""
    request = urllib.request.Request(f"{broker.http_url}/v1/subscriptions/{subscription}/events")
    if user is not None:
        request.add_header("Authorization", basic(user))
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()
    return response.status, EventStream(response)


class SseDoor:
    """`POST /v1/subscriptions` and its `GET .../events`, both with Basic."""

    def __init__(self, broker, user):
        self.broker = broker
        self.user = user
        self.subscriptions = []
        self.streams = []

    async def open(self, request):
        status, raw = await asyncio.to_thread(http_call, self.broker, "POST", "/v1/subscriptions", self.user,
                                              subscription_body(request))
        if status != 201:
            return http_refusal(status, raw)
        subscription = json.loads(raw)["id"]
        self.subscriptions.append(subscription)
        status, stream = await asyncio.to_thread(open_events, self.broker, subscription, self.user)
        assert status == 200, f"the event stream of {self.user}'s own subscription: {status} {stream}"
        self.streams.append(stream)
        return thread_reader(stream.payloads, f"sse {self.user} {request}", f"HTTP 201 {raw.decode()}, events 200")

    async def close(self):
        for subscription in self.subscriptions:
            status, raw = await asyncio.to_thread(http_call, self.broker, "DELETE",
                                                  f"/v1/subscriptions/{subscription}", self.user)
            assert status == 204, raw
        for stream in self.streams:
            await asyncio.to_thread(stream.thread.join, TIMEOUT)
            assert not stream.thread.is_alive(), "the event stream did not end with its subscription"


class WebSocketDoor:
    """One `/v1/ws` session opened with `Authorization: Basic`, read by a
    thread: deliveries' payloads on `payloads`, other messages on `answers`."""

    def __init__(self, broker, user):
        self.broker = broker
        self.user = user
        self.socket = None
        self.thread = None
        self.answers = queue.Queue()
        self.payloads = queue.Queue()

    async def connected(self):
        if self.socket is None:
            url = self.broker.http_url.replace("http://", "ws://") + "/v1/ws"
            self.socket = await asyncio.to_thread(websocket_connect, url, open_timeout=TIMEOUT,
                                                  additional_headers={"Authorization": basic(self.user)})
            self.thread = threading.Thread(target=self.read, daemon=True)
            self.thread.start()
        return self.socket

    def read(self):
        try:
            for text in self.socket:
                message = json.loads(text)
                if message["op"] == "deliver":
                    self.payloads.put(payload_text(message["message"]))
                else:
                    self.answers.put(message)
        except ConnectionClosed:
            pass
        finally:
            self.payloads.put(None)
            self.answers.put(None)

    def answer_to(self, key, value):
        deadline = time.monotonic() + TIMEOUT
        while True:
            answer = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            assert answer is not None, f"the WebSocket closed before answering {key} {value}"
            if answer.get(key) == value:
                return answer

    async def send_and_answer(self, message, key):
        socket = await self.connected()
        await asyncio.to_thread(socket.send, json.dumps(message))
        try:
            return await asyncio.to_thread(self.answer_to, key, message[key])
        except queue.Empty:
            raise AssertionError(f"no WebSocket answer to {message} within {TIMEOUT} s") from None

    @staticmethod
    def refusal(answer):
        return refused(answer.get("op") == "error" and answer.get("error") == "permission_denied",
                       f"WebSocket {json.dumps(answer)}")

    async def publish(self, topic, order):
        payload, region, amount = order
        answer = await self.send_and_answer({"op": "publish", "request": "p1", "topic": topic, "payload": payload,
                                             "properties": {"region": region, "amount": amount},
                                             "mode": "reliable"}, "request")
        if answer["op"] == "confirm":
            return Outcome(ALLOWED, f"WebSocket {json.dumps(answer)}")
        return self.refusal(answer)

    async def open(self, request):
        answer = await self.send_and_answer({"op": "subscribe", "id": "s", "ack": "auto",
                                             **subscription_body(request)}, "id")
        if answer != {"op": "subscribed", "id": "s"}:
            return self.refusal(answer)
        return thread_reader(self.payloads, f"websocket {self.user} {request}", f"WebSocket {json.dumps(answer)}")

    async def close(self):
        if self.socket is not None:
            await asyncio.to_thread(self.socket.close)
            await asyncio.to_thread(self.thread.join, TIMEOUT)
            assert not self.thread.is_alive(), "the WebSocket reader did not end"


class StompListener(stomp.ConnectionListener):
    """RECEIPTs and ERRORs on `control`, MESSAGE bodies on `messages`
    (None once disconnected). stomp.py calls back on its own thread."""

    def __init__(self):
        self.control = queue.Queue()
        self.messages = queue.Queue()

    def on_receipt(self, frame):
        self.control.put(("RECEIPT", frame.headers.get("receipt-id"), ""))

    def on_error(self, frame):
        self.control.put(("ERROR", frame.headers.get("message"), frame.body))

    def on_message(self, frame):
        self.messages.put(frame.body)

    def on_disconnected(self):
        self.messages.put(None)


class StompDoor:
    """stomp.py 1.2, signed in with `login` and `passcode`; each frame asks
    for a receipt, so that a refusal (an ERROR frame) answers it."""

    def __init__(self, broker, user):
        self.broker = broker
        self.user = user
        self.connection = None
        self.listener = StompListener()

    async def connected(self):
        if self.connection is None:
            connection = stomp.Connection12([(self.broker.stomp_host, self.broker.stomp_port)], heartbeats=(0, 0))
            connection.set_listener("matrix", self.listener)
            await asyncio.to_thread(connection.connect, login=self.user, passcode=PASSWORDS[self.user], wait=True)
            self.connection = connection
        return self.connection

    async def answer(self, receipt):
        try:
            kind, name, body = await asyncio.to_thread(self.listener.control.get, True, TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no RECEIPT nor ERROR for {receipt} within {TIMEOUT} s") from None
        if kind == "RECEIPT":
            assert name == receipt, name
            return Outcome(ALLOWED, f"RECEIPT {name}")
        return refused("permission_denied" in body, f"ERROR {name}: {body}")

    async def publish(self, topic, order):
        payload, region, amount = order
        connection = await self.connected()
        await asyncio.to_thread(connection.send, f"/topic/{topic}", payload,
                                headers={"receipt": "p1", "region": region, "amount": str(amount)})
        return await self.answer("p1")

    async def open(self, request):
        connection = await self.connected()
        # A /queue/NAME is the topic NAME read by the queue group NAME.
        destination = f"/queue/{request.topic}" if request.queue else f"/topic/{request.topic}"
        headers = {"receipt": "s1"}
        if request.sql is not None:
            headers["selector"] = request.sql
        if request.durable is not None:
            headers["activemq.subscriptionName"] = request.durable
            headers["sift-stream"] = request.stream
        await asyncio.to_thread(connection.subscribe, destination, "s", headers=headers)
        outcome = await self.answer("s1")
        if outcome.decision != ALLOWED:
            return outcome
        return thread_reader(self.listener.messages, f"stomp {self.user} {destination} {headers}", outcome.answer)

    async def close(self):
        if self.connection is not None:
            await asyncio.to_thread(self.connection.disconnect)


def mqtt_filter(topic):
    """`orders.>` as `orders/+` (MQTT's `orders/#` would also take the topic
    `orders`, which the grant does not cover), `orders.new` as `orders/new`."""
    return topic.replace(".", "/").replace(">", "+")


class MqttDoor:
    """paho-mqtt, MQTT 5, signed in with user name and password."""

    def __init__(self, broker, user):
        self.broker = broker
        self.user = user
        self.client = None
        self.pubacks = queue.Queue()

    async def connected(self):
        if self.client is None:
            client = Mqtt(self.broker, f"matrix-{self.user}")
            client.paho.username_pw_set(self.user, PASSWORDS[self.user])
            client.paho.on_publish = lambda _c, _u, mid, reason, _p: self.pubacks.put((mid, reason.value))
            self.client = client
            await asyncio.to_thread(client.connect)
        return self.client

    async def publish(self, topic, order):
        payload, region, amount = order
        client = await self.connected()
        published = mqtt_properties(PacketTypes.PUBLISH, user=[("region", region), ("amount", str(amount))])
        info = client.paho.publish(mqtt_filter(topic), payload.encode(), qos=1, properties=published)
        try:
            mid, reason = await asyncio.to_thread(self.pubacks.get, True, TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no PUBACK within {TIMEOUT} s") from None
        assert mid == info.mid
        if reason < 0x80:
            return Outcome(ALLOWED, f"PUBACK 0x{reason:02x}")
        return refused(reason == 0x87, f"PUBACK 0x{reason:02x}")

    async def open(self, request):
        client = await self.connected()
        topic_filter = mqtt_filter(request.topic)
        if request.queue is not None:
            topic_filter = f"$share/{request.queue}/{topic_filter}"
        subscribed = None
        if request.sql is not None:
            subscribed = mqtt_properties(PacketTypes.SUBSCRIBE, user=[("sift-sql", request.sql)])
        code = await asyncio.to_thread(client.subscribe, topic_filter, 1, subscribed)
        if code >= 0x80:
            return refused(code == 0x87, f"SUBACK 0x{code:02x} {client.suback_properties}")

        def take():
            return [message.payload.decode() for message in client.until_sentinel()]

        return Reader(lambda: asyncio.to_thread(take), f"mqtt {self.user} {topic_filter}", f"SUBACK 0x{code:02x}")

    async def close(self):
        if self.client is not None:
            await asyncio.to_thread(self.client.close)


DOOR_CLASSES = {"native": NativeDoor, "http": HttpDoor, "sse": SseDoor, "websocket": WebSocketDoor,
                "stomp": StompDoor, "mqtt": MqttDoor}


# The actions: each runs one cell through a door and says what happened.


async def read_through(door, request, writer, publish=True):
    """Opens `request`, has the writer publish the batch on orders.new
    (unless it is stored already: a replay reads it from the stream), and
    collects until the sentinel."""
    opened = await door.open(request)
    if isinstance(opened, Outcome):
        return opened
    if publish:
        await writer.publish_batch("orders.new")
    return Outcome(ALLOWED, opened.answer, await opened.until_sentinel())


async def run_cell(door_name, action, user, door, writer):
    name = f"matrix-{door_name}-{user}"
    if action == "publish":
        # The observer sees the probe before the writer's sentinel if, and
        # only if, the publish was let through.
        observer = await writer.client.subscribe("orders.>")
        outcome = await door.publish("orders.new", PROBE)
        await writer.publish_order("orders.new", SENTINEL_ORDER)
        seen = [payload.decode() for payload in await until_sentinel(observer, SENTINEL.encode())]
        await observer.unsubscribe()
        return dataclasses.replace(outcome, received=seen)
    if action == "subscribe":
        return await read_through(door, Request("orders.>"), writer)
    if action == "subscribe_filtered":
        return await read_through(door, Request("orders.new", sql=OWN_FILTER), writer)
    if action == "durable":
        return await read_through(door, Request("orders.>", durable=name, stream="orders"), writer)
    if action == "queue_group":
        return await read_through(door, Request("orders.>", queue=name), writer)
    if action == "replay":
        first = await writer.publish_batch("orders.new")
        return await read_through(door, Request("orders.>", stream="orders", start=f"seq:{first}"), writer,
                                  publish=False)
    if action == "query":
        # A topic of the cell's own, so that the query sees this batch only.
        topic = f"orders.query_{door_name}_{user}"
        await writer.publish_batch(topic)
        outcome = await door.query(topic)
        if outcome.received is not None:
            assert SENTINEL in outcome.received, outcome
            index = outcome.received.index(SENTINEL)
            assert outcome.received[index + 1:] == [], f"after the sentinel: {outcome.received}"
            outcome = dataclasses.replace(outcome, received=outcome.received[:index])
        return outcome
    if action == "admin":
        return await door.admin()
    raise AssertionError(f"unknown action {action}")


def cells():
    for door in DOORS:
        for action in ACTIONS:
            for user in USERS:
                reason = CANNOT.get((door, action))
                marks = [pytest.mark.skip(reason=f"{door} cannot express {action}: {reason}")] if reason else []
                yield pytest.param(door, action, user, id=f"{door}-{action}-{user}", marks=marks)


@pytest.mark.parametrize("door_name, action, user", list(cells()))
async def test_permission_matrix(broker, door_name, action, user):
    expected = DECISIONS[action][user]
    writer = Writer(await native_client(broker, "writer", "matrix-writer"))
    door = DOOR_CLASSES[door_name](broker, user)
    try:
        outcome = await run_cell(door_name, action, user, door, writer)
    finally:
        try:
            await door.close()
        finally:
            await writer.client.close()
    assert outcome.decision == expected, (
        f"{door_name} door, user {user}, action {action}: expected {expected}, got {outcome.decision}: "
        f"{outcome.answer}")
    if action == "publish":
        assert outcome.received == (["probe"] if expected == ALLOWED else []), (
            f"{door_name} door, user {user}, publish ({outcome.answer}): the observer received {outcome.received}")
    elif expected == ALLOWED:
        assert outcome.received == expected_content(action, user), (
            f"{door_name} door, user {user}, action {action}: received {outcome.received}, "
            f"expected exactly {expected_content(action, user)}")


# An HTTP subscription belongs to the user who made it: its event stream
# must not be readable by another user, nor without credentials, or the
# restriction of eu_reader and the whole grant of outsider are void.


@pytest.mark.parametrize("intruder", [None, "outsider", "eu_reader"], ids=["anonymous", "outsider", "eu_reader"])
async def test_sse_events_of_a_subscription_are_its_owners_only(broker, intruder):
    status, raw = await asyncio.to_thread(http_call, broker, "POST", "/v1/subscriptions", "writer",
                                          {"topic": "orders.>"})
    assert status == 201, raw
    subscription = json.loads(raw)["id"]
    writer = Writer(await native_client(broker, "writer", "matrix-writer"))
    received = None
    try:
        status, stream = await asyncio.to_thread(open_events, broker, subscription, intruder)
        if status == 200:
            # Attached: show what the intruder gets before the sentinel.
            await writer.publish_batch("orders.new")
            try:
                received = await asyncio.to_thread(take_until_sentinel, stream.payloads, "intruder's event stream")
            except AssertionError as error:
                received = str(error)
    finally:
        delete_status, delete_raw = await asyncio.to_thread(http_call, broker, "DELETE",
                                                            f"/v1/subscriptions/{subscription}", "writer")
        await writer.client.close()
        if status == 200:
            await asyncio.to_thread(stream.thread.join, TIMEOUT)
    assert delete_status == 204, delete_raw
    refusals = (401,) if intruder is None else (403, 404)
    who = intruder or "a client without credentials"
    assert status in refusals, (
        f"sse door: {who} attached to writer's subscription {subscription} (GET .../events answered {status}) "
        f"and received {received}")
