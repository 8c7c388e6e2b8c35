//! What the GES thesis's text states about its results (§8.3-8.4): the
//! only numbers quoted beside Sift's. Its figures are images; nothing here
//! is read off them. All were measured at the measuring subscriber on node
//! 10, 9 server hops from the publisher, unless the row says otherwise.

use crate::error::BenchError;
use crate::report::Table;

/// How Sift's figure for a statement is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Sift's grid point nearest to the thesis's ⟨rate, size⟩.
    Nearest,
    /// Sift's highest throughput at the statement's matching rate.
    PeakThroughput,
    /// Nothing to compare (a trend, or a matching rate Sift did not run).
    Trend,
}

/// One statement of the thesis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThesisStatement {
    /// Section.
    pub section: &'static str,
    /// Figure the statement describes.
    pub figure: &'static str,
    /// Matching rate, percent.
    pub matching_percent: u32,
    /// Server hops to the subscriber measured.
    pub server_hops: Option<u32>,
    /// Publish rate as the thesis measured it, messages per second.
    pub publish_rate: Option<f64>,
    /// Message size, bytes.
    pub size: Option<usize>,
    /// Mean latency, milliseconds.
    pub latency_ms_mean: Option<f64>,
    /// Variance of the latency, ms².
    pub latency_variance_ms2: Option<f64>,
    /// Messages per second received at the measuring subscriber.
    pub throughput_msgs_per_s: Option<f64>,
    /// How Sift's figure is chosen.
    pub compare: Compare,
    /// The statement, in the thesis's words where short enough.
    pub text: &'static str,
}

const FIG_100: &str = "Fig. 8.3.1";
const NINE_HOPS: Option<u32> = Some(9);

/// A statement of a point measured at node 10.
const fn point(
    figure: &'static str,
    matching_percent: u32,
    rate_and_size: (f64, usize),
    latency_ms_mean: f64,
    latency_variance_ms2: f64,
    text: &'static str,
) -> ThesisStatement {
    ThesisStatement {
        section: "§8.3.1",
        figure,
        matching_percent,
        server_hops: NINE_HOPS,
        publish_rate: Some(rate_and_size.0),
        size: Some(rate_and_size.1),
        latency_ms_mean: Some(latency_ms_mean),
        latency_variance_ms2: Some(latency_variance_ms2),
        throughput_msgs_per_s: None,
        compare: Compare::Nearest,
        text,
    }
}

/// Every number the thesis's text states for §8.3-8.4, and its trends.
pub const THESIS_STATEMENTS: [ThesisStatement; 11] = [
    ThesisStatement {
        throughput_msgs_per_s: Some(1.0),
        ..point(FIG_100, 100, (1.0, 50), 15.54, 2.3684, "mean latency from 15.54 mSec at a throughput of 1 message/Sec")
    },
    ThesisStatement {
        throughput_msgs_per_s: Some(78.0),
        ..point(FIG_100, 100, (952.0, 450), 391.85, 69_713.93, "to 391.85 mSec with a throughput of 78 messages/Sec")
    },
    ThesisStatement {
        section: "§8.3.2",
        figure: "Fig. 8.3.5",
        matching_percent: 100,
        server_hops: NINE_HOPS,
        publish_rate: Some(492.0),
        size: Some(75),
        latency_ms_mean: None,
        latency_variance_ms2: None,
        throughput_msgs_per_s: Some(480.76),
        compare: Compare::PeakThroughput,
        text: "maximum throughput 480.76 messages/Sec at publish rates of 492 messages/Sec, 75 bytes",
    },
    point("Fig. 8.3.2", 50, (20.0, 50), 13.02, 56.8196, "mean latency from 13.02 mSec"),
    point("Fig. 8.3.2", 50, (952.0, 350), 178.66, 14_634.0, "to 178.66 mSec"),
    point("Fig. 8.3.3", 25, (20.0, 50), 14.40, 0.24, "mean latency from 14.40 mSec"),
    point("Fig. 8.3.3", 25, (961.0, 400), 66.6, 587.04, "to 66.6 mSec"),
    point("Fig. 8.3.4", 10, (20.0, 50), 14.40, 0.44, "mean latency from 14.40 mSec"),
    point("Fig. 8.3.4", 10, (952.0, 400), 52.0, 103.0, "to 52.0 mSec"),
    ThesisStatement {
        section: "§8.3.3",
        latency_ms_mean: None,
        compare: Compare::Trend,
        ..point("—", 5, (877.0, 450), 0.0, 133.76, "variance falls to 133.76 mSec² at a matching rate of 5 %")
    },
    ThesisStatement {
        section: "§8.4",
        figure: "Fig. 8.4.2-8.4.7",
        matching_percent: 50,
        server_hops: None,
        publish_rate: None,
        size: None,
        latency_ms_mean: None,
        latency_variance_ms2: None,
        throughput_msgs_per_s: None,
        compare: Compare::Trend,
        text: "with node 10 at 4 server hops (and nodes 1, 22 at 2, 1), at 50 % and 10 %: latencies fall with the \
               number of server hops; the pattern against size and rate is as before",
    },
];

/// The statements as a table.
pub fn paper_table() -> Result<Table, BenchError> {
    let columns = [
        ("section", ""),
        ("figure", ""),
        ("matching_percent", "%"),
        ("server_hops", ""),
        ("publish_rate", "msgs/s"),
        ("size", "B"),
        ("latency_ms_mean", "ms"),
        ("latency_variance_ms2", "ms²"),
        ("throughput_msgs_per_s", "msgs/s"),
        ("statement", ""),
    ];
    let mut table = Table::new("paper", "The thesis's figures, as its text states them (§8.3-8.4)", &columns);
    for statement in &THESIS_STATEMENTS {
        table.push_row(vec![
            statement.section.into(),
            statement.figure.into(),
            statement.matching_percent.into(),
            statement.server_hops.into(),
            statement.publish_rate.into(),
            statement.size.into(),
            statement.latency_ms_mean.into(),
            statement.latency_variance_ms2.into(),
            statement.throughput_msgs_per_s.into(),
            statement.text.into(),
        ])?;
    }
    Ok(table)
}
