"""What the HTTP door's tests share: a local server that takes callback
deliveries, and the reader of a server-sent event stream."""

import http.server
import json
import queue
import threading

from sdk_support import TIMEOUT


class CallbackReceiver:
    """An HTTP server on loopback that puts each callback POST's JSON on
    `received`. The broker keeps its connection alive (HTTP/1.1)."""

    def __init__(self):
        received = self.received = queue.Queue()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = TIMEOUT

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.put(json.loads(body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(TIMEOUT)


def deliveries(response):
    """The deliveries (`message` events, as JSON) of a server-sent event
    stream, until it ends; other events are passed over."""
    with response:
        event, data = "message", []
        for raw in response:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                event = line[len("event:"):].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:"):].strip())
            elif not line and data:
                if event == "message":
                    yield json.loads("\n".join(data))
                event, data = "message", []
