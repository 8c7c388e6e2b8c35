//! `sift bench nb tds`: the time differential service against network
//! jitter (NaradaBrokering §3.3, Fig. 9-12).
//!
//! **The experiment.** A publisher stamps each message with its own clock
//! (`PUBLISHER_TIME`) and sends a stream at a fixed rate to an embedded
//! broker; the subscriber's connection passes through Toxiproxy, which
//! delays each chunk by a latency give or take a jitter. The subscriber
//! hands every delivery to a TDS with a playout delay above latency plus
//! jitter. For each message it records when it arrived and when the TDS
//! released it; the jitter of a message is how far the gap before it
//! differs from the gap between the publisher's timestamps — before the
//! TDS (input) and after it (output). The paper's streams were a 30
//! frames/s video; here also a 1,000 msgs/s stream, with the TDS on exact
//! timers and, as NB's threads did, on a fixed tick of 1 ms and 100 µs.
//! The CPU the TDS thread used is read from `/proc`.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use sift_client::{Client, ClientOptions, SubscribeOptions, TdsConfig, TimeDifferential};
use sift_core::{Message, TopicName};

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::plot::Plot;
use crate::report::{Cell, Report, Table};
use crate::stats::Samples;
use crate::toxiproxy::{find_server, Toxiproxy};

/// One stream of the experiment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TdsStream {
    /// Its name in the tables.
    pub name: &'static str,
    /// Messages per second.
    pub rate: u64,
    /// Payload bytes.
    pub size: usize,
}

/// The paper's video stream and a faster one.
pub const TDS_STREAMS: [TdsStream; 2] = [
    TdsStream { name: "video 30 frames/s", rate: 30, size: 4_000 },
    TdsStream { name: "events 1000 msgs/s", rate: 1_000, size: 128 },
];

/// How the TDS wakes: exact timers, or NB's fixed intervals.
pub const TDS_RELEASES: [(&str, Option<Duration>); 3] =
    [("timer", None), ("tick 1 ms", Some(Duration::from_millis(1))), ("tick 100 µs", Some(Duration::from_micros(100)))];

/// The link and the TDS of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TdsPlan {
    /// Latency Toxiproxy adds towards the subscriber.
    pub latency_ms: u64,
    /// Jitter around it.
    pub jitter_ms: u64,
    /// The TDS playout delay.
    pub max_delay_ms: u64,
    /// Length of each stream.
    pub seconds: f64,
}

/// What one stream and release mode measured.
#[derive(Debug)]
struct TdsPoint {
    stream: TdsStream,
    release: &'static str,
    sent: u64,
    received: u64,
    late: u64,
    input_jitter_ns: Samples,
    output_jitter_ns: Samples,
    /// Per-message jitter of the first [`SERIES_MESSAGES`], µs, for the plots.
    input_series_us: Vec<f64>,
    output_series_us: Vec<f64>,
    cpu_ns: u64,
    elapsed: Duration,
}

/// The table of per-message jitter.
pub const SERIES_TABLE: &str = "tds_series";

/// Messages per stream drawn in the per-message plots (as Fig. 9-12).
const SERIES_MESSAGES: usize = 300;

/// Runs every stream with every release mode and adds the tables.
pub async fn run(plan: &TdsPlan, report: &mut Report, quiet: bool) -> Result<(), BenchError> {
    let binary = find_server().map_err(BenchError::Usage)?;
    let toxiproxy = Toxiproxy::start(&binary).await?;
    let endpoints = Endpoints::single(sift_broker::Config::scratch()).await?;
    let upstream = endpoints.subscribe_addr().parse().map_err(|_| BenchError::Usage("broker address".into()))?;
    let jittery = toxiproxy.proxy("tds", upstream).await?;
    toxiproxy.add_jittery_latency("tds", plan.latency_ms, plan.jitter_ms).await?;
    let mut points = Vec::new();
    for stream in TDS_STREAMS {
        for (release, tick) in TDS_RELEASES {
            if !quiet {
                eprintln!("tds: {} with {release}", stream.name);
            }
            let point = measure(plan, stream, release, tick, endpoints.publish_addr(), &jittery.to_string()).await;
            points.push(point?);
        }
    }
    endpoints.shutdown().await;
    drop(toxiproxy);
    let series = series_table(&points)?;
    for stream in TDS_STREAMS {
        let file = format!("jitter-{}.svg", stream.rate);
        let title = format!("Jitter per message before and after the TDS, {} (cf. Fig. 9-12)", stream.name);
        report.plots.push(
            Plot::lines(&file, &title, &series, "message", "jitter_us")?
                .only("stream", stream.name)
                .series(&["series"])
                .log_y(10.0)
                .labels("message", "jitter (µs)"),
        );
    }
    report.tables.push(jitter_table(&points)?);
    report.tables.push(series);
    report.tables.push(paper_table()?);
    for note in NOTES {
        report.note(note);
    }
    Ok(())
}

/// One stream through the jittery link into a TDS.
async fn measure(
    plan: &TdsPlan,
    stream: TdsStream,
    release: &'static str,
    tick: Option<Duration>,
    publish_addr: &str,
    subscribe_addr: &str,
) -> Result<TdsPoint, BenchError> {
    let topic = "bench.tds";
    let receiver = Client::connect(subscribe_addr, options("tds-sub", false)).await?;
    let estimate = receiver.sync_clock(8).await?;
    let mut subscription = receiver.subscribe(SubscribeOptions::new(topic)).await?;
    let publisher = Client::connect(publish_addr, options("tds-pub", true)).await?;
    let count = ((plan.seconds * stream.rate as f64).ceil() as u64).max(2);
    let config = TdsConfig { max_delay: Duration::from_millis(plan.max_delay_ms), tick, ..TdsConfig::default() };
    let (released_sender, released) = mpsc::channel();
    let tds = TimeDifferential::spawn(config, receiver.clock(), move |sent_ns: u64, release| {
        let _ = released_sender.send((sent_ns, release.released_ns));
    })
    .map_err(|error| BenchError::Usage(format!("the TDS thread: {error}")))?;
    let started = Instant::now();
    let publishing = tokio::spawn(publish_stream(publisher, topic, stream, count));
    let mut arrivals = Vec::with_capacity(count as usize);
    while (arrivals.len() as u64) < count {
        let Ok(Some(delivery)) = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await else {
            break;
        };
        let sent_ns = estimate.to_local(delivery.message.timestamp_ns);
        arrivals.push((sent_ns, receiver.now_ns()));
        tds.submit(sent_ns, sent_ns);
    }
    let sent =
        publishing.await.map_err(|error| BenchError::Task { role: "publisher", reason: error.to_string() })??;
    let counters = tds.finish();
    let elapsed = started.elapsed();
    receiver.close().await;
    let releases: Vec<(u64, u64)> = released.try_iter().collect();
    Ok(TdsPoint {
        stream,
        release,
        sent,
        received: arrivals.len() as u64,
        late: counters.late,
        input_jitter_ns: jitter(&arrivals),
        output_jitter_ns: jitter(&releases),
        input_series_us: jitter_series_us(&arrivals),
        output_series_us: jitter_series_us(&releases),
        cpu_ns: counters.cpu_ns,
        elapsed,
    })
}

fn options(name: &str, publisher_time: bool) -> ClientOptions {
    ClientOptions { name: name.into(), reconnect: false, publisher_time, ..ClientOptions::default() }
}

/// Publishes `count` messages at the stream's rate; returns how many.
async fn publish_stream(
    publisher: Client,
    topic: &'static str,
    stream: TdsStream,
    count: u64,
) -> Result<u64, BenchError> {
    let topic = TopicName::new(topic).map_err(|error| BenchError::Usage(error.to_string()))?;
    let interval = Duration::from_secs_f64(1.0 / stream.rate as f64);
    let start = tokio::time::Instant::now();
    let payload = vec![0u8; stream.size];
    for index in 0..count {
        tokio::time::sleep_until(start + interval.mul_f64(index as f64)).await;
        publisher.publish(Message::new(topic.clone(), payload.clone())).await?;
    }
    publisher.ping().await?;
    publisher.close().await;
    Ok(count)
}

/// The jitter of each of the first [`SERIES_MESSAGES`] messages, in µs.
fn jitter_series_us(times: &[(u64, u64)]) -> Vec<f64> {
    let first = &times[..times.len().min(SERIES_MESSAGES + 1)];
    first.windows(2).map(|pair| gap_error_ns(pair) as f64 / 1e3).collect()
}

/// |gap between the observed times − gap between the sent times| of a
/// consecutive pair of `(sent, observed)`, in nanoseconds.
fn gap_error_ns(pair: &[(u64, u64)]) -> u64 {
    let sent_gap = pair[1].0 as i64 - pair[0].0 as i64;
    let observed_gap = pair[1].1 as i64 - pair[0].1 as i64;
    (observed_gap - sent_gap).unsigned_abs()
}

/// |gap between the observed times − gap between the sent times| of each
/// consecutive pair of `(sent, observed)`, in nanoseconds.
fn jitter(times: &[(u64, u64)]) -> Samples {
    let mut samples = Samples::new();
    for pair in times.windows(2) {
        samples.record(gap_error_ns(pair));
    }
    samples
}

const JITTER_COLUMNS: [(&str, &str); 13] = [
    ("stream", ""),
    ("release", ""),
    ("sent", "msgs"),
    ("received", "msgs"),
    ("late", "msgs"),
    ("input_jitter_us_mean", "µs"),
    ("input_jitter_us_p99", "µs"),
    ("input_jitter_us_max", "µs"),
    ("output_jitter_us_mean", "µs"),
    ("output_jitter_us_p99", "µs"),
    ("output_jitter_us_max", "µs"),
    ("tds_cpu_ms", "ms"),
    ("tds_cpu_percent_of_a_core", "%"),
];

fn jitter_table(points: &[TdsPoint]) -> Result<Table, BenchError> {
    let title = "Sift: jitter before the TDS (arrival) and after it (release), against the publisher's spacing";
    let mut table = Table::new("tds_jitter", title, &JITTER_COLUMNS);
    for point in points {
        let input = point.input_jitter_ns.summary().map(|summary| summary.scaled(1e-3));
        let output = point.output_jitter_ns.summary().map(|summary| summary.scaled(1e-3));
        let cpu_percent = 100.0 * point.cpu_ns as f64 / point.elapsed.as_nanos().max(1) as f64;
        table.push_row(vec![
            Cell::from(point.stream.name),
            Cell::from(point.release),
            point.sent.into(),
            point.received.into(),
            point.late.into(),
            input.map(|s| s.mean).into(),
            input.map(|s| s.p99).into(),
            input.map(|s| s.max).into(),
            output.map(|s| s.mean).into(),
            output.map(|s| s.p99).into(),
            output.map(|s| s.max).into(),
            (point.cpu_ns as f64 / 1e6).into(),
            cpu_percent.into(),
        ])?;
    }
    Ok(table)
}

/// Per-message jitter, long form: the input once per stream (timer
/// mode's), the output of every release mode. Jitter below 1 µs is drawn
/// at 1 µs, since the axis is logarithmic.
fn series_table(points: &[TdsPoint]) -> Result<Table, BenchError> {
    let columns = [("stream", ""), ("series", ""), ("message", ""), ("jitter_us", "µs")];
    let mut table = Table::new(SERIES_TABLE, "Sift: jitter per message (first 300)", &columns);
    for point in points {
        let mut series = vec![(format!("output, {}", point.release), &point.output_series_us)];
        if point.release == TDS_RELEASES[0].0 {
            series.insert(0, ("input".to_string(), &point.input_series_us));
        }
        for (name, values) in series {
            for (index, value) in values.iter().enumerate() {
                let row = vec![
                    Cell::from(point.stream.name),
                    Cell::from(name.as_str()),
                    (index + 1).into(),
                    value.max(1.0).into(),
                ];
                table.push_row(row)?;
            }
        }
    }
    Ok(table)
}

/// What §3.3 states in numbers.
fn paper_table() -> Result<Table, BenchError> {
    let columns = [("statement", ""), ("value", "")];
    let mut table = Table::new("tds_paper", "NaradaBrokering §3.3, as stated", &columns);
    let rows = [
        ("TDS threads", "5, interleaved, each sleeping a time slice"),
        ("CPU with a 1 ms interval between threads", "5-6 % (Linux, 1.5 GHz)"),
        ("CPU with a 10 µs interval", "20-25 %"),
        ("Thread wake-up granularity, Linux / Windows", "≥ 3 ms / 10 ms per thread"),
        ("Smallest spacing shown kept (Fig. 13)", "500 µs"),
    ];
    for (statement, value) in rows {
        table.push_row(vec![Cell::from(statement), Cell::from(value)])?;
    }
    Ok(table)
}

const NOTES: [&str; 3] = [
    "Jitter of a message = |gap to the previous message as observed − gap between their publisher timestamps|; input is at arrival (what an application without the TDS sees), output at release.",
    "Timestamps are carried into the subscriber's clock with one estimate (TIME exchanges through the same jittered link), so a constant offset error cancels in every gap.",
    "The paper's figures 9-12 plot jitter per message in ms without tabulated values; its text gives the CPU costs quoted here.",
];
