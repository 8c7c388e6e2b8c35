"""Subscriptions as the application sees them: an async iterator of deliveries.

The client's reader appends every delivery of one socket read to the
subscription's buffer and wakes the iterator once, so a busy subscription
costs one wake-up per read rather than one per message, and `__anext__`
returns buffered deliveries without suspending.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Callable, Optional

from .errors import ClientClosedError
from .message import Delivery
from .signing import SignatureError, Verifier
from .types import AckMode, Gap

if TYPE_CHECKING:
    from .client import Client


_log = logging.getLogger("sift.subscription")


class Subscription:
    """A live subscription: `async for delivery in subscription: ...`.

    Iteration ends after `unsubscribe()` or `Client.close()`; it raises the
    broker's error when the broker ends the subscription (for example when it
    could not be restored after a reconnect). Gaps of a stream subscription
    (stored messages it will never get) are collected in `gaps` and passed to
    `on_gap` if given.

    The subscription keeps its id across reconnections: the client opens it
    again under the same id, so iteration carries on.
    """

    def __init__(
        self,
        client: Client,
        sub_id: int,
        topic_filter: str,
        subscribe_frame: bytes,
        ack: AckMode,
        max_buffered: int,
        on_gap: Optional[Callable[[Gap], None]],
        verifier: Verifier | None = None,
    ) -> None:
        self._client = client
        self.id = sub_id
        self.topic_filter = topic_filter
        self.ack_mode = ack
        #: Gaps met so far (stream subscriptions only).
        self.gaps: list[Gap] = []
        self._subscribe_frame = subscribe_frame
        self._auto_ack = ack is AckMode.AUTO
        self._buffer: deque[Delivery] = deque()
        self._max_buffered = max_buffered
        self._resume_below = max_buffered // 2
        self._waiter: asyncio.Future[None] | None = None
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._on_gap = on_gap
        self._ended = False
        self._error: BaseException | None = None
        self._holding_reads = False
        self._verifier = verifier

    def __repr__(self) -> str:
        return f"Subscription(id={self.id}, topic_filter={self.topic_filter!r}, buffered={len(self._buffer)})"

    @property
    def closed(self) -> bool:
        """True once the subscription has ended (unsubscribed, refused, or the client closed)."""
        return self._ended

    @property
    def buffered(self) -> int:
        """Deliveries received and not yet taken by the application."""
        return len(self._buffer)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Delivery:
        buffer = self._buffer
        while True:
            while not buffer:
                if self._ended:
                    error = self._error
                    if error is not None:
                        self._error = None
                        raise error
                    raise StopAsyncIteration
                self._waiter = waiter = asyncio.get_running_loop().create_future()
                try:
                    await waiter
                finally:
                    self._waiter = None
            delivery = self._take()
            if delivery is not None:
                return delivery

    def _take(self) -> Delivery | None:
        """The next buffered delivery, acknowledged if auto-ack; None if it failed verification."""
        buffer = self._buffer
        delivery = buffer.popleft()
        if self._holding_reads and len(buffer) <= self._resume_below:
            self._holding_reads = False
            self._client._release_reads(self)
        if self._verifier is not None:
            try:
                self._verifier.verify(delivery)
            except SignatureError as error:
                _log.warning("subscription %d refused a message on %s: %s", self.id, delivery.topic, error)
                if delivery.delivery_tag and not delivery._settled and delivery._acknowledger is not None:
                    delivery._settled = True
                    delivery._acknowledger._nack_tag(delivery.delivery_tag, False)
                return None
        if self._auto_ack and delivery.delivery_tag:
            delivery.ack_nowait()
        return delivery

    async def next(self, timeout: float | None = None) -> Delivery:
        """The next delivery; `TimeoutError` after `timeout` seconds, `StopAsyncIteration` once ended."""
        if timeout is None:
            return await self.__anext__()
        return await asyncio.wait_for(self.__anext__(), timeout)

    def next_nowait(self) -> Delivery | None:
        """A delivery if one is already buffered, else None, without waiting."""
        while self._buffer:
            delivery = self._take()
            if delivery is not None:
                return delivery
        return None

    async def grant(self, credit: int) -> None:
        """Grants `credit` more deliveries to a subscription opened with `credit=` (FLOW)."""
        if self._ended:
            raise ClientClosedError("the subscription has ended")
        self._client._send_flow(self.id, credit)

    async def unsubscribe(self) -> None:
        """Closes the subscription at the broker and ends iteration.

        Deliveries still buffered are dropped; unacknowledged reliable ones
        are redelivered by the broker to other queue-group members, or lost.
        """
        if self._ended:
            return
        self._client._unsubscribe(self)
        self._buffer.clear()
        self._end(None)

    # -- called by the client's reader ----------------------------------

    def _deliver_gap(self, gap: Gap) -> None:
        self.gaps.append(gap)
        if self._on_gap is not None:
            self._on_gap(gap)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _end(self, error: BaseException | None) -> None:
        """Ends iteration: after the buffered deliveries, or at once with `error`."""
        if self._ended:
            return
        self._ended = True
        if error is not None:
            self._error = error
            self._buffer.clear()
        if not self._ready.done():
            self._ready.set_exception(error or ClientClosedError("the client closed before the broker answered"))
            self._ready.exception()  # retrieved: nobody may be waiting any more
        if self._holding_reads:
            self._holding_reads = False
            self._client._release_reads(self)
        self._wake()
