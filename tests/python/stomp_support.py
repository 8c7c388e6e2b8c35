"""A stomp.py client for the tests: its listener puts what it receives on
queues the test waits on (stomp.py calls back on its own thread)."""

import asyncio
import queue

import stomp

from sdk_support import TIMEOUT


class Collector(stomp.ConnectionListener):
    """Everything a stomp.py connection received, in order."""

    def __init__(self):
        self.messages = queue.Queue()
        self.receipts = queue.Queue()
        self.errors = queue.Queue()

    def on_message(self, frame):
        self.messages.put(frame)

    def on_receipt(self, frame):
        self.receipts.put(frame.headers.get("receipt-id"))

    def on_error(self, frame):
        self.errors.put(frame)


def stomp_client(broker, name="pytest-stomp", client_id=None):
    """A connected STOMP 1.2 client of `broker` (login `name`, and CONNECT's
    `client-id` when given) and its collector."""
    connection = stomp.Connection12([(broker.stomp_host, broker.stomp_port)], heartbeats=(0, 0))
    collector = Collector()
    connection.set_listener("collector", collector)
    headers = {"client-id": client_id} if client_id else {}
    connection.connect(login=name, wait=True, headers=headers)
    return connection, collector


async def take(source, timeout=TIMEOUT):
    """The next item of a thread-fed queue, waited for without blocking the loop."""
    return await asyncio.to_thread(source.get, True, timeout)
