//! Per partition: which conjunctions each predicate counts for, the
//! clusters of conjunctions filed under an access predicate (`cluster.rs`),
//! the single-predicate conjunctions each predicate outputs directly
//! (`direct.rs`), the conjunctions that are candidates for every message,
//! and how many
//! conjunctions need an XPath predicate (so that messages for partitions
//! with none skip the metadata pass).
//!
//! A conjunction of one predicate and no residual test sits in that
//! predicate's direct list; any other with an equality predicate sits in
//! one cluster; any other sits in the counting list of each of its indexed
//! predicates, or, if it has none, on the partition's always-candidate list.
//! It remembers its position in each list (a sorted cluster member, its
//! bound), so that removing it is a swap with the last entry (or a binary
//! search) rather than a scan: unsubscribing stays cheap when thousands of
//! subscriptions share a predicate such as `sym = 'IBM'`.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::index::check::Check;
use crate::index::cluster::{CheckedMember, Clusters};
use crate::index::conjunction::{Conjunction, Filing};
use crate::index::direct::DirectLists;
use crate::index::predicate::PredicateId;
use crate::index::range_runs::SortedRange;
use crate::index::slab::Slab;
use crate::index::target::Target;

/// The subscriptions of one partition and their conjunctions' lists.
#[derive(Debug, Clone)]
pub(crate) struct Partition<K> {
    /// For each predicate, the counted conjunctions that need it.
    pub(crate) by_predicate: FxHashMap<PredicateId, Vec<usize>>,
    /// The clustered conjunctions, by access predicate.
    pub(crate) clusters: Clusters<K>,
    /// The single-predicate conjunctions, by predicate.
    pub(crate) direct: DirectLists<K>,
    /// Conjunctions with no indexed predicate.
    pub(crate) always: Vec<usize>,
    /// Each subscription's id, by key.
    pub(crate) keys: HashMap<K, usize>,
    /// How many conjunctions need an XPath predicate.
    xpath_conjunctions: usize,
}

impl<K> Default for Partition<K> {
    fn default() -> Self {
        Partition {
            by_predicate: FxHashMap::default(),
            clusters: Clusters::default(),
            direct: DirectLists::default(),
            always: Vec::new(),
            keys: HashMap::new(),
            xpath_conjunctions: 0,
        }
    }
}

impl<K> Partition<K> {
    /// Files conjunction `id` in the counting list of each of `predicates`
    /// (distinct), or on the always-candidate list when there are none.
    pub(crate) fn link_counted(&mut self, id: usize, conjunction: &mut Conjunction, predicates: &[PredicateId]) {
        self.count_xpath(conjunction, 1);
        conjunction.required = predicates.len();
        if predicates.is_empty() {
            conjunction.filing = Filing::Always { position: self.always.len() };
            self.always.push(id);
            return;
        }
        let mut memberships = Vec::with_capacity(predicates.len());
        for &predicate in predicates {
            let list = self.by_predicate.entry(predicate).or_default();
            memberships.push((predicate, list.len()));
            list.push(id);
        }
        conjunction.filing = Filing::Counted { memberships };
    }

    /// Files the conjunction of `target` as a checked member of the cluster
    /// of `access`, to test `checks` (its other predicates) when a message
    /// satisfies `access`.
    pub(crate) fn link_clustered(
        &mut self,
        conjunction: &mut Conjunction,
        access: PredicateId,
        checks: Arc<[Check]>,
        target: Target<K>,
    ) {
        self.count_xpath(conjunction, 1);
        let residual = !conjunction.residual.is_empty();
        let member = CheckedMember { checks: Arc::clone(&checks), target, residual };
        let position = self.clusters.file(access, member);
        conjunction.filing = Filing::Clustered { access, position, checks };
    }

    /// Files the conjunction of `target`, whose only predicate besides
    /// `access` is `range`, as a sorted member of the cluster of `access`.
    pub(crate) fn link_sorted(
        &mut self,
        conjunction: &mut Conjunction,
        access: PredicateId,
        range: SortedRange,
        target: Target<K>,
    ) {
        self.count_xpath(conjunction, 1);
        self.clusters.file_sorted(access, &range, target);
        conjunction.filing = Filing::Sorted { access, range };
    }

    /// Files the conjunction of `target`, whose one predicate is
    /// `predicate`, in that predicate's direct list.
    pub(crate) fn link_direct(&mut self, conjunction: &mut Conjunction, predicate: PredicateId, target: Target<K>) {
        self.count_xpath(conjunction, 1);
        let position = self.direct.file(predicate, target);
        conjunction.filing = Filing::Direct { predicate, position };
    }

    /// Takes a removed conjunction out of its lists, updating the position of
    /// each conjunction moved into the gap.
    pub(crate) fn unlink(&mut self, id: usize, conjunction: &Conjunction, conjunctions: &mut Slab<Conjunction>) {
        self.count_xpath(conjunction, -1);
        match &conjunction.filing {
            Filing::Unfiled => {}
            Filing::Always { position } => {
                self.always.swap_remove(*position);
                if let Some(moved) = self.always.get(*position).and_then(|moved| conjunctions.get_mut(*moved)) {
                    moved.move_in_always(*position);
                }
            }
            Filing::Counted { memberships } => {
                for &(predicate, position) in memberships {
                    self.unlink_counted(predicate, position, conjunctions);
                }
            }
            Filing::Clustered { access, position, .. } => {
                if let Some(moved) =
                    self.clusters.unfile(*access, *position).and_then(|moved| conjunctions.get_mut(moved))
                {
                    moved.move_in_list(*access, *position);
                }
            }
            Filing::Sorted { access, range } => self.clusters.unfile_sorted(*access, range, id),
            Filing::Direct { predicate, position } => {
                if let Some(moved) =
                    self.direct.unfile(*predicate, *position).and_then(|moved| conjunctions.get_mut(moved))
                {
                    moved.move_in_list(*predicate, *position);
                }
            }
        }
    }

    /// Takes the entry at `position` out of the counting list of `predicate`.
    fn unlink_counted(&mut self, predicate: PredicateId, position: usize, conjunctions: &mut Slab<Conjunction>) {
        let Some(list) = self.by_predicate.get_mut(&predicate) else { return };
        list.swap_remove(position);
        if let Some(moved) = list.get(position).and_then(|moved| conjunctions.get_mut(*moved)) {
            moved.move_in_list(predicate, position);
        }
        if list.is_empty() {
            self.by_predicate.remove(&predicate);
        }
    }

    /// Adds `change` (1 or -1) to the count of XPath conjunctions if the
    /// conjunction needs an XPath predicate.
    fn count_xpath(&mut self, conjunction: &Conjunction, change: isize) {
        if conjunction.uses_xpath {
            self.xpath_conjunctions = self.xpath_conjunctions.saturating_add_signed(change);
        }
    }

    /// How many conjunctions are candidates for every message.
    pub(crate) fn always_len(&self) -> usize {
        self.always.len()
    }

    /// True when some conjunction needs an XPath predicate, so a message for
    /// this partition must have its metadata run through the XPath automaton.
    pub(crate) fn uses_xpath(&self) -> bool {
        self.xpath_conjunctions > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files a conjunction with these predicates and returns its id.
    fn file(partition: &mut Partition<u32>, conjunctions: &mut Slab<Conjunction>, predicates: &[usize]) -> usize {
        file_with(partition, conjunctions, predicates, false)
    }

    fn file_with(
        partition: &mut Partition<u32>,
        conjunctions: &mut Slab<Conjunction>,
        predicates: &[usize],
        uses_xpath: bool,
    ) -> usize {
        let id = conjunctions.insert(Conjunction::new(0, Vec::new(), uses_xpath, true));
        if let Some(conjunction) = conjunctions.get_mut(id) {
            partition.link_counted(id, conjunction, predicates);
        }
        id
    }

    /// Files a conjunction under `access` that checks `others`.
    fn cluster(
        partition: &mut Partition<u32>,
        conjunctions: &mut Slab<Conjunction>,
        access: usize,
        others: &[usize],
    ) -> usize {
        let id = conjunctions.insert(Conjunction::new(0, Vec::new(), false, true));
        if let Some(conjunction) = conjunctions.get_mut(id) {
            let checks: Vec<Check> = others.iter().map(|predicate| Check::Satisfied(*predicate)).collect();
            let target = Target { conjunction: id, subscription: 0, sole: true, key: 0 };
            partition.link_clustered(conjunction, access, checks.into(), target);
        }
        id
    }

    fn remove(partition: &mut Partition<u32>, conjunctions: &mut Slab<Conjunction>, id: usize) {
        let conjunction = conjunctions.remove(id).expect("live");
        partition.unlink(id, &conjunction, conjunctions);
    }

    #[test]
    fn removal_keeps_the_other_positions_right() {
        let mut partition = Partition::default();
        let mut conjunctions = Slab::default();
        let first = file(&mut partition, &mut conjunctions, &[7, 8]);
        let second = file(&mut partition, &mut conjunctions, &[7]);
        let third = file(&mut partition, &mut conjunctions, &[7, 8]);
        let always = [file(&mut partition, &mut conjunctions, &[]), file(&mut partition, &mut conjunctions, &[])];
        remove(&mut partition, &mut conjunctions, first);
        assert_eq!(partition.by_predicate[&7], vec![third, second]);
        assert_eq!(partition.by_predicate[&8], vec![third]);
        remove(&mut partition, &mut conjunctions, always[0]);
        assert_eq!(partition.always, vec![always[1]]);
        // The moved conjunctions must now be removable from their new places.
        remove(&mut partition, &mut conjunctions, third);
        remove(&mut partition, &mut conjunctions, always[1]);
        assert_eq!(partition.by_predicate[&7], vec![second]);
        assert!(!partition.by_predicate.contains_key(&8));
        assert_eq!(partition.always_len(), 0);
        remove(&mut partition, &mut conjunctions, second);
        assert!(partition.by_predicate.is_empty());
    }

    #[test]
    fn counts_the_conjunctions_that_need_xpath() {
        let mut partition = Partition::default();
        let mut conjunctions = Slab::default();
        let plain = file(&mut partition, &mut conjunctions, &[1]);
        assert!(!partition.uses_xpath());
        let first = file_with(&mut partition, &mut conjunctions, &[2], true);
        let second = file_with(&mut partition, &mut conjunctions, &[2, 1], true);
        assert!(partition.uses_xpath());
        remove(&mut partition, &mut conjunctions, first);
        assert!(partition.uses_xpath(), "one is left");
        remove(&mut partition, &mut conjunctions, second);
        assert!(!partition.uses_xpath());
        remove(&mut partition, &mut conjunctions, plain);
    }

    #[test]
    fn clustered_conjunctions_stay_removable_after_moves() {
        let mut partition = Partition::default();
        let mut conjunctions = Slab::default();
        let first = cluster(&mut partition, &mut conjunctions, 5, &[6]);
        let counted = file(&mut partition, &mut conjunctions, &[5, 6]);
        let second = cluster(&mut partition, &mut conjunctions, 5, &[]);
        let third = cluster(&mut partition, &mut conjunctions, 5, &[7, 6]);
        assert_eq!(partition.clusters.checked(5), vec![first, second, third]);
        assert_eq!(partition.by_predicate[&5], vec![counted], "counting and clusters are apart");
        remove(&mut partition, &mut conjunctions, first);
        assert_eq!(partition.clusters.checked(5), vec![third, second]);
        let moved = conjunctions.get(third).expect("live");
        assert_eq!(moved.predicates().collect::<Vec<_>>(), vec![5, 7, 6]);
        remove(&mut partition, &mut conjunctions, third);
        remove(&mut partition, &mut conjunctions, second);
        assert!(partition.clusters.is_empty());
        assert_eq!(partition.by_predicate[&5], vec![counted]);
        remove(&mut partition, &mut conjunctions, counted);
        assert!(partition.by_predicate.is_empty());
    }
}
