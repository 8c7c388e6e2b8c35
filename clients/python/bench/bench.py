"""Publish and receive rates of this SDK against Sift, and of nats-py against NATS.

Both are measured alternately in one run (Sift, NATS, Sift, NATS, ...), on the
same machine, with the same message count and payload size:

* publish: one client publishes N fire-and-forget messages (no subscriber),
  then waits for a round trip so that the broker has read them all;
  msgs/s = N / (time to the end of that round trip).
* receive: one subscriber in this process; a publisher in a separate process
  (so that this one only receives) publishes N messages; msgs/s = messages
  received / (time from the first to the last).

The Sift broker is started by this script on free loopback ports (release
binary if found, else the one given); NATS must already be running (see the
README). Usage:

    python bench/bench.py --sift-bin PATH --nats-url nats://127.0.0.1:14222 --out results.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import sift

REPOSITORY = pathlib.Path(__file__).resolve().parents[3]
TOPIC = "bench.data"
RECEIVE_IDLE_SECONDS = 3.0


def find_sift_binary(given: str | None) -> tuple[str, str]:
    """(path, build) of the broker to run: a release build if there is one."""
    if given:
        return given, "release" if "/release/" in given else "debug"
    release = REPOSITORY / "target" / "release" / "sift"
    if release.exists():
        return str(release), "release"
    if os.environ.get("SIFT_BIN"):
        return os.environ["SIFT_BIN"], "release" if "/release/" in os.environ["SIFT_BIN"] else "debug"
    return str(REPOSITORY / "target" / "debug" / "sift"), "debug"


def start_sift(binary: str) -> tuple[subprocess.Popen[str], int, str]:
    data_dir = tempfile.mkdtemp(prefix="sift-bench-")
    process = subprocess.Popen(
        [binary, "broker", "--listen", "127.0.0.1:0", "--http", "off", "--stomp", "off", "--mqtt", "off", "--amqp", "off",
         "--data", data_dir],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert process.stdout is not None
    prefix = "sift broker listening on "
    while True:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the sift broker exited before printing its address")
        if line.startswith(prefix):
            return process, int(line[len(prefix):].strip().rsplit(":", 1)[1]), data_dir


# -- Sift ---------------------------------------------------------------------


async def sift_publish(port: int, count: int, payload: bytes) -> float:
    client = await sift.connect("127.0.0.1", port, name="bench-pub")
    try:
        await client.ping()
        publish = client.publish_nowait
        started = time.perf_counter()
        for index in range(count):
            publish(TOPIC, payload)
            if index & 1023 == 1023:
                await client.drain()
        await client.flush()
        return time.perf_counter() - started
    finally:
        await client.close()


async def sift_receive(port: int, count: int, size: int) -> tuple[int, float]:
    client = await sift.connect("127.0.0.1", port, name="bench-sub")
    try:
        subscription = await client.subscribe(TOPIC, ack="on_write", queue_capacity=1 << 20)
        publisher = spawn_publisher("sift", f"127.0.0.1:{port}", count, size)
        received = 0
        first = last = 0.0
        try:
            delivery = await asyncio.wait_for(subscription.__anext__(), 30)
            first = last = time.perf_counter()
            received = 1
            while received < count:
                try:
                    await asyncio.wait_for(subscription.__anext__(), RECEIVE_IDLE_SECONDS)
                except asyncio.TimeoutError:
                    break
                received += 1
                # Drain what is buffered without a timer per message.
                while received < count and subscription.next_nowait() is not None:
                    received += 1
                last = time.perf_counter()
            del delivery
        finally:
            publisher.wait(timeout=60)
        return received, last - first
    finally:
        await client.close()


async def sift_publisher_process(address: str, count: int, size: int) -> None:
    host, port = address.rsplit(":", 1)
    client = await sift.connect(host, int(port), name="bench-feed")
    payload = b"x" * size
    for index in range(count):
        client.publish_nowait(TOPIC, payload)
        if index & 1023 == 1023:
            await client.drain()
    await client.flush()
    await client.close()


# -- NATS ---------------------------------------------------------------------


async def nats_publish(url: str, count: int, payload: bytes) -> float:
    import nats

    connection = await nats.connect(url)
    try:
        await connection.flush()
        publish = connection.publish
        started = time.perf_counter()
        for _ in range(count):
            await publish(TOPIC, payload)
        await connection.flush()
        return time.perf_counter() - started
    finally:
        await connection.close()


async def nats_receive(url: str, count: int, size: int) -> tuple[int, float]:
    import nats

    connection = await nats.connect(url, pending_size=256 * 1024 * 1024)
    state = {"received": 0, "first": 0.0, "last": 0.0}
    done = asyncio.Event()

    async def on_message(message: Any) -> None:
        now = time.perf_counter()
        if state["received"] == 0:
            state["first"] = now
        state["received"] += 1
        state["last"] = now
        if state["received"] >= count:
            done.set()

    try:
        await connection.subscribe(TOPIC, cb=on_message, pending_msgs_limit=count * 2, pending_bytes_limit=-1)
        await connection.flush()
        publisher = spawn_publisher("nats", url, count, size)
        try:
            seen = -1
            while not done.is_set() and seen != state["received"]:
                seen = state["received"]
                try:
                    await asyncio.wait_for(done.wait(), RECEIVE_IDLE_SECONDS if seen else 30)
                except asyncio.TimeoutError:
                    pass
        finally:
            publisher.wait(timeout=60)
        return int(state["received"]), float(state["last"] - state["first"])
    finally:
        await connection.close()


async def nats_publisher_process(url: str, count: int, size: int) -> None:
    import nats

    connection = await nats.connect(url)
    payload = b"x" * size
    for _ in range(count):
        await connection.publish(TOPIC, payload)
    await connection.flush()
    await connection.close()


# -- Driver -------------------------------------------------------------------


def spawn_publisher(system: str, address: str, count: int, size: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, __file__, "--feed", system, "--feed-address", address, "--count", str(count), "--size", str(size)]
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    binary, build = find_sift_binary(args.sift_bin)
    process, port, data_dir = start_sift(binary)
    payload = b"x" * args.size
    results: list[dict[str, Any]] = []
    try:
        for round_number in range(1, args.rounds + 1):
            for system in ("sift", "nats"):
                if system == "sift":
                    seconds = await sift_publish(port, args.count, payload)
                else:
                    seconds = await nats_publish(args.nats_url, args.count, payload)
                results.append(result(system, "publish", round_number, args.count, args.count, seconds))
                print_row(results[-1])
                if system == "sift":
                    received, seconds = await sift_receive(port, args.count, args.size)
                else:
                    received, seconds = await nats_receive(args.nats_url, args.count, args.size)
                results.append(result(system, "receive", round_number, args.count, received, seconds))
                print_row(results[-1])
    finally:
        process.kill()
        process.wait(timeout=30)
        subprocess.run(["rm", "-rf", data_dir], check=False)
    summary = {}
    for system in ("sift", "nats"):
        for test in ("publish", "receive"):
            rates = [row["msgs_per_s"] for row in results if row["system"] == system and row["test"] == test]
            summary[f"{system}_{test}_median_msgs_per_s"] = round(statistics.median(rates))
    import nats as nats_package  # noqa: F401  (for its version)

    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "sift_broker_build": build,
        "sift_sdk_version": sift.__version__,
        "nats_py_version": getattr(__import__("nats.aio.client", fromlist=["__version__"]), "__version__", "?"),
        "count": args.count,
        "payload_bytes": args.size,
        "rounds": args.rounds,
        "results": results,
        "summary": summary,
    }


def result(system: str, test: str, round_number: int, sent: int, received: int, seconds: float) -> dict[str, Any]:
    return {
        "system": system, "test": test, "round": round_number, "sent": sent, "received": received,
        "seconds": round(seconds, 4), "msgs_per_s": round(received / seconds) if seconds > 0 else 0,
    }


def print_row(row: dict[str, Any]) -> None:
    print(
        f"round {row['round']}  {row['system']:<5} {row['test']:<8} {row['msgs_per_s']:>10,} msgs/s"
        f"  ({row['received']:,}/{row['sent']:,} in {row['seconds']:.3f} s)",
        flush=True,
    )


def print_table(report: dict[str, Any]) -> None:
    summary = report["summary"]
    print()
    print(f"{report['count']:,} messages of {report['payload_bytes']} bytes, median of {report['rounds']} rounds")
    print(f"sift broker build: {report['sift_broker_build']}")
    print(f"{'':<10}{'sift-client':>14}{'nats-py':>14}{'ratio':>8}")
    for test in ("publish", "receive"):
        ours = summary[f"sift_{test}_median_msgs_per_s"]
        theirs = summary[f"nats_{test}_median_msgs_per_s"]
        print(f"{test:<10}{ours:>14,}{theirs:>14,}{ours / theirs if theirs else 0:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200_000, help="messages per measurement")
    parser.add_argument("--size", type=int, default=128, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--sift-bin", help="sift binary (default: target/release/sift, else $SIFT_BIN)")
    parser.add_argument("--nats-url", default="nats://127.0.0.1:14222")
    parser.add_argument("--out", help="write the raw results as JSON here")
    parser.add_argument("--feed", choices=("sift", "nats"), help=argparse.SUPPRESS)
    parser.add_argument("--feed-address", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.feed == "sift":
        asyncio.run(sift_publisher_process(args.feed_address, args.count, args.size))
        return
    if args.feed == "nats":
        asyncio.run(nats_publisher_process(args.feed_address, args.count, args.size))
        return
    report = asyncio.run(run(args))
    print_table(report)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"raw results: {args.out}")


if __name__ == "__main__":
    main()
