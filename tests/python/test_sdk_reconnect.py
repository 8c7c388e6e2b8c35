"""Reconnection and closing with the Python SDK: the broker is killed and restarted on its port."""

import asyncio

import pytest

import sift
from conftest import start_broker
from sdk_support import connect, eventually


async def test_reconnect_restores_subscriptions_and_resends_unconfirmed_publishes(broker):
    subscriber = await connect(broker, name="survivor", reconnect_delay_max=0.1)
    publisher = await connect(broker, name="resender", reconnect_delay_max=0.1)
    restarted = None
    try:
        subscription = await subscriber.subscribe("events.>", sql="kind = 'important'")
        await publisher.publish("events.a", b"before", properties={"kind": "important"})
        assert (await subscription.next(timeout=10)).payload == b"before"

        broker.stop()
        await eventually(lambda: not subscriber.is_connected and not publisher.is_connected, what="the loss")
        # Published while the broker is down: kept and resent after the reconnect.
        pending = asyncio.create_task(
            publisher.publish("events.a", b"while-down", properties={"kind": "important"}, mode="reliable")
        )
        best_effort_while_down = publisher.publish("events.a", b"lost", properties={"kind": "important"})
        with pytest.raises(sift.ConnectionLostError):
            await best_effort_while_down

        restarted = start_broker(listen=broker.native, data_dir=broker.data_dir)
        await subscriber.wait_connected(timeout=10)
        await subscriber.flush(timeout=10)  # the restored SUBSCRIBE has been handled
        await publisher.wait_connected(timeout=10)
        assert subscriber.reconnects == 1 and publisher.reconnects == 1

        # The resent publish may reach the broker before the restored subscription:
        # its confirm proves it was resent; a later publish proves the subscription is back.
        resent = await asyncio.wait_for(pending, 10)
        assert resent.status in (sift.ConfirmStatus.ACCEPTED, sift.ConfirmStatus.NO_SUBSCRIBERS)
        confirm = await publisher.publish("events.a", b"after", properties={"kind": "important"}, mode="reliable")
        assert confirm.matched == 1
        payloads = []
        while b"after" not in payloads:
            payloads.append((await subscription.next(timeout=10)).payload)
        assert payloads[-1] == b"after" and set(payloads) <= {b"while-down", b"after"}
        assert subscription.id == 1  # the same id as before
    finally:
        await subscriber.close(timeout=2)
        await publisher.close(timeout=2)
        if restarted is not None:
            restarted.stop()


async def test_resent_publishes_follow_the_restored_subscriptions_of_the_same_client(broker):
    client = await connect(broker, reconnect_delay_max=0.1)
    restarted = None
    try:
        subscription = await client.subscribe("loop.>", ack="manual")
        broker.stop()
        await eventually(lambda: not client.is_connected, what="the loss")
        pending = [
            asyncio.create_task(client.publish("loop.x", b"%d" % index, mode="reliable")) for index in range(3)
        ]
        restarted = start_broker(listen=broker.native, data_dir=broker.data_dir)
        confirms = await asyncio.wait_for(asyncio.gather(*pending), 10)
        # SUBSCRIBE goes out before the resent PUBLISH frames, so every one matched.
        assert [confirm.matched for confirm in confirms] == [1, 1, 1]
        deliveries = [await subscription.next(timeout=10) for _ in range(3)]
        assert [d.payload for d in deliveries] == [b"0", b"1", b"2"]
        for delivery in deliveries:
            await delivery.ack()
    finally:
        await client.close(timeout=2)
        if restarted is not None:
            restarted.stop()


async def test_without_reconnect_a_loss_ends_subscriptions(broker):
    client = await connect(broker, reconnect=False)
    subscription = await client.subscribe("x.>")
    broker.stop()
    with pytest.raises(sift.ConnectionLostError):
        await subscription.next(timeout=10)
    assert client.is_closed
    with pytest.raises(sift.ClientClosedError):
        await client.publish("x.y", b"")
    await client.close()


async def test_clean_close_sends_close_and_ends_everything(broker):
    async with await connect(broker, name="observer") as observer:
        client = await connect(broker, name="closing")
        subscription = await client.subscribe("closing.>", ack="manual")
        connection_id = client.server_info.connection_id

        def subscriptions_of_the_closing_client(report):
            for entry in report["connections"]:
                if entry["connection"] == connection_id:
                    return len(entry["subscriptions"])
            return 0  # the connection is gone

        assert subscriptions_of_the_closing_client(await observer.admin("subscriptions")) == 1
        await asyncio.wait_for(client.close(), 5)
        assert client.is_closed and not client.is_connected
        # The broker released the subscriptions at the CLOSE, before answering the observer.
        assert subscriptions_of_the_closing_client(await observer.admin("subscriptions")) == 0
        with pytest.raises(StopAsyncIteration):
            await subscription.next(timeout=1)
        with pytest.raises(sift.ClientClosedError):
            await client.publish("closing.x", b"")
        with pytest.raises(sift.ClientClosedError):
            client.publish_nowait("closing.x", b"")
        await client.close()  # idempotent


async def test_close_of_a_client_whose_broker_is_gone_is_bounded(broker):
    client = await connect(broker, reconnect_delay_max=0.1)
    broker.stop()
    await eventually(lambda: not client.is_connected, what="the loss")
    await asyncio.wait_for(client.close(timeout=1), 3)
    assert client.is_closed


async def test_connect_failure_raises_connect_error():
    with pytest.raises(sift.ConnectError):
        await sift.connect("127.0.0.1", 1, connect_timeout=2)


async def test_a_too_long_client_name_is_refused_in_the_handshake(broker):
    with pytest.raises(sift.InvalidFieldError) as refused:
        await sift.connect(broker.host, broker.port, name="n" * 300)
    assert refused.value.fatal and "client_name is 300 bytes" in refused.value.message
