//! The report of `sift bench dds`: the `points` table of every figure at
//! every point, smaller tables cut from it for the plots (as the slides'
//! figures: against size at the highest rate, against rate at the smallest
//! size), and the slides' statements beside Sift's figures.

use super::plan::{Fan, Plan, Point};
use super::point::Measured;
use crate::error::BenchError;
use crate::plot::Plot;
use crate::report::{Cell, Report, Table};

/// Columns of the `points` table, (name, unit).
const POINT_COLUMNS: [(&str, &str); 22] = [
    ("fan", ""),
    ("publishers", ""),
    ("subscribers", ""),
    ("qos", ""),
    ("mode", ""),
    ("policy", ""),
    ("size", "B"),
    ("rate_hz", "Hz"),
    ("publish_rate_hz", "Hz"),
    ("published", "msgs"),
    ("delivered", "msgs"),
    ("lost", "msgs"),
    ("dropped", "msgs"),
    ("latency_us_mean", "µs"),
    ("latency_us_p50", "µs"),
    ("latency_us_p99", "µs"),
    ("latency_us_max", "µs"),
    ("publisher_cpu_us_per_msg", "µs"),
    ("subscriber_cpu_us_per_msg", "µs"),
    ("broker_cpu_us_per_msg", "µs"),
    ("publish_overhead_bytes_per_msg", "B"),
    ("delivery_overhead_bytes_per_msg", "B"),
];

/// Columns the plot tables keep of `points`.
const FIGURE_COLUMNS: [&str; 10] = [
    "qos",
    "size",
    "rate_hz",
    "latency_us_mean",
    "latency_us_p99",
    "latency_us_max",
    "publisher_cpu_us_per_msg",
    "subscriber_cpu_us_per_msg",
    "publish_overhead_bytes_per_msg",
    "delivery_overhead_bytes_per_msg",
];

/// Nanoseconds to microseconds.
const NS_TO_US: f64 = 1e-3;

/// The row of `points` for one point.
fn point_row(point: &Point, measured: &Measured) -> Vec<Cell> {
    let latency = measured.latency_ns.summary().map(|summary| summary.scaled(NS_TO_US));
    let per = |nanos: Option<u64>, count: u64| {
        nanos.filter(|_| count > 0).map(|nanos| nanos as f64 * NS_TO_US / count as f64)
    };
    let overhead = |bytes: Option<u64>, count: u64| {
        bytes.filter(|_| count > 0).map(|bytes| bytes as f64 / count as f64 - point.size as f64)
    };
    let broker = measured.broker;
    vec![
        point.fan.label().into(),
        point.fan.publishers.into(),
        point.fan.subscribers.into(),
        point.qos.label().into(),
        point.qos.mode.name().into(),
        point.qos.policy.to_string().into(),
        point.size.into(),
        point.rate_hz.into(),
        measured.publish_rate_hz.into(),
        measured.published.into(),
        measured.delivered.into(),
        point.deliveries().saturating_sub(measured.delivered).into(),
        broker.map(|counts| counts.dropped).into(),
        latency.map(|summary| summary.mean).into(),
        latency.map(|summary| summary.p50).into(),
        latency.map(|summary| summary.p99).into(),
        latency.map(|summary| summary.max).into(),
        per(measured.publisher_cpu_ns, measured.published).into(),
        per(measured.subscriber_cpu_ns, measured.delivered).into(),
        per(measured.broker_cpu_ns(), measured.published).into(),
        overhead(broker.map(|counts| counts.bytes_received), measured.published).into(),
        overhead(broker.map(|counts| counts.bytes_sent), measured.delivered).into(),
    ]
}

/// The `points` table: every figure of every point.
pub fn points_table(plan: &Plan, measured: &[Measured]) -> Result<Table, BenchError> {
    let title = "Sift: latency, CPU time and bytes on the wire per message at every point, loopback";
    let mut table = Table::new("points", title, &POINT_COLUMNS);
    for (point, measured) in plan.points.iter().zip(measured) {
        table.push_row(point_row(point, measured))?;
    }
    Ok(table)
}

/// A plot table: the [`FIGURE_COLUMNS`] of the rows of `points` that `keep` picks.
fn figure_table(points: &Table, name: &str, title: &str, keep: impl Fn(&[Cell]) -> bool) -> Result<Table, BenchError> {
    let indices: Vec<usize> = FIGURE_COLUMNS.iter().filter_map(|column| points.column_index(column)).collect();
    let columns: Vec<(&str, &str)> = indices
        .iter()
        .map(|&index| (points.columns[index].name.as_str(), points.columns[index].unit.as_str()))
        .collect();
    let mut table = Table::new(name, title, &columns);
    for row in points.rows.iter().filter(|row| keep(row)) {
        table.push_row(indices.iter().map(|&index| row[index].clone()).collect())?;
    }
    Ok(table)
}

/// `1to5`, for table and file names.
fn fan_key(fan: Fan) -> String {
    format!("{}to{}", fan.publishers, fan.subscribers)
}

/// An x axis of the figures.
struct Axis {
    /// Column of `points` it plots.
    column: &'static str,
    /// Word for file names.
    word: &'static str,
    /// What it is, for titles.
    name: &'static str,
    /// Axis label, with the unit.
    label: &'static str,
    /// Base of its logarithmic scale.
    log_base: f64,
}

const SIZE_AXIS: Axis =
    Axis { column: "size", word: "size", name: "message size", label: "message size (B)", log_base: 4.0 };
const RATE_AXIS: Axis = Axis {
    column: "rate_hz",
    word: "rate",
    name: "publish rate",
    label: "publish rate per publisher (Hz)",
    log_base: 10.0,
};

/// Plots of CPU time and overhead against size: file stem, column, title, y label.
const SIZE_PLOTS: [(&str, &str, &str, &str); 4] = [
    ("cpu-publisher", "publisher_cpu_us_per_msg", "Publisher CPU time per message", "CPU time per message (µs)"),
    ("cpu-subscriber", "subscriber_cpu_us_per_msg", "Subscriber CPU time per delivery", "CPU time per delivery (µs)"),
    (
        "overhead-publish",
        "publish_overhead_bytes_per_msg",
        "Overhead per message published",
        "bytes beyond the payload (B)",
    ),
    ("overhead-delivery", "delivery_overhead_bytes_per_msg", "Overhead per delivery", "bytes beyond the payload (B)"),
];

/// Adds the plot tables and their plots: for every fan, average and
/// maximum latency against size at the highest rate; for the first fan
/// also latency against rate at the smallest size, and CPU time and
/// overhead against size.
pub fn add_figures(report: &mut Report, plan: &Plan, points: &Table) -> Result<(), BenchError> {
    let (Some(&rate_hz), Some(&size)) = (plan.rates_hz.iter().max(), plan.sizes.iter().min()) else {
        return Ok(());
    };
    let column = |name: &str| points.column_index(name).unwrap_or(usize::MAX);
    let (fan_column, size_column, rate_column) = (column("fan"), column("size"), column("rate_hz"));
    for (index, fan) in plan.fans.iter().enumerate() {
        let (key, label) = (fan_key(*fan), Cell::from(fan.label()));
        let at_rate = format!("{}, {rate_hz} Hz", fan.label());
        let by_size = figure_table(
            points,
            &format!("by_size_{key}"),
            &format!("{at_rate} per publisher: against message size"),
            |row| row.get(fan_column) == Some(&label) && row.get(rate_column) == Some(&Cell::from(rate_hz)),
        )?;
        push_drawable(report, &by_size, latency_plot(&by_size, &SIZE_AXIS, false, &key, &at_rate)?);
        push_drawable(report, &by_size, latency_plot(&by_size, &SIZE_AXIS, true, &key, &at_rate)?);
        if index == 0 {
            let at_size = format!("{}, {size} B", fan.label());
            let by_rate =
                figure_table(points, &format!("by_rate_{key}"), &format!("{at_size}: against publish rate"), |row| {
                    row.get(fan_column) == Some(&label) && row.get(size_column) == Some(&Cell::from(size))
                })?;
            push_drawable(report, &by_rate, latency_plot(&by_rate, &RATE_AXIS, false, &key, &at_size)?);
            push_drawable(report, &by_rate, latency_plot(&by_rate, &RATE_AXIS, true, &key, &at_size)?);
            for (file, y, title, y_label) in SIZE_PLOTS {
                let plot =
                    Plot::lines(&format!("{file}-{key}.svg"), &format!("{title} ({at_rate})"), &by_size, "size", y)?
                        .series(&["qos"])
                        .log_x(SIZE_AXIS.log_base)
                        .labels(SIZE_AXIS.label, y_label);
                push_drawable(report, &by_size, plot);
            }
            report.tables.push(by_rate);
        }
        report.tables.push(by_size);
    }
    Ok(())
}

/// Adds `plot` unless `table` holds nothing it could draw: against a
/// broker elsewhere there are no byte counts, and where nothing arrived
/// there is no latency.
fn push_drawable(report: &mut Report, table: &Table, plot: Plot) {
    let y = table.column_index(&plot.y);
    let drawable = y.is_some_and(|y| table.rows.iter().any(|row| row[y].as_f64().is_some_and(|value| value > 0.0)));
    if drawable {
        report.plots.push(plot);
    }
}

/// Average or (with `maximum`) maximum latency against `axis`, one line per quality.
fn latency_plot(table: &Table, axis: &Axis, maximum: bool, key: &str, what: &str) -> Result<Plot, BenchError> {
    let (statistic, name) = if maximum { ("max", "Maximum") } else { ("mean", "Average") };
    let plot = Plot::lines(
        &format!("latency-{statistic}-{}-{key}.svg", axis.word),
        &format!("{name} latency against {} ({what})", axis.name),
        table,
        axis.column,
        &format!("latency_us_{statistic}"),
    )?
    .series(&["qos"])
    .log_x(axis.log_base)
    .labels(axis.label, &format!("{} latency (µs)", name.to_lowercase()));
    // Maxima span orders of magnitude once queues form.
    Ok(if maximum { plot.log_y(10.0) } else { plot })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::dds::plan::tests::args;
    use crate::scenarios::dds::point::BrokerCounts;

    /// Every point delivered everything, with 73 B of overhead per message
    /// published and 88 B per delivery, 10 µs of publisher CPU per message
    /// and 5 µs of subscriber CPU per delivery.
    fn measured(plan: &Plan) -> Vec<Measured> {
        plan.points
            .iter()
            .map(|point| {
                let (published, delivered) = (point.messages(), point.deliveries());
                let mut measured = Measured {
                    published,
                    delivered,
                    publisher_cpu_ns: Some(published * 10_000),
                    subscriber_cpu_ns: Some(delivered * 5_000),
                    process_cpu_ns: Some(published * 10_000 + delivered * 5_000 + published * 20_000),
                    broker: Some(BrokerCounts {
                        bytes_received: published * (point.size as u64 + 73),
                        bytes_sent: delivered * (point.size as u64 + 88),
                        dropped: 0,
                    }),
                    ..Measured::default()
                };
                measured.latency_ns.record(100_000);
                measured.latency_ns.record(300_000);
                measured
            })
            .collect()
    }

    #[test]
    fn rows_give_per_message_cpu_and_overhead_beyond_the_payload() {
        let plan = Plan::from_args(&args(true)).expect("plan");
        let table = points_table(&plan, &measured(&plan)).expect("table");
        assert_eq!(table.rows.len(), plan.points.len());
        let last = table.rows.len() - 1;
        assert_eq!(table.cell(last, "fan"), Some(&Cell::from("1 → 5")));
        assert_eq!(table.cell(last, "qos"), Some(&Cell::from("reliable keep-last:1")));
        assert_eq!(table.cell(last, "policy"), Some(&Cell::from("keep-last:1")));
        assert_eq!(table.cell(last, "lost"), Some(&Cell::Int(0)));
        assert_eq!(table.cell(last, "latency_us_mean"), Some(&Cell::Float(200.0)));
        assert_eq!(table.cell(last, "latency_us_max"), Some(&Cell::Float(300.0)));
        assert_eq!(table.cell(last, "publisher_cpu_us_per_msg"), Some(&Cell::Float(10.0)));
        assert_eq!(table.cell(last, "subscriber_cpu_us_per_msg"), Some(&Cell::Float(5.0)));
        assert_eq!(table.cell(last, "broker_cpu_us_per_msg"), Some(&Cell::Float(20.0)));
        assert_eq!(table.cell(last, "publish_overhead_bytes_per_msg"), Some(&Cell::Float(73.0)));
        assert_eq!(table.cell(last, "delivery_overhead_bytes_per_msg"), Some(&Cell::Float(88.0)));
    }

    #[test]
    fn nothing_measured_leaves_cells_empty_instead_of_dividing_by_zero() {
        let plan = Plan::from_args(&args(true)).expect("plan");
        let table = points_table(&plan, &vec![Measured::default(); plan.points.len()]).expect("table");
        assert_eq!(table.cell(0, "lost"), Some(&Cell::from(plan.points[0].deliveries())));
        for column in ["latency_us_max", "subscriber_cpu_us_per_msg", "delivery_overhead_bytes_per_msg"] {
            assert_eq!(table.cell(0, column), Some(&Cell::Empty), "{column}");
        }
    }

    #[test]
    fn figures_are_cut_at_the_highest_rate_and_the_smallest_size_and_all_draw() {
        let plan = Plan::from_args(&args(true)).expect("plan");
        let points = points_table(&plan, &measured(&plan)).expect("table");
        let mut report = Report::new("dds", "test");
        report.tables.push(points.clone());
        add_figures(&mut report, &plan, &points).expect("figures");
        let names: Vec<&str> = report.tables.iter().map(|table| table.name.as_str()).collect();
        assert_eq!(names, ["points", "by_rate_1to1", "by_size_1to1", "by_size_5to1", "by_size_1to5"]);
        let by_size = report.table("by_size_5to1").expect("by size");
        // Four qualities × two sizes, all at 1000 Hz.
        assert_eq!(by_size.rows.len(), 8);
        assert!((0..8).all(|row| by_size.cell(row, "rate_hz") == Some(&Cell::Int(1000))));
        let by_rate = report.table("by_rate_1to1").expect("by rate");
        assert!((0..8).all(|row| by_rate.cell(row, "size") == Some(&Cell::Int(200))));
        // Two latency plots per fan, two more against rate, four of CPU and overhead.
        assert_eq!(report.plots.len(), 3 * 2 + 2 + 4);
        assert!(report.plots.iter().any(|plot| plot.file == "latency-max-rate-1to1.svg"));
        crate::output::render(&report).expect("every plot draws");
    }

    #[test]
    fn figures_without_numbers_are_left_out() {
        let plan = Plan::from_args(&args(true)).expect("plan");
        let mut measured = measured(&plan);
        // A broker elsewhere: no byte counts, so no overhead plots.
        measured.iter_mut().for_each(|measured| measured.broker = None);
        let points = points_table(&plan, &measured).expect("table");
        let mut report = Report::new("dds", "test");
        add_figures(&mut report, &plan, &points).expect("figures");
        assert_eq!(report.plots.len(), 3 * 2 + 2 + 2);
        assert!(report.plots.iter().all(|plot| !plot.file.starts_with("overhead")));
        report.tables.push(points);
        crate::output::render(&report).expect("every plot draws");
    }
}
