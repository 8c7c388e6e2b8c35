"""Received messages: `Delivery`, one message handed to a subscription.

A slotted class with a positional constructor, because the reader builds one
per DELIVER and that is the receive path's hottest allocation.
"""

from __future__ import annotations

from typing import Protocol

from .types import DeliveryMode, PropertyValue


class Acknowledger(Protocol):
    """What a delivery needs to acknowledge itself: the client that received it."""

    def _ack_tag(self, tag: int) -> None: ...

    def _nack_tag(self, tag: int, requeue: bool) -> None: ...


class Delivery:
    """A message delivered to a subscription, with the means to acknowledge it.

    The message fields are the publisher's (`topic`, `payload`, `properties`,
    `metadata`, `priority`, `mode`, `sequence`, `expiry_ns`) plus the broker's
    stamps (`id`, `timestamp_ns`, `publisher`). `delivery_tag` is 0 when no
    acknowledgement is expected (best-effort messages, on-write ack mode).

    `timestamp_ns` is in the broker's clock. It is the broker's acceptance
    time, unless the publisher stamped its own send time (PUBLISHER_TIME,
    carried into the broker's clock); then `time_error_ns` is the bound on
    how far that reading may be from the true instant. Broker-stamped
    messages have `time_error_ns` 0.
    """

    __slots__ = (
        "sub_id",
        "delivery_tag",
        "redelivered",
        "stream_seq",
        "topic",
        "priority",
        "mode",
        "id",
        "sequence",
        "timestamp_ns",
        "expiry_ns",
        "publisher",
        "properties",
        "metadata",
        "payload",
        "hop_count",
        "time_error_ns",
        "_acknowledger",
        "_settled",
    )

    def __init__(
        self,
        sub_id: int,
        delivery_tag: int,
        redelivered: bool,
        stream_seq: int,
        topic: str,
        priority: int,
        mode: int,
        hop_count: int,
        id: int,
        sequence: int,
        timestamp_ns: int,
        expiry_ns: int,
        publisher: str,
        properties: dict[str, PropertyValue],
        metadata: bytes | None,
        payload: bytes,
        time_error_ns: int = 0,
    ) -> None:
        self.sub_id = sub_id
        self.delivery_tag = delivery_tag
        self.redelivered = redelivered
        #: Its sequence in the stream a replay or durable subscription reads; 0 for live deliveries.
        self.stream_seq = stream_seq
        self.topic = topic
        self.priority = priority
        #: The delivery mode code; see `delivery_mode` for the enum.
        self.mode = mode
        self.hop_count = hop_count
        self.id = id
        self.sequence = sequence
        self.timestamp_ns = timestamp_ns
        self.expiry_ns = expiry_ns
        self.publisher = publisher
        self.properties = properties
        self.metadata = metadata
        self.payload = payload
        #: Bound (ns) on the error of `timestamp_ns`; non-zero only for publisher-stamped times.
        self.time_error_ns = time_error_ns
        self._acknowledger: Acknowledger | None = None
        self._settled = False

    @property
    def delivery_mode(self) -> DeliveryMode:
        return DeliveryMode(self.mode)

    @property
    def text(self) -> str:
        """The payload as UTF-8 text."""
        return self.payload.decode("utf-8")

    @property
    def needs_ack(self) -> bool:
        """True when the broker waits for an acknowledgement of this delivery."""
        return self.delivery_tag != 0

    async def ack(self) -> None:
        """Acknowledges the delivery (a no-op when it needs none, or was already settled).

        Acknowledgements are batched: they go out with the client's next write.
        """
        self.ack_nowait()

    def ack_nowait(self) -> None:
        """`ack()` without a coroutine, for tight loops."""
        if self.delivery_tag and not self._settled and self._acknowledger is not None:
            self._settled = True
            self._acknowledger._ack_tag(self.delivery_tag)

    async def nack(self, requeue: bool = True) -> None:
        """Refuses the delivery: the broker redelivers it (`requeue`) or drops it."""
        if self.delivery_tag and not self._settled and self._acknowledger is not None:
            self._settled = True
            self._acknowledger._nack_tag(self.delivery_tag, requeue)

    def __repr__(self) -> str:
        return (
            f"Delivery(topic={self.topic!r}, payload={self.payload[:64]!r}, properties={self.properties!r}, "
            f"sub_id={self.sub_id}, delivery_tag={self.delivery_tag}, redelivered={self.redelivered}, "
            f"stream_seq={self.stream_seq})"
        )
