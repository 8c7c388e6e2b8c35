//! `sift bench ges`: the results chapter of the Grid Event Service thesis
//! (seed 001, §8.1-8.4) on a network of embedded brokers.
//!
//! **The experiment.** 22 brokers in clusters inside six super-clusters
//! (`topologies/ges22.toml`, the thesis's Fig. 8.1.1 rebuilt from its text,
//! built into the binary; `--topology FILE` replaces it). One publisher at
//! broker 22 sends events of 6 tag=value pairs whose fourth tag sets the
//! matching rate (`sift_core::workload::GesWorkload`); 5 clients on every
//! broker subscribe with their broker's profile, and measuring subscribers
//! at brokers 22, 1 and 10 (1, 2 and 9 server hops from the publisher)
//! record, per point of the grid publish rate × event size × matching rate,
//! the mean, variance, minimum and maximum latency and the throughput:
//! events received per second (§8.2). The `shortcut` variant (Fig. 8.4.1)
//! then brings broker 10 within 4 server hops, at matching rates of 50 and
//! 10 % (§8.4). Last come the persistent clients of §8.3.4: an epoch away
//! and back (`persistent`), and delivery with events stored on 1, 2 or 3
//! brokers first, the thesis's singular and double replication
//! (`replicated`, `--replication`).
//!
//! **Measures.** Latency is the time from the publisher's send to the
//! measuring subscriber's receipt, both in this process on one clock (the
//! thesis also kept publisher and measuring subscriber on one machine for
//! that reason); the stamp rides in the first 8 bytes of the event's
//! payload. Throughput is the events a measuring subscriber received over
//! the time from the first publish to its last delivery. The publish rate
//! reported is the one achieved (the thesis reports its "real publish
//! rates"). Events are best-effort; `background_lost` counts events the
//! background clients did not receive.
//!
//! **Brokers share the machine.** The thesis ran one broker per Sun Ultra-5
//! and its clients on other machines; here every broker and client shares
//! this process and its cores, so a broker's queueing delay includes the
//! others' work.

mod paper;
mod persistent;
mod plan;
mod replicated;
mod round;
mod tables;

use std::path::PathBuf;

use clap::Args;
use sift_core::workload::GesWorkload;

use crate::error::BenchError;
use crate::network::{TopologyNetwork, TopologySource};
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::progress::Progress;
use crate::report::Report;
use plan::{GridSpec, Part, Plan};
use round::{Roles, Round};
use tables::PointRun;

/// The scenario's name on the command line.
pub const NAME: &str = "ges";
const TITLE: &str =
    "GES thesis §8.2-8.4: latency and throughput against publish rate, size, matching rate, server hops";
/// The thesis's network, rebuilt from its text.
const GES22_TOML: &str = include_str!("../../../../../topologies/ges22.toml");
/// What reports call the built-in topology.
const GES22_NAME: &str = "ges22";
/// The value of `--shortcut` that skips the §8.4 part.
const NO_SHORTCUT: &str = "none";
/// Target publish rates of the full grid, msgs/s: the thesis's 1 to ~1000.
const RATES_FULL: [u64; 5] = [1, 20, 100, 500, 1000];
/// Target publish rates of `--quick`.
const RATES_QUICK: [u64; 2] = [50, 200];
/// Event sizes of the full grid, bytes: within the thesis's 30 to 500.
const SIZES_FULL: [usize; 5] = [50, 150, 250, 350, 450];
/// Event sizes of `--quick`.
const SIZES_QUICK: [usize; 2] = [50, 450];
/// Matching rates of the main grid, percent (§8.2.1).
const MATCHING_FULL: [u32; 4] = [100, 50, 25, 10];
/// Matching rates of the main grid with `--quick`.
const MATCHING_QUICK: [u32; 2] = [100, 10];
/// Matching rates of the server-hops part (§8.4).
const SHORTCUT_MATCHING_FULL: [u32; 2] = [50, 10];
/// Matching rates of the server-hops part with `--quick`.
const SHORTCUT_MATCHING_QUICK: [u32; 1] = [10];
/// Seconds of publishing per point.
const SECONDS_FULL: f64 = 2.0;
/// Seconds of publishing per point with `--quick`.
const SECONDS_QUICK: f64 = 1.0;

/// Arguments of `sift bench ges`.
#[derive(Debug, Args, Clone)]
pub struct GesArgs {
    /// Topology file of the network to start (default: the built-in ges22,
    /// the thesis's 22 brokers).
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// Variant of the topology for the main grid (default: its base links).
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// Variant for the server-hops part (§8.4), or `none` to skip it.
    #[arg(long, value_name = "NAME", default_value = "shortcut")]
    pub shortcut: String,
    /// Broker the publisher is attached to.
    #[arg(long, value_name = "BROKER", default_value = "22")]
    pub publisher: String,
    /// Brokers of the measuring subscribers, comma-separated.
    #[arg(long, value_name = "BROKERS", value_delimiter = ',', default_value = "22,1,10")]
    pub measure_at: Vec<String>,
    /// Background clients on every broker, each with its broker's profile.
    #[arg(long, default_value_t = 5)]
    pub subscribers_per_broker: usize,
    /// Target publish rates in messages per second, comma-separated;
    /// default 1,20,100,500,1000, with `--quick` 50,200.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<u64>,
    /// Event payload sizes in bytes, comma-separated; default
    /// 50,150,250,350,450, with `--quick` 50,450.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Matching rates of the main grid in percent, comma-separated;
    /// default 100,50,25,10, with `--quick` 100,10.
    #[arg(long, value_delimiter = ',')]
    pub matching: Vec<u32>,
    /// Matching rates of the server-hops part; default 50,10, with
    /// `--quick` 10.
    #[arg(long, value_delimiter = ',')]
    pub shortcut_matching: Vec<u32>,
    /// Seconds of publishing per point; default 2, with `--quick` 1.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Events the measuring subscriber receives at least per point.
    #[arg(long, default_value_t = 10)]
    pub samples_min: u64,
    /// Points whose publishing would take longer are left out.
    #[arg(long, default_value_t = 15.0)]
    pub point_seconds_max: f64,
    /// Replication degrees of the persistent clients' streams (§8.3.4:
    /// singular and double replication), comma-separated; 0 skips that
    /// part.
    #[arg(long, value_delimiter = ',', default_values_t = replicated::REPLICATION_FULL)]
    pub replication: Vec<u32>,
    /// Seed of the GES workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl GesArgs {
    fn plan(&self) -> Result<Plan, BenchError> {
        let quick = self.common.quick;
        let spec = GridSpec {
            rates: chosen(&self.rates, &RATES_FULL, &RATES_QUICK, quick),
            sizes: chosen(&self.sizes, &SIZES_FULL, &SIZES_QUICK, quick),
            seconds: self.seconds.unwrap_or(if quick { SECONDS_QUICK } else { SECONDS_FULL }),
            samples_min: self.samples_min,
            point_seconds_max: self.point_seconds_max,
        };
        let mut parts = vec![(self.variant.clone(), chosen(&self.matching, &MATCHING_FULL, &MATCHING_QUICK, quick))];
        if let Some(shortcut) = self.shortcut_variant() {
            if self.variant.as_deref() == Some(shortcut) {
                return Err(BenchError::Usage(format!("--variant and --shortcut are both {shortcut}")));
            }
            let matching = chosen(&self.shortcut_matching, &SHORTCUT_MATCHING_FULL, &SHORTCUT_MATCHING_QUICK, quick);
            parts.push((Some(shortcut.to_string()), matching));
        }
        Plan::new(spec, self.seed, &parts)
    }

    fn shortcut_variant(&self) -> Option<&str> {
        (self.shortcut != NO_SHORTCUT).then_some(self.shortcut.as_str())
    }

    /// The brokers of the measuring subscribers, each once, in the order given.
    fn measuring_brokers(&self) -> Vec<&str> {
        let mut brokers: Vec<&str> = Vec::new();
        for broker in &self.measure_at {
            if !brokers.contains(&broker.as_str()) {
                brokers.push(broker);
            }
        }
        brokers
    }
}

/// The values given on the command line, or else the full or quick default.
fn chosen<T: Clone>(given: &[T], full: &[T], quick_values: &[T], quick: bool) -> Vec<T> {
    match (given, quick) {
        ([], false) => full.to_vec(),
        ([], true) => quick_values.to_vec(),
        (given, _) => given.to_vec(),
    }
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: GesArgs) -> Result<(), BenchError> {
    if args.common.server.is_some() {
        return Err(BenchError::Usage(
            "ges starts its own network of brokers: give --topology FILE, not --server".into(),
        ));
    }
    let plan = args.plan()?;
    let source = TopologySource::from_option(args.topology.as_deref(), GES22_NAME, GES22_TOML);
    let file = source.load()?;
    let mut attached = vec![args.publisher.as_str()];
    attached.extend(args.measuring_brokers());
    TopologyNetwork::require(&file, &source, &attached)?;
    for variant in plan.parts.iter().filter_map(|part| part.variant.as_deref()) {
        if file.variant(variant).is_err() {
            return Err(BenchError::Usage(format!(
                "topology {} has no variant {variant:?} (its variants: {}); name one with --variant or --shortcut, \
                 or skip the server-hops part with --shortcut {NO_SHORTCUT}",
                source.label(),
                if file.variant_names().is_empty() { "none".to_string() } else { file.variant_names().join(", ") }
            )));
        }
    }
    let mut report = Report::new(NAME, TITLE);
    let progress = Progress::new(plan.point_count() as u64, plan.expected_duration(), args.common.json);
    let mut runs = Vec::new();
    for part in &plan.parts {
        let network = TopologyNetwork::start(&file, part.variant.as_deref()).await?;
        let measured = measure_part(&network, part, &args, &progress, &mut runs).await;
        network.shutdown().await;
        measured?;
    }
    drop(progress);
    let network = TopologyNetwork::start(&file, None).await?;
    let epoch = persistent_epoch(&network, &args).await;
    let replication = match epoch.is_ok() {
        true => replicated_clients(&network, &args).await,
        false => Ok(None),
    };
    network.shutdown().await;
    let (epoch, replication) = (epoch?, replication?);
    fill_report(&mut report, &args, &plan, &source, &runs)?;
    report.tables.push(epoch);
    report.tables.extend(replication);
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

/// The §8.3.4 persistent-client epoch on the base network.
async fn persistent_epoch(network: &TopologyNetwork, args: &GesArgs) -> Result<crate::report::Table, BenchError> {
    let measuring = measuring_hops(network, args)?;
    let events = if args.common.quick { persistent::EPOCH_EVENTS_QUICK } else { persistent::EPOCH_EVENTS_FULL };
    persistent::run(network, &args.publisher, &measuring, events, args.seed).await
}

/// The §8.3.4 persistent clients with singular and double replication, on
/// the base network; none with `--replication 0`.
async fn replicated_clients(
    network: &TopologyNetwork,
    args: &GesArgs,
) -> Result<Option<crate::report::Table>, BenchError> {
    let degrees: Vec<u32> = args.replication.iter().copied().filter(|replicas| *replicas > 0).collect();
    if degrees.is_empty() {
        return Ok(None);
    }
    let events = if args.common.quick { replicated::EVENTS_QUICK } else { replicated::EVENTS_FULL };
    replicated::run(network, &args.publisher, &degrees, events, args.seed).await.map(Some)
}

/// Each measuring broker with its server hops from the publisher.
fn measuring_hops(network: &TopologyNetwork, args: &GesArgs) -> Result<Vec<(String, u32)>, BenchError> {
    let mut measuring = Vec::new();
    for broker in args.measuring_brokers() {
        let hops = network.server_hops(&args.publisher, broker)?.ok_or_else(|| {
            BenchError::Usage(format!("broker {broker} cannot be reached from broker {}", args.publisher))
        })?;
        measuring.push((broker.to_string(), hops));
    }
    Ok(measuring)
}

/// Runs every round of `part` on its running network.
async fn measure_part(
    network: &TopologyNetwork,
    part: &Part,
    args: &GesArgs,
    progress: &Progress,
    runs: &mut Vec<PointRun>,
) -> Result<(), BenchError> {
    let measuring = measuring_hops(network, args)?;
    let roles = Roles { publisher: args.publisher.clone(), measuring, per_broker: args.subscribers_per_broker };
    for planned in &part.rounds {
        let workload = GesWorkload::new(args.seed, planned.matching_percent)
            .map_err(|error| BenchError::Usage(format!("matching rate: {error}")))?;
        let mut round = Round::open(network, workload, &roles).await?;
        for point in &planned.points {
            progress.begin(&format!(
                "{} {} % {} msgs/s {} B",
                part.label(),
                planned.matching_percent,
                point.rate,
                point.size
            ));
            match round.run_point(point).await {
                Ok(result) => runs.push(PointRun {
                    variant: part.label().to_string(),
                    matching_percent: planned.matching_percent,
                    point: point.clone(),
                    result,
                }),
                Err(error) => {
                    round.close(network).await?;
                    return Err(error);
                }
            }
            progress.advance();
        }
        round.close(network).await?;
    }
    Ok(())
}

/// Adds the run's parameters, tables, plots and notes to `report`.
fn fill_report(
    report: &mut Report,
    args: &GesArgs,
    plan: &Plan,
    source: &TopologySource,
    runs: &[PointRun],
) -> Result<(), BenchError> {
    let list = |values: &[String]| values.join(",");
    report.parameter("topology", source.label());
    report.parameter("variant", args.variant.as_deref().unwrap_or("base"));
    report.parameter("shortcut", args.shortcut.as_str());
    report.parameter("publisher", args.publisher.as_str());
    report.parameter("measure_at", list(&args.measure_at));
    report.parameter("subscribers_per_broker", args.subscribers_per_broker);
    report.parameter("rates", list(&plan.spec.rates.iter().map(u64::to_string).collect::<Vec<_>>()));
    report.parameter("sizes", list(&plan.spec.sizes.iter().map(usize::to_string).collect::<Vec<_>>()));
    report.parameter("seconds", plan.spec.seconds);
    report.parameter("samples_min", plan.spec.samples_min);
    report.parameter("point_seconds_max", plan.spec.point_seconds_max);
    report.parameter("seed", args.seed);
    report.parameter("replication", list(&args.replication.iter().map(u32::to_string).collect::<Vec<_>>()));
    report.parameter("quick", args.common.quick);
    let latency = tables::latency_table(runs)?;
    report.plots.extend(tables::plots(&latency, runs)?);
    report.tables.push(latency);
    report.tables.push(tables::comparison_table(runs)?);
    report.tables.push(paper::paper_table()?);
    for note in NOTES {
        report.note(note);
    }
    Ok(())
}

const NOTES: [&str; 5] = [
    "Server hops count the brokers an event passes through, the publisher's included (links crossed + 1), as the \
     thesis does (§8.4); it also says \"10 hops\" for its 9, counting the client's own connection.",
    "Latency is measured in this process on one clock from the publisher's send to the subscriber's receipt; \
     throughput is the events a measuring subscriber received over the time from the first publish to its last \
     delivery; publish_rate is the rate achieved.",
    "The thesis ran 22 Sun Ultra-5 machines (one broker each) and JDK 1.2 (§8.1); here every broker and client shares \
     this machine's cores and one process.",
    "Points at rates below 10 msgs/s run at the smallest size only, and a point whose publishing would take longer \
     than point_seconds_max is left out (1 msg/s at 50 % and below); the thesis's own low-rate figures are at 1 msg/s \
     (100 %) and 20 msgs/s (50, 25 and 10 %).",
    "All brokers and clients share this process's scheduler: one event at 100 % costs every delivery (5 per broker \
     plus the measuring subscribers) and every forward on the same cores, and a subscriber's latency includes the \
     work scheduled before its delivery, wherever it is. Subscribers served late in that order (at the publisher's \
     own broker and on broker 21's side of the tree) can read higher than ones more hops away; with \
     --subscribers-per-broker 0 every latency falls to a fraction of a millisecond.",
];
