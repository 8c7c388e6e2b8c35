"""Value types shared by the codec and the client: modes, options, results.

They mirror the protocol's enumerations (docs/PROTOCOL.md §4-§6) with names an
application can read; the numeric codes live in one place here so that the
codec and the client cannot disagree about them.
"""

from __future__ import annotations

import calendar
import datetime
import enum
import re
from dataclasses import dataclass, field
from typing import Union

#: A property value: the four types the wire format can carry.
PropertyValue = Union[bool, int, float, str]


class DeliveryMode(enum.IntEnum):
    """How hard the broker tries to deliver a message (§5.1)."""

    BEST_EFFORT = 0
    """At most once; never confirmed unless asked, never redelivered."""
    RELIABLE = 1
    """At least once while connections last; always confirmed."""
    PERSISTENT = 2
    """Reliable, and stored in a stream before it is confirmed."""

    @classmethod
    def of(cls, mode: DeliveryMode | str | int) -> DeliveryMode:
        """Accepts the enum, its code, or the CLI/HTTP spelling (`best-effort`)."""
        if isinstance(mode, str):
            try:
                return cls[mode.strip().upper().replace("-", "_")]
            except KeyError:
                raise ValueError(f"unknown delivery mode {mode!r}: best-effort, reliable or persistent") from None
        return cls(mode)

    @property
    def label(self) -> str:
        """The spelling of the CLI and the HTTP API (`best-effort`)."""
        return self.name.lower().replace("_", "-")


class ConfirmStatus(str, enum.Enum):
    """Outcome of a confirmed publish (§6.2)."""

    ACCEPTED = "accepted"
    """Matched and handed to the subscribers' queues (or stored)."""
    NO_SUBSCRIBERS = "no_subscribers"
    """Nothing matched by topic and content filter (JBI's 404)."""
    DELIVERED = "delivered"
    """await=delivered: every matched subscription acknowledged."""
    INCOMPLETE = "incomplete"
    """await=delivered: the wait timed out or a subscription lost it."""

    def __str__(self) -> str:
        return self.value


#: Confirm status codes in wire order.
CONFIRM_STATUSES = (
    ConfirmStatus.ACCEPTED,
    ConfirmStatus.NO_SUBSCRIBERS,
    ConfirmStatus.DELIVERED,
    ConfirmStatus.INCOMPLETE,
)


class FilterKind(enum.IntEnum):
    """Content-filter languages (docs/FILTERS.md)."""

    NONE = 0
    TAGS = 1
    """Comma-separated `name OP value` predicates over the properties."""
    SQL = 2
    """A JMS 2.0 message selector over properties and JMS headers."""
    XPATH = 3
    """An XPath 1.0 expression over the XML metadata."""
    REGEX = 4
    """A regular expression searched for in the topic."""


class AckMode(str, enum.Enum):
    """Who acknowledges reliable deliveries, and when."""

    AUTO = "auto"
    """The client acknowledges each delivery when the application takes it."""
    MANUAL = "manual"
    """The application calls `Delivery.ack()` (or `nack()`)."""
    ON_WRITE = "on_write"
    """The broker counts a delivery as acknowledged once it writes it (the
    protocol's `auto` ack mode): fastest, at most once if the client dies."""


class QueuePolicy(str, enum.Enum):
    """What the broker does with a new message for a full queue (§6.9)."""

    BLOCK = "block"
    KEEP_LAST = "keep-last"
    DROP_NEW = "drop-new"
    DISCONNECT = "disconnect"


#: Queue policy codes on the wire; 0xFF asks for the broker's default.
POLICY_CODES = {QueuePolicy.BLOCK: 0, QueuePolicy.KEEP_LAST: 1, QueuePolicy.DROP_NEW: 2, QueuePolicy.DISCONNECT: 3}
POLICY_BROKER_DEFAULT = 0xFF


def parse_policy(policy: QueuePolicy | str | None) -> tuple[int, int]:
    """(code, argument) of a policy given as `block`, `keep-last:N`, ...; None is the broker default."""
    if policy is None:
        return POLICY_BROKER_DEFAULT, 0
    if isinstance(policy, QueuePolicy):
        if policy is QueuePolicy.KEEP_LAST:
            raise ValueError("keep-last needs a count: write it 'keep-last:N'")
        return POLICY_CODES[policy], 0
    name, _, argument = policy.partition(":")
    try:
        kind = QueuePolicy(name.strip())
    except ValueError:
        raise ValueError(f"unknown policy {policy!r}: block, keep-last:N, drop-new or disconnect") from None
    if kind is QueuePolicy.KEEP_LAST:
        count = int(argument) if argument else 0
        if count < 1:
            raise ValueError("keep-last needs a count of at least 1: 'keep-last:N'")
        return POLICY_CODES[kind], count
    if argument:
        raise ValueError(f"policy {name} takes no argument")
    return POLICY_CODES[kind], 0


class StartKind(enum.IntEnum):
    """Where a replay or a new durable subscription starts (§4.7)."""

    NEW = 0
    FIRST = 1
    LAST = 2
    SEQ = 3
    TIME = 4


_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|z|[+-]\d\d:\d\d)$"
)


def rfc3339_to_ns(text: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 time, keeping all 9 fraction digits
    (a float would round them away)."""
    match = _RFC3339.match(text.strip())
    if not match:
        raise ValueError(f"not an RFC 3339 time: {text!r} (e.g. 2026-11-24T18:00:00Z)")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    seconds = calendar.timegm((int(year), int(month), int(day), int(hour), int(minute), int(second), 0, 0, 0))
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    nanos = int((fraction or "").ljust(9, "0"))
    return seconds * 1_000_000_000 + nanos


@dataclass(frozen=True)
class StartPosition:
    """A start position: `new`, `first`, `last:N`, `seq:N` or `time:T`."""

    kind: StartKind
    argument: int = 0

    @classmethod
    def parse(cls, start: StartPosition | str | datetime.datetime) -> StartPosition:
        """Reads the text form of the CLI (`first`, `last:5`, `time:2026-11-24T18:00:00Z`)."""
        if isinstance(start, StartPosition):
            return start
        if isinstance(start, datetime.datetime):
            if start.tzinfo is None:
                raise ValueError("a start time needs a time zone")
            return cls(StartKind.TIME, int(start.timestamp()) * 1_000_000_000 + start.microsecond * 1000)
        name, _, argument = start.strip().partition(":")
        try:
            kind = StartKind[name.upper()]
        except KeyError:
            raise ValueError(f"unknown start {start!r}: new, first, last:N, seq:N or time:RFC3339") from None
        if kind in (StartKind.NEW, StartKind.FIRST):
            if argument:
                raise ValueError(f"start {name} takes no argument")
            return cls(kind)
        if not argument:
            raise ValueError(f"start {name} needs an argument: '{name}:...'")
        if kind is StartKind.TIME and not argument.isdigit():
            return cls(kind, rfc3339_to_ns(argument))
        return cls(kind, int(argument))

    def __str__(self) -> str:
        name = self.kind.name.lower()
        return name if self.kind in (StartKind.NEW, StartKind.FIRST) else f"{name}:{self.argument}"


@dataclass(frozen=True)
class ServerInfo:
    """The broker's WELCOME: who it is and the limits a client must respect (§4.2)."""

    version: int
    server_name: str
    connection_id: int
    max_frame_bytes: int
    max_payload_bytes: int
    max_subscriptions: int
    max_filter_bytes: int
    publish_window: int
    ack_timeout_ms: int


@dataclass(frozen=True)
class Confirm:
    """The broker's answer to a confirmed publish (§4.6)."""

    status: ConfirmStatus
    matched: int
    """Subscriptions matched, each queue group counted once."""
    acked: int = 0
    """await=delivered: subscriptions that acknowledged."""
    pending: tuple[str, ...] = ()
    """await=delivered, incomplete: labels (`client#connection/sub`) that did not acknowledge."""
    stream: str = ""
    """Persistent: the stream the message was stored in."""
    stream_seq: int = 0
    """Persistent: its sequence in that stream."""
    request_id: int = field(default=0, compare=False)


class GapReason(str, enum.Enum):
    """Why a stream subscription will never get some stored messages."""

    REMOVED = "removed"
    """Removed by the stream's retention before it was read."""
    DAMAGED = "damaged"
    """Damaged on disk (its checksum failed)."""


@dataclass(frozen=True)
class Gap:
    """Stored messages `first_seq .. first_seq + count - 1` this subscription will never get."""

    first_seq: int
    count: int
    reason: GapReason
