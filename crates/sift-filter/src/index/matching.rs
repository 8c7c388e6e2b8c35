//! The per-message path of [`ContentIndex::matching`]: collect the
//! satisfied predicates, count them for the counted conjunctions, output
//! their direct lists, walk the clusters of the satisfied equalities (the
//! sorted members output as runs, the checked ones tested one by one), then
//! test the candidates' residual tests and output their keys.

use std::hash::Hash;

use sift_core::Message;

use crate::index::partition::Partition;
use crate::index::predicate::PredicateId;
use crate::index::scratch::{IdBounds, Stamps};
use crate::index::target::{emit_all, emit_one};
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
        for asked in 0..scratch.partitions.len() {
            let Some(partition) = scratch.partitions.get(asked).and_then(|asked| self.partitions.get(asked)) else {
                continue;
            };
            self.count_candidates(partition, &scratch.satisfied, &mut scratch.stamps, &mut scratch.candidates);
            emit_direct(partition, &scratch.satisfied, &mut scratch.stamps, out);
            self.walk_clusters(partition, message, scratch, out);
        }
        self.emit(message, scratch, out);
    }

    /// Appends the keys of the candidates that pass their residual tests,
    /// each subscription once.
    fn emit(&self, message: &Message, scratch: &mut IndexScratch, out: &mut Vec<K>) {
        for &candidate in &scratch.candidates {
            let Some(conjunction) = self.conjunctions.get(candidate) else { continue };
            // A sole conjunction's key cannot have been output yet; another
            // is skipped before its residual tests when it has.
            let shared = !conjunction.sole;
            if shared && scratch.stamps.is_emitted(conjunction.subscription)
                || !conjunction.residual.iter().all(|residual| residual.holds(message))
            {
                continue;
            }
            if let Some(subscription) = self.subscriptions.get(conjunction.subscription) {
                if shared {
                    scratch.stamps.mark_emitted(conjunction.subscription);
                }
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
    /// partition: outputs the keys of the sorted members that pass and of
    /// the checked members whose checks (their other predicates) hold,
    /// except that those of the latter with residual tests become
    /// candidates instead. Satisfied predicates that are no access
    /// predicate have no cluster.
    fn walk_clusters(&self, partition: &Partition<K>, message: &Message, scratch: &mut IndexScratch, out: &mut Vec<K>) {
        if partition.clusters.is_empty() {
            return;
        }
        let IndexScratch { satisfied, stamps, candidates, .. } = scratch;
        for &predicate in satisfied.iter() {
            let Some(cluster) = partition.clusters.cluster(predicate) else { continue };
            cluster.sorted.emit(message, stamps, out);
            for member in &cluster.checked {
                if !member.checks.iter().all(|check| check.holds(stamps, message)) {
                    continue;
                }
                if member.residual {
                    candidates.push(member.target.conjunction);
                } else {
                    emit_one(&member.target, stamps, out);
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

/// Outputs the direct lists (`direct.rs`) of the satisfied predicates in the
/// partition.
fn emit_direct<K: Clone>(partition: &Partition<K>, satisfied: &[PredicateId], stamps: &mut Stamps, out: &mut Vec<K>) {
    // Most partitions of a broker hold no single-predicate conjunction, and
    // skip a lookup per satisfied predicate.
    if partition.direct.is_empty() {
        return;
    }
    for &predicate in satisfied {
        emit_all(partition.direct.list(predicate), stamps, out);
    }
}
