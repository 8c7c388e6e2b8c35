//! `sift bench jbi`: the experiments of the AFRL report "Joint Battlespace
//! Infosphere (JBI) Content Based Routing" (seed 000, §6-7, raw data §10),
//! which set a software JBI broker against a hardware XML router.
//!
//! **The workload.** Objects are XML metadata (about 2 KB) and a payload
//! (2 KB, or 25 and 50 KB in §7.3-7.4) of one of three types, `ato`,
//! `basic` and `xmlxpath`; subscriptions are XPath filters over the
//! metadata, each testing a type's fields with the probabilities of
//! Fig. 11 against values drawn as Fig. 12 says
//! ([`sift_core::workload::jbi`]). Publishers and subscribers use the seeds
//! of §10 (1141 and 141-144, 1151-1153 and 151-156, 1171-1174 and 171), so
//! that every match comes from the XPath tests.
//!
//! **The experiments** ([`plan`]), at loading levels 250, 500, 1000 and
//! 2000: a publisher publishes L objects, a subscriber registers L
//! subscriptions per object type it wants.
//! - §7.1 fast/slow: 1 `basic` publisher, 3 subscribers × L; in `slow` the
//!   third one sits behind the emulated 100 Mbit/s link.
//! - §7.2 steady increase: 1 publisher, 2, 3 and 4 subscribers × 1000.
//! - §7.3 payload increase: §7.1's fast setup with 2, 25 and 50 KB payloads.
//! - §7.4 steady increase with payload increase: §7.2 with those payloads.
//! - §7.5 heavy load: 3 publishers (`basic`, `xmlxpath`, `ato`) at once,
//!   2 subscribers × 3 types × L (6 × L subscriptions).
//! - §7.6 saturation: 4 `xmlxpath` publishers × L at once, 1 subscriber × L,
//!   fast or slow.
//! - Table 2 (§4.5.6): §7.1's setup at the highest level in sync and async.
//!
//! **How a run goes** ([`execute`]). Subscribers connect and register their
//! subscriptions (not timed, as in §6); setups that share the same
//! subscriptions (same level and seeds) run on one registration, their
//! rounds back to back. In each round the publishers start together,
//! each publishing one object at a time and waiting for its confirm, as §6
//! prescribes. In sync mode (all of §7) objects are reliable and the
//! confirm waits until every matched subscriber acknowledged
//! (`await=delivered`); in async mode they are best-effort and confirmed
//! once routed. Every subscription's deliveries meet in its subscriber's one
//! receive loop, which counts them and acknowledges them.
//!
//! **The slow subscriber** ([`link`]) is a per-message processing delay in
//! that receive loop that emulates a 100 Mbit/s link: each object is held
//! for (payload + metadata bytes) × 8 / 100e6 s, one after another, before
//! it is acknowledged. Not a throttled socket (the kernel here has no netem,
//! and a traffic shaper is not on every user's machine); it emulates the
//! link, not the slow machine's CPU.
//!
//! **Measures**, as the report's: objects published; objects delivered
//! (one per matching subscription, the report's replication); time from
//! the first publish to the last delivery or confirm (the report timed each
//! subscriber from its first receipt to its last and averaged them; here
//! the first receipt follows the first publish by well under a millisecond);
//! objects delivered per second; milliseconds per delivered object (as
//! §7.5.3 and §7.6.3 compute it). Each setup runs `--rounds` times (§7
//! ran each level three times); tables give the round of median time and
//! the range. The report's own figures ([`seed_figures`]) stand beside
//! Sift's wherever its text or raw data state a number for the point.

mod execute;
mod link;
mod over_http;
mod plan;
mod publisher;
mod seed_figures;
mod subscriber;
mod tables;

#[cfg(test)]
mod tests;

use clap::Args;
use sift_broker::front_end::FrontEnd;

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::plot::Plot;
use crate::progress::Progress;
use crate::report::{Report, Table};

use execute::{run_plan, Measured};
use plan::{Choices, Experiment, Plan, ROUNDS_FULL, ROUNDS_QUICK, SLOW_LINK_MBIT_PER_S_DEFAULT};
use tables::Summary;

/// The scenario's name on the command line.
pub const NAME: &str = "jbi";
const TITLE: &str = "JBI report §6-7: content-based routing of XML objects, six experiments and sync/async";

/// Arguments of `sift bench jbi`.
#[derive(Debug, Args, Clone)]
pub struct JbiArgs {
    /// Experiments to run, comma-separated: fast_slow, steady_increase,
    /// payload_increase, steady_payload, heavy_load, saturation, sync_async;
    /// default all.
    #[arg(long, value_delimiter = ',')]
    pub experiments: Vec<String>,
    /// Loading levels, comma-separated; default 250,500,1000,2000, with
    /// `--quick` 250 (and payloads of 2 and 25 KB only). The steady-increase
    /// experiments run at 1000 when it is one of them, else at the highest;
    /// the sync/async comparison at the highest.
    #[arg(long, value_delimiter = ',')]
    pub levels: Vec<u64>,
    /// Rounds of the whole grid; a point's figure is its round of median
    /// time. Default 3, with `--quick` 1.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Rate of the slow subscriber's emulated link, in Mbit/s.
    #[arg(long, default_value_t = SLOW_LINK_MBIT_PER_S_DEFAULT)]
    pub slow_link_mbit: f64,
    /// How publishers and subscribers reach the broker: `native`, or `http`
    /// as the report ran them (objects POSTed, deliveries POSTed to each
    /// subscriber's listener). With `--server`, `http` needs `--http`.
    #[arg(long, value_enum, default_value_t = ViaArg::Native)]
    pub via: ViaArg,
    /// HTTP address of the broker given by `--server`.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// Options every scenario takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl JbiArgs {
    fn plan(&self) -> Result<Plan, BenchError> {
        if !(self.slow_link_mbit > 0.0 && self.slow_link_mbit.is_finite()) {
            return Err(BenchError::Usage("--slow-link-mbit must be a positive number".into()));
        }
        let quick = self.common.quick;
        let rounds = self.rounds.unwrap_or(if quick { ROUNDS_QUICK } else { ROUNDS_FULL });
        Plan::new(Choices::new(quick, &self.experiments, &self.levels)?, rounds)
    }

    fn link_bits_per_s(&self) -> f64 {
        self.slow_link_mbit * 1e6
    }
}

/// `--via` as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ViaArg {
    /// The native protocol.
    Native,
    /// HTTP: JSON publishes and callback subscriptions.
    Http,
}

/// How the run reaches the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The native protocol.
    Native,
    /// HTTP at this address.
    Http(std::net::SocketAddr),
}

/// HTTP subscriptions (and so in-process sessions) an embedded broker
/// allows for `--via http`: the heavy load at level 2000 holds 12 000.
const HTTP_SUBSCRIPTIONS_MAX: u32 = 50_000;

/// The brokers and, for `--via http`, the HTTP front-end of the run.
async fn open(args: &JbiArgs) -> Result<(Endpoints, Option<sift_http::HttpFrontEnd>, Via), BenchError> {
    if args.via == ViaArg::Http && (args.common.sign || args.common.tls) {
        return Err(BenchError::Usage("--sign and --tls measure the native clients; not with --via http".into()));
    }
    match (args.via, &args.common.server) {
        (ViaArg::Native, _) => Ok((Endpoints::from_options(&args.common).await?, None, Via::Native)),
        (ViaArg::Http, Some(_)) => {
            let http =
                args.http.ok_or_else(|| BenchError::Usage("--via http with --server needs --http ADDR".into()))?;
            Ok((Endpoints::from_options(&args.common).await?, None, Via::Http(http)))
        }
        (ViaArg::Http, None) => {
            let mut config = sift_broker::Config::scratch();
            config.limits.max_connections = HTTP_SUBSCRIPTIONS_MAX + 1_000;
            let http_config =
                sift_http::HttpConfig { max_subscriptions: HTTP_SUBSCRIPTIONS_MAX, ..sift_http::HttpConfig::scratch() };
            let endpoints = Endpoints::single(config).await?;
            let broker = endpoints.embedded().first().ok_or_else(|| BenchError::Usage("no embedded broker".into()))?;
            let front_end = match sift_http::HttpFrontEnd::start(http_config, broker.connector()).await {
                Ok(front_end) => front_end,
                Err(error) => {
                    endpoints.shutdown().await;
                    return Err(BenchError::Usage(error.to_string()));
                }
            };
            let via = Via::Http(front_end.local_addr());
            Ok((endpoints, Some(front_end), via))
        }
    }
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: JbiArgs) -> Result<(), BenchError> {
    let plan = args.plan()?;
    let mut report = Report::new(NAME, TITLE);
    let (endpoints, front_end, via) = open(&args).await?;
    let measured = measure(&endpoints, via, &plan, args.link_bits_per_s(), args.common.json).await;
    if let Some(front_end) = front_end {
        front_end.shutdown().await;
    }
    endpoints.shutdown().await;
    let measured = measured?;
    crate::signing::check()?;
    let summaries: Vec<Option<Summary>> = measured.rounds.iter().map(|rounds| Summary::of(rounds)).collect();
    fill_report(&mut report, &args, &plan, &summaries)?;
    report.tables.push(tables::registration_table(&plan, &measured.registrations)?);
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

/// Runs every setup `plan.rounds` times, with a progress bar.
async fn measure(
    endpoints: &Endpoints,
    via: Via,
    plan: &Plan,
    link_bits_per_s: f64,
    quiet: bool,
) -> Result<Measured, BenchError> {
    let steps = plan.setups.len() as u64 * u64::from(plan.rounds);
    let progress = Progress::new(steps, plan.expected_duration(), quiet);
    run_plan(endpoints, via, plan, link_bits_per_s, &progress).await
}

/// Adds the run's parameters, tables, plots and notes to `report`.
fn fill_report(
    report: &mut Report,
    args: &JbiArgs,
    plan: &Plan,
    summaries: &[Option<Summary>],
) -> Result<(), BenchError> {
    let list = |values: Vec<String>| values.join(",");
    report.parameter("server", args.common.server.as_deref().unwrap_or("embedded"));
    report.parameter("via", if args.via == ViaArg::Http { "http" } else { "native" });
    report.parameter("tls", if args.common.tls { "on" } else { "off" });
    report.parameter("sign", if args.common.sign { "on" } else { "off" });
    report.parameter("experiments", list(plan.choices.experiments.iter().map(|e| e.name().to_string()).collect()));
    report.parameter("levels", list(plan.choices.levels.iter().map(u64::to_string).collect()));
    report.parameter("steady_level", plan.choices.steady_level);
    report.parameter("sync_async_level", plan.choices.sync_async_level);
    report.parameter("payloads_bytes", list(plan.choices.payloads.iter().map(usize::to_string).collect()));
    report.parameter("rounds", plan.rounds);
    report.parameter("slow_link_mbit_per_s", args.slow_link_mbit);
    report.parameter("quick", args.common.quick);
    let chosen = |experiment| plan.choices.experiments.contains(&experiment);
    for experiment in Experiment::ALL.into_iter().filter(|experiment| *experiment != Experiment::SyncAsync) {
        if chosen(experiment) {
            report.tables.push(tables::experiment_table(plan, summaries, experiment)?);
        }
    }
    if chosen(Experiment::FastSlow) {
        report.tables.push(tables::slow_impact_table(plan, summaries, args.link_bits_per_s())?);
    }
    if chosen(Experiment::SyncAsync) {
        report.tables.push(tables::sync_async_table(plan, summaries)?);
    }
    add_plots(report, plan, summaries)?;
    for note in NOTES {
        report.note(note);
    }
    Ok(())
}

/// Objects delivered per second against the level (all experiments that
/// vary it) and against the subscribers (§7.2, §7.4), and Sift beside the
/// report's Fig. 28, 37 and 44.
fn add_plots(report: &mut Report, plan: &Plan, summaries: &[Option<Summary>]) -> Result<(), BenchError> {
    let y_label = "objects delivered per second";
    let add = |report: &mut Report, table: Table, file: &str, title: &str, x: &str, x_label: &str| {
        if table.rows.iter().any(|row| row[2].as_f64().is_some_and(|value| value > 0.0)) {
            let plot = Plot::lines(file, title, &table, x, "objects_delivered_per_s")?
                .series(&["line"])
                .log_y(10.0)
                .labels(x_label, y_label);
            report.plots.push(plot);
            report.tables.push(table);
        }
        Ok::<(), BenchError>(())
    };
    let by_level = tables::by_level_table(plan, summaries)?;
    let title = "Objects delivered per second against loading level (cf. Fig. 17, 28, 37, 44)";
    add(report, by_level, "by-level.svg", title, "level", "loading level (subscriptions per subscriber and type)")?;
    let steady = [Experiment::SteadyPayload, Experiment::SteadyIncrease]
        .into_iter()
        .find(|experiment| plan.choices.experiments.contains(experiment));
    if let Some(experiment) = steady {
        let table = tables::by_subscribers_table(plan, summaries, experiment)?;
        let title = "Objects delivered per second against subscribers (cf. Fig. 21, 33)";
        add(report, table, "by-subscribers.svg", title, "subscribers", "subscribers (each × steady level)")?;
    }
    let figures = [
        (Experiment::PayloadIncrease, "Fig. 28", "fig28-payload-increase.svg"),
        (Experiment::HeavyLoad, "Fig. 37", "fig37-heavy-load.svg"),
        (Experiment::Saturation, "Fig. 44", "fig44-saturation.svg"),
    ];
    for (experiment, figure, file) in figures {
        if plan.choices.experiments.contains(&experiment) {
            let table = tables::beside_seed_table(plan, summaries, experiment, figure)?;
            let title = format!("{} {}: Sift beside the report ({figure})", experiment.section(), experiment.name());
            add(report, table, file, &title, "level", "loading level")?;
        }
    }
    Ok(())
}

const NOTES: [&str; 7] = [
    "Objects delivered counts one delivery per matching subscription (the report's replication); time runs from the \
     first publish to the last delivery or confirm; ms_per_object is time over objects delivered, as §7.5.3 and \
     §7.6.3 compute it.",
    "Publishers publish one object at a time and wait for its confirm (§6). sync: reliable objects, confirmed once \
     every matched subscriber acknowledged (await=delivered), as in all of §7; async: best-effort objects, \
     confirmed once routed.",
    "The slow subscriber emulates the report's 100 Mbit/s machine (§4.3) with a per-message processing delay in its \
     receive loop: each object is held (payload + metadata bytes) × 8 / link rate, one after another, before it is \
     acknowledged. It emulates the link only, not that machine's 500 MHz CPU.",
    "The seeds are the report's (§10), but its generator is not published: Sift's objects and subscriptions follow \
     Fig. 11-12 with their own random streams and integer ranges, so objects delivered differ from the report's \
     (seed_objects_delivered); objects delivered per second is the figure to compare.",
    "The report ran on 2003-era PCs (Pentium IV 2-2.5 GHz, 1 Gbit/s Ethernet, §4.4) with broker, publishers and \
     subscribers on separate machines; here all of them share this machine's CPUs over loopback.",
    "Setups with the same subscriptions (level and seeds) share one registration and run their rounds back to back \
     on it; the registration table gives how long registering and closing them took, outside every round's time \
     (§6: the results ignore the subscription times).",
    "seed_* columns quote the report: times from its raw data (§10) and Tables 4 and 6, objects delivered per second \
     where its text or the tables under Fig. 28, 37 and 44 give a number for the point; empty where it states none.",
];
