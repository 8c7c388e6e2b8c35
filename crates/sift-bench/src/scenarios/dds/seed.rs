//! What the slides (seed 003, "Open Architecture Publish-Subscribe
//! Benchmarking", RTI NDDS 3.0m against SPLICE 2) state, beside Sift's
//! counterpart and, where the statement is about a measured point, Sift's
//! figures at that point.
//!
//! The slides' results are charts whose values their text does not give:
//! no latency, CPU or overhead number can be quoted from them, so the
//! table sets Sift's figures beside the settings the text names (200 B at
//! 10 Hz, 2000 Hz), and the notes say so.

use sift_client::QueuePolicy;
use sift_core::DeliveryMode;

use super::plan::{Plan, Point, Qos};
use super::point::Measured;
use crate::error::BenchError;
use crate::report::Table;

/// A Sift point a statement is about: 1 → 1, this quality, size and rate.
#[derive(Debug, Clone, Copy)]
struct Counterpart {
    mode: DeliveryMode,
    policy: QueuePolicy,
    size: usize,
    rate_hz: u64,
}

/// One statement of the slides.
struct Statement {
    slide: &'static str,
    says: &'static str,
    sift: &'static str,
    point: Option<Counterpart>,
}

const RELIABLE_KEEP_ALL: (DeliveryMode, QueuePolicy) = (DeliveryMode::Reliable, QueuePolicy::Block);
const RELIABLE_KEEP_LAST: (DeliveryMode, QueuePolicy) = (DeliveryMode::Reliable, QueuePolicy::KeepLast(1));
const BEST_EFFORT_KEEP_ALL: (DeliveryMode, QueuePolicy) = (DeliveryMode::BestEffort, QueuePolicy::Block);

const fn at(quality: (DeliveryMode, QueuePolicy), size: usize, rate_hz: u64) -> Option<Counterpart> {
    Some(Counterpart { mode: quality.0, policy: quality.1, size, rate_hz })
}

const STATEMENTS: [Statement; 10] = [
    Statement {
        slide: "Architectural Features Affecting Results",
        says: "NDDS: reliable/FIFO, all issues delivered; improperly sized queues can lead to flow control behavior",
        sift: "reliable keep-all: policy block keeps every message; a full queue holds the publisher back",
        point: None,
    },
    Statement {
        slide: "Architectural Features Affecting Results",
        says: "SPLICE: reliable but not FIFO, the most recent issue (by timestamp) overwrites the previous issue",
        sift: "reliable keep-last:1: a newer message overwrites the one still queued (counted as dropped)",
        point: None,
    },
    Statement {
        slide: "Methodology",
        says: "NTP for clock sync; NDDS 3.0m with reliable queue size 1; SPLICE 2; C libraries from vendor code generation",
        sift: "publishers and subscribers share one process and one monotonic clock; Rust client over TCP",
        point: None,
    },
    Statement {
        slide: "Host Configuration, Test Environment",
        says: "Sun Ultra2, dual 200 MHz UltraSparc, 128 MB, Solaris 8, Fast Ethernet; one subnet, multicast; \
               real-time priorities",
        sift: "one machine: broker, publishers and subscribers share its CPUs over loopback; normal priorities",
        point: None,
    },
    Statement {
        slide: "Small Message Low Rate",
        says: "latencies of 200 byte message delivery at 10 Hz (chart; no number in the text)",
        sift: "1 → 1, 200 B, 10 Hz, reliable keep-all",
        point: at(RELIABLE_KEEP_ALL, 200, 10),
    },
    Statement {
        slide: "Small Message Low Rate",
        says: "the same, SPLICE",
        sift: "1 → 1, 200 B, 10 Hz, reliable keep-last:1",
        point: at(RELIABLE_KEEP_LAST, 200, 10),
    },
    Statement {
        slide: "UDP, NDDS, & SPLICE - Maximum Latencies",
        says: "maximum latencies for NDDS reliable/FIFO at 2000 Hz (chart; no number in the text)",
        sift: "1 → 1, 200 B, 2000 Hz, reliable keep-all",
        point: at(RELIABLE_KEEP_ALL, 200, 2000),
    },
    Statement {
        slide: "UDP, NDDS, & SPLICE - Maximum Latencies",
        says: "the same, SPLICE reliable",
        sift: "1 → 1, 200 B, 2000 Hz, reliable keep-last:1",
        point: at(RELIABLE_KEEP_LAST, 200, 2000),
    },
    Statement {
        slide: "UDP, NDDS, & SPLICE - Maximum Latencies",
        says: "the same, plain UDP",
        sift: "1 → 1, 200 B, 2000 Hz, best-effort keep-all (over TCP through the broker)",
        point: at(BEST_EFFORT_KEEP_ALL, 200, 2000),
    },
    Statement {
        slide: "Summary",
        says: "both products perform well within the performance requirements of typical US Surface Navy combat systems",
        sift: "no requirement figure is given to compare with",
        point: None,
    },
];

/// Columns of the `seed` table, (name, unit).
const SEED_COLUMNS: [(&str, &str); 6] = [
    ("slide", ""),
    ("slides_say", ""),
    ("sift_counterpart", ""),
    ("sift_latency_us_mean", "µs"),
    ("sift_latency_us_max", "µs"),
    ("sift_subscriber_cpu_us_per_msg", "µs"),
];

/// The `seed` table: each statement, Sift's counterpart, and Sift's
/// figures at that point when the run measured it.
pub fn seed_table(plan: &Plan, measured: &[Measured]) -> Result<Table, BenchError> {
    let title = "What the slides state (seed 003, NDDS 3.0m and SPLICE 2), beside Sift";
    let mut table = Table::new("seed", title, &SEED_COLUMNS);
    for statement in &STATEMENTS {
        let found = statement.point.and_then(|counterpart| find(plan, measured, counterpart));
        let latency = found.and_then(|measured| measured.latency_ns.summary());
        let subscriber_cpu = found.and_then(|measured| {
            let nanos = measured.subscriber_cpu_ns.filter(|_| measured.delivered > 0)?;
            Some(nanos as f64 * 1e-3 / measured.delivered as f64)
        });
        table.push_row(vec![
            statement.slide.into(),
            statement.says.into(),
            statement.sift.into(),
            latency.map(|summary| summary.mean * 1e-3).into(),
            latency.map(|summary| summary.max * 1e-3).into(),
            subscriber_cpu.into(),
        ])?;
    }
    Ok(table)
}

/// What was measured at the 1 → 1 point `counterpart` names, if it ran.
fn find<'a>(plan: &Plan, measured: &'a [Measured], counterpart: Counterpart) -> Option<&'a Measured> {
    let wanted = |point: &Point| {
        point.fan.publishers == 1
            && point.fan.subscribers == 1
            && point.qos == Qos { mode: counterpart.mode, policy: counterpart.policy }
            && point.size == counterpart.size
            && point.rate_hz == counterpart.rate_hz
    };
    plan.points.iter().zip(measured).find(|(point, _)| wanted(point)).map(|(_, measured)| measured)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Cell;
    use crate::scenarios::dds::plan::tests::args;

    #[test]
    fn statements_about_measured_points_carry_sift_figures() {
        let plan = Plan::from_args(&args(false)).expect("plan");
        let mut measured = vec![Measured::default(); plan.points.len()];
        let target = Counterpart { mode: DeliveryMode::Reliable, policy: QueuePolicy::Block, size: 200, rate_hz: 10 };
        let index = plan
            .points
            .iter()
            .position(|point| {
                point.fan.subscribers == 1
                    && point.fan.publishers == 1
                    && point.qos.mode == target.mode
                    && point.qos.policy == target.policy
                    && point.size == 200
                    && point.rate_hz == 10
            })
            .expect("the point runs in the full grid");
        measured[index].latency_ns.record(150_000);
        measured[index].latency_ns.record(250_000);
        measured[index].delivered = 20;
        measured[index].subscriber_cpu_ns = Some(400_000);
        let table = seed_table(&plan, &measured).expect("table");
        assert_eq!(table.rows.len(), STATEMENTS.len());
        let row =
            STATEMENTS.iter().position(|statement| statement.sift.ends_with("10 Hz, reliable keep-all")).expect("row");
        assert_eq!(table.cell(row, "sift_latency_us_mean"), Some(&Cell::Float(200.0)));
        assert_eq!(table.cell(row, "sift_latency_us_max"), Some(&Cell::Float(250.0)));
        assert_eq!(table.cell(row, "sift_subscriber_cpu_us_per_msg"), Some(&Cell::Float(20.0)));
        // Measured but with no samples, and not a point at all: empty.
        assert_eq!(table.cell(row + 1, "sift_latency_us_max"), Some(&Cell::Empty));
        assert_eq!(table.cell(0, "sift_latency_us_mean"), Some(&Cell::Empty));
    }
}
