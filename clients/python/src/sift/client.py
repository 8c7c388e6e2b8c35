"""The client: one broker connection kept up in the background, publishing and subscribing.

Design, in the order a reader meets it:

* Writes are batched. Every request is appended to one output buffer and a
  flush is scheduled with `call_soon`, so all requests of one event-loop turn
  leave in one `transport.write`. Pending acknowledgements go first (§8.3).
* Reads go through an `asyncio.Protocol` (no stream reader in between): each
  socket read is cut into frames by the sans-IO codec and dispatched at once.
* Request ids start at 2**32 and subscription ids at 1, so the reference of an
  ERROR tells what it is about (§8.1).
* After a connection loss the client reconnects with a doubling back-off, opens
  every subscription again under its id, then resends the unconfirmed reliable
  publishes byte for byte (§8.4).
* The broker's clock is estimated from TIME exchanges (`clock.py`), refreshed in
  the background, so that a publish can carry the publisher's own send time
  in the broker's clock (PUBLISHER_TIME).
* Every connect and reconnect is the same: TCP, or TLS with the client's SSL
  context; HELLO, and AUTH right behind it when the client signs in; the
  session is live once WELCOME and AUTH_OK have both come (§6.1.1). A broker
  that refuses the session itself (`auth_required`, `auth_failed`,
  `tls_required`) would refuse it again: that ends the client rather than
  reconnecting.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import ssl as _ssl
import time
from collections import deque
from typing import Any, Callable, Mapping, Optional, Union

from . import codec
from .clock import FILTER_SIZE, ClockEstimate, ClockFilter, ClockNotSyncedError
from .errors import (
    BrokerError,
    ClientClosedError,
    ConnectError,
    ConnectionLostError,
    EncodeError,
    SiftError,
)
from .message import Delivery
from .signing import SigningKey, Verifier, sign
from .subscription import Subscription
from .types import (
    AckMode,
    Confirm,
    DeliveryMode,
    FilterKind,
    Gap,
    PropertyValue,
    QueuePolicy,
    ServerInfo,
    StartKind,
    StartPosition,
    parse_policy,
)

log = logging.getLogger("sift")

REQUEST_ID_BASE = 1 << 32
"""Publish request ids start here, above every subscription id (§8.1)."""
RECONNECT_DELAY_MIN = 0.05
FLUSH_BYTES = 64 * 1024
"""Buffered bytes that make a publish write at once rather than at the end of the loop turn."""
TRANSPORT_HIGH_WATER = 1024 * 1024
"""Bytes the transport may hold unsent before `drain()` waits."""

Payload = Union[bytes, bytearray, memoryview, str]
Properties = Mapping[str, PropertyValue]
Mode = Union[DeliveryMode, str, int]


def _signed(
    topic: str, payload: Payload, properties: Properties | None, metadata: str | bytes | None, key: SigningKey
) -> tuple[bytes, Any, bytes | None]:
    """(payload, properties, metadata) of a message signed with `key`, in the bytes that are signed."""
    data = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    meta = metadata.encode("utf-8") if isinstance(metadata, str) else metadata
    return data, sign(topic, data, properties, meta, key), meta

_ADMIN_QUERIES = {"links": 1, "routes": 2, "stats": 3, "subscriptions": 4}

SESSION_REFUSALS = frozenset({28, 29, 31})
"""Fatal error codes that refuse the session itself (`auth_required`, `auth_failed`,
`tls_required`): reconnecting the same way would be refused again."""

TIME_ERROR_MAX = 0xFFFFFFFF
"""The largest time error a message can carry (a u32 of nanoseconds, about 4.3 s)."""
CLOCK_RESYNC_SAMPLES = 2
"""TIME exchanges per background resync once the filter is full: with short round trips
the newest sample usually has the smallest bound, so a couple keep the estimate fresh."""


class _Credentials:
    """A user name and password, or a bearer token, sent in AUTH on every connect; the secret
    never shows in a repr."""

    __slots__ = ("user", "_password", "_method")

    def __init__(self, user: str, password: str, method: int = codec.AUTH_PASSWORD) -> None:
        self.user = user
        self._password = password
        self._method = method

    def auth_frame(self, request_id: int) -> bytes:
        return codec.encode_auth(request_id, self.user, self._password, self._method)

    def __repr__(self) -> str:
        return f"_Credentials(user={self.user!r}, password=<hidden>)"


class _PendingPublish:
    __slots__ = ("future", "frame")

    def __init__(self, future: asyncio.Future[Confirm], frame: bytes | None) -> None:
        self.future = future
        #: The encoded PUBLISH, kept to resend after a reconnect (reliable publishes only).
        self.frame = frame


class _Window:
    """The broker's publish window (§6.4): confirmed publishes in flight, at most `size`."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._error: BaseException | None = None

    async def acquire(self) -> None:
        if self._error is not None:
            raise self._error
        if self.used < self.size and not self._waiters:
            self.used += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # granted, then cancelled: hand the slot on
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def release(self) -> None:
        self.used -= 1
        self._grant()

    def resize(self, size: int) -> None:
        self.size = max(1, size)
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self.used < self.size:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.used += 1
                waiter.set_result(None)

    def fail(self, error: BaseException) -> None:
        self._error = error
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) session: framing and the handshake; everything else goes to the client.

    The handshake ends (`welcome` resolves) once WELCOME has come and, when
    the client signs in (`auth_request_id`), AUTH_OK for that request too.
    """

    def __init__(self, client: Client, auth_request_id: int | None = None) -> None:
        self.client = client
        self.decoder = codec.FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.active = False
        loop = asyncio.get_running_loop()
        self.welcome: asyncio.Future[ServerInfo] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self.early: list[codec.Frame] = []
        self.fatal: BrokerError | None = None
        self.info: ServerInfo | None = None
        #: The request id of the AUTH still unanswered, or None.
        self.auth_request_id = auth_request_id
        #: The user AUTH_OK named (None when the client did not sign in).
        self.user: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=TRANSPORT_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
        except codec.ProtocolError as error:
            log.warning("sift: the broker sent an undecodable stream (%s); dropping the connection", error)
            assert self.transport is not None
            self.transport.abort()
            return
        if self.active:
            self.client._handle_frames(self, frames)
        elif not self.welcome.done():
            self._handshake(frames)
        else:
            self.early.extend(frames)

    def _handshake(self, frames: list[codec.Frame]) -> None:
        for index, frame in enumerate(frames):
            if isinstance(frame, ServerInfo) and self.info is None:
                self.decoder.max_frame_bytes = max(frame.max_frame_bytes, 1)
                self.info = frame
            elif (
                isinstance(frame, codec.AuthOk) and self.auth_request_id is not None
                and frame.request_id == self.auth_request_id
            ):
                self.auth_request_id = None
                self.user = frame.user
            elif isinstance(frame, codec.ErrorFrame):
                # Every error before the session is live refuses it (auth_failed, tls_required, ...).
                error = BrokerError.from_frame(frame.code, frame.message, fatal=frame.fatal, reference=frame.reference)
                self.fatal = error
                self.welcome.set_exception(error)
                return
            else:
                expected = "WELCOME" if self.info is None else "AUTH_OK"
                self.welcome.set_exception(ConnectError(f"expected {expected}, got {type(frame).__name__}"))
                return
            if self.info is not None and self.auth_request_id is None:
                self.early.extend(frames[index + 1:])
                self.welcome.set_result(self.info)
                return

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        if not self.welcome.done():
            self.welcome.set_exception(ConnectError("the connection closed during the handshake"))
        self.client._on_connection_lost(self, exc)

    def pause_writing(self) -> None:
        self.client._write_paused = True

    def resume_writing(self) -> None:
        self.client._on_resume_writing(self)

    # Deliveries acknowledge through their connection: a tag means nothing to another session.
    def _ack_tag(self, tag: int) -> None:
        if self.client._connection is self:
            self.client._ack_tag(tag)

    def _nack_tag(self, tag: int, requeue: bool) -> None:
        if self.client._connection is self:
            self.client._write(codec.encode_nack(tag, requeue))


async def connect(
    host: str = "127.0.0.1",
    port: int = 7400,
    *,
    name: str | None = None,
    reconnect: bool = True,
    reconnect_delay_max: float = 2.0,
    connect_timeout: float = 5.0,
    write_buffer_bytes: int = 4 * 1024 * 1024,
    clock: Callable[[], int] | None = None,
    clock_sync_interval: float | None = 10.0,
    ssl: _ssl.SSLContext | bool | None = None,
    server_hostname: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
) -> Client:
    """Connects to a broker, completes the handshake and returns the client.

    `name` is stamped by the broker as the publisher of every message this
    client sends (default `sift-python-<pid>`). With `reconnect` the client
    reconnects after a loss, restores its subscriptions and resends its
    unconfirmed reliable publishes; `reconnect_delay_max` bounds the
    back-off. `write_buffer_bytes` is how much unsent data `drain()` lets
    accumulate while the connection is down.

    `clock` is the local clock, in nanoseconds since the Unix epoch (default
    `time.time_ns`; tests pass a shifted one). Every `clock_sync_interval`
    seconds, from the connect on, the client exchanges a few TIME frames to
    keep its estimate of the broker's clock fresh (`clock_estimate()`);
    None turns that off (`sync_clock()` still works).

    `ssl` speaks TLS to a broker started with `--tls-cert`: an
    `ssl.SSLContext` (for a private CA,
    `ssl.create_default_context(cafile="ca.pem")`), or True for the
    system's default context. `server_hostname` is the name the broker's
    certificate must carry (default `host`). A plain-text client on a TLS
    port gets `BrokerError` with code `tls_required`; a certificate that
    does not verify raises `ConnectError` (caused by
    `ssl.SSLCertVerificationError`).

    `user` and `password` sign in (AUTH, right after HELLO) on a broker
    started with a users file (`--users`); `client.user` is then the user
    the broker named. A refused sign-in raises `BrokerError` with code
    `auth_failed`. Without them the session is anonymous: on a broker that
    admits only signed-in clients the first publish or subscribe raises
    `BrokerError` `auth_required`, and the client ends. A request outside
    the user's permissions raises `BrokerError` `permission_denied` and the
    connection carries on. TLS and sign-in are repeated on every reconnect.
    The password is kept only to sign in again; it is never logged or shown
    in a repr.

    `token` signs in with a bearer token instead (a JWT signed with Ed25519
    by an issuer the broker's users file trusts, as `sift token issue`
    prints); it names its user, and is kept and hidden like a password.
    """
    client = Client(
        host,
        port,
        name=name if name is not None else f"sift-python-{os.getpid()}",
        reconnect=reconnect,
        reconnect_delay_max=reconnect_delay_max,
        connect_timeout=connect_timeout,
        write_buffer_bytes=write_buffer_bytes,
        clock=clock,
        clock_sync_interval=clock_sync_interval,
        ssl=ssl,
        server_hostname=server_hostname,
        user=user,
        password=password,
        token=token,
    )
    await client._connect_first()
    return client


class Client:
    """A connection to a Sift broker; create it with `sift.connect()`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        name: str,
        reconnect: bool,
        reconnect_delay_max: float,
        connect_timeout: float,
        write_buffer_bytes: int,
        clock: Callable[[], int] | None = None,
        clock_sync_interval: float | None = None,
        ssl: _ssl.SSLContext | bool | None = None,
        server_hostname: str | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
    ) -> None:
        if clock_sync_interval is not None and not clock_sync_interval > 0:
            raise ValueError(f"clock_sync_interval must be positive seconds or None, not {clock_sync_interval}")
        if ssl is True:
            ssl = _ssl.create_default_context()
        elif ssl is False:
            ssl = None
        if ssl is not None and not isinstance(ssl, _ssl.SSLContext):
            raise TypeError(f"ssl must be an ssl.SSLContext, True or None, not {type(ssl).__name__}")
        if server_hostname is not None and ssl is None:
            raise ValueError("server_hostname applies to TLS: give ssl too")
        if token is not None and password is not None:
            raise ValueError("sign in with a password or a token, not both")
        if token is None and (user is None) != (password is None):
            raise ValueError("user and password go together")
        self.host = host
        self.port = port
        self.name = name
        self._reconnect = reconnect
        self._reconnect_delay_max = reconnect_delay_max
        self._connect_timeout = connect_timeout
        self._write_buffer_bytes = write_buffer_bytes
        self._loop = asyncio.get_running_loop()
        self._connection: _Connection | None = None
        self._server_info: ServerInfo | None = None
        self._out = bytearray()
        self._acks: list[int] = []
        self._flush_scheduled = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._next_request_id = REQUEST_ID_BASE
        self._next_sub_id = 1
        self._next_sequence = 0
        self._pending: dict[int, _PendingPublish] = {}
        self._subscriptions: dict[int, Subscription] = {}
        self._requests: dict[int, asyncio.Future[Any]] = {}
        self._window = _Window(1024)
        self._closing = False
        self._closed = False
        self._close_ack: asyncio.Future[None] | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._reads_held_by: set[int] = set()
        self._topics: dict[str, bytes] = {}
        self._simple_topics: dict[str, tuple[bytes, Callable[..., bytes], int]] = {}
        #: Times the client has reconnected after a loss.
        self.reconnects = 0
        self._clock: Callable[[], int] = clock if clock is not None else time.time_ns
        self._clock_filter = ClockFilter()
        self._clock_sync_interval = clock_sync_interval
        self._clock_task: asyncio.Task[None] | None = None
        self._ssl: _ssl.SSLContext | None = ssl
        self._server_hostname = server_hostname if server_hostname is not None else host
        self._credentials = (
            _Credentials(user or "", token, codec.AUTH_TOKEN) if token is not None
            else _Credentials(user, password) if user is not None and password is not None
            else None
        )
        self._user: str | None = None
        #: Why the client ended, when the broker ended it (a refused session).
        self._ended_by: SiftError | None = None

    # ------------------------------------------------------------------
    # Lifecycle

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def server_info(self) -> ServerInfo | None:
        """The broker's WELCOME (its name and limits) from the latest handshake."""
        return self._server_info

    @property
    def user(self) -> str | None:
        """The user the session acts as (the broker's AUTH_OK), or None when the client did not sign in."""
        return self._user

    @property
    def is_tls(self) -> bool:
        """Whether the client speaks TLS to the broker."""
        return self._ssl is not None

    @property
    def is_connected(self) -> bool:
        return self._connection is not None

    @property
    def is_closed(self) -> bool:
        return self._closed or self._closing

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Waits until the client is connected (for example after a reconnect)."""
        await asyncio.wait_for(self._connected.wait(), timeout)

    async def _open(self) -> tuple[_Connection, ServerInfo]:
        """A new TCP (or TLS) connection with a completed handshake (and sign-in)."""
        credentials = self._credentials
        auth_request_id = None
        greeting = codec.encode_hello(self.name)
        if credentials is not None:
            # A request id of its own (§8.1); AUTH goes right behind HELLO (§6.1.1).
            auth_request_id = self._next_request_id
            self._next_request_id += 1
            greeting += credentials.auth_frame(auth_request_id)

        async def attempt() -> tuple[_Connection, ServerInfo]:
            if self._ssl is not None:
                transport, connection = await self._loop.create_connection(
                    lambda: _Connection(self, auth_request_id), self.host, self.port,
                    ssl=self._ssl, server_hostname=self._server_hostname,
                )
            else:
                transport, connection = await self._loop.create_connection(
                    lambda: _Connection(self, auth_request_id), self.host, self.port
                )
            try:
                transport.write(greeting)
                info = await connection.welcome
            except BaseException:
                transport.abort()
                raise
            return connection, info

        try:
            return await asyncio.wait_for(attempt(), self._connect_timeout)
        except asyncio.TimeoutError:
            answers = "WELCOME and AUTH_OK" if credentials is not None else "WELCOME"
            raise ConnectError(f"no {answers} from {self.host}:{self.port} within {self._connect_timeout} s") from None
        except OSError as error:
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {error}") from error

    async def _connect_first(self) -> None:
        connection, info = await self._open()
        self._activate(connection, info)
        if self._clock_sync_interval is not None:
            self._clock_task = self._loop.create_task(self._clock_sync_loop(self._clock_sync_interval))

    def _activate(self, connection: _Connection, info: ServerInfo) -> None:
        """Makes `connection` the live session: subscriptions first, then unconfirmed reliable
        publishes in request order, then what was buffered meanwhile (§8.4)."""
        self._connection = connection
        self._server_info = info
        self._user = connection.user
        self._window.resize(info.publish_window)
        prefix = bytearray()
        for sub_id in sorted(self._subscriptions):
            prefix += self._subscriptions[sub_id]._subscribe_frame
        for request_id in sorted(self._pending):
            frame = self._pending[request_id].frame
            if frame is not None:
                prefix += frame
        prefix += self._out
        self._out = prefix
        connection.active = True
        self._write_paused = False
        self._connected.set()
        if connection.early:
            early, connection.early = connection.early, []
            self._handle_frames(connection, early)
        self._flush()
        self._wake_drainers()

    def _on_connection_lost(self, connection: _Connection, exc: Exception | None) -> None:
        if connection is not self._connection:
            return
        self._connection = None
        self._connected.clear()
        self._write_paused = False
        # Unsent frames and pending acks belong to the old session.
        self._out = bytearray()
        self._acks = []
        self._reads_held_by.clear()
        refusal = connection.fatal
        if refusal is not None and refusal.number in SESSION_REFUSALS and not (self._closing or self._closed):
            # Reconnecting would be refused the same way: what waits fails with the refusal itself.
            log.warning("sift: the broker refused the session (%s); the client ends", refusal)
            self._ended_by = refusal
            self._finish(refusal)
            return
        lost = ConnectionLostError(
            f"connection to {self.host}:{self.port} lost" + (f": {connection.fatal}" if connection.fatal else "")
        )
        for request_id in [rid for rid, pending in self._pending.items() if pending.frame is None]:
            pending = self._pending.pop(request_id)
            self._window.release()
            if not pending.future.done():
                pending.future.set_exception(lost)
        for future in self._requests.values():
            if not future.done():
                future.set_exception(lost)
        self._requests.clear()
        if self._close_ack is not None and not self._close_ack.done():
            self._close_ack.set_result(None)
        if self._closing or self._closed:
            return
        if self._reconnect:
            log.info("sift: connection to %s:%s lost (%s); reconnecting", self.host, self.port, exc or connection.fatal)
            self._reconnect_task = self._loop.create_task(self._reconnect_loop())
        else:
            self._finish(lost)

    async def _reconnect_loop(self) -> None:
        delay = RECONNECT_DELAY_MIN
        while not self._closing:
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._reconnect_delay_max)
            try:
                connection, info = await self._open()
            except (SiftError, OSError) as error:
                log.debug("sift: reconnect failed: %s", error)
                continue
            if self._closing:
                assert connection.transport is not None
                connection.transport.abort()
                return
            self.reconnects += 1
            self._activate(connection, info)
            return

    async def close(self, timeout: float = 5.0) -> None:
        """Closes cleanly: sends what is buffered and CLOSE, waits (at most `timeout` seconds)
        for the broker's CLOSE, then ends every subscription and fails what is unanswered.

        The broker does not flush deliveries still queued for this client (§6.14).
        """
        if self._closing:
            return
        self._closing = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        connection = self._connection
        if connection is not None and connection.transport is not None:
            self._close_ack = self._loop.create_future()
            self._out += codec.encode_close()
            self._flush()
            try:
                await asyncio.wait_for(asyncio.shield(self._close_ack), timeout)
            except asyncio.TimeoutError:
                log.warning("sift: no CLOSE from the broker within %s s", timeout)
            connection.transport.close()
            try:
                await asyncio.wait_for(asyncio.shield(connection.lost), 1.0)
            except asyncio.TimeoutError:
                connection.transport.abort()
        self._connection = None
        self._finish(ClientClosedError("the client is closed"))

    def _finish(self, error: SiftError) -> None:
        """Ends the client for good: fails what waits, ends subscriptions."""
        self._closing = True
        self._closed = True
        self._connected.clear()
        if self._clock_task is not None:
            self._clock_task.cancel()
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(error)
        self._pending.clear()
        for future in self._requests.values():
            if not future.done():
                future.set_exception(error)
        self._requests.clear()
        self._window.fail(error)
        closed_by_us = isinstance(error, ClientClosedError)
        for subscription in list(self._subscriptions.values()):
            subscription._end(None if closed_by_us else error)
        self._subscriptions.clear()
        self._wake_drainers()

    def _check_open(self) -> None:
        if self._closing:
            if self._ended_by is not None:
                raise ClientClosedError(f"the client is closed: {self._ended_by}") from self._ended_by
            raise ClientClosedError("the client is closed")

    # ------------------------------------------------------------------
    # Writing

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Writes the pending ACKs, then everything buffered, in one transport write."""
        self._flush_scheduled = False
        connection = self._connection
        if connection is None or connection.transport is None:
            return
        if self._acks:
            data: bytes | bytearray = codec.encode_ack(self._acks) + self._out
            self._acks = []
        elif self._out:
            data = self._out
        else:
            return
        # A fresh buffer: the transport may keep a reference to the one it was given.
        self._out = bytearray()
        connection.transport.write(data)

    def _write(self, frame: bytes) -> None:
        self._out += frame
        self._schedule_flush()

    def _ack_tag(self, tag: int) -> None:
        self._acks.append(tag)
        self._schedule_flush()

    def _on_resume_writing(self, connection: _Connection) -> None:
        if connection is self._connection:
            self._write_paused = False
            self._wake_drainers()

    def _wake_drainers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        """Writes what is buffered and waits while the socket is backed up (or, disconnected,
        while more than `write_buffer_bytes` wait): the back-pressure for `publish_nowait`."""
        self._flush()
        while not self._closing and (
            (self._connection is not None and self._write_paused)
            or (self._connection is None and len(self._out) > self._write_buffer_bytes)
        ):
            waiter = self._loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter
        self._check_open()

    # ------------------------------------------------------------------
    # Publishing

    def _encode_message(
        self,
        out: bytearray,
        request_id: int,
        flags: int,
        await_timeout_ms: int,
        topic: str,
        payload: Payload,
        properties: Properties | None,
        metadata: str | bytes | None,
        mode: int,
        priority: int,
        ttl: float | datetime.timedelta | None,
        timestamp_ns: int = 0,
        time_error_ns: int = 0,
    ) -> None:
        topic_bytes = self._topics.get(topic)
        if topic_bytes is None:
            topic_bytes = topic.encode("utf-8")
            if len(self._topics) < 4096:
                self._topics[topic] = topic_bytes
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        elif not isinstance(payload, bytes):
            payload = bytes(payload)
        if not 0 <= priority <= 9:
            raise EncodeError(f"priority {priority} is not 0-9")
        if properties:
            count, encoded_properties = codec.encode_properties(properties)
        else:
            count, encoded_properties = 0, b""
        if isinstance(metadata, str):
            metadata = metadata.encode("utf-8")
        expiry_ns = 0
        if ttl is not None:
            seconds = ttl.total_seconds() if isinstance(ttl, datetime.timedelta) else ttl
            expiry_ns = time.time_ns() + int(seconds * 1_000_000_000)
        self._next_sequence += 1
        codec.append_publish(
            out, request_id, flags, await_timeout_ms, topic_bytes, payload,
            priority, mode, self._next_sequence, expiry_ns, count, encoded_properties, metadata,
            timestamp_ns, time_error_ns,
        )

    def _publisher_time(self, estimate: ClockEstimate | None, timestamp_ns: int | None) -> tuple[int, int]:
        """(timestamp_ns, time_error_ns) in the broker's clock for a PUBLISHER_TIME publish:
        `timestamp_ns` (local clock; default now) carried over by `estimate`.

        The error is at least 1 ns, so that a publisher-stamped message always
        carries the TIME_ERROR flag and a receiver can tell it from a
        broker-stamped one (a looser bound is still a bound).
        """
        if estimate is None:
            raise ClockNotSyncedError("no estimate of the broker's clock yet: await client.sync_clock() first")
        if estimate.error_ns > TIME_ERROR_MAX:
            raise ClockNotSyncedError(
                f"the clock estimate's bound ({estimate.error_ns} ns) no longer fits a message: "
                "await client.sync_clock() again"
            )
        local = self._clock() if timestamp_ns is None else timestamp_ns
        stamp = estimate.to_peer(local)
        if not 0 <= stamp < 1 << 64:
            raise EncodeError(f"timestamp_ns {stamp} (in the broker's clock) does not fit a u64")
        return stamp, max(1, estimate.error_ns)

    def _cache_simple_topic(self, topic: str) -> tuple[bytes, Callable[..., bytes], int]:
        topic_bytes = topic.encode("utf-8")
        if len(topic_bytes) > 0xFFFF:
            raise EncodeError("topic is too long")
        head, packer = codec.fire_and_forget_layout(topic_bytes)
        cached = (head, packer.pack, 60 + len(topic_bytes))
        if len(self._simple_topics) < 4096:
            self._simple_topics[topic] = cached
        return cached

    def publish_nowait(
        self,
        topic: str,
        payload: Payload = b"",
        *,
        properties: Properties | None = None,
        metadata: str | bytes | None = None,
        mode: Mode = DeliveryMode.BEST_EFFORT,
        priority: int = 4,
        ttl: float | datetime.timedelta | None = None,
        publisher_time: bool = False,
        timestamp_ns: int | None = None,
        sign_key: SigningKey | None = None,
    ) -> None:
        """Publishes without a confirm (fire-and-forget): the fastest way to publish.

        The message is encoded into the output buffer before this returns; it
        goes out with the next write. Nothing reports a refusal (the broker's
        ERROR has reference 0 and is logged). Call `await drain()` now and then
        in a long loop so that the buffer does not outgrow the socket.

        `publisher_time` and `timestamp_ns` are as for `publish()`, except that
        without a clock estimate this raises `ClockNotSyncedError` (it cannot
        wait for one). `sign_key` is as for `publish()`.
        """
        if self._closing:
            self._check_open()
        if sign_key is not None:
            payload, properties, metadata = _signed(topic, payload, properties, metadata, sign_key)
        out = self._out
        mode_type = type(mode)
        if (
            properties is None and metadata is None and ttl is None and type(payload) is bytes
            and (mode_type is DeliveryMode or mode_type is int) and 0 <= priority <= 9
            and not publisher_time and timestamp_ns is None
        ):
            # The common case, in one pack call: a cached Struct holds the topic's layout.
            cached = self._simple_topics.get(topic)
            if cached is None:
                cached = self._cache_simple_topic(topic)
            head, packer, base_length = cached
            self._next_sequence = sequence = self._next_sequence + 1
            size = len(payload)  # type: ignore[arg-type]
            out += packer(base_length + size, head, priority, mode, sequence, size)
            out += payload  # type: ignore[operator]
        else:
            if mode_type is not int and mode_type is not DeliveryMode:
                mode = DeliveryMode.of(mode)
            flags = stamp = error = 0
            if publisher_time:
                flags = codec.PUBLISH_PUBLISHER_TIME
                stamp, error = self._publisher_time(self.clock_estimate(), timestamp_ns)
            elif timestamp_ns is not None:
                raise ValueError("timestamp_ns is the publisher's time: it needs publisher_time=True")
            self._encode_message(
                out, 0, flags, 0, topic, payload, properties, metadata, mode, priority, ttl, stamp, error  # type: ignore[arg-type]
            )
        if len(out) >= FLUSH_BYTES:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    async def publish(
        self,
        topic: str,
        payload: Payload = b"",
        *,
        properties: Properties | None = None,
        metadata: str | bytes | None = None,
        mode: Mode = DeliveryMode.BEST_EFFORT,
        priority: int = 4,
        ttl: float | datetime.timedelta | None = None,
        await_delivered: bool = False,
        await_timeout: float | None = None,
        publisher_time: bool = False,
        timestamp_ns: int | None = None,
        sign_key: SigningKey | None = None,
    ) -> Confirm:
        """Publishes and returns the broker's confirm.

        `properties` are typed by their Python type (bool, int, float, str);
        `metadata` is an XML document (xpath filters read it); `ttl` is in
        seconds. With `await_delivered` the confirm comes once every matched
        subscriber acknowledged (`delivered`), or after `await_timeout`
        seconds (`incomplete`, naming who did not). At most the broker's
        `publish_window` confirmed publishes are in flight; more wait here.

        Reliable, persistent and await=delivered publishes survive a
        reconnect: they are resent until confirmed. A confirmed best-effort
        publish in flight when the connection drops raises
        `ConnectionLostError`. A refusal raises the broker's error.

        With `publisher_time` the message carries this client's own send time
        instead of the broker's acceptance time: `timestamp_ns` (local clock,
        default now) carried into the broker's clock by the current estimate,
        with its bound as the message's `time_error_ns`. Without an estimate
        (or with one too stale for a message's u32 bound) this syncs first.
        The broker refuses a time further than its skew limit from its clock
        (`InvalidFieldError`).

        `sign_key` (a `sift.signing.SigningKey`) signs the message with
        Ed25519 over its topic, properties, metadata and payload; a topic the
        broker requires signed refuses anything else (`BadSignatureError`).
        """
        self._check_open()
        if sign_key is not None:
            payload, properties, metadata = _signed(topic, payload, properties, metadata, sign_key)
        if type(mode) is not int and not isinstance(mode, DeliveryMode):
            mode = DeliveryMode.of(mode)
        flags = codec.PUBLISH_CONFIRM
        timeout_ms = 0
        if await_delivered:
            flags |= codec.PUBLISH_AWAIT_DELIVERED
            if await_timeout is not None:
                timeout_ms = max(1, min(int(await_timeout * 1000), 0xFFFFFFFF))
        stamp = error = 0
        if publisher_time:
            flags |= codec.PUBLISH_PUBLISHER_TIME
            estimate = self.clock_estimate()
            if estimate is None or estimate.error_ns > TIME_ERROR_MAX:
                estimate = await self.sync_clock()
            stamp, error = self._publisher_time(estimate, timestamp_ns)
        elif timestamp_ns is not None:
            raise ValueError("timestamp_ns is the publisher's time: it needs publisher_time=True")
        await self._window.acquire()
        try:
            self._check_open()
            request_id = self._next_request_id
            self._next_request_id += 1
            frame = bytearray()
            self._encode_message(
                frame, request_id, flags, timeout_ms, topic, payload, properties, metadata, mode, priority, ttl,
                stamp, error,
            )
        except BaseException:
            self._window.release()
            raise
        resend = mode != DeliveryMode.BEST_EFFORT or await_delivered
        if self._connection is None and not resend:
            self._window.release()
            raise ConnectionLostError("not connected; best-effort publishes are not kept for a reconnect")
        future: asyncio.Future[Confirm] = self._loop.create_future()
        self._pending[request_id] = _PendingPublish(future, bytes(frame) if resend else None)
        if self._connection is not None:
            self._out += frame
            if len(self._out) >= FLUSH_BYTES:
                self._flush()
            else:
                self._schedule_flush()
        return await future

    # ------------------------------------------------------------------
    # Subscribing

    async def subscribe(
        self,
        topic: str,
        *,
        tags: str | None = None,
        sql: str | None = None,
        xpath: str | None = None,
        regex: str | None = None,
        queue: str | None = None,
        ack: AckMode | str = AckMode.AUTO,
        policy: QueuePolicy | str | None = None,
        queue_capacity: int = 0,
        max_unacked: int = 0,
        credit: int | None = None,
        durable: str | None = None,
        stream: str | None = None,
        start: StartPosition | str | datetime.datetime | None = None,
        shared: bool = False,
        max_buffered: int = 65536,
        on_gap: Optional[Callable[[Gap], None]] = None,
        verify: Verifier | None = None,
    ) -> Subscription:
        """Opens a subscription and waits until the broker confirms it is live.

        `topic` is a topic filter (`orders.*`, `orders.>`). At most one content
        filter: `tags`, `sql` (JMS selector), `xpath` (over the metadata) or
        `regex` (over the topic). `queue` joins a queue group (one member gets
        each message). `ack`: `auto` (acknowledged when the application takes
        the delivery), `manual` (`await delivery.ack()`), or `on_write` (the
        broker counts it acknowledged once written). `policy`: `block`,
        `keep-last:N`, `drop-new` or `disconnect` (default: the broker's).
        `credit` opens the subscription in credit mode with that initial
        credit (`grant()` adds more).

        Stream subscriptions: `durable` names a durable subscription (created
        on first use, resumed afterwards: what matched while it was away is
        kept); `start` alone makes a replay (`first`, `last:N`, `seq:N`,
        `time:RFC3339`, `new`) that then follows live messages; `stream`
        picks the stream (default: the one holding the topics, else
        `default`); `shared` shares a durable between consumers.

        `max_buffered` deliveries may wait for the application; beyond that
        the client stops reading the socket until it catches up.

        `verify` (a `sift.signing.Verifier`) checks every delivery's signature
        end to end: one that does not verify is never handed to the
        application; it is logged, counted in `verify.refused`, and settled
        without redelivery when it needs an acknowledgement.
        """
        self._check_open()
        filters = [(kind, text) for kind, text in (
            (FilterKind.TAGS, tags), (FilterKind.SQL, sql), (FilterKind.XPATH, xpath), (FilterKind.REGEX, regex)
        ) if text is not None]
        if len(filters) > 1:
            raise ValueError("at most one content filter: tags, sql, xpath or regex")
        filter_kind, filter_text = filters[0] if filters else (FilterKind.NONE, "")
        ack_mode = AckMode(ack)
        policy_code, policy_argument = parse_policy(policy)
        flags = 0
        if credit is not None:
            flags |= codec.SUBSCRIBE_CREDIT_MODE
        section = None
        if durable is not None or stream is not None or start is not None:
            if queue:
                raise ValueError("a stream subscription cannot be in a queue group")
            if start is None:
                position = StartPosition(StartKind.NEW if durable else StartKind.FIRST)
            else:
                position = StartPosition.parse(start)
            section = codec.StreamSection(stream or "", durable or "", int(position.kind), position.argument)
            if shared:
                flags |= codec.SUBSCRIBE_SHARED
        elif shared:
            raise ValueError("shared applies to durable subscriptions")
        sub_id = self._next_sub_id
        self._next_sub_id += 1
        frame = codec.encode_subscribe(
            sub_id, topic, queue or "", int(filter_kind), filter_text,
            0 if ack_mode is AckMode.ON_WRITE else 1, policy_code, policy_argument,
            queue_capacity, max_unacked, flags, credit or 0, section,
        )
        subscription = Subscription(self, sub_id, topic, frame, ack_mode, max(1, max_buffered), on_gap, verify)
        self._subscriptions[sub_id] = subscription
        if self._connection is not None:
            self._write(frame)
        try:
            await subscription._ready
        except BaseException:
            self._subscriptions.pop(sub_id, None)
            raise
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        if self._subscriptions.pop(subscription.id, None) is not None and self._connection is not None:
            self._write(codec.encode_unsubscribe(subscription.id))
        self._reads_held_by.discard(subscription.id)
        self._maybe_resume_reading()

    def _send_flow(self, sub_id: int, credit: int) -> None:
        self._check_open()
        if self._connection is not None:
            self._write(codec.encode_flow(sub_id, credit))

    def _release_reads(self, subscription: Subscription) -> None:
        self._reads_held_by.discard(subscription.id)
        self._maybe_resume_reading()

    def _maybe_resume_reading(self) -> None:
        connection = self._connection
        if not self._reads_held_by and connection is not None and connection.transport is not None:
            if not connection.transport.is_reading():
                connection.transport.resume_reading()

    # ------------------------------------------------------------------
    # Round trips

    def _new_request(self) -> tuple[int, asyncio.Future[Any]]:
        self._check_open()
        if self._connection is None:
            raise ConnectionLostError("not connected")
        request_id = self._next_request_id
        self._next_request_id += 1
        future: asyncio.Future[Any] = self._loop.create_future()
        self._requests[request_id] = future
        return request_id, future

    async def ping(self) -> float:
        """Round trip to the broker, in seconds. When it returns, the broker has handled every
        frame sent before it (publishes parked at a full queue excepted, §6.13)."""
        started = time.perf_counter()
        nonce, future = self._new_request()
        self._write(codec.encode_ping(nonce))
        await future
        return time.perf_counter() - started

    async def flush(self, timeout: float | None = None) -> None:
        """Writes everything buffered and waits until the broker has handled it (a ping)."""
        await asyncio.wait_for(self.ping(), timeout)

    # ------------------------------------------------------------------
    # The broker's clock

    async def sync_clock(self, samples: int = FILTER_SIZE, timeout: float = 5.0) -> ClockEstimate:
        """Exchanges `samples` TIME frames with the broker, one after another, and returns the
        estimate of its clock (offset from the local clock, within `error_ns`).

        Each exchange feeds the filter of the last eight samples; the estimate
        is the sample with the smallest bound now. `asyncio.TimeoutError` when
        an answer takes over `timeout` seconds (a broker predating TIME never
        answers), `ConnectionLostError` when the connection drops meanwhile.
        """
        if samples < 1:
            raise ValueError(f"samples must be at least 1, not {samples}")
        for _ in range(samples):
            await self._time_exchange(timeout)
        estimate = self._clock_filter.estimate(self._clock())
        assert estimate is not None
        return estimate

    def clock_estimate(self) -> ClockEstimate | None:
        """The current estimate of the broker's clock (its bound as of now), or None before the
        first exchange."""
        return self._clock_filter.estimate(self._clock())

    async def _time_exchange(self, timeout: float) -> None:
        request_id, future = self._new_request()
        origin_ns = self._clock()
        self._out += codec.encode_time(request_id, origin_ns)
        # Written now, not at the end of the loop turn: the wait would count as network time.
        self._flush()
        try:
            reply, arrival_ns = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            self._requests.pop(request_id, None)
            raise asyncio.TimeoutError(f"no TIME_REPLY within {timeout} s (does the broker predate TIME?)") from None
        self._clock_filter.add_exchange(origin_ns, reply.receive_ns, reply.transmit_ns, arrival_ns)

    async def _clock_sync_loop(self, interval: float) -> None:
        """Keeps the clock estimate fresh: a full filter first, then a couple of samples per
        interval. Failures (a lost connection, an old broker) wait for the next round."""
        samples = FILTER_SIZE
        while not self._closing:
            try:
                await self._connected.wait()
                await self.sync_clock(samples)
                samples = CLOCK_RESYNC_SAMPLES
            except (SiftError, asyncio.TimeoutError) as error:
                log.debug("sift: clock sync failed: %s", error)
            await asyncio.sleep(interval)

    async def admin(self, query: str) -> dict[str, Any]:
        """One of the broker's reports as JSON: `links`, `routes`, `stats` or `subscriptions`."""
        code = _ADMIN_QUERIES.get(query)
        if code is None:
            raise ValueError(f"unknown admin query {query!r}: {', '.join(_ADMIN_QUERIES)}")
        request_id, future = self._new_request()
        self._write(codec.encode_admin(request_id, code))
        return json.loads(await future)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------
    # Reading

    def _handle_frames(self, connection: _Connection, frames: list[codec.Frame]) -> None:
        """Dispatches the frames of one read; wakes each subscription once."""
        subscriptions = self._subscriptions
        touched: list[Subscription] = []
        last: Subscription | None = None
        for frame in frames:
            if type(frame) is Delivery:
                subscription = subscriptions.get(frame.sub_id)
                if subscription is None:
                    continue  # for a subscription just closed: discard (§6.7)
                if frame.delivery_tag:
                    frame._acknowledger = connection
                subscription._buffer.append(frame)
                if subscription is not last:
                    last = subscription
                    if subscription not in touched:
                        touched.append(subscription)
            elif type(frame) is Confirm:
                pending = self._pending.pop(frame.request_id, None)
                if pending is not None:
                    self._window.release()
                    if not pending.future.done():
                        pending.future.set_result(frame)
            else:
                self._handle_control(connection, frame)
        for subscription in touched:
            subscription._wake()
            if len(subscription._buffer) >= subscription._max_buffered and not subscription._holding_reads:
                subscription._holding_reads = True
                self._reads_held_by.add(subscription.id)
                if connection.transport is not None:
                    connection.transport.pause_reading()

    def _handle_control(self, connection: _Connection, frame: codec.Frame) -> None:
        if isinstance(frame, codec.Subscribed):
            subscription = self._subscriptions.get(frame.sub_id)
            if subscription is not None and not subscription._ready.done():
                subscription._ready.set_result(None)
        elif isinstance(frame, codec.ErrorFrame):
            self._on_error(connection, frame)
        elif isinstance(frame, codec.Pong):
            future = self._requests.pop(frame.nonce, None)
            if future is not None and not future.done():
                future.set_result(None)
        elif isinstance(frame, codec.TimeReply):
            arrival_ns = self._clock()
            future = self._requests.pop(frame.request_id, None)
            if future is not None and not future.done():
                future.set_result((frame, arrival_ns))
        elif isinstance(frame, codec.TimeRequest):
            receive_ns = self._clock()
            self._out += codec.encode_time_reply(frame.request_id, frame.origin_ns, receive_ns, self._clock())
            self._flush()
        elif isinstance(frame, codec.Ping):
            self._write(codec.encode_pong(frame.nonce))
        elif isinstance(frame, codec.GapFrame):
            subscription = self._subscriptions.get(frame.sub_id)
            if subscription is not None:
                subscription._deliver_gap(frame.gap)
        elif isinstance(frame, codec.AdminReply):
            future = self._requests.pop(frame.request_id, None)
            if future is not None and not future.done():
                future.set_result(frame.json)
        elif isinstance(frame, codec.Close):
            if self._close_ack is not None and not self._close_ack.done():
                self._close_ack.set_result(None)
        elif isinstance(frame, codec.Malformed):
            log.warning("sift: skipping a malformed frame (type 0x%02x) from the broker: %s", frame.frame_type, frame.detail)
        else:
            log.warning("sift: unexpected frame from the broker: %r", frame)

    def _on_error(self, connection: _Connection, frame: codec.ErrorFrame) -> None:
        """Routes an ERROR to what it refers to, by its reference (§8.1)."""
        error = BrokerError.from_frame(frame.code, frame.message, fatal=frame.fatal, reference=frame.reference)
        reference = frame.reference
        if reference >= REQUEST_ID_BASE:
            pending = self._pending.pop(reference, None)
            if pending is not None:
                self._window.release()
                if not pending.future.done():
                    pending.future.set_exception(error)
            else:
                future = self._requests.pop(reference, None)
                if future is not None and not future.done():
                    future.set_exception(error)
        elif reference != 0:
            subscription = self._subscriptions.get(reference)
            if subscription is not None:
                if not subscription._ready.done():
                    del self._subscriptions[reference]
                    subscription._ready.set_exception(error)
                    subscription._end(error)
                elif error.code not in ("unknown_subscription", "invalid_field"):
                    # Refused when restored after a reconnect, or closed as a slow
                    # consumer: end it, so that the application sees it is gone.
                    log.warning("sift: subscription %s ended by the broker: %s", reference, error)
                    del self._subscriptions[reference]
                    subscription._end(error)
                else:
                    log.warning("sift: broker error about subscription %s: %s", reference, error)
        elif not frame.fatal:
            log.warning("sift: broker error: %s", error)
        if frame.fatal:
            log.warning("sift: broker closed the connection: %s", error)
            connection.fatal = error
            if connection.transport is not None:
                connection.transport.close()
