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
//! Each conjunction remembers its position in its cluster, so that removal
//! is a swap with the last member rather than a search.

use rustc_hash::FxHashMap;

use crate::index::predicate::PredicateId;

/// The clusters of one partition, by access predicate.
#[derive(Debug, Clone, Default)]
pub(crate) struct Clusters {
    by_access: FxHashMap<PredicateId, Vec<usize>>,
    /// How many conjunctions are filed over all clusters.
    filed: usize,
}

impl Clusters {
    /// Files conjunction `id` in the cluster of `access`; returns its
    /// position there.
    pub(crate) fn file(&mut self, access: PredicateId, id: usize) -> usize {
        let cluster = self.by_access.entry(access).or_default();
        cluster.push(id);
        self.filed += 1;
        cluster.len() - 1
    }

    /// Takes the conjunction at `position` out of the cluster of `access`,
    /// dropping the cluster once empty. Returns the conjunction moved into
    /// the gap, if any, whose position is now `position`.
    pub(crate) fn unfile(&mut self, access: PredicateId, position: usize) -> Option<usize> {
        let cluster = self.by_access.get_mut(&access)?;
        if position >= cluster.len() {
            return None;
        }
        cluster.swap_remove(position);
        self.filed -= 1;
        let moved = cluster.get(position).copied();
        if cluster.is_empty() {
            self.by_access.remove(&access);
        }
        moved
    }

    /// The conjunctions filed under `access`; empty when there are none.
    pub(crate) fn cluster(&self, access: PredicateId) -> &[usize] {
        self.by_access.get(&access).map_or(&[], Vec::as_slice)
    }

    /// How many conjunctions are filed.
    pub(crate) fn len(&self) -> usize {
        self.filed
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

    #[test]
    fn removal_moves_the_last_member_into_the_gap() {
        let mut clusters = Clusters::default();
        assert_eq!(clusters.file(7, 10), 0);
        assert_eq!(clusters.file(7, 11), 1);
        assert_eq!(clusters.file(7, 12), 2);
        assert_eq!(clusters.file(8, 13), 0);
        assert_eq!(clusters.len(), 4);
        assert_eq!(clusters.unfile(7, 0), Some(12));
        assert_eq!(clusters.cluster(7), &[12, 11]);
        assert_eq!(clusters.unfile(7, 1), None, "the last member moves nothing");
        assert_eq!(clusters.unfile(8, 0), None);
        assert!(clusters.cluster(8).is_empty());
        assert!(!clusters.by_access.contains_key(&8), "an empty cluster is dropped");
        assert_eq!(clusters.unfile(9, 0), None, "an unknown cluster is ignored");
        assert_eq!(clusters.unfile(7, 0), None);
        assert!(clusters.is_empty());
        assert!(clusters.by_access.is_empty());
    }
}
