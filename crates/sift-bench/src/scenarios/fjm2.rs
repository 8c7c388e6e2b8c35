//! `sift bench fjm2`: the JMS throughput benchmark of the FJM2 thesis
//! (seed 002, §5.4 "JMS Performance Benchmark on Loop-back Interface",
//! Fig. 5-6, and §5.5 on 100 Mbit/s Ethernet, Fig. 5-8 and 5-10).
//!
//! **The experiment.** One publisher sends fixed-size messages as fast as
//! it can; each subscriber counts what it receives; the figure is the
//! throughput in Mbit/s against the message size. The thesis runs 1 → 1 on
//! loopback (§5.4) and 1 → 1 and 1 → 2 over Ethernet (§5.5). Here both
//! fan-outs run on loopback, with sizes from 64 B to 64 KB in steps of 4×,
//! so the plot has the axes of Fig. 5-6 and 5-10: message size (log) against
//! Mbit/s, one line per fan-out and delivery mode.
//!
//! **Delivery modes: both, and why.** The thesis's test asks for "no
//! message lost" (§5.4 (2)), and all four systems it compares deliver
//! reliably: FJM2 over NORM multicast with negative acknowledgements only,
//! the server products with positive ones, which it argues (§1) are what
//! limits them. Sift's `reliable` mode is the loss-free run (confirmed
//! publishes, acknowledged deliveries, and flow control from a full
//! subscriber queue back to the publisher), so it is the one to set beside
//! the thesis's figures. `best-effort` drops the acknowledgements and the
//! flow control: a subscriber that falls 64 MiB behind the publisher loses
//! messages, which the `lost` columns count. Its rows show the cost of
//! acknowledgement where nothing is lost, and where something is, what an
//! overrun subscriber still receives; the thesis's own conclusion (§5.6) is
//! that FJM2 lacked such flow control.
//!
//! **Measures.** Throughput is payload bits received per second by one
//! subscriber (the thesis's receivers measure their own rate), in units of
//! 10^6 bit/s; the `total` column adds all subscribers. Each grid point
//! runs `--rounds` times, the rounds of the whole grid alternating so that
//! drift on a shared machine spreads over every point; the table gives the
//! median, minimum and maximum of the rounds.
//!
//! **The thesis's figures.** Its text states only a few numbers (the
//! figures themselves are images); the `paper` table quotes exactly those,
//! with their section and figure, and `comparison` puts Sift's peaks beside
//! the loopback peaks of §5.4.

use std::time::Duration;

use clap::Args;
use sift_core::DeliveryMode;

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::load::{throughput, RunResult, Workload};
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::plot::Plot;
use crate::progress::Progress;
use crate::report::{Cell, Report, Table};
use crate::stats::median;

/// The scenario's name on the command line.
pub const NAME: &str = "fjm2";
const TITLE: &str = "FJM2 thesis §5.4-5.5: JMS throughput against message size, 1 → 1 and 1 → 2";
const FJM2_TOPIC: &str = "bench.fjm2";
/// Message sizes of the full grid, 64 B to 64 KB in steps of 4×.
const SIZES_FULL: [usize; 6] = [64, 256, 1024, 4096, 16_384, 65_536];
/// Message sizes of `--quick`.
const SIZES_QUICK: [usize; 3] = [64, 4096, 65_536];
/// Payload bytes one subscriber receives per round of a point, full grid.
const BYTES_PER_ROUND_FULL: u64 = 1 << 30;
/// The same with `--quick`.
const BYTES_PER_ROUND_QUICK: u64 = 16 << 20;
/// Messages per round of a point, full grid: at least enough to reach a
/// steady state, at most what keeps small sizes from dominating the run.
const MESSAGES_FULL: std::ops::RangeInclusive<u64> = 4_000..=1_000_000;
/// The same with `--quick`.
const MESSAGES_QUICK: std::ops::RangeInclusive<u64> = 1_000..=20_000;
/// Rounds of the grid without `--rounds`.
const ROUNDS_FULL: u32 = 3;
/// Rounds with `--quick`.
const ROUNDS_QUICK: u32 = 1;
/// A subscriber that receives nothing for this long has all it will get
/// (best-effort messages a slow subscriber lost never come).
const FJM2_IDLE_END: Duration = Duration::from_secs(2);
/// Rough loopback goodput, to guess whether the run deserves a progress bar.
const EXPECTED_BYTES_PER_S: f64 = 500e6;
/// Rough cost of connecting a point's clients.
const EXPECTED_POINT_SETUP: Duration = Duration::from_millis(50);

/// Arguments of `sift bench fjm2`.
#[derive(Debug, Args, Clone)]
pub struct Fjm2Args {
    /// Message (payload) sizes in bytes, comma-separated; default
    /// 64,256,1024,4096,16384,65536, with `--quick` 64,4096,65536.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Subscriber counts, comma-separated (1 → N).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub fanouts: Vec<usize>,
    /// Delivery modes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "best-effort,reliable")]
    pub modes: Vec<String>,
    /// Payload bytes one subscriber receives per round of a point; the
    /// message count is this over the size, within fixed limits. Default
    /// 1 GiB, with `--quick` 16 MiB.
    #[arg(long)]
    pub bytes: Option<u64>,
    /// Rounds of the whole grid; a point's figure is the median of its
    /// rounds. Default 3, with `--quick` 1.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// `broker` (through an embedded or running broker) or `multicast`
    /// (NORM, no broker, on a LAN of network namespaces this run makes; root).
    #[arg(long, default_value = "broker", value_parser = ["broker", "multicast"])]
    pub transport: String,
    /// With multicast: receive loss percentages (NORM's own hook), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub losses: Vec<f64>,
    /// With multicast: NORM's transmit rate, Mbit/s.
    #[arg(long, default_value_t = 2000.0)]
    pub rate_mbit: f64,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// One point of the grid.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    size: usize,
    subscribers: usize,
    mode: DeliveryMode,
    messages: u64,
}

impl Point {
    fn fanout(&self) -> String {
        format!("1 → {}", self.subscribers)
    }

    fn label(&self) -> String {
        format!("{} {} {}", size_text(self.size), self.fanout(), self.mode.name())
    }

    fn workload(&self) -> Workload {
        Workload {
            subscribers: self.subscribers,
            mode: self.mode,
            idle_end: FJM2_IDLE_END,
            ..Workload::new(FJM2_TOPIC, self.size, self.messages)
        }
    }
}

/// `64`, `1K`, `64K`.
fn size_text(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) {
        format!("{}K", size / 1024)
    } else {
        size.to_string()
    }
}

/// The grid and how often to run it.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    sizes: Vec<usize>,
    fanouts: Vec<usize>,
    points: Vec<Point>,
    rounds: u32,
    bytes_per_round: u64,
}

impl Plan {
    fn from_args(args: &Fjm2Args) -> Result<Plan, BenchError> {
        let quick = args.common.quick;
        let sizes = match (&args.sizes[..], quick) {
            ([], false) => SIZES_FULL.to_vec(),
            ([], true) => SIZES_QUICK.to_vec(),
            (sizes, _) => sizes.to_vec(),
        };
        let bytes_per_round = args.bytes.unwrap_or(if quick { BYTES_PER_ROUND_QUICK } else { BYTES_PER_ROUND_FULL });
        let rounds = args.rounds.unwrap_or(if quick { ROUNDS_QUICK } else { ROUNDS_FULL });
        if rounds == 0 || args.fanouts.contains(&0) || args.fanouts.is_empty() || args.modes.is_empty() {
            return Err(BenchError::Usage("--rounds, --fanouts and --modes need at least one each, above 0".into()));
        }
        let limits = if quick { MESSAGES_QUICK } else { MESSAGES_FULL };
        let mut points = Vec::new();
        for mode in &args.modes {
            let mode: DeliveryMode = mode.parse().map_err(|error| BenchError::Usage(format!("--modes: {error}")))?;
            for &subscribers in &args.fanouts {
                for &size in &sizes {
                    let messages = (bytes_per_round / size.max(1) as u64).clamp(*limits.start(), *limits.end());
                    let point = Point { size, subscribers, mode, messages };
                    point.workload().validate()?;
                    points.push(point);
                }
            }
        }
        let mut fanouts = args.fanouts.clone();
        fanouts.sort_unstable();
        fanouts.dedup();
        Ok(Plan { sizes, fanouts, points, rounds, bytes_per_round })
    }

    fn expected_duration(&self) -> Duration {
        let per_round: Duration = self
            .points
            .iter()
            .map(|point| {
                let bytes = (point.messages * point.size as u64 * point.subscribers as u64) as f64;
                EXPECTED_POINT_SETUP + Duration::from_secs_f64(bytes / EXPECTED_BYTES_PER_S)
            })
            .sum();
        per_round * self.rounds
    }
}

/// What the rounds of one point measured.
#[derive(Debug, Clone, Default, PartialEq)]
struct Measured {
    subscriber_mbit_per_s: Vec<f64>,
    total_mbit_per_s: Vec<f64>,
    subscriber_msgs_per_s: Vec<f64>,
    /// Deliveries owed over all rounds: published times subscribers.
    expected: u64,
    /// Deliveries owed that never came, over all rounds.
    lost: u64,
}

impl Measured {
    fn add(&mut self, point: &Point, result: &RunResult) {
        let subscribers = point.subscribers as f64;
        let total_msgs_per_s = result.delivered_msgs_per_s();
        let bits = point.size as f64 * 8.0;
        self.subscriber_mbit_per_s.push(total_msgs_per_s * bits / subscribers / 1e6);
        self.total_mbit_per_s.push(total_msgs_per_s * bits / 1e6);
        self.subscriber_msgs_per_s.push(total_msgs_per_s / subscribers);
        let expected = result.published * point.subscribers as u64;
        self.expected += expected;
        self.lost += expected.saturating_sub(result.delivered);
    }

    /// Share of the owed deliveries lost, in percent.
    fn lost_percent(&self) -> f64 {
        if self.expected == 0 {
            0.0
        } else {
            self.lost as f64 * 100.0 / self.expected as f64
        }
    }
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: Fjm2Args) -> Result<(), BenchError> {
    if args.transport == "multicast" {
        return run_multicast(args).await;
    }
    let plan = Plan::from_args(&args)?;
    let mut report = Report::new(NAME, TITLE);
    let endpoints = Endpoints::from_options(&args.common).await?;
    let measured = measure(&endpoints, &plan, args.common.json).await;
    endpoints.shutdown().await;
    fill_report(&mut report, &args, &plan, &measured?)?;
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

/// `--transport multicast`: the same experiment over NORM with no broker.
async fn run_multicast(args: Fjm2Args) -> Result<(), BenchError> {
    let quick = args.common.quick;
    let sizes = match (args.sizes.is_empty(), quick) {
        (true, false) => SIZES_FULL.to_vec(),
        (true, true) => SIZES_QUICK.to_vec(),
        (false, _) => args.sizes.clone(),
    };
    let plan = crate::scenarios::fjm2_multicast::MulticastPlan {
        sizes,
        fanouts: args.fanouts.clone(),
        losses: args.losses.clone(),
        bytes: args.bytes.unwrap_or(if quick { BYTES_PER_ROUND_QUICK } else { 256 << 20 }),
        rate_mbit: args.rate_mbit,
    };
    if plan.fanouts.contains(&0) || plan.fanouts.iter().any(|count| *count > 32) || plan.rate_mbit <= 0.0 {
        return Err(BenchError::Usage("--fanouts 1 to 32 receivers, --rate-mbit above 0".into()));
    }
    let mut report =
        Report::new(NAME, "FJM2 thesis over NORM multicast: throughput against size and receivers, no broker");
    report.parameter("transport", "multicast");
    report.parameter("rate_mbit", plan.rate_mbit);
    report.parameter("bytes", plan.bytes);
    let quiet = args.common.json;
    let report = tokio::task::spawn_blocking(move || {
        crate::scenarios::fjm2_multicast::run(&plan, &mut report, quiet).map(|()| report)
    })
    .await
    .map_err(|error| BenchError::Task { role: "publisher", reason: error.to_string() })??;
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

/// Runs every point `plan.rounds` times, whole grid after whole grid.
async fn measure(endpoints: &Endpoints, plan: &Plan, quiet: bool) -> Result<Vec<Measured>, BenchError> {
    let steps = plan.points.len() as u64 * u64::from(plan.rounds);
    let progress = Progress::new(steps, plan.expected_duration(), quiet);
    let mut measured = vec![Measured::default(); plan.points.len()];
    for round in 1..=plan.rounds {
        for (point, slot) in plan.points.iter().zip(measured.iter_mut()) {
            progress.begin(&format!("{} (round {round})", point.label()));
            let result = throughput(endpoints, &point.workload()).await?;
            slot.add(point, &result);
            progress.advance();
        }
    }
    Ok(measured)
}

/// Columns of the `throughput` table, (name, unit).
const THROUGHPUT_COLUMNS: [(&str, &str); 13] = [
    ("size", "B"),
    ("subscribers", ""),
    ("fanout", ""),
    ("mode", ""),
    ("messages", "msgs"),
    ("rounds", ""),
    ("subscriber_mbit_per_s_median", "Mbit/s"),
    ("subscriber_mbit_per_s_min", "Mbit/s"),
    ("subscriber_mbit_per_s_max", "Mbit/s"),
    ("total_mbit_per_s_median", "Mbit/s"),
    ("subscriber_msgs_per_s_median", "msgs/s"),
    ("lost", "msgs"),
    ("lost_percent", "%"),
];

fn throughput_table(plan: &Plan, measured: &[Measured]) -> Result<Table, BenchError> {
    let title = "Sift: throughput per subscriber against message size, loopback";
    let mut table = Table::new("throughput", title, &THROUGHPUT_COLUMNS);
    for (point, measured) in plan.points.iter().zip(measured) {
        let extreme = |pick: fn(f64, f64) -> f64| measured.subscriber_mbit_per_s.iter().copied().reduce(pick);
        table.push_row(vec![
            point.size.into(),
            point.subscribers.into(),
            point.fanout().into(),
            point.mode.name().into(),
            point.messages.into(),
            plan.rounds.into(),
            median(&measured.subscriber_mbit_per_s).into(),
            extreme(f64::min).into(),
            extreme(f64::max).into(),
            median(&measured.total_mbit_per_s).into(),
            median(&measured.subscriber_msgs_per_s).into(),
            measured.lost.into(),
            measured.lost_percent().into(),
        ])?;
    }
    Ok(table)
}

/// One thing the thesis's text states about these experiments.
struct ThesisStatement {
    section: &'static str,
    figure: &'static str,
    setup: &'static str,
    system: &'static str,
    /// The figure in Mbit/s, when the text gives a number.
    mbit_per_s: Option<f64>,
    /// What the text says, in its words where short enough.
    statement: &'static str,
}

const LOOPBACK_1_TO_1: &str = "loopback, 1 → 1";
const ETHERNET_1_TO_2: &str = "100 Mbit/s Ethernet, 1 → 2";
const FJM2: &str = "FJM2";
const FIORANO: &str = "FioranoMQ 2006";
const SONIC: &str = "SonicMQ v7.0";

/// Every number and comparison the thesis's text states for §5.3-5.5 (its
/// figures are images; nothing here is read off them).
const THESIS_STATEMENTS: [ThesisStatement; 8] = [
    ThesisStatement {
        section: "§5.4",
        figure: "Fig. 5-6",
        setup: LOOPBACK_1_TO_1,
        system: FJM2,
        mbit_per_s: Some(170.0),
        statement: "peak performance is only around 170 Mbps",
    },
    ThesisStatement {
        section: "§5.4",
        figure: "Fig. 5-6",
        setup: LOOPBACK_1_TO_1,
        system: FIORANO,
        mbit_per_s: Some(202.0),
        statement: "Fiorano is 202 Mbps",
    },
    ThesisStatement {
        section: "§5.4",
        figure: "Fig. 5-6",
        setup: LOOPBACK_1_TO_1,
        system: SONIC,
        mbit_per_s: Some(257.0),
        statement: "SonicMQ could run up-to 257 Mbps",
    },
    ThesisStatement {
        section: "§5.4",
        figure: "Fig. 5-6",
        setup: LOOPBACK_1_TO_1,
        system: FJM2,
        mbit_per_s: None,
        statement: "outperforms all the other systems below 8 Kbytes; almost reaches its peak at 4 Kbytes",
    },
    ThesisStatement {
        section: "§5.4",
        figure: "Fig. 5-6",
        setup: LOOPBACK_1_TO_1,
        system: SONIC,
        mbit_per_s: None,
        statement: "gets better as the message grows; best in the loop-back test",
    },
    ThesisStatement {
        section: "§5.5.2",
        figure: "Fig. 5-10",
        setup: ETHERNET_1_TO_2,
        system: FJM2,
        mbit_per_s: None,
        statement: "outperforms all the others at 512 bytes and above; the more subscribers, the larger the difference",
    },
    ThesisStatement {
        section: "§5.5.2",
        figure: "Fig. 5-10",
        setup: ETHERNET_1_TO_2,
        system: SONIC,
        mbit_per_s: None,
        statement: "outperforms all the others below 512 bytes",
    },
    ThesisStatement {
        section: "§5.3",
        figure: "Fig. 5-4, 5-5",
        setup: "100 Mbit/s Ethernet, UDP",
        system: "C and Java sockets",
        mbit_per_s: Some(90.0),
        statement: "actual peak throughput is ~90Mbps",
    },
];

/// The loopback 1 → 1 peak the thesis states for `system`.
fn thesis_loopback_peak(system: &str) -> Option<f64> {
    THESIS_STATEMENTS
        .iter()
        .find(|statement| statement.setup == LOOPBACK_1_TO_1 && statement.system == system)
        .and_then(|statement| statement.mbit_per_s)
}

fn thesis_table() -> Result<Table, BenchError> {
    let columns =
        [("section", ""), ("figure", ""), ("setup", ""), ("system", ""), ("mbit_per_s", "Mbit/s"), ("statement", "")];
    let mut table = Table::new("paper", "The thesis's figures, as its text states them", &columns);
    for statement in &THESIS_STATEMENTS {
        table.push_row(vec![
            statement.section.into(),
            statement.figure.into(),
            statement.setup.into(),
            statement.system.into(),
            statement.mbit_per_s.into(),
            statement.statement.into(),
        ])?;
    }
    Ok(table)
}

/// Peaks of the loopback runs per fan-out, Sift's modes beside the §5.4 peaks.
fn comparison_table(plan: &Plan, measured: &[Measured]) -> Result<Table, BenchError> {
    let columns = [
        ("setup", ""),
        ("sift_reliable_mbit_per_s", "Mbit/s"),
        ("sift_reliable_at_size", "B"),
        ("sift_best_effort_mbit_per_s", "Mbit/s"),
        ("sift_best_effort_at_size", "B"),
        ("sift_best_effort_lost_percent", "%"),
        ("fjm2_mbit_per_s", "Mbit/s"),
        ("fioranomq_mbit_per_s", "Mbit/s"),
        ("sonicmq_mbit_per_s", "Mbit/s"),
    ];
    let title = "Peak throughput per subscriber on loopback: Sift beside the thesis (§5.4, Fig. 5-6)";
    let mut table = Table::new("comparison", title, &columns);
    for &subscribers in &plan.fanouts {
        let peak = |mode: DeliveryMode| peak_of(plan, measured, subscribers, mode);
        let (reliable, best_effort) = (peak(DeliveryMode::Reliable), peak(DeliveryMode::BestEffort));
        // The thesis states loopback figures for 1 → 1 only.
        let thesis =
            |system: &str| if subscribers == 1 { Cell::from(thesis_loopback_peak(system)) } else { Cell::Empty };
        table.push_row(vec![
            format!("loopback, 1 → {subscribers}, peak").into(),
            reliable.map(|peak| peak.mbit_per_s).into(),
            reliable.map(|peak| peak.size).into(),
            best_effort.map(|peak| peak.mbit_per_s).into(),
            best_effort.map(|peak| peak.size).into(),
            best_effort.map(|peak| peak.lost_percent).into(),
            thesis(FJM2),
            thesis(FIORANO),
            thesis(SONIC),
        ])?;
    }
    Ok(table)
}

/// The point of a fan-out and mode with the highest median throughput.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Peak {
    mbit_per_s: f64,
    size: usize,
    lost_percent: f64,
}

fn peak_of(plan: &Plan, measured: &[Measured], subscribers: usize, mode: DeliveryMode) -> Option<Peak> {
    plan.points
        .iter()
        .zip(measured)
        .filter(|(point, _)| point.subscribers == subscribers && point.mode == mode)
        .filter_map(|(point, measured)| {
            let mbit_per_s = median(&measured.subscriber_mbit_per_s)?;
            Some(Peak { mbit_per_s, size: point.size, lost_percent: measured.lost_percent() })
        })
        .max_by(|left, right| left.mbit_per_s.total_cmp(&right.mbit_per_s))
}

/// Adds the run's parameters, tables, plot and notes to `report`.
fn fill_report(report: &mut Report, args: &Fjm2Args, plan: &Plan, measured: &[Measured]) -> Result<(), BenchError> {
    report.parameter("server", args.common.server.as_deref().unwrap_or("embedded"));
    let list = |values: &[usize]| values.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    report.parameter("sizes", list(&plan.sizes));
    report.parameter("fanouts", list(&plan.fanouts));
    report.parameter("modes", args.modes.join(","));
    report.parameter("bytes_per_round", plan.bytes_per_round);
    report.parameter("rounds", plan.rounds);
    report.parameter("quick", args.common.quick);
    let throughput = throughput_table(plan, measured)?;
    let plot = Plot::lines(
        "throughput.svg",
        "Throughput per subscriber against message size (cf. thesis Fig. 5-6, 5-10)",
        &throughput,
        "size",
        "subscriber_mbit_per_s_median",
    )?
    .series(&["fanout", "mode"])
    .log_x(4.0)
    .labels("message size (B)", "throughput per subscriber (Mbit/s)");
    report.plots.push(plot);
    report.tables.push(throughput);
    report.tables.push(comparison_table(plan, measured)?);
    report.tables.push(thesis_table()?);
    for note in NOTES {
        report.note(note);
    }
    Ok(())
}

const NOTES: [&str; 4] = [
    "Mbit/s is 10^6 bits of payload received per second by one subscriber; the message size is the payload \
     (Sift adds the topic and a header of a few dozen bytes on the wire). The thesis does not define its Mbps \
     beyond its §4 arithmetic, which mixes 100/8 with 1024; the two readings differ by under 5 %.",
    "The thesis ran each system on one PC of 2005 (Pentium M 1.73 GHz or Pentium 4 1.8 GHz, IBM Java 1.4.2/1.5, \
     §5.1); here broker, publisher and subscribers share this machine's CPUs.",
    "reliable is the loss-free run the thesis's test asks for (confirms, acknowledgements, flow control); \
     best-effort has neither acknowledgements nor flow control, so an overrun subscriber loses messages (lost, \
     lost_percent) and its row is the rate of what still arrived.",
    "The thesis's 1 → 2 figures (§5.5.2, Fig. 5-10) were measured over 100 Mbit/s Ethernet, capped near 90 Mbit/s \
     (§5.3); its text gives no number for them.",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn args(quick: bool) -> Fjm2Args {
        Fjm2Args {
            sizes: Vec::new(),
            fanouts: vec![1, 2],
            modes: vec!["best-effort".into(), "reliable".into()],
            bytes: None,
            rounds: None,
            transport: "broker".into(),
            losses: vec![0.0],
            rate_mbit: 2000.0,
            common: CommonArgs { quick, ..CommonArgs::default() },
        }
    }

    #[test]
    fn the_full_grid_spans_64_bytes_to_64_kilobytes_in_both_fanouts_and_modes() {
        let plan = Plan::from_args(&args(false)).expect("plan");
        assert_eq!(plan.points.len(), 6 * 2 * 2);
        assert_eq!(plan.rounds, ROUNDS_FULL);
        let first = &plan.points[0];
        assert_eq!(
            (first.size, first.subscribers, first.mode, first.messages),
            (64, 1, DeliveryMode::BestEffort, 1_000_000)
        );
        let last = &plan.points[23];
        assert_eq!(
            (last.size, last.subscribers, last.mode, last.messages),
            (65_536, 2, DeliveryMode::Reliable, 16_384)
        );
        assert_eq!(last.label(), "64K 1 → 2 reliable");
    }

    #[test]
    fn the_quick_grid_is_small() {
        let plan = Plan::from_args(&args(true)).expect("plan");
        assert_eq!(plan.points.len(), 3 * 2 * 2);
        assert!(plan.points.iter().all(|point| point.messages <= 20_000));
        assert!(plan.expected_duration() < Duration::from_secs(5), "{:?}", plan.expected_duration());
    }

    #[test]
    fn bad_grids_are_refused() {
        let mut bad = args(true);
        bad.sizes = vec![4];
        assert!(Plan::from_args(&bad).is_err());
        let mut bad = args(true);
        bad.modes = vec!["persistent".into()];
        assert!(Plan::from_args(&bad).is_err());
        let mut bad = args(true);
        bad.fanouts = vec![0];
        assert!(Plan::from_args(&bad).is_err());
    }

    #[test]
    fn tables_report_medians_peaks_and_the_thesis_statements() {
        let plan = Plan::from_args(&args(true)).expect("plan");
        let mut measured = vec![Measured::default(); plan.points.len()];
        for (index, (point, slot)) in plan.points.iter().zip(measured.iter_mut()).enumerate() {
            let result = RunResult {
                published: 100,
                delivered: 100 * point.subscribers as u64 - u64::from(index == 0),
                publish_seconds: 1.0,
                seconds: 1.0,
                latency_ns: crate::stats::Samples::new(),
            };
            slot.add(point, &result);
        }
        let mut report = Report::new(NAME, TITLE);
        fill_report(&mut report, &args(true), &plan, &measured).expect("report");
        let table = report.table("throughput").expect("throughput");
        // 64 B, 1 → 1: 99 messages of 512 bits in a second.
        assert_eq!(table.cell(0, "subscriber_mbit_per_s_median"), Some(&Cell::Float(99.0 * 512.0 / 1e6)));
        assert_eq!(table.cell(0, "lost"), Some(&Cell::Int(1)));
        assert_eq!(table.cell(0, "lost_percent"), Some(&Cell::Float(1.0)));
        let comparison = report.table("comparison").expect("comparison");
        assert_eq!(comparison.rows.len(), 2);
        assert_eq!(comparison.cell(0, "sift_best_effort_at_size"), Some(&Cell::Int(65_536)));
        assert_eq!(comparison.cell(0, "sift_reliable_mbit_per_s"), Some(&Cell::Float(100.0 * 65_536.0 * 8.0 / 1e6)));
        assert_eq!(comparison.cell(0, "sift_best_effort_lost_percent"), Some(&Cell::Float(0.0)));
        assert_eq!(comparison.cell(0, "sonicmq_mbit_per_s"), Some(&Cell::Float(257.0)));
        assert_eq!(comparison.cell(1, "sonicmq_mbit_per_s"), Some(&Cell::Empty));
        let paper = report.table("paper").expect("paper");
        assert_eq!(paper.cell(0, "mbit_per_s"), Some(&Cell::Float(170.0)));
        assert_eq!(
            report.parameters.iter().find(|p| p.name == "sizes").map(|p| &p.value),
            Some(&Cell::from("64,4096,65536"))
        );
    }
}
