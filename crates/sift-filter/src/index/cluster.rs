//! Access-predicate clusters, after Fabret et al. (2001): conjunctions filed
//! under one of their equality predicates instead of in the counters of all
//! their predicates.
//!
//! Counting makes every satisfied predicate touch every conjunction that
//! needs it. When thousands of conjunctions share a predicate that most
//! messages satisfy (`tag1 = "a"` in every GES profile, or `price > N` for
//! half the thresholds), that is thousands of increments per message for
//! conjunctions that mostly fail on another predicate. A conjunction with an
//! equality predicate is instead filed once, in the cluster of its *access
//! predicate*: the equality of the conjunction that the fewest conjunctions
//! used when it was inserted, so that clusters stay small and a message
//! walks only the clusters of the equalities it satisfies. Each conjunction
//! walked tests its other predicates directly (`check.rs`).
//!
//! Members come in two kinds. A conjunction whose only other predicate is a
//! range predicate and which has no residual test is a *sorted* member,
//! filed in a run sorted by its bound (`range_runs.rs`), so that those a
//! message passes are found by binary search and their keys output as one
//! contiguous run; removal is a binary search and a shift of the run. Any
//! other conjunction is a *checked* member: it remembers its position in the
//! cluster, so that removal is a swap with the last member rather than a
//! search, and it tests its checks one by one when walked. A checked member
//! keeps its checks and its target (`target.rs`) in the cluster itself, so
//! that a walk reads members in a row rather than each conjunction where it
//! lies, and one without residual tests outputs its key on the spot.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::index::check::Check;
use crate::index::predicate::PredicateId;
use crate::index::range_runs::{RangeRuns, SortedRange};
use crate::index::target::Target;

/// A conjunction that tests its checks when its cluster is walked.
#[derive(Debug, Clone)]
pub(crate) struct CheckedMember<K> {
    /// Its predicates other than the access predicate; interned
    /// (`check_lists.rs`).
    pub(crate) checks: Arc<[Check]>,
    /// Its output.
    pub(crate) target: Target<K>,
    /// True when it has residual tests, so that passing its checks makes it
    /// a candidate rather than output.
    pub(crate) residual: bool,
}

/// The conjunctions filed under one access predicate.
#[derive(Debug, Clone)]
pub(crate) struct Cluster<K> {
    /// The checked members.
    pub(crate) checked: Vec<CheckedMember<K>>,
    /// The sorted members.
    pub(crate) sorted: RangeRuns<K>,
}

impl<K> Default for Cluster<K> {
    fn default() -> Self {
        Cluster { checked: Vec::new(), sorted: RangeRuns::default() }
    }
}

impl<K> Cluster<K> {
    /// How many members are filed, of both kinds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.checked.len() + self.sorted.len()
    }

    fn is_empty(&self) -> bool {
        self.checked.is_empty() && self.sorted.is_empty()
    }
}

/// The clusters of one partition, by access predicate.
#[derive(Debug, Clone)]
pub(crate) struct Clusters<K> {
    by_access: FxHashMap<PredicateId, Cluster<K>>,
    /// How many conjunctions are filed over all clusters.
    filed: usize,
    /// How many of them are sorted members.
    sorted: usize,
}

impl<K> Default for Clusters<K> {
    fn default() -> Self {
        Clusters { by_access: FxHashMap::default(), filed: 0, sorted: 0 }
    }
}

impl<K> Clusters<K> {
    /// Files `member` as a checked member of the cluster of `access`;
    /// returns its position there.
    pub(crate) fn file(&mut self, access: PredicateId, member: CheckedMember<K>) -> usize {
        let cluster = &mut self.by_access.entry(access).or_default().checked;
        cluster.push(member);
        self.filed += 1;
        cluster.len() - 1
    }

    /// Files `target` as a sorted member of the cluster of `access`, by its
    /// range predicate `range`.
    pub(crate) fn file_sorted(&mut self, access: PredicateId, range: &SortedRange, target: Target<K>) {
        self.by_access.entry(access).or_default().sorted.insert(range, target);
        self.filed += 1;
        self.sorted += 1;
    }

    /// Takes the checked member at `position` out of the cluster of
    /// `access`, dropping the cluster once empty. Returns the conjunction
    /// moved into the gap, if any, whose position is now `position`.
    pub(crate) fn unfile(&mut self, access: PredicateId, position: usize) -> Option<usize> {
        let cluster = self.by_access.get_mut(&access)?;
        if position >= cluster.checked.len() {
            return None;
        }
        cluster.checked.swap_remove(position);
        self.filed -= 1;
        let moved = cluster.checked.get(position).map(|member| member.target.conjunction);
        if cluster.is_empty() {
            self.by_access.remove(&access);
        }
        moved
    }

    /// Takes the sorted member `conjunction`, filed by `range`, out of the
    /// cluster of `access`, dropping the cluster once empty.
    pub(crate) fn unfile_sorted(&mut self, access: PredicateId, range: &SortedRange, conjunction: usize) {
        let Some(cluster) = self.by_access.get_mut(&access) else { return };
        if cluster.sorted.remove(range, conjunction) {
            self.filed -= 1;
            self.sorted -= 1;
        }
        if cluster.is_empty() {
            self.by_access.remove(&access);
        }
    }

    /// The cluster of `access`, if it has members.
    pub(crate) fn cluster(&self, access: PredicateId) -> Option<&Cluster<K>> {
        self.by_access.get(&access)
    }

    /// The conjunctions of the checked members filed under `access`, in
    /// order; empty when there are none.
    #[cfg(test)]
    pub(crate) fn checked(&self, access: PredicateId) -> Vec<usize> {
        let members = self.by_access.get(&access).map_or(&[][..], |cluster| cluster.checked.as_slice());
        members.iter().map(|member| member.target.conjunction).collect()
    }

    /// How many conjunctions are filed.
    pub(crate) fn len(&self) -> usize {
        self.filed
    }

    /// How many sorted members are filed.
    pub(crate) fn sorted_len(&self) -> usize {
        self.sorted
    }

    /// True when no conjunction is filed, so that matching can skip the
    /// lookups.
    pub(crate) fn is_empty(&self) -> bool {
        self.filed == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::number::NumberKey;
    use crate::index::predicate::{Bound, RangeOp};

    fn member(conjunction: usize) -> CheckedMember<usize> {
        let target = Target { conjunction, subscription: conjunction, sole: true, key: conjunction };
        CheckedMember { checks: Arc::new([]), target, residual: false }
    }

    fn range(predicate: PredicateId) -> SortedRange {
        let bound = Bound::Number(NumberKey::from_int(0));
        SortedRange { predicate, attribute: 0, op: RangeOp::Greater, bound }
    }

    #[test]
    fn removal_moves_the_last_member_into_the_gap() {
        let mut clusters: Clusters<usize> = Clusters::default();
        assert_eq!(clusters.file(7, member(10)), 0);
        assert_eq!(clusters.file(7, member(11)), 1);
        assert_eq!(clusters.file(7, member(12)), 2);
        assert_eq!(clusters.file(8, member(13)), 0);
        assert_eq!(clusters.len(), 4);
        assert_eq!(clusters.unfile(7, 0), Some(12));
        assert_eq!(clusters.checked(7), vec![12, 11]);
        assert_eq!(clusters.unfile(7, 1), None, "the last member moves nothing");
        assert_eq!(clusters.unfile(8, 0), None);
        assert!(clusters.checked(8).is_empty());
        assert!(!clusters.by_access.contains_key(&8), "an empty cluster is dropped");
        assert_eq!(clusters.unfile(9, 0), None, "an unknown cluster is ignored");
        assert_eq!(clusters.unfile(7, 0), None);
        assert!(clusters.is_empty());
        assert!(clusters.by_access.is_empty());
    }

    #[test]
    fn a_cluster_lasts_while_it_has_members_of_either_kind() {
        let mut clusters: Clusters<usize> = Clusters::default();
        clusters.file(7, member(10));
        clusters.file_sorted(7, &range(3), member(11).target);
        clusters.file_sorted(7, &range(3), member(12).target);
        assert_eq!((clusters.len(), clusters.sorted_len()), (3, 2));
        assert_eq!(clusters.cluster(7).map(Cluster::len), Some(3));
        assert_eq!(clusters.unfile(7, 0), None);
        assert_eq!(clusters.cluster(7).map(Cluster::len), Some(2), "the sorted members keep it");
        clusters.unfile_sorted(7, &range(3), 13);
        assert_eq!(clusters.len(), 2, "an unknown member is ignored");
        clusters.unfile_sorted(7, &range(3), 12);
        clusters.unfile_sorted(7, &range(3), 11);
        assert!(clusters.is_empty());
        assert_eq!(clusters.sorted_len(), 0);
        assert!(clusters.by_access.is_empty());
    }
}
