"""Fixtures shared by the Python tests: a real `sift broker` per test.

The broker binary is `$SIFT_BIN`, or `target/debug/sift` of this checkout
(`scripts/python-tests` builds it). Each broker listens on ephemeral
loopback ports, native and HTTP, with its own data directory, and is killed
by its PID when the test ends, pass or fail. The STOMP and MQTT front-ends
listen on ephemeral loopback ports too, unless a test turns them `off`.
"""

import contextlib
import os
import pathlib
import subprocess
import tempfile

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
NATIVE_PREFIX = "sift broker listening on "
HTTP_PREFIX = "sift broker serving HTTP on "
STOMP_PREFIX = "sift broker serving STOMP on "
MQTT_PREFIX = "sift broker serving MQTT on "
AMQP_PREFIX = "sift broker serving AMQP on "


class Broker:
    """A running broker: its native address, its HTTP base URL, its STOMP
    address (`stomp_host`, `stomp_port`), its MQTT address (`mqtt_host`,
    `mqtt_port`), its AMQP address (`amqp_host`, `amqp_port`) and its
    process."""

    def __init__(self, process, native, http_url, data_dir, stomp=None, mqtt=None, amqp=None):
        self.process = process
        self.native = native
        self.host, port = native.rsplit(":", 1)
        self.port = int(port)
        self.http_url = http_url
        self.data_dir = data_dir
        self.stomp_host, self.stomp_port = (stomp.rsplit(":", 1)[0], int(stomp.rsplit(":", 1)[1])) if stomp else (None, None)
        self.mqtt_host, self.mqtt_port = (mqtt.rsplit(":", 1)[0], int(mqtt.rsplit(":", 1)[1])) if mqtt else (None, None)
        self.amqp_host, self.amqp_port = (amqp.rsplit(":", 1)[0], int(amqp.rsplit(":", 1)[1])) if amqp else (None, None)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


def sift_binary():
    return os.environ.get("SIFT_BIN", str(REPOSITORY / "target" / "debug" / "sift"))


def password_hash(password):
    """`sift passwd`, as an operator makes a hash for a users file."""
    environment = dict(os.environ, SIFT_PASSWORD=password)
    done = subprocess.run([sift_binary(), "passwd"], env=environment, capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.strip()


@contextlib.contextmanager
def users_file_of(text):
    """A users file holding `text`, removed at the end; yields its path."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as file:
        file.write(text)
    try:
        yield file.name
    finally:
        os.unlink(file.name)


#: The passwords of `alice_and_bob_users`.
ALICE_AND_BOB = {"alice": "wonderland", "bob": "builder"}


def alice_and_bob_users():
    """A users file's text: alice publishes and subscribes to `orders.>`;
    bob subscribes to `orders.>` only where `region = 'EU'`."""
    return f"""
[[user]]
name = "alice"
password_hash = "{password_hash(ALICE_AND_BOB['alice'])}"
publish = ["orders.>"]
subscribe = ["orders.>"]

[[user]]
name = "bob"
password_hash = "{password_hash(ALICE_AND_BOB['bob'])}"
subscribe = [{{ topic = "orders.>", where = "region = 'EU'" }}]
"""


def start_broker(extra_args=(), listen="127.0.0.1:0", http="127.0.0.1:0", data_dir=None, stomp="127.0.0.1:0",
                 mqtt="127.0.0.1:0", amqp="127.0.0.1:0"):
    """Starts a broker and waits until it printed its addresses (those of the
    front-ends not turned `off`).

    `listen` and `data_dir` let a test restart a broker where it was (the
    same port and data) to see clients reconnect and data survive.
    """
    data_dir = data_dir or tempfile.mkdtemp(prefix="sift-pytest-")
    # Standard error goes to a file, not a pipe nobody reads (which would
    # fill and stall the broker), so that a broker that fails to start can
    # say why in the test's failure.
    errors = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(
        [sift_binary(), "broker", "--listen", listen, "--http", http, "--stomp", stomp, "--mqtt", mqtt, "--amqp", amqp,
         "--data", data_dir, *extra_args],
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    native = http_url = stomp_address = mqtt_address = amqp_address = None
    while (native is None or http_url is None or (stomp != "off" and stomp_address is None)
           or (mqtt != "off" and mqtt_address is None) or (amqp != "off" and amqp_address is None)):
        line = process.stdout.readline()
        if not line:
            process.kill()
            process.wait()
            errors.seek(0)
            raise RuntimeError(f"the broker exited before printing its addresses:\n{errors.read()[-4000:]}")
        if line.startswith(NATIVE_PREFIX):
            native = line[len(NATIVE_PREFIX):].strip()
        elif line.startswith(HTTP_PREFIX):
            http_url = line[len(HTTP_PREFIX):].strip()
        elif line.startswith(STOMP_PREFIX):
            stomp_address = line[len(STOMP_PREFIX):].strip()
        elif line.startswith(MQTT_PREFIX):
            mqtt_address = line[len(MQTT_PREFIX):].strip()
        elif line.startswith(AMQP_PREFIX):
            amqp_address = line[len(AMQP_PREFIX):].strip()
    return Broker(process, native, http_url, data_dir, stomp_address, mqtt_address, amqp_address)


@pytest.fixture
def broker():
    running = start_broker()
    try:
        yield running
    finally:
        running.stop()
