//! The content-subscription index: which subscriptions' content filters pass
//! a message, at a cost that grows with what matches rather than with the
//! number of subscriptions.
//!
//! The broker matches a message's topic first, which names the
//! *partitions* (distinct topic filters, numbered by the broker) the message
//! belongs to. [`ContentIndex::matching`] then returns the keys of the
//! subscriptions in those partitions whose content filter passes: exactly
//! those for which [`ContentFilter::matches`] is true.
//!
//! # How
//!
//! A counting algorithm, after Yan and García-Molina's and Fabret et al.'s
//! publish/subscribe matchers:
//!
//! 1. Every filter is filed as conjunctions (`decompose.rs`): a tags filter is
//!    one, a SQL selector one per disjunct of its normal form, a regex or an
//!    XPath filter one. Each conjunction needs some *indexed predicates* (an
//!    attribute compared with a constant, a topic regex, or an XPath filter)
//!    and may carry *residual* tests that the index cannot look up (`<>`,
//!    LIKE, arithmetic, ...).
//! 2. Predicates are interned across all partitions (`table.rs`), so each
//!    distinct predicate is decided at most once per message. Per attribute,
//!    equality predicates sit in hash maps and range predicates in ordered
//!    maps (`attribute.rs`, `range.rs`), so the satisfied ones are found by
//!    lookup and binary search; regexes are matched as sets (`regex_shards.rs`),
//!    with results cached per topic (`topic_cache.rs`); XPath filters share
//!    one automaton that decides them all in one streaming pass over the
//!    metadata document (`xpath_source.rs`). That pass runs only when a
//!    partition asked for has a conjunction needing an XPath predicate, so
//!    messages for other partitions never have their metadata parsed.
//! 3. For each partition asked for, each satisfied predicate adds one to the
//!    counter of every conjunction in the partition that needs it
//!    (`partition.rs`); a conjunction whose counter reaches its number of
//!    predicates is a candidate, as is every conjunction with none.
//! 4. A candidate passes when its residual tests do; its key is output once.
//!
//! SQL's three-valued logic is kept: a conjunction passes only when every
//! literal is TRUE, and a literal is indexed only when the predicates that
//! replace it hold for exactly the messages that make it TRUE (see
//! `sql_literal.rs`); number keys compare integers and floats exactly as
//! the evaluators do (`number.rs`).
//!
//! # Cost
//!
//! Per message, with `s` predicates satisfied, `p` partitions asked for and
//! `c` candidates: one hash lookup per message property and indexed header,
//! one binary search per range operator on each such attribute, one regex
//! pass per shard on a topic-cache miss, one streaming parse of the metadata
//! when XPath filters are asked for (value tests and any tree evaluation
//! only for the filters whose structure matched), `O(s * p)` counter
//! updates, and the candidates' residual tests. Nothing scans all
//! subscriptions, except that conjunctions with no indexed predicate are
//! candidates for every message in their partition. Insertion and removal cost `O(size of the
//! filter)` hash and ordered-map operations; a new regex may rebuild one
//! shard of at most [`REGEX_SHARD_PATTERNS_MAX`] expressions, and an XPath
//! filter adds or removes only its own automaton states and atoms.
//!
//! Matching takes `&self`, so readers can share an index behind a read lock;
//! all per-message state lives in the caller's [`IndexScratch`], which makes
//! matching allocation-free once the scratch has grown (apart from what the
//! regex crate allocates on a topic-cache miss, what XPath filters the
//! automaton cannot decide alone need for their tree, and what residual
//! tests need).

mod attribute;
mod decompose;
mod number;
mod partition;
mod predicate;
mod range;
mod regex_shards;
mod residual;
mod scratch;
mod slab;
mod sql_literal;
mod table;
#[cfg(test)]
mod tests;
mod topic_cache;
mod xpath_source;
#[cfg(test)]
mod xpath_tests;

use std::hash::Hash;

use rustc_hash::FxHashMap;
use sift_core::Message;

use crate::ContentFilter;
use decompose::ConjunctionPlan;
use partition::{Conjunction, Partition};
use predicate::{PredicateId, PredicateSource};
use scratch::Stamps;
use slab::Slab;
use table::PredicateTable;

pub use decompose::CONJUNCTIONS_PER_FILTER_MAX;
pub use regex_shards::REGEX_SHARD_PATTERNS_MAX;
pub use scratch::IndexScratch;
pub use topic_cache::{REGEX_CACHE_IDS_MAX, REGEX_CACHE_TOPICS_MAX};

/// A subscription's key and the conjunctions its filter is filed as.
#[derive(Debug, Clone)]
struct Subscription<K> {
    key: K,
    conjunctions: Vec<usize>,
}

/// Counts describing an index's contents, for statistics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexStats {
    /// Subscriptions (partition and key pairs).
    pub subscriptions: usize,
    /// Conjunctions the filters are filed as.
    pub conjunctions: usize,
    /// Distinct interned predicates.
    pub predicates: usize,
    /// Conjunctions with no indexed predicate, candidates for every message
    /// in their partition.
    pub always_candidates: usize,
    /// Regex predicates matched one by one until the next rebuild of their
    /// shard (see [`ContentIndex::refresh`]).
    pub regex_pending: usize,
}

/// Content filters of subscriptions, grouped by partition, indexed so that
/// those passing a message are found without evaluating them all.
///
/// `K` identifies a subscription within a partition; inserting a key that
/// is already in the partition replaces its filter. Subscriptions without a
/// content filter pass every message of their partition and need not be
/// filed here.
#[derive(Debug, Clone)]
pub struct ContentIndex<K> {
    predicates: PredicateTable,
    conjunctions: Slab<Conjunction>,
    subscriptions: Slab<Subscription<K>>,
    partitions: FxHashMap<u32, Partition<K>>,
}

impl<K> Default for ContentIndex<K> {
    fn default() -> Self {
        ContentIndex {
            predicates: PredicateTable::default(),
            conjunctions: Slab::default(),
            subscriptions: Slab::default(),
            partitions: FxHashMap::default(),
        }
    }
}

impl<K: Clone + Eq + Hash> ContentIndex<K> {
    /// An empty index.
    pub fn new() -> ContentIndex<K> {
        ContentIndex::default()
    }

    /// The number of subscriptions.
    pub fn len(&self) -> usize {
        self.subscriptions.len()
    }

    /// True when there are no subscriptions.
    pub fn is_empty(&self) -> bool {
        self.subscriptions.len() == 0
    }

    /// Counts describing the contents.
    pub fn stats(&self) -> IndexStats {
        IndexStats {
            subscriptions: self.subscriptions.len(),
            conjunctions: self.conjunctions.len(),
            predicates: self.predicates.len(),
            always_candidates: self.partitions.values().map(Partition::always_len).sum(),
            regex_pending: self.predicates.regex_pending(),
        }
    }

    /// Adds the subscription `key` in `partition` with `filter`, replacing
    /// the filter if the key is already there.
    pub fn insert(&mut self, partition: u32, key: K, filter: &ContentFilter) {
        self.remove(partition, &key);
        let plans = decompose::plan(filter);
        let subscription =
            self.subscriptions.insert(Subscription { key: key.clone(), conjunctions: Vec::with_capacity(plans.len()) });
        self.partitions.entry(partition).or_default().keys.insert(key, subscription);
        for plan in plans {
            let conjunction = self.add_conjunction(partition, subscription, plan);
            if let Some(subscription) = self.subscriptions.get_mut(subscription) {
                subscription.conjunctions.push(conjunction);
            }
        }
    }

    /// Interns a conjunction's predicates and files it in its partition.
    fn add_conjunction(&mut self, partition: u32, subscription: usize, plan: ConjunctionPlan) -> usize {
        let uses_xpath = plan.predicates.iter().any(PredicateSource::is_xpath);
        let mut acquired: Vec<PredicateId> =
            plan.predicates.into_iter().map(|source| self.predicates.acquire(source)).collect();
        acquired.sort_unstable();
        // A predicate repeated in the conjunction (`a = 1 AND a = 1`) counts
        // once, so the references taken for the repeats are given back.
        let mut predicates: Vec<PredicateId> = Vec::with_capacity(acquired.len());
        for predicate in acquired {
            if predicates.last() == Some(&predicate) {
                self.predicates.release(predicate);
            } else {
                predicates.push(predicate);
            }
        }
        let id = self.conjunctions.insert(Conjunction::new(subscription, plan.residual, uses_xpath));
        if let (Some(partition), Some(conjunction)) =
            (self.partitions.get_mut(&partition), self.conjunctions.get_mut(id))
        {
            partition.link(id, conjunction, &predicates);
        }
        id
    }

    /// Removes the subscription `key` from `partition`; false when it was not
    /// there.
    pub fn remove(&mut self, partition: u32, key: &K) -> bool {
        let Some(filed) = self.partitions.get_mut(&partition) else { return false };
        let Some(subscription_id) = filed.keys.remove(key) else { return false };
        let Some(subscription) = self.subscriptions.remove(subscription_id) else { return false };
        for conjunction_id in subscription.conjunctions {
            let Some(conjunction) = self.conjunctions.remove(conjunction_id) else { continue };
            filed.unlink(&conjunction, &mut self.conjunctions);
            for predicate in conjunction.predicates() {
                self.predicates.release(predicate);
            }
        }
        if filed.keys.is_empty() {
            self.partitions.remove(&partition);
        }
        true
    }

    /// Compiles the regex predicates added or removed since the last rebuild
    /// of their shard into the shard's set, so that none is matched one by
    /// one any more.
    ///
    /// Optional: insertion seals a shard by itself once it is full, so at
    /// most [`REGEX_SHARD_PATTERNS_MAX`] expressions are ever matched one by
    /// one. A broker may call this after a burst of subscriptions, outside
    /// the matching path; matching is exact either way.
    pub fn refresh(&mut self) {
        self.predicates.refresh();
    }

    /// Appends to `out` the keys of the subscriptions in `partitions` whose
    /// filter passes `message`, each once, in no particular order. Partitions
    /// that are unknown or repeated are ignored.
    pub fn matching(&self, message: &Message, partitions: &[u32], scratch: &mut IndexScratch, out: &mut Vec<K>) {
        scratch.partitions.clear();
        scratch
            .partitions
            .extend(partitions.iter().copied().filter(|partition| self.partitions.contains_key(partition)));
        if scratch.partitions.is_empty() {
            return;
        }
        scratch.partitions.sort_unstable();
        scratch.partitions.dedup();
        scratch.stamps.begin(
            self.conjunctions.id_bound(),
            self.subscriptions.id_bound(),
            self.predicates.attribute_id_bound(),
        );
        self.collect_satisfied(message, scratch);
        scratch.candidates.clear();
        for partition in scratch.partitions.iter().filter_map(|partition| self.partitions.get(partition)) {
            self.count_candidates(partition, &scratch.satisfied, &mut scratch.stamps, &mut scratch.candidates);
        }
        for &candidate in &scratch.candidates {
            let Some(conjunction) = self.conjunctions.get(candidate) else { continue };
            if scratch.stamps.is_emitted(conjunction.subscription)
                || !conjunction.residual.iter().all(|residual| residual.holds(message))
            {
                continue;
            }
            if let Some(subscription) = self.subscriptions.get(conjunction.subscription) {
                scratch.stamps.mark_emitted(conjunction.subscription);
                out.push(subscription.key.clone());
            }
        }
    }

    /// Fills the scratch's list of satisfied predicates for the partitions
    /// it holds. The XPath pass, the one source that parses the message's
    /// metadata, runs only when one of those partitions has a conjunction
    /// that needs it; the predicates it would find could make no other
    /// partition's conjunction a candidate.
    fn collect_satisfied(&self, message: &Message, scratch: &mut IndexScratch) {
        scratch.satisfied.clear();
        self.predicates.collect(message, &mut scratch.stamps, &mut scratch.topic_cache, &mut scratch.satisfied);
        // Absent metadata satisfies no XPath predicate, so there is nothing
        // to run.
        let Some(metadata) = message.metadata.as_deref() else { return };
        let asked = &scratch.partitions;
        if asked.iter().filter_map(|partition| self.partitions.get(partition)).any(Partition::uses_xpath) {
            scratch.xpath_passes = scratch.xpath_passes.saturating_add(1);
            self.predicates.collect_xpath(metadata, &mut scratch.xpath, &mut scratch.satisfied);
        }
    }

    /// Counts the satisfied predicates for the partition's conjunctions and
    /// appends those that become candidates, then the always-candidates.
    fn count_candidates(
        &self,
        partition: &Partition<K>,
        satisfied: &[PredicateId],
        stamps: &mut Stamps,
        candidates: &mut Vec<usize>,
    ) {
        for predicate in satisfied {
            let Some(conjunctions) = partition.by_predicate.get(predicate) else { continue };
            for &conjunction in conjunctions {
                let required = self.conjunctions.get(conjunction).map_or(0, |conjunction| conjunction.required);
                // Equal, not at least: each predicate counts once per
                // message, so the count passes `required` exactly once.
                if stamps.count(conjunction) == required {
                    candidates.push(conjunction);
                }
            }
        }
        candidates.extend_from_slice(&partition.always);
    }
}
