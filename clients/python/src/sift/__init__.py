"""Sift client: an asyncio client for the Sift broker's native binary protocol.

    import sift

    async with await sift.connect("127.0.0.1", 7400, name="demo") as client:
        subscription = await client.subscribe("orders.>", sql="qty > 2")
        confirm = await client.publish("orders.new", b"hi", properties={"qty": 3}, mode="reliable")
        delivery = await subscription.next(timeout=5)

See README.md for every feature; docs/PROTOCOL.md in the Sift repository specifies the protocol.
"""

from .client import Client, connect
from .clock import ClockEstimate, ClockFilter, ClockNotSyncedError, ClockSample
from .errors import (
    BadSignatureError,
    BrokerError,
    ClientClosedError,
    ConnectError,
    ConnectionLostError,
    DuplicateSubscriptionError,
    EncodeError,
    InvalidFieldError,
    InvalidFilterError,
    InvalidTopicError,
    LimitExceededError,
    MalformedError,
    ShuttingDownError,
    SiftError,
    SlowConsumerError,
    StorageError,
    StreamError,
    UnknownSubscriptionError,
)
from .message import Delivery
from .ordering import OrderingBuffer, ordered
from .signing import SignatureError, SigningKey, Verifier, VerifyingKey, keys_from_toml
from .subscription import Subscription
from .types import (
    AckMode,
    Confirm,
    ConfirmStatus,
    DeliveryMode,
    FilterKind,
    Gap,
    GapReason,
    QueuePolicy,
    ServerInfo,
    StartKind,
    StartPosition,
)

__version__ = "0.1.0"

__all__ = [
    "AckMode",
    "BadSignatureError",
    "BrokerError",
    "Client",
    "ClientClosedError",
    "ClockEstimate",
    "ClockFilter",
    "ClockNotSyncedError",
    "ClockSample",
    "Confirm",
    "ConfirmStatus",
    "ConnectError",
    "ConnectionLostError",
    "Delivery",
    "DeliveryMode",
    "DuplicateSubscriptionError",
    "EncodeError",
    "FilterKind",
    "Gap",
    "GapReason",
    "InvalidFieldError",
    "InvalidFilterError",
    "InvalidTopicError",
    "LimitExceededError",
    "MalformedError",
    "OrderingBuffer",
    "QueuePolicy",
    "ServerInfo",
    "ShuttingDownError",
    "SignatureError",
    "SigningKey",
    "SiftError",
    "SlowConsumerError",
    "StartKind",
    "StartPosition",
    "StorageError",
    "StreamError",
    "Subscription",
    "UnknownSubscriptionError",
    "Verifier",
    "VerifyingKey",
    "connect",
    "keys_from_toml",
    "ordered",
]
