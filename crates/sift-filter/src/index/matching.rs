//! The per-message path of [`ContentIndex::matching`]: collect the
//! satisfied predicates, count them for the counted conjunctions, walk the
//! clusters of the satisfied equalities, then test the candidates' residual
//! tests and output their keys.

use std::hash::Hash;

use sift_core::Message;

use crate::index::partition::Partition;
use crate::index::predicate::PredicateId;
use crate::index::scratch::{IdBounds, Stamps};
use crate::index::{ContentIndex, IndexScratch};

impl<K: Clone + Eq + Hash> ContentIndex<K> {
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
        scratch.stamps.begin(IdBounds {
            conjunctions: self.conjunctions.id_bound(),
            subscriptions: self.subscriptions.id_bound(),
            attributes: self.predicates.attribute_id_bound(),
            predicates: self.predicates.id_bound(),
        });
        self.collect_satisfied(message, scratch);
        scratch.candidates.clear();
        for partition in scratch.partitions.iter().filter_map(|partition| self.partitions.get(partition)) {
            self.count_candidates(partition, &scratch.satisfied, &mut scratch.stamps, &mut scratch.candidates);
            self.walk_clusters(partition, message, &scratch.satisfied, &scratch.stamps, &mut scratch.candidates);
        }
        self.emit(message, scratch, out);
    }

    /// Appends the keys of the candidates that pass their residual tests,
    /// each subscription once.
    fn emit(&self, message: &Message, scratch: &mut IndexScratch, out: &mut Vec<K>) {
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
    ///
    /// Every satisfied predicate is also stamped, for the checks of
    /// clustered conjunctions.
    fn collect_satisfied(&self, message: &Message, scratch: &mut IndexScratch) {
        scratch.satisfied.clear();
        self.predicates.collect(message, &mut scratch.stamps, &mut scratch.topic_cache, &mut scratch.satisfied);
        self.collect_xpath(message, scratch);
        for &predicate in &scratch.satisfied {
            scratch.stamps.mark_satisfied(predicate);
        }
    }

    /// Runs the XPath pass if the message has metadata and an asked
    /// partition needs it.
    fn collect_xpath(&self, message: &Message, scratch: &mut IndexScratch) {
        // Absent metadata satisfies no XPath predicate, so there is nothing
        // to run.
        let Some(metadata) = message.metadata.as_deref() else { return };
        let asked = &scratch.partitions;
        if asked.iter().filter_map(|partition| self.partitions.get(partition)).any(Partition::uses_xpath) {
            scratch.xpath_passes = scratch.xpath_passes.saturating_add(1);
            self.predicates.collect_xpath(metadata, &mut scratch.xpath, &mut scratch.satisfied);
        }
    }

    /// Walks the cluster of each satisfied access predicate in the
    /// partition and appends the members whose checks (their other
    /// predicates) hold. Satisfied predicates that are no access predicate
    /// have an empty cluster.
    fn walk_clusters(
        &self,
        partition: &Partition<K>,
        message: &Message,
        satisfied: &[PredicateId],
        stamps: &Stamps,
        candidates: &mut Vec<usize>,
    ) {
        if partition.clusters.is_empty() {
            return;
        }
        for &predicate in satisfied {
            for &id in partition.clusters.cluster(predicate) {
                let Some(conjunction) = self.conjunctions.get(id) else { continue };
                if conjunction.checks().iter().all(|check| check.holds(stamps, message)) {
                    candidates.push(id);
                }
            }
        }
    }

    /// Counts the satisfied predicates for the partition's counted
    /// conjunctions and appends those that become candidates, then the
    /// always-candidates.
    fn count_candidates(
        &self,
        partition: &Partition<K>,
        satisfied: &[PredicateId],
        stamps: &mut Stamps,
        candidates: &mut Vec<usize>,
    ) {
        // A partition whose conjunctions are all clustered has nothing to
        // count, so it is spared a lookup per satisfied predicate.
        let counted = if partition.by_predicate.is_empty() { &[][..] } else { satisfied };
        for predicate in counted {
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
