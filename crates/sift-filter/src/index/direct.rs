//! Conjunctions of one predicate and no residual test, whose keys a
//! satisfied predicate outputs directly.
//!
//! Every XPath and regex filter is such a conjunction, as is a tags filter
//! of one equality or a selector of one comparison. Counting would add one
//! to each one's counter, find the counter at its required one, list it as
//! a candidate and then look its conjunction and subscription up to output
//! its key; but a satisfied predicate already decides all of them. So each
//! partition keeps, per predicate, the targets (`target.rs`) of these
//! conjunctions, and a satisfied predicate outputs its whole list.
//!
//! Each conjunction remembers its position in its list, so that removal is
//! a swap with the last entry rather than a search.

use rustc_hash::FxHashMap;

use crate::index::predicate::PredicateId;
use crate::index::target::Target;

/// The direct lists of one partition, by predicate.
#[derive(Debug, Clone)]
pub(crate) struct DirectLists<K> {
    by_predicate: FxHashMap<PredicateId, Vec<Target<K>>>,
    /// How many conjunctions are filed over all lists.
    filed: usize,
}

impl<K> Default for DirectLists<K> {
    fn default() -> Self {
        DirectLists { by_predicate: FxHashMap::default(), filed: 0 }
    }
}

impl<K> DirectLists<K> {
    /// Files `target` in the list of `predicate`; returns its position there.
    pub(crate) fn file(&mut self, predicate: PredicateId, target: Target<K>) -> usize {
        let list = self.by_predicate.entry(predicate).or_default();
        list.push(target);
        self.filed += 1;
        list.len() - 1
    }

    /// Takes the entry at `position` out of the list of `predicate`,
    /// dropping the list once empty. Returns the conjunction moved into the
    /// gap, if any, whose position is now `position`.
    pub(crate) fn unfile(&mut self, predicate: PredicateId, position: usize) -> Option<usize> {
        let list = self.by_predicate.get_mut(&predicate)?;
        if position >= list.len() {
            return None;
        }
        list.swap_remove(position);
        self.filed -= 1;
        let moved = list.get(position).map(|target| target.conjunction);
        if list.is_empty() {
            self.by_predicate.remove(&predicate);
        }
        moved
    }

    /// The targets of `predicate`; empty when there are none.
    pub(crate) fn list(&self, predicate: PredicateId) -> &[Target<K>] {
        self.by_predicate.get(&predicate).map_or(&[], Vec::as_slice)
    }

    /// How many conjunctions are filed.
    pub(crate) fn len(&self) -> usize {
        self.filed
    }

    /// True when none is filed, so that matching can skip the lookups.
    pub(crate) fn is_empty(&self) -> bool {
        self.filed == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(conjunction: usize) -> Target<usize> {
        Target { conjunction, subscription: conjunction, sole: true, key: conjunction }
    }

    fn keys(lists: &DirectLists<usize>, predicate: PredicateId) -> Vec<usize> {
        lists.list(predicate).iter().map(|target| target.key).collect()
    }

    #[test]
    fn removal_moves_the_last_entry_into_the_gap() {
        let mut lists = DirectLists::default();
        assert_eq!(lists.file(7, target(10)), 0);
        assert_eq!(lists.file(7, target(11)), 1);
        assert_eq!(lists.file(7, target(12)), 2);
        assert_eq!(lists.file(8, target(13)), 0);
        assert_eq!(lists.len(), 4);
        assert_eq!(lists.unfile(7, 0), Some(12));
        assert_eq!(keys(&lists, 7), vec![12, 11]);
        assert_eq!(lists.unfile(7, 1), None, "the last entry moves nothing");
        assert_eq!(lists.unfile(8, 0), None);
        assert!(lists.list(8).is_empty());
        assert_eq!(lists.unfile(9, 0), None, "an unknown list is ignored");
        assert_eq!(lists.unfile(7, 0), None);
        assert!(lists.is_empty());
        assert!(lists.by_predicate.is_empty(), "empty lists are dropped");
    }
}
