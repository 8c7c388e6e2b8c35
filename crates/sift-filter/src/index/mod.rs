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
//! A counting algorithm with access-predicate clustering, after Yan and
//! García-Molina's and Fabret et al.'s publish/subscribe matchers:
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
//! 3. A conjunction of one predicate and no residual test (every XPath and
//!    regex filter, a tags filter of one equality, ...) is *direct*
//!    (`direct.rs`): filed in its predicate's list of *targets*
//!    (`target.rs`), each the key to output with what deduplication needs.
//!    Any other conjunction with at least one equality predicate is
//!    *clustered* (`cluster.rs`): filed once, in the cluster of its *access
//!    predicate*, the equality of the conjunction that the fewest
//!    conjunctions of the whole index used when it was inserted (the table
//!    counts each predicate's users). If its only other predicate is a range
//!    predicate and it has no residual test (`sym = 'S' AND price > N`), it
//!    is a *sorted* member, in a run of its cluster per attribute and
//!    operator sorted by bound (`range_runs.rs`, `sorted_run.rs`).
//!    Otherwise it is a *checked* member: its other predicates become
//!    *checks* (`check.rs`), and conjunctions with the same checks share one
//!    list (`check_lists.rs`). Any other conjunction is *counted*: filed in
//!    the list of each of its predicates (`partition.rs`), or, with none, on
//!    the partition's always-candidate list.
//! 4. Per message, the satisfied predicates are collected (step 2) and
//!    stamped in the scratch, and the value of each attribute looked up is
//!    recorded there (`attribute_value.rs`). Then, for each partition asked
//!    for, each satisfied predicate adds one to the counter of every counted
//!    conjunction that needs it, a conjunction whose counter reaches its
//!    number of predicates being a candidate, as is every always-candidate;
//!    each satisfied predicate outputs its direct list; and the cluster of
//!    each satisfied access predicate is walked. In each sorted run, one
//!    binary search over the bounds with the recorded value finds the
//!    members that pass, a prefix (`>`, `>=`) or a suffix (`<`, `<=`), whose
//!    keys are output as one slice; numbers search number bounds under the
//!    same rules as the range maps, strings string bounds, and NaN, booleans
//!    and absent values nothing. A checked member passes when its checks
//!    hold: an equality, presence, regex or XPath predicate by its stamp, a
//!    range predicate by comparing the recorded value with the bound. An
//!    attribute's range maps hold only the range predicates some counted or
//!    direct conjunction needs, so those only clustered conjunctions use are
//!    never enumerated, and an attribute with no such range predicate skips
//!    the range search.
//! 5. Direct, sorted and checked conjunctions without residual tests output
//!    their key from the target kept in their list, without looking the
//!    conjunction or subscription up; the others (counted, always, checked
//!    with residual tests) are candidates, which pass when their residual
//!    tests do. A key is output once per subscription: a per-subscription
//!    stamp deduplicates the conjunctions of filters with several (SQL
//!    disjuncts), and a filter of one conjunction, which can pass only once
//!    per message, skips the stamp.
//!
//! Clustering spares the work that counting spends on conjunctions that
//! fail on another predicate. Under counting, a quote for
//! `sym = 'S0042' AND price > N` selectors satisfies about half of the
//! `price > N` and increments every conjunction of each; clustered under
//! their symbol, only the selectors of the quote's symbol are considered,
//! and sorted by `N`, only those the price passes are touched. GES
//! profiles share three equalities with every event; counted, each shared
//! equality increments every profile, while clustered under the selective
//! fourth equality, only the profiles with the event's footprint are walked.
//!
//! SQL's three-valued logic is kept: a conjunction passes only when every
//! literal is TRUE, and a literal is indexed only when the predicates that
//! replace it hold for exactly the messages that make it TRUE (see
//! `sql_literal.rs`); number keys compare integers and floats exactly as
//! the evaluators do (`number.rs`).
//!
//! # Cost
//!
//! Per message, with `p` partitions asked for: one hash lookup per message
//! property and indexed header; on each attribute with enumerated range
//! predicates, one binary search per range operator and one step per
//! satisfied one; one regex pass per shard on a topic-cache miss; one
//! streaming parse of the metadata when XPath filters are asked for (value
//! tests and any tree evaluation only for the filters whose structure
//! matched); one counter update per satisfied predicate and counted
//! conjunction needing it in the `p` partitions; one key output per
//! satisfied predicate and direct conjunction; for each satisfied access
//! predicate in each of the `p` partitions, one binary search per sorted run
//! of its cluster (`O(log r)` for a run of `r` members) plus one key output
//! per passing member, and a constant cost per check of each checked
//! member; and the candidates' residual tests. Every member walked
//! satisfies its access predicate, the least used equality of its
//! conjunction when filed, so walks stay close to the number of matches
//! whenever a conjunction has a selective equality, and sorted runs touch
//! only the members that match. Nothing scans all subscriptions, except that
//! conjunctions with no indexed predicate are candidates for every message
//! in their partition.
//!
//! Insertion and removal cost `O(size of the filter)` hash and ordered-map
//! operations: each conjunction remembers its position in each list or
//! cluster, so removal swaps the last entry into the gap. A sorted member is
//! found again by binary search over its run's bounds (equal bounds ordered
//! by conjunction id), and inserting or removing it shifts the entries
//! after it: `O(log r)` comparisons plus a move of up to `r` entries of a
//! few words each, `r` the run's length (about a hundred in the selectors
//! workload at 100k subscriptions; all the partition's conjunctions of one
//! access predicate, attribute and operator at worst). A new regex may
//! rebuild one shard of at most [`REGEX_SHARD_PATTERNS_MAX`] expressions,
//! and an XPath filter adds or removes only its own automaton states and
//! atoms. Access predicates are chosen at insertion and not revisited when
//! usage changes later.
//!
//! Matching takes `&self`, so readers can share an index behind a read lock;
//! all per-message state lives in the caller's [`IndexScratch`], which makes
//! matching allocation-free once the scratch has grown (apart from what the
//! regex crate allocates on a topic-cache miss, what XPath filters the
//! automaton cannot decide alone need for their tree, and what residual
//! tests need).

mod attribute;
mod attribute_value;
mod check;
mod check_lists;
mod cluster;
#[cfg(test)]
mod cluster_tests;
mod conjunction;
mod decompose;
mod direct;
mod matching;
mod number;
mod partition;
mod predicate;
mod range;
mod range_runs;
mod regex_shards;
mod residual;
mod scratch;
mod slab;
mod sorted_run;
mod sql_literal;
mod table;
mod target;
#[cfg(test)]
mod tests;
mod topic_cache;
mod xpath_source;
#[cfg(test)]
mod xpath_tests;

use std::hash::Hash;

use rustc_hash::FxHashMap;

use crate::ContentFilter;
use check::Check;
use check_lists::CheckLists;
use conjunction::Conjunction;
use decompose::ConjunctionPlan;
use partition::Partition;
use predicate::{PredicateId, PredicateSource};
use range_runs::SortedRange;
use slab::Slab;
use table::PredicateTable;
use target::Target;

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
    /// Conjunctions filed in the cluster of an access predicate rather than
    /// counted, sorted members included.
    pub clustered: usize,
    /// Of the clustered conjunctions, those sorted by the bound of their
    /// one range predicate.
    pub sorted: usize,
    /// Conjunctions of one predicate and no residual test, output directly
    /// by their predicate rather than counted or clustered.
    pub direct: usize,
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
    check_lists: CheckLists,
    conjunctions: Slab<Conjunction>,
    subscriptions: Slab<Subscription<K>>,
    partitions: FxHashMap<u32, Partition<K>>,
}

impl<K> Default for ContentIndex<K> {
    fn default() -> Self {
        ContentIndex {
            predicates: PredicateTable::default(),
            check_lists: CheckLists::default(),
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
            clustered: self.partitions.values().map(|partition| partition.clusters.len()).sum(),
            sorted: self.partitions.values().map(|partition| partition.clusters.sorted_len()).sum(),
            direct: self.partitions.values().map(|partition| partition.direct.len()).sum(),
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
        self.partitions.entry(partition).or_default().keys.insert(key.clone(), subscription);
        // A conjunction alone in its filter is output at most once per
        // message, so its key needs no deduplication.
        let sole = plans.len() == 1;
        for plan in plans {
            let target = Target { conjunction: 0, subscription, sole, key: key.clone() };
            let conjunction = self.add_conjunction(partition, target, plan);
            if let Some(subscription) = self.subscriptions.get_mut(subscription) {
                subscription.conjunctions.push(conjunction);
            }
        }
    }

    /// Interns a conjunction's predicates and files it in its partition,
    /// for the subscription `target` names (its conjunction is filled in
    /// here): in a direct list if it is one predicate and no residual test,
    /// clustered under its least used equality if it has one (sorted when
    /// its only other predicate is a range and it has no residual test),
    /// counted otherwise.
    fn add_conjunction(&mut self, partition: u32, mut target: Target<K>, plan: ConjunctionPlan) -> usize {
        let uses_xpath = plan.predicates.iter().any(PredicateSource::is_xpath);
        let predicates = self.intern(plan.predicates);
        let unchecked = plan.residual.is_empty();
        let conjunction = Conjunction::new(target.subscription, plan.residual, uses_xpath, target.sole);
        let id = self.conjunctions.insert(conjunction);
        target.conjunction = id;
        let (Some(partition), Some(conjunction)) = (self.partitions.get_mut(&partition), self.conjunctions.get_mut(id))
        else {
            return id;
        };
        match (self.predicates.least_used_equality(&predicates), predicates.as_slice()) {
            (_, &[predicate]) if unchecked => {
                // Found by being listed as satisfied, as counted ones are.
                self.predicates.count(predicate);
                partition.link_direct(conjunction, predicate, target);
            }
            (Some(access), _) => {
                let others = predicates.iter().filter(|predicate| **predicate != access);
                let mut checks: Vec<Check> = others.map(|predicate| self.predicates.check(*predicate)).collect();
                match SortedRange::of_checks(&checks).filter(|_| unchecked) {
                    Some(range) => partition.link_sorted(conjunction, access, range, target),
                    None => {
                        Check::order(&mut checks);
                        partition.link_clustered(conjunction, access, self.check_lists.acquire(checks), target);
                    }
                }
            }
            (None, _) => {
                for &predicate in &predicates {
                    self.predicates.count(predicate);
                }
                partition.link_counted(id, conjunction, &predicates);
            }
        }
        id
    }

    /// The ids of `sources`, interned, sorted and without repeats.
    fn intern(&mut self, sources: Vec<PredicateSource>) -> Vec<PredicateId> {
        let mut acquired: Vec<PredicateId> =
            sources.into_iter().map(|source| self.predicates.acquire(source)).collect();
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
        predicates
    }

    /// Removes the subscription `key` from `partition`; false when it was not
    /// there.
    pub fn remove(&mut self, partition: u32, key: &K) -> bool {
        let Some(filed) = self.partitions.get_mut(&partition) else { return false };
        let Some(subscription_id) = filed.keys.remove(key) else { return false };
        let Some(subscription) = self.subscriptions.remove(subscription_id) else { return false };
        for conjunction_id in subscription.conjunctions {
            let Some(conjunction) = self.conjunctions.remove(conjunction_id) else { continue };
            filed.unlink(conjunction_id, &conjunction, &mut self.conjunctions);
            if let Some(list) = conjunction.check_list() {
                self.check_lists.release(list);
            }
            // A counted or direct conjunction's range predicates may stop
            // being enumerated, which the table decides before it releases
            // them.
            let counted = conjunction.enumerates_predicates();
            for predicate in conjunction.predicates() {
                if counted {
                    self.predicates.uncount(predicate);
                }
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
}
