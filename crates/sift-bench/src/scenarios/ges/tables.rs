//! The tables and plots of `sift bench ges`: every measurement, Sift beside
//! the thesis's stated figures, and plots with the axes of Fig. 8.3.1-8.3.5
//! and 8.4.2-8.4.7.

use super::paper::{Compare, ThesisStatement, THESIS_STATEMENTS};
use super::plan::Point;
use super::round::{Measured, PointResult};
use crate::error::BenchError;
use crate::plot::Plot;
use crate::report::{Cell, Table};

/// Name of the table of every measurement.
pub const LATENCY_TABLE: &str = "latency";

/// One point as run: where, at which matching rate, and what it measured.
#[derive(Debug, Clone)]
pub struct PointRun {
    /// The part's topology: `base` or the variant.
    pub variant: String,
    /// Matching rate, percent.
    pub matching_percent: u32,
    /// The point.
    pub point: Point,
    /// What it measured.
    pub result: PointResult,
}

/// Columns of the `latency` table, (name, unit).
const LATENCY_COLUMNS: [(&str, &str); 18] = [
    ("variant", ""),
    ("matching_percent", "%"),
    ("publish_rate_target", "msgs/s"),
    ("publish_rate", "msgs/s"),
    ("size", "B"),
    ("broker", ""),
    ("server_hops", ""),
    ("published", "msgs"),
    ("expected", "msgs"),
    ("received", "msgs"),
    ("latency_ms_mean", "ms"),
    ("latency_variance_ms2", "ms²"),
    ("latency_ms_min", "ms"),
    ("latency_ms_max", "ms"),
    ("latency_ms_p50", "ms"),
    ("latency_ms_p99", "ms"),
    ("throughput_msgs_per_s", "msgs/s"),
    ("background_lost", "msgs"),
];

/// Every measuring subscriber at every point.
pub fn latency_table(runs: &[PointRun]) -> Result<Table, BenchError> {
    let title = "Sift: latency and throughput at each measuring subscriber";
    let mut table = Table::new(LATENCY_TABLE, title, &LATENCY_COLUMNS);
    for run in runs {
        for measured in &run.result.measured {
            let latency_ms = measured.latency_ns.summary().map(|summary| summary.scaled(1e-6));
            let background_lost = run.result.background_expected.saturating_sub(run.result.background_received);
            table.push_row(vec![
                run.variant.as_str().into(),
                run.matching_percent.into(),
                run.point.rate.into(),
                run.result.publish_rate_msgs_per_s.into(),
                run.point.size.into(),
                measured.broker.as_str().into(),
                measured.server_hops.into(),
                run.result.published.into(),
                measured.expected.into(),
                measured.received.into(),
                latency_ms.map(|summary| summary.mean).into(),
                latency_ms.and_then(|summary| summary.variance).into(),
                latency_ms.map(|summary| summary.min).into(),
                latency_ms.map(|summary| summary.max).into(),
                latency_ms.map(|summary| summary.p50).into(),
                latency_ms.map(|summary| summary.p99).into(),
                measured.throughput_msgs_per_s.into(),
                background_lost.into(),
            ])?;
        }
    }
    Ok(table)
}

/// Where the figures of §8.3 were measured: the measuring subscriber
/// farthest from the publisher in the first part (node 10, 9 server hops).
#[derive(Debug, Clone, PartialEq)]
pub struct Farthest {
    /// The first part's label.
    pub variant: String,
    /// The broker.
    pub broker: String,
    /// Its server hops.
    pub server_hops: u32,
}

/// The farthest measuring subscriber of the first part's runs.
pub fn farthest(runs: &[PointRun]) -> Option<Farthest> {
    let first = runs.first()?;
    let measured = first.result.measured.iter().max_by_key(|measured| measured.server_hops)?;
    Some(Farthest {
        variant: first.variant.clone(),
        broker: measured.broker.clone(),
        server_hops: measured.server_hops,
    })
}

/// The measurement at `farthest` of the runs of its part at `matching_percent`.
fn at_farthest<'a>(
    runs: &'a [PointRun],
    farthest: &'a Farthest,
    matching_percent: u32,
) -> impl Iterator<Item = (&'a PointRun, &'a Measured)> {
    runs.iter()
        .filter(move |run| run.variant == farthest.variant && run.matching_percent == matching_percent)
        .filter_map(move |run| Some((run, run.result.measured.iter().find(|m| m.broker == farthest.broker)?)))
}

/// Sift's figure for a statement: the nearest point in rate (by ratio) and
/// size, or the peak throughput.
fn sift_figure<'a>(
    runs: &'a [PointRun],
    farthest: &'a Farthest,
    statement: &ThesisStatement,
) -> Option<(&'a PointRun, &'a Measured)> {
    let candidates = at_farthest(runs, farthest, statement.matching_percent);
    match statement.compare {
        Compare::Trend => None,
        Compare::PeakThroughput => {
            candidates.max_by(|left, right| left.1.throughput_msgs_per_s.total_cmp(&right.1.throughput_msgs_per_s))
        }
        Compare::Nearest => {
            let (rate, size) = (statement.publish_rate?, statement.size? as f64);
            let distance = |run: &PointRun| {
                let rate_distance = (run.point.rate as f64 / rate).ln().abs();
                // Ties in size go to the larger event.
                let size_distance = (run.point.size as f64 - size).abs() - run.point.size as f64 * 1e-9;
                (rate_distance, size_distance)
            };
            candidates.min_by(|left, right| {
                let (left, right) = (distance(left.0), distance(right.0));
                left.0.total_cmp(&right.0).then(left.1.total_cmp(&right.1))
            })
        }
    }
}

/// Sift's figures beside each number the thesis states.
pub fn comparison_table(runs: &[PointRun]) -> Result<Table, BenchError> {
    let columns = [
        ("figure", ""),
        ("matching_percent", "%"),
        ("thesis_point", ""),
        ("thesis_latency_ms_mean", "ms"),
        ("thesis_latency_variance_ms2", "ms²"),
        ("thesis_throughput_msgs_per_s", "msgs/s"),
        ("sift_point", ""),
        ("sift_server_hops", ""),
        ("sift_latency_ms_mean", "ms"),
        ("sift_latency_variance_ms2", "ms²"),
        ("sift_throughput_msgs_per_s", "msgs/s"),
    ];
    let title = "Sift beside the thesis's stated figures, at the farthest measuring subscriber";
    let mut table = Table::new("comparison", title, &columns);
    let farthest = farthest(runs);
    for statement in THESIS_STATEMENTS.iter().filter(|statement| statement.compare != Compare::Trend) {
        let sift = farthest.as_ref().and_then(|farthest| sift_figure(runs, farthest, statement));
        let latency_ms = sift.and_then(|(_, measured)| measured.latency_ns.summary()).map(|s| s.scaled(1e-6));
        let thesis_point = match (statement.publish_rate, statement.size) {
            (Some(rate), Some(size)) => Cell::from(format!("⟨{rate} msgs/s, {size} B⟩")),
            _ => Cell::Empty,
        };
        table.push_row(vec![
            statement.figure.into(),
            statement.matching_percent.into(),
            thesis_point,
            statement.latency_ms_mean.into(),
            statement.latency_variance_ms2.into(),
            statement.throughput_msgs_per_s.into(),
            sift.map(|(run, _)| format!("⟨{:.0} msgs/s, {} B⟩", run.result.publish_rate_msgs_per_s, run.point.size))
                .into(),
            sift.map(|(_, measured)| measured.server_hops).into(),
            latency_ms.map(|summary| summary.mean).into(),
            latency_ms.and_then(|summary| summary.variance).into(),
            sift.map(|(_, measured)| measured.throughput_msgs_per_s).into(),
        ])?;
    }
    Ok(table)
}

/// The plots: mean latency against the publish rate, one line per size, per
/// matching rate of the first part (Fig. 8.3.1-8.3.4); throughput against
/// rate at the highest matching rate (Fig. 8.3.5); and for every other
/// part, latency against rate per server-hop count (Fig. 8.4.x).
pub fn plots(table: &Table, runs: &[PointRun]) -> Result<Vec<Plot>, BenchError> {
    let Some(farthest) = farthest(runs) else { return Ok(Vec::new()) };
    let mut plots = Vec::new();
    let first_rates = matching_rates(runs, &farthest.variant);
    let hops = farthest.server_hops;
    for (index, &matching) in first_rates.iter().enumerate() {
        let figure = ["Fig. 8.3.1", "Fig. 8.3.2", "Fig. 8.3.3", "Fig. 8.3.4"].get(index).copied().unwrap_or("Fig. 8.3");
        let title = format!("{figure} · {matching} %: latency at {hops} server hops, by size (B)");
        plots.push(
            latency_plot(&format!("latency-{matching}.svg"), &title, table, &farthest.variant, matching)?
                .series(&["size"])
                .only("broker", farthest.broker.as_str()),
        );
    }
    if let Some(&matching) = first_rates.iter().max() {
        let title = format!("Fig. 8.3.5 · {matching} %: throughput at {hops} server hops, by size (B)");
        let plot = Plot::lines("throughput.svg", &title, table, "publish_rate", "throughput_msgs_per_s")?
            .series(&["size"])
            .only("variant", farthest.variant.as_str())
            .only("matching_percent", matching)
            .only("broker", farthest.broker.as_str())
            .log_x(10.0)
            .labels("publish rate (msgs/s)", "throughput at the subscriber (msgs/s)");
        plots.push(plot);
    }
    plots.extend(hop_plots(table, runs)?);
    Ok(plots)
}

/// Mean latency against the publish rate in `variant` at `matching`.
fn latency_plot(file: &str, title: &str, table: &Table, variant: &str, matching: u32) -> Result<Plot, BenchError> {
    Ok(Plot::lines(file, title, table, "publish_rate", "latency_ms_mean")?
        .only("variant", variant)
        .only("matching_percent", matching)
        .log_x(10.0)
        .labels("publish rate (msgs/s)", "mean latency (ms)"))
}

/// For each later part and matching rate: latency against rate at the
/// largest size, one line per (topology, server hops), the first part's
/// farthest subscriber included; and one plot per measuring subscriber,
/// one line per size (Fig. 8.4.2-8.4.7).
fn hop_plots(table: &Table, runs: &[PointRun]) -> Result<Vec<Plot>, BenchError> {
    let mut plots = Vec::new();
    let mut variants: Vec<&str> = runs.iter().map(|run| run.variant.as_str()).collect();
    variants.dedup();
    for variant in variants.into_iter().skip(1) {
        for matching in matching_rates(runs, variant) {
            let of_part = || runs.iter().filter(|run| run.variant == variant && run.matching_percent == matching);
            let Some(size) = of_part().map(|run| run.point.size).max() else { continue };
            let title = format!("Fig. 8.4 · {matching} %, {size} B: latency by topology, server hops");
            let summary =
                Plot::lines(&format!("hops-{matching}.svg"), &title, table, "publish_rate", "latency_ms_mean")?
                    .series(&["variant", "server_hops"])
                    .only("matching_percent", matching)
                    .only("size", size)
                    .log_x(10.0)
                    .labels("publish rate (msgs/s)", "mean latency (ms)");
            plots.push(summary);
            let Some(first) = of_part().next() else { continue };
            for measured in &first.result.measured {
                let hops = measured.server_hops;
                let title = format!("Fig. 8.4 · {matching} %, {variant}: latency at {hops} hops, by size (B)");
                let file = format!("hops-{matching}-{hops}.svg");
                plots.push(
                    latency_plot(&file, &title, table, variant, matching)?
                        .series(&["size"])
                        .only("broker", measured.broker.as_str()),
                );
            }
        }
    }
    Ok(plots)
}

/// The matching rates run in `variant`, in run order.
fn matching_rates(runs: &[PointRun], variant: &str) -> Vec<u32> {
    let mut rates: Vec<u32> = Vec::new();
    for run in runs.iter().filter(|run| run.variant == variant) {
        if !rates.contains(&run.matching_percent) {
            rates.push(run.matching_percent);
        }
    }
    rates
}
