"""The dashboard (`GET /`) in a real browser.

Two linked brokers, `a` and `b`, get a known workload over HTTP: filtered
subscriptions, a steady trickle of publishes, subscriptions that nobody
reads and that drop by their policy, a stream with a durable subscription
that nobody reads, and interest on `b` that `a` routes to; native clients
with an empty name and with the same name connect to `a`. Chromium
(Debian's, `$SIFT_CHROMIUM`) opens `a`'s dashboard and the test waits for
each panel to show what the workload produced, then drives the live tail.

With `SIFT_UPDATE_SCREENSHOTS=1` the test saves screenshots to
`docs/dashboard/`.
"""

import json
import os
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect, sync_playwright
from sift.codec import encode_hello

from conftest import REPOSITORY, sift_binary, start_broker

SCREENSHOTS = REPOSITORY / "docs" / "dashboard"
TIMEOUT_MS = 15_000
# The page takes its second snapshot a quarter of a second after its first,
# so the charts have a line well within a second of the first snapshot.
FIRST_LINE_MS = 1_000
# Drop rates are averaged over 10 s: a drop row calms down after that.
DROP_CALM_MS = 30_000
STREAM = "dash"
DURABLE = "dash-reader"
PERSISTENT_PUBLISHES = 3


# --------------------------------------------------------------------------
# HTTP helpers


def request(url, body=None, method=None):
    """Sends JSON (or nothing); returns (status, decoded JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None


def subscribe(broker, **spec):
    status, body = request(f"{broker.http_url}/v1/subscriptions", spec)
    assert status == 201, body
    return body["id"]


def publish(broker, topic, properties=None, payload="", **options):
    """Publishes; a message nobody wants (404 no_subscribers) is fine here."""
    status, body = request(f"{broker.http_url}/v1/messages",
                           {"topic": topic, "properties": properties or {}, "payload": payload, **options})
    assert status in (200, 404), body
    return body


def admin(broker, query):
    return request(f"{broker.http_url}/v1/admin/{query}")[1]


def wait_until(condition, what, timeout=15.0):
    """Polls `condition` until it returns something true; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --------------------------------------------------------------------------
# Fixtures


@pytest.fixture
def network():
    """Brokers `a` and `b`, `b` linked to `a`, the link up on both."""
    link_port = free_port()
    brokers = []
    try:
        brokers.append(start_broker(["--name", "a", "--link-listen", f"127.0.0.1:{link_port}"]))
        brokers.append(start_broker(["--name", "b", "--link", f"127.0.0.1:{link_port}"]))
        a, b = brokers
        for broker, neighbour in ((a, "b"), (b, "a")):
            wait_until(lambda: any(link["neighbour"] == neighbour for link in admin(broker, "links")["links"]),
                       f"the link to {neighbour}")
        yield a, b
    finally:
        for broker in brokers:
            broker.stop()


def connection_subscribed_to(broker, topic):
    """The admin report's connection with a subscription to `topic`, or None."""
    for connection in admin(broker, "subscriptions")["connections"]:
        if any(subscription["topic"] == topic for subscription in connection["subscriptions"]):
            return connection
    return None


@pytest.fixture
def native_subscriber(network):
    """A native `sift sub` client on `a`, so that a non-HTTP client shows;
    yields its entry in the admin report. The test does not assume which
    name the command gives its connection."""
    a, _ = network
    process = subprocess.Popen(
        [sift_binary(), "sub", "--server", a.native, "--topic", "native.>", "--tags", "n>1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield wait_until(lambda: connection_subscribed_to(a, "native.>"), "the native subscriber")
    finally:
        process.kill()
        process.wait(timeout=10)


BARE_CLIENT_NAMES = ("", "twin", "twin")


@pytest.fixture
def bare_clients(network):
    """Native connections to `a` that name themselves badly: one gives an
    empty name, two give the same one. They only say HELLO."""
    a, _ = network
    sockets = []
    try:
        for name in BARE_CLIENT_NAMES:
            sockets.append(socket.create_connection((a.host, a.port), timeout=10))
            sockets[-1].sendall(encode_hello(name))
        wait_until(lambda: len([c for c in admin(a, "subscriptions")["connections"] if c["client"] in BARE_CLIENT_NAMES])
                   == len(BARE_CLIENT_NAMES), "the bare clients")
        yield sockets
    finally:
        for connection in sockets:
            connection.close()


@pytest.fixture
def page():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=os.environ.get("SIFT_CHROMIUM", "/usr/bin/chromium"), args=["--no-sandbox"])
        try:
            opened = browser.new_page(viewport={"width": 1400, "height": 900})
            opened.set_default_timeout(TIMEOUT_MS)
            errors = []
            opened.on("pageerror", lambda error: errors.append(error))
            yield opened
            assert not errors, f"the page raised: {errors}"
        finally:
            browser.close()


@pytest.fixture
def trickle(network):
    """Publishes a few messages a second on `a` until the test ends: rates
    are differences between refreshes, so something must happen between
    them for as long as the test looks."""
    a, _ = network
    stop = threading.Event()

    def run():
        while not stop.is_set():
            publish(a, "quotes.ibm", {"sym": "IBM", "price": 12.5}, "IBM 12.5")
            publish(a, "remote.eu", {"region": "eu"}, "to b")
            stop.wait(0.1)

    thread = threading.Thread(target=run, daemon=True)
    try:
        yield thread
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(timeout=10)


# --------------------------------------------------------------------------
# Assertions on the page


def wait_value(page, test_id, comparison):
    """Waits until the element's `data-value` (a number) satisfies `comparison`, e.g. '> 0'."""
    page.wait_for_function(
        f"""() => {{
            const node = document.querySelector('[data-testid="{test_id}"]');
            return node !== null && node.dataset.value !== "" && Number(node.dataset.value) {comparison};
        }}""")


def wait_cell(page, selector, comparison):
    """As `wait_value`, for the first element matching a CSS selector."""
    page.wait_for_function(
        f"""(selector) => {{
            const node = document.querySelector(selector);
            return node !== null && node.dataset.value !== "" && Number(node.dataset.value) {comparison};
        }}""", arg=selector)


def by_id(page, name):
    return page.get_by_test_id(name)


def chart_points(series):
    """JavaScript: how many points a chart series' line has."""
    return f"""document.querySelector('polyline[data-series="{series}"]').getAttribute('points').split(' ')
               .filter((point) => point !== '').length"""


# The byte chart's axis labels: a number and a binary unit per second.
BYTE_AXIS_LABEL = re.compile(r"^\d+(\.\d)? (B|KiB|MiB|GiB|TiB)/s$")


# --------------------------------------------------------------------------
# The test


def test_dashboard_shows_the_workload(network, native_subscriber, bare_clients, page, trickle):
    a, b = network
    expect.set_options(timeout=TIMEOUT_MS)

    # A stream and a durable subscription on it that nobody reads: what is
    # stored for it stays pending.
    status, body = request(f"{a.http_url}/v1/streams", {"name": STREAM, "topics": [f"{STREAM}.>"], "fsync": "always"})
    assert status == 201, body
    subscribe(a, topic=f"{STREAM}.>", durable=DURABLE, stream=STREAM)

    # Subscriptions on `a` that nobody reads. Reliable messages stay unacked
    # (max_unacked 1), so the second one waits in the queue (capacity 1)
    # and the rest are dropped by the policy.
    subscribe(a, topic="quotes.*", sql="price > 10 AND sym = 'IBM'")
    subscribe(a, topic="drops.x", policy="drop-new", queue_capacity=1, max_unacked=1)
    subscribe(a, topic="keep.x", queue="keepers", policy="keep-last:1", max_unacked=1)
    # Interest on `b` that `a` learns about.
    subscribe(b, topic="remote.>", tags='region="eu"')
    wait_until(lambda: any(entry["broker"] == "b" and entry["topic"] == "remote.>"
                           for entry in admin(a, "routes")["remote_interest"]), "b's interest at a")

    page.goto(a.http_url + "/")
    page.wait_for_function("() => Number(document.body.dataset.refreshes || 0) >= 1")
    # The charts draw a line from their first snapshot on, not a refresh
    # later, and mark its newest point.
    page.wait_for_function(f"() => {chart_points('published')} >= 2 && {chart_points('bytesIn')} >= 2",
                           timeout=FIRST_LINE_MS)
    for chart in ("chart-messages", "chart-bytes"):
        expect(by_id(page, chart).locator("circle.dot")).to_have_count(2)
    expect(by_id(page, "broker-name")).to_have_text("a")
    trickle.start()
    for index in range(PERSISTENT_PUBLISHES):
        publish(a, f"{STREAM}.x", {"index": index}, "stored", mode="persistent")

    # Drops, after the page has its first snapshot, so that their rate shows.
    for _ in range(5):
        publish(a, "drops.x", payload="drop me", mode="reliable")
    for _ in range(4):
        publish(a, "keep.x", payload="keep me", mode="reliable")
    counters = admin(a, "stats")["counters"]
    assert counters["dropped_queue_full"] >= 3 and counters["dropped_keep_last"] >= 2, counters

    # 1. Rates over time.
    for name in ("rate-published", "rate-delivered", "rate-bytes-in", "rate-bytes-out"):
        wait_value(page, name, "> 0")
    page.wait_for_function(
        """() => document.querySelector('[data-testid="chart-messages"] polyline[data-series="published"]')
                 .getAttribute('points').split(' ').length >= 2""")
    byte_labels = by_id(page, "chart-bytes").locator("text.axis").all_text_contents()
    unit_labels = [label for label in byte_labels if not re.fullmatch(r"-\dm|now", label)]
    assert len(unit_labels) == 3 and all(BYTE_AXIS_LABEL.match(label) for label in unit_labels), byte_labels

    # 2. Connections: the native client, the bare ones and the HTTP sessions,
    # each under a label of its own.
    wait_value(page, "connections-count", f">= {3 + len(BARE_CLIENT_NAMES)}")
    native = page.locator(f'[data-testid="connection-row"][data-connection="{native_subscriber["connection"]}"]')
    expect(native).to_contain_text(native_subscriber["client"])
    expect(page.locator('[data-testid="connection-row"][data-client^="http-sub-"]')).to_have_count(4)
    expect(page.locator('[data-testid="connection-row"][data-client="twin"]')).to_have_count(2)
    labels = page.locator('[data-testid="connection-row"]').evaluate_all("rows => rows.map((row) => row.dataset.label)")
    assert len(set(labels)) == len(labels) and all(label.strip() for label in labels), labels

    # 3. Subscriptions with their filters.
    quotes = page.locator('[data-testid="subscription-row"][data-topic="quotes.*"]')
    expect(quotes).to_contain_text("sql")
    expect(quotes).to_contain_text("price > 10")
    expect(quotes).to_contain_text("IBM")
    expect(page.locator('[data-testid="subscription-row"][data-topic="native.>"]')).to_contain_text("n>1")
    expect(page.locator('[data-testid="subscription-row"][data-topic="drops.x"]')).to_contain_text("drop-new")
    keep = page.locator('[data-testid="subscription-row"][data-topic="keep.x"]')
    expect(keep).to_contain_text("keepers")
    expect(keep).to_contain_text("keep-last:1")

    # 4. Queue depths and drops, with their rates.
    expect(page.locator('[data-testid="queue-row"][data-topic="drops.x"]')).to_contain_text("1")
    wait_value(page, "drop-dropped_queue_full", ">= 3")
    wait_value(page, "drop-dropped_keep_last", ">= 2")
    wait_value(page, "drop-rate-dropped_queue_full", "> 0")
    queue_full = page.locator('[data-testid="drop-row"][data-counter="dropped_queue_full"]')
    expect(queue_full).to_have_attribute("data-dropping", "yes")
    expect(queue_full).to_have_class("alert")

    # Streams: the stream's stored messages and its durable's pending count.
    stream_row = f'[data-testid="stream-row"][data-stream="{STREAM}"]'
    wait_cell(page, f'{stream_row} [data-testid="stream-messages"]', f"== {PERSISTENT_PUBLISHES}")
    wait_cell(page, f'{stream_row} [data-testid="stream-bytes"]', "> 0")
    expect(page.locator(f'{stream_row} [data-testid="stream-fsync"]')).to_have_text("always")
    durable_row = f'[data-testid="durable-row"][data-durable="{DURABLE}"]'
    expect(page.locator(durable_row)).to_contain_text(STREAM)
    wait_cell(page, f'{durable_row} [data-testid="durable-pending"]', f"== {PERSISTENT_PUBLISHES}")
    expect(by_id(page, "streams-error")).to_be_hidden()

    # 5. The network: both brokers, the link with its rate, and interest.
    node_a = by_id(page, "node-a")
    node_b = by_id(page, "node-b")
    expect(node_a).to_contain_text("this broker")
    expect(node_a).to_contain_text("quotes.*")
    expect(node_b).to_contain_text("remote.>")
    expect(node_b).to_contain_text('region="eu"')
    expect(by_id(page, "edge-a-b")).to_have_count(1)
    wait_value(page, "edge-rate-b", "> 0")
    expect(page.locator('[data-testid="link-row"]')).to_contain_text("b")

    # Latency: the deliveries above were timed.
    expect(by_id(page, "deliver_latency-p50")).not_to_have_text("–")

    # 6. Live tail: a bad filter shows the broker's message and position.
    by_id(page, "tail-topic").fill("tail.>")
    by_id(page, "tail-language").select_option("sql")
    by_id(page, "tail-filter").fill("price >")
    by_id(page, "tail-start").click()
    expect(by_id(page, "tail-error")).to_be_visible()
    expect(by_id(page, "tail-error-message")).to_contain_text("expected")
    expect(by_id(page, "tail-error-position")).to_have_attribute("data-value", "7")

    # A good one: a non-matching message, then a matching sentinel.
    by_id(page, "tail-filter").fill("sym = 'IBM'")
    by_id(page, "tail-start").click()
    status = by_id(page, "tail-status")
    expect(status).to_have_attribute("data-state", "listening")
    expect(by_id(page, "tail-error")).to_be_hidden()
    first = status.get_attribute("data-subscription")
    assert first
    publish(a, "tail.x", {"sym": "MSFT"}, "not-for-the-tail")
    publish(a, "tail.x", {"sym": "IBM", "price": 99}, "sentinel-one")
    rows = page.locator('[data-testid="tail-row"]')
    expect(rows.filter(has_text="sentinel-one")).to_have_count(1)
    expect(rows.filter(has_text="sentinel-one")).to_contain_text('sym="IBM"')
    expect(rows.filter(has_text="sentinel-one")).to_contain_text("tail.x")
    expect(by_id(page, "tail-messages")).not_to_contain_text("not-for-the-tail")
    # The page marks its own subscription's session among the connections.
    expect(page.locator(f'[data-testid="connection-row"][data-client="http-{first}"]')).to_contain_text("tail")

    # Nothing overflows the window sideways at this width, and the latency
    # table fits its panel.
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    latency_box = by_id(page, "latency").locator(".scroll")
    assert latency_box.evaluate("(box) => box.scrollWidth <= box.clientWidth"), "the latency table overflows"

    if os.environ.get("SIFT_UPDATE_SCREENSHOTS") == "1":
        # Some history first, so that the charts show lines rather than dots.
        page.wait_for_function(
            """() => document.querySelector('[data-testid="chart-messages"] polyline[data-series="published"]')
                     .getAttribute('points').split(' ').length >= 15""", timeout=30_000)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "dashboard.png"), full_page=True)
        by_id(page, "network").screenshot(path=str(SCREENSHOTS / "network.png"))

    # Changing the tail deletes the previous subscription.
    by_id(page, "tail-filter").fill("sym = 'HP'")
    by_id(page, "tail-start").click()
    expect(status).not_to_have_attribute("data-subscription", first)
    expect(status).to_have_attribute("data-state", "listening")
    second = status.get_attribute("data-subscription")
    assert second and second != first
    wait_until(lambda: first not in [s["id"] for s in request(f"{a.http_url}/v1/subscriptions")[1]["subscriptions"]],
               "the first tail subscription to be deleted")
    publish(a, "tail.y", {"sym": "HP"}, "sentinel-two")
    expect(rows.filter(has_text="sentinel-two")).to_have_count(1)

    # Stop deletes it too.
    by_id(page, "tail-stop").click()
    expect(status).to_have_text("Stopped.")
    wait_until(lambda: second not in [s["id"] for s in request(f"{a.http_url}/v1/subscriptions")[1]["subscriptions"]],
               "the second tail subscription to be deleted")

    # A drop row calms down once its counter stops rising; the total stays.
    expect(queue_full).to_have_attribute("data-dropping", "no", timeout=DROP_CALM_MS)
    expect(queue_full).not_to_have_class("alert")
    wait_value(page, "drop-dropped_queue_full", ">= 3")
