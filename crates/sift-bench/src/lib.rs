//! The benchmark framework behind `sift bench`, and its scenarios.
//!
//! A scenario starts brokers (or uses a running one), drives publishers
//! and subscribers as real clients over the wire, and fills a [`Report`]
//! of tables and plots, which [`output::finish`] writes as `results.json`,
//! `results.csv` (long form), one CSV per table, `results.md` and SVG
//! plots, and prints.
//!
//! # Writing a scenario
//!
//! A scenario is one module under [`scenarios`] with a clap `Args` struct
//! that flattens [`CommonArgs`] (`--server`, `--out`, `--quick`, `--json`)
//! and an async `run`. The `sift` binary gets one line for it in its
//! `bench` subcommand enum, and the smoke test one line to run it with
//! `--quick`.
//!
//! ```no_run
//! use sift_bench::{finish, throughput, BenchError, Cell, CommonArgs, Endpoints, Plot, Printed, Progress};
//! use sift_bench::{Report, Table, Workload};
//!
//! /// Arguments of `sift bench example`.
//! #[derive(Debug, Clone, clap::Args)]
//! pub struct ExampleArgs {
//!     /// Options every scenario takes.
//!     #[command(flatten)]
//!     pub common: CommonArgs,
//! }
//!
//! pub async fn run(args: ExampleArgs) -> Result<(), BenchError> {
//!     let sizes: &[usize] = if args.common.quick { &[64, 4096] } else { &[64, 1024, 16_384] };
//!     let endpoints = Endpoints::from_options(&args.common).await?;
//!     let mut table = Table::new("rates", "Delivered messages per second", &[("size", "B"), ("rate", "msgs/s")]);
//!     let progress = Progress::new(sizes.len() as u64, std::time::Duration::from_secs(10), args.common.json);
//!     for &size in sizes {
//!         progress.begin(&format!("{size} B"));
//!         let result = throughput(&endpoints, &Workload::new("bench.example", size, 10_000)).await?;
//!         table.push_row(vec![Cell::from(size), Cell::from(result.delivered_msgs_per_s())])?;
//!         progress.advance();
//!     }
//!     endpoints.shutdown().await;
//!     let mut report = Report::new("example", "Example: rate against size");
//!     report.parameter("sizes", format!("{sizes:?}"));
//!     report.plots.push(Plot::lines("rate.svg", "Rate against size", &table, "size", "rate")?.log_x(4.0));
//!     report.tables.push(table);
//!     finish(&report, &args.common, Printed::Tables)?;
//!     Ok(())
//! }
//! ```
//!
//! Shut the endpoints down on error paths too (run, then shut down, then
//! `?` the result), as the scenarios here do.
//!
//! # Modules
//!
//! - Results: [`report`] (the model), [`csv`], [`markdown`], [`plot`],
//!   [`output`] (directory, files, printing), [`stats`] (summaries of
//!   samples), [`progress`].
//! - Driving brokers: [`brokers`] (embedded or running brokers),
//!   [`load`] (throughput and one-in-flight runs of a [`Workload`]),
//!   [`publisher`], [`subscriber`], [`stamp`] (send times in payloads),
//!   [`network`] (a whole network from a topology file, `--topology`).

pub mod brokers;
pub mod csv;
pub mod error;
pub mod http_load;
pub mod load;
pub mod machine;
pub mod markdown;
pub mod network;
pub mod options;
pub mod output;
pub mod plot;
pub mod progress;
pub mod publisher;
pub mod report;
pub mod scenarios;
pub mod shaped;
pub mod signing;
pub mod stamp;
pub mod stats;
pub mod subscriber;
pub mod timestamp;
pub mod tls;
pub mod toxiproxy;

pub use brokers::Endpoints;
pub use error::BenchError;
pub use load::{one_in_flight, throughput, RunResult, Workload};
pub use options::CommonArgs;
pub use output::{finish, Printed};
pub use plot::Plot;
pub use progress::Progress;
pub use report::{Cell, Report, Table};
pub use stats::{Samples, Summary};
