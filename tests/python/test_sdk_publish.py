"""Publishing with the Python SDK against a real broker: modes, confirms, options."""

import asyncio
import time

import pytest

import sift
from sdk_support import collect, connect, until_sentinel


async def test_connect_reports_the_broker_limits_and_closes_cleanly(broker):
    async with await connect(broker) as client:
        info = client.server_info
        assert info.version == 1 and info.server_name == "sift"
        assert info.publish_window > 0 and info.max_payload_bytes > 0
        assert await client.ping() >= 0
    assert client.is_closed


async def test_every_mode_is_confirmed_with_its_status(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("modes.>")
        for mode in ("best-effort", "reliable", "persistent", sift.DeliveryMode.RELIABLE):
            confirm = await client.publish("modes.x", b"m", mode=mode)
            assert confirm.status is sift.ConfirmStatus.ACCEPTED and confirm.matched == 1
        deliveries = await collect(subscription, 4)
        assert [d.mode for d in deliveries] == [0, 1, 2, 1]
        assert deliveries[2].delivery_mode is sift.DeliveryMode.PERSISTENT


async def test_no_subscribers_status(broker):
    async with await connect(broker) as client:
        confirm = await client.publish("nobody.here", b"x")
        assert confirm.status is sift.ConfirmStatus.NO_SUBSCRIBERS and confirm.matched == 0
        confirm = await client.publish("nobody.here", b"x", mode="reliable")
        assert confirm.status == "no_subscribers"


async def test_persistent_confirm_names_the_stream_and_sequence(broker):
    async with await connect(broker) as client:
        first = await client.publish("stored.a", b"1", mode="persistent")
        second = await client.publish("stored.a", b"2", mode="persistent")
        # Stored with no live subscriber: the stream took it, so it is accepted.
        assert first.status is sift.ConfirmStatus.ACCEPTED and first.matched == 0
        assert first.stream == "default" and first.stream_seq >= 1
        assert second.stream_seq == first.stream_seq + 1


async def test_await_delivered_is_delivered_once_the_subscriber_acknowledges(broker):
    async with await connect(broker, name="acker") as subscriber, await connect(broker) as publisher:
        subscription = await subscriber.subscribe("awaited.>", ack="manual")

        async def consume():
            delivery = await subscription.next(timeout=10)
            await delivery.ack()

        consumer = asyncio.create_task(consume())
        confirm = await publisher.publish("awaited.x", b"x", await_delivered=True, await_timeout=10)
        await consumer
        assert confirm.status is sift.ConfirmStatus.DELIVERED
        assert (confirm.matched, confirm.acked, confirm.pending) == (1, 1, ())


async def test_await_delivered_is_incomplete_when_nobody_acknowledges_in_time(broker):
    async with await connect(broker, name="silent") as subscriber, await connect(broker) as publisher:
        subscription = await subscriber.subscribe("awaited.>", ack="manual")
        confirm = await publisher.publish("awaited.y", b"y", await_delivered=True, await_timeout=0.2)
        assert confirm.status is sift.ConfirmStatus.INCOMPLETE
        assert (confirm.matched, confirm.acked) == (1, 0)
        assert len(confirm.pending) == 1 and confirm.pending[0].startswith("silent#")
        assert confirm.pending[0].endswith(f"/{subscription.id}")
        delivery = await subscription.next(timeout=10)
        assert delivery.mode == sift.DeliveryMode.RELIABLE  # await=delivered upgrades it


async def test_properties_metadata_priority_ttl_and_payload_types_arrive_intact(broker):
    async with await connect(broker, name="typed") as client:
        subscription = await client.subscribe("typed.>")
        before = time.time_ns()
        await client.publish(
            "typed.x",
            "héllo",
            properties={"flag": True, "count": -7, "ratio": 0.5, "label": "été", "big": (1 << 63) - 1},
            metadata="<order qty='3'/>",
            priority=7,
            ttl=60,
        )
        await client.publish("typed.x", bytearray(b"\x00\xff"), metadata=b"<m/>")
        first, second = await collect(subscription, 2)
        assert first.payload == "héllo".encode() and first.text == "héllo"
        assert first.properties == {"flag": True, "count": -7, "ratio": 0.5, "label": "été", "big": (1 << 63) - 1}
        assert type(first.properties["flag"]) is bool and type(first.properties["count"]) is int
        assert first.metadata == b"<order qty='3'/>"
        assert first.priority == 7
        assert before + 59 * 10**9 < first.expiry_ns < time.time_ns() + 61 * 10**9
        assert first.publisher == "typed" and first.timestamp_ns >= before and first.id > 0
        assert second.payload == b"\x00\xff" and second.metadata == b"<m/>" and second.expiry_ns == 0
        assert second.sequence == first.sequence + 1


async def test_fire_and_forget_publishes_arrive_in_order(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("fast.>", ack="on_write", queue_capacity=100_000)
        for index in range(5000):
            client.publish_nowait("fast.x", index.to_bytes(4, "big"))
            if index % 1000 == 999:
                await client.drain()
        client.publish_nowait("fast.x", b"reliable", mode="reliable", properties={"last": True})
        deliveries = await collect(subscription, 5001)
        assert [int.from_bytes(d.payload, "big") for d in deliveries[:5000]] == list(range(5000))
        assert deliveries[-1].properties == {"last": True} and deliveries[-1].mode == 1
        sequences = [d.sequence for d in deliveries]
        assert sequences == sorted(sequences)


async def test_many_confirmed_publishes_stay_within_the_publish_window(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("window.>", ack="on_write")
        window = client.server_info.publish_window
        peak = 0

        async def one(index):
            nonlocal peak
            confirm = await client.publish("window.x", b"%d" % index, mode="reliable")
            # Publishes still in flight when this one's confirm is back: its
            # own slot is already released and may already be taken by a
            # waiting publish, so counting it as well would overcount.
            peak = max(peak, client._window.used)
            return confirm

        confirms = await asyncio.gather(*(one(index) for index in range(window + 500)))
        assert all(confirm.status is sift.ConfirmStatus.ACCEPTED for confirm in confirms)
        assert peak <= window
        assert len(await collect(subscription, window + 500)) == window + 500


async def test_expired_messages_are_not_delivered(broker):
    async with await connect(broker) as client:
        # Credit 0: nothing is written until granted, so the short-lived message expires queued.
        subscription = await client.subscribe("ttl.>", credit=0)
        # A microsecond to live: it has expired before the confirms of both
        # publishes come back, so before the grant lets the broker write it.
        await client.publish("ttl.x", b"short-lived", mode="reliable", ttl=0.000001)
        await client.publish("ttl.x", b"sentinel", mode="reliable")
        await subscription.grant(10)
        assert await until_sentinel(subscription) == []


async def test_priority_orders_a_queue(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("prio.>", credit=0)
        for priority in (1, 9, 4):
            await client.publish("prio.x", b"%d" % priority, priority=priority, mode="reliable")
        await subscription.grant(3)
        assert [d.payload for d in await collect(subscription, 3)] == [b"9", b"4", b"1"]


async def test_keep_last_policy_keeps_only_the_newest(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("keep.>", credit=0, policy="keep-last:1")
        for index in range(3):
            await client.publish("keep.x", b"%d" % index)
        await subscription.grant(5)
        assert (await subscription.next(timeout=10)).payload == b"2"
        await client.publish("keep.x", b"sentinel")
        assert await until_sentinel(subscription) == []


async def test_invalid_publishes_raise_typed_errors(broker):
    async with await connect(broker) as client:
        with pytest.raises(sift.InvalidTopicError) as topic_error:
            await client.publish("bad..topic", b"x")
        assert topic_error.value.code == "invalid_topic"
        with pytest.raises(sift.InvalidFieldError) as metadata_error:
            await client.publish("ok.topic", b"x", metadata="<metadata>")
        assert "not a well-formed XML document" in metadata_error.value.message
        assert metadata_error.value.position == 10
        with pytest.raises(sift.LimitExceededError) as size_error:
            await client.publish("ok.topic", b"x" * (client.server_info.max_payload_bytes + 1))
        assert size_error.value.code == "max_payload_bytes"
        with pytest.raises(ValueError):
            await client.publish("ok.topic", b"x", priority=10)
        # The connection is still usable.
        assert (await client.publish("ok.topic", b"x")).status is sift.ConfirmStatus.NO_SUBSCRIBERS
