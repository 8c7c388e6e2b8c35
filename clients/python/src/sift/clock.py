"""Clock synchronisation with the broker: NTP's arithmetic and clock filter, sans I/O.

One TIME / TIME_REPLY exchange gives four readings: `origin` (our clock when
TIME left), `receive` and `transmit` (the broker's clock when TIME arrived and
when the reply left) and `arrival` (our clock when the reply arrived). The
network time is the round trip less the broker's turnaround; the offset
estimate assumes both legs took equally long, so it is wrong by at most half
the round trip, whatever the asymmetry. That half round trip is the bound.

A bound only holds as long as neither clock drifts, so it grows with the
sample's age (50 ppm, a generous crystal tolerance). Of the last eight
samples the filter trusts the one with the smallest bound *now*: a sample
with a short round trip stays best until age makes a newer one better
(NTP's clock filter). All arithmetic is on integers, so nothing is lost to
floating point at nanosecond resolution 56 years past the epoch.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .errors import SiftError

DRIFT_PPM = 50
"""Assumed worst-case drift between the two clocks, in parts per million."""
FILTER_SIZE = 8
"""Samples the filter keeps (NTP's clock filter keeps eight)."""


class ClockNotSyncedError(SiftError):
    """A publisher-time publish needs an estimate of the broker's clock, and there is none
    (or its bound no longer fits a message): `await client.sync_clock()` first."""


@dataclass(frozen=True)
class ClockSample:
    """One clock exchange: the peer's offset and the round trip, as of `taken_ns` (local clock)."""

    offset_ns: int
    """Peer clock minus local clock."""
    round_trip_ns: int
    """Network time of the exchange: the round trip less the peer's turnaround, at least 0."""
    taken_ns: int
    """Local clock when the reply arrived; the age of the sample counts from here."""

    @classmethod
    def from_exchange(cls, origin_ns: int, receive_ns: int, transmit_ns: int, arrival_ns: int) -> ClockSample:
        """The sample of one exchange: `origin_ns` and `arrival_ns` in the local clock,
        `receive_ns` and `transmit_ns` in the peer's."""
        round_trip = max(0, (arrival_ns - origin_ns) - (transmit_ns - receive_ns))
        # Floor division of the exact sum: at most half a nanosecond off, which the
        # ceiling of the half round trip in the bound covers.
        offset = ((receive_ns - origin_ns) + (transmit_ns - arrival_ns)) // 2
        return cls(offset, round_trip, arrival_ns)

    def error_ns(self, now_ns: int) -> int:
        """The bound on this sample's offset error at local time `now_ns`: half the round
        trip, rounded up, plus the drift the clocks may have accumulated since."""
        age = max(0, now_ns - self.taken_ns)
        return -(-self.round_trip_ns // 2) + -(-age * DRIFT_PPM // 1_000_000)


@dataclass(frozen=True)
class ClockEstimate:
    """The best current knowledge of the peer's clock: `offset_ns` (peer minus local), within
    `error_ns`, from a sample whose round trip was `round_trip_ns`, out of `samples` held."""

    offset_ns: int
    round_trip_ns: int
    error_ns: int
    samples: int

    def to_local(self, peer_ns: int) -> int:
        """A reading of the peer's clock (for example a broker timestamp) in the local clock."""
        return peer_ns - self.offset_ns

    def to_peer(self, local_ns: int) -> int:
        """A reading of the local clock in the peer's clock (to stamp a publish with)."""
        return local_ns + self.offset_ns


class ClockFilter:
    """The last `size` samples; `estimate(now)` picks the one with the smallest bound at `now`."""

    def __init__(self, size: int = FILTER_SIZE) -> None:
        if size < 1:
            raise ValueError(f"a clock filter holds at least 1 sample, not {size}")
        self._samples: deque[ClockSample] = deque(maxlen=size)

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def samples(self) -> tuple[ClockSample, ...]:
        """The samples held, oldest first."""
        return tuple(self._samples)

    def add(self, sample: ClockSample) -> None:
        """Keeps `sample`, forgetting the oldest once `size` are held."""
        self._samples.append(sample)

    def add_exchange(self, origin_ns: int, receive_ns: int, transmit_ns: int, arrival_ns: int) -> ClockSample:
        """Adds the sample of one exchange (see `ClockSample.from_exchange`) and returns it."""
        sample = ClockSample.from_exchange(origin_ns, receive_ns, transmit_ns, arrival_ns)
        self.add(sample)
        return sample

    def clear(self) -> None:
        self._samples.clear()

    def estimate(self, now_ns: int) -> ClockEstimate | None:
        """The estimate from the sample with the smallest bound at local time `now_ns`
        (the newest among equals); None before the first sample."""
        best: ClockSample | None = None
        best_error = 0
        for sample in self._samples:  # oldest first, so `<=` prefers the newest on a tie
            error = sample.error_ns(now_ns)
            if best is None or error <= best_error:
                best, best_error = sample, error
        if best is None:
            return None
        return ClockEstimate(best.offset_ns, best.round_trip_ns, best_error, len(self._samples))
