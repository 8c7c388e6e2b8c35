//! The time-ordering buffer: NaradaBrokering's buffering service.
//!
//! Messages from several publishers, or over several paths, arrive out of
//! the order in which they were sent. The buffer holds them sorted by their
//! (corrected) publisher timestamps and releases the earliest when one of
//! four rules fires:
//!
//! 1. it holds `max_entries` messages;
//! 2. it holds `max_bytes` of payload (with rule 1, no overflow);
//! 3. a message has waited `max_wait` (a slow stream is not held forever);
//! 4. and whenever one of those fires, at least `release_factor` × the
//!    messages held go out, not just one, so that a full buffer does not
//!    release one message per arrival.
//!
//! After a release, every message still held that has itself waited
//! `max_wait` goes too (in timestamp order, so earlier ones with it).
//! A message older than one already released cannot be put back in order:
//! it is *late*, released at once and counted.
//!
//! The buffer is sans-IO: the caller passes the time in and asks when to
//! look again ([`OrderingBuffer::next_deadline_ns`]); `sift sub --order`
//! and [`crate::TimeDifferential`] drive it.

use std::collections::BTreeMap;
use std::time::Duration;

/// Largest `max_entries` accepted: the buffer's own bound.
pub const ORDERING_ENTRIES_MAX: usize = 1 << 20;

/// The four release rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrderingConfig {
    /// Rule 1: release when this many messages are held.
    pub max_entries: usize,
    /// Rule 2: release when this many payload bytes are held.
    pub max_bytes: usize,
    /// Rule 3: release when a message has waited this long.
    pub max_wait: Duration,
    /// Rule 4: each release lets out at least this share of what is held
    /// (0.5 to 1.0).
    pub release_factor: f64,
}

impl Default for OrderingConfig {
    fn default() -> Self {
        OrderingConfig {
            max_entries: 1_000,
            max_bytes: 16 * 1024 * 1024,
            max_wait: Duration::from_millis(200),
            release_factor: 0.5,
        }
    }
}

/// Why an ordering specification was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OrderingError {
    /// A `key=value` item is malformed or names no rule.
    #[error("ordering: {0:?} is not one of entries=N, bytes=B, wait=MS, release=F")]
    UnknownItem(String),
    /// A value does not parse or is out of range.
    #[error("ordering: {key} = {value:?}: {why}")]
    BadValue {
        /// The rule.
        key: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        why: String,
    },
}

impl OrderingConfig {
    /// Parses `entries=N,bytes=B,wait=MS,release=F`; rules not named keep
    /// their defaults.
    pub fn parse(spec: &str) -> Result<OrderingConfig, OrderingError> {
        let mut config = OrderingConfig::default();
        for item in spec.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(OrderingError::UnknownItem(item.to_string()));
            };
            let bad = |key: &'static str, why: &str| OrderingError::BadValue {
                key,
                value: value.to_string(),
                why: why.to_string(),
            };
            match key.trim() {
                "entries" => config.max_entries = value.parse().map_err(|_| bad("entries", "a count"))?,
                "bytes" => config.max_bytes = value.parse().map_err(|_| bad("bytes", "a byte count"))?,
                "wait" => {
                    let wait_ms: f64 = value.parse().map_err(|_| bad("wait", "milliseconds"))?;
                    if !(wait_ms.is_finite() && wait_ms >= 0.0) {
                        return Err(bad("wait", "milliseconds, 0 or more"));
                    }
                    config.max_wait = Duration::from_secs_f64(wait_ms / 1000.0);
                }
                "release" => config.release_factor = value.parse().map_err(|_| bad("release", "a number"))?,
                _ => return Err(OrderingError::UnknownItem(item.to_string())),
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks the ranges: at least one entry, at least one byte, a factor
    /// from 0.5 to 1.0, at most [`ORDERING_ENTRIES_MAX`] entries.
    pub fn validate(&self) -> Result<(), OrderingError> {
        let bad = |key, value: String, why: &str| Err(OrderingError::BadValue { key, value, why: why.to_string() });
        if self.max_entries == 0 || self.max_entries > ORDERING_ENTRIES_MAX {
            return bad("entries", self.max_entries.to_string(), "1 to 1048576");
        }
        if self.max_bytes == 0 {
            return bad("bytes", self.max_bytes.to_string(), "at least 1");
        }
        if !(0.5..=1.0).contains(&self.release_factor) {
            return bad("release", self.release_factor.to_string(), "from 0.5 to 1.0");
        }
        Ok(())
    }
}

/// What the buffer has done, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrderingCounters {
    /// Messages released in order.
    pub released: u64,
    /// Messages released at once because a later one had already gone.
    pub late: u64,
    /// Releases fired by rule 1 (entries).
    pub fired_entries: u64,
    /// Releases fired by rule 2 (bytes).
    pub fired_bytes: u64,
    /// Releases fired by rule 3 (wait).
    pub fired_wait: u64,
}

/// One held message.
#[derive(Debug)]
struct Held<T> {
    item: T,
    bytes: usize,
    arrived_ns: u64,
}

/// Messages held in timestamp order until a rule releases them.
#[derive(Debug)]
pub struct OrderingBuffer<T> {
    config: OrderingConfig,
    /// By (timestamp, arrival number): ties keep arrival order.
    by_time: BTreeMap<(u64, u64), Held<T>>,
    /// By (arrival time, arrival number) → timestamp: the longest waiting.
    by_arrival: BTreeMap<(u64, u64), u64>,
    bytes: usize,
    arrivals: u64,
    /// The timestamp of the last message released in order.
    released_up_to_ns: Option<u64>,
    counters: OrderingCounters,
}

impl<T> OrderingBuffer<T> {
    /// An empty buffer with `config`'s rules (validated by the caller).
    pub fn new(config: OrderingConfig) -> OrderingBuffer<T> {
        OrderingBuffer {
            config,
            by_time: BTreeMap::new(),
            by_arrival: BTreeMap::new(),
            bytes: 0,
            arrivals: 0,
            released_up_to_ns: None,
            counters: OrderingCounters::default(),
        }
    }

    /// Messages held.
    pub fn len(&self) -> usize {
        self.by_time.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.by_time.is_empty()
    }

    /// What the buffer has done so far.
    pub fn counters(&self) -> OrderingCounters {
        self.counters
    }

    /// Takes in `item`, sent at `timestamp_ns`, of `bytes` payload, arriving
    /// at `now_ns`; appends to `out` whatever this releases (the item
    /// itself at once when it is late).
    pub fn push(&mut self, item: T, timestamp_ns: u64, bytes: usize, now_ns: u64, out: &mut Vec<T>) {
        if self.released_up_to_ns.is_some_and(|released_ns| timestamp_ns < released_ns) {
            self.counters.late += 1;
            out.push(item);
            return;
        }
        let arrival = self.arrivals;
        self.arrivals += 1;
        self.by_time.insert((timestamp_ns, arrival), Held { item, bytes, arrived_ns: now_ns });
        self.by_arrival.insert((now_ns, arrival), timestamp_ns);
        self.bytes += bytes;
        self.poll(now_ns, out);
    }

    /// Applies the rules at `now_ns`, appending released messages to `out`.
    pub fn poll(&mut self, now_ns: u64, out: &mut Vec<T>) {
        let fired = if self.by_time.len() >= self.config.max_entries {
            &mut self.counters.fired_entries
        } else if self.bytes >= self.config.max_bytes {
            &mut self.counters.fired_bytes
        } else if self.oldest_waited(now_ns) {
            &mut self.counters.fired_wait
        } else {
            return;
        };
        *fired += 1;
        let share = (self.config.release_factor * self.by_time.len() as f64).ceil() as usize;
        for _ in 0..share.max(1) {
            self.release_first(out);
        }
        while self.oldest_waited(now_ns) {
            self.release_first(out);
        }
        debug_assert_eq!(self.by_time.len(), self.by_arrival.len());
    }

    /// When [`Self::poll`] should next be called if nothing arrives: when
    /// the longest-waiting message reaches `max_wait`.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        let (&(arrived_ns, _), _) = self.by_arrival.first_key_value()?;
        Some(arrived_ns.saturating_add(self.config.max_wait.as_nanos().min(u128::from(u64::MAX)) as u64))
    }

    /// Releases everything held, in order (the stream ended).
    pub fn drain(&mut self, out: &mut Vec<T>) {
        while !self.by_time.is_empty() {
            self.release_first(out);
        }
    }

    fn oldest_waited(&self, now_ns: u64) -> bool {
        self.next_deadline_ns().is_some_and(|deadline_ns| deadline_ns <= now_ns)
    }

    /// Releases the message with the smallest timestamp.
    fn release_first(&mut self, out: &mut Vec<T>) {
        let Some(((timestamp_ns, arrival), held)) = self.by_time.pop_first() else { return };
        let removed = self.by_arrival.remove(&(held.arrived_ns, arrival));
        debug_assert_eq!(removed, Some(timestamp_ns), "both indexes hold every message");
        debug_assert!(self.released_up_to_ns.is_none_or(|released_ns| released_ns <= timestamp_ns));
        self.bytes -= held.bytes;
        self.released_up_to_ns = Some(timestamp_ns);
        self.counters.released += 1;
        out.push(held.item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    fn config(max_entries: usize, max_bytes: usize, max_wait_ms: u64, release_factor: f64) -> OrderingConfig {
        OrderingConfig { max_entries, max_bytes, max_wait: Duration::from_millis(max_wait_ms), release_factor }
    }

    /// Pushes (timestamp, bytes) at `now_ns`; returns the released timestamps.
    fn push_all(buffer: &mut OrderingBuffer<u64>, items: &[(u64, usize)], now_ns: u64) -> Vec<u64> {
        let mut out = Vec::new();
        for &(timestamp_ns, bytes) in items {
            buffer.push(timestamp_ns, timestamp_ns, bytes, now_ns, &mut out);
        }
        out
    }

    #[test]
    fn rule_one_entries_releases_the_earliest_share() {
        let mut buffer = OrderingBuffer::new(config(4, usize::MAX, 60_000, 0.5));
        let released = push_all(&mut buffer, &[(40, 1), (10, 1), (30, 1)], 0);
        assert!(released.is_empty(), "three of four held");
        let released = push_all(&mut buffer, &[(20, 1)], 0);
        assert_eq!(released, vec![10, 20], "half of four, earliest first");
        assert_eq!(buffer.counters().fired_entries, 1);
        assert_eq!(buffer.len(), 2);
    }

    #[test]
    fn rule_two_bytes_fires_before_the_entry_count() {
        let mut buffer = OrderingBuffer::new(config(1_000, 100, 60_000, 1.0));
        assert!(push_all(&mut buffer, &[(5, 60)], 0).is_empty());
        let released = push_all(&mut buffer, &[(3, 50)], 0);
        assert_eq!(released, vec![3, 5], "factor 1.0 empties the buffer");
        assert_eq!(buffer.counters().fired_bytes, 1);
        assert_eq!(buffer.counters().fired_entries, 0);
    }

    #[test]
    fn rule_three_wait_releases_a_slow_stream() {
        let mut buffer = OrderingBuffer::new(config(1_000, usize::MAX, 10, 0.5));
        assert!(push_all(&mut buffer, &[(2, 1)], 0).is_empty());
        assert!(push_all(&mut buffer, &[(1, 1)], 4 * MS).is_empty());
        assert_eq!(buffer.next_deadline_ns(), Some(10 * MS));
        let mut out = Vec::new();
        buffer.poll(9 * MS, &mut out);
        assert!(out.is_empty(), "not yet");
        buffer.poll(10 * MS, &mut out);
        // The first arrival (timestamp 2) waited 10 ms; the one sent
        // earlier (timestamp 1) must go before it.
        assert_eq!(out, vec![1, 2]);
        assert_eq!(buffer.counters().fired_wait, 1);
    }

    #[test]
    fn rule_four_factor_sets_the_share() {
        for (factor, expected) in [(0.5, 5usize), (0.75, 8), (1.0, 10)] {
            let mut buffer = OrderingBuffer::new(config(10, usize::MAX, 60_000, factor));
            let items: Vec<(u64, usize)> = (0..10).rev().map(|timestamp| (timestamp, 1)).collect();
            let released = push_all(&mut buffer, &items, 0);
            assert_eq!(released, (0..expected as u64).collect::<Vec<_>>(), "factor {factor}");
        }
    }

    #[test]
    fn a_late_message_goes_at_once_and_is_counted() {
        let mut buffer = OrderingBuffer::new(config(2, usize::MAX, 60_000, 0.5));
        assert_eq!(push_all(&mut buffer, &[(10, 1), (20, 1)], 0), vec![10]);
        assert_eq!(push_all(&mut buffer, &[(5, 1)], 0), vec![5]);
        assert_eq!(buffer.counters().late, 1);
    }

    #[test]
    fn the_specification_parses_and_checks_ranges() {
        let parsed = OrderingConfig::parse("entries=8, bytes=4096,wait=2.5,release=0.75").expect("valid");
        assert_eq!(parsed, config(8, 4096, 0, 0.75).with_wait(Duration::from_micros(2_500)));
        assert!(matches!(OrderingConfig::parse("release=0.4"), Err(OrderingError::BadValue { key: "release", .. })));
        assert!(matches!(OrderingConfig::parse("entries=0"), Err(OrderingError::BadValue { key: "entries", .. })));
        assert!(matches!(OrderingConfig::parse("size=3"), Err(OrderingError::UnknownItem(_))));
        assert!(matches!(OrderingConfig::parse("wait=-1"), Err(OrderingError::BadValue { key: "wait", .. })));
    }

    impl OrderingConfig {
        fn with_wait(mut self, max_wait: Duration) -> Self {
            self.max_wait = max_wait;
            self
        }
    }

    proptest! {
        /// Whatever arrives when, every message comes out exactly once, the
        /// in-order ones in timestamp order, none held past `max_wait` once
        /// polled, and the bound on entries holds.
        #[test]
        fn every_message_once_in_order(
            items in prop::collection::vec((0u64..1_000, 1usize..100, 0u64..3), 1..200),
            max_entries in 1usize..20,
            factor in 0.5f64..=1.0,
        ) {
            let mut buffer = OrderingBuffer::new(config(max_entries, 500, 5, factor));
            let mut out = Vec::new();
            let mut now_ns = 0;
            for (index, &(timestamp, bytes, step_ms)) in items.iter().enumerate() {
                now_ns += step_ms * MS;
                buffer.poll(now_ns, &mut out);
                buffer.push((timestamp, index), timestamp, bytes, now_ns, &mut out);
                prop_assert!(buffer.len() < max_entries.max(2));
                prop_assert!(!buffer.oldest_waited(now_ns));
            }
            buffer.drain(&mut out);
            let mut seen: Vec<usize> = out.iter().map(|&(_, index)| index).collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..items.len()).collect::<Vec<_>>());
            let late = buffer.counters().late as usize;
            prop_assert_eq!(buffer.counters().released as usize + late, items.len());
        }
    }
}
