"""Subscribing with the Python SDK against a real broker: filters, groups, acks, errors."""

import asyncio

import pytest

import sift
from conftest import start_broker
from sdk_support import broker_config, collect, connect, until_sentinel


@pytest.mark.parametrize(
    "kind, text, matching, not_matching",
    [
        ("tags", 'sym="IBM",qty>2', {"sym": "IBM", "qty": 3}, {"sym": "IBM", "qty": 1}),
        ("sql", "qty > 2 AND sym IN ('IBM', 'HP')", {"sym": "HP", "qty": 5}, {"sym": "SUN", "qty": 5}),
    ],
)
async def test_property_filters(broker, kind, text, matching, not_matching):
    async with await connect(broker) as client:
        subscription = await client.subscribe("quotes.>", **{kind: text})
        refused = await client.publish("quotes.a", b"no", properties=not_matching)
        assert refused.status is sift.ConfirmStatus.NO_SUBSCRIBERS
        accepted = await client.publish("quotes.a", b"yes", properties=matching)
        assert accepted.status is sift.ConfirmStatus.ACCEPTED and accepted.matched == 1
        delivery = await subscription.next(timeout=10)
        assert delivery.payload == b"yes" and delivery.properties == matching


async def test_xpath_filter_reads_the_metadata(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("docs.>", xpath="/order[@qty > 2]/item[text() = 'pen']")
        for payload, metadata in [
            (b"no-qty", "<order qty='1'><item>pen</item></order>"),
            (b"no-item", "<order qty='5'><item>ink</item></order>"),
            (b"no-metadata", None),
            (b"yes", "<order qty='5'><item>pen</item></order>"),
        ]:
            await client.publish("docs.x", payload, metadata=metadata)
        delivery = await subscription.next(timeout=10)
        assert delivery.payload == b"yes"


async def test_regex_filter_reads_the_topic(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe(">", regex=r"^sensors\.(kitchen|hall)\.temp$")
        for topic in ("sensors.garage.temp", "sensors.kitchen.humidity", "sensors.hall.temp"):
            await client.publish(topic, topic.encode())
        assert (await subscription.next(timeout=10)).topic == "sensors.hall.temp"


async def test_topic_wildcards(broker):
    async with await connect(broker) as client:
        one_token = await client.subscribe("a.*")
        rest = await client.subscribe("a.>")
        for topic in ("a.b", "a.b.c", "b.a"):
            await client.publish(topic, topic.encode())
        await client.publish("a.end", b"sentinel")
        assert await until_sentinel(one_token) == [b"a.b"]
        assert await until_sentinel(rest) == [b"a.b", b"a.b.c"]


async def test_queue_group_gives_each_message_to_one_member(broker):
    async with await connect(broker) as first, await connect(broker) as second, await connect(broker) as publisher:
        members = [await first.subscribe("work.>", queue="workers"), await second.subscribe("work.>", queue="workers")]
        for index in range(20):
            confirm = await publisher.publish("work.item", b"%d" % index, mode="reliable")
            assert confirm.matched == 1  # a group counts once
        received = {0: [], 1: []}

        async def drain(number):
            async for delivery in members[number]:
                received[number].append(delivery.payload)
                if len(received[0]) + len(received[1]) == 20:
                    return

        tasks = [asyncio.create_task(drain(0)), asyncio.create_task(drain(1))]
        await asyncio.wait_for(asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED), 10)
        for task in tasks:
            task.cancel()
        everything = received[0] + received[1]
        assert sorted(everything) == sorted(b"%d" % index for index in range(20))
        assert received[0] and received[1]


async def test_manual_ack_nack_and_redelivery(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("jobs.>", ack="manual")
        await client.publish("jobs.x", b"job", mode="reliable")
        first = await subscription.next(timeout=10)
        assert first.needs_ack and not first.redelivered
        await first.nack(requeue=True)
        again = await subscription.next(timeout=10)
        assert again.payload == b"job" and again.redelivered
        assert again.delivery_tag != first.delivery_tag
        await again.nack(requeue=False)  # dropped
        await client.publish("jobs.x", b"sentinel", mode="reliable")
        sentinel = await subscription.next(timeout=10)
        assert sentinel.payload == b"sentinel"
        await sentinel.ack()


async def test_unacknowledged_deliveries_are_redelivered_after_the_ack_timeout():
    broker = start_broker(extra_args=("--config", broker_config("[delivery]\nack_timeout_ms = 200\n")))
    try:
        async with await connect(broker) as client:
            assert client.server_info.ack_timeout_ms == 200
            subscription = await client.subscribe("late.>", ack="manual")
            await client.publish("late.x", b"once", mode="reliable")
            first = await subscription.next(timeout=10)
            again = await subscription.next(timeout=10)  # not acknowledged: comes back
            assert again.redelivered and again.id == first.id
            await again.ack()
            await client.publish("late.x", b"sentinel", mode="reliable")
            sentinel = await subscription.next(timeout=10)
            await sentinel.ack()
            assert sentinel.payload == b"sentinel"
    finally:
        broker.stop()


async def test_auto_ack_acknowledges_when_taken_and_on_write_needs_no_ack(broker):
    async with await connect(broker) as subscriber, await connect(broker) as publisher:
        auto = await subscriber.subscribe("acks.auto")
        on_write = await subscriber.subscribe("acks.write", ack=sift.AckMode.ON_WRITE)
        confirm_task = asyncio.create_task(publisher.publish("acks.auto", b"a", mode="reliable", await_delivered=True))
        delivery = await auto.next(timeout=10)
        assert delivery.delivery_tag != 0
        assert (await confirm_task).status is sift.ConfirmStatus.DELIVERED
        confirm = await publisher.publish("acks.write", b"w", mode="reliable", await_delivered=True)
        assert confirm.status is sift.ConfirmStatus.DELIVERED
        assert (await on_write.next(timeout=10)).delivery_tag == 0


async def test_credit_mode_delivers_only_what_is_granted(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("credit.>", credit=1)
        for index in range(3):
            await client.publish("credit.x", b"%d" % index, mode="reliable")
        assert (await subscription.next(timeout=10)).payload == b"0"
        await client.flush()
        assert subscription.buffered == 0  # no credit left: nothing more is written
        await subscription.grant(2)
        assert [d.payload for d in await collect(subscription, 2)] == [b"1", b"2"]
        await client.publish("credit.x", b"sentinel", mode="reliable")
        await subscription.grant(1)
        assert (await subscription.next(timeout=10)).payload == b"sentinel"


async def test_unsubscribe_ends_iteration_and_stops_deliveries(broker):
    async with await connect(broker) as client:
        subscription = await client.subscribe("gone.>")
        other = await client.subscribe("gone.>")
        await subscription.unsubscribe()
        with pytest.raises(StopAsyncIteration):
            await subscription.next(timeout=10)
        confirm = await client.publish("gone.x", b"sentinel")
        assert confirm.matched == 1  # only `other` is left
        assert (await other.next(timeout=10)).payload == b"sentinel"


async def test_subscription_errors_carry_the_code_and_position(broker):
    async with await connect(broker) as client:
        with pytest.raises(sift.InvalidFilterError) as filter_error:
            await client.subscribe("orders.>", sql="price >")
        error = filter_error.value
        assert error.code == "invalid_filter" and error.number == 11
        assert error.message == "content filter: sql: at byte 7: expected an operand, found end of input"
        assert error.position == 7
        with pytest.raises(sift.InvalidFilterError) as regex_error:
            await client.subscribe("orders.>", regex="(unclosed")
        assert regex_error.value.message.startswith("content filter: regex: at byte")
        with pytest.raises(sift.InvalidTopicError) as topic_error:
            await client.subscribe("orders..x")
        assert topic_error.value.code == "invalid_topic"
        with pytest.raises(sift.StreamError) as stream_error:
            await client.subscribe("orders.>", stream="no-such-stream", start="first")
        assert stream_error.value.code == "unknown_stream"
        with pytest.raises(ValueError):
            await client.subscribe("orders.>", sql="a = 1", tags="a=1")
        # Refusals leave the connection usable.
        assert (await client.subscribe("orders.>")).id > 0
