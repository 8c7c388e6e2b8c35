"""Sign-in and TLS with the Python SDK, against real brokers: one started
with a users file (`--users`, hashes made by `sift passwd`), one speaking
TLS with a certificate from a test CA (`tls_pki.Pki`, the openssl command
line), and one doing both, restarted under a connected client to see that
the reconnect signs in again over TLS."""

import logging
import ssl

import pytest

import sift
from sift import codec
from conftest import password_hash, start_broker, users_file_of
from sdk_support import connect, eventually
from test_door_access import sift_token
from tls_pki import Pki

PASSWORD = "wonderland"


@pytest.fixture(scope="module")
def users_file():
    text = f"""
[[user]]
name = "alice"
password_hash = "{password_hash(PASSWORD)}"
publish = ["orders.>"]
subscribe = ["orders.>"]
"""
    with users_file_of(text) as path:
        yield path


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA with a server certificate for localhost and 127.0.0.1, and a second CA that signed nothing."""
    directory = tmp_path_factory.mktemp("pki")
    authority = Pki(directory)
    cert, key = authority.server()
    other = Pki(directory, name="other")
    return {"ca": authority.ca, "cert": cert, "key": key, "other_ca": other.ca}


def tls_args(pki):
    return ("--tls-cert", str(pki["cert"]), "--tls-key", str(pki["key"]))


def trusting(ca):
    return ssl.create_default_context(cafile=str(ca))


@pytest.fixture
def locked(users_file):
    running = start_broker(extra_args=("--users", users_file))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def tls_broker(pki):
    running = start_broker(extra_args=tls_args(pki))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def sift_log(caplog):
    """Everything the SDK logs, down to debug: to show that no password is in it."""
    caplog.set_level(logging.DEBUG, logger="sift")
    return caplog


# ---------------------------------------------------------------------------
# The AUTH and AUTH_OK frames, byte for byte (docs/PROTOCOL.md §6.1.1)


def test_auth_frame_layout():
    frame = codec.encode_auth(0x0102, "al", "pw")
    assert frame == bytes.fromhex(
        "00000012"          # length: 1 + 8 + 1 + (2 + 2) + (2 + 2)
        "08"                # AUTH
        "0000000000000102"  # request_id
        "01"                # method: password
        "0002616c"          # user "al"
        "00027077"          # secret "pw"
    )
    (auth_ok,) = codec.FrameDecoder().feed(bytes.fromhex("00000010" "09" "0000000000000102" "0005616c696365"))
    assert auth_ok == codec.AuthOk(0x0102, "alice")


def test_an_overlong_password_is_refused_without_showing_it():
    with pytest.raises(sift.EncodeError) as refused:
        codec.encode_auth(1, "alice", "s" * 70000)
    assert "sss" not in str(refused.value) and "password" in str(refused.value)


# ---------------------------------------------------------------------------
# Sign-in


async def test_signed_in_client_publishes_and_receives_on_permitted_topics(locked, sift_log):
    client = await connect(locked, user="alice", password=PASSWORD)
    try:
        assert client.user == "alice"
        subscription = await client.subscribe("orders.>")
        confirm = await client.publish("orders.new", b"pen", properties={"qty": 3})
        assert confirm.matched == 1
        delivery = await subscription.next(timeout=10)
        assert (delivery.topic, delivery.payload) == ("orders.new", b"pen")
        assert PASSWORD not in repr(vars(client))
    finally:
        await client.close(timeout=2)
    assert PASSWORD not in sift_log.text


async def test_a_wrong_password_is_refused_with_auth_failed(locked, sift_log):
    with pytest.raises(sift.BrokerError) as refused:
        await connect(locked, user="alice", password="not-the-password")
    assert refused.value.code == "auth_failed"
    assert "auth_failed" in str(refused.value)
    assert "not-the-password" not in str(refused.value) and "not-the-password" not in sift_log.text


async def test_without_a_user_the_first_request_is_refused_with_auth_required(locked):
    # WELCOME comes to anyone; the broker refuses the first request of an anonymous session.
    client = await connect(locked, reconnect_delay_max=0.1)
    try:
        assert client.user is None
        with pytest.raises(sift.BrokerError) as refused:
            await client.publish("orders.new", b"x")
        assert refused.value.code == "auth_required" and refused.value.fatal
        # Reconnecting would be refused again: the client ends, saying why.
        assert client.is_closed and client.reconnects == 0
        with pytest.raises(sift.ClientClosedError, match="auth_required"):
            await client.subscribe("orders.>")
    finally:
        await client.close(timeout=2)


async def test_a_denied_request_raises_permission_denied_and_the_connection_carries_on(locked):
    client = await connect(locked, user="alice", password=PASSWORD)
    try:
        subscription = await client.subscribe("orders.>")
        with pytest.raises(sift.BrokerError) as denied:
            await client.publish("quotes.nyse", b"x")
        assert denied.value.code == "permission_denied" and not denied.value.fatal
        with pytest.raises(sift.BrokerError) as denied:
            await client.subscribe("quotes.>")
        assert denied.value.code == "permission_denied"
        # The same session goes on: a permitted publish reaches the subscription.
        confirm = await client.publish("orders.new", b"after")
        assert confirm.matched == 1
        assert (await subscription.next(timeout=10)).payload == b"after"
        assert client.is_connected and client.reconnects == 0
    finally:
        await client.close(timeout=2)


async def test_user_and_password_go_together():
    # Refused before any connection is tried (port 1 is never dialled).
    for options in ({"user": "alice"}, {"password": PASSWORD}, {"server_hostname": "localhost"}):
        with pytest.raises(ValueError):
            await sift.connect("127.0.0.1", 1, **options)


# ---------------------------------------------------------------------------
# TLS


async def test_tls_round_trip(tls_broker, pki):
    client = await connect(tls_broker, ssl=trusting(pki["ca"]))
    try:
        assert client.is_tls
        subscription = await client.subscribe("orders.>")
        confirm = await client.publish("orders.new", b"sealed")
        assert confirm.matched == 1
        assert (await subscription.next(timeout=10)).payload == b"sealed"
    finally:
        await client.close(timeout=2)


async def test_tls_by_host_name(tls_broker, pki):
    # The certificate names localhost too; server_hostname chooses the name to check.
    client = await connect(tls_broker, ssl=trusting(pki["ca"]), server_hostname="localhost")
    try:
        await client.ping()
    finally:
        await client.close(timeout=2)


async def test_a_plain_text_client_on_a_tls_port_is_told_tls_required(tls_broker):
    with pytest.raises(sift.BrokerError, match="tls_required") as refused:
        await connect(tls_broker)
    assert refused.value.code == "tls_required"


async def test_a_certificate_from_another_ca_does_not_verify(tls_broker, pki):
    with pytest.raises(sift.ConnectError, match="certificate verify failed") as refused:
        await connect(tls_broker, ssl=trusting(pki["other_ca"]))
    assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)


async def test_a_host_name_the_certificate_does_not_carry_does_not_verify(tls_broker, pki):
    with pytest.raises(sift.ConnectError) as refused:
        await connect(tls_broker, ssl=trusting(pki["ca"]), server_hostname="elsewhere.example")
    assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)


# ---------------------------------------------------------------------------
# Both, across a reconnect


async def test_reconnect_signs_in_again_over_tls(users_file, pki, sift_log):
    extra = ("--users", users_file, *tls_args(pki))
    broker = start_broker(extra_args=extra)
    restarted = None
    client = None
    try:
        client = await connect(broker, ssl=trusting(pki["ca"]), user="alice", password=PASSWORD,
                               reconnect_delay_max=0.1)
        subscription = await client.subscribe("orders.>")
        assert (await client.publish("orders.new", b"before")).matched == 1
        assert (await subscription.next(timeout=10)).payload == b"before"

        broker.stop()
        await eventually(lambda: not client.is_connected, what="the loss")
        restarted = start_broker(listen=broker.native, data_dir=broker.data_dir, extra_args=extra)
        await client.wait_connected(timeout=10)
        # The restored SUBSCRIBE was judged as alice (anonymous, it would have ended the
        # session with auth_required), over TLS (the port speaks nothing else).
        await client.flush(timeout=10)
        assert client.reconnects == 1 and client.user == "alice" and not client.is_closed
        assert (await client.publish("orders.new", b"after")).matched == 1
        assert (await subscription.next(timeout=10)).payload == b"after"
    finally:
        if client is not None:
            await client.close(timeout=2)
        broker.stop()
        if restarted is not None:
            restarted.stop()
    assert PASSWORD not in sift_log.text


async def test_a_bearer_token_signs_in_and_an_expired_one_is_refused(tmp_path, sift_log):
    public = sift_token("keygen", "--key", str(tmp_path / "ops.pem"))
    users = tmp_path / "users.toml"
    users.write_text('[[user]]\nname = "alice"\npublish = ["orders.>"]\nsubscribe = ["orders.>"]\n\n'
                     f'[[token_issuer]]\nname = "ops"\npublic_key = "{public}"\n')
    token = sift_token("issue", "--key", str(tmp_path / "ops.pem"), "--issuer", "ops", "--user", "alice")
    expired = sift_token("issue", "--key", str(tmp_path / "ops.pem"), "--issuer", "ops", "--user", "alice",
                         "--ttl-s", "0")
    running = start_broker(extra_args=("--users", str(users)))
    try:
        client = await connect(running, token=token)
        try:
            assert client.user == "alice", "the token names its user"
            subscription = await client.subscribe("orders.>")
            await client.publish("orders.new", b"by token")
            assert (await subscription.next(timeout=10)).payload == b"by token"
            assert token not in repr(vars(client))
        finally:
            await client.close(timeout=2)
        with pytest.raises(sift.BrokerError) as refused:
            await connect(running, token=expired)
        assert refused.value.code == "auth_failed" and "expired" in str(refused.value)
        with pytest.raises(ValueError):
            await connect(running, user="alice", password="x", token=token)
    finally:
        running.stop()
    assert token not in sift_log.text
