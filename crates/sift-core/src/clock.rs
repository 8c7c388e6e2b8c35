//! Clock offset estimation from four-timestamp exchanges, as NTP does it.
//!
//! A requester writes its clock reading `origin` into a request; the peer
//! notes its own clock when the request arrives (`receive`) and when the reply
//! leaves (`transmit`); the requester notes `arrival`. Then
//!
//! - the round trip is `(arrival − origin) − (transmit − receive)`, the time
//!   spent on the wire both ways, without the peer's own handling time;
//! - the offset (peer clock − local clock) is
//!   `((receive − origin) + (transmit − arrival)) / 2`, exact when both legs
//!   take equally long;
//! - whatever the split between the legs, the true offset lies within half a
//!   round trip of that value. That half round trip is the error bound.
//!
//! Queues on either side lengthen one leg more than the other, so samples
//! with a long round trip carry a wrong offset *and* a wide bound. Like NTP's
//! clock filter, [`ClockFilter`] keeps the last [`CLOCK_FILTER_SAMPLES`]
//! samples and trusts the one with the shortest round trip. Since clocks
//! drift apart, a sample's bound grows with its age by
//! [`CLOCK_DRIFT_PPM_MAX`], the frequency error allowed to a pair of
//! ordinary quartz clocks.
//!
//! The module is sans-IO: whoever sends the requests feeds the timestamps in
//! and asks for the estimate. The client uses it towards its broker, and each
//! broker towards its neighbours over links, so that a publisher's timestamp
//! can be carried into any receiver's clock with a bound that adds up the
//! bounds of each hop.

use std::collections::VecDeque;

/// Samples a [`ClockFilter`] keeps; NTP's clock filter keeps eight.
pub const CLOCK_FILTER_SAMPLES: usize = 8;

/// Largest frequency difference assumed between two clocks, in parts per
/// million: a sample's error bound grows by this much of its age.
pub const CLOCK_DRIFT_PPM_MAX: u64 = 50;

/// The four timestamps of one exchange, each in nanoseconds since the Unix
/// epoch by the clock that read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeExchange {
    /// The requester's clock when it sent the request.
    pub origin_ns: u64,
    /// The peer's clock when the request arrived.
    pub receive_ns: u64,
    /// The peer's clock when the reply left.
    pub transmit_ns: u64,
    /// The requester's clock when the reply arrived.
    pub arrival_ns: u64,
}

/// What one exchange says about the peer's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Peer clock minus local clock.
    pub offset_ns: i64,
    /// Time on the wire, both ways.
    pub round_trip_ns: u64,
    /// Local clock when the reply arrived (for the sample's age).
    pub taken_at_ns: u64,
}

impl ClockSample {
    /// The sample of `exchange`. A negative round trip (the peer's handling
    /// time exceeding the whole exchange, which only clock steps cause)
    /// counts as zero rather than as a bound tighter than possible.
    pub fn of(exchange: TimeExchange) -> ClockSample {
        let TimeExchange { origin_ns, receive_ns, transmit_ns, arrival_ns } = exchange;
        let elapsed = i128::from(arrival_ns) - i128::from(origin_ns);
        let held = i128::from(transmit_ns) - i128::from(receive_ns);
        let round_trip = (elapsed - held).max(0);
        let forward = i128::from(receive_ns) - i128::from(origin_ns);
        let backward = i128::from(transmit_ns) - i128::from(arrival_ns);
        let offset = (forward + backward) / 2;
        ClockSample {
            offset_ns: offset.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
            round_trip_ns: round_trip.min(i128::from(u64::MAX)) as u64,
            taken_at_ns: arrival_ns,
        }
    }
}

/// The current belief about a peer's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockEstimate {
    /// Peer clock minus local clock.
    pub offset_ns: i64,
    /// Round trip of the sample the estimate rests on.
    pub round_trip_ns: u64,
    /// The true offset is within this much of `offset_ns`: half the round
    /// trip, plus the drift allowed since the sample was taken.
    pub error_ns: u64,
    /// Samples held.
    pub samples: u32,
}

impl ClockEstimate {
    /// The estimate of a clock compared with itself: no offset, no error.
    pub const EXACT: ClockEstimate = ClockEstimate { offset_ns: 0, round_trip_ns: 0, error_ns: 0, samples: 0 };

    /// A local clock reading expressed in the peer's clock.
    pub fn to_peer(&self, local_ns: u64) -> u64 {
        local_ns.saturating_add_signed(self.offset_ns)
    }

    /// A peer clock reading expressed in the local clock.
    pub fn to_local(&self, peer_ns: u64) -> u64 {
        peer_ns.saturating_add_signed(self.offset_ns.saturating_neg())
    }
}

/// The last [`CLOCK_FILTER_SAMPLES`] samples of one peer's clock.
#[derive(Debug, Clone, Default)]
pub struct ClockFilter {
    samples: VecDeque<ClockSample>,
}

impl ClockFilter {
    /// An empty filter.
    pub fn new() -> ClockFilter {
        ClockFilter { samples: VecDeque::with_capacity(CLOCK_FILTER_SAMPLES) }
    }

    /// Adds one sample, dropping the oldest beyond [`CLOCK_FILTER_SAMPLES`].
    pub fn add(&mut self, sample: ClockSample) {
        if self.samples.len() == CLOCK_FILTER_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
        debug_assert!(self.samples.len() <= CLOCK_FILTER_SAMPLES);
    }

    /// Adds the sample of one exchange.
    pub fn add_exchange(&mut self, exchange: TimeExchange) {
        self.add(ClockSample::of(exchange));
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True before the first sample.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The estimate at local time `now_ns`: the sample with the smallest
    /// bound at that moment (round trip and age both count); `None` before
    /// the first sample.
    pub fn estimate(&self, now_ns: u64) -> Option<ClockEstimate> {
        let bound = |sample: &ClockSample| sample_error_ns(sample, now_ns);
        let best = self.samples.iter().min_by_key(|sample| bound(sample))?;
        Some(ClockEstimate {
            offset_ns: best.offset_ns,
            round_trip_ns: best.round_trip_ns,
            error_ns: bound(best),
            samples: self.samples.len() as u32,
        })
    }
}

/// The bound of `sample` at local time `now_ns`: half its round trip plus
/// the drift allowed over its age.
fn sample_error_ns(sample: &ClockSample, now_ns: u64) -> u64 {
    let age_ns = now_ns.saturating_sub(sample.taken_at_ns);
    let drift_ns = age_ns / 1_000_000 * CLOCK_DRIFT_PPM_MAX;
    sample.round_trip_ns.div_ceil(2).saturating_add(drift_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An exchange with a peer whose clock is `offset_ns` ahead, legs of
    /// `forward_ns` and `backward_ns`, and `held_ns` at the peer.
    fn exchange(start_ns: u64, offset_ns: i64, forward_ns: u64, held_ns: u64, backward_ns: u64) -> TimeExchange {
        let receive_ns = (start_ns + forward_ns).saturating_add_signed(offset_ns);
        TimeExchange {
            origin_ns: start_ns,
            receive_ns,
            transmit_ns: receive_ns + held_ns,
            arrival_ns: start_ns + forward_ns + held_ns + backward_ns,
        }
    }

    #[test]
    fn symmetric_legs_give_the_exact_offset() {
        let sample = ClockSample::of(exchange(10_000_000_000, -5_000_000_000, 300, 50, 300));
        assert_eq!(sample.offset_ns, -5_000_000_000);
        assert_eq!(sample.round_trip_ns, 600);
    }

    #[test]
    fn the_shortest_round_trip_wins() {
        let mut filter = ClockFilter::new();
        let base = 10_000_000_000;
        filter.add_exchange(exchange(base, 1_000, 5_000, 0, 100));
        filter.add_exchange(exchange(base + 1_000, 1_000, 100, 0, 120));
        filter.add_exchange(exchange(base + 2_000, 1_000, 100, 0, 9_000));
        let estimate = filter.estimate(base + 20_000).expect("samples");
        assert_eq!(estimate.round_trip_ns, 220);
        assert_eq!(estimate.offset_ns, 1_000 + (100 - 120) / 2);
        assert_eq!(estimate.samples, 3);
    }

    #[test]
    fn the_filter_keeps_the_last_eight() {
        let mut filter = ClockFilter::new();
        // A very good early sample falls out once eight later ones arrive.
        filter.add_exchange(exchange(0, 0, 1, 0, 1));
        for index in 0..CLOCK_FILTER_SAMPLES as u64 {
            filter.add_exchange(exchange(1_000 + index, 0, 500, 0, 500));
        }
        assert_eq!(filter.len(), CLOCK_FILTER_SAMPLES);
        assert_eq!(filter.estimate(10_000).expect("samples").round_trip_ns, 1_000);
    }

    #[test]
    fn the_bound_grows_with_age() {
        let mut filter = ClockFilter::new();
        filter.add_exchange(exchange(0, 0, 1_000, 0, 1_000));
        let fresh = filter.estimate(2_000).expect("sample").error_ns;
        let one_second_later = filter.estimate(1_000_002_000).expect("sample").error_ns;
        assert_eq!(fresh, 1_000);
        assert_eq!(one_second_later, 1_000 + 1_000 * CLOCK_DRIFT_PPM_MAX);
    }

    #[test]
    fn conversions_are_inverse() {
        let estimate = ClockEstimate { offset_ns: -7_000, round_trip_ns: 0, error_ns: 0, samples: 1 };
        assert_eq!(estimate.to_peer(10_000), 3_000);
        assert_eq!(estimate.to_local(3_000), 10_000);
        assert_eq!(estimate.to_peer(10), 0, "saturates at the epoch");
    }

    proptest! {
        /// Whatever the split between the legs, the true offset lies within
        /// the estimate's bound.
        #[test]
        fn the_true_offset_is_within_the_bound(
            offset_ns in -1_000_000_000_000i64..1_000_000_000_000,
            legs in prop::collection::vec((0u64..50_000_000, 0u64..1_000_000, 0u64..50_000_000), 1..12),
        ) {
            let mut filter = ClockFilter::new();
            let mut now_ns = 2_000_000_000_000u64;
            for (forward_ns, held_ns, backward_ns) in legs {
                let one = exchange(now_ns, offset_ns, forward_ns, held_ns, backward_ns);
                now_ns = one.arrival_ns + 1_000;
                filter.add_exchange(one);
            }
            let estimate = filter.estimate(now_ns).expect("samples");
            let miss = (i128::from(estimate.offset_ns) - i128::from(offset_ns)).unsigned_abs();
            prop_assert!(miss <= u128::from(estimate.error_ns), "missed by {miss} with bound {}", estimate.error_ns);
        }
    }
}

/// Nanoseconds since the Unix epoch by the system clock, or 0 before it.
pub fn system_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
}

/// The clock a broker reads when it stamps messages and checks their
/// expiry: the system's, or a [`ManualClock`] that a test advances, so that
/// a test of a time-to-live moves time instead of waiting for it.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    manual: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that reads `start_ns` until the returned handle moves it.
    pub fn manual(start_ns: u64) -> (Clock, ManualClock) {
        let time_ns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(start_ns));
        (Clock { manual: Some(time_ns.clone()) }, ManualClock { time_ns })
    }

    /// Nanoseconds since the Unix epoch, by this clock.
    pub fn now_ns(&self) -> u64 {
        match &self.manual {
            None => system_now_ns(),
            Some(time_ns) => time_ns.load(std::sync::atomic::Ordering::Acquire),
        }
    }
}

/// Moves a manual [`Clock`] (forward only: the broker's clock never runs
/// backwards, and nothing of it expects to).
#[derive(Debug, Clone)]
pub struct ManualClock {
    time_ns: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl ManualClock {
    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let by_ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.time_ns.fetch_add(by_ns, std::sync::atomic::Ordering::AcqRel);
    }

    /// What the clock reads now.
    pub fn now_ns(&self) -> u64 {
        self.time_ns.load(std::sync::atomic::Ordering::Acquire)
    }
}

#[cfg(test)]
mod manual_clock_tests {
    use super::*;

    #[test]
    fn a_manual_clock_reads_what_its_handle_set_and_the_system_clock_moves() {
        let (clock, handle) = Clock::manual(1_000);
        assert_eq!(clock.now_ns(), 1_000);
        handle.advance(std::time::Duration::from_micros(2));
        assert_eq!((clock.now_ns(), handle.now_ns()), (3_000, 3_000));
        assert!(Clock::system().now_ns() > 1_600_000_000_000_000_000, "after 2020");
    }
}
