//! The grid of `sift bench dds`: publisher/subscriber fans, delivery
//! qualities (mode and queue policy), message sizes and publish rates,
//! and how many messages each point sends.

use std::time::Duration;

use sift_client::QueuePolicy;
use sift_core::DeliveryMode;

use super::DdsArgs;
use crate::error::BenchError;
use crate::stamp::STAMP_BYTES;

/// Message sizes of the full grid: the seed's 200 B, then 1 to 16 KB.
pub const SIZES_FULL: [usize; 4] = [200, 1024, 4096, 16_384];
/// Message sizes of `--quick`.
pub const SIZES_QUICK: [usize; 2] = [200, 4096];
/// Publish rates of the full grid, per publisher: the seed's 10 to 2000 Hz.
pub const RATES_FULL_HZ: [u64; 5] = [10, 100, 500, 1000, 2000];
/// Publish rates of `--quick`.
pub const RATES_QUICK_HZ: [u64; 2] = [100, 1000];
/// Seconds each point publishes for without `--seconds`.
pub const SECONDS_FULL: f64 = 1.5;
/// The same with `--quick`.
pub const SECONDS_QUICK: f64 = 0.25;
/// Fewest messages a publisher sends at a point, so that the slowest rates
/// still give an average and a maximum worth reading.
pub const MESSAGES_PER_PUBLISHER_MIN: u64 = 20;
/// Most publishers or subscribers at one point: each is an OS thread.
pub const CLIENTS_PER_SIDE_MAX: usize = 64;
/// Rough cost of starting a point's client threads and connecting them.
const EXPECTED_POINT_SETUP: Duration = Duration::from_millis(40);

/// How many publishers send to how many subscribers (each subscriber gets
/// every publisher's messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fan {
    /// Publishers, one thread and connection each.
    pub publishers: usize,
    /// Subscribers, one thread and connection each.
    pub subscribers: usize,
}

impl Fan {
    /// `5 → 1`.
    pub fn label(&self) -> String {
        format!("{} → {}", self.publishers, self.subscribers)
    }
}

impl std::str::FromStr for Fan {
    type Err = BenchError;

    /// `P:S`, both from 1 to [`CLIENTS_PER_SIDE_MAX`].
    fn from_str(text: &str) -> Result<Fan, BenchError> {
        let usage = || BenchError::Usage(format!("--fans: {text:?} is not PUBLISHERS:SUBSCRIBERS (1 to 64 each)"));
        let (publishers, subscribers) = text.split_once(':').ok_or_else(usage)?;
        let count = |side: &str| side.trim().parse::<usize>().ok().filter(|n| (1..=CLIENTS_PER_SIDE_MAX).contains(n));
        Ok(Fan { publishers: count(publishers).ok_or_else(usage)?, subscribers: count(subscribers).ok_or_else(usage)? })
    }
}

/// A delivery quality: the delivery mode of the messages and the queue
/// policy of the subscriptions (DDS's reliability and history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qos {
    /// Best-effort or reliable.
    pub mode: DeliveryMode,
    /// `block` keeps every message (DDS keep-all, with flow control for
    /// reliable messages); `keep-last:N` lets newer messages overwrite.
    pub policy: QueuePolicy,
}

impl Qos {
    /// The quality in DDS's words: `reliable keep-all`, `best-effort keep-last:1`.
    pub fn label(&self) -> String {
        format!("{} {}", self.mode.name(), history(self.policy))
    }
}

/// A queue policy as a DDS history: `block` keeps all.
pub fn history(policy: QueuePolicy) -> String {
    match policy {
        QueuePolicy::Block => "keep-all".to_string(),
        other => other.to_string(),
    }
}

/// One point of the grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Publishers and subscribers.
    pub fan: Fan,
    /// Mode and policy.
    pub qos: Qos,
    /// Payload bytes per message.
    pub size: usize,
    /// Messages per second of each publisher.
    pub rate_hz: u64,
    /// Messages each publisher sends.
    pub messages_per_publisher: u64,
}

impl Point {
    /// `1 → 5 reliable keep-all 4096 B 2000 Hz`, for the progress bar.
    pub fn label(&self) -> String {
        format!("{} {} {} B {} Hz", self.fan.label(), self.qos.label(), self.size, self.rate_hz)
    }

    /// Messages published at this point, all publishers together.
    pub fn messages(&self) -> u64 {
        self.messages_per_publisher * self.fan.publishers as u64
    }

    /// Deliveries owed: every subscriber gets every message.
    pub fn deliveries(&self) -> u64 {
        self.messages() * self.fan.subscribers as u64
    }

    /// How long the publishers take at their rate.
    pub fn publish_duration(&self) -> Duration {
        Duration::from_secs_f64(self.messages_per_publisher as f64 / self.rate_hz as f64)
    }
}

/// The whole grid, in the order it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Rates per publisher, Hz.
    pub rates_hz: Vec<u64>,
    /// Fans.
    pub fans: Vec<Fan>,
    /// Qualities.
    pub qualities: Vec<Qos>,
    /// Seconds each point publishes for (at least
    /// [`MESSAGES_PER_PUBLISHER_MIN`] messages).
    pub seconds: f64,
    /// Every point: fan, then quality, then size, then rate.
    pub points: Vec<Point>,
}

impl Plan {
    /// The grid `args` ask for, checked.
    pub fn from_args(args: &DdsArgs) -> Result<Plan, BenchError> {
        let quick = args.common.quick;
        let sizes = or_default(&args.sizes, if quick { &SIZES_QUICK[..] } else { &SIZES_FULL[..] });
        let rates_hz = or_default(&args.rates, if quick { &RATES_QUICK_HZ[..] } else { &RATES_FULL_HZ[..] });
        let seconds = args.seconds.unwrap_or(if quick { SECONDS_QUICK } else { SECONDS_FULL });
        if sizes.iter().any(|&size| size < STAMP_BYTES) {
            return Err(BenchError::Usage(format!("--sizes: each at least {STAMP_BYTES} bytes (the send time)")));
        }
        if rates_hz.contains(&0) || !(seconds > 0.0 && seconds.is_finite()) {
            return Err(BenchError::Usage("--rates and --seconds must be above 0".into()));
        }
        let fans = args.fans.iter().map(|fan| fan.parse()).collect::<Result<Vec<Fan>, _>>()?;
        let qualities = qualities(&args.modes, &args.policies)?;
        if sizes.is_empty() || rates_hz.is_empty() || fans.is_empty() || qualities.is_empty() {
            return Err(BenchError::Usage("--sizes, --rates, --fans, --modes and --policies need a value each".into()));
        }
        let mut points = Vec::new();
        for &fan in &fans {
            for &qos in &qualities {
                for &size in &sizes {
                    for &rate_hz in &rates_hz {
                        let messages_per_publisher =
                            ((rate_hz as f64 * seconds).round() as u64).max(MESSAGES_PER_PUBLISHER_MIN);
                        points.push(Point { fan, qos, size, rate_hz, messages_per_publisher });
                    }
                }
            }
        }
        Ok(Plan { sizes, rates_hz, fans, qualities, seconds, points })
    }

    /// A guess at the run's length, for the progress bar.
    pub fn expected_duration(&self) -> Duration {
        self.points.iter().map(|point| EXPECTED_POINT_SETUP + point.publish_duration()).sum()
    }
}

fn or_default<T: Copy>(given: &[T], default: &[T]) -> Vec<T> {
    if given.is_empty() {
        default.to_vec()
    } else {
        given.to_vec()
    }
}

/// Every mode with every policy, modes first.
fn qualities(modes: &[String], policies: &[String]) -> Result<Vec<Qos>, BenchError> {
    let mut qualities = Vec::new();
    for mode in modes {
        let mode: DeliveryMode = mode.parse().map_err(|error| BenchError::Usage(format!("--modes: {error}")))?;
        if mode == DeliveryMode::Persistent {
            return Err(BenchError::Usage("--modes: persistent is not available yet".into()));
        }
        for policy in policies {
            let policy: QueuePolicy =
                policy.parse().map_err(|error| BenchError::Usage(format!("--policies: {error}")))?;
            // A disconnected subscriber would end the run, not measure it.
            if policy == QueuePolicy::Disconnect {
                return Err(BenchError::Usage("--policies: disconnect ends a run instead of measuring it".into()));
            }
            qualities.push(Qos { mode, policy });
        }
    }
    Ok(qualities)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::options::CommonArgs;

    pub(crate) fn args(quick: bool) -> DdsArgs {
        DdsArgs {
            sizes: Vec::new(),
            rates: Vec::new(),
            fans: vec!["1:1".into(), "5:1".into(), "1:5".into()],
            modes: vec!["best-effort".into(), "reliable".into()],
            policies: vec!["block".into(), "keep-last:1".into()],
            seconds: None,
            common: CommonArgs { quick, ..CommonArgs::default() },
        }
    }

    #[test]
    fn the_full_grid_crosses_fans_qualities_sizes_and_rates() {
        let plan = Plan::from_args(&args(false)).expect("plan");
        assert_eq!(plan.points.len(), 3 * 4 * 4 * 5);
        let first = plan.points[0];
        assert_eq!(first.fan, Fan { publishers: 1, subscribers: 1 });
        assert_eq!(first.qos, Qos { mode: DeliveryMode::BestEffort, policy: QueuePolicy::Block });
        assert_eq!((first.size, first.rate_hz), (200, 10));
        // 10 Hz for 1.5 s is 15 messages, raised to the minimum.
        assert_eq!(first.messages_per_publisher, MESSAGES_PER_PUBLISHER_MIN);
        assert_eq!(plan.points[4].messages_per_publisher, 3000);
        let last = plan.points[plan.points.len() - 1];
        assert_eq!(last.label(), "1 → 5 reliable keep-last:1 16384 B 2000 Hz");
        assert_eq!((last.messages(), last.deliveries()), (3000, 15_000));
        let fan_in = plan.points.iter().find(|point| point.fan.publishers == 5).expect("5 → 1");
        assert_eq!((fan_in.messages(), fan_in.deliveries()), (100, 100));
        // Under the ten minutes a full run may take.
        assert!(plan.expected_duration() < Duration::from_secs(480), "{:?}", plan.expected_duration());
    }

    #[test]
    fn the_quick_grid_takes_seconds() {
        let plan = Plan::from_args(&args(true)).expect("plan");
        assert_eq!(plan.points.len(), 3 * 4 * 2 * 2);
        assert!(plan.expected_duration() < Duration::from_secs(20), "{:?}", plan.expected_duration());
    }

    #[test]
    fn qualities_are_named_as_dds_names_them() {
        let keep_all = Qos { mode: DeliveryMode::Reliable, policy: QueuePolicy::Block };
        let keep_last = Qos { mode: DeliveryMode::BestEffort, policy: QueuePolicy::KeepLast(1) };
        assert_eq!(
            (keep_all.label(), keep_last.label()),
            ("reliable keep-all".into(), "best-effort keep-last:1".into())
        );
    }

    #[test]
    fn fans_parse_and_bad_grids_are_refused() {
        assert_eq!("5:1".parse::<Fan>().expect("fan"), Fan { publishers: 5, subscribers: 1 });
        for bad in ["5", "0:1", "1:x", "1:65"] {
            assert!(bad.parse::<Fan>().is_err(), "{bad}");
        }
        let refused = |change: fn(&mut DdsArgs)| {
            let mut bad = args(true);
            change(&mut bad);
            Plan::from_args(&bad).is_err()
        };
        assert!(refused(|args| args.sizes = vec![4]));
        assert!(refused(|args| args.rates = vec![0]));
        assert!(refused(|args| args.seconds = Some(0.0)));
        assert!(refused(|args| args.modes = vec!["persistent".into()]));
        assert!(refused(|args| args.policies = vec!["disconnect".into()]));
        assert!(refused(|args| args.policies = vec!["keep-last:0".into()]));
        assert!(refused(|args| args.fans = Vec::new()));
    }
}
