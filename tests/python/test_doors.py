"""Every session knows its door, and every door's counters reach the reports.

One broker; a native client, a STOMP client (stomp.py), an MQTT client
(paho) and an HTTP subscription each hold a subscription. The broker's
`subscriptions` report must name each connection's door and, for the
protocol clients, their own address as its peer; the `stats` report must
carry each front-end's counters under `doors`, and `/metrics` must export
them with the door in the name, and connections counted by door.
"""

import queue
import urllib.request

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from sdk_support import TIMEOUT, connect, eventually, http_json
from stomp_support import stomp_client, take


def mqtt_subscriber(broker):
    """A paho client subscribed to `doors/#`, with its local address."""
    acks = queue.Queue()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="door-check", protocol=mqtt.MQTTv5)
    client.on_connect = lambda *_: acks.put("connected")
    client.on_subscribe = lambda *_: acks.put("subscribed")
    client.connect(broker.mqtt_host, broker.mqtt_port)
    client.loop_start()
    assert acks.get(timeout=TIMEOUT) == "connected"
    client.subscribe("doors/#", qos=1)
    assert acks.get(timeout=TIMEOUT) == "subscribed"
    return client


def connections_by_door(broker):
    """The `subscriptions` report's connections that hold a subscription, by door."""
    _, report = http_json("GET", f"{broker.http_url}/v1/admin/subscriptions")
    by_door = {}
    for connection in report["connections"]:
        if connection["subscriptions"]:
            by_door.setdefault(connection["door"], []).append(connection)
    return by_door


async def test_reports_name_each_sessions_door_and_peer_and_every_doors_counters(broker):
    native = await connect(broker)
    stomp_connection, stomp_seen = stomp_client(broker)
    mqtt_client = mqtt_subscriber(broker)
    try:
        await native.subscribe("doors.>")
        stomp_connection.subscribe(destination="/topic/doors.>", id="d", ack="auto", headers={"receipt": "s"})
        assert await take(stomp_seen.receipts) == "s"
        status, created = http_json("POST", f"{broker.http_url}/v1/subscriptions", {"topic": "doors.>"})
        assert status == 201, created
        stomp_connection.send(destination="/topic/doors.in", body="from stomp")
        assert (await take(stomp_seen.messages)).body == "from stomp"

        await eventually(lambda: len(connections_by_door(broker)) == 4, what="a subscribed session on every door")
        by_door = connections_by_door(broker)
        assert sorted(by_door) == ["http", "mqtt", "native", "stomp"]
        stomp_host, stomp_port = stomp_connection.transport.socket.getsockname()[:2]
        assert [connection["peer"] for connection in by_door["stomp"]] == [f"{stomp_host}:{stomp_port}"]
        mqtt_host, mqtt_port = mqtt_client.socket().getsockname()[:2]
        assert [connection["peer"] for connection in by_door["mqtt"]] == [f"{mqtt_host}:{mqtt_port}"]
        assert by_door["native"][0]["peer"].startswith("127.0.0.1:")
        assert by_door["http"][0]["peer"] == "in-process"

        _, stats = http_json("GET", f"{broker.http_url}/v1/admin/stats")
        assert stats["doors"]["stomp"]["messages_sent"] == 1
        assert stats["doors"]["stomp"]["connections_accepted"] == 1
        assert stats["doors"]["mqtt"]["connections_accepted"] == 1
        assert stats["doors"]["http"]["subscriptions_created"] == 1

        with urllib.request.urlopen(f"{broker.http_url}/metrics", timeout=TIMEOUT) as response:
            metrics = response.read().decode()
        assert "sift_stomp_messages_sent_total 1" in metrics, metrics
        assert "sift_mqtt_connections_accepted_total 1" in metrics, metrics
        assert "sift_http_subscriptions_created_total 1" in metrics, metrics
        assert 'sift_client_connections{door="stomp"} 1' in metrics, metrics
        assert 'sift_client_connections{door="mqtt"} 1' in metrics, metrics
    finally:
        mqtt_client.loop_stop()
        mqtt_client.disconnect()
        stomp_connection.disconnect()
        await native.close()
