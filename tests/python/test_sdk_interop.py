"""Messages crossing between the Python SDK, the HTTP front-end and the `sift` command line."""

import asyncio
import json
import urllib.request

import sift
from sdk_support import TIMEOUT, connect, http_json, sift_binary, sift_pub


async def test_http_publish_reaches_a_python_subscriber(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("bridge.>", sql="price > 10")
        status, answer = await asyncio.to_thread(
            http_json, "POST", f"{broker.http_url}/v1/messages",
            {"topic": "bridge.ibm", "properties": {"sym": "IBM", "price": 12.5, "lots": 3, "firm": True},
             "payload": "IBM 12.5", "mode": "reliable"},
        )
        assert status == 200 and answer["matched"] == 1
        delivery = await subscription.next(timeout=TIMEOUT)
        assert delivery.text == "IBM 12.5" and delivery.mode == sift.DeliveryMode.RELIABLE
        assert delivery.properties == {"sym": "IBM", "price": 12.5, "lots": 3, "firm": True}
        assert delivery.publisher.startswith("http-publish-")


async def test_http_publish_with_nobody_listening_is_404(broker):
    status, answer = await asyncio.to_thread(
        http_json, "POST", f"{broker.http_url}/v1/messages", {"topic": "bridge.none", "payload": "x"}
    )
    assert status == 404 and answer["error"] == "no_subscribers"


async def test_python_publish_reaches_an_http_event_stream(broker):
    status, created = await asyncio.to_thread(
        http_json, "POST", f"{broker.http_url}/v1/subscriptions", {"topic": "quotes.*", "sql": "sym = 'IBM'"}
    )
    assert status == 201
    # urlopen returns once the headers arrived: the event stream is attached.
    events = await asyncio.to_thread(urllib.request.urlopen, broker.http_url + created["events"], timeout=TIMEOUT)

    def first_event():
        for raw in events:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                return json.loads(line[len("data:"):])
        return None

    try:
        async with await connect(broker, name="py-publisher") as client:
            refused = await client.publish("quotes.hp", b"HP 3", properties={"sym": "HP"})
            assert refused.status is sift.ConfirmStatus.NO_SUBSCRIBERS
            confirm = await client.publish("quotes.ibm", "IBM 13", properties={"sym": "IBM", "price": 13.0})
            assert confirm.matched == 1
            event = await asyncio.wait_for(asyncio.to_thread(first_event), TIMEOUT)
        assert event["topic"] == "quotes.ibm" and event["payload"] == "IBM 13"
        assert event["properties"] == {"sym": "IBM", "price": 13.0}
        assert event["publisher"] == "py-publisher"
    finally:
        events.close()


async def test_cli_publish_reaches_a_python_subscriber(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("cli.>", tags="qty>2")
        await sift_pub(broker, "--topic", "cli.in", "--payload", "from the CLI", "--prop", "qty=3", "--prop", "who=cli",
                       "--mode", "reliable")
        delivery = await subscription.next(timeout=TIMEOUT)
        assert delivery.text == "from the CLI" and delivery.properties == {"qty": 3, "who": "cli"}


async def test_python_publish_reaches_a_cli_subscriber(broker):
    process = await asyncio.create_subprocess_exec(
        sift_binary(), "sub", "--server", broker.native, "--topic", "cli.out", "--where", "n >= 1",
        "--count", "1", "--format", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with await connect(broker) as client:
            # The CLI prints nothing until a message comes: publish until one matched it.
            async def publish_until_matched():
                while True:
                    confirm = await client.publish("cli.out", b"to the CLI", properties={"n": 1})
                    if confirm.matched == 1:
                        return
                    await client.ping()

            await asyncio.wait_for(publish_until_matched(), TIMEOUT)
        output, _ = await asyncio.wait_for(process.communicate(), TIMEOUT)
        message = json.loads(output.decode().strip().splitlines()[0])
        assert message["topic"] == "cli.out" and message["payload"] == "to the CLI"
        assert message["properties"] == {"n": 1}
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
