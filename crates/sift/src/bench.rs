//! `sift bench`: the command-line front of the scenarios in `sift-bench`.
//! Each scenario is one variant here, with its arguments from its module.

use clap::{Args, Subcommand};
use sift_bench::options::CommonArgs;
use sift_bench::scenarios::{dds, fjm2, ges, http, jbi, nb, persist, pubsub, stomp};

use crate::CliError;

/// Arguments of `sift bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// P publishers → S subscribers on one topic: throughput and latency.
    Pubsub(pubsub::PubsubArgs),
    /// FJM2 thesis §5.4-5.5: throughput in Mbit/s against message size, 1 → 1 and 1 → 2.
    Fjm2(fjm2::Fjm2Args),
    /// Navy slides (NDDS vs SPLICE): latency against size and rate, CPU and bytes per message.
    Dds(dds::DdsArgs),
    /// JBI report §6-7: XPath routing of XML objects, six experiments and sync/async (Table 2).
    Jbi(jbi::JbiArgs),
    /// GES thesis §8.2-8.4: latency and throughput on the 22-broker network, by rate, size, matching rate, hops.
    Ges(ges::GesArgs),
    /// NaradaBrokering §2.1: transit delay and its deviation against payload size, and per broker hop.
    Nb(nb::NbArgs),
    /// Persistent publishing by fsync policy, size, publishers and window; replay and query scans.
    Persist(persist::PersistArgs),
    /// HTTP front-end: publish requests/s, server-sent events/s, the cost of /metrics and the dashboard.
    Http(http::HttpArgs),
    /// STOMP publish and delivery rates, plain and with 1,000 JMS selectors (stompbench's workloads).
    Stomp(stomp::StompArgs),
}

impl Scenario {
    /// The options every scenario shares.
    fn common(&self) -> &CommonArgs {
        match self {
            Scenario::Pubsub(args) => &args.common,
            Scenario::Fjm2(args) => &args.common,
            Scenario::Dds(args) => &args.common,
            Scenario::Jbi(args) => &args.common,
            Scenario::Ges(args) => &args.common,
            Scenario::Nb(args) => &args.common,
            Scenario::Persist(args) => &args.common,
            Scenario::Http(args) => &args.common,
            Scenario::Stomp(args) => &args.common,
        }
    }
}

/// What a run measures, on standard error before it starts: a figure
/// means little without knowing whether it came from a broker in this
/// process or one at `--server`, and from which build.
fn target_line(common: &CommonArgs) -> String {
    let build = if cfg!(debug_assertions) {
        "a debug build: figures are far below a release build's (cargo run --release)"
    } else {
        "a release build"
    };
    match &common.server {
        Some(address) => {
            format!("sift bench: measuring the broker at {address} (--server or SIFT_SERVER), from {build}")
        }
        None => format!(
            "sift bench: measuring brokers embedded in this process, {build}; --server ADDR measures a running one"
        ),
    }
}

/// Runs the chosen scenario.
pub async fn run(args: BenchArgs) -> Result<(), CliError> {
    eprintln!("{}", target_line(args.scenario.common()));
    match args.scenario {
        Scenario::Pubsub(args) => pubsub::run(args).await?,
        Scenario::Fjm2(args) => fjm2::run(args).await?,
        Scenario::Dds(args) => dds::run(args).await?,
        Scenario::Jbi(args) => jbi::run(args).await?,
        Scenario::Ges(args) => ges::run(args).await?,
        Scenario::Nb(args) => nb::run(args).await?,
        Scenario::Persist(args) => persist::run(args).await?,
        Scenario::Http(args) => http::run(args).await?,
        Scenario::Stomp(args) => stomp::run(args).await?,
    }
    Ok(())
}
