//! The grid of `sift bench ges`: the parts (topologies), the matching rates
//! of each, and per point the publish rate, the event size and how many
//! events are published.
//!
//! **Events per point.** About `--seconds` of publishing at the point's
//! rate, but at least `--samples-min` events for the measuring subscriber,
//! which receives one event in `K` at a matching rate of `100/K` %; the
//! count is rounded up to a whole number of footprint blocks of `K` events,
//! so that every subscriber receives exactly `events / K`. At low rates
//! that takes long (10 events at 1 msg/s take 10 s, at 10 % 100 s), so the
//! grid is coarser there: rates below [`LOW_RATE_MSGS_PER_S`] run at the
//! smallest size only, and a point whose publishing would take longer than
//! `--point-seconds-max` is left out.

use std::time::Duration;

use sift_core::workload::GesWorkload;

use crate::error::BenchError;
use crate::stamp::STAMP_BYTES;

/// Rates below this many messages per second run at the smallest size only.
pub const LOW_RATE_MSGS_PER_S: u64 = 10;
/// Rough cost of a point beyond its publishing: draining, collecting.
const EXPECTED_POINT_OVERHEAD: Duration = Duration::from_millis(300);
/// Rough cost of a round: connecting every subscriber, spreading interest,
/// closing them.
const EXPECTED_ROUND_OVERHEAD: Duration = Duration::from_secs(3);
/// Rough cost of starting and stopping a network of a few dozen brokers.
const EXPECTED_PART_OVERHEAD: Duration = Duration::from_secs(3);

/// One point: events of one size published at one rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Target publish rate, messages per second.
    pub rate: u64,
    /// Event payload bytes.
    pub size: usize,
    /// Events published.
    pub events: u64,
}

impl Point {
    /// How long publishing the point's events takes at its rate.
    pub fn publish_duration(&self) -> Duration {
        Duration::from_secs_f64(self.events as f64 / self.rate.max(1) as f64)
    }
}

/// The points of one matching rate, run with one set of subscribers.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// The matching rate asked for, in percent.
    pub matching_percent: u32,
    /// `K`: every subscriber receives one event in `K`.
    pub footprints: u64,
    /// The points, rate by rate, size by size.
    pub points: Vec<Point>,
}

/// One topology the grid runs on: the base links or a variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The variant; `None` for the base links.
    pub variant: Option<String>,
    /// The rounds, one per matching rate.
    pub rounds: Vec<Round>,
}

impl Part {
    /// How the tables name the part's topology: the variant, or `base`.
    pub fn label(&self) -> &str {
        self.variant.as_deref().unwrap_or("base")
    }
}

/// What the grid is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct GridSpec {
    /// Target publish rates, messages per second.
    pub rates: Vec<u64>,
    /// Event payload sizes, bytes.
    pub sizes: Vec<usize>,
    /// Seconds of publishing a point aims at.
    pub seconds: f64,
    /// Events the measuring subscriber receives at least per point.
    pub samples_min: u64,
    /// Points whose publishing would take longer are left out.
    pub point_seconds_max: f64,
}

impl GridSpec {
    /// Checks the values a run needs.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.rates.is_empty() || self.sizes.is_empty() || self.rates.contains(&0) {
            return Err(BenchError::Usage("--rates and --sizes need at least one value each, rates above 0".into()));
        }
        if let Some(size) = self.sizes.iter().find(|size| **size < STAMP_BYTES) {
            return Err(BenchError::Usage(format!(
                "--sizes: {size} B is below {STAMP_BYTES} B (the send time rides in the payload)"
            )));
        }
        let positive = |value: f64| value.is_finite() && value > 0.0;
        if !positive(self.seconds) || !positive(self.point_seconds_max) || self.samples_min == 0 {
            return Err(BenchError::Usage("--seconds, --point-seconds-max and --samples-min must be above 0".into()));
        }
        Ok(())
    }

    /// The round of `matching_percent` (its `K` from the workload of `seed`).
    pub fn round(&self, seed: u64, matching_percent: u32) -> Result<Round, BenchError> {
        let workload = GesWorkload::new(seed, matching_percent)
            .map_err(|error| BenchError::Usage(format!("matching rate {matching_percent} %: {error}")))?;
        let footprints = u64::from(workload.footprint_count());
        let smallest = self.sizes.iter().copied().min().unwrap_or_default();
        let mut points = Vec::new();
        for &rate in &self.rates {
            let wanted = ((rate as f64 * self.seconds).ceil() as u64).max(self.samples_min * footprints);
            let events = wanted.div_ceil(footprints) * footprints;
            for &size in &self.sizes {
                let point = Point { rate, size, events };
                let too_long = point.publish_duration().as_secs_f64() > self.point_seconds_max;
                if too_long || (rate < LOW_RATE_MSGS_PER_S && size != smallest) {
                    continue;
                }
                points.push(point);
            }
        }
        Ok(Round { matching_percent, footprints, points })
    }
}

/// Every part, round and point of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What the grid was built from.
    pub spec: GridSpec,
    /// The parts in the order they run.
    pub parts: Vec<Part>,
}

impl Plan {
    /// The plan of `parts`, each a variant (`None` = base) and its matching
    /// rates; refuses one in which some round has no point.
    pub fn new(spec: GridSpec, seed: u64, parts: &[(Option<String>, Vec<u32>)]) -> Result<Plan, BenchError> {
        spec.validate()?;
        let mut built = Vec::new();
        for (variant, matching) in parts {
            if matching.is_empty() {
                return Err(BenchError::Usage("every part needs at least one matching rate".into()));
            }
            let rounds = matching.iter().map(|&percent| spec.round(seed, percent)).collect::<Result<Vec<_>, _>>()?;
            if let Some(empty) = rounds.iter().find(|round| round.points.is_empty()) {
                return Err(BenchError::Usage(format!(
                    "at a matching rate of {} % no point fits --point-seconds-max {} s; raise it or the rates",
                    empty.matching_percent, spec.point_seconds_max
                )));
            }
            built.push(Part { variant: variant.clone(), rounds });
        }
        Ok(Plan { spec, parts: built })
    }

    /// Points in all parts.
    pub fn point_count(&self) -> usize {
        self.rounds().map(|round| round.points.len()).sum()
    }

    fn rounds(&self) -> impl Iterator<Item = &Round> {
        self.parts.iter().flat_map(|part| &part.rounds)
    }

    /// A rough guess of how long the run takes.
    pub fn expected_duration(&self) -> Duration {
        let points: Duration = self
            .rounds()
            .flat_map(|round| &round.points)
            .map(|point| point.publish_duration() + EXPECTED_POINT_OVERHEAD)
            .sum();
        let rounds = EXPECTED_ROUND_OVERHEAD * self.rounds().count() as u32;
        points + rounds + EXPECTED_PART_OVERHEAD * self.parts.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> GridSpec {
        GridSpec {
            rates: vec![1, 20, 100, 500, 1000],
            sizes: vec![50, 150, 250, 350, 450],
            seconds: 2.0,
            samples_min: 10,
            point_seconds_max: 15.0,
        }
    }

    #[test]
    fn events_cover_the_seconds_and_the_samples_in_whole_blocks() {
        let full = spec().round(1, 100).expect("round");
        // 1 msg/s runs at 50 B only, 10 events; then 5 sizes per rate.
        assert_eq!(full.points.len(), 1 + 4 * 5);
        assert_eq!((full.points[0].rate, full.points[0].size, full.points[0].events), (1, 50, 10));
        assert_eq!(full.points[1].events, 40);
        assert_eq!(full.points.last().map(|point| point.events), Some(2000));
        let tenth = spec().round(1, 10).expect("round");
        assert_eq!(tenth.footprints, 10);
        // 1 msg/s would take 100 s at 10 %; 20 msgs/s takes 100 events (5 s) for 10 samples.
        assert!(tenth.points.iter().all(|point| point.rate >= 20 && point.events % 10 == 0));
        assert_eq!(tenth.points[0].events, 100);
        let quarter = spec().round(1, 25).expect("round");
        assert!(quarter.points.iter().all(|point| point.events % 4 == 0 && point.events / 4 >= 10));
    }

    #[test]
    fn the_full_plan_of_both_parts_fits_in_ten_minutes() {
        let parts = [(None, vec![100, 50, 25, 10]), (Some("shortcut".to_string()), vec![50, 10])];
        let plan = Plan::new(spec(), 1, &parts).expect("plan");
        assert_eq!(plan.parts[1].label(), "shortcut");
        assert_eq!(plan.parts[0].label(), "base");
        assert!(plan.expected_duration() < Duration::from_secs(600), "{:?}", plan.expected_duration());
        assert!(plan.point_count() > 100);
    }

    #[test]
    fn bad_grids_are_refused_with_the_reason() {
        let mut small = spec();
        small.sizes = vec![4];
        assert!(Plan::new(small, 1, &[(None, vec![100])]).is_err());
        let slow = GridSpec { rates: vec![1], ..spec() };
        let error = Plan::new(slow, 1, &[(None, vec![10])]).expect_err("100 s at 10 %");
        assert!(error.to_string().contains("10 %"), "{error}");
        assert!(Plan::new(spec(), 1, &[(None, vec![0])]).is_err());
        assert!(Plan::new(spec(), 1, &[(None, vec![])]).is_err());
        assert!(Plan::new(GridSpec { seconds: 0.0, ..spec() }, 1, &[(None, vec![100])]).is_err());
    }
}
