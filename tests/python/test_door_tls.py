"""TLS on every door, proved with third-party clients against a broker
started with `--tls-cert` and `--tls-key` (certificates made by `openssl`,
tls_pki.Pki):

- `openssl s_client` verifies the certificate on the native, HTTP, STOMP
  and MQTT ports (and refuses it when trusting another CA);
- curl publishes and reads an event stream over https, gets the 400 of
  the HTTP door with plain http://, and exit code 60 without the CA;
- stomp.py over SSL subscribes, sends and receives; a plain-text CONNECT
  gets the STOMP door's ERROR frame;
- paho-mqtt and mosquitto_pub over TLS reach a paho subscriber;
  mosquitto_pub without the CA fails, and a plain-text CONNECT is closed
  without an answer;
- a `websockets` client over wss receives a message published over https;
- `sift sub` receives what `sift pub` publishes with `--tls-ca`; without
  it the broker answers `tls_required`, and a wrong CA, a certificate for
  another name and an expired one are each refused in their own words;
- SIGHUP reloads the certificate files: new clients must trust the new CA,
  a connection opened before goes on working, and a bad file leaves the
  previous certificates in place.

Every wait is for an event (a line, a message, a process's exit) with a
deadline, and every broker and process a test starts is stopped.
"""

import asyncio
import contextlib
import json
import queue
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import stomp
from websockets.asyncio.client import connect as websocket_connect

from conftest import sift_binary, start_broker
from sdk_support import TIMEOUT
from stomp_support import Collector
from test_door_access import mqtt_reads_orders_only
from test_mqtt import Mqtt
from tls_pki import Pki

RELOADED = "sift broker reloaded its TLS certificates"
KEPT = "sift broker kept its previous TLS certificates"
PLAIN_HTTP_REFUSAL = "This port speaks HTTPS: use https:// instead."


# Helpers: brokers, ports, lines and processes.

@contextlib.contextmanager
def tls_broker_with(cert, key):
    """A broker speaking TLS on every door with `cert` and `key`, stopped at the end."""
    running = start_broker(extra_args=("--tls-cert", str(cert), "--tls-key", str(key)))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path, "one")


@pytest.fixture
def other_pki(tmp_path):
    """A second CA, which vouches for none of the broker's certificates."""
    return Pki(tmp_path, "other")


@pytest.fixture
def broker(pki):
    with tls_broker_with(*pki.server()) as running:
        yield running


def http_port(broker):
    return urllib.parse.urlsplit(broker.http_url).port


def door_ports(broker):
    """Each door's port by name."""
    return {"native": broker.port, "http": http_port(broker), "stomp": broker.stomp_port, "mqtt": broker.mqtt_port}


class Lines:
    """The lines of a text pipe, read on a thread, so that a test can wait
    for one with a deadline."""

    def __init__(self, pipe):
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe):
        try:
            for line in pipe:
                self.lines.put(line)
        except (OSError, ValueError):
            pass  # the pipe was closed under the reader: the process is gone
        self.lines.put(None)

    def until(self, text, timeout=TIMEOUT):
        """The first line holding `text`, reading past the others."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} within {timeout} s; read {self.seen}") from None
            if line is None:
                raise AssertionError(f"the pipe closed before a line with {text!r}; read {self.seen}")
            self.seen.append(line)
            if text in line:
                return line


def run(*command):
    """Runs a command to its end (killed after TIMEOUT); returns it, output captured."""
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def background(*command):
    """A process running beside the test, killed at the end if it is still running."""
    process = subprocess.Popen([str(part) for part in command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=TIMEOUT)
        process.stdout.close()
        process.stderr.close()


def handshake(port, ca):
    """A TLS handshake with the door at `port` as `localhost`, trusting `ca`;
    raises ssl.SSLCertVerificationError when the certificate does not verify."""
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.version()


def plain_exchange(port, data):
    """Sends `data` in plain text and returns all the door answered before it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as connection:
        connection.sendall(data)
        answer = b""
        while True:
            try:
                chunk = connection.recv(4096)
            except ConnectionResetError:
                return answer
            if not chunk:
                return answer
            answer += chunk


def tls_mqtt(broker, client_id, ca):
    """A paho client of `broker`'s MQTT door speaking TLS, trusting `ca` (not yet connected)."""
    client = Mqtt(broker, client_id)
    client.paho.tls_set(ca_certs=str(ca))
    return client


def https_publish(broker, ca, topic, payload):
    """POST /v1/messages over https with the JSON envelope; returns (status, answer)."""
    body = json.dumps({"topic": topic, "payload": payload}).encode()
    request = urllib.request.Request(f"https://localhost:{http_port(broker)}/v1/messages", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# 1. openssl s_client on each door

@pytest.mark.parametrize("door", ["native", "http", "stomp", "mqtt"])
def test_openssl_verifies_each_doors_certificate(broker, pki, other_pki, door):
    port = door_ports(broker)[door]
    command = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
               "-verify_return_error"]
    verified = run(*command, "-CAfile", pki.ca)
    assert verified.returncode == 0, verified.stderr
    assert "Verify return code: 0 (ok)" in verified.stdout, verified.stdout
    assert "subject=CN = localhost" in verified.stdout
    refused = run(*command, "-CAfile", other_pki.ca)
    assert refused.returncode != 0, refused.stdout
    assert "Verify return code: 0 (ok)" not in refused.stdout


# 2. curl on the HTTP door

def curl(*args):
    return run("curl", "-sS", "--max-time", TIMEOUT, *args)


def test_curl_publishes_and_reads_events_over_https(broker, pki):
    base = f"https://localhost:{http_port(broker)}"
    assert broker.http_url.startswith("https://"), broker.http_url
    json_body = ("-H", "content-type: application/json")
    made = curl("--cacert", pki.ca, *json_body, "-d", '{"topic": "tls.http"}', f"{base}/v1/subscriptions")
    assert made.returncode == 0, made.stderr
    subscription = json.loads(made.stdout)
    published = curl("--cacert", pki.ca, *json_body, "-d", '{"topic": "tls.http", "payload": "over https"}',
                     "-w", "\n%{http_code}", f"{base}/v1/messages")
    assert published.returncode == 0, published.stderr
    answer, status = published.stdout.rsplit("\n", 1)
    assert (status, json.loads(answer)) == ("200", {"status": "accepted", "matched": 1})
    # The subscription holds the message until its event stream, a GET over https, takes it.
    with background("curl", "-sSN", "--cacert", pki.ca, f"{base}{subscription['events']}") as events:
        data = Lines(events.stdout).until("data:")
    delivery = json.loads(data.split(":", 1)[1])
    assert (delivery["topic"], delivery["payload"]) == ("tls.http", "over https")


def test_curl_in_plain_http_gets_400_and_without_the_ca_exit_60(broker, pki):
    port = http_port(broker)
    plain = curl("-w", "\n%{http_code}", f"http://localhost:{port}/v1/messages")
    assert plain.returncode == 0, plain.stderr
    body, status = plain.stdout.rsplit("\n", 1)
    assert status == "400"
    assert body.strip() == PLAIN_HTTP_REFUSAL
    untrusted = curl(f"https://localhost:{port}/v1/messages")
    assert untrusted.returncode == 60, (untrusted.returncode, untrusted.stderr)


# 3. stomp.py on the STOMP door

def test_stomp_py_over_ssl_subscribes_sends_and_receives(broker, pki):
    address = ("localhost", broker.stomp_port)
    connection = stomp.Connection12([address], heartbeats=(0, 0))
    connection.set_ssl(for_hosts=[address], ca_certs=str(pki.ca))
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect(login="tls", wait=True)
    try:
        connection.subscribe(destination="/topic/tls.stomp", id="1", ack="auto", receipt="subscribed")
        assert collector.receipts.get(timeout=TIMEOUT) == "subscribed"
        connection.send(destination="/topic/tls.stomp", body="over stomp+ssl")
        frame = collector.messages.get(timeout=TIMEOUT)
        assert frame.body == "over stomp+ssl"
        assert collector.errors.empty()
    finally:
        connection.disconnect()


def test_stomp_plain_text_connect_gets_an_error_frame(broker):
    answer = plain_exchange(broker.stomp_port, b"CONNECT\naccept-version:1.2\nhost:sift\n\n\0")
    command, headers = answer.split(b"\n", 1)
    assert command == b"ERROR", answer
    assert b"message:this port speaks TLS\n" in headers, answer


# 4. paho-mqtt and mosquitto_pub on the MQTT door

@pytest.fixture
def mqtt_subscriber(broker, pki):
    """A paho client over TLS subscribed to `tls/#`."""
    subscriber = tls_mqtt(broker, "tls-subscriber", pki.ca)
    subscriber.connect()
    try:
        assert subscriber.subscribe("tls/#", qos=1) == 1
        yield subscriber
    finally:
        subscriber.close()


def test_paho_over_tls_round_trip(broker, pki, mqtt_subscriber):
    publisher = tls_mqtt(broker, "tls-publisher", pki.ca)
    publisher.connect()
    try:
        publisher.publish("tls/paho", b"over mqtts", qos=1)
    finally:
        publisher.close()
    message = mqtt_subscriber.next()
    assert (message.topic, message.payload) == ("tls/paho", b"over mqtts")


def test_mosquitto_pub_with_the_ca_reaches_paho_and_without_it_fails(broker, pki, mqtt_subscriber):
    address = ("-h", "localhost", "-p", broker.mqtt_port)
    published = run("mosquitto_pub", "--cafile", pki.ca, *address, "-q", "1", "-t", "tls/mosquitto", "-m", "x")
    assert published.returncode == 0, published.stderr
    message = mqtt_subscriber.next()
    assert (message.topic, message.payload) == ("tls/mosquitto", b"x")
    untrusted = run("mosquitto_pub", *address, "-t", "tls/mosquitto", "-m", "in clear")
    assert untrusted.returncode != 0, untrusted.stderr


def test_mqtt_plain_text_connect_is_closed_without_an_answer(broker):
    connect = b"\x10\x11\x00\x04MQTT\x04\x02\x00\x3c\x00\x05plain"  # MQTT 3.1.1, client id "plain"
    assert plain_exchange(broker.mqtt_port, connect) == b""


# 5. WebSocket over TLS on the HTTP door

async def test_websocket_over_wss_receives_a_message_published_over_https(broker, pki):
    context = ssl.create_default_context(cafile=str(pki.ca))
    async with websocket_connect(f"wss://localhost:{http_port(broker)}/v1/ws", ssl=context) as websocket:
        await websocket.send(json.dumps({"op": "subscribe", "id": "s", "topic": "tls.ws", "ack": "auto"}))
        assert json.loads(await asyncio.wait_for(websocket.recv(), TIMEOUT)) == {"op": "subscribed", "id": "s"}
        status, answer = await asyncio.to_thread(https_publish, broker, pki.ca, "tls.ws", "over wss")
        assert (status, answer["matched"]) == (200, 1), answer
        delivery = json.loads(await asyncio.wait_for(websocket.recv(), TIMEOUT))
    assert (delivery["op"], delivery["id"]) == ("deliver", "s"), delivery
    assert (delivery["message"]["topic"], delivery["message"]["payload"]) == ("tls.ws", "over wss")


# 6. The sift command line

def sift_pub(broker, *tls, payload="x"):
    """`sift pub` to the native door as localhost, with the `tls` options; returns the finished process."""
    return run(sift_binary(), "pub", "--server", f"localhost:{broker.port}", *tls, "--topic", "tls.cli",
               "--payload", payload)


def refusal(broker, *tls):
    """What `sift pub` printed when it failed (it must fail)."""
    done = sift_pub(broker, *tls)
    assert done.returncode != 0, done.stdout
    return done.stdout + done.stderr


def test_sift_sub_receives_what_sift_pub_publishes_over_tls(broker, pki):
    command = [sift_binary(), "sub", "--server", f"localhost:{broker.port}", "--tls-ca", pki.ca, "--topic", "tls.cli",
               "--count", "1"]
    with background(*command) as subscriber:
        Lines(subscriber.stderr).until("subscribed to tls.cli")
        published = sift_pub(broker, "--tls-ca", pki.ca, payload="over tls")
        assert published.returncode == 0, published.stderr
        assert subscriber.wait(timeout=TIMEOUT) == 0
        assert "over tls" in subscriber.stdout.read()


def test_sift_pub_without_tls_is_told_tls_required(broker):
    assert "tls_required" in refusal(broker)


def test_sift_pub_trusting_another_ca_is_refused(broker, other_pki):
    assert "UnknownIssuer" in refusal(broker, "--tls-ca", other_pki.ca)


def test_sift_pub_refuses_a_certificate_for_another_name(pki):
    with tls_broker_with(*pki.issue("named", "broker.example", ("DNS:broker.example",))) as named:
        assert "not valid for name" in refusal(named, "--tls-ca", pki.ca)


def test_sift_pub_refuses_an_expired_certificate(pki):
    expired = pki.issue("expired", "localhost", ("DNS:localhost", "IP:127.0.0.1"), start="20200101000000Z", days=30)
    with tls_broker_with(*expired) as stale:
        assert "expired" in refusal(stale, "--tls-ca", pki.ca)


# 7. SIGHUP reloads the certificates

def install(issued, cert, key):
    """Copies an issued (certificate, key) pair over the files the broker reads."""
    for source, target in zip(issued, (cert, key)):
        shutil.copyfile(source, target)

def live_certificate(tmp_path, pki):
    """A second CA, and the files a broker reads, holding `pki`'s server certificate for now."""
    cert, key = tmp_path / "live-cert.pem", tmp_path / "live-key.pem"
    install(pki.server(), cert, key)
    return Pki(tmp_path, "two"), cert, key


def test_sighup_reloads_certificates_without_dropping_connections(tmp_path, pki):
    two, cert, key = live_certificate(tmp_path, pki)
    with tls_broker_with(cert, key) as running:
        said = Lines(running.process.stdout)
        before = tls_mqtt(running, "before-reload", pki.ca)
        before.connect()
        after = tls_mqtt(running, "after-reload", two.ca)
        try:
            assert before.subscribe("reload/#", qos=1) == 1
            install(two.server(), cert, key)
            running.process.send_signal(signal.SIGHUP)
            said.until(RELOADED)

            for door, port in door_ports(running).items():
                assert handshake(port, two.ca), door
                with pytest.raises(ssl.SSLCertVerificationError):
                    handshake(port, pki.ca)
            trusting_one = run("mosquitto_pub", "--cafile", pki.ca, "-h", "localhost", "-p", running.mqtt_port,
                               "-t", "reload/refused", "-m", "x")
            assert trusting_one.returncode != 0, "a client trusting only the first CA connected after the reload"

            after.connect()
            assert after.subscribe("reload/#", qos=1) == 1
            before.publish("reload/old", b"still here", qos=1)
            for client in (before, after):
                message = client.next()
                assert (message.topic, message.payload) == ("reload/old", b"still here"), client.client_id
        finally:
            before.close()
            after.close()


def test_sighup_with_a_bad_certificate_keeps_the_previous_one(tmp_path, pki):
    two, cert, key = live_certificate(tmp_path, pki)
    with tls_broker_with(cert, key) as running:
        said = Lines(running.process.stdout)
        install(two.server(), cert, key)
        running.process.send_signal(signal.SIGHUP)
        said.until(RELOADED)

        cert.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        running.process.send_signal(signal.SIGHUP)
        said.until(KEPT)
        for door, port in door_ports(running).items():
            assert handshake(port, two.ca), door
        client = tls_mqtt(running, "after-bad-reload", two.ca)
        try:
            client.connect()
        finally:
            client.close()


# 8. Client certificates sign their users in through every door

@pytest.fixture
def certified_broker(pki, tmp_path):
    """A broker that checks client certificates against `pki`'s CA and
    knows alice (no password: she signs in by certificate only)."""
    users = tmp_path / "users.toml"
    users.write_text('[[user]]\nname = "alice"\npublish = ["orders.>"]\nsubscribe = ["orders.>"]\n')
    cert, key = pki.server()
    running = start_broker(extra_args=("--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca",
                                       str(pki.ca), "--users", str(users)))
    try:
        yield running
    finally:
        running.stop()


def test_a_client_certificate_signs_alice_in_through_every_door(certified_broker, pki):
    alice_cert, alice_key = pki.issue("alice", "alice", ("DNS:alice",))
    broker = certified_broker
    url = f"https://localhost:{http_port(broker)}/v1/messages?topic=orders.new"
    with_cert = curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(pki.ca), "--cert",
                     str(alice_cert), "--key", str(alice_key), "-d", "x", url)
    assert with_cert.stdout == "404", "allowed (no subscriber) as alice"
    denied = curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(pki.ca), "--cert", str(alice_cert),
                  "--key", str(alice_key), "-d", "x", url.replace("orders.new", "quotes.nyse"))
    assert denied.stdout == "403"
    without = curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(pki.ca), "-d", "x", url)
    assert without.stdout == "401", "no certificate and no credentials"

    address = ("localhost", broker.stomp_port)
    connection = stomp.Connection12([address], heartbeats=(0, 0))
    connection.set_ssl(for_hosts=[address], ca_certs=str(pki.ca), cert_file=str(alice_cert), key_file=str(alice_key))
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect(wait=True)
    try:
        connection.subscribe(destination="/topic/orders.stomp", id="1", ack="auto", receipt="subscribed")
        assert collector.receipts.get(timeout=TIMEOUT) == "subscribed", "alice may read orders"
        connection.send(destination="/topic/orders.stomp", body="signed in by certificate")
        assert collector.messages.get(timeout=TIMEOUT).body == "signed in by certificate"
    finally:
        connection.disconnect()

    mqtt = Mqtt(broker, "alice-by-certificate")
    mqtt.paho.tls_set(ca_certs=str(pki.ca), certfile=str(alice_cert), keyfile=str(alice_key))
    mqtt_reads_orders_only(mqtt)
