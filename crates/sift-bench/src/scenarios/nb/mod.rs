//! `sift bench nb`: the transit-delay benchmark of the NaradaBrokering
//! paper (seed 004, §2.1, Fig. 1-4).
//!
//! **The experiment.** A publisher and a subscriber exchange messages of
//! growing payload through a broker ("transit delay corresponds to
//! traversal from publisher-broker-subscriber"); each point of the delay
//! curve is the average of 50 messages and a second curve gives their
//! standard deviation. The paper ran it between the UK, the US and
//! Australia and reports a per-hop latency of about 1 ms up to 4 KB.
//!
//! Here the publisher and subscriber run in this process against chains of
//! 1 to 5 embedded brokers on loopback (publisher on the first, subscriber
//! on the last), paced at a modest rate so that nothing queues; every
//! message carries its send time. All chains are started at once and the
//! rounds of the grid alternate between them, so that drift on a shared
//! machine spreads over every point; a point's figures pool the samples of
//! all its rounds. The delay against payload size comes from each chain,
//! and the delay a broker hop adds from the difference between chains: the
//! slope of the mean delay against the links crossed, by least squares,
//! and each chain's mean less the single broker's, divided by its links.
//! With `--server` the payload curve runs against that broker alone.

mod tables;
mod tds;
mod transfer;

use std::time::Duration;

use clap::Args;

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::load::{throughput, Workload};
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::progress::Progress;
use crate::report::Report;
use crate::stamp::STAMP_BYTES;
use tables::Transit;

/// The scenario's name on the command line.
pub const NAME: &str = "nb";
const TITLE: &str = "NaradaBrokering §2.1: transit delay and its deviation against payload size, and per broker hop";
const NB_TOPIC: &str = "bench.nb";
/// Payload sizes of the full run, 64 B to 64 KB in steps of 4×.
const SIZES_FULL: [usize; 6] = [64, 256, 1024, 4096, 16_384, 65_536];
/// Payload sizes of `--quick`.
const SIZES_QUICK: [usize; 2] = [64, 4096];
/// Chain lengths (brokers) of the full run.
const CHAINS_FULL: [usize; 5] = [1, 2, 3, 4, 5];
/// Chain lengths of `--quick`.
const CHAINS_QUICK: [usize; 2] = [1, 3];
/// Messages per point and round of the full run (the paper averages 50).
const COUNT_FULL: u64 = 500;
/// Messages per point with `--quick`.
const COUNT_QUICK: u64 = 50;
/// Publish rate: low enough that no message waits for another.
const RATE_DEFAULT: u64 = 500;
/// Rounds of the grid of the full run.
const ROUNDS_FULL: u32 = 3;
/// Rounds with `--quick`.
const ROUNDS_QUICK: u32 = 1;
/// A subscriber that receives nothing for this long has all it will get.
const NB_IDLE_END: Duration = Duration::from_secs(3);
/// Rough cost of starting a chain and of connecting a point's clients.
const EXPECTED_SETUP: Duration = Duration::from_millis(300);

/// The experiments of `sift bench nb`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Experiment {
    /// §2.1: transit delay against payload size and per broker hop.
    #[default]
    Transit,
    /// §3.3: jitter before and after the time differential service.
    Tds,
    /// §2.2: transfer time against size and parallel streams.
    Transfer,
}

/// Arguments of `sift bench nb`.
#[derive(Debug, Args, Clone)]
pub struct NbArgs {
    /// Which experiment: `transit` (the default), `tds` or `transfer`.
    #[arg(value_enum, default_value = "transit")]
    pub experiment: Experiment,
    /// Payload sizes in bytes, comma-separated; default
    /// 64,256,1024,4096,16384,65536, with `--quick` 64,4096.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Chain lengths in brokers, comma-separated; default 1,2,3,4,5, with
    /// `--quick` 1,3. Not with `--server` (which measures one broker).
    #[arg(long, value_delimiter = ',')]
    pub chains: Vec<usize>,
    /// Messages per point and round; default 500, with `--quick` 50.
    #[arg(long)]
    pub count: Option<u64>,
    /// Rounds of the whole grid, alternating between the chains; a point
    /// pools the samples of its rounds. Default 3, with `--quick` 1.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Publish rate, messages per second.
    #[arg(long, default_value_t = RATE_DEFAULT)]
    pub rate: u64,
    /// tds: latency Toxiproxy adds towards the subscriber, ms.
    #[arg(long, default_value_t = 30)]
    pub latency_ms: u64,
    /// tds: jitter around that latency, ms.
    #[arg(long, default_value_t = 10)]
    pub jitter_ms: u64,
    /// tds: the playout delay of the TDS, ms.
    #[arg(long, default_value_t = 100)]
    pub max_delay_ms: u64,
    /// tds: seconds of each stream; default 20, with `--quick` 2.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// transfer: sizes in MiB, comma-separated; default 1,16,128,1024, with `--quick` 1,16.
    #[arg(long, value_delimiter = ',')]
    pub mebibytes: Vec<u64>,
    /// transfer: stream counts, comma-separated; default 1,2,4,8,16, with `--quick` 1,4.
    #[arg(long, value_delimiter = ',')]
    pub streams: Vec<usize>,
    /// transfer: also run through a shaped path (a network namespace, `tc tbf`
    /// at this many Mbit/s each way, plus Toxiproxy latency); needs root.
    #[arg(long)]
    pub shaped_mbit: Option<u64>,
    /// transfer: one-way latency Toxiproxy adds on the shaped path, ms.
    #[arg(long, default_value_t = 20)]
    pub shaped_latency_ms: u64,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The points of a run.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    sizes: Vec<usize>,
    chains: Vec<usize>,
    count: u64,
    rate: u64,
    rounds: u32,
}

impl Plan {
    fn from_args(args: &NbArgs) -> Result<Plan, BenchError> {
        let quick = args.common.quick;
        let pick = |given: &[usize], full: &[usize], reduced: &[usize]| match (given, quick) {
            ([], false) => full.to_vec(),
            ([], true) => reduced.to_vec(),
            (given, _) => given.to_vec(),
        };
        let sizes = pick(&args.sizes, &SIZES_FULL, &SIZES_QUICK);
        let mut chains = pick(&args.chains, &CHAINS_FULL, &CHAINS_QUICK);
        if args.common.server.is_some() {
            if !args.chains.is_empty() {
                return Err(BenchError::Usage("--chains starts embedded brokers: not with --server".into()));
            }
            chains = vec![1];
        }
        chains.sort_unstable();
        chains.dedup();
        let count = args.count.unwrap_or(if quick { COUNT_QUICK } else { COUNT_FULL });
        let rounds = args.rounds.unwrap_or(if quick { ROUNDS_QUICK } else { ROUNDS_FULL });
        let zero = chains.contains(&0) || count == 0 || args.rate == 0 || rounds == 0;
        if sizes.is_empty() || chains.is_empty() || zero {
            return Err(BenchError::Usage(
                "--sizes, --chains, --count, --rate and --rounds need values above 0".into(),
            ));
        }
        if let Some(size) = sizes.iter().find(|size| **size < STAMP_BYTES) {
            return Err(BenchError::Usage(format!(
                "--sizes: {size} B is below {STAMP_BYTES} B (the send time rides in the payload)"
            )));
        }
        Ok(Plan { sizes, chains, count, rate: args.rate, rounds })
    }

    fn points(&self) -> usize {
        self.sizes.len() * self.chains.len()
    }

    fn expected_duration(&self) -> Duration {
        let publishing = Duration::from_secs_f64(self.count as f64 / self.rate as f64);
        let steps = self.points() as u32 * self.rounds;
        (publishing + EXPECTED_SETUP) * steps + EXPECTED_SETUP * self.chains.len() as u32
    }

    fn workload(&self, size: usize) -> Workload {
        Workload { rate: Some(self.rate), idle_end: NB_IDLE_END, ..Workload::new(NB_TOPIC, size, self.count) }
    }
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: NbArgs) -> Result<(), BenchError> {
    match args.experiment {
        Experiment::Transit => run_transit(args).await,
        Experiment::Tds => run_tds(args).await,
        Experiment::Transfer => transfer::run(args).await,
    }
}

/// `sift bench nb tds`.
async fn run_tds(args: NbArgs) -> Result<(), BenchError> {
    let plan = tds::TdsPlan {
        latency_ms: args.latency_ms,
        jitter_ms: args.jitter_ms,
        max_delay_ms: args.max_delay_ms,
        seconds: args.seconds.unwrap_or(if args.common.quick { 2.0 } else { 20.0 }),
    };
    if plan.seconds <= 0.0 || plan.max_delay_ms == 0 {
        return Err(BenchError::Usage("--seconds and --max-delay-ms need values above 0".into()));
    }
    let mut report = Report::new(NAME, "NaradaBrokering §3.3: jitter before and after the time differential service");
    report.parameter("latency_ms", plan.latency_ms);
    report.parameter("jitter_ms", plan.jitter_ms);
    report.parameter("max_delay_ms", plan.max_delay_ms);
    report.parameter("seconds", plan.seconds);
    tds::run(&plan, &mut report, args.common.json).await?;
    // The per-message series (hundreds of rows) goes to its CSV and the
    // plots only; the terminal gets the summaries.
    let mut printed = String::new();
    for table in report.tables.iter().filter(|table| table.name != tds::SERIES_TABLE) {
        printed.push_str(&format!("{}\n\n{}\n", table.title, crate::markdown::table_text(table)));
    }
    printed.push_str(&format!("(jitter per message: {}.csv and the plots)\n", tds::SERIES_TABLE));
    finish(&report, &args.common, Printed::Text(printed))?;
    Ok(())
}

/// `sift bench nb` (transit).
async fn run_transit(args: NbArgs) -> Result<(), BenchError> {
    let plan = Plan::from_args(&args)?;
    let mut report = Report::new(NAME, TITLE);
    let mut chains: Vec<(usize, Endpoints)> = Vec::with_capacity(plan.chains.len());
    for &brokers in &plan.chains {
        let started = match &args.common.server {
            Some(address) => Ok(Endpoints::remote(address, None)),
            None => Endpoints::chain(brokers).await,
        };
        match started {
            Ok(endpoints) => chains.push((brokers, endpoints)),
            Err(error) => {
                shutdown(chains).await;
                return Err(error);
            }
        }
    }
    let measured = measure(&chains, &plan, args.common.json).await;
    shutdown(chains).await;
    let transits = measured?;
    let list = |values: &[usize]| values.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    report.parameter("server", args.common.server.as_deref().unwrap_or("embedded"));
    report.parameter("sizes", list(&plan.sizes));
    report.parameter("chains", list(&plan.chains));
    report.parameter("count", plan.count);
    report.parameter("rate", plan.rate);
    report.parameter("rounds", plan.rounds);
    report.parameter("quick", args.common.quick);
    tables::fill_report(&mut report, &transits)?;
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

async fn shutdown(chains: Vec<(usize, Endpoints)>) {
    for (_, endpoints) in chains {
        endpoints.shutdown().await;
    }
}

/// Runs every size through every chain, round after round; returns one
/// [`Transit`] per chain and size, chain by chain, pooling the rounds.
async fn measure(chains: &[(usize, Endpoints)], plan: &Plan, quiet: bool) -> Result<Vec<Transit>, BenchError> {
    let progress = Progress::new((plan.points() as u64) * u64::from(plan.rounds), plan.expected_duration(), quiet);
    let mut transits: Vec<Transit> =
        chains.iter().flat_map(|(brokers, _)| plan.sizes.iter().map(|&size| Transit::new(*brokers, size))).collect();
    for round in 1..=plan.rounds {
        for (size_index, &size) in plan.sizes.iter().enumerate() {
            for (chain_index, (brokers, endpoints)) in chains.iter().enumerate() {
                progress.begin(&format!("{brokers} broker(s), {size} B (round {round})"));
                let result = throughput(endpoints, &plan.workload(size)).await?;
                transits[chain_index * plan.sizes.len() + size_index].add(&result);
                progress.advance();
            }
        }
    }
    Ok(transits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(quick: bool) -> NbArgs {
        NbArgs {
            experiment: Experiment::Transit,
            sizes: Vec::new(),
            chains: Vec::new(),
            count: None,
            rounds: None,
            rate: RATE_DEFAULT,
            latency_ms: 30,
            jitter_ms: 10,
            max_delay_ms: 100,
            seconds: None,
            mebibytes: Vec::new(),
            streams: Vec::new(),
            shaped_mbit: None,
            shaped_latency_ms: 20,
            common: CommonArgs { quick, ..CommonArgs::default() },
        }
    }

    #[test]
    fn the_full_run_spans_sizes_and_chains_and_the_quick_one_is_short() {
        let full = Plan::from_args(&args(false)).expect("plan");
        assert_eq!((full.points(), full.count, full.rounds), (30, COUNT_FULL, ROUNDS_FULL));
        assert!(full.expected_duration() < Duration::from_secs(180), "{:?}", full.expected_duration());
        let quick = Plan::from_args(&args(true)).expect("plan");
        assert_eq!(quick.points(), 4);
        assert!(quick.expected_duration() < Duration::from_secs(10), "{:?}", quick.expected_duration());
        let workload = quick.workload(4096);
        assert_eq!((workload.rate, workload.messages, workload.payload_bytes), (Some(RATE_DEFAULT), COUNT_QUICK, 4096));
    }

    #[test]
    fn a_running_broker_is_measured_alone_and_bad_values_are_refused() {
        let mut remote = args(false);
        remote.common.server = Some("127.0.0.1:7400".into());
        assert_eq!(Plan::from_args(&remote).expect("plan").chains, vec![1]);
        remote.chains = vec![3];
        assert!(Plan::from_args(&remote).is_err());
        let mut small = args(true);
        small.sizes = vec![4];
        assert!(Plan::from_args(&small).is_err());
        let mut zero = args(true);
        zero.chains = vec![0];
        assert!(Plan::from_args(&zero).is_err());
    }
}
