//! `sift bench persist`: persistent publishing, replay and archive queries.
//!
//! **Publishing.** For each fsync policy, payload size, number of
//! publishers and window of unconfirmed publishes, a stream with that
//! policy is added (`MANAGE stream_add`), the publishers send `count`
//! persistent messages each on its topic, keeping up to `window` publishes
//! unconfirmed, and the run reports confirmed messages per second and the
//! confirm latency (publish to `CONFIRM`, which comes once the message is
//! stored under the policy). The stream is removed after its point.
//!
//! **Reading.** One stream is filled with `read_count` messages carrying
//! properties and metadata; then a replay from the first message reads it
//! all twice (messages per second through the page cache and the consumer):
//! once acknowledged by the client, message by message, as a durable
//! consumer does, and once acknowledged on write (`AckPolicy::OnWrite`, the
//! way a read-once replay such as JetStream's ordered consumer runs); and
//! an archive query in each filter language scans it whole, matching
//! nothing (stored messages scanned per second).
//!
//! **Replication.** With `--replicas 1,3` each point is also run on a
//! replicated stream of that many brokers (`always`, a Raft group whose
//! confirm means a quorum has the message on disk): embedded, the bench
//! starts that many brokers in its process, each linked to every other,
//! and publishes at the first; `--read-count 0` skips the reading figures.
//!
//! Against `--server` the streams are added on that broker; embedded, the
//! broker keeps its data in a scratch directory under the system's
//! temporary directory (so what is measured is that file system).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use sift_client::{
    AckPolicy, Client, ClientOptions, FilterKind, ManageOp, PublishOptions, QueryEvent, QueryOptions, StartPosition,
    SubscribeOptions,
};
use sift_core::{DeliveryMode, Message, TopicName, Value};

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::plot::Plot;
use crate::report::{Report, Table};
use crate::stats::Samples;

/// The scenario's name on the command line.
pub const NAME: &str = "persist";
const TITLE: &str = "Persistent publishing (msgs/s, confirm latency) by fsync policy, size, publishers and window; replay and archive query scans";
/// Messages per publisher and point of the full run.
const COUNT_FULL: u64 = 20_000;
/// ... with `--quick`.
const COUNT_QUICK: u64 = 1_000;
/// Messages in the stream that the reading figures read.
const READ_COUNT_FULL: u64 = 500_000;
/// ... with `--quick`.
const READ_COUNT_QUICK: u64 = 5_000;
/// Longest wait for a replay to deliver everything.
const READ_PATIENCE: Duration = Duration::from_secs(300);

/// Arguments of `sift bench persist`.
#[derive(Debug, Args, Clone)]
pub struct PersistArgs {
    /// Fsync policies, comma-separated; default always,every:10,os.
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<String>,
    /// Payload sizes in bytes; default 128,1024,16384 (with `--quick` 128).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Numbers of publishers; default 1,4 (with `--quick` 1).
    #[arg(long, value_delimiter = ',')]
    pub publishers: Vec<usize>,
    /// Unconfirmed publishes each publisher keeps in flight; default 1,256.
    #[arg(long, value_delimiter = ',')]
    pub windows: Vec<usize>,
    /// Replicas of the stream (1, or an odd number: a replicated stream of
    /// that many brokers, policy `always`); default 1.
    #[arg(long, value_delimiter = ',')]
    pub replicas: Vec<u32>,
    /// Messages per publisher and point; default 20000 (with `--quick` 1000).
    #[arg(long)]
    pub count: Option<u64>,
    /// Messages in the stream read by the replay and query figures;
    /// default 500000 (with `--quick` 5000).
    #[arg(long)]
    pub read_count: Option<u64>,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// One point of the publishing grid.
#[derive(Debug, Clone)]
struct Point {
    policy: String,
    size: usize,
    publishers: usize,
    window: usize,
    replicas: u32,
}

fn or_default<T: Clone>(given: &[T], full: &[T], quick: &[T], is_quick: bool) -> Vec<T> {
    match (given.is_empty(), is_quick) {
        (false, _) => given.to_vec(),
        (true, false) => full.to_vec(),
        (true, true) => quick.to_vec(),
    }
}

fn points(args: &PersistArgs) -> Result<Vec<Point>, BenchError> {
    let quick = args.common.quick;
    let policies = or_default(
        &args.policies,
        &["always".into(), "every:10".into(), "os".into()],
        &["always".into(), "os".into()],
        quick,
    );
    let sizes = or_default(&args.sizes, &[128, 1024, 16_384], &[128], quick);
    let publishers = or_default(&args.publishers, &[1, 4], &[1], quick);
    let windows = or_default(&args.windows, &[1, 256], &[1, 256], quick);
    let replica_counts = or_default(&args.replicas, &[1], &[1], quick);
    if sizes.contains(&0) || publishers.contains(&0) || windows.contains(&0) || replica_counts.contains(&0) {
        return Err(BenchError::Usage("--sizes, --publishers, --windows and --replicas need values above 0".into()));
    }
    let mut grid = Vec::new();
    for &replicas in &replica_counts {
        // A replicated stream confirms once a quorum has it on disk.
        let policies = if replicas > 1 { vec!["always".to_string()] } else { policies.clone() };
        for policy in &policies {
            for &size in &sizes {
                for &publisher_count in &publishers {
                    for &window in &windows {
                        grid.push(Point {
                            policy: policy.clone(),
                            size,
                            publishers: publisher_count,
                            window,
                            replicas,
                        });
                    }
                }
            }
        }
    }
    Ok(grid)
}

async fn connect(address: &str, name: &str) -> Result<Client, BenchError> {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    Ok(Client::connect(address, options).await?)
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: PersistArgs) -> Result<(), BenchError> {
    let grid = points(&args)?;
    let quick = args.common.quick;
    let count = args.count.unwrap_or(if quick { COUNT_QUICK } else { COUNT_FULL });
    let read_count = args.read_count.unwrap_or(if quick { READ_COUNT_QUICK } else { READ_COUNT_FULL });
    let brokers = grid.iter().map(|point| point.replicas as usize).max().unwrap_or(1);
    let endpoints = match (brokers, &args.common.server) {
        (1, _) | (_, Some(_)) => Endpoints::from_options(&args.common).await?,
        (brokers, None) => Endpoints::mesh(brokers).await?,
    };
    let measured = measure(endpoints.publish_addr(), &grid, count, read_count).await;
    endpoints.shutdown().await;
    let (publishing, reading) = measured?;
    let mut report = Report::new(NAME, TITLE);
    report.parameter("server", args.common.server.as_deref().unwrap_or("embedded"));
    report.parameter("count", count);
    report.parameter("read_count", read_count);
    report.parameter("quick", quick);
    let by_window = Plot::lines(
        "persist_msgs_by_window.svg",
        "Persistent publishing: confirmed msgs/s against the window, by policy, size and publishers",
        &publishing,
        "window",
        "msgs/s",
    )?
    .series(&["policy", "replicas", "size", "publishers"])
    .log_x(2.0);
    report.plots.push(by_window);
    report.tables.push(publishing);
    report.tables.push(reading);
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

async fn measure(address: &str, grid: &[Point], count: u64, read_count: u64) -> Result<(Table, Table), BenchError> {
    let admin = connect(address, "bench-persist-admin").await?;
    let mut publishing = Table::new(
        "publish",
        "Persistent publishing: confirmed messages per second and confirm latency",
        &[
            ("policy", ""),
            ("replicas", ""),
            ("size", "B"),
            ("publishers", ""),
            ("window", ""),
            ("msgs/s", "1/s"),
            ("p50", "µs"),
            ("p99", "µs"),
            ("fsyncs", ""),
        ],
    );
    for (index, point) in grid.iter().enumerate() {
        let stream = format!("bench-persist-{index}");
        let topic = format!("bench.persist.{index}");
        let info = json!({ "name": stream, "topics": [topic], "fsync": point.policy, "replicas": point.replicas });
        admin.manage(ManageOp::StreamAdd, info).await?;
        if point.replicas > 1 {
            await_leader(&admin, &stream).await?;
        }
        let (rate, latency) = publish_point(address, &topic, point, count).await?;
        let info = admin.manage(ManageOp::StreamInfo, json!({ "name": stream })).await?;
        admin.manage(ManageOp::StreamRm, json!({ "name": stream })).await?;
        let summary = latency.summary();
        let micros = |pick: fn(&crate::stats::Summary) -> f64| summary.as_ref().map(|summary| pick(summary) / 1_000.0);
        publishing.push_row(vec![
            point.policy.as_str().into(),
            point.replicas.into(),
            point.size.into(),
            point.publishers.into(),
            point.window.into(),
            rate.into(),
            micros(|summary| summary.p50).into(),
            micros(|summary| summary.p99).into(),
            info["fsyncs"].as_u64().into(),
        ])?;
    }
    let reading = match read_count {
        0 => Table::new("read", "Reading a stream: not measured (--read-count 0)", &[("reader", "")]),
        read_count => read_figures(address, &admin, read_count).await?,
    };
    admin.close().await;
    Ok((publishing, reading))
}

/// Waits until the replicated stream `stream` has elected its leader and
/// every member replicates from it, so that a point measures the group at
/// work, not its first election.
pub(crate) async fn await_leader(admin: &Client, stream: &str) -> Result<(), BenchError> {
    let started = Instant::now();
    loop {
        let info = admin.manage(ManageOp::StreamInfo, json!({ "name": stream })).await?;
        let replicas = info["replication"]["replicas"].as_array().cloned().unwrap_or_default();
        let all_replicating =
            !replicas.is_empty() && replicas.iter().all(|replica| replica["replicated_index"].is_u64());
        if info["replication"]["leader"].is_string() && all_replicating {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(BenchError::Timeout(format!("stream {stream} elected no leader: {info}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes `count` persistent messages from each publisher, `window` in
/// flight each; returns confirmed messages per second and confirm latencies (ns).
async fn publish_point(address: &str, topic: &str, point: &Point, count: u64) -> Result<(f64, Samples), BenchError> {
    let topic = TopicName::new(topic).map_err(|error| BenchError::Usage(error.to_string()))?;
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for publisher in 0..point.publishers {
        let client = connect(address, &format!("bench-persist-{publisher}")).await?;
        let (topic, size, window) = (topic.clone(), point.size, point.window);
        tasks.spawn(async move {
            let mut latency = Samples::new();
            let mut in_flight = VecDeque::with_capacity(window);
            for _ in 0..count {
                if in_flight.len() >= window {
                    await_confirm(&mut in_flight, &mut latency).await?;
                }
                let mut message = Message::new(topic.clone(), vec![b'x'; size]);
                message.delivery_mode = DeliveryMode::Persistent;
                let receiver = client.start_confirmed(message, PublishOptions::default()).await?;
                in_flight.push_back((Instant::now(), receiver));
            }
            while !in_flight.is_empty() {
                await_confirm(&mut in_flight, &mut latency).await?;
            }
            client.close().await;
            Ok::<Samples, BenchError>(latency)
        });
    }
    let mut latency = Samples::new();
    while let Some(joined) = tasks.join_next().await {
        let samples = joined.map_err(|error| BenchError::Usage(format!("a publisher failed: {error}")))??;
        latency.merge(&samples);
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(((count * point.publishers as u64) as f64 / seconds, latency))
}

type InFlight =
    VecDeque<(Instant, tokio::sync::oneshot::Receiver<Result<sift_client::Confirm, sift_client::ClientError>>)>;

async fn await_confirm(in_flight: &mut InFlight, latency: &mut Samples) -> Result<(), BenchError> {
    if let Some((sent, receiver)) = in_flight.pop_front() {
        receiver.await.map_err(|_| sift_client::ClientError::Closed)??;
        latency.record(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    Ok(())
}

/// Replays the whole read stream from the first message with `ack`; the
/// seconds it took.
async fn replay(reader: &Client, ack: AckPolicy, read_count: u64) -> Result<f64, BenchError> {
    let started = Instant::now();
    let options = SubscribeOptions::new("bench.read").replay("bench-read", StartPosition::First).ack(ack);
    let mut replay = reader.subscribe(options).await?;
    for _ in 0..read_count {
        tokio::time::timeout(READ_PATIENCE, replay.next())
            .await
            .map_err(|_| BenchError::Timeout("the replay stalled".into()))?
            .ok_or(sift_client::ClientError::Closed)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    replay.unsubscribe().await?;
    Ok(seconds)
}

/// Fills a stream, replays it, and scans it with a query in each language.
async fn read_figures(address: &str, admin: &Client, read_count: u64) -> Result<Table, BenchError> {
    let mut table = Table::new(
        "read",
        "Reading a stream: replay and archive query scans",
        &[("reader", ""), ("messages", ""), ("seconds", "s"), ("msgs/s", "1/s")],
    );
    admin.manage(ManageOp::StreamAdd, json!({ "name": "bench-read", "topics": ["bench.read"], "fsync": "os" })).await?;
    fill(address, read_count).await?;
    let reader = connect(address, "bench-persist-reader").await?;
    for (label, ack) in [("replay, client acks", AckPolicy::Auto), ("replay, acked on write", AckPolicy::OnWrite)] {
        let seconds = replay(&reader, ack, read_count).await?;
        table.push_row(vec![label.into(), read_count.into(), seconds.into(), (read_count as f64 / seconds).into()])?;
    }
    let queries = [
        ("query tags", FilterKind::Tags, "sym=\"NONE\""),
        ("query sql", FilterKind::Sql, "sym = 'NONE' AND price > 100"),
        ("query xpath", FilterKind::Xpath, "/quote[sym='NONE']"),
        ("query regex", FilterKind::Regex, "none$"),
    ];
    for (label, kind, filter) in queries {
        let options = QueryOptions {
            stream: "bench-read".into(),
            filter: Some((kind, filter.into())),
            ..QueryOptions::default()
        };
        let started = Instant::now();
        let mut results = reader.query(options)?;
        let scanned = loop {
            match results.next().await {
                Some(QueryEvent::Done { scanned, .. }) => break scanned,
                Some(QueryEvent::Failed(error)) => return Err(error.into()),
                Some(QueryEvent::Message { .. }) => {}
                None => return Err(sift_client::ClientError::Disconnected.into()),
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        table.push_row(vec![label.into(), scanned.into(), seconds.into(), (scanned as f64 / seconds).into()])?;
    }
    reader.close().await;
    admin.manage(ManageOp::StreamRm, json!({ "name": "bench-read" })).await?;
    Ok(table)
}

/// Stores `count` 128-byte quotes with properties and metadata in `bench.read`.
async fn fill(address: &str, count: u64) -> Result<(), BenchError> {
    let client = connect(address, "bench-persist-fill").await?;
    let topic = TopicName::new("bench.read").map_err(|error| BenchError::Usage(error.to_string()))?;
    let mut in_flight = VecDeque::new();
    let mut ignored = Samples::new();
    for index in 0..count {
        if in_flight.len() >= 512 {
            await_confirm(&mut in_flight, &mut ignored).await?;
        }
        let mut message = Message::new(topic.clone(), vec![b'q'; 128]);
        message.delivery_mode = DeliveryMode::Persistent;
        message.properties.push(("sym".into(), Value::Str(format!("S{}", index % 50).into())));
        message.properties.push(("price".into(), Value::Int((index % 100) as i64)));
        message.metadata = Some(format!("<quote><sym>S{}</sym></quote>", index % 50).into());
        in_flight.push_back((Instant::now(), client.start_confirmed(message, PublishOptions::default()).await?));
    }
    while !in_flight.is_empty() {
        await_confirm(&mut in_flight, &mut ignored).await?;
    }
    client.close().await;
    Ok(())
}
