"""Time-ordering of received messages: NaradaBrokering's buffering service, sans I/O.

Messages from several publishers reach a subscriber in the order the broker
routed them, not in the order they were sent. With publisher timestamps
(`publish(publisher_time=True)`, carried into the broker's clock) a receiver
can restore send order by holding messages a little and releasing them
sorted by timestamp. How long to hold is the trade-off between order and
latency, so the buffer is bounded three ways, each a release rule:

* `entries`: it holds `max_entries` items;
* `bytes`: it holds `max_bytes` bytes;
* `wait`: the item that arrived first has waited `max_wait_s`.

When a rule fires the buffer releases, in timestamp order, at least
`ceil(release_factor x entries held)` items (a factor of 0.5 keeps half the
buffer to absorb stragglers; 1.0 empties it), then keeps releasing while
the earliest-timestamped item has itself waited `max_wait_s`, and repeats
until no rule holds. An item whose timestamp is below the last one released
is *late*: order can no longer be restored for it, so it is released at once
rather than held back for nothing.

The buffer never reads a clock: callers pass `now_s` (any monotonic clock in
seconds), which keeps it deterministic under test. `ordered()` drives it from
a subscription.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections import deque
from typing import TYPE_CHECKING, AsyncIterator, Callable, Generic, TypeVar

if TYPE_CHECKING:
    from .message import Delivery
    from .subscription import Subscription

T = TypeVar("T")


class _Entry(Generic[T]):
    """One held item; `held` turns False on release, so the arrival queue can skip it lazily."""

    __slots__ = ("timestamp_ns", "order", "arrived_s", "size", "item", "held")

    def __init__(self, timestamp_ns: int, order: int, arrived_s: float, size: int, item: T) -> None:
        self.timestamp_ns = timestamp_ns
        self.order = order
        self.arrived_s = arrived_s
        self.size = size
        self.item = item
        self.held = True

    def __lt__(self, other: _Entry[T]) -> bool:
        # Timestamp order; arrival order among equal timestamps.
        if self.timestamp_ns != other.timestamp_ns:
            return self.timestamp_ns < other.timestamp_ns
        return self.order < other.order


class OrderingBuffer(Generic[T]):
    """Holds items and releases them in timestamp order, within bounds of count, size and wait.

    Counters: `released` (every item handed back, late ones included),
    `late`, and `releases_by_entries`, `releases_by_bytes`,
    `releases_by_wait` (release rounds by the rule that fired them; when
    several hold at once the first of entries, bytes, wait is counted).
    """

    def __init__(self, max_entries: int = 1024, max_bytes: int = 16 * 1024 * 1024, max_wait_s: float = 0.1,
                 release_factor: float = 0.5) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        if not max_wait_s >= 0:
            raise ValueError(f"max_wait_s must be 0 or more, not {max_wait_s}")
        if not 0.5 <= release_factor <= 1.0:
            raise ValueError(f"release_factor must be between 0.5 and 1.0, not {release_factor}")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_wait_s = max_wait_s
        self.release_factor = release_factor
        self._heap: list[_Entry[T]] = []
        self._arrivals: deque[_Entry[T]] = deque()
        self._bytes = 0
        self._order = 0
        self._last_released_ns: int | None = None
        self.released = 0
        self.late = 0
        self.releases_by_entries = 0
        self.releases_by_bytes = 0
        self.releases_by_wait = 0

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def held_bytes(self) -> int:
        """Bytes of the items held."""
        return self._bytes

    @property
    def last_released_ns(self) -> int | None:
        """The timestamp of the last item released in order; items below it are late."""
        return self._last_released_ns

    def push(self, item: T, timestamp_ns: int, size_bytes: int, now_s: float) -> list[T]:
        """Adds `item` and returns what is released now, in order (a late item first)."""
        if self._last_released_ns is not None and timestamp_ns < self._last_released_ns:
            self.late += 1
            self.released += 1
            return [item, *self.poll(now_s)]
        entry = _Entry(timestamp_ns, self._order, now_s, size_bytes, item)
        self._order += 1
        heapq.heappush(self._heap, entry)
        self._arrivals.append(entry)
        self._bytes += size_bytes
        return self.poll(now_s)

    def poll(self, now_s: float) -> list[T]:
        """What the rules release at `now_s` (call it by `next_deadline()` when nothing arrives).

        Waits compare as `now_s >= arrived + max_wait_s`, the very sum
        `next_deadline()` returns, so polling at the deadline always releases.
        """
        out: list[T] = []
        while self._heap:
            if len(self._heap) >= self.max_entries:
                self.releases_by_entries += 1
            elif self._bytes >= self.max_bytes:
                self.releases_by_bytes += 1
            elif now_s >= self._oldest_arrival() + self.max_wait_s:
                self.releases_by_wait += 1
            else:
                break
            for _ in range(math.ceil(self.release_factor * len(self._heap))):
                out.append(self._release())
            while self._heap and now_s >= self._heap[0].arrived_s + self.max_wait_s:
                out.append(self._release())
        return out

    def next_deadline(self) -> float | None:
        """When (in the callers' `now_s` clock) the wait rule fires next; None when empty."""
        if not self._heap:
            return None
        return self._oldest_arrival() + self.max_wait_s

    def flush(self) -> list[T]:
        """Releases everything held, in timestamp order (for example when the input ends)."""
        return [self._release() for _ in range(len(self._heap))]

    def _oldest_arrival(self) -> float:
        arrivals = self._arrivals
        while not arrivals[0].held:
            arrivals.popleft()
        return arrivals[0].arrived_s

    def _release(self) -> T:
        entry = heapq.heappop(self._heap)
        entry.held = False
        self._bytes -= entry.size
        self._last_released_ns = entry.timestamp_ns
        self.released += 1
        item = entry.item
        entry.item = None  # type: ignore[assignment]  # the arrival queue may keep the entry a while
        return item


async def ordered(
    subscription: Subscription,
    buffer: OrderingBuffer[Delivery],
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[Delivery]:
    """The deliveries of `subscription` in timestamp order, through `buffer`.

    Orders by `timestamp_ns`, which is in the broker's clock for every
    message (publisher-stamped ones were carried into it), so the order is
    consistent across publishers. `clock` (seconds, monotonic) measures how
    long deliveries wait. When the subscription ends, what is held is
    released, in order, before the iteration ends. Deliveries are taken
    from the subscription (and, in ack mode `auto`, acknowledged) as they
    arrive, not as they are released. If the subscription ends with an
    error, the error propagates and what was held stays in `buffer`.
    """
    ready: deque[Delivery] = deque()
    while True:
        while ready:
            yield ready.popleft()
        delivery = subscription.next_nowait()
        if delivery is None:
            deadline = buffer.next_deadline()
            if deadline is not None and deadline <= clock():
                ready.extend(buffer.poll(clock()))
                continue
            try:
                if deadline is None:
                    delivery = await subscription.__anext__()
                else:
                    delivery = await asyncio.wait_for(subscription.__anext__(), max(0.0, deadline - clock()))
            except asyncio.TimeoutError:
                ready.extend(buffer.poll(clock()))
                continue
            except StopAsyncIteration:
                for delivery in buffer.flush():
                    yield delivery
                return
        ready.extend(buffer.push(delivery, delivery.timestamp_ns, len(delivery.payload), clock()))
