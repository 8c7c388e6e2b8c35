"""What the standard protocols keep across a broker killed with SIGKILL and
started again on the same data: MQTT retained messages and persistent
sessions (with `mqtt.session_stream`, the QoS 1 messages stored for an
absent session too), and STOMP durable subscriptions (ActiveMQ's
`activemq.subscriptionName`) on persistent messages.

Clients are real third-party ones, paho-mqtt 2 and stomp.py 9; they call
back on their own threads and the tests wait on queues fed from there.
"""

import queue
import random
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from conftest import alice_and_bob_users, start_broker, users_file_of
from sdk_support import TIMEOUT
from stomp_support import stomp_client

SESSION_STREAM_CONFIG = """
[mqtt]
session_stream = "mqtt-sessions"

[[streams]]
name = "mqtt-sessions"
topics = ["jobs.>"]
"""


def restarted(broker, extra_args=()):
    """Kills `broker` (SIGKILL) and starts it again on the same ports and data."""
    broker.stop()
    return start_broker(extra_args=extra_args, listen=broker.native, data_dir=broker.data_dir,
                        stomp=f"{broker.stomp_host}:{broker.stomp_port}",
                        mqtt=f"{broker.mqtt_host}:{broker.mqtt_port}")


class Paho:
    """A paho MQTT 3.1.1 client whose messages land on a queue."""

    def __init__(self, broker, client_id, clean_session=True, credentials=None):
        self.messages = queue.Queue()
        self.connected = queue.Queue()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean_session,
                                  protocol=mqtt.MQTTv311, reconnect_on_failure=False)
        if credentials is not None:
            self.client.username_pw_set(*credentials)
        self.client.on_message = lambda _client, _userdata, message: self.messages.put(message)
        self.client.on_connect = lambda _c, _u, flags, reason, _p: self.connected.put((flags, reason))
        self.client.connect(broker.mqtt_host, broker.mqtt_port)
        self.client.loop_start()
        self.flags, reason = self.connected.get(timeout=TIMEOUT)
        assert not reason.is_failure, reason

    def subscribe(self, topic, qos=1):
        subscribed = queue.Queue()
        self.client.on_subscribe = lambda *_args: subscribed.put(True)
        self.client.subscribe(topic, qos)
        subscribed.get(timeout=TIMEOUT)

    def publish(self, topic, payload, qos=1, retain=False):
        self.client.publish(topic, payload, qos=qos, retain=retain).wait_for_publish(timeout=TIMEOUT)

    def payloads(self, count):
        return [self.messages.get(timeout=TIMEOUT).payload for _ in range(count)]

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def test_retained_messages_survive_a_kill(broker):
    publisher = Paho(broker, "retainer")
    publisher.publish("state/door", b"open", retain=True)
    publisher.publish("state/light", b"on", retain=True)
    publisher.publish("state/light", b"", retain=True)  # removes it
    publisher.close()
    broker = restarted(broker)
    try:
        reader = Paho(broker, "reader")
        reader.subscribe("state/#")
        message = reader.messages.get(timeout=TIMEOUT)
        assert (message.topic, message.payload, message.retain) == ("state/door", b"open", True)
        # Nothing else was kept: a sentinel published now is next.
        reader.publish("state/sentinel", b"sentinel")
        assert reader.messages.get(timeout=TIMEOUT).payload == b"sentinel"
        reader.close()
    finally:
        broker.stop()


def test_a_persistent_session_and_its_stored_messages_survive_a_kill(tmp_path):
    config = tmp_path / "sift.toml"
    config.write_text(SESSION_STREAM_CONFIG)
    broker = start_broker(extra_args=["--config", str(config)])
    try:
        worker = Paho(broker, "worker-1", clean_session=False)
        worker.subscribe("jobs/#", qos=1)
        worker.close()
        # Persistent (MQTT 5 user property `sift-mode`): PUBACK follows the
        # store's write, so a kill right after it loses nothing. A plain
        # QoS 1 publish is stored too, but after its PUBACK.
        publisher = PersistentPublisher(broker, "boss")
        for number in range(3):
            publisher.publish(f"jobs/{number}", f"before-{number}".encode())
        publisher.close()
        broker = restarted(broker, ["--config", str(config)])
        publisher = PersistentPublisher(broker, "boss")
        publisher.publish("jobs/3", b"after-3")
        publisher.close()
        # The session comes back with its subscription, without subscribing
        # again, and gets what was stored for it, in order.
        worker = Paho(broker, "worker-1", clean_session=False)
        assert worker.flags.session_present
        assert worker.payloads(4) == [b"before-0", b"before-1", b"before-2", b"after-3"]
        worker.close()
        # After another kill the session is there again. Acknowledged
        # messages may come again (at least once: the store syncs durable
        # positions every `storage.position_sync_ms`), nothing else does.
        broker = restarted(broker, ["--config", str(config)])
        worker = Paho(broker, "worker-1", clean_session=False)
        worker.publish("jobs/sentinel", b"sentinel")
        again = []
        while (payload := worker.payloads(1)[0]) != b"sentinel":
            again.append(payload)
        assert set(again) <= {b"before-0", b"before-1", b"before-2", b"after-3"}, again
        worker.close()
    finally:
        broker.stop()


class PersistentPublisher:
    """A paho MQTT 5 client whose QoS 1 publishes ask for `sift-mode: persistent`."""

    def __init__(self, broker, client_id, credentials=None):
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5,
                                  reconnect_on_failure=False)
        if credentials is not None:
            self.client.username_pw_set(*credentials)
        connected = queue.Queue()
        self.client.on_connect = lambda *_args: connected.put(True)
        self.client.connect(broker.mqtt_host, broker.mqtt_port, clean_start=True)
        self.client.loop_start()
        connected.get(timeout=TIMEOUT)
        self.properties = Properties(PacketTypes.PUBLISH)
        self.properties.UserProperty = [("sift-mode", "persistent")]

    def publish(self, topic, payload, **user_properties):
        properties = self.properties
        if user_properties:
            properties = Properties(PacketTypes.PUBLISH)
            properties.UserProperty = self.properties.UserProperty + list(user_properties.items())
        self.client.publish(topic, payload, qos=1, properties=properties).wait_for_publish(timeout=TIMEOUT)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def test_a_persistent_session_comes_back_as_its_user_with_its_restriction():
    """On a broker with users, a session restored after a kill signs in
    again as the user it belonged to: bob's content restriction still
    holds, bob resumes it, and alice, with the same client id, does not."""
    with users_file_of(alice_and_bob_users()) as users_path:
        arguments = ["--users", users_path]
        broker = start_broker(extra_args=arguments)
        try:
            bob = Paho(broker, "bob-phone", clean_session=False, credentials=("bob", "builder"))
            bob.subscribe("orders/+", qos=1)
            bob.close()
            broker = restarted(broker, arguments)
            alice = PersistentPublisher(broker, "alice", credentials=("alice", "wonderland"))
            for region in ("US", "EU", "US"):
                alice.publish("orders/new", f"order from {region}".encode(), region=region)
            alice.publish("orders/sentinel", b"sentinel", region="EU")
            alice.close()
            bob = Paho(broker, "bob-phone", clean_session=False, credentials=("bob", "builder"))
            assert bob.flags.session_present, "restored as bob's, bob resumes it"
            assert bob.payloads(2) == [b"order from EU", b"sentinel"], "bob's restriction still holds"
            bob.close()
            intruder = Paho(broker, "bob-phone", clean_session=False, credentials=("alice", "wonderland"))
            assert not intruder.flags.session_present, "another user gets a fresh session"
            intruder.close()
        finally:
            broker.stop()


def durable_subscribe(connection, collector, receipt="subscribed"):
    connection.subscribe("/topic/orders.new", id="1", ack="client-individual", receipt=receipt,
                         headers={"activemq.subscriptionName": "audit"})
    assert collector.receipts.get(timeout=TIMEOUT) == receipt


def send_persistent(connection, collector, body):
    connection.send("/topic/orders.new", body, headers={"persistent": "true"}, receipt=f"sent-{body}")
    assert collector.receipts.get(timeout=TIMEOUT) == f"sent-{body}"


def test_a_stomp_queue_keeps_its_messages_through_a_kill(broker):
    """What is sent to a /queue/ with no consumer waits for one, across a
    SIGKILL and a restart. A persistent SEND's receipt follows its store's
    write, so the kill right after it loses nothing."""
    connection, collector = stomp_client(broker)
    for body in ("kept-1", "kept-2"):
        connection.send(destination="/queue/jobs.kept", body=body, headers={"persistent": "true", "receipt": body})
        assert collector.receipts.get(timeout=TIMEOUT) == body
    connection.disconnect()
    broker = restarted(broker)
    try:
        connection, collector = stomp_client(broker)
        connection.subscribe(destination="/queue/jobs.kept", id="q", ack="client-individual")
        for body in ("kept-1", "kept-2"):
            frame = collector.messages.get(timeout=TIMEOUT)
            assert frame.body == body
            connection.ack(frame.headers["ack"])
        connection.disconnect()
    finally:
        broker.stop()


BOUNDED_QUEUE_CONFIG = """
[storage]
queue_max_msgs = 2
"""


def send_to_bounded_queue(broker, body):
    """Sends `body` persistently to /queue/jobs.bounded on a connection of its
    own; the receipt, or the ERROR that refused it."""
    connection, collector = stomp_client(broker)
    try:
        connection.send(destination="/queue/jobs.bounded", body=body, headers={"persistent": "true", "receipt": body})
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if not collector.errors.empty():
                return collector.errors.get()
            try:
                return collector.receipts.get(timeout=0.05)
            except queue.Empty:
                continue
        raise AssertionError(f"neither a receipt nor an ERROR came for {body}")
    finally:
        connection.disconnect()


def test_a_full_queue_refuses_sends_and_counts_again_after_a_kill(tmp_path):
    """A queue holds at most storage.queue_max_msgs waiting messages: a send
    past it is refused (queue_full) and not stored. A restarted broker counts
    what waits again; a message taken frees a place."""
    config = tmp_path / "sift.toml"
    config.write_text(BOUNDED_QUEUE_CONFIG)
    broker = start_broker(extra_args=["--config", str(config)])
    try:
        assert send_to_bounded_queue(broker, "job-1") == "job-1"
        assert send_to_bounded_queue(broker, "job-2") == "job-2"
        refused = send_to_bounded_queue(broker, "job-3")
        assert "queue_full" in refused.body and "jobs.bounded" in refused.body, refused.body
        broker = restarted(broker, ["--config", str(config)])
        refused = send_to_bounded_queue(broker, "job-4")
        assert "queue_full" in refused.body, "counted again after the restart: " + refused.body
        connection, collector = stomp_client(broker)
        connection.subscribe(destination="/queue/jobs.bounded", id="q", ack="client-individual")
        frame = collector.messages.get(timeout=TIMEOUT)
        assert frame.body == "job-1"
        connection.ack(frame.headers["ack"], receipt="taken")
        assert collector.receipts.get(timeout=TIMEOUT) == "taken"
        connection.disconnect()
        assert send_to_bounded_queue(broker, "job-5") == "job-5", "a message taken frees a place"
    finally:
        broker.stop()


def test_a_stomp_durable_subscription_survives_a_kill_and_ends_when_unsubscribed_by_name(broker):
    subscriber, collector = stomp_client(broker, client_id="auditor")
    durable_subscribe(subscriber, collector)
    subscriber.disconnect()
    sender, sent = stomp_client(broker, client_id="shop")
    for number in range(2):
        send_persistent(sender, sent, f"order-{number}")
    sender.disconnect()
    broker = restarted(broker)
    try:
        subscriber, collector = stomp_client(broker, client_id="auditor")
        durable_subscribe(subscriber, collector)
        for number in range(2):
            frame = collector.messages.get(timeout=TIMEOUT)
            assert frame.body == f"order-{number}"
            subscriber.ack(frame.headers["ack"])
        # UNSUBSCRIBE naming the durable ends it: subscribing again starts a
        # new one, which gets only what is sent after it.
        subscriber.unsubscribe(id="1", receipt="gone", headers={"activemq.subscriptionName": "audit"})
        assert collector.receipts.get(timeout=TIMEOUT) == "gone"
        sender, sent = stomp_client(broker, client_id="shop")
        send_persistent(sender, sent, "while-unsubscribed")
        durable_subscribe(subscriber, collector, receipt="again")
        send_persistent(sender, sent, "sentinel")
        assert collector.messages.get(timeout=TIMEOUT).body == "sentinel"
        sender.disconnect()
        subscriber.disconnect()
    finally:
        broker.stop()


def test_acknowledged_retained_messages_survive_kills_at_any_moment():
    """SIGKILL lands while QoS 1 retained publishes are in flight (after a
    random number of PUBACKs, three times over): after each restart every
    topic's retained message is the last one acknowledged or a later one
    sent, never an older or a torn one."""
    rng = random.Random(13)
    broker = start_broker()
    acked, sent = {}, {}
    try:
        for run in range(3):
            kill_after = rng.randint(20, 400)
            first = run * 100_000
            publisher = AsyncPublisher(broker, f"retain-crash-{run}", kill_after, first)
            for number in range(first, first + 2_000):
                topic = f"crash/{number % 10}"
                publisher.publish(topic, number)
                sent[topic] = number
            assert publisher.enough.wait(TIMEOUT), "the broker acknowledged publishes"
            broker = restarted(broker)
            publisher.close()
            for topic, number in publisher.acked.items():
                acked[topic] = max(acked.get(topic, -1), number)
            reader = Paho(broker, f"retain-reader-{run}")
            reader.subscribe("crash/#")
            kept = {}
            for _ in range(len(acked)):
                message = reader.messages.get(timeout=TIMEOUT)
                kept[message.topic] = int(message.payload)
            reader.close()
            for topic, number in acked.items():
                assert number <= kept[topic] <= sent[topic], (topic, number, kept[topic], sent[topic])
                assert kept[topic] % 10 == int(topic.rsplit("/", 1)[1]), (topic, kept[topic])
    finally:
        broker.stop()


class AsyncPublisher:
    """A paho client with many retained QoS 1 publishes in flight, which
    notes each acknowledged one and sets `enough` after `kill_after`.

    Publish `number` goes to topic `crash/<number % 10>`, and numbers are
    published in order from `first`, so a message id (paho numbers them
    from 1 per client) names its number: no table shared with paho's
    network thread, whose callbacks may run while `publish` holds paho's
    own lock."""

    def __init__(self, broker, client_id, kill_after, first):
        self.first, self.acked = first, {}
        self.count, self.kill_after = 0, kill_after
        self.enough = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311,
                                  reconnect_on_failure=False)
        self.client.max_inflight_messages_set(64)
        self.client.max_queued_messages_set(0)
        self.client.on_publish = self.on_publish
        connected = queue.Queue()
        self.client.on_connect = lambda *_args: connected.put(True)
        self.client.connect(broker.mqtt_host, broker.mqtt_port)
        self.client.loop_start()
        connected.get(timeout=TIMEOUT)

    def publish(self, topic, number):
        self.client.publish(topic, str(number).encode(), qos=1, retain=True)

    def on_publish(self, _client, _userdata, mid, _reason, _properties):
        number = self.first + mid - 1
        topic = f"crash/{number % 10}"
        self.acked[topic] = max(self.acked.get(topic, -1), number)
        self.count += 1
        if self.count >= self.kill_after:
            self.enough.set()

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()
