//! The tables and plots of `sift bench nb`: transit delay per chain and
//! size, the delay a broker hop adds, and the paper's statements beside.

use crate::error::BenchError;
use crate::load::RunResult;
use crate::plot::Plot;
use crate::report::{Cell, Report, Table};
use crate::stats::Samples;

/// Payloads up to this size are the ones the paper's per-hop figure covers.
const PAPER_PER_HOP_SIZE_MAX: usize = 4096;
/// The paper's per-hop latency up to 4 KB, microseconds ("around 1 millisecond").
const PAPER_PER_HOP_US: f64 = 1000.0;
/// Messages the paper averages per point.
const PAPER_MESSAGES_PER_POINT: u64 = 50;

/// What one chain length and size measured.
#[derive(Debug, Clone)]
pub struct Transit {
    /// Brokers in the chain.
    pub brokers: usize,
    /// Payload bytes.
    pub size: usize,
    /// Messages published, all rounds.
    pub published: u64,
    /// Messages delivered, all rounds.
    pub delivered: u64,
    /// Publish-to-delivery times, nanoseconds.
    pub latency_ns: Samples,
}

impl Transit {
    /// Nothing measured yet for a chain of `brokers` and payloads of `size`.
    pub fn new(brokers: usize, size: usize) -> Transit {
        Transit { brokers, size, published: 0, delivered: 0, latency_ns: Samples::new() }
    }

    /// Adds one round's run.
    pub fn add(&mut self, result: &RunResult) {
        self.published += result.published;
        self.delivered += result.delivered;
        self.latency_ns.merge(&result.latency_ns);
    }

    fn mean_us(&self) -> Option<f64> {
        self.latency_ns.summary().map(|summary| summary.mean / 1e3)
    }

    fn p50_us(&self) -> Option<f64> {
        self.latency_ns.summary().map(|summary| summary.p50 / 1e3)
    }
}

/// Adds the tables, plots and notes to `report`.
pub fn fill_report(report: &mut Report, transits: &[Transit]) -> Result<(), BenchError> {
    let transit = transit_table(transits)?;
    report.plots.push(
        Plot::lines(
            "delay.svg",
            "Transit delay against payload size, by brokers on the path (cf. Fig. 2-4)",
            &transit,
            "size",
            "delay_us_mean",
        )?
        .series(&["brokers"])
        .log_x(4.0)
        .labels("payload size (B)", "mean transit delay (µs)"),
    );
    report.plots.push(
        Plot::lines(
            "std-dev.svg",
            "Std dev of the delay against payload size, by brokers (cf. Fig. 2-4)",
            &transit,
            "size",
            "delay_us_std_dev",
        )?
        .series(&["brokers"])
        .log_x(4.0)
        .labels("payload size (B)", "standard deviation of the delay (µs)"),
    );
    let several_chains = transits.iter().any(|transit| transit.brokers != transits[0].brokers);
    if several_chains {
        report.plots.push(
            Plot::lines(
                "hops.svg",
                "Transit delay against brokers on the path, by payload size (B)",
                &transit,
                "brokers",
                "delay_us_mean",
            )?
            .series(&["size"])
            .labels("brokers on the path", "mean transit delay (µs)"),
        );
    }
    report.tables.push(transit);
    if several_chains {
        report.tables.push(per_hop_table(transits)?);
    }
    report.tables.push(comparison_table(transits)?);
    report.tables.push(paper_table()?);
    for note in NOTES {
        report.note(note);
    }
    Ok(())
}

const TRANSIT_COLUMNS: [(&str, &str); 12] = [
    ("brokers", ""),
    ("links", ""),
    ("size", "B"),
    ("published", "msgs"),
    ("delivered", "msgs"),
    ("delay_us_mean", "µs"),
    ("delay_us_std_dev", "µs"),
    ("delay_us_min", "µs"),
    ("delay_us_p50", "µs"),
    ("delay_us_p99", "µs"),
    ("delay_us_max", "µs"),
    ("samples", ""),
];

fn transit_table(transits: &[Transit]) -> Result<Table, BenchError> {
    let mut table = Table::new("transit", "Sift: transit delay, publisher → brokers → subscriber", &TRANSIT_COLUMNS);
    for transit in transits {
        let summary = transit.latency_ns.summary().map(|summary| summary.scaled(1e-3));
        table.push_row(vec![
            transit.brokers.into(),
            transit.brokers.saturating_sub(1).into(),
            transit.size.into(),
            transit.published.into(),
            transit.delivered.into(),
            summary.map(|s| s.mean).into(),
            summary.and_then(|s| s.std_dev).into(),
            summary.map(|s| s.min).into(),
            summary.map(|s| s.p50).into(),
            summary.map(|s| s.p99).into(),
            summary.map(|s| s.max).into(),
            transit.latency_ns.count().into(),
        ])?;
    }
    Ok(table)
}

/// What a hop adds at one size: the least-squares slope of the mean delay
/// against the links crossed, and the range of (mean of chain n − mean of
/// one broker) / (n − 1).
#[derive(Debug, Clone, Copy, PartialEq)]
struct PerHop {
    fit_us: f64,
    fit_p50_us: f64,
    difference_us_min: f64,
    difference_us_max: f64,
}

fn per_hop(transits: &[Transit], size: usize) -> Option<PerHop> {
    let of_size = || transits.iter().filter(|transit| transit.size == size);
    let links = |transit: &Transit| transit.brokers.saturating_sub(1) as f64;
    let points: Vec<(f64, f64)> = of_size().filter_map(|transit| Some((links(transit), transit.mean_us()?))).collect();
    let medians: Vec<(f64, f64)> = of_size().filter_map(|transit| Some((links(transit), transit.p50_us()?))).collect();
    let single = points.iter().find(|(links, _)| *links == 0.0)?.1;
    let differences: Vec<f64> =
        points.iter().filter(|(links, _)| *links > 0.0).map(|(links, mean)| (mean - single) / links).collect();
    Some(PerHop {
        fit_us: slope(&points)?,
        fit_p50_us: slope(&medians)?,
        difference_us_min: differences.iter().copied().reduce(f64::min)?,
        difference_us_max: differences.iter().copied().reduce(f64::max)?,
    })
}

/// Least-squares slope of `points`; `None` without two distinct x values.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let count = points.len() as f64;
    let mean_x = points.iter().map(|point| point.0).sum::<f64>() / count;
    let mean_y = points.iter().map(|point| point.1).sum::<f64>() / count;
    let spread: f64 = points.iter().map(|point| (point.0 - mean_x).powi(2)).sum();
    let covariance: f64 = points.iter().map(|point| (point.0 - mean_x) * (point.1 - mean_y)).sum();
    (spread > 0.0).then(|| covariance / spread)
}

fn sizes(transits: &[Transit]) -> Vec<usize> {
    let mut sizes: Vec<usize> = transits.iter().map(|transit| transit.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

fn per_hop_table(transits: &[Transit]) -> Result<Table, BenchError> {
    let columns = [
        ("size", "B"),
        ("per_hop_us_fit", "µs"),
        ("per_hop_us_min", "µs"),
        ("per_hop_us_max", "µs"),
        ("per_hop_us_p50_fit", "µs"),
    ];
    let title = "Sift: delay a broker hop adds (slope over the chains; range of each chain against one broker)";
    let mut table = Table::new("per_hop", title, &columns);
    for size in sizes(transits) {
        let hop = per_hop(transits, size);
        table.push_row(vec![
            size.into(),
            hop.map(|hop| hop.fit_us).into(),
            hop.map(|hop| hop.difference_us_min).into(),
            hop.map(|hop| hop.difference_us_max).into(),
            hop.map(|hop| hop.fit_p50_us).into(),
        ])?;
    }
    Ok(table)
}

/// Sift's per-hop delay up to 4 KB and its points' sample counts beside the paper's.
fn comparison_table(transits: &[Transit]) -> Result<Table, BenchError> {
    let columns = [("figure", ""), ("paper", ""), ("paper_value", ""), ("sift_value", ""), ("unit", "")];
    let mut table = Table::new("comparison", "Sift beside the paper's stated figures", &columns);
    let fits: Vec<f64> = sizes(transits)
        .into_iter()
        .filter(|size| *size <= PAPER_PER_HOP_SIZE_MAX)
        .filter_map(|size| per_hop(transits, size).map(|hop| hop.fit_us))
        .collect();
    let range = match (fits.iter().copied().reduce(f64::min), fits.iter().copied().reduce(f64::max)) {
        (Some(low), Some(high)) => Cell::from(format!("{low:.1} to {high:.1}")),
        _ => Cell::Empty,
    };
    table.push_row(vec![
        "per-hop latency, payloads up to 4 KB".into(),
        "around 1 millisecond".into(),
        PAPER_PER_HOP_US.into(),
        range,
        "µs".into(),
    ])?;
    let samples = transits.iter().map(|transit| transit.latency_ns.count()).min();
    table.push_row(vec![
        "messages averaged per point (all rounds)".into(),
        "the average of 50 messages".into(),
        PAPER_MESSAGES_PER_POINT.into(),
        samples.into(),
        "msgs".into(),
    ])?;
    Ok(table)
}

/// What the paper's text states about §2.1 (its figures are images).
fn paper_table() -> Result<Table, BenchError> {
    let statements = [
        ("§2.1", "Fig. 2-4", "each point in the delay-curve corresponding to the average of 50 messages"),
        ("§2.1", "Fig. 2-4", "the standard deviation-curve reports the deviation in these delays"),
        ("§2.1", "Fig. 2-4", "the per-hop latency in cases up until 4KB is around 1 millisecond"),
        ("§2.1", "Fig. 2-4", "transit delay corresponds to traversal from publisher-broker-subscriber"),
        ("§2.1", "Fig. 2, 3, 4", "settings: UK-US (trans-Atlantic), UK-Australia, US-Australia"),
    ];
    let mut table = Table::new(
        "paper",
        "The paper's statements about its figures",
        &[("section", ""), ("figure", ""), ("statement", "")],
    );
    for (section, figure, statement) in statements {
        table.push_row(vec![section.into(), figure.into(), statement.into()])?;
    }
    Ok(table)
}

const NOTES: [&str; 3] = [
    "Transit delay is the time from the publisher's send to the subscriber's receipt, one clock, one process; the \
     brokers of a chain share this machine with both clients, on loopback.",
    "The paper measured across continents (UK, US, Australia) on machines of 2005; its delays include wide-area \
     networks, Sift's here only loopback, so the comparable figure is what a broker hop adds.",
    "per_hop_us_fit is the slope of the mean delay against the links crossed (least squares over the chains); \
     per_hop_us_min and _max bound (mean of chain n − mean of one broker) / (n − 1); per_hop_us_p50_fit is the \
     slope of the medians, which outliers from other work on the machine move less.",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn transit(brokers: usize, size: usize, delay_us: u64) -> Transit {
        let mut latency_ns = Samples::new();
        for jitter in [0, 2_000] {
            latency_ns.record(delay_us * 1_000 + jitter);
        }
        Transit { brokers, size, published: 2, delivered: 2, latency_ns }
    }

    #[test]
    fn a_hop_is_the_slope_of_the_delay_against_the_links() {
        // 50 µs for one broker, 30 µs more per hop (plus 1 µs of jitter in the means).
        let transits: Vec<Transit> = (1..=4).map(|brokers| transit(brokers, 64, 20 + 30 * brokers as u64)).collect();
        let hop = per_hop(&transits, 64).expect("several chains");
        assert!((hop.fit_us - 30.0).abs() < 1e-9, "{hop:?}");
        assert!((hop.difference_us_min - 30.0).abs() < 1e-9 && (hop.difference_us_max - 30.0).abs() < 1e-9);
        assert_eq!(per_hop(&transits[..1], 64), None);
        assert_eq!(per_hop(&transits, 128), None);
    }

    #[test]
    fn the_report_has_the_curves_the_hops_and_the_paper() {
        let mut transits = Vec::new();
        for brokers in [1, 3] {
            for size in [64, 4096] {
                transits.push(transit(brokers, size, 40 * brokers as u64 + size as u64 / 1024));
            }
        }
        let mut report = Report::new("nb", "test");
        fill_report(&mut report, &transits).expect("report");
        let names: Vec<&str> = report.tables.iter().map(|table| table.name.as_str()).collect();
        assert_eq!(names, ["transit", "per_hop", "comparison", "paper"]);
        assert_eq!(report.plots.len(), 3);
        let transit_table = report.table("transit").expect("transit");
        assert_eq!(transit_table.cell(0, "delay_us_mean"), Some(&Cell::Float(41.0)));
        assert_eq!(report.table("per_hop").and_then(|table| table.cell(0, "per_hop_us_fit")), Some(&Cell::Float(40.0)));
        let comparison = report.table("comparison").expect("comparison");
        assert_eq!(comparison.cell(0, "sift_value"), Some(&Cell::from("40.0 to 40.0")));
        assert_eq!(comparison.cell(1, "sift_value"), Some(&Cell::Int(2)));
        let mut single = Report::new("nb", "test");
        fill_report(&mut single, &transits[..2]).expect("one chain");
        assert_eq!(single.plots.len(), 2, "no hops plot from one chain");
        assert!(single.table("per_hop").is_none());
    }
}
