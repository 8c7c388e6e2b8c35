//! The Grid Event Service matching-rate workload (GES thesis §8.2.1).
//!
//! The thesis publishes "events of 6 tag-value pairs, with the matching
//! being determined by varying the value contained in the fourth tag"; every
//! client profile has "their first 3 ⟨tag=value⟩ pairs identical to the first
//! 3 pairs contained in every published event", and the publisher's
//! "footprints" are chosen so that a client receives 100, 50, 25 or 10 % of
//! the events (§8.2, Fig. 8.3.1-8.3.4).
//!
//! The thesis names neither the tags nor their values, so this module maps
//! its description as follows:
//!
//! | tag    | in events                          | in profiles (subscriptions) |
//! |--------|------------------------------------|-----------------------------|
//! | `tag1`-`tag3` | one seeded string each, the same in every event | equal to it (`tag1="..."`) |
//! | `tag4` | the footprint, an integer `0..K`   | equal to one footprint      |
//! | `tag5` | a seeded integer, different per event | absent                   |
//! | `tag6` | a seeded string, different per event  | absent                   |
//!
//! With `K` footprints an event matches exactly the profiles with its
//! footprint. Profile `i` takes footprint `i mod K`, so an event matches
//! exactly `1/K` of any `n·K` consecutive profiles; events take the
//! footprints of each block of `K` consecutive events in a seeded shuffled
//! order, so a profile matches exactly `1/K` of any `n·K` events aligned on
//! a block. Both of the thesis's readings of "matching rate" (the share of
//! events a client receives, the share of clients an event reaches) are then
//! the rate `100/K` %. `K` is the whole number whose `100/K` is closest to
//! the rate asked for: exact for the thesis's 100/50/25/10 % and every other
//! divisor of 100; 30 % becomes 33.3 % and 75 % becomes 50 %
//! ([`GesWorkload::effective_rate_percent`] says which).

use bytes::Bytes;

use crate::message::{Message, Value};
use crate::topic::TopicName;
use crate::workload::seed::{item_rng, Stream};
use crate::workload::{text, Subscription, Workload, WorkloadError, LANGUAGE_TAGS};

/// The topic GES events are published on, and the topic filter of every
/// profile: the thesis's experiment routes on content alone.
pub const GES_TOPIC: &str = "ges.events";

/// The tag names, in event order: six pairs per event (§8.2.1).
pub const TAG_NAMES: [&str; 6] = ["tag1", "tag2", "tag3", "tag4", "tag5", "tag6"];

/// How many leading tags every profile shares with every event (§8.2.1).
pub const SHARED_TAG_COUNT: usize = 3;

/// Index in [`TAG_NAMES`] of the tag whose value sets the matching rate.
pub const FOOTPRINT_TAG_INDEX: usize = 3;

/// Index in [`TAG_NAMES`] of the per-event integer tag, which no profile tests.
const FREE_INTEGER_TAG_INDEX: usize = 4;

/// Index in [`TAG_NAMES`] of the per-event string tag, which no profile tests.
const FREE_TEXT_TAG_INDEX: usize = 5;

/// The matching rates of the thesis's experiments, in percent (§8.2.1).
pub const SEED_MATCHING_RATES: [u32; 4] = [100, 50, 25, 10];

/// Default payload size: the smallest event of Fig. 8.3.1-8.3.4 (50 bytes);
/// the thesis varies it from 30 to 500 bytes.
pub const PAYLOAD_BYTES_DEFAULT: usize = 50;

/// A matching rate of 100 %.
const PERCENT_ALL: u32 = 100;

/// Length of the seeded strings in `tag1`-`tag3` and `tag6`.
const VALUE_LETTERS: usize = 6;

/// `tag5` values are drawn from `0..TAG5_VALUE_LIMIT`.
const TAG5_VALUE_LIMIT: i64 = 1000;

/// Stream of the three shared values.
const SHARED_STREAM: Stream = Stream(0x6765_7301);

/// Stream of the per-event values and payloads.
const EVENT_STREAM: Stream = Stream(0x6765_7302);

/// Stream of the footprint order within each block of events.
const BLOCK_STREAM: Stream = Stream(0x6765_7303);

/// A seeded GES workload at one matching rate.
#[derive(Debug, Clone)]
pub struct GesWorkload {
    seed: u64,
    footprint_count: u32,
    shared_values: [String; SHARED_TAG_COUNT],
    topic: TopicName,
    payload_bytes: usize,
}

impl GesWorkload {
    /// A workload whose events each match `matching_rate_percent` of the
    /// profiles (1-100, rounded to `100/K` as the module explains).
    pub fn new(seed: u64, matching_rate_percent: u32) -> Result<GesWorkload, WorkloadError> {
        if matching_rate_percent == 0 || matching_rate_percent > PERCENT_ALL {
            return Err(WorkloadError::MatchingRate { percent: matching_rate_percent });
        }
        let mut rng = item_rng(seed, SHARED_STREAM, 0);
        let shared_values = std::array::from_fn(|_| letters(&mut rng));
        Ok(GesWorkload {
            seed,
            footprint_count: footprints_for_rate(matching_rate_percent),
            shared_values,
            topic: TopicName::new(GES_TOPIC)?,
            payload_bytes: PAYLOAD_BYTES_DEFAULT,
        })
    }

    /// The same workload with payloads of `bytes` bytes (30-500 in §8.2.1).
    pub fn with_payload_bytes(mut self, bytes: usize) -> GesWorkload {
        self.payload_bytes = bytes;
        self
    }

    /// `K`, the number of distinct footprints in `tag4`.
    pub fn footprint_count(&self) -> u32 {
        self.footprint_count
    }

    /// The matching rate the workload produces, `100/K` percent.
    pub fn effective_rate_percent(&self) -> f64 {
        f64::from(PERCENT_ALL) / f64::from(self.footprint_count)
    }

    /// Profile `index`: the three shared pairs and footprint `index mod K`,
    /// as a tags filter such as `tag1="qhzkwe",tag2="…",tag3="…",tag4=1`.
    pub fn subscription(&self, index: u64) -> Subscription {
        let footprint = index % u64::from(self.footprint_count);
        let mut filter = String::new();
        for (name, value) in TAG_NAMES.iter().zip(&self.shared_values) {
            filter.push_str(&format!("{name}=\"{value}\","));
        }
        filter.push_str(&format!("{}={footprint}", TAG_NAMES[FOOTPRINT_TAG_INDEX]));
        (GES_TOPIC.to_string(), LANGUAGE_TAGS, filter)
    }

    /// Event `index`: six tag=value properties and a textual payload.
    pub fn event(&self, index: u64) -> Message {
        let mut rng = item_rng(self.seed, EVENT_STREAM, index);
        let mut properties: Vec<(String, Value)> = TAG_NAMES
            .iter()
            .zip(&self.shared_values)
            .map(|(name, value)| (name.to_string(), Value::Str(value.as_str().into())))
            .collect();
        let footprint = i64::from(self.footprint(index));
        properties.push((TAG_NAMES[FOOTPRINT_TAG_INDEX].to_string(), Value::Int(footprint)));
        properties.push((TAG_NAMES[FREE_INTEGER_TAG_INDEX].to_string(), Value::Int(rng.i64(0..TAG5_VALUE_LIMIT))));
        properties.push((TAG_NAMES[FREE_TEXT_TAG_INDEX].to_string(), Value::Str(letters(&mut rng).into())));
        let payload: Bytes = text::payload(&mut rng, self.payload_bytes);
        let mut message = Message::new(self.topic.clone(), payload);
        message.properties = properties;
        message
    }

    /// The footprint of event `index`: its place in a seeded shuffle of
    /// `0..K` for its block of `K` consecutive events.
    fn footprint(&self, index: u64) -> u32 {
        let count = u64::from(self.footprint_count);
        let mut order: Vec<u32> = (0..self.footprint_count).collect();
        item_rng(self.seed, BLOCK_STREAM, index / count).shuffle(&mut order);
        // The position is below `count`, itself at most 100.
        order[(index % count) as usize]
    }
}

impl Workload for GesWorkload {
    fn subscription(&self, index: u64) -> Subscription {
        GesWorkload::subscription(self, index)
    }

    fn message(&self, index: u64) -> Message {
        self.event(index)
    }
}

/// The number of footprints `K` in 1..=100 whose rate `100/K` % is closest
/// to `percent`; on a tie, the larger `K` (the lower rate).
fn footprints_for_rate(percent: u32) -> u32 {
    let mut best = PERCENT_ALL;
    for candidate in (1..=PERCENT_ALL).rev() {
        // |100/K - rate| = |100 - rate·K| / K, compared without division.
        let error = |count: u32| PERCENT_ALL.abs_diff(percent * count);
        if error(candidate) * best < error(best) * candidate {
            best = candidate;
        }
    }
    best
}

/// A seeded lowercase string of [`VALUE_LETTERS`] letters.
fn letters(rng: &mut fastrand::Rng) -> String {
    (0..VALUE_LETTERS).map(|_| rng.lowercase()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(seed: u64, rate: u32) -> GesWorkload {
        GesWorkload::new(seed, rate).expect("valid rate")
    }

    #[test]
    fn rates_round_to_the_closest_reachable_rate() {
        let cases = [(100, 1), (50, 2), (25, 4), (10, 10), (1, 100), (30, 3), (40, 3), (75, 2), (60, 2), (90, 1)];
        for (rate, footprints) in cases {
            assert_eq!(workload(1, rate).footprint_count(), footprints, "{rate} %");
        }
        for rate in SEED_MATCHING_RATES {
            assert_eq!(workload(1, rate).effective_rate_percent(), f64::from(rate));
        }
        assert_eq!(GesWorkload::new(1, 0).err(), Some(WorkloadError::MatchingRate { percent: 0 }));
        assert_eq!(GesWorkload::new(1, 101).err(), Some(WorkloadError::MatchingRate { percent: 101 }));
    }

    #[test]
    fn events_have_six_tags_sharing_the_first_three_with_profiles() {
        let ges = workload(9, 25);
        let (topic, language, filter) = ges.subscription(6);
        assert_eq!((topic.as_str(), language), (GES_TOPIC, LANGUAGE_TAGS));
        let event = ges.event(0);
        assert_eq!(event.topic.as_str(), GES_TOPIC);
        let names: Vec<&str> = event.properties.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, TAG_NAMES);
        for (name, value) in &event.properties[..SHARED_TAG_COUNT] {
            let Value::Str(text) = value else { panic!("{name} is a string") };
            assert!(filter.contains(&format!("{name}=\"{text}\"")), "{filter}");
        }
        assert!(filter.ends_with(",tag4=2"), "{filter}");
        assert_eq!(event.payload.len(), PAYLOAD_BYTES_DEFAULT);
        assert_eq!(ges.with_payload_bytes(500).event(0).payload.len(), 500);
    }

    #[test]
    fn each_block_of_events_takes_every_footprint_once() {
        for rate in SEED_MATCHING_RATES {
            let ges = workload(3, rate);
            let count = u64::from(ges.footprint_count());
            for block in 0..5 {
                let mut seen: Vec<u32> = (0..count).map(|offset| ges.footprint(block * count + offset)).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..ges.footprint_count()).collect::<Vec<_>>(), "{rate} %");
            }
        }
    }

    #[test]
    fn same_seed_same_workload_different_seed_different() {
        let (first, again, other) = (workload(5, 10), workload(5, 10), workload(6, 10));
        for index in 0..20 {
            assert_eq!(first.subscription(index), again.subscription(index));
            assert_eq!(first.event(index), again.event(index));
        }
        assert_ne!(first.subscription(0), other.subscription(0));
        let differs = (0..20).any(|index| first.event(index) != other.event(index));
        assert!(differs);
    }
}
