"""The STOMP front-end with a real third-party client (stomp.py 9), against
real brokers: selectors checked against native SQL subscriptions, queue
destinations, acks and redelivery, transactions, receipts, errors, and
messages crossing between STOMP, the native protocol and HTTP.

stomp.py calls its listener on its own thread; the tests wait on a queue
fed from there, never for a fixed time.
"""

import asyncio
import queue
import socket
import time

import stomp

from sdk_support import TIMEOUT, connect, http_json, until_sentinel
from stomp_support import Collector, stomp_client, take


async def bodies_until_sentinel(collector, sentinel="sentinel"):
    seen = []
    while True:
        frame = await take(collector.messages)
        if frame.body == sentinel:
            return seen
        seen.append(frame.body)


SELECTORS = [
    "price > 100",
    "sym = 'IBM' AND price > 100",
    "sym IN ('IBM', 'MSFT') OR lots < 2",
    "sym LIKE 'I%'",
    "NOT (price BETWEEN 50 AND 150)",
    "region IS NULL",
    "lots * price >= 300",
    "sym <> 'IBM'",
]

QUOTES = [
    {"sym": "IBM", "price": "120", "lots": "3"},
    {"sym": "IBM", "price": "90", "lots": "1"},
    {"sym": "MSFT", "price": "300", "lots": "1", "region": "us"},
    {"sym": "INTC", "price": "40", "lots": "10"},
    {"sym": "ACME", "price": "150", "lots": "2", "region": "eu"},
]


async def test_selectors_select_what_the_native_sql_subscription_selects(broker):
    native = await connect(broker)
    connection, collector = stomp_client(broker)
    try:
        for index, selector in enumerate(SELECTORS):
            topic = f"sel.case{index}"
            full = f"({selector}) OR sentinel = 'yes'"
            native_subscription = await native.subscribe(topic, sql=full)
            receipt = f"sub-{index}"
            connection.subscribe(destination=f"/topic/{topic}", id=str(index), ack="auto",
                                 headers={"selector": full, "receipt": receipt})
            assert await take(collector.receipts) == receipt
            for number, quote in enumerate(QUOTES):
                connection.send(destination=f"/topic/{topic}", body=f"q{number}", headers=quote)
            connection.send(destination=f"/topic/{topic}", body="sentinel", headers={"sentinel": "yes"})
            over_stomp = await bodies_until_sentinel(collector)
            over_native = [payload.decode() for payload in await until_sentinel(native_subscription)]
            assert over_stomp == over_native, selector
    finally:
        connection.disconnect()
        await native.close()


class Tagged(stomp.ConnectionListener):
    """Puts (worker, body) of each MESSAGE on a queue shared by several connections."""

    def __init__(self, worker, shared):
        self.worker = worker
        self.shared = shared
        self.receipts = queue.Queue()

    def on_message(self, frame):
        self.shared.put((self.worker, frame.body))

    def on_receipt(self, frame):
        self.receipts.put(frame.headers.get("receipt-id"))


async def test_a_queue_destination_gives_each_message_to_one_consumer(broker):
    arrivals = queue.Queue()
    workers = []
    publisher, _ = stomp_client(broker, "producer")
    try:
        for worker in ("worker-1", "worker-2"):
            connection = stomp.Connection12([(broker.stomp_host, broker.stomp_port)], heartbeats=(0, 0))
            listener = Tagged(worker, arrivals)
            connection.set_listener("tagged", listener)
            connection.connect(login=worker, wait=True)
            connection.subscribe(destination="/queue/jobs", id="jobs", ack="auto", headers={"receipt": worker})
            assert await take(listener.receipts) == worker
            workers.append(connection)
        for number in range(20):
            publisher.send(destination="/queue/jobs", body=f"job-{number}")
        # Sentinels follow until each worker had one: a worker's deliveries
        # keep their order, so then every job it would get has arrived.
        bodies, sentinels_seen = [], set()
        while len(sentinels_seen) < 2:
            publisher.send(destination="/queue/jobs", body="sentinel")
            while True:
                worker, body = await take(arrivals)
                if body == "sentinel":
                    sentinels_seen.add(worker)
                    break
                bodies.append(body)
        assert sorted(bodies) == sorted(f"job-{number}" for number in range(20)), "each job exactly once"
    finally:
        for connection in workers:
            connection.disconnect()
        publisher.disconnect()


async def test_a_queue_keeps_what_is_sent_before_its_first_consumer(broker):
    connection, collector = stomp_client(broker)
    try:
        for number, receipt in ((1, "a"), (2, "b")):
            connection.send(destination="/queue/inbox", body=f"early-{number}", headers={"receipt": receipt})
            assert await take(collector.receipts) == receipt
        connection.subscribe(destination="/queue/inbox", id="q", ack="client-individual")
        for number in (1, 2):
            frame = await take(collector.messages)
            assert frame.body == f"early-{number}"
            connection.ack(frame.headers["ack"])
        connection.send(destination="/queue/inbox", body="sentinel", headers={"receipt": "done"})
        assert await take(collector.receipts) == "done"
        assert (await take(collector.messages)).body == "sentinel", "nothing else was kept"
    finally:
        connection.disconnect()


async def test_a_queue_consumer_with_a_selector_takes_what_passes_and_leaves_the_rest(broker):
    connection, collector = stomp_client(broker)
    try:
        for number, region in enumerate(("eu", "us", "eu")):
            receipt = f"sent-{number}"
            connection.send(destination="/queue/orders.sel", body=f"{region}-{number}",
                            headers={"region": region, "receipt": receipt})
            assert await take(collector.receipts) == receipt
        connection.subscribe(destination="/queue/orders.sel", id="us", ack="client-individual",
                             headers={"selector": "region = 'us'"})
        frame = await take(collector.messages)
        assert (frame.body, frame.headers["subscription"]) == ("us-1", "us"), "sent before it subscribed"
        connection.ack(frame.headers["ack"])
        connection.subscribe(destination="/queue/orders.sel", id="any", ack="client-individual")
        for expected in ("eu-0", "eu-2"):
            frame = await take(collector.messages)
            assert (frame.body, frame.headers["subscription"]) == (expected, "any"), "the rest waited"
            connection.ack(frame.headers["ack"])
        connection.send(destination="/queue/orders.sel", body="sentinel", headers={"region": "eu"})
        frame = await take(collector.messages)
        assert (frame.body, frame.headers["subscription"]) == ("sentinel", "any"), "nothing else was kept"
    finally:
        connection.disconnect()


async def test_a_scheduled_delay_holds_a_message_back_until_its_time(broker):
    connection, collector = stomp_client(broker)
    try:
        for destination in ("/queue/jobs.later", "/topic/news.later"):
            connection.subscribe(destination=destination, id=destination, ack="auto", headers={"receipt": destination})
            assert await take(collector.receipts) == destination
            sent_ms = time.time() * 1000
            connection.send(destination=destination, body="later", headers={"AMQ_SCHEDULED_DELAY": "1000"})
            connection.send(destination=destination, body="now")
            assert (await take(collector.messages)).body == "now", "the message sent after it comes first"
            later = await take(collector.messages)
            received_ms = time.time() * 1000
            assert later.body == "later"
            delivery_ms = int(later.headers["JMSDeliveryTime"])
            assert delivery_ms >= sent_ms + 1000 - 1 and received_ms >= delivery_ms, later.headers
            connection.unsubscribe(id=destination)
    finally:
        connection.disconnect()


async def test_client_individual_acks_and_nacks_redeliver_reliable_messages(broker):
    connection, collector = stomp_client(broker)
    try:
        connection.subscribe(destination="/topic/work", id="w", ack="client-individual", headers={"receipt": "s"})
        assert await take(collector.receipts) == "s"
        connection.send(destination="/topic/work", body="task", headers={"sift-mode": "reliable"})
        first = await take(collector.messages)
        connection.nack(first.headers["ack"])
        again = await take(collector.messages)
        assert again.body == "task" and again.headers.get("redelivered") == "true"
        assert again.headers["message-id"] == first.headers["message-id"], "one JMSMessageID across redeliveries"
        assert again.headers["ack"] != first.headers["ack"], "each delivery is acknowledged on its own"
        connection.ack(again.headers["ack"])
        connection.send(destination="/topic/work", body="sentinel", headers={"receipt": "done"})
        assert await take(collector.receipts) == "done"
        assert (await take(collector.messages)).body == "sentinel", "nothing redelivered after the ack"
    finally:
        connection.disconnect()


async def test_stomp_1_1_clients_acknowledge_by_the_stable_message_id(broker):
    connection = stomp.Connection11([(broker.stomp_host, broker.stomp_port)], heartbeats=(0, 0))
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect(login="pytest-stomp-11", wait=True)
    try:
        connection.subscribe(destination="/queue/work11", id="w", ack="client-individual",
                             headers={"receipt": "s"})
        assert await take(collector.receipts) == "s"
        connection.send(destination="/queue/work11", body="task", headers={"sift-mode": "reliable"})
        first = await take(collector.messages)
        assert first.headers["message-id"].startswith("ID:")
        connection.nack(first.headers["message-id"], "w")
        again = await take(collector.messages)
        assert (again.body, again.headers["message-id"]) == ("task", first.headers["message-id"])
        connection.ack(again.headers["message-id"], "w")
        connection.send(destination="/queue/work11", body="sentinel", headers={"receipt": "done"})
        assert await take(collector.receipts) == "done"
        assert (await take(collector.messages)).body == "sentinel", "nothing redelivered after the ack"
    finally:
        connection.disconnect()


async def test_jms_selectors_see_jms_header_fields_and_refuse_ordering_on_booleans(broker):
    connection, collector = stomp_client(broker)
    try:
        # `phone` is typed an integer (so `price > 100` compares numbers) and keeps its text for LIKE.
        selectors = {
            "t": "JMSType = 'order' AND JMSCorrelationID = '12993'",
            "c": "JMSCorrelationID LIKE '12%3'",
            "p": "phone LIKE '12%3' AND price > 100",
        }
        for sub_id, selector in selectors.items():
            connection.subscribe(destination="/topic/jms", id=sub_id, headers={"selector": selector, "receipt": sub_id})
            assert await take(collector.receipts) == sub_id
        matching = {"type": "order", "correlation-id": "12993", "phone": "12993", "price": "120"}
        connection.send(destination="/topic/jms", body="other",
                        headers={"type": "quote", "correlation-id": "1", "phone": "1234", "price": "120"})
        connection.send(destination="/topic/jms", body="match", headers=matching)
        connection.send(destination="/topic/jms", body="sentinel", headers=matching)
        received = {}
        while sum(1 for bodies in received.values() if bodies[-1] == "sentinel") < len(selectors):
            frame = await take(collector.messages)
            received.setdefault(frame.headers["subscription"], []).append(frame.body)
            assert frame.headers["type"] == "order" and frame.headers["correlation-id"] == "12993"
        assert received == {sub_id: ["match", "sentinel"] for sub_id in selectors}
        connection.subscribe(destination="/topic/jms", id="bad", headers={"selector": "TRUE > 0"})
        error = await take(collector.errors)
        assert "a boolean compares only for equality" in error.body, error.body
    finally:
        connection.disconnect()


async def test_transactions_hold_sends_until_commit_and_abort_drops_them(broker):
    connection, collector = stomp_client(broker)
    try:
        connection.subscribe(destination="/topic/tx", id="t", ack="auto", headers={"receipt": "s"})
        assert await take(collector.receipts) == "s"
        connection.begin("one")
        connection.send(destination="/topic/tx", body="held", transaction="one")
        connection.begin("two")
        connection.send(destination="/topic/tx", body="dropped", transaction="two")
        connection.abort("two")
        connection.send(destination="/topic/tx", body="outside")
        connection.commit("one")
        connection.send(destination="/topic/tx", body="sentinel")
        assert await bodies_until_sentinel(collector) == ["outside", "held"]
    finally:
        connection.disconnect()


async def test_bad_frames_get_an_error_frame_and_close_only_their_connection(broker):
    bystander, bystander_seen = stomp_client(broker, "bystander")
    try:
        bystander.subscribe(destination="/topic/calm", id="c", ack="auto", headers={"receipt": "s"})
        assert await take(bystander_seen.receipts) == "s"
        bad, bad_seen = stomp_client(broker, "careless")
        bad.subscribe(destination="/topic/x", id="x", ack="auto", headers={"selector": "price >"})
        error = await take(bad_seen.errors)
        assert error.headers["message"] == "bad SUBSCRIBE"
        assert "at byte 7" in error.body, error.body
        with socket.create_connection((broker.stomp_host, broker.stomp_port), timeout=TIMEOUT) as raw:
            raw.sendall(b"CONNECT\naccept-version:1.2\n\n\x00FLY\n\n\x00")
            answer = b""
            while True:
                chunk = raw.recv(4096)
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith(b"CONNECTED\n") and b"ERROR\nmessage:malformed frame" in answer, answer
        assert b"\nsession:sift-" in answer.split(b"\n\n", 1)[0], "CONNECTED names the session"
        with socket.create_connection((broker.stomp_host, broker.stomp_port), timeout=TIMEOUT) as raw:
            raw.sendall(b"CONNECT\naccept-version:2.0\n\n\x00")
            answer = b""
            while chunk := raw.recv(4096):
                answer += chunk
        head = answer.split(b"\n\n", 1)[0]
        assert head.startswith(b"ERROR\n") and b"\nversion:1.0,1.1,1.2" in head, answer
        bystander.send(destination="/topic/calm", body="still here")
        assert (await take(bystander_seen.messages)).body == "still here"
    finally:
        bystander.disconnect()


async def test_messages_cross_between_stomp_native_and_http_in_every_direction(broker):
    native = await connect(broker)
    connection, collector = stomp_client(broker)
    try:
        native_subscription = await native.subscribe("cross.to-native", sql="price > 10")
        connection.subscribe(destination="/topic/cross.to-stomp", id="x", ack="auto", headers={"receipt": "s"})
        assert await take(collector.receipts) == "s"
        connection.send(destination="/topic/cross.to-native", body="from stomp",
                        headers={"price": "12", "priority": "7", "receipt": "sent"})
        assert await take(collector.receipts) == "sent"
        delivery = await asyncio.wait_for(native_subscription.__anext__(), TIMEOUT)
        assert delivery.payload == b"from stomp"
        assert delivery.properties["price"] == 12 and delivery.priority == 7
        await native.publish("cross.to-stomp", b"from native", properties={"sym": "IBM", "price": 12.5})
        frame = await take(collector.messages)
        assert frame.body == "from native"
        assert frame.headers["sym"] == "IBM" and frame.headers["price"] == "12.5"
        status, answer = http_json("POST", f"{broker.http_url}/v1/messages",
                                   {"topic": "cross.to-stomp", "payload": "from http", "properties": {"n": 1}})
        assert (status, answer["matched"]) == (200, 1)
        frame = await take(collector.messages)
        assert (frame.body, frame.headers["n"]) == ("from http", "1")
    finally:
        connection.disconnect()
        await native.close()
