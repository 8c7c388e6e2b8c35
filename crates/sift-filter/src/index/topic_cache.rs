//! Per-topic results of the regex predicates, kept in the scratch.
//!
//! A broker sees the same topics again and again, and the regex predicates
//! depend on the topic alone, so their results are remembered per topic. The
//! cache lives in the caller's [`crate::index::IndexScratch`] rather than
//! behind the index: matching then needs no lock or interior mutability, and
//! each thread warms its own cache, as the broker's per-connection match
//! cache does. Entries are valid for one regex epoch (see `regex_shards.rs`);
//! any change to the expressions, or a scratch used with another index,
//! starts the cache over.

use std::collections::HashMap;
use std::ops::Range;

use sift_core::TopicName;

use crate::index::predicate::PredicateId;
use crate::index::regex_shards::RegexShards;

/// Most topics whose regex results one scratch remembers; past it the cache
/// starts over.
pub const REGEX_CACHE_TOPICS_MAX: usize = 1024;

/// Most predicate ids the cache holds over all its topics; past it the cache
/// starts over, so that topics matching many expressions cannot make it grow
/// without bound.
pub const REGEX_CACHE_IDS_MAX: usize = 64 * 1024;

/// Regex results per topic, for one epoch of one index's expressions.
#[derive(Debug, Default)]
pub(crate) struct TopicCache {
    /// The epoch the entries were computed for; 0, never an epoch, when new.
    epoch: u64,
    /// Each topic's slice of `ids`.
    ranges: HashMap<TopicName, Range<usize>>,
    ids: Vec<PredicateId>,
}

impl TopicCache {
    /// Appends the regex predicates `topic` satisfies, from the cache or, on
    /// a miss, by matching the topic against the expressions.
    pub(crate) fn extend_satisfied(
        &mut self,
        expressions: &RegexShards,
        topic: &TopicName,
        satisfied: &mut Vec<PredicateId>,
    ) {
        if self.epoch != expressions.epoch() {
            self.clear();
            self.epoch = expressions.epoch();
        }
        let range = match self.ranges.get(topic) {
            Some(range) => range.clone(),
            None => {
                if self.ranges.len() >= REGEX_CACHE_TOPICS_MAX || self.ids.len() >= REGEX_CACHE_IDS_MAX {
                    self.clear();
                }
                let start = self.ids.len();
                expressions.collect(topic.as_str(), &mut self.ids);
                let range = start..self.ids.len();
                self.ranges.insert(topic.clone(), range.clone());
                range
            }
        };
        satisfied.extend_from_slice(&self.ids[range]);
    }

    fn clear(&mut self) {
        self.ranges.clear();
        self.ids.clear();
    }

    /// How many topics are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;

    fn topic(text: &str) -> TopicName {
        TopicName::new(text).expect("valid topic")
    }

    fn lookup(cache: &mut TopicCache, expressions: &RegexShards, name: &str) -> Vec<PredicateId> {
        let mut satisfied = Vec::new();
        cache.extend_satisfied(expressions, &topic(name), &mut satisfied);
        satisfied
    }

    #[test]
    fn remembers_topics_until_the_expressions_change() {
        let mut expressions = RegexShards::default();
        expressions.insert(7, Regex::new("^a").expect("compiles"));
        let mut cache = TopicCache::default();
        assert_eq!(lookup(&mut cache, &expressions, "a.b"), vec![7]);
        assert_eq!(lookup(&mut cache, &expressions, "a.b"), vec![7]);
        assert_eq!(lookup(&mut cache, &expressions, "b"), Vec::<PredicateId>::new());
        assert_eq!(cache.len(), 2);
        expressions.insert(8, Regex::new("b").expect("compiles"));
        assert_eq!(lookup(&mut cache, &expressions, "a.b"), vec![7, 8]);
        assert_eq!(cache.len(), 1, "a change starts the cache over");
    }

    #[test]
    fn starts_over_when_full() {
        let mut expressions = RegexShards::default();
        expressions.insert(1, Regex::new("x").expect("compiles"));
        let mut cache = TopicCache::default();
        for number in 0..REGEX_CACHE_TOPICS_MAX {
            lookup(&mut cache, &expressions, &format!("t{number}"));
        }
        assert_eq!(cache.len(), REGEX_CACHE_TOPICS_MAX);
        assert_eq!(lookup(&mut cache, &expressions, "x"), vec![1]);
        assert_eq!(cache.len(), 1);
    }
}
