//! `sift bench pubsub`: P publishers → S subscribers on one topic, one
//! run: throughput, or latency with one message in flight, against an
//! embedded broker, a chain of embedded brokers, or a running broker.
//!
//! The printed text is kept line for line as it was before the result
//! files existed; `--json` prints the report, whose `pubsub` table has one
//! row with the figures under the names they always had
//! (`delivered_msgs_per_s`, `latency_us_p50`, …).

use std::time::Duration;

use clap::Args;
use sift_core::DeliveryMode;

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::load::{one_in_flight, throughput, RunResult, Workload, IDLE_END_DEFAULT};
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::plot::Plot;
use crate::progress::Progress;
use crate::report::{Cell, Report, Table};
use crate::stats::Summary;

/// The scenario's name on the command line.
pub const NAME: &str = "pubsub";
const TITLE: &str = "Publish-subscribe: P publishers → S subscribers on one topic";
/// Topic the scenario publishes on.
const PUBSUB_TOPIC: &str = "bench.pubsub";
/// Messages published without `--count`.
const COUNT_DEFAULT: u64 = 1_000_000;
/// Messages published with `--quick` and without `--count`.
const COUNT_QUICK: u64 = 20_000;
/// Rough unpaced throughput, to guess whether a run is long enough for a progress bar.
const EXPECTED_MSGS_PER_S: f64 = 1_000_000.0;
/// Rough time per message with one in flight, for the same guess.
const EXPECTED_ONE_IN_FLIGHT: Duration = Duration::from_micros(100);

/// Arguments of `sift bench pubsub`.
#[derive(Debug, Args, Clone)]
pub struct PubsubArgs {
    /// Publishers, one connection each.
    #[arg(long, default_value_t = 1)]
    pub pubs: usize,
    /// Subscribers, one connection each; each gets every message.
    #[arg(long, default_value_t = 1)]
    pub subs: usize,
    /// Payload bytes per message (at least 8: the send time rides in it).
    #[arg(long, default_value_t = 128)]
    pub size: usize,
    /// Messages published in all (split across publishers); default
    /// 1,000,000, or 20,000 with `--quick`.
    #[arg(long)]
    pub count: Option<u64>,
    /// best-effort or reliable (reliable publishes are confirmed, pipelined
    /// within the broker's publish window, and acknowledged by subscribers).
    #[arg(long, default_value = "best-effort")]
    pub mode: String,
    /// One message in flight at a time: measures latency, not throughput.
    #[arg(long)]
    pub latency: bool,
    /// Publish at this many messages per second in all (each message then
    /// carries its send time), instead of as fast as possible.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Embedded brokers linked in a chain: publishers connect to the first,
    /// subscribers to the last, so that every message crosses `chain - 1`
    /// broker links. Not with `--server`.
    #[arg(long, default_value_t = 1)]
    pub chain: usize,
    /// With `--server`: where subscribers connect (another broker of the
    /// same network); publishers stay on `--server`.
    #[arg(long, requires = "server")]
    pub sub_server: Option<String>,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: PubsubArgs) -> Result<(), BenchError> {
    let mode: DeliveryMode = args.mode.parse().map_err(|error| BenchError::Usage(format!("--mode: {error}")))?;
    let workload = Workload {
        topic: PUBSUB_TOPIC.to_string(),
        publishers: args.pubs,
        subscribers: args.subs,
        payload_bytes: args.size,
        messages: args.count.unwrap_or(if args.common.quick { COUNT_QUICK } else { COUNT_DEFAULT }),
        mode,
        rate: args.rate,
        idle_end: IDLE_END_DEFAULT,
    };
    workload.validate()?;
    let mut report = Report::new(NAME, TITLE);
    crate::tls::setup(&args.common)?;
    let endpoints = match &args.common.server {
        Some(address) if args.chain == 1 => Endpoints::remote(address, args.sub_server.as_deref()),
        Some(_) => {
            return Err(BenchError::Usage("--chain starts its own brokers; it cannot be used with --server".into()))
        }
        None => Endpoints::chain(args.chain).await?,
    };
    let progress = Progress::new(1, expected_duration(&workload, args.latency), args.common.json);
    progress.begin(&format!("{} messages", workload.messages));
    let result =
        if args.latency { one_in_flight(&endpoints, &workload).await } else { throughput(&endpoints, &workload).await };
    endpoints.shutdown().await;
    let result = result?;
    progress.advance();
    drop(progress);
    let figures = Figures::new(&args, &workload, &result);
    fill_report(&mut report, &args, &workload, &figures, result.latency_ns.summary())?;
    finish(&report, &args.common, Printed::Text(figures.text()))?;
    Ok(())
}

fn expected_duration(workload: &Workload, latency: bool) -> Duration {
    let messages = workload.messages as f64;
    match (latency, workload.rate) {
        (true, _) => EXPECTED_ONE_IN_FLIGHT.mul_f64(messages),
        (false, Some(rate)) => Duration::from_secs_f64(messages / rate as f64),
        (false, None) => Duration::from_secs_f64(messages / EXPECTED_MSGS_PER_S),
    }
}

/// The figures of one run, as printed and as the `pubsub` table's row.
#[derive(Debug, Clone)]
struct Figures {
    pubs: usize,
    subs: usize,
    size: usize,
    mode: String,
    latency_mode: bool,
    chain: usize,
    rate: Option<u64>,
    published: u64,
    delivered: u64,
    seconds: f64,
    publish_msgs_per_s: f64,
    delivered_msgs_per_s: f64,
    delivered_mb_per_s: f64,
    /// Latency in microseconds; `None` when nothing stamped arrived.
    latency_us: Option<Summary>,
}

impl Figures {
    fn new(args: &PubsubArgs, workload: &Workload, result: &RunResult) -> Figures {
        Figures {
            pubs: workload.publishers,
            subs: workload.subscribers,
            size: workload.payload_bytes,
            mode: args.mode.clone(),
            latency_mode: args.latency,
            chain: args.chain,
            rate: workload.rate,
            published: result.published,
            delivered: result.delivered,
            seconds: result.seconds,
            publish_msgs_per_s: result.publish_msgs_per_s(),
            delivered_msgs_per_s: result.delivered_msgs_per_s(),
            delivered_mb_per_s: result.delivered_msgs_per_s() * workload.payload_bytes as f64 / 1e6,
            latency_us: result.latency_ns.summary().map(|summary| summary.scaled(1e-3)),
        }
    }

    /// The three lines `sift bench pubsub` has always printed.
    fn text(&self) -> String {
        let chain = if self.chain > 1 { format!(", through {} brokers", self.chain) } else { String::new() };
        let rate = self.rate.map(|rate| format!(", paced at {rate} msgs/s")).unwrap_or_default();
        let one_in_flight = if self.latency_mode { ", one in flight" } else { "" };
        let latency = self.latency_us.unwrap_or_default();
        format!(
            "pubsub {} pub → {} sub, {} B, {}{one_in_flight}{chain}{rate}\n  published {} ({:.0} msgs/s), delivered {} \
             in {:.3} s: {:.0} msgs/s, {:.1} MB/s\n  latency µs: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}\n",
            self.pubs,
            self.subs,
            self.size,
            self.mode,
            self.published,
            self.publish_msgs_per_s,
            self.delivered,
            self.seconds,
            self.delivered_msgs_per_s,
            self.delivered_mb_per_s,
            latency.p50,
            latency.p90,
            latency.p99,
            latency.p999,
            latency.max
        )
    }

    /// The `pubsub` table: one row, columns named as the figures always were.
    fn table(&self) -> Result<Table, BenchError> {
        let mut table = Table::new(NAME, "Publish-subscribe run", &PUBSUB_COLUMNS);
        let latency = self.latency_us;
        let pick = |value: fn(&Summary) -> f64| Cell::from(latency.as_ref().map(value));
        table.push_row(vec![
            self.pubs.into(),
            self.subs.into(),
            self.size.into(),
            self.mode.as_str().into(),
            self.latency_mode.into(),
            self.chain.into(),
            self.rate.into(),
            self.published.into(),
            self.delivered.into(),
            self.seconds.into(),
            self.publish_msgs_per_s.into(),
            self.delivered_msgs_per_s.into(),
            self.delivered_mb_per_s.into(),
            latency.map_or(0u64, |summary| summary.count).into(),
            pick(|summary| summary.min),
            pick(|summary| summary.mean),
            Cell::from(latency.and_then(|summary| summary.std_dev)),
            pick(|summary| summary.p50),
            pick(|summary| summary.p90),
            pick(|summary| summary.p99),
            pick(|summary| summary.p999),
            pick(|summary| summary.max),
        ])?;
        Ok(table)
    }
}

/// Columns of the `pubsub` table, (name, unit).
const PUBSUB_COLUMNS: [(&str, &str); 22] = [
    ("pubs", ""),
    ("subs", ""),
    ("size", "B"),
    ("mode", ""),
    ("latency_mode", ""),
    ("chain", "brokers"),
    ("rate", "msgs/s"),
    ("published", "msgs"),
    ("delivered", "msgs"),
    ("seconds", "s"),
    ("publish_msgs_per_s", "msgs/s"),
    ("delivered_msgs_per_s", "msgs/s"),
    ("delivered_mb_per_s", "MB/s"),
    ("latency_samples", "msgs"),
    ("latency_us_min", "µs"),
    ("latency_us_mean", "µs"),
    ("latency_us_stddev", "µs"),
    ("latency_us_p50", "µs"),
    ("latency_us_p90", "µs"),
    ("latency_us_p99", "µs"),
    ("latency_us_p999", "µs"),
    ("latency_us_max", "µs"),
];

/// Adds the run's parameters, tables, plot and notes to `report`.
fn fill_report(
    report: &mut Report,
    args: &PubsubArgs,
    workload: &Workload,
    figures: &Figures,
    latency_ns: Option<Summary>,
) -> Result<(), BenchError> {
    report.parameter("server", args.common.server.as_deref().unwrap_or("embedded"));
    report.parameter("tls", if args.common.tls { "on" } else { "off" });
    report.parameter("pubs", workload.publishers);
    report.parameter("subs", workload.subscribers);
    report.parameter("size", workload.payload_bytes);
    report.parameter("count", workload.messages);
    report.parameter("mode", args.mode.as_str());
    report.parameter("latency", args.latency);
    report.parameter("rate", workload.rate);
    report.parameter("chain", args.chain);
    report.tables.push(figures.table()?);
    if let Some(latency_ns) = latency_ns {
        let table = percentile_table(&latency_ns.scaled(1e-3))?;
        let plot =
            Plot::lines("latency.svg", "Publish-to-delivery latency by percentile", &table, "percentile", "latency")?;
        report.plots.push(plot);
        report.tables.push(table);
    }
    if !args.latency {
        report.note(
            "Unpaced runs stamp one message in 16 and their latencies are queueing delay behind the publisher, \
             not the broker's latency; use --latency for that.",
        );
    }
    Ok(())
}

/// The latency at each percentile, in microseconds.
fn percentile_table(latency_us: &Summary) -> Result<Table, BenchError> {
    let mut table = Table::new("latency", "Latency by percentile", &[("percentile", "%"), ("latency", "µs")]);
    let rows = [(50.0, latency_us.p50), (90.0, latency_us.p90), (99.0, latency_us.p99), (99.9, latency_us.p999)];
    for (percentile, latency) in rows.into_iter().chain([(100.0, latency_us.max)]) {
        table.push_row(vec![percentile.into(), latency.into()])?;
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Samples;

    fn args() -> PubsubArgs {
        PubsubArgs {
            pubs: 1,
            subs: 1,
            size: 128,
            count: Some(4),
            mode: "best-effort".into(),
            latency: false,
            rate: None,
            chain: 1,
            sub_server: None,
            common: CommonArgs::default(),
        }
    }

    fn result() -> RunResult {
        let mut latency_ns = Samples::new();
        [40_000, 60_000, 80_000, 100_000].into_iter().for_each(|value| latency_ns.record(value));
        RunResult { published: 4, delivered: 4, publish_seconds: 0.5, seconds: 2.0, latency_ns }
    }

    #[test]
    fn the_printed_text_is_the_one_scripts_know() {
        let args = args();
        let workload = Workload::new(PUBSUB_TOPIC, 128, 4);
        let text = Figures::new(&args, &workload, &result()).text();
        let expected = "pubsub 1 pub → 1 sub, 128 B, best-effort\n  published 4 (8 msgs/s), delivered 4 in 2.000 s: \
                        2 msgs/s, 0.0 MB/s\n  latency µs: p50 60.0  p90 100.0  p99 100.0  p99.9 100.0  max 100.0\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_table_row_carries_the_figures_under_their_old_names() {
        let args = args();
        let workload = Workload::new(PUBSUB_TOPIC, 128, 4);
        let result = result();
        let figures = Figures::new(&args, &workload, &result);
        let mut report = Report::new(NAME, TITLE);
        fill_report(&mut report, &args, &workload, &figures, result.latency_ns.summary()).expect("report");
        let table = report.table(NAME).expect("pubsub table");
        assert_eq!(table.cell(0, "delivered_msgs_per_s"), Some(&Cell::Float(2.0)));
        assert_eq!(table.cell(0, "publish_msgs_per_s"), Some(&Cell::Float(8.0)));
        let micros = |column: &str| table.cell(0, column).and_then(Cell::as_f64).expect("a number");
        // Percentiles are exact to the histogram's precision (0.1 %), the mean exactly.
        assert!((micros("latency_us_p50") - 60.0).abs() < 0.06, "{}", micros("latency_us_p50"));
        assert!((micros("latency_us_mean") - 70.0).abs() < 1e-9);
        assert_eq!(micros("latency_us_max"), 100.0);
        assert_eq!(report.table("latency").map(|table| table.rows.len()), Some(5));
        assert_eq!(report.plots.len(), 1);
    }
}
