// The Sift dashboard (see index.html).
//
// Once a second the page reads the four admin reports and the streams and
// durable subscriptions, keeps a short history of counter snapshots, and
// redraws every panel from them. Rates are differences between snapshots
// divided by the time between them, so a late or skipped refresh gives a
// right rate rather than a spike. The live tail is one HTTP subscription
// read through an EventSource.
//
// No framework and no build step: the file is served as written, embedded
// in the broker, and must work offline.

"use strict";

(function () {
  // ---------------------------------------------------------------------
  // Settings

  const REFRESH_MS = 1000;
  /**
   * The second refresh comes this soon after the first: a rate needs two
   * snapshots, and the charts should not stay empty for a whole interval.
   */
  const FIRST_RATE_MS = 250;
  /** How much history the charts show. */
  const HISTORY_MS = 180 * 1000;
  /** Snapshots are kept this long: the latency panel's window. */
  const SNAPSHOT_KEEP_MS = 65 * 1000;
  /** Drop rates are averaged over this long: drops come in bursts. */
  const DROP_WINDOW_MS = 10 * 1000;
  const LATENCY_WINDOW_MS = 60 * 1000;
  /** At most this many rows per table, so a big broker cannot stall the page. */
  const MAX_ROWS = 200;
  const DEEPEST_QUEUES = 8;
  /** Interest lines shown per broker in the graph before "+N more". */
  const INTEREST_LINES = 6;

  /** The drop counters, in the order shown. */
  const DROP_COUNTERS = [
    ["dropped_queue_full", "queue full (drop-new)"],
    ["dropped_keep_last", "keep-last overwrote"],
    ["dropped_expired", "expired (TTL)"],
    ["dropped_subscriber_gone", "subscriber gone"],
    ["dropped_rejected", "rejected (nack)"],
    ["redelivered", "redelivered"],
  ];

  const SVG_NS = "http://www.w3.org/2000/svg";

  // ---------------------------------------------------------------------
  // DOM helpers. Everything the broker sends is set as text, never as
  // HTML: topics, filters and payloads come from clients.

  /** Appends children: strings become text, null and false are skipped. */
  function append(node, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  /** An HTML element; `attrs.text` sets its text, other keys are attributes. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttributes(node, attrs);
    return append(node, children);
  }

  /** An SVG element, as `el`. */
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttributes(node, attrs);
    return append(node, children);
  }

  function setAttributes(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
  }

  function byTestId(id) {
    return document.querySelector(`[data-testid="${id}"]`);
  }

  /** Sets a value element's text and its raw number, which tests read. */
  function showValue(id, value, text) {
    const node = byTestId(id);
    node.dataset.value = String(value);
    node.textContent = text;
  }

  /** A table row of cells; a cell is text, a node, or [content, className]. */
  function row(cells, attrs) {
    return el("tr", attrs, cells.map((cell) => {
      if (Array.isArray(cell)) return el("td", { class: cell[1] }, cell[0]);
      return el("td", null, cell);
    }));
  }

  /** Replaces a tbody's rows; an empty list shows `emptyText` across it. */
  function fillRows(tbody, rows, emptyText) {
    const columns = tbody.closest("table").querySelectorAll("thead tr:last-child th").length;
    if (rows.length === 0) {
      tbody.replaceChildren(el("tr", { class: "empty" }, el("td", { colspan: columns }, emptyText)));
      return;
    }
    const shown = rows.slice(0, MAX_ROWS);
    if (rows.length > MAX_ROWS) {
      shown.push(el("tr", { class: "empty" }, el("td", { colspan: columns }, `… and ${rows.length - MAX_ROWS} more`)));
    }
    tbody.replaceChildren(...shown);
  }

  /** Shortens text for a cramped place; the full text goes in a tooltip. */
  function truncate(text, length) {
    return text.length <= length ? text : text.slice(0, length - 1) + "…";
  }

  // ---------------------------------------------------------------------
  // Number formatting

  const SI = ["", "k", "M", "G", "T"];

  /** 0.4, 12.5, 950, 12.3k, 4.1M: short enough for a legend. */
  function formatNumber(value) {
    if (!Number.isFinite(value)) return "–";
    let scaled = value;
    let unit = 0;
    while (Math.abs(scaled) >= 1000 && unit < SI.length - 1) {
      scaled /= 1000;
      unit += 1;
    }
    const digits = unit === 0 && Number.isInteger(scaled) ? 0 : Math.abs(scaled) < 10 ? 1 : 0;
    return scaled.toFixed(digits) + SI[unit];
  }

  function formatRate(value) {
    return `${formatNumber(value)}/s`;
  }

  const BINARY = ["B", "KiB", "MiB", "GiB", "TiB"];

  /** [value in its binary unit, index of the unit in BINARY]. */
  function scaleBytes(value) {
    let scaled = value;
    let unit = 0;
    while (scaled >= 1024 && unit < BINARY.length - 1) {
      scaled /= 1024;
      unit += 1;
    }
    return [scaled, unit];
  }

  /** 12 B, 3.4 KiB: whole bytes, else one decimal. */
  function formatBytes(value) {
    if (!Number.isFinite(value)) return "–";
    const [scaled, unit] = scaleBytes(value);
    return `${unit === 0 ? Math.round(scaled) : scaled.toFixed(1)} ${BINARY[unit]}`;
  }

  /**
   * 512 B/s, 2 KiB/s, 1.5 MiB/s: an axis label, so no decimal on round
   * values, which the byte axis has (see niceByteCeiling).
   */
  function formatByteRate(value) {
    if (!Number.isFinite(value)) return "–";
    const [scaled, unit] = scaleBytes(value);
    const digits = Number.isInteger(scaled) ? 0 : 1;
    return `${scaled.toFixed(digits)} ${BINARY[unit]}/s`;
  }

  function formatCount(value) {
    return Number(value).toLocaleString("en-US");
  }

  function formatMicros(us) {
    if (us === null || !Number.isFinite(us)) return "–";
    if (us < 1000) return `${us.toFixed(us < 10 ? 1 : 0)} µs`;
    if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`;
    return `${(us / 1e6).toFixed(2)} s`;
  }

  function formatDuration(ms) {
    const seconds = Math.floor(ms / 1000);
    if (seconds < 60) return `${seconds}s`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
    return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
  }

  /** `[sql] (price > 10)`, or null when the subscription has no content filter. */
  function describeFilter(content) {
    return content ? `[${content.language}] ${content.filter}` : null;
  }

  // ---------------------------------------------------------------------
  // Fetching

  /** GETs a JSON report; throws with the status when it is not 2xx. */
  async function getJSON(path) {
    const response = await fetch(path, { cache: "no-store" });
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
  }

  /**
   * GETs a report that only one panel needs: a failure becomes `{error}`
   * for that panel to show, rather than failing the whole refresh.
   */
  function getOptionalJSON(path) {
    return getJSON(path).catch((error) => ({ error: error.message }));
  }

  async function fetchReports() {
    const [stats, subscriptions, links, routes, streams, durables] = await Promise.all([
      getJSON("/v1/admin/stats"),
      getJSON("/v1/admin/subscriptions"),
      getJSON("/v1/admin/links"),
      getJSON("/v1/admin/routes"),
      getOptionalJSON("/v1/streams"),
      getOptionalJSON("/v1/durables"),
    ]);
    return { stats, subscriptions, links, routes, streams, durables };
  }

  // ---------------------------------------------------------------------
  // Snapshots and rates
  //
  // A snapshot is {time, counters, histograms, links: {neighbour: link}}.
  // `snapshots` holds the last minute or so; `history` the chart points.

  const snapshots = [];
  const history = [];

  function takeSnapshot(time, reports) {
    const links = {};
    for (const link of reports.links.links || []) links[link.neighbour] = link;
    return { time, counters: reports.stats.counters || {}, histograms: reports.stats.histograms || {}, links };
  }

  /** The newest snapshot at least `age` ms older than `now`, else the oldest. */
  function snapshotBefore(now, age) {
    for (let i = snapshots.length - 1; i >= 0; i -= 1) {
      if (now.time - snapshots[i].time >= age) return snapshots[i];
    }
    return snapshots[0];
  }

  /**
   * Per-second rate of a counter between two snapshots. A counter that went
   * down means the broker restarted: its counters start again from zero, so
   * the new value is all that happened since.
   */
  function rateBetween(older, newer, read) {
    if (!older || older === newer) return null;
    const seconds = (newer.time - older.time) / 1000;
    if (seconds <= 0) return null;
    const before = read(older) || 0;
    const after = read(newer) || 0;
    return (after >= before ? after - before : after) / seconds;
  }

  function counterRate(older, newer, name) {
    return rateBetween(older, newer, (snapshot) => snapshot.counters[name]);
  }

  /** The charted rates between two snapshots; all null without an older one. */
  function chartRates(older, newer) {
    return {
      published: counterRate(older, newer, "messages_published"),
      delivered: counterRate(older, newer, "messages_delivered"),
      bytesIn: counterRate(older, newer, "bytes_received"),
      bytesOut: counterRate(older, newer, "bytes_sent"),
    };
  }

  /**
   * Records a snapshot and its chart point. The first snapshot seeds the
   * charts with a point whose rates are not known yet; the next snapshot
   * gives it the rate of the interval that starts there, so that two
   * snapshots already draw a line rather than a lone point.
   */
  function record(snapshot) {
    const previous = snapshots[snapshots.length - 1];
    snapshots.push(snapshot);
    while (snapshots.length > 2 && snapshot.time - snapshots[0].time > SNAPSHOT_KEEP_MS) snapshots.shift();
    const rates = chartRates(previous, snapshot);
    const seed = history[history.length - 1];
    if (seed && seed.awaitingRates) Object.assign(seed, rates, { awaitingRates: false });
    history.push({ time: snapshot.time, awaitingRates: !previous, ...rates });
    while (history.length && snapshot.time - history[0].time > HISTORY_MS) history.shift();
  }

  // ---------------------------------------------------------------------
  // Panel 1: throughput charts

  const CHART = { width: 640, height: 180, left: 70, right: 10, top: 10, bottom: 22 };

  /** A round number at or above `value`, for the top of an axis. */
  function niceCeiling(value) {
    if (value <= 1) return 1;
    const magnitude = 10 ** Math.floor(Math.log10(value));
    // Steps whose halves are round too: the middle grid line is labelled.
    for (const step of [1, 2, 4, 6, 8, 10]) {
      if (value <= step * magnitude) return step * magnitude;
    }
    return 10 * magnitude;
  }

  /**
   * A round number of bytes at or above `value`: a round number of B, KiB,
   * MiB… so that the axis reads 2 KiB/s rather than 2048 or 1.95 KiB/s.
   * Above half a unit the next unit is used: 1 KiB rather than 600 B.
   */
  function niceByteCeiling(value) {
    let unit = 1;
    while (value > 512 * unit && unit < 1024 ** 4) unit *= 1024;
    return niceCeiling(value / unit) * unit;
  }

  /** The two chart scales: how to round the top of the axis and label it. */
  const MESSAGE_AXIS = { ceiling: niceCeiling, format: formatRate };
  const BYTE_AXIS = { ceiling: niceByteCeiling, format: formatByteRate };

  /**
   * Draws a line chart of `keys` (one series each) from `history` into an
   * SVG, time running from HISTORY_MS ago (left) to now (right), with the
   * vertical scale of `axis`.
   */
  function drawChart(node, keys, axis) {
    const { width, height, left, right, top, bottom } = CHART;
    const plotWidth = width - left - right;
    const plotHeight = height - top - bottom;
    const now = history.length ? history[history.length - 1].time : performance.now();
    let highest = 0;
    for (const point of history) for (const key of keys) highest = Math.max(highest, point[key] || 0);
    const ceiling = axis.ceiling(highest);
    const x = (time) => left + plotWidth * (1 - (now - time) / HISTORY_MS);
    const y = (value) => top + plotHeight * (1 - value / ceiling);

    const parts = [];
    // Horizontal grid with the scale, then the time axis.
    for (const fraction of [0, 0.5, 1]) {
      const level = y(ceiling * fraction);
      parts.push(svg("line", { class: "grid", x1: left, x2: width - right, y1: level, y2: level }));
      parts.push(svg("text", { class: "axis", x: left - 6, y: level + 4, "text-anchor": "end" }, axis.format(ceiling * fraction)));
    }
    for (const minutes of [3, 2, 1, 0]) {
      const at = x(now - minutes * 60000);
      parts.push(svg("text", { class: "axis", x: at, y: height - 6, "text-anchor": minutes === 3 ? "start" : minutes === 0 ? "end" : "middle" },
        minutes === 0 ? "now" : `-${minutes}m`));
    }
    keys.forEach((key, index) => parts.push(drawSeries(key, index, x, y)));
    node.replaceChildren(...parts);
  }

  /**
   * One series: a line through its known points, and a dot on the newest.
   * The first seconds' points are a pixel apart on a three-minute axis, so
   * without the dot a new page would show next to nothing.
   */
  function drawSeries(key, index, x, y) {
    const points = history.filter((point) => point[key] !== null).map((point) => [x(point.time), y(point[key])]);
    const group = svg("g", { "data-series": key },
      svg("polyline", { class: `line series-${index}`, "data-series": key,
        points: points.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ") }));
    const newest = points[points.length - 1];
    if (newest) group.append(svg("circle", { class: `dot series-${index}`, "data-series": key, cx: newest[0], cy: newest[1], r: 3 }));
    return group;
  }

  function renderRates() {
    const last = history[history.length - 1];
    if (last && !last.awaitingRates) {
      showValue("rate-published", last.published, formatRate(last.published));
      showValue("rate-delivered", last.delivered, formatRate(last.delivered));
      showValue("rate-bytes-in", last.bytesIn, `${formatBytes(last.bytesIn)}/s`);
      showValue("rate-bytes-out", last.bytesOut, `${formatBytes(last.bytesOut)}/s`);
    }
    drawChart(byTestId("chart-messages"), ["published", "delivered"], MESSAGE_AXIS);
    drawChart(byTestId("chart-bytes"), ["bytesIn", "bytesOut"], BYTE_AXIS);
  }

  // ---------------------------------------------------------------------
  // Panel 2: connections

  function renderConnections(reports) {
    const counters = reports.stats.counters || {};
    const doors = reports.stats.doors || {};
    const http = doors.http || {};
    showValue("connections-count", counters.connections_current || 0, formatCount(counters.connections_current || 0));
    byTestId("http-summary").textContent =
      `HTTP front-end: ${formatCount(http.connections_current || 0)} connections, ` +
      `${formatCount(http.event_streams_current || 0)} event streams, ` +
      `${formatCount(http.websockets_current || 0)} WebSockets`;
    byTestId("doors-summary").textContent = doorsSummary(doors);

    const connections = [...(reports.subscriptions.connections || [])].sort((a, b) => a.connection - b.connection);
    const nameCounts = countNames(connections);
    const rows = connections.map((connection) => {
      const identity = connectionIdentity(connection, nameCounts);
      return row([
        [String(connection.connection), "num dim"],
        [connection.door || "native", "dim"],
        [clientLabel(connection, identity), "client"],
        [formatCount(connection.subscriptions.length), "num"],
        [formatBytes(connection.pending_bytes), "num"],
        [formatCount(connection.unacked), "num"],
      ], {
        "data-testid": "connection-row",
        "data-client": connection.client,
        "data-door": connection.door || "native",
        "data-connection": connection.connection,
        "data-label": identity.detail ? `${identity.name} ${identity.detail}` : identity.name,
      });
    });
    fillRows(byTestId("connections-rows"), rows, "No client connections.");
  }

  /**
   * The STOMP and MQTT front-ends' traffic in one line, from the counters
   * each door registers with the broker (`stats.doors`); a door that is
   * off is left out.
   */
  function doorsSummary(doors) {
    const parts = [];
    if (doors.stomp) {
      const stomp = doors.stomp;
      parts.push(`STOMP: ${formatCount(stomp.connections_accepted || 0)} connections accepted, ` +
        `${formatCount(stomp.messages_sent || 0)} SENDs, ${formatCount(stomp.messages_delivered || 0)} MESSAGEs`);
    }
    if (doors.mqtt) {
      const mqtt = doors.mqtt;
      parts.push(`MQTT: ${formatCount(mqtt.connections_accepted || 0)} connections accepted, ` +
        `${formatCount(mqtt.messages_received || 0)} publishes in, ${formatCount(mqtt.messages_delivered || 0)} out`);
    }
    return parts.join(" · ");
  }

  /**
   * Client names that say which program connected but not which instance
   * of it: the command-line tools' bare names (`sift-sub`) and placeholders.
   */
  const GENERIC_CLIENT_NAME = /^(sift(-[a-z]+)?|client|default|anonymous|unknown)$/i;

  /** How many connections carry each client name. */
  function countNames(connections) {
    const counts = new Map();
    for (const connection of connections) counts.set(connection.client, (counts.get(connection.client) || 0) + 1);
    return counts;
  }

  /**
   * What tells a connection apart from the others: the name its client
   * gave, and, when that name is empty, generic or carried by another
   * connection too, its peer address (when the broker reports one) or else
   * its connection id. Returns {name, detail}; detail is null when the name
   * is enough on its own.
   */
  function connectionIdentity(connection, nameCounts) {
    const name = (connection.client || "").trim();
    if (name && !GENERIC_CLIENT_NAME.test(name) && nameCounts.get(connection.client) === 1) return { name, detail: null };
    return { name: name || "unnamed client", detail: connection.peer || `#${connection.connection}` };
  }

  /** A connection's name cell, marked when it is this page's own live tail session. */
  function clientLabel(connection, identity) {
    const parts = [el("span", { title: connection.client, text: identity.name })];
    if (identity.detail) parts.push(" ", el("span", { class: "dim", text: identity.detail }));
    // An HTTP subscription `sub-N` is served by the session `http-sub-N`.
    if (tail.id && connection.client === `http-${tail.id}`) {
      parts.push(" ", el("span", { class: "badge", text: "this page's tail" }));
    }
    return el("span", null, parts);
  }

  // ---------------------------------------------------------------------
  // Panel 3: subscriptions

  /** Every subscription of every connection, with its connection alongside. */
  function allSubscriptions(report) {
    const result = [];
    for (const connection of report.connections || []) {
      for (const subscription of connection.subscriptions || []) result.push({ connection, subscription });
    }
    return result;
  }

  /** `client#connection/subscription`, as the broker names a subscription in its answers. */
  function subscriptionName(connection, subscription) {
    return `${connection.client || "unnamed"}#${connection.connection}/${subscription.sub_id}`;
  }

  function filterCell(content) {
    if (!content) return el("span", { class: "dim", text: "—" });
    return el("span", null, el("span", { class: "badge", text: content.language }), " ", el("code", { text: content.filter }));
  }

  function renderSubscriptions(reports) {
    const entries = allSubscriptions(reports.subscriptions);
    showValue("subscriptions-count", entries.length, formatCount(entries.length));
    const rows = entries.map(({ connection, subscription }) => row([
      subscriptionName(connection, subscription),
      el("code", { text: subscription.topic }),
      filterCell(subscription.content),
      subscription.queue_group || dash(),
      subscription.policy,
      subscription.ack_mode,
      storageLabel(subscription),
      [formatCount(subscription.queued), "num"],
    ], { "data-testid": "subscription-row", "data-topic": subscription.topic }));
    fillRows(byTestId("subscription-rows"), rows, "No subscriptions.");
  }

  function storageLabel(subscription) {
    const parts = [];
    if (subscription.stream) parts.push(`stream ${subscription.stream}`);
    if (subscription.durable) parts.push(`durable ${subscription.durable}`);
    return parts.length ? parts.join(", ") : dash();
  }

  function dash() {
    return el("span", { class: "dim", text: "—" });
  }

  // ---------------------------------------------------------------------
  // Panel: streams and durable subscriptions
  //
  // From /v1/streams and /v1/durables. A field the broker does not report
  // shows as a dash, so that the page works with brokers old and new.

  function renderStreams(reports) {
    const failure = reports.streams.error || reports.durables.error;
    const error = byTestId("streams-error");
    error.hidden = !failure;
    error.textContent = failure ? `Cannot read the streams: ${failure}` : "";
    const streams = reports.streams.streams || [];
    showValue("streams-count", streams.length, formatCount(streams.length));
    fillRows(byTestId("stream-rows"), streams.map(streamRow), reports.streams.error ? "Unknown." : "No streams.");
    const durables = reports.durables.durables || [];
    fillRows(byTestId("durable-rows"), durables.map(durableRow), reports.durables.error ? "Unknown." : "No durable subscriptions.");
  }

  /** A count cell that tests can read: text formatted, `data-value` raw. */
  function countCell(testId, value, format) {
    if (value === undefined || value === null) return [dash(), "num"];
    return [el("span", { "data-testid": testId, "data-value": value, text: format(value) }), "num"];
  }

  function streamRow(stream) {
    const refusing = stream.writable === false;
    return row([
      [el("span", null, stream.name, refusing ? [" ", el("span", { class: "badge alert-badge", text: "refuses writes" })] : null), "nowrap"],
      streamTopics(stream),
      stream.fsync ? [el("span", { "data-testid": "stream-fsync", text: stream.fsync }), "nowrap"] : dash(),
      countCell("stream-messages", stream.messages, formatCount),
      countCell("stream-bytes", stream.bytes, formatBytes),
      [sequenceRange(stream), "num"],
    ], { "data-testid": "stream-row", "data-stream": stream.name, class: refusing ? "alert" : null });
  }

  /** A stream's topic filters; the default stream has none and takes what no other stream does. */
  function streamTopics(stream) {
    const topics = stream.topics || [];
    if (topics.length === 0) return el("span", { class: "dim", text: "persistent messages no other stream holds" });
    return el("code", { text: topics.join(" ") });
  }

  /** `first–last` of the stored sequences, or a dash for an empty stream. */
  function sequenceRange(stream) {
    if (!stream.messages || stream.first_seq === undefined) return dash();
    return `${formatCount(stream.first_seq)}–${formatCount(stream.last_seq)}`;
  }

  function durableRow(durable) {
    // The JSON allows a null name (a consumer with no durable record): it is listed all the same.
    const name = durable.name || "unnamed";
    return row([
      [el("span", null, name, durable.shared ? [" ", el("span", { class: "badge", text: "shared" })] : null), "nowrap"],
      durable.stream || dash(),
      durableFilter(durable),
      countCell("durable-consumers", durable.consumers, formatCount),
      countCell("durable-in-flight", durable.in_flight, formatCount),
      countCell("durable-pending", durable.pending, formatCount),
    ], { "data-testid": "durable-row", "data-durable": name });
  }

  /** The topic filter, then the content filter when there is one. */
  function durableFilter(durable) {
    const topic = el("code", { text: durable.topic_filter || "" });
    if (!durable.filter) return topic;
    return el("span", null, topic, " ", filterCell({ language: durable.filter_kind || "filter", filter: durable.filter }));
  }

  // ---------------------------------------------------------------------
  // Panel 4: queue depths and drops

  function renderQueues(reports, now) {
    const deepest = allSubscriptions(reports.subscriptions)
      .filter(({ subscription }) => subscription.queued > 0)
      .sort((a, b) => b.subscription.queued - a.subscription.queued)
      .slice(0, DEEPEST_QUEUES);
    const top = deepest.length ? deepest[0].subscription.queued : 1;
    const queueRows = deepest.map(({ connection, subscription }) => row([
      [subscriptionName(connection, subscription), "nowrap"],
      el("code", { text: subscription.topic }),
      [subscription.policy, "nowrap"],
      [el("span", { class: "bar-cell" },
        el("span", { class: "bar", style: `width:${Math.max(2, (50 * subscription.queued) / top)}px` }),
        el("span", { text: formatCount(subscription.queued) })), "num"],
    ], { "data-testid": "queue-row", "data-topic": subscription.topic }));
    fillRows(byTestId("queue-rows"), queueRows, "Every queue is empty.");

    const older = snapshotBefore(now, DROP_WINDOW_MS);
    fillRows(byTestId("drop-rows"), DROP_COUNTERS.map(([name, label]) => dropRow(name, label, older, now)), "");
  }

  /**
   * A drop counter's row, highlighted while the counter rises: drops that
   * stopped more than DROP_WINDOW_MS ago remain in the total only.
   */
  function dropRow(name, label, older, now) {
    const total = now.counters[name] || 0;
    const rate = counterRate(older, now, name);
    const dropping = rate !== null && rate > 0;
    return row([
      label,
      [el("span", { "data-testid": `drop-${name}`, "data-value": total, text: formatCount(total) }), "num"],
      [el("span", { "data-testid": `drop-rate-${name}`, "data-value": rate ?? 0, text: rate === null ? "–" : formatRate(rate) }), "num"],
    ], { class: dropping ? "alert" : null, "data-testid": "drop-row", "data-counter": name, "data-dropping": dropping ? "yes" : "no" });
  }

  // ---------------------------------------------------------------------
  // Latency histograms

  /**
   * Estimates the quantile `q` of a histogram whose bucket i counts values
   * up to bounds[i] µs (the last bucket: above every bound), interpolating
   * linearly inside the bucket. Returns µs, or null when it is empty.
   */
  function quantile(bounds, counts, q) {
    const total = counts.reduce((sum, count) => sum + count, 0);
    if (total === 0) return null;
    const target = q * total;
    let below = 0;
    for (let i = 0; i < counts.length; i += 1) {
      if (counts[i] > 0 && below + counts[i] >= target) {
        const low = i === 0 ? 0 : bounds[i - 1];
        if (i >= bounds.length) return low; // Beyond the last bound: a floor only.
        return low + ((target - below) / counts[i]) * (bounds[i] - low);
      }
      below += counts[i];
    }
    return bounds[bounds.length - 1];
  }

  /**
   * What a histogram gained between two snapshots: {counts, count, sum_ns}.
   * A histogram that shrank means the broker restarted: all of it is new.
   */
  function histogramBetween(older, newer, name) {
    const after = newer.histograms[name];
    const before = older && older !== newer ? older.histograms[name] : null;
    if (!before || before.count > after.count) return after;
    return {
      counts: after.counts.map((count, i) => count - (before.counts[i] || 0)),
      count: after.count - before.count,
      sum_ns: after.sum_ns - before.sum_ns,
    };
  }

  /**
   * One table row: a histogram (or the part of it in a window) summarised.
   * The count is short (12.3k) so that the table fits a narrow panel; the
   * exact count is its tooltip.
   */
  function latencyRow(window, bounds, part, testId) {
    const mean = part.count ? part.sum_ns / part.count / 1000 : null;
    const p50 = formatMicros(quantile(bounds, part.counts, 0.5));
    return row([
      [window, "dim nowrap"],
      [el("span", { title: formatCount(part.count), text: formatNumber(part.count) }), "num"],
      [formatMicros(mean), "num"],
      [el("span", { "data-testid": testId, text: p50 }), "num"],
      [formatMicros(quantile(bounds, part.counts, 0.99)), "num"],
    ]);
  }

  /** A heading row across the table that names the histogram of the rows below it. */
  function latencyGroup(label) {
    return el("tr", { class: "group" }, el("th", { colspan: 5, scope: "rowgroup", text: label }));
  }

  function renderLatency(now) {
    const older = snapshotBefore(now, LATENCY_WINDOW_MS);
    const rows = [];
    for (const [name, label] of [["deliver_latency", "Deliver"], ["fsync_latency", "Fsync"]]) {
      const histogram = now.histograms[name];
      if (!histogram) continue;
      rows.push(latencyGroup(label));
      rows.push(latencyRow("last 60 s", histogram.bounds_us, histogramBetween(older, now, name), `${name}-recent-p50`));
      rows.push(latencyRow("since start", histogram.bounds_us, histogram, `${name}-p50`));
    }
    fillRows(byTestId("latency-rows"), rows, "The broker reports no histograms.");
    drawHistogram(byTestId("latency-histogram"), now.histograms.deliver_latency);
  }

  /** Bars of the deliver latency buckets since start. */
  function drawHistogram(node, histogram) {
    if (!histogram) return node.replaceChildren();
    const width = 400, height = 120, bottom = 18, top = 18;
    const counts = histogram.counts;
    const slot = width / counts.length;
    // Square-root heights, so a few slow deliveries remain visible beside
    // a large fast bucket.
    const highest = Math.sqrt(Math.max(1, ...counts));
    const parts = [svg("text", { class: "axis", x: 0, y: 11 }, "deliver latency since start (bar height ∝ √count)")];
    counts.forEach((count, i) => {
      const barHeight = ((height - top - bottom) * Math.sqrt(count)) / highest;
      const upper = i < histogram.bounds_us.length ? `≤ ${formatMicros(histogram.bounds_us[i])}` : `> ${formatMicros(histogram.bounds_us[i - 1])}`;
      parts.push(svg("rect", { class: "bucket", x: i * slot + 1, y: height - bottom - barHeight, width: slot - 2, height: barHeight },
        svg("title", null, `${upper}: ${formatCount(count)}`)));
    });
    // Bucket bounds under the bars: every sixth, enough to read the scale.
    for (let i = 0; i < histogram.bounds_us.length; i += 6) {
      const x = (i + 1) * slot;
      const anchor = i === 0 ? "start" : x > width - 40 ? "end" : "middle";
      parts.push(svg("text", { class: "axis", x, y: height - 4, "text-anchor": anchor }, formatMicros(histogram.bounds_us[i])));
    }
    node.replaceChildren(...parts);
  }

  // ---------------------------------------------------------------------
  // Panel 5: the broker network

  const NODE = { width: 250, header: 40, line: 16, gap: 28, column: 430, pad: 20 };

  /**
   * Builds the graph from the routes report: one node per broker, placed in
   * a column by its hop count. Routes give only the first hop towards each
   * broker, so a broker two or more hops away hangs from a broker one hop
   * nearer that is reached through the same neighbour: a plausible path,
   * drawn dashed.
   */
  function buildGraph(reports) {
    const self = reports.routes.broker || reports.stats.broker;
    const nodes = new Map();
    const add = (name, hops, cost, nextHop) => {
      if (!nodes.has(name)) nodes.set(name, { name, hops, cost, nextHop, interest: [] });
    };
    add(self, 0, 0, null);
    const routes = [...(reports.routes.routes || [])].sort((a, b) => a.hops - b.hops || a.broker.localeCompare(b.broker));
    for (const route of routes) add(route.broker, route.hops, route.cost, route.next_hop);
    for (const link of reports.links.links || []) add(link.neighbour, 1, link.cost, link.neighbour);
    for (const entry of reports.routes.remote_interest || []) add(entry.broker, null, null, null);

    nodes.get(self).interest = reports.routes.advertised || [];
    for (const entry of reports.routes.remote_interest || []) nodes.get(entry.broker).interest.push(entry);

    const links = new Map((reports.links.links || []).map((link) => [link.neighbour, link]));
    const edges = [];
    for (const node of nodes.values()) {
      if (node.name === self) continue;
      if (links.has(node.name)) {
        edges.push({ from: self, to: node.name, link: links.get(node.name) });
        continue;
      }
      const parent = [...nodes.values()].find((other) =>
        other.hops === node.hops - 1 && (other.hops === 0 || other.nextHop === node.nextHop));
      if (parent) edges.push({ from: parent.name, to: node.name, link: null });
    }
    return { self, nodes, edges };
  }

  /** Places the nodes: columns by hops (unknown: last), stacked in each. */
  function layoutGraph(graph) {
    const known = [...graph.nodes.values()].filter((node) => node.hops !== null);
    const lastColumn = Math.max(0, ...known.map((node) => node.hops));
    const hasUnrouted = graph.nodes.size > known.length;
    // Dense, so that a column left empty still takes its place.
    const columns = Array.from({ length: lastColumn + (hasUnrouted ? 2 : 1) }, () => []);
    for (const node of graph.nodes.values()) {
      columns[node.hops === null ? lastColumn + 1 : node.hops].push(node);
      node.lines = interestLines(node.interest);
      node.height = NODE.header + node.lines.length * NODE.line + 10;
    }
    const heights = columns.map((nodes) => Math.max(0, nodes.reduce((sum, node) => sum + node.height + NODE.gap, -NODE.gap)));
    const tallest = Math.max(...heights);
    columns.forEach((nodes, column) => {
      let y = NODE.pad + (tallest - heights[column]) / 2;
      for (const node of nodes) {
        node.x = NODE.pad + column * NODE.column;
        node.y = y;
        y += node.height + NODE.gap;
      }
    });
    return { width: NODE.pad * 2 + (columns.length - 1) * NODE.column + NODE.width, height: tallest + NODE.pad * 2 };
  }

  /** A broker's interest as short lines: topic and filter, then "+N more". */
  function interestLines(interest) {
    if (interest.length === 0) return [{ text: "no interest advertised", full: "", dim: true }];
    const lines = interest.slice(0, INTEREST_LINES).map((entry) => {
      const full = entry.content ? `${entry.topic}  ${describeFilter(entry.content)}` : entry.topic;
      return { text: truncate(full, 38), full };
    });
    if (interest.length > INTEREST_LINES) lines.push({ text: `+${interest.length - INTEREST_LINES} more`, full: "", dim: true });
    return lines;
  }

  function drawNode(node, self) {
    const isSelf = node.name === self;
    const subtitle = isSelf ? "this broker · advertises" :
      node.hops === null ? "no route · interest" : `${node.hops} hop${node.hops === 1 ? "" : "s"}, cost ${node.cost} · interest`;
    const group = svg("g", { class: `node${isSelf ? " self" : ""}`, "data-testid": `node-${node.name}`, transform: `translate(${node.x},${node.y})` },
      svg("rect", { width: NODE.width, height: node.height, rx: 8 }),
      svg("circle", { cx: 16, cy: 16, r: 6 }),
      svg("text", { class: "name", x: 30, y: 21 }, node.name),
      svg("text", { class: "sub", x: 12, y: 35 }, subtitle));
    node.lines.forEach((line, i) => {
      group.append(svg("text", { class: `interest${line.dim ? " dim" : ""}`, x: 12, y: NODE.header + 8 + i * NODE.line },
        line.text, line.full ? svg("title", null, line.full) : null));
    });
    return group;
  }

  function drawEdge(edge, graph, now, older) {
    const from = graph.nodes.get(edge.from);
    const to = graph.nodes.get(edge.to);
    const x1 = from.x + NODE.width, y1 = from.y + 18;
    const x2 = to.x, y2 = to.y + 18;
    const group = svg("g", { class: `edge${edge.link ? " link" : " inferred"}`, "data-testid": `edge-${edge.from}-${edge.to}` },
      svg("line", { x1, y1, x2, y2 }));
    if (edge.link) {
      // The link's own counters: forwarded goes out of this broker,
      // received comes in; rates over the last refresh.
      const read = (field) => (snapshot) => snapshot.links[edge.to] && snapshot.links[edge.to][field];
      const out = rateBetween(older, now, read("messages_forwarded"));
      const back = rateBetween(older, now, read("messages_received"));
      // Labels sit nearer the neighbour than this broker, where edges that
      // fan out from one node are far enough apart not to collide.
      const labelX = x1 + 0.62 * (x2 - x1), labelY = y1 + 0.62 * (y2 - y1);
      group.append(
        svg("text", { class: "edge-label", x: labelX, y: labelY - 8, "text-anchor": "middle" },
          svg("tspan", { "data-testid": `edge-rate-${edge.to}`, "data-value": out ?? 0 }, `→ ${out === null ? "–" : formatRate(out)}`),
          svg("tspan", { dx: 8 }, `← ${back === null ? "–" : formatRate(back)}`)),
        svg("text", { class: "edge-label dim", x: labelX, y: labelY + 16, "text-anchor": "middle" }, `cost ${edge.link.cost}`));
    }
    return group;
  }

  function renderNetwork(reports, now, previous) {
    const graph = buildGraph(reports);
    const size = layoutGraph(graph);
    const node = byTestId("network-graph");
    node.setAttribute("viewBox", `0 0 ${size.width} ${size.height}`);
    node.setAttribute("width", size.width);
    node.setAttribute("height", size.height);
    node.replaceChildren(
      ...graph.edges.map((edge) => drawEdge(edge, graph, now, previous)),
      ...[...graph.nodes.values()].map((each) => drawNode(each, graph.self)));

    const rows = (reports.links.links || []).map((link) => {
      const read = (field) => (snapshot) => snapshot.links[link.neighbour] && snapshot.links[link.neighbour][field];
      const out = rateBetween(previous, now, read("messages_forwarded"));
      const back = rateBetween(previous, now, read("messages_received"));
      return row([
        link.neighbour,
        el("code", { text: link.address }),
        [String(link.cost), "num"],
        [formatDuration(link.connected_for_ms), "num"],
        [`${formatCount(link.messages_forwarded)} (${out === null ? "–" : formatRate(out)})`, "num"],
        [`${formatCount(link.messages_received)} (${back === null ? "–" : formatRate(back)})`, "num"],
        [formatBytes(link.bytes_forwarded), "num"],
        [formatBytes(link.bytes_received), "num"],
      ], { "data-testid": "link-row" });
    });
    fillRows(byTestId("link-rows"), rows, "No links: this broker runs alone.");
  }

  // ---------------------------------------------------------------------
  // The refresh loop

  let refreshing = false;

  async function refresh() {
    // A slow broker must not pile requests up: one refresh at a time.
    if (refreshing) return;
    refreshing = true;
    try {
      const reports = await fetchReports();
      const now = takeSnapshot(performance.now(), reports);
      const previous = snapshots[snapshots.length - 1] || null;
      record(now);
      render(reports, now, previous);
      setStatus(`updated ${new Date().toLocaleTimeString()}`, false);
    } catch (error) {
      setStatus(`cannot reach the broker: ${error.message}`, true);
    } finally {
      refreshing = false;
    }
  }

  /** Draws every panel; one panel's failure must not blank the others. */
  function render(reports, now, previous) {
    byTestId("broker-name").textContent = reports.stats.broker || "";
    byTestId("cluster").textContent = reports.stats.cluster ? `cluster ${reports.stats.cluster}` : "";
    document.title = `Sift · ${reports.stats.broker || "broker"}`;
    const panels = [
      () => renderRates(),
      () => renderConnections(reports),
      () => renderSubscriptions(reports),
      () => renderStreams(reports),
      () => renderQueues(reports, now),
      () => renderLatency(now),
      () => renderNetwork(reports, now, previous),
    ];
    for (const panel of panels) {
      try {
        panel();
      } catch (error) {
        console.error("dashboard panel failed", error);
      }
    }
  }

  function setStatus(text, failed) {
    const status = byTestId("status");
    status.textContent = text;
    status.classList.toggle("failed", failed);
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + (failed ? 0 : 1));
  }

  // ---------------------------------------------------------------------
  // Panel 6: live tail
  //
  // One HTTP subscription at a time. `generation` counts starts and stops,
  // so that the answer to an older start (the user changed the form while
  // it was in flight) is recognised and its subscription deleted.

  const tail = { generation: 0, id: null, source: null, received: 0 };

  /** Closes the event stream and deletes the subscription, if any. */
  async function stopTail() {
    if (tail.source) tail.source.close();
    tail.source = null;
    const id = tail.id;
    tail.id = null;
    byTestId("tail-status").dataset.subscription = "";
    if (id) await deleteSubscription(id);
  }

  function deleteSubscription(id, keepalive) {
    return fetch(`/v1/subscriptions/${encodeURIComponent(id)}`, { method: "DELETE", keepalive: Boolean(keepalive) })
      .catch(() => {}); // Gone already, or the broker is down: its idle timer deletes it.
  }

  function tailRequest(form) {
    const request = { topic: form.topic.value.trim() };
    const language = form.language.value;
    if (language) request[language] = form.filter.value;
    return request;
  }

  async function startTail(form) {
    const generation = ++tail.generation;
    const request = tailRequest(form);
    hideTailError();
    setTailStatus("Starting…");
    await stopTail();
    let response, body;
    try {
      response = await fetch("/v1/subscriptions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(request),
      });
      body = await response.json();
    } catch (error) {
      if (generation === tail.generation) setTailStatus(`Cannot subscribe: ${error.message}`);
      return;
    }
    if (generation !== tail.generation) {
      if (response.ok) deleteSubscription(body.id);
      return;
    }
    if (!response.ok) {
      showTailError(body, request[form.language.value] || "");
      setTailStatus("Not started: the broker refused the subscription.");
      return;
    }
    tail.id = body.id;
    byTestId("tail-status").dataset.subscription = body.id;
    openTailStream(body.events, request, generation);
  }

  function openTailStream(path, request, generation) {
    const source = new EventSource(path);
    tail.source = source;
    const what = describeTailRequest(request);
    source.onopen = () => setTailStatus(`Listening on ${tail.id}: ${what}`, "listening");
    source.onmessage = (event) => {
      if (generation !== tail.generation) return;
      addTailMessage(JSON.parse(event.data));
    };
    source.addEventListener("gap", (event) => {
      const gap = JSON.parse(event.data);
      setTailStatus(`Listening on ${tail.id}: ${what} (${gap.count} stored messages skipped: ${gap.reason})`, "listening");
    });
    source.onerror = () => {
      if (generation !== tail.generation) return;
      // EventSource retries by itself after a network error; it gives up
      // (CLOSED) on an error answer, e.g. a subscription the broker lost.
      if (source.readyState === EventSource.CLOSED) {
        setTailStatus("The event stream ended (the subscription is gone). Press Start to subscribe again.");
        tail.source = null;
      } else {
        setTailStatus(`Reconnecting to ${tail.id}…`);
      }
    };
  }

  function describeTailRequest(request) {
    const language = ["tags", "sql", "xpath", "regex"].find((name) => name in request);
    return language ? `${request.topic} where [${language}] ${request[language]}` : request.topic;
  }

  function setTailStatus(text, state) {
    const status = byTestId("tail-status");
    status.textContent = text;
    status.dataset.state = state || "";
  }

  function hideTailError() {
    const box = byTestId("tail-error");
    box.hidden = true;
    box.replaceChildren();
  }

  /**
   * Shows the broker's refusal; when it names a position in the filter, the
   * filter is shown with a caret under that character.
   */
  function showTailError(body, filter) {
    const box = byTestId("tail-error");
    const parts = [el("div", { "data-testid": "tail-error-message", text: body.message || body.error || "refused" })];
    if (Number.isInteger(body.position)) {
      const at = charIndexOfByte(filter, body.position);
      parts.push(el("div", { "data-testid": "tail-error-position", "data-value": body.position, text: `at byte ${body.position} of the filter:` }));
      parts.push(el("pre", { class: "caret" }, `${filter}\n${" ".repeat(at)}^`));
    }
    box.replaceChildren(...parts);
    box.hidden = false;
  }

  /** The broker counts positions in UTF-8 bytes; the caret needs characters. */
  function charIndexOfByte(text, bytePosition) {
    const encoder = new TextEncoder();
    let bytes = 0;
    let index = 0;
    for (const character of text) {
      if (bytes >= bytePosition) break;
      bytes += encoder.encode(character).length;
      index += 1;
    }
    return index;
  }

  function addTailMessage(message) {
    tail.received += 1;
    const keep = Math.max(1, Number(document.querySelector('[data-testid="tail-keep"]').value) || 50);
    const tbody = byTestId("tail-messages");
    tbody.querySelector("tr.empty")?.remove();
    tbody.prepend(row([
      [formatTime(message.timestamp_ns), "dim"],
      el("code", { text: message.topic }),
      propertiesText(message.properties),
      payloadText(message),
    ], { "data-testid": "tail-row", "data-topic": message.topic }));
    while (tbody.rows.length > keep) tbody.lastElementChild.remove();
    const listening = byTestId("tail-status");
    listening.dataset.received = String(tail.received);
  }

  function formatTime(timestampNs) {
    if (!timestampNs) return "";
    // Nanoseconds exceed a double's precision; milliseconds are enough here.
    return new Date(Number(BigInt(timestampNs) / 1000000n)).toLocaleTimeString();
  }

  function propertiesText(properties) {
    const entries = Object.entries(properties || {});
    if (entries.length === 0) return dash();
    return el("code", { text: entries.map(([name, value]) => `${name}=${JSON.stringify(value)}`).join(" ") });
  }

  function payloadText(message) {
    if (message.payload === undefined || message.payload === null || message.payload === "") return dash();
    if (message.payload_encoding === "base64") {
      return el("span", null, el("span", { class: "badge", text: "base64" }), " ", el("code", { text: truncate(message.payload, 120) }));
    }
    return el("code", { class: "payload", text: truncate(message.payload, 400) });
  }

  function setUpTail() {
    const form = byTestId("tail-form");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      startTail(form);
    });
    byTestId("tail-stop").addEventListener("click", () => {
      tail.generation += 1;
      hideTailError();
      stopTail().then(() => setTailStatus("Stopped."));
    });
    // Leaving the page ends its subscription now rather than after the
    // broker's idle timeout; keepalive lets the request outlive the page.
    window.addEventListener("pagehide", () => {
      if (tail.source) tail.source.close();
      if (tail.id) deleteSubscription(tail.id, true);
    });
    fillRows(byTestId("tail-messages"), [], "Start the tail to see messages as they arrive.");
  }

  // ---------------------------------------------------------------------
  // Start

  setUpTail();
  refresh().then(() => setTimeout(refresh, FIRST_RATE_MS));
  setInterval(refresh, REFRESH_MS);
})();
