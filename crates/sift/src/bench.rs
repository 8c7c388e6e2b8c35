//! `sift bench`: the command-line front of the scenarios in `sift-bench`.
//! Each scenario is one variant here, with its arguments from its module.

use clap::{Args, Subcommand};
use sift_bench::scenarios::pubsub;

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
}

/// Runs the chosen scenario.
pub async fn run(args: BenchArgs) -> Result<(), CliError> {
    match args.scenario {
        Scenario::Pubsub(args) => pubsub::run(args).await?,
    }
    Ok(())
}
