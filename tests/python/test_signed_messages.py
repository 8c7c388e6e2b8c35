"""Signed messages end to end, as a user runs them: keys made by `sift
token keygen` (and by openssl), a broker whose users file requires
signatures on `orders.>` from listed keys, `sift pub --sign-key`, and
`sift sub --verify`. The broker refuses unsigned and forged messages at
ingress (`bad_signature`, HTTP 403); the subscriber drops what does not
verify and says so, and what verifies arrives (a sentinel shows that
nothing else came). The Python SDK signs and verifies the same bytes: what
it signs passes the broker and `sift sub --verify`, and it verifies what
`sift pub` signed."""

import subprocess
import urllib.error
import urllib.request

import pytest

import sift as sdk
from conftest import sift_binary, start_broker
from sdk_support import TIMEOUT, connect, until_sentinel


def sift(*args, check=True):
    done = subprocess.run([sift_binary(), *args], capture_output=True, text=True, timeout=TIMEOUT)
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def signed_broker(tmp_path):
    plant = sift("token", "keygen", "--key", str(tmp_path / "plant.pem")).stdout.strip()
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(tmp_path / "office.pem")],
                   check=True, capture_output=True, timeout=TIMEOUT)
    office = subprocess.run(["openssl", "pkey", "-in", str(tmp_path / "office.pem"), "-pubout"], check=True,
                            capture_output=True, text=True, timeout=TIMEOUT).stdout
    sift("token", "keygen", "--key", str(tmp_path / "forger.pem"))
    keys = (f'[[signing_key]]\nname = "plant"\npublic_key = "{plant}"\n\n'
            f'[[signing_key]]\nname = "office"\npublic_key = """{office}"""\n')
    (tmp_path / "keys.toml").write_text(keys)
    (tmp_path / "users.toml").write_text(
        '[anonymous]\npublish = [">"]\nsubscribe = [">"]\n\n' + keys
        + '\n[[signed_topic]]\ntopic = "orders.>"\nkeys = ["plant", "office"]\n')
    running = start_broker(extra_args=("--users", str(tmp_path / "users.toml")))
    try:
        yield running, tmp_path
    finally:
        running.stop()


def publish(broker, topic, payload, *signing):
    return sift("pub", "--server", broker.native, "--topic", topic, "--payload", payload, *signing, check=False)


def test_the_broker_refuses_unsigned_and_forged_messages_on_a_signed_topic(signed_broker):
    broker, keys = signed_broker
    unsigned = publish(broker, "orders.new", "no signature")
    assert unsigned.returncode != 0 and "bad_signature" in unsigned.stderr, unsigned.stderr
    assert "not signed" in unsigned.stderr, unsigned.stderr
    forged = publish(broker, "orders.new", "forged", "--sign-key", str(keys / "forger.pem"), "--signer", "plant")
    assert forged.returncode != 0 and "forged or changed" in forged.stderr, forged.stderr
    stranger = publish(broker, "orders.new", "who", "--sign-key", str(keys / "forger.pem"), "--signer", "stranger")
    assert stranger.returncode != 0 and "not accepted" in stranger.stderr, stranger.stderr
    for key, signer in (("plant.pem", "plant"), ("office.pem", "office")):
        signed = publish(broker, "orders.new", "signed", "--sign-key", str(keys / key), "--signer", signer)
        assert signed.returncode == 0, signed.stderr
    assert publish(broker, "news.today", "unsigned is fine here").returncode == 0
    request = urllib.request.Request(f"{broker.http_url}/v1/messages?topic=orders.new", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    assert refused.value.code == 403
    assert "bad_signature" in refused.value.read().decode()


def test_a_subscriber_verifies_end_to_end_and_drops_what_does_not_verify(signed_broker):
    broker, keys = signed_broker
    subscriber = subprocess.Popen(
        [sift_binary(), "sub", "--server", broker.native, "--topic", ">", "--verify", str(keys / "keys.toml"),
         "--count", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert subscriber.stderr.readline().startswith("subscribed to"), "the subscription is live"
        plant = ("--sign-key", str(keys / "plant.pem"), "--signer", "plant")
        assert publish(broker, "orders.new", "from the plant", *plant).returncode == 0
        assert publish(broker, "news.today", "unsigned news").returncode == 0
        forged = ("--sign-key", str(keys / "forger.pem"), "--signer", "plant")
        assert publish(broker, "news.today", "forged news", *forged).returncode == 0, "not a signed topic"
        assert publish(broker, "news.sentinel", "sentinel", *plant).returncode == 0
        out, err = subscriber.communicate(timeout=TIMEOUT)
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
            subscriber.wait()
    assert subscriber.returncode == 0, err
    printed = out.splitlines()
    assert len(printed) == 2 and "from the plant" in printed[0] and "sentinel" in printed[1], out
    assert "refused a message on news.today: the message is not signed" in err, err
    assert "refused a message on news.today: the signature of \"plant\" does not verify" in err, err


def test_a_signed_file_transfer_passes_the_broker_and_the_receivers_check(signed_broker):
    broker, keys = signed_broker
    source = keys / "report.bin"
    source.write_bytes(bytes(range(256)) * 4096)
    saved = keys / "saved"
    receiver = subprocess.Popen(
        [sift_binary(), "sub", "--server", broker.native, "--topic", "orders.files", "--count", "1",
         "--save-dir", str(saved), "--verify", str(keys / "keys.toml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert receiver.stderr.readline().startswith("subscribed to"), "the subscription is live"
        unsigned = sift("pub", "--server", broker.native, "--topic", "orders.files", "--file", str(source),
                        "--chunk-bytes", "65536", check=False)
        assert unsigned.returncode != 0 and "bad_signature" in unsigned.stderr, unsigned.stderr
        signed = sift("pub", "--server", broker.native, "--topic", "orders.files", "--file", str(source),
                      "--chunk-bytes", "65536", "--sign-key", str(keys / "plant.pem"), "--signer", "plant")
        assert "16 fragments" in signed.stdout, signed.stdout
        out, err = receiver.communicate(timeout=TIMEOUT)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    assert receiver.returncode == 0, err
    assert "checksums match" in out, out
    assert (saved / "report.bin").read_bytes() == source.read_bytes()


async def test_the_sdk_signs_what_the_broker_and_sift_sub_accept(signed_broker):
    broker, keys = signed_broker
    subscriber = subprocess.Popen(
        [sift_binary(), "sub", "--server", broker.native, "--topic", "orders.>", "--verify", str(keys / "keys.toml"),
         "--count", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = await connect(broker)
    try:
        assert subscriber.stderr.readline().startswith("subscribed to"), "the subscription is live"
        with pytest.raises(sdk.BadSignatureError, match="not signed"):
            await client.publish("orders.new", b"unsigned", properties={"qty": 3})
        forger = sdk.SigningKey.from_file("plant", str(keys / "forger.pem"))
        with pytest.raises(sdk.BadSignatureError, match="forged or changed"):
            await client.publish("orders.new", b"forged", sign_key=forger)
        plant = sdk.SigningKey.from_file("plant", str(keys / "plant.pem"))
        office = sdk.SigningKey("office", (keys / "office.pem").read_text())
        properties = [("qty", 3), ("price", 9.5), ("rush", True), ("region", "EU"), ("zero", 0), ("neg", -7)]
        await client.publish("orders.new", "typed properties", properties=properties,
                             metadata="<order><qty>3</qty></order>", sign_key=plant)
        client.publish_nowait("orders.new", b"fire and forget", sign_key=office)
        await client.drain()
        out, err = subscriber.communicate(timeout=TIMEOUT)
    finally:
        await client.close()
        if subscriber.poll() is None:
            subscriber.kill()
            subscriber.wait()
    assert subscriber.returncode == 0, err
    printed = out.splitlines()
    assert "typed properties" in printed[0] and "fire and forget" in printed[1], out
    assert "refused" not in err, err


async def test_the_sdk_verifies_end_to_end_and_drops_what_does_not_verify(signed_broker):
    broker, keys = signed_broker
    verifier = sdk.Verifier(sdk.keys_from_toml(str(keys / "keys.toml")))
    client = await connect(broker)
    try:
        verified = await client.subscribe(">", verify=verifier)
        plain = await client.subscribe("news.>")
        plant = ("--sign-key", str(keys / "plant.pem"), "--signer", "plant")
        assert publish(broker, "orders.new", "signed by sift pub", *plant).returncode == 0
        assert publish(broker, "news.today", "unsigned news").returncode == 0
        forged = ("--sign-key", str(keys / "forger.pem"), "--signer", "plant")
        assert publish(broker, "news.today", "forged news", *forged).returncode == 0, "not a signed topic"
        assert publish(broker, "news.sentinel", "sentinel", *plant).returncode == 0
        assert await until_sentinel(verified) == [b"signed by sift pub"]
        assert await until_sentinel(plain) == [b"unsigned news", b"forged news"]
        assert verifier.refused == 2
    finally:
        await client.close()


def test_a_verifier_checks_repeated_copies_and_catches_a_changed_one(tmp_path):
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(tmp_path / "plant.pem")],
                   check=True, capture_output=True, timeout=TIMEOUT)
    public = sift("token", "keygen", "--key", str(tmp_path / "other.pem")).stdout.strip()
    plant = sdk.SigningKey.from_file("plant", str(tmp_path / "plant.pem"))
    with pytest.raises(ValueError, match="not a PKCS#8 PEM"):
        sdk.SigningKey("plant", "not a key")
    with pytest.raises(ValueError, match="verifying key 'x'"):
        sdk.VerifyingKey("x", "not base64!")
    properties = sdk.signing.sign("orders.new", b"42", {"qty": 1}, None, plant)

    def delivery(topic="orders.new", payload=b"42", changed=None):
        fields = dict(properties)
        fields.update(changed or {})
        return sdk.Delivery(1, 0, False, 0, topic, 4, 0, 0, 1, 1, 0, 0, "pub", fields, None, payload)

    wrong_key = sdk.Verifier([sdk.VerifyingKey("plant", public)])
    with pytest.raises(sdk.SignatureError) as refused:
        wrong_key.verify(delivery())
    assert refused.value.reason == "forged"
    openssl_pub = subprocess.run(["openssl", "pkey", "-in", str(tmp_path / "plant.pem"), "-pubout"], check=True,
                                 capture_output=True, text=True, timeout=TIMEOUT).stdout
    verifier = sdk.Verifier([sdk.VerifyingKey("plant", openssl_pub)])
    assert verifier.verify(delivery()).name == "plant"
    assert verifier.verify(delivery()).name == "plant", "a repeated copy"
    for changed in ({"qty": True}, {"qty": 1.0}, {"qty": 2}, {"extra": "x"}):
        with pytest.raises(sdk.SignatureError, match="forged or changed"):
            verifier.verify(delivery(changed=changed))
    with pytest.raises(sdk.SignatureError, match="forged or changed"):
        verifier.verify(delivery(payload=b"43"))
    with pytest.raises(sdk.SignatureError) as unknown:
        verifier.verify(delivery(changed={"sift.signer": "stranger"}))
    assert unknown.value.reason == "unknown_signer"
    assert verifier.refused == 6
