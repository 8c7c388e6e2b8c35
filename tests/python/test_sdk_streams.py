"""Stream subscriptions with the Python SDK: replays and durable subscriptions, across restarts."""

import asyncio

import pytest

import sift
from conftest import start_broker
from sdk_support import collect, connect, until_sentinel


async def test_replay_from_first_then_live(broker):
    async with await connect(broker) as client:
        for index in range(3):
            await client.publish("replay.x", b"stored-%d" % index, mode="persistent")
        await client.publish("other.x", b"not-this-topic", mode="persistent")
        replay = await client.subscribe("replay.>", start="first")
        stored = await collect(replay, 3)
        assert [d.payload for d in stored] == [b"stored-0", b"stored-1", b"stored-2"]
        sequences = [d.stream_seq for d in stored]
        assert sequences == sorted(sequences) and sequences[0] >= 1
        assert all(d.delivery_tag != 0 for d in stored)  # stream deliveries always need an ack
        await client.publish("replay.x", b"live", mode="persistent")
        live = await replay.next(timeout=10)
        assert live.payload == b"live" and live.stream_seq > sequences[-1]


async def test_replay_of_the_last_n(broker):
    async with await connect(broker) as client:
        for index in range(5):
            await client.publish("tail.x", b"%d" % index, mode="persistent")
        replay = await client.subscribe("tail.>", start="last:2")
        assert [d.payload for d in await collect(replay, 2)] == [b"3", b"4"]


async def test_durable_subscription_keeps_messages_while_away(broker):
    async with await connect(broker) as publisher:
        async with await connect(broker, name="durable-reader") as reader:
            durable = await reader.subscribe("orders.>", durable="audit", sql="qty > 0")
            await publisher.publish("orders.new", b"seen", properties={"qty": 1}, mode="persistent")
            delivery = await durable.next(timeout=10)
            assert delivery.payload == b"seen" and delivery.stream_seq > 0
            # auto ack: acknowledged when taken; the close flushes the ACK before CLOSE.
        for index in range(3):
            confirm = await publisher.publish("orders.new", b"away-%d" % index, properties={"qty": 1}, mode="persistent")
            assert confirm.status is sift.ConfirmStatus.ACCEPTED and confirm.matched == 0
        async with await connect(broker, name="durable-reader") as reader:
            durable = await reader.subscribe("orders.>", durable="audit", sql="qty > 0")
            assert [d.payload for d in await collect(durable, 3)] == [b"away-0", b"away-1", b"away-2"]
            with pytest.raises(sift.StreamError) as mismatch:
                await reader.subscribe("orders.>", durable="audit", sql="qty > 5")
            assert mismatch.value.code in ("durable_in_use", "durable_mismatch")


async def test_durable_subscription_survives_a_broker_restart(broker):
    async with await connect(broker) as client:
        durable = await client.subscribe("ledger.>", durable="books", ack="manual")
        await client.publish("ledger.x", b"before", mode="persistent")
        delivery = await durable.next(timeout=10)
        await delivery.ack()
        await durable.unsubscribe()
        await client.publish("ledger.x", b"while-away", mode="persistent")
    broker.stop()
    restarted = start_broker(listen=broker.native, data_dir=broker.data_dir)
    try:
        async with await connect(restarted) as client:
            durable = await client.subscribe("ledger.>", durable="books", ack="manual")
            await client.publish("ledger.x", b"sentinel", mode="persistent")
            # A crash may redeliver an acknowledgement not yet on disk (at least once), never lose one.
            seen = await until_sentinel(durable)
            assert b"while-away" in seen and set(seen) <= {b"before", b"while-away"}
    finally:
        restarted.stop()


async def test_shared_durable_gives_each_message_to_one_consumer(broker):
    async with await connect(broker) as first, await connect(broker) as second:
        consumers = [
            await first.subscribe("shared.>", durable="pool", shared=True),
            await second.subscribe("shared.>", durable="pool", shared=True),
        ]
        for index in range(10):
            await first.publish("shared.x", b"%d" % index, mode="persistent")
        seen = []

        async def gather_all():
            while len(seen) < 10:
                for consumer in consumers:
                    delivery = consumer.next_nowait()
                    if delivery is not None:
                        seen.append(delivery.payload)
                if len(seen) < 10:
                    await first.ping()

        await asyncio.wait_for(gather_all(), 10)
        assert sorted(seen) == sorted(b"%d" % index for index in range(10))
