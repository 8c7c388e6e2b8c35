"""The AMQP 1.0 door with python-qpid-proton, a second AMQP client
independent of Qpid JMS (tests/java): round trips, messages crossing to and
from STOMP, MQTT, the native protocol and HTTP, sign-in and permissions by
SASL, TLS, and bad input answered with AMQP's error conditions while other
clients carry on. Checks that something did not arrive wait for a sentinel.
"""

import asyncio
import socket
import urllib.request

import pytest
from proton import Delivery, Message, ProtonException, SSLDomain
from proton.reactor import Selector
from proton.utils import BlockingConnection, LinkDetached, SendException

from conftest import alice_and_bob_users, start_broker, users_file_of
from sdk_support import TIMEOUT, connect
from stomp_support import stomp_client, take
from test_mqtt import Mqtt
from tls_pki import Pki


def amqp(broker, **options):
    return BlockingConnection(f"amqp://{broker.amqp_host}:{broker.amqp_port}", timeout=TIMEOUT, **options)


def bodies_until_sentinel(receiver):
    seen = []
    while True:
        message = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        if message.body == "sentinel":
            return seen
        seen.append(message.body)


def test_a_message_round_trips_with_its_properties_and_selectors_choose(broker):
    connection = amqp(broker)
    try:
        everything = connection.create_receiver("topic://amqp.orders", name="all")
        europe = connection.create_receiver("topic://amqp.orders", name="eu", options=Selector("region = 'EU' OR n = 0"))
        sender = connection.create_sender("topic://amqp.orders")
        for number, region in enumerate(["US", "EU", "US"], start=1):
            sender.send(Message(body=f"order {number}", properties={"region": region, "n": number}, subject="order"))
        sender.send(Message(body="sentinel", properties={"n": 0}))
        first = everything.receive(timeout=TIMEOUT)
        everything.accept()
        assert (first.body, first.properties["region"], first.subject) == ("order 1", "US", "order")
        assert bodies_until_sentinel(everything) == ["order 2", "order 3"]
        assert bodies_until_sentinel(europe) == ["order 2"]
    finally:
        connection.close()


async def test_messages_cross_between_amqp_and_every_other_door(broker):
    native = await connect(broker)
    stomp, stomp_seen = stomp_client(broker)
    mqtt = Mqtt(broker, "amqp-cross")
    connection = amqp(broker)
    try:
        native_subscription = await native.subscribe("cross.to-native", sql="qty > 2")
        stomp.subscribe(destination="/topic/cross.to-stomp", id="s", ack="auto", headers={"receipt": "r"})
        assert await take(stomp_seen.receipts) == "r"
        mqtt.connect()
        assert mqtt.subscribe("cross/to-mqtt", qos=1) == 1
        sender = connection.create_sender(None)  # anonymous relay: each message names its address
        sender.send(Message(address="topic://cross.to-native", body="for native", properties={"qty": 3},
                            durable=True))
        sender.send(Message(address="topic://cross.to-stomp", body="for stomp", properties={"qty": 4}, subject="t"))
        sender.send(Message(address="topic://cross.to-mqtt", body="for mqtt"))
        delivery = await asyncio.wait_for(native_subscription.__anext__(), TIMEOUT)
        assert (delivery.payload, delivery.properties["qty"]) == (b"for native", 3)
        frame = await take(stomp_seen.messages)
        assert (frame.body, frame.headers["qty"], frame.headers["type"]) == ("for stomp", "4", "t")
        assert (await asyncio.to_thread(mqtt.messages.get, True, TIMEOUT)).payload == b"for mqtt"
        receiver = connection.create_receiver("topic://cross.to-amqp")
        await native.publish("cross.to-amqp", b"from native", properties={"lots": 7, "price": 2.5}, mode="reliable")
        # Three publishers on three connections: each waits for the broker to take its message, so
        # that the order they arrive in is the order they were sent in.
        stomp.send(destination="/topic/cross.to-amqp", body="from stomp", headers={"type": "quote", "receipt": "sent"})
        assert await take(stomp_seen.receipts) == "sent"
        request = urllib.request.Request(f"{broker.http_url}/v1/messages?topic=cross.to-amqp", data=b"from http",
                                         method="POST")
        urllib.request.urlopen(request, timeout=TIMEOUT).close()
        received = [receiver.receive(timeout=TIMEOUT) for _ in range(3)]
        receiver.accept()
        assert [message.body for message in received] == ["from native", "from stomp", "from http"]
        assert received[0].properties == {"lots": 7, "price": 2.5}
        assert received[1].subject == "quote", "STOMP's type is JMSType, AMQP's subject"
    finally:
        connection.close()
        mqtt.paho.disconnect()
        mqtt.paho.loop_stop()
        stomp.disconnect()
        await native.close()


@pytest.fixture(scope="module")
def users_file():
    with users_file_of(alice_and_bob_users()) as path:
        yield path


def test_sasl_signs_in_and_the_users_permissions_hold(users_file):
    broker = start_broker(extra_args=("--users", users_file))
    try:
        with pytest.raises(ProtonException):
            amqp(broker, user="alice", password="wrong", allowed_mechs="PLAIN").create_sender("orders.new")
        with pytest.raises(ProtonException):
            amqp(broker, allowed_mechs="ANONYMOUS").create_sender("orders.new")
        alice = amqp(broker, user="alice", password="wonderland", allowed_mechs="PLAIN")
        bob = amqp(broker, user="bob", password="builder", allowed_mechs="PLAIN")
        try:
            orders = bob.create_receiver("topic://orders.new")
            with pytest.raises(LinkDetached, match="unauthorized-access"):
                bob.create_receiver("topic://quotes.nyse")
            sender = alice.create_sender("topic://orders.new")
            sender.send(Message(body="us order", properties={"region": "US"}))
            sender.send(Message(body="eu order", properties={"region": "EU"}))
            sender.send(Message(body="sentinel", properties={"region": "EU"}))
            assert bodies_until_sentinel(orders) == ["eu order"], "bob's restriction holds"
            forbidden = alice.create_sender("topic://quotes.nyse")
            with pytest.raises(SendException) as refused:
                forbidden.send(Message(body="no", durable=True))
            assert refused.value.state == Delivery.REJECTED
        finally:
            alice.close()
            bob.close()
    finally:
        broker.stop()


def test_amqps_with_a_trusted_ca_and_plain_text_refused(tmp_path):
    pki = Pki(tmp_path, "amqp")
    cert, key = pki.server()
    broker = start_broker(extra_args=("--tls-cert", str(cert), "--tls-key", str(key)))
    try:
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(str(pki.ca))
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        secure = BlockingConnection(f"amqps://localhost:{broker.amqp_port}", timeout=TIMEOUT, ssl_domain=domain)
        try:
            receiver = secure.create_receiver("secure.q", name="secure-in")
            secure.create_sender("secure.q", name="secure-out").send(Message(body="over tls"))
            assert receiver.receive(timeout=TIMEOUT).body == "over tls"
            receiver.accept()
        finally:
            secure.close()
        with socket.create_connection((broker.amqp_host, broker.amqp_port), timeout=TIMEOUT) as plain:
            plain.sendall(b"AMQP\x03\x01\x00\x00")
            assert plain.recv(8) == b"AMQP\x02\x01\x00\x00", "the port answers that it speaks AMQP over TLS"
    finally:
        broker.stop()


def test_bad_input_gets_amqp_errors_and_other_clients_carry_on(broker):
    bystander = amqp(broker)
    try:
        calm = bystander.create_receiver("calm.q", name="calm-in")
        with socket.create_connection((broker.amqp_host, broker.amqp_port), timeout=TIMEOUT) as raw:
            raw.sendall(b"HTTP/1.1 GET /\r\n\r\n")
            assert raw.recv(8) == b"AMQP\x03\x01\x00\x00", "an unknown header is answered with the one served"
        with socket.create_connection((broker.amqp_host, broker.amqp_port), timeout=TIMEOUT) as raw:
            raw.sendall(b"AMQP\x03\x01\x00\x00" + b"\x00\x00\x00\x09\x02\x01\x00\x00\xff")
            answer = b""
            while chunk := raw.recv(4096):
                answer += chunk
            assert answer.startswith(b"AMQP\x03\x01\x00\x00"), answer
        with pytest.raises(LinkDetached, match="invalid-field"):
            bystander.create_receiver("calm.q", name="bad-selector", options=Selector("price >"))
        with pytest.raises(LinkDetached, match="not-found"):
            bystander.create_receiver("topic://bad..address")
        bystander.create_sender("calm.q", name="calm-out").send(Message(body="still here"))
        assert calm.receive(timeout=TIMEOUT).body == "still here"
        calm.accept()
    finally:
        bystander.close()
