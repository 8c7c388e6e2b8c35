//! The report of `sift bench jbi`: one table per experiment with the
//! report's figures beside Sift's, the slow subscriber's impact (Table 3),
//! the sync/async comparison (Table 2), and the tables behind the plots.

use sift_core::workload::jbi::METADATA_BYTES_DEFAULT;

use super::execute::{Registration, RoundResult};
use super::plan::{Experiment, Plan, Row, Setup, STEADY_LEVEL_FULL};
use super::seed_figures::{seed_point, SeedPoint, SEED_POINTS, SLOW_IMPACT_PERCENT, SYNC_ASYNC};
use crate::error::BenchError;
use crate::report::{Cell, Table};

/// What the rounds of one setup measured: the round of median time, and
/// the range of the times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The round whose time is the median (the lower one for an even count).
    pub median: RoundResult,
    /// Shortest round.
    pub time_s_min: f64,
    /// Longest round.
    pub time_s_max: f64,
}

impl Summary {
    /// The summary of a setup's rounds; `None` when none ran.
    pub fn of(rounds: &[RoundResult]) -> Option<Summary> {
        let mut sorted = rounds.to_vec();
        sorted.sort_by(|left, right| left.time_s.total_cmp(&right.time_s));
        let median = *sorted.get(sorted.len().checked_sub(1)? / 2)?;
        Some(Summary { median, time_s_min: sorted.first()?.time_s, time_s_max: sorted.last()?.time_s })
    }
}

/// Columns of an experiment's table, (name, unit).
const EXPERIMENT_COLUMNS: [(&str, &str); 21] = [
    ("variant", ""),
    ("level", ""),
    ("publishers", ""),
    ("subscribers", ""),
    ("subscriptions", ""),
    ("payload", "KB"),
    ("objects_published", "objects"),
    ("objects_delivered", "objects"),
    ("time_s", "s"),
    ("time_s_min", "s"),
    ("time_s_max", "s"),
    ("objects_delivered_per_s", "objects/s"),
    ("ms_per_object", "ms"),
    ("lost", "objects"),
    ("incomplete", "objects"),
    ("seed_objects_delivered", "objects"),
    ("seed_software_time_s", "s"),
    ("seed_hardware_time_s", "s"),
    ("seed_software_per_s", "objects/s"),
    ("seed_hardware_per_s", "objects/s"),
    ("seed_source", ""),
];

/// The payload in kilobytes: whole when it is.
fn payload_cell(bytes: usize) -> Cell {
    if bytes.is_multiple_of(1024) {
        Cell::from(bytes / 1024)
    } else {
        Cell::from(bytes as f64 / 1024.0)
    }
}

/// The report's point for a row, where it states one: steady-increase rows
/// are points of 1000 × N only, the others of their level.
fn seed_for(row: &Row, setup: &Setup) -> Option<&'static SeedPoint> {
    if row.experiment.varies_subscribers() {
        let steady = setup.level == STEADY_LEVEL_FULL;
        steady.then(|| seed_point(row.experiment, &row.variant, setup.subscribers.len() as u64)).flatten()
    } else {
        seed_point(row.experiment, &row.variant, setup.level)
    }
}

/// The table of one experiment.
pub fn experiment_table(
    plan: &Plan,
    summaries: &[Option<Summary>],
    experiment: Experiment,
) -> Result<Table, BenchError> {
    let title = format!("{} {}: Sift beside the report", experiment.section(), experiment.name());
    let mut table = Table::new(experiment.name(), &title, &EXPERIMENT_COLUMNS);
    for row in plan.rows_of(experiment) {
        let setup = &plan.setups[row.setup];
        let Some(summary) = summaries[row.setup] else { continue };
        let round = summary.median;
        let seed = seed_for(row, setup);
        let seconds = |ms: Option<f64>| ms.map(|ms| ms / 1e3);
        table.push_row(vec![
            row.variant.as_str().into(),
            setup.level.into(),
            setup.publishers.len().into(),
            setup.subscribers.len().into(),
            setup.subscriptions().into(),
            payload_cell(setup.payload_bytes),
            round.published.into(),
            round.delivered.into(),
            round.time_s.into(),
            summary.time_s_min.into(),
            summary.time_s_max.into(),
            round.delivered_per_s().into(),
            round.ms_per_object().into(),
            round.lost().into(),
            round.incomplete.into(),
            seed.and_then(|seed| seed.objects_delivered).into(),
            seconds(seed.and_then(|seed| seed.software_time_ms)).into(),
            seconds(seed.and_then(|seed| seed.hardware_time_ms)).into(),
            seed.and_then(|seed| seed.software_per_s).into(),
            seed.and_then(|seed| seed.hardware_per_s).into(),
            seed.map(|seed| seed.source).into(),
        ])?;
    }
    Ok(table)
}

/// The summary of the row of `experiment` and `variant` at `level`.
fn summary_at(
    plan: &Plan,
    summaries: &[Option<Summary>],
    experiment: Experiment,
    variant: &str,
    level: u64,
) -> Option<Summary> {
    plan.rows_of(experiment)
        .find(|row| row.variant == variant && plan.setups[row.setup].level == level)
        .and_then(|row| summaries[row.setup])
}

/// How much longer the fast/slow runs took with the slow subscriber, beside
/// Table 3, and how long the slow link itself was busy.
pub fn slow_impact_table(
    plan: &Plan,
    summaries: &[Option<Summary>],
    link_bits_per_s: f64,
) -> Result<Table, BenchError> {
    let columns = [
        ("level", ""),
        ("fast_time_s", "s"),
        ("slow_time_s", "s"),
        ("slow_impact_percent", "%"),
        ("slow_deliveries", "objects"),
        ("slow_link_busy_s", "s"),
        ("seed_hardware_impact_percent", "%"),
        ("seed_software_impact_percent", "%"),
    ];
    let title = "§7.1: impact of the slow subscriber, beside Table 3";
    let mut table = Table::new("slow_impact", title, &columns);
    for &level in &plan.choices.levels {
        let at = |variant| summary_at(plan, summaries, Experiment::FastSlow, variant, level);
        let (Some(fast), Some(slow)) = (at("fast"), at("slow")) else { continue };
        let (fast, slow) = (fast.median, slow.median);
        let payload = plan.choices.payloads.first().copied().unwrap_or_default();
        let object_bits = ((payload + METADATA_BYTES_DEFAULT) * 8) as f64;
        let seed = SLOW_IMPACT_PERCENT.iter().find(|(seed_level, _, _)| *seed_level == level);
        table.push_row(vec![
            level.into(),
            fast.time_s.into(),
            slow.time_s.into(),
            ((slow.time_s / fast.time_s - 1.0) * 100.0).into(),
            slow.delivered_slow.into(),
            (slow.delivered_slow as f64 * object_bits / link_bits_per_s).into(),
            seed.map(|(_, hardware, _)| *hardware).into(),
            seed.map(|(_, _, software)| *software).into(),
        ])?;
    }
    Ok(table)
}

/// Sift's sync and async runs beside Table 2.
pub fn sync_async_table(plan: &Plan, summaries: &[Option<Summary>]) -> Result<Table, BenchError> {
    let columns = [
        ("system", ""),
        ("method", ""),
        ("level", ""),
        ("objects_published", "objects"),
        ("objects_owed", "objects"),
        ("objects_received", "objects"),
        ("time_s", "s"),
        ("lost", "objects"),
        ("lost_percent", "%"),
    ];
    let title = "§4.5.6: acknowledged (sync) against best-effort (async) delivery, beside Table 2";
    let mut table = Table::new("sync_async_comparison", title, &columns);
    for row in plan.rows_of(Experiment::SyncAsync) {
        let Some(summary) = summaries[row.setup] else { continue };
        let round = summary.median;
        let lost_percent = if round.owed == 0 { 0.0 } else { round.lost() as f64 * 100.0 / round.owed as f64 };
        table.push_row(vec![
            "Sift".into(),
            row.variant.as_str().into(),
            plan.setups[row.setup].level.into(),
            round.published.into(),
            round.owed.into(),
            round.delivered.into(),
            round.time_s.into(),
            round.lost().into(),
            lost_percent.into(),
        ])?;
    }
    for seed in &SYNC_ASYNC {
        table.push_row(vec![
            "report (Table 2)".into(),
            seed.method.into(),
            Cell::Empty,
            Cell::Empty,
            Cell::Empty,
            seed.objects_received.into(),
            (seed.time_ms / 1e3).into(),
            Cell::Empty,
            seed.loss_percent.into(),
        ])?;
    }
    Ok(table)
}

/// Columns of the plots' tables: a line, its x, and objects delivered per second.
fn line_table(name: &str, title: &str, x: &str) -> Table {
    Table::new(name, title, &[("line", ""), (x, ""), ("objects_delivered_per_s", "objects/s")])
}

/// Objects delivered per second against the loading level, one line per
/// experiment and variant (a setup two experiments share appears once).
pub fn by_level_table(plan: &Plan, summaries: &[Option<Summary>]) -> Result<Table, BenchError> {
    let title = "Sift: objects delivered per second against loading level";
    let mut table = line_table("by_level", title, "level");
    let mut shown = Vec::new();
    for row in &plan.rows {
        let level_varies = !row.experiment.varies_subscribers() && row.experiment != Experiment::SyncAsync;
        if !level_varies || shown.contains(&row.setup) {
            continue;
        }
        let Some(summary) = summaries[row.setup] else { continue };
        shown.push(row.setup);
        let line = format!("{} {} {}", row.experiment.section(), row.experiment.name(), row.variant);
        let setup = &plan.setups[row.setup];
        table.push_row(vec![line.into(), setup.level.into(), summary.median.delivered_per_s().into()])?;
    }
    Ok(table)
}

/// Sift's lines of one experiment against the level beside the report's
/// hardware and software lines, for the report's figure `figure`.
pub fn beside_seed_table(
    plan: &Plan,
    summaries: &[Option<Summary>],
    experiment: Experiment,
    figure: &str,
) -> Result<Table, BenchError> {
    let name = format!("{}_beside_report", experiment.name());
    let title = format!("{} {}: Sift beside the report ({figure})", experiment.section(), experiment.name());
    let mut table = line_table(&name, &title, "level");
    for row in plan.rows_of(experiment) {
        let Some(summary) = summaries[row.setup] else { continue };
        let level = plan.setups[row.setup].level;
        table.push_row(vec![
            format!("Sift {}", row.variant).into(),
            level.into(),
            summary.median.delivered_per_s().into(),
        ])?;
    }
    for seed in SEED_POINTS.iter().filter(|seed| seed.experiment == experiment) {
        for (system, per_s) in [("hardware", seed.hardware_per_s), ("software", seed.software_per_s)] {
            if per_s.is_some() {
                table.push_row(vec![
                    format!("report {system} {}", seed.variant).into(),
                    seed.x.into(),
                    per_s.into(),
                ])?;
            }
        }
    }
    Ok(table)
}

/// Objects delivered per second against the number of subscribers, one
/// line per payload (§7.2, §7.4).
pub fn by_subscribers_table(
    plan: &Plan,
    summaries: &[Option<Summary>],
    experiment: Experiment,
) -> Result<Table, BenchError> {
    let title = "Sift: objects delivered per second against subscribers at the steady level";
    let mut table = line_table("by_subscribers", title, "subscribers");
    for row in plan.rows_of(experiment) {
        let Some(summary) = summaries[row.setup] else { continue };
        let subscribers = plan.setups[row.setup].subscribers.len();
        table.push_row(vec![
            row.variant.as_str().into(),
            subscribers.into(),
            summary.median.delivered_per_s().into(),
        ])?;
    }
    Ok(table)
}

/// How long each group of setups took to register its subscriptions and
/// to close them (not part of any round's time, as in §6).
pub fn registration_table(plan: &Plan, registrations: &[Registration]) -> Result<Table, BenchError> {
    let columns = [
        ("level", ""),
        ("subscribers", ""),
        ("subscriptions", ""),
        ("setups", ""),
        ("register_s", "s"),
        ("register_us_per_subscription", "µs"),
        ("close_s", "s"),
    ];
    let title = "Sift: registering and closing the subscriptions each group of setups shares (untimed in the rounds)";
    let mut table = Table::new("registration", title, &columns);
    let groups = plan.groups();
    for registration in registrations {
        let setup = &plan.setups[registration.setup];
        let shared = groups.iter().find(|group| group.contains(&registration.setup)).map_or(1, Vec::len);
        let subscriptions = setup.subscriptions();
        table.push_row(vec![
            setup.level.into(),
            setup.subscribers.len().into(),
            subscriptions.into(),
            shared.into(),
            registration.register_s.into(),
            (registration.register_s * 1e6 / subscriptions.max(1) as f64).into(),
            registration.close_s.into(),
        ])?;
    }
    Ok(table)
}
