"""Sign-in and permissions through each door's own way of presenting them,
with third-party clients where one exists: HTTP `Authorization: Basic`,
STOMP `login`/`passcode`, MQTT user name and password (paho), against one
broker started with a users file. Every door reaches the same decision,
made once in the broker's session machine, and answers it in its own
words (401/403, STOMP ERROR, CONNACK and SUBACK reason codes)."""

import base64
import pathlib
import signal
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import ALICE_AND_BOB, alice_and_bob_users, password_hash, sift_binary, start_broker, users_file_of
from sdk_support import TIMEOUT
from test_mqtt import Mqtt

PASSWORDS = ALICE_AND_BOB


@pytest.fixture(scope="module")
def users_file():
    with users_file_of(alice_and_bob_users()) as path:
        yield path


@pytest.fixture
def locked(users_file):
    running = start_broker(extra_args=("--users", users_file))
    try:
        yield running
    finally:
        running.stop()


def http_publish(broker, topic, user=None, password=None, bearer=None):
    """POST /v1/messages, with Basic credentials or a Bearer token; returns the status."""
    request = urllib.request.Request(f"{broker.http_url}/v1/messages?topic={topic}", data=b"hello", method="POST")
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    if bearer is not None:
        request.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_http_asks_for_credentials_and_answers_each_decision(locked):
    assert http_publish(locked, "orders.new") == 401
    assert http_publish(locked, "orders.new", "alice", "wrong") == 401
    # Allowed: 404 says that no subscriber matched (JBI's answer), not a refusal.
    assert http_publish(locked, "orders.new", "alice", PASSWORDS["alice"]) == 404
    assert http_publish(locked, "orders.new", "alice", PASSWORDS["alice"]) == 404, "the session is reused"
    assert http_publish(locked, "quotes.nyse", "alice", PASSWORDS["alice"]) == 403
    assert http_publish(locked, "orders.new", "bob", PASSWORDS["bob"]) == 403


def stomp_connect(broker, headers):
    """A raw STOMP CONNECT; returns the command of the answer and the socket."""
    connection = socket.create_connection((broker.stomp_host, broker.stomp_port), timeout=TIMEOUT)
    lines = "".join(f"{name}:{value}\n" for name, value in headers.items())
    connection.sendall(f"CONNECT\naccept-version:1.2\nhost:sift\n{lines}\n\0".encode())
    answer = b""
    while b"\0" not in answer:
        chunk = connection.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer.split(b"\n", 1)[0].decode(), answer, connection


def test_stomp_signs_in_with_login_and_passcode(locked):
    for headers in ({}, {"login": "alice", "passcode": "wrong"}, {"login": "nobody", "passcode": "x"}):
        command, answer, connection = stomp_connect(locked, headers)
        connection.close()
        assert command == "ERROR", (headers, answer)
    command, answer, connection = stomp_connect(locked, {"login": "alice", "passcode": PASSWORDS["alice"]})
    assert command == "CONNECTED", answer
    connection.sendall(b"SUBSCRIBE\nid:1\ndestination:/topic/quotes.nyse\nreceipt:r1\n\n\0")
    refused = connection.recv(4096)
    connection.close()
    assert refused.startswith(b"ERROR") and b"may not subscribe to quotes.nyse" in refused, refused


def test_mqtt_refuses_bad_credentials_and_forbidden_subscriptions(locked):
    anonymous = Mqtt(locked, "mqtt-anonymous")
    with pytest.raises(AssertionError, match="CONNACK refused"):
        anonymous.connect()
    anonymous.paho.loop_stop()
    wrong = Mqtt(locked, "mqtt-wrong")
    wrong.paho.username_pw_set("alice", "wrong")
    with pytest.raises(AssertionError, match="CONNACK refused"):
        wrong.connect()
    wrong.paho.loop_stop()
    bob = Mqtt(locked, "mqtt-bob")
    bob.paho.username_pw_set("bob", PASSWORDS["bob"])
    bob.connect()
    try:
        assert bob.subscribe("quotes/nyse", qos=0) == 0x87, "Not authorized"
        # `orders/#` would take in the topic `orders` itself, which the
        # grant `orders.>` does not cover; `orders/+` it covers.
        assert bob.subscribe("orders/#", qos=0) == 0x87
        assert bob.subscribe("orders/+", qos=0) == 0, "granted, under bob's restriction"
    finally:
        bob.paho.disconnect()
        bob.paho.loop_stop()


def read_broker_line(broker, prefix):
    """The broker's next stdout line that starts with `prefix` (a reload's report)."""
    for line in broker.process.stdout:
        if line.startswith(prefix):
            return line.strip()
    raise AssertionError(f"the broker exited before printing {prefix!r}")


def test_sighup_reads_the_users_file_again(users_file, tmp_path):
    path = tmp_path / "users.toml"
    path.write_text(pathlib.Path(users_file).read_text())
    running = start_broker(extra_args=("--users", str(path)))
    try:
        assert http_publish(running, "orders.new", "carol", "sesame") == 401
        carol = f'\n[[user]]\nname = "carol"\npassword_hash = "{password_hash("sesame")}"\npublish = ["orders.>"]\n'
        path.write_text(path.read_text() + carol)
        running.process.send_signal(signal.SIGHUP)
        assert read_broker_line(running, "sift broker reloaded its users file") == \
            "sift broker reloaded its users file (3 users)"
        assert http_publish(running, "orders.new", "carol", "sesame") == 404, "carol signs in after the reload"
        path.write_text("[[user]]\nname = 42\n")
        running.process.send_signal(signal.SIGHUP)
        kept = read_broker_line(running, "sift broker kept its previous users")
        assert "users.toml" in kept, kept
        assert http_publish(running, "orders.new", "alice", PASSWORDS["alice"]) == 404, "the previous users stay"
    finally:
        running.stop()


def mqtt_reads_orders_only(mqtt):
    """Connects `mqtt` (credentials set) and checks that it was signed in as
    alice: it may read `orders/+` and not `quotes/nyse`."""
    mqtt.connect()
    try:
        assert mqtt.subscribe("orders/+", qos=0) == 0
        assert mqtt.subscribe("quotes/nyse", qos=0) == 0x87
    finally:
        mqtt.paho.disconnect()
        mqtt.paho.loop_stop()


def sift_token(*args):
    done = subprocess.run([sift_binary(), "token", *args], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_bearer_tokens_sign_in_through_every_door(users_file, tmp_path):
    """`sift token keygen` and `sift token issue`, and a key made by openssl:
    the broker holds only the public keys of `[[token_issuer]]`s, and a
    token signs its user in by HTTP Bearer, a STOMP passcode, an MQTT
    password and the native `--token-file`."""
    public = sift_token("keygen", "--key", str(tmp_path / "ops.pem"))
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(tmp_path / "ci.pem")],
                   check=True, capture_output=True, timeout=TIMEOUT)
    ci_public = subprocess.run(["openssl", "pkey", "-in", str(tmp_path / "ci.pem"), "-pubout"],
                               check=True, capture_output=True, text=True, timeout=TIMEOUT).stdout
    path = tmp_path / "users.toml"
    path.write_text(pathlib.Path(users_file).read_text()
                    + f'\n[[token_issuer]]\nname = "ops"\npublic_key = "{public}"\n'
                    + f'\n[[token_issuer]]\nname = "ci"\npublic_key = """{ci_public}"""\n')
    token = sift_token("issue", "--key", str(tmp_path / "ops.pem"), "--issuer", "ops", "--user", "alice")
    ci_token = sift_token("issue", "--key", str(tmp_path / "ci.pem"), "--issuer", "ci", "--user", "alice")
    expired = sift_token("issue", "--key", str(tmp_path / "ops.pem"), "--issuer", "ops", "--user", "alice",
                         "--ttl-s", "0")
    running = start_broker(extra_args=("--users", str(path)))
    try:
        assert http_publish(running, "orders.new", bearer=token) == 404, "allowed; no subscriber"
        assert http_publish(running, "orders.new", bearer=ci_token) == 404, "an openssl key's token"
        assert http_publish(running, "quotes.nyse", bearer=token) == 403
        assert http_publish(running, "orders.new", bearer=expired) == 401
        assert http_publish(running, "orders.new", bearer=token[:-4] + "AAAA") == 401
        command, answer, connection = stomp_connect(running, {"passcode": token})
        connection.close()
        assert command == "CONNECTED", answer
        command, answer, connection = stomp_connect(running, {"passcode": expired})
        connection.close()
        assert command == "ERROR" and b"expired" in answer, answer
        mqtt = Mqtt(running, "mqtt-token")
        mqtt.paho.username_pw_set("alice", token)
        mqtt_reads_orders_only(mqtt)
        # A token names its user whatever the MQTT user name says: another
        # user's token with the same (empty) user name and client id does
        # not resume alice's session.
        bob_token = sift_token("issue", "--key", str(tmp_path / "ops.pem"), "--issuer", "ops", "--user", "bob")
        for expect_present, who in ((False, token), (True, token), (False, bob_token)):
            device = Mqtt(running, "shared-device", clean=False)
            device.paho.username_pw_set("", who)
            assert device.connect(session_expiry=300) == expect_present
            device.paho.disconnect()
            device.paho.loop_stop()
        token_file = tmp_path / "token"
        token_file.write_text(token + "\n")
        done = subprocess.run([sift_binary(), "pub", "--server", running.native, "--token-file", str(token_file),
                               "--topic", "orders.cli", "--payload", "x"], capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert done.returncode == 0, done.stderr
    finally:
        running.stop()
