"""Every door names a delivery by the topic it was published on, not by the
pattern it was subscribed with.

A subscriber to `quotes.>` (or `/topic/quotes.>` over STOMP, `quotes/#`
over MQTT) must be able to tell a message on `quotes.nyse` from one on
`quotes.lse`. One broker; one wildcard subscriber on each door (native,
STOMP, MQTT, HTTP event stream, WebSocket, HTTP callback); two messages on
two concrete topics; each door must report both concrete topics, in the
form of its protocol.
"""

import asyncio
import json
import queue
import threading
import urllib.request

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from websockets.sync.client import connect as websocket_connect

from http_support import CallbackReceiver
from sdk_support import TIMEOUT, collect, connect, http_json
from stomp_support import stomp_client, take

TOPICS = ["quotes.nyse", "quotes.lse"]


def event_stream_topics(url, count, ready):
    """Reads `count` deliveries from a server-sent event stream and returns
    their topics; sets `ready` once the stream is open."""
    topics = []
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        ready.set()
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                topics.append(json.loads(line[len("data:"):])["topic"])
                if len(topics) == count:
                    return topics
    return topics


def mqtt_subscriber(broker, topic_filter):
    """A paho MQTT 5 client subscribed to `topic_filter` (SUBACK received)
    and the queue its messages arrive on."""
    messages, acks = queue.Queue(), queue.Queue()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="wildcards", protocol=mqtt.MQTTv5)
    client.on_connect = lambda *_: acks.put("connected")
    client.on_subscribe = lambda *_: acks.put("subscribed")
    client.on_message = lambda _client, _user, message: messages.put(message)
    client.connect(broker.mqtt_host, broker.mqtt_port)
    client.loop_start()
    assert acks.get(timeout=TIMEOUT) == "connected"
    client.subscribe(topic_filter, qos=1)
    assert acks.get(timeout=TIMEOUT) == "subscribed"
    return client, messages


def websocket_subscriber(broker):
    """A WebSocket session subscribed to `quotes.>` (answer received)."""
    socket = websocket_connect(broker.http_url.replace("http://", "ws://") + "/v1/ws", open_timeout=TIMEOUT)
    socket.send(json.dumps({"op": "subscribe", "id": "w", "topic": "quotes.>", "ack": "auto"}))
    assert json.loads(socket.recv(timeout=TIMEOUT)) == {"op": "subscribed", "id": "w"}
    return socket


async def test_wildcard_subscribers_on_every_door_see_each_messages_own_topic(broker):
    native = await connect(broker)
    stomp_connection, stomp_seen = stomp_client(broker)
    mqtt_client, mqtt_seen = mqtt_subscriber(broker, "quotes/#")
    socket = websocket_subscriber(broker)
    callbacks = CallbackReceiver()
    try:
        native_subscription = await native.subscribe("quotes.>")
        stomp_connection.subscribe(destination="/topic/quotes.>", id="q", ack="auto", headers={"receipt": "s"})
        assert await take(stomp_seen.receipts) == "s"
        status, created = http_json("POST", f"{broker.http_url}/v1/subscriptions", {"topic": "quotes.>"})
        assert status == 201, created
        status, hooked = http_json("POST", f"{broker.http_url}/v1/subscriptions",
                                   {"topic": "quotes.>", "callback": callbacks.url})
        assert status == 201, hooked
        stream_open = threading.Event()
        events = asyncio.ensure_future(asyncio.to_thread(
            event_stream_topics, f"{broker.http_url}/v1/subscriptions/{created['id']}/events", 2, stream_open))
        assert await asyncio.to_thread(stream_open.wait, TIMEOUT)
        for topic in TOPICS:
            confirm = await native.publish(topic, f"tick on {topic}".encode())
            assert confirm.matched == 6, f"{topic}: {confirm}"

        assert [delivery.topic for delivery in await collect(native_subscription, 2)] == TOPICS
        stomp_frames = [await take(stomp_seen.messages) for _ in TOPICS]
        assert [frame.headers["destination"] for frame in stomp_frames] == ["/topic/quotes.nyse", "/topic/quotes.lse"]
        mqtt_messages = [await take(mqtt_seen) for _ in TOPICS]
        assert [message.topic for message in mqtt_messages] == ["quotes/nyse", "quotes/lse"]
        assert await asyncio.wait_for(events, TIMEOUT) == TOPICS
        delivered = [json.loads(socket.recv(timeout=TIMEOUT)) for _ in TOPICS]
        assert [message["message"]["topic"] for message in delivered] == TOPICS
        posted = [await take(callbacks.received) for _ in TOPICS]
        assert [message["topic"] for message in posted] == TOPICS
    finally:
        callbacks.stop()
        socket.close()
        mqtt_client.loop_stop()
        mqtt_client.disconnect()
        stomp_connection.disconnect()
        await native.close()


async def test_a_queue_subscriber_over_stomp_sees_the_concrete_queue_name(broker):
    native = await connect(broker)
    connection, seen = stomp_client(broker)
    try:
        connection.subscribe(destination="/queue/jobs.>", id="j", ack="auto", headers={"receipt": "s"})
        assert await take(seen.receipts) == "s"
        await native.publish("jobs.print", b"job")
        frame = await take(seen.messages)
        assert frame.headers["destination"] == "/queue/jobs.print"
    finally:
        connection.disconnect()
        await native.close()
