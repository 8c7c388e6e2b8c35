//! `sift bench dds`: the publish-subscribe benchmark of the US Navy slides
//! "Open Architecture Publish-Subscribe Benchmarking" (seed 003), which
//! set RTI NDDS 3.0m, a forerunner of DDS, against SPLICE 2.
//!
//! **The experiment.** Publishers send messages of a fixed size at a fixed
//! rate; subscribers take them. The slides plot average and maximum
//! latency against message size and rate (10 Hz up to 2000 Hz), with one
//! publisher to one subscriber, five publishers to one subscriber, and one
//! publisher to five subscribers; the CPU use of the publisher and
//! subscriber processes; and the bytes each message costs on the wire
//! beyond its data. Here the grid is fans × qualities × sizes (200 B, the
//! slides' small message, to 16 KB) × rates (10 to 2000 Hz per publisher),
//! against one broker on loopback.
//!
//! **Qualities.** The slides contrast NDDS's reliable FIFO delivery (every
//! issue delivered; an undersized queue leads to flow control) with
//! SPLICE's "most recent issue overwrites the previous". In Sift the
//! delivery mode is DDS's reliability and the subscription's queue policy
//! its history: `block` keeps every message (keep-all; for reliable
//! messages a full queue holds the publisher back, NDDS's behaviour), and
//! `keep-last:1` lets a newer message overwrite one still queued (SPLICE's).
//! The grid crosses best-effort and reliable with both policies.
//!
//! **Latency** is from the send stamp each publisher writes into the
//! payload as the message leaves to the subscriber's reading of the same
//! clock when it takes the delivery (all clients share the process, where
//! the slides synchronised hosts with NTP). Each publisher sends one
//! message per period, sleeping its thread to the exact time rather than
//! on tokio's millisecond timer: with millisecond timers, messages due
//! within the same millisecond would leave together, and `keep-last:1`
//! would overwrite all but the last of each such burst (`clients.rs`).
//! Several publishers are offset from each other by a fraction of a
//! period, as independent hosts would be. A point ends when every
//! subscriber has every message or has received nothing for a while;
//! what did not arrive the broker counts as dropped by the policy.
//!
//! **CPU time of threads, not processes.** The slides measured the CPU use
//! of publisher and subscriber processes. Here each publisher and each
//! subscriber is an OS thread of its own running a current-thread tokio
//! runtime, so that everything it does (its code, its connection's reader
//! and writer tasks, the system calls they make) runs on that thread and
//! nothing else does; the thread's CPU time (`/proc/thread-self`, see
//! `cpu.rs`) from the start of the run to its end, divided by its messages,
//! is the per-message cost a process of its own would show, without the
//! cost of starting processes and passing their results back. The broker
//! runs in the same process on the async runtime's threads; its figure is
//! the process's CPU time less the client threads'.
//!
//! **Bytes on the wire** come from the embedded broker's counters of bytes
//! read from and written to clients during the run (handshakes and the
//! closing frames fall outside it, the publishers' final pings are taken
//! out). Per message published, less the payload, is the publish side's
//! overhead (the PUBLISH frame's header, topic and message fields; for
//! reliable messages also the subscribers' ACKs); per delivery, less the
//! payload, the delivery side's (the DELIVER frame; for reliable messages
//! also the publishers' CONFIRMs). TCP/IP headers are not counted: on
//! loopback they depend on how segments happen to be filled. With
//! `--server` the broker is not in the process and these columns and the
//! broker's CPU time stay empty.

mod clients;
mod plan;
mod point;
mod seed;
mod tables;
mod threads;

use clap::Args;

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::progress::Progress;
use crate::report::Report;
use plan::Plan;
use point::{run_point, Measured};

/// The scenario's name on the command line.
pub const NAME: &str = "dds";
const TITLE: &str = "Navy slides (seed 003, NDDS vs SPLICE): latency, CPU and overhead against size and rate";

/// Arguments of `sift bench dds`.
#[derive(Debug, Args, Clone)]
pub struct DdsArgs {
    /// Message (payload) sizes in bytes, comma-separated; default
    /// 200,1024,4096,16384, with `--quick` 200,4096.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Publish rates in messages per second of each publisher,
    /// comma-separated; default 10,100,500,1000,2000, with `--quick` 100,1000.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<u64>,
    /// Publishers:subscribers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1:1,5:1,1:5")]
    pub fans: Vec<String>,
    /// Delivery modes (DDS reliability), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "best-effort,reliable")]
    pub modes: Vec<String>,
    /// Subscription queue policies (DDS history), comma-separated: block
    /// keeps all, keep-last:N keeps the newest N, drop-new drops arrivals.
    #[arg(long, value_delimiter = ',', default_value = "block,keep-last:1")]
    pub policies: Vec<String>,
    /// Seconds each point publishes for (each publisher sends at least 20
    /// messages); default 1.5, with `--quick` 0.25.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: DdsArgs) -> Result<(), BenchError> {
    let plan = Plan::from_args(&args)?;
    let mut report = Report::new(NAME, TITLE);
    let endpoints = Endpoints::from_options(&args.common).await?;
    let measured = measure(&endpoints, &plan, args.common.json).await;
    endpoints.shutdown().await;
    fill_report(&mut report, &args, &plan, &measured?)?;
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

/// Runs every point once, in the plan's order.
async fn measure(endpoints: &Endpoints, plan: &Plan, quiet: bool) -> Result<Vec<Measured>, BenchError> {
    let progress = Progress::new(plan.points.len() as u64, plan.expected_duration(), quiet);
    let mut measured = Vec::with_capacity(plan.points.len());
    for point in &plan.points {
        progress.begin(&point.label());
        measured.push(run_point(endpoints, point).await?);
        progress.advance();
    }
    Ok(measured)
}

/// Adds the run's parameters, tables, plots and notes to `report`.
fn fill_report(report: &mut Report, args: &DdsArgs, plan: &Plan, measured: &[Measured]) -> Result<(), BenchError> {
    let list = |values: Vec<String>| values.join(",");
    report.parameter("server", args.common.server.as_deref().unwrap_or("embedded"));
    report.parameter("sizes", list(plan.sizes.iter().map(usize::to_string).collect()));
    report.parameter("rates_hz", list(plan.rates_hz.iter().map(u64::to_string).collect()));
    report.parameter("fans", list(plan.fans.iter().map(|fan| fan.label()).collect()));
    report.parameter("qualities", list(plan.qualities.iter().map(|qos| qos.label()).collect()));
    report.parameter("seconds_per_point", plan.seconds);
    report.parameter("quick", args.common.quick);
    let points = tables::points_table(plan, measured)?;
    report.tables.push(points.clone());
    tables::add_figures(report, plan, &points)?;
    report.tables.push(seed::seed_table(plan, measured)?);
    for note in NOTES {
        report.note(note);
    }
    Ok(())
}

const NOTES: [&str; 6] = [
    "The slides' results are charts; their text gives no latency, CPU or overhead figure, so the seed table sets \
     Sift's figures beside the settings the text names (200 B at 10 Hz; 2000 Hz) and quotes no number of theirs.",
    "qos is the delivery mode with the queue policy in DDS's words: keep-all is Sift's block policy (reliable \
     messages meeting a full queue hold the publisher back, as NDDS's reliable FIFO), keep-last:1 lets a newer \
     message overwrite a queued one (SPLICE's most recent issue); dropped counts what the broker overwrote or dropped.",
    "rate_hz is per publisher (5 → 1 delivers five times as many messages to its subscriber); publish_rate_hz is \
     the rate the publishers achieved. Latency is from the send stamp to the subscriber taking the message, one clock.",
    "CPU time is per thread: each publisher and subscriber runs on its own OS thread with a current-thread runtime \
     (its connection's tasks included), read from /proc/thread-self; publisher figures are per message published, \
     subscriber figures per delivery, broker figures (the rest of the process) per message published.",
    "Overheads are bytes the broker read (publish side) or wrote (delivery side) per message, less the payload, \
     TCP/IP headers excluded; reliable rows include the ACKs (publish side) and CONFIRMs (delivery side).",
    "The slides ran on Sun Ultra2 hosts (dual 200 MHz UltraSparc) over Fast Ethernet with multicast and real-time \
     priorities; here broker and clients share this machine's CPUs over loopback TCP at normal priority.",
];
