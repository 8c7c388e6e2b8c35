//! `sift bench http`: the HTTP front-end's rates, and what its dashboard
//! and `/metrics` cost the native path.
//!
//! **Publishing.** `connections` HTTP clients, each one kept-alive
//! connection with one request in flight (no pipelining), `POST` raw
//! 128-byte bodies to `/v1/messages?topic=bench.http` while one native
//! subscriber takes the messages; requests per second and the request
//! latency (send to whole answer).
//!
//! **Server-sent events.** One HTTP subscription read as an event stream
//! while a native publisher sends reliable messages with a window of
//! unconfirmed publishes (so that nothing is dropped: the subscription's
//! `block` queue holds the publisher back); events per second at the
//! reader.
//!
//! **Cost of watching.** The native 1→1 rate (reliable, windowed
//! publisher to a native subscriber) in rounds without and with a watcher
//! that every second does what an open dashboard and a Prometheus scraper
//! do together: `GET /metrics` and the four `/v1/admin` reports.
//!
//! Embedded, the bench starts a broker and its HTTP front-end in its own
//! process; with `--server ADDR --http ADDR` it measures a running one.

use sift_broker::front_end::FrontEnd;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use sift_client::{Client, ClientOptions, PublishOptions, SubscribeOptions};
use sift_core::{DeliveryMode, Message, TopicName};

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::http_load::{read_events, HttpConnection};
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::plot::Plot;
use crate::report::{Report, Table};
use crate::stats::Samples;

/// The scenario's name on the command line.
pub const NAME: &str = "http";
const TITLE: &str =
    "HTTP front-end: publish requests/s with keep-alive, server-sent events/s, cost of /metrics and the dashboard";
/// Payload of every message.
const PAYLOAD_BYTES: usize = 128;
/// Unconfirmed publishes of the native publishers.
const PUBLISH_WINDOW: usize = 512;
/// How often the watcher polls, as a dashboard and a scraper do.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// Longest wait for a measured phase to finish.
const PHASE_PATIENCE: Duration = Duration::from_secs(300);

/// Arguments of `sift bench http`.
#[derive(Debug, Args, Clone)]
pub struct HttpArgs {
    /// HTTP address of the broker given by `--server`.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// HTTP connections publishing at once, comma-separated; default
    /// 1,8,32,64 (with `--quick` 1,8).
    #[arg(long, value_delimiter = ',')]
    pub connections: Vec<usize>,
    /// Requests per point of the publishing grid; default 200000 (with
    /// `--quick` 2000).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Events read from the event stream; default 300000 (with `--quick` 5000).
    #[arg(long)]
    pub events: Option<u64>,
    /// Seconds of each native run of the cost-of-watching rounds; default 5
    /// (with `--quick` 0.5).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Rounds of the cost-of-watching comparison (each: without, then with);
    /// default 3 (with `--quick` 1).
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// What the run measures against: the native and HTTP addresses, and the
/// embedded broker and front-end it started, if any.
struct Target {
    endpoints: Endpoints,
    http: Option<sift_http::HttpFrontEnd>,
    native: String,
    http_addr: SocketAddr,
}

impl Target {
    async fn open(args: &HttpArgs) -> Result<Target, BenchError> {
        let endpoints = Endpoints::from_options(&args.common).await?;
        let native = endpoints.publish_addr().to_string();
        if args.common.server.is_some() {
            let http_addr = args.http.ok_or_else(|| BenchError::Usage("--server needs --http ADDR too".into()))?;
            return Ok(Target { endpoints, http: None, native, http_addr });
        }
        let broker = endpoints.embedded().first().ok_or_else(|| BenchError::Usage("no embedded broker".into()))?;
        let front_end = sift_http::HttpFrontEnd::start(sift_http::HttpConfig::scratch(), broker.connector())
            .await
            .map_err(|error| BenchError::Usage(error.to_string()))?;
        let http_addr = front_end.local_addr();
        Ok(Target { endpoints, http: Some(front_end), native, http_addr })
    }

    async fn close(self) {
        if let Some(front_end) = self.http {
            front_end.shutdown().await;
        }
        self.endpoints.shutdown().await;
    }
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: HttpArgs) -> Result<(), BenchError> {
    let quick = args.common.quick;
    let connections = match (args.connections.is_empty(), quick) {
        (false, _) => args.connections.clone(),
        (true, false) => vec![1, 8, 32, 64],
        (true, true) => vec![1, 8],
    };
    if connections.contains(&0) {
        return Err(BenchError::Usage("--connections needs values above 0".into()));
    }
    let requests = args.requests.unwrap_or(if quick { 2_000 } else { 200_000 });
    let events = args.events.unwrap_or(if quick { 5_000 } else { 300_000 });
    let seconds = args.seconds.unwrap_or(if quick { 0.5 } else { 5.0 });
    let rounds = args.rounds.unwrap_or(if quick { 1 } else { 3 });
    let target = Target::open(&args).await?;
    let measured = measure(&target, &connections, requests, events, seconds, rounds).await;
    target.close().await;
    let (publishing, streaming, watching) = measured?;
    let mut report = Report::new(NAME, TITLE);
    report.parameter("server", args.common.server.as_deref().unwrap_or("embedded"));
    report.parameter("requests", requests);
    report.parameter("events", events);
    report.parameter("seconds", seconds);
    report.parameter("rounds", u64::from(rounds));
    report.parameter("payload_bytes", PAYLOAD_BYTES);
    let by_connections = Plot::lines(
        "http_requests_by_connections.svg",
        "POST /v1/messages: requests per second against kept-alive connections",
        &publishing,
        "connections",
        "requests/s",
    )?
    .log_x(2.0);
    report.plots.push(by_connections);
    report.tables.extend([publishing, streaming, watching]);
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

async fn measure(
    target: &Target,
    connections: &[usize],
    requests: u64,
    events: u64,
    seconds: f64,
    rounds: u32,
) -> Result<(Table, Table, Table), BenchError> {
    let mut publishing = Table::new(
        "publish",
        "POST /v1/messages: requests per second with kept-alive connections, one request in flight each",
        &[("connections", ""), ("requests/s", "1/s"), ("p50", "µs"), ("p99", "µs")],
    );
    for &count in connections {
        let (rate, latency) = publish_over_http(target, count, requests).await?;
        let summary = latency.summary();
        let micros = |pick: fn(&crate::stats::Summary) -> f64| summary.as_ref().map(|summary| pick(summary) / 1_000.0);
        publishing.push_row(vec![
            count.into(),
            rate.into(),
            micros(|summary| summary.p50).into(),
            micros(|summary| summary.p99).into(),
        ])?;
    }
    let mut streaming = Table::new(
        "events",
        "Server-sent events: deliveries per second read from one event stream",
        &[("events", ""), ("events/s", "1/s")],
    );
    let rate = events_over_sse(target, events).await?;
    streaming.push_row(vec![events.into(), rate.into()])?;
    let mut watching = Table::new(
        "watching",
        "Native 1→1 reliable msgs/s without and with a dashboard and a Prometheus scraper polling every second",
        &[("round", ""), ("watched", ""), ("msgs/s", "1/s"), ("scrapes", "")],
    );
    for round in 1..=rounds {
        for watched in [false, true] {
            let (rate, scrapes) = native_rate(target, seconds, watched).await?;
            watching.push_row(vec![u64::from(round).into(), watched.into(), rate.into(), scrapes.into()])?;
        }
    }
    Ok((publishing, streaming, watching))
}

async fn connect(address: &str, name: &str) -> Result<Client, BenchError> {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    Ok(Client::connect(address, options).await?)
}

/// `connections` HTTP clients publish `requests` in all; the rate and the
/// request latencies.
async fn publish_over_http(target: &Target, connections: usize, requests: u64) -> Result<(f64, Samples), BenchError> {
    let subscriber = connect(&target.native, "bench-http-sub").await?;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("bench.http")).await?;
    let received = tokio::spawn(async move {
        let mut received = 0u64;
        while subscription.next().await.is_some() {
            received += 1;
        }
        received
    });
    let per_connection = requests / connections as u64;
    let body = Bytes::from(vec![b'x'; PAYLOAD_BYTES]);
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for _ in 0..connections {
        let mut connection = HttpConnection::open(target.http_addr).await?;
        let body = body.clone();
        tasks.spawn(async move {
            let mut latency = Samples::new();
            for _ in 0..per_connection {
                let sent = Instant::now();
                let (status, _) = connection
                    .send("POST", "/v1/messages?topic=bench.http", "application/octet-stream", body.clone())
                    .await?;
                if !status.is_success() {
                    return Err(BenchError::Usage(format!("POST /v1/messages answered {status}")));
                }
                latency.record(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX));
            }
            Ok::<Samples, BenchError>(latency)
        });
    }
    let mut latency = Samples::new();
    while let Some(joined) = tasks.join_next().await {
        latency.merge(&joined.map_err(|error| BenchError::Usage(format!("an HTTP client failed: {error}")))??);
    }
    let rate = (per_connection * connections as u64) as f64 / started.elapsed().as_secs_f64();
    subscriber.close().await;
    let _ = received.await;
    Ok((rate, latency))
}

/// Reads `events` deliveries from one event stream while a native
/// publisher sends them; events per second at the reader.
async fn events_over_sse(target: &Target, events: u64) -> Result<f64, BenchError> {
    let mut control = HttpConnection::open(target.http_addr).await?;
    let (status, created) =
        control.post_json("/v1/subscriptions", &serde_json::json!({ "topic": "bench.sse" })).await?;
    if !status.is_success() {
        return Err(BenchError::Usage(format!("POST /v1/subscriptions answered {status}: {created}")));
    }
    let path = created["events"].as_str().unwrap_or_default().to_string();
    let started = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let reader_started = started.clone();
    let address = target.http_addr;
    let reader = tokio::spawn(async move {
        read_events(address, &path, |read| {
            if read > 0 {
                reader_started
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get_or_insert_with(Instant::now);
            }
            read < events
        })
        .await
    });
    let publisher = connect(&target.native, "bench-sse-pub").await?;
    let publishing = publish_reliable(&publisher, "bench.sse", events, None);
    let read = tokio::time::timeout(PHASE_PATIENCE, async {
        publishing.await?;
        reader.await.map_err(|error| BenchError::Usage(format!("the event reader failed: {error}")))?
    })
    .await
    .map_err(|_| BenchError::Timeout("the event stream delivered everything".into()))??;
    let elapsed = started.lock().unwrap_or_else(std::sync::PoisonError::into_inner).map(|at| at.elapsed());
    publisher.close().await;
    let id = created["id"].as_str().unwrap_or_default();
    let _ = control.send("DELETE", &format!("/v1/subscriptions/{id}"), "text/plain", Bytes::new()).await;
    Ok(elapsed.map_or(0.0, |elapsed| read as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)))
}

/// Publishes `count` reliable messages on `topic` with a window of
/// unconfirmed publishes, or until `stop` turns true.
async fn publish_reliable(
    client: &Client,
    topic: &str,
    count: u64,
    stop: Option<&AtomicBool>,
) -> Result<u64, BenchError> {
    let topic = TopicName::new(topic).map_err(|error| BenchError::Usage(error.to_string()))?;
    let mut in_flight = std::collections::VecDeque::with_capacity(PUBLISH_WINDOW);
    let mut sent = 0;
    while sent < count && !stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
        if in_flight.len() >= PUBLISH_WINDOW {
            if let Some(receiver) = in_flight.pop_front() {
                let _: Result<_, _> = receiver.await;
            }
        }
        let mut message = Message::new(topic.clone(), vec![b'x'; PAYLOAD_BYTES]);
        message.delivery_mode = DeliveryMode::Reliable;
        in_flight.push_back(client.start_confirmed(message, PublishOptions::default()).await?);
        sent += 1;
    }
    for receiver in in_flight {
        let _: Result<_, _> = receiver.await;
    }
    Ok(sent)
}

/// The native 1→1 rate over `seconds`, with or without the watcher; the
/// rate and the polls the watcher made.
async fn native_rate(target: &Target, seconds: f64, watched: bool) -> Result<(f64, u64), BenchError> {
    let subscriber = connect(&target.native, "bench-watch-sub").await?;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("bench.watch")).await?;
    let received = Arc::new(AtomicU64::new(0));
    let counted = received.clone();
    let receiver = tokio::spawn(async move {
        while subscription.next().await.is_some() {
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watched.then(|| tokio::spawn(watch(target.http_addr, stop.clone())));
    let publisher = connect(&target.native, "bench-watch-pub").await?;
    let stopper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    let started = Instant::now();
    publish_reliable(&publisher, "bench.watch", u64::MAX, Some(&stop)).await?;
    let delivered = received.load(Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let _ = stopper.await;
    let scrapes = match watcher {
        Some(watcher) => watcher.await.map_err(|error| BenchError::Usage(format!("the watcher failed: {error}")))??,
        None => 0,
    };
    publisher.close().await;
    subscriber.close().await;
    receiver.abort();
    Ok((delivered as f64 / elapsed, scrapes))
}

/// Polls `/metrics` and the four admin reports every [`WATCH_INTERVAL`]
/// until `stop`; the polls made.
async fn watch(address: SocketAddr, stop: Arc<AtomicBool>) -> Result<u64, BenchError> {
    let mut connection = HttpConnection::open(address).await?;
    let mut ticker = tokio::time::interval(WATCH_INTERVAL);
    let mut polls = 0;
    while !stop.load(Ordering::Relaxed) {
        ticker.tick().await;
        for path in ["/metrics", "/v1/admin/stats", "/v1/admin/subscriptions", "/v1/admin/links", "/v1/admin/routes"] {
            let (status, _) = connection.send("GET", path, "text/plain", Bytes::new()).await?;
            if !status.is_success() {
                return Err(BenchError::Usage(format!("GET {path} answered {status}")));
            }
        }
        polls += 1;
    }
    Ok(polls)
}
