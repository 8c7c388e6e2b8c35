"""Helpers for the Python SDK's tests: clients on the test's broker, and waiting for things.

Tests wait for events, never for time: `collect` reads deliveries until it
has what it wants, and `eventually` polls a condition with a deadline.
"""

import asyncio
import json
import os
import pathlib
import tempfile
import time
import urllib.error
import urllib.request

import sift

TIMEOUT = 10.0


async def connect(broker, **options):
    options.setdefault("name", "pytest")
    return await sift.connect(broker.host, broker.port, **options)


async def collect(subscription, count, timeout=TIMEOUT):
    """The next `count` deliveries of `subscription` (fails after `timeout` seconds)."""

    async def take():
        return [delivery async for delivery in _take(subscription, count)]

    return await asyncio.wait_for(take(), timeout)


async def _take(subscription, count):
    for _ in range(count):
        yield await subscription.__anext__()


async def until_sentinel(subscription, sentinel=b"sentinel", timeout=TIMEOUT):
    """Payloads received before the sentinel: proves what did not arrive."""

    async def take():
        seen = []
        async for delivery in subscription:
            if delivery.payload == sentinel:
                return seen
            seen.append(delivery.payload)
        raise AssertionError("the subscription ended before the sentinel")

    return await asyncio.wait_for(take(), timeout)


async def eventually(predicate, timeout=TIMEOUT, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def broker_config(text):
    """A broker configuration file holding `text`, for start_broker(extra_args=("--config", path))."""
    handle, path = tempfile.mkstemp(prefix="sift-pytest-", suffix=".toml")
    with os.fdopen(handle, "w") as file:
        file.write(text)
    return path


def http_json(method, url, body=None, timeout=TIMEOUT):
    """(status, JSON answer) of an HTTP request; error statuses are answers too."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def sift_binary():
    return os.environ.get("SIFT_BIN", str(pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "sift"))


async def sift_pub(broker, *args):
    """Runs `sift pub` against `broker` with `args` and waits for it to
    succeed; killed if it outlives the wait."""
    process = await asyncio.create_subprocess_exec(
        sift_binary(), "pub", "--server", broker.native, *args,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
