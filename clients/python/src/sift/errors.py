"""Exceptions: the broker's refusals, typed by error code, and the client's own failures.

Every broker ERROR becomes a `BrokerError` subclass chosen by its code, so that
an application can catch `InvalidFilterError` rather than compare numbers, and
still read the code's name (`invalid_filter`) and the broker's message.
"""

from __future__ import annotations

import re

#: Error code numbers and their names (docs/PROTOCOL.md §6.15).
ERROR_CODE_NAMES: dict[int, str] = {
    1: "malformed",
    2: "unsupported_version",
    3: "max_frame_bytes",
    4: "max_payload_bytes",
    5: "max_subscriptions_per_connection",
    6: "max_filter_bytes",
    7: "max_connections",
    8: "handshake_timeout_ms",
    9: "max_pending_bytes_per_connection",
    10: "invalid_topic",
    11: "invalid_filter",
    12: "unsupported",
    13: "unknown_subscription",
    14: "duplicate_subscription",
    15: "unknown_delivery_tag",
    16: "unexpected_frame",
    17: "slow_consumer",
    18: "shutting_down",
    19: "invalid_field",
    20: "internal",
    21: "storage_full",
    22: "storage_error",
    23: "unknown_stream",
    24: "stream_exists",
    25: "unknown_durable",
    26: "durable_in_use",
    27: "durable_mismatch",
    28: "auth_required",
    29: "auth_failed",
    30: "permission_denied",
    31: "tls_required",
    32: "bad_signature",
    33: "queue_full",
    34: "no_quorum",
}

_POSITION = re.compile(r"\bat byte (\d+)")


class SiftError(Exception):
    """Base of every exception this package raises."""


class ConnectError(SiftError):
    """The client could not connect, or the handshake failed."""


class ConnectionLostError(SiftError):
    """The connection dropped before the broker answered a request the client does not resend
    (a confirmed best-effort publish, a ping)."""


class ClientClosedError(SiftError):
    """The client is closed (or closing)."""


class EncodeError(SiftError, ValueError):
    """A request cannot be encoded: a field is too long or a value of the wrong type."""


class BrokerError(SiftError):
    """The broker refused something with an ERROR frame.

    `code` is the code's name (`invalid_filter`), `number` its number (11),
    `message` the broker's explanation, `fatal` whether the broker closed the
    connection after it, `reference` the request id or subscription id it concerns.
    """

    number: int = 0

    def __init__(self, number: int, message: str, *, fatal: bool = False, reference: int = 0) -> None:
        self.number = number
        self.code = ERROR_CODE_NAMES.get(number, "unknown")
        self.message = message
        self.fatal = fatal
        self.reference = reference
        super().__init__(f"{self.code}: {message}")

    @property
    def position(self) -> int | None:
        """The byte offset the broker names (`at byte N`) in a filter or metadata error, if any."""
        match = _POSITION.search(self.message)
        return int(match.group(1)) if match else None

    @staticmethod
    def from_frame(number: int, message: str, *, fatal: bool = False, reference: int = 0) -> BrokerError:
        """The exception of the most specific class for `number`."""
        cls = _CLASSES.get(number, BrokerError)
        return cls(number, message, fatal=fatal, reference=reference)


class MalformedError(BrokerError):
    number = 1


class LimitExceededError(BrokerError):
    """One of the broker's limits: frame, payload, filter, subscriptions, connections, pending bytes."""


class InvalidTopicError(BrokerError):
    number = 10


class InvalidFilterError(BrokerError):
    """A content filter that does not parse; `position` is where the broker found the problem."""

    number = 11


class InvalidFieldError(BrokerError):
    number = 19


class UnknownSubscriptionError(BrokerError):
    number = 13


class DuplicateSubscriptionError(BrokerError):
    number = 14


class SlowConsumerError(BrokerError):
    number = 17


class ShuttingDownError(BrokerError):
    number = 18


class StorageError(BrokerError):
    """A persistent message could not be stored (`storage_full`, `storage_error`)."""


class StreamError(BrokerError):
    """Streams and durables: unknown, existing, in use or mismatched."""


class BadSignatureError(BrokerError):
    """The topic requires signed messages and this one is unsigned, signed by a key not listed, or forged."""


_CLASSES: dict[int, type[BrokerError]] = {
    1: MalformedError,
    3: LimitExceededError,
    4: LimitExceededError,
    5: LimitExceededError,
    6: LimitExceededError,
    7: LimitExceededError,
    9: LimitExceededError,
    10: InvalidTopicError,
    11: InvalidFilterError,
    13: UnknownSubscriptionError,
    14: DuplicateSubscriptionError,
    17: SlowConsumerError,
    18: ShuttingDownError,
    19: InvalidFieldError,
    21: StorageError,
    22: StorageError,
    23: StreamError,
    24: StreamError,
    25: StreamError,
    26: StreamError,
    27: StreamError,
    32: BadSignatureError,
}
