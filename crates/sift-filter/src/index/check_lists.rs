//! Interned check lists: clustered conjunctions whose other predicates are
//! the same share one list of checks.
//!
//! Walking a cluster reads each member's checks. Were every member's list
//! its own allocation, a large cluster would cost a cache miss per member
//! for the list alone (the profile of the GES workload at 100k profiles
//! showed two thirds of matching time there). Subscribers often want the
//! same thing, which is why predicates are interned; interning the lists as
//! well lets the members of a cluster that test the same predicates read
//! one list that stays in cache, and saves the memory of the copies.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::index::check::Check;

/// Every distinct check list in use, with how many conjunctions use it.
#[derive(Debug, Clone, Default)]
pub(crate) struct CheckLists {
    lists: FxHashMap<Arc<[Check]>, usize>,
}

impl CheckLists {
    /// The shared list equal to `checks`, taking one reference to it.
    pub(crate) fn acquire(&mut self, checks: Vec<Check>) -> Arc<[Check]> {
        match self.lists.entry(checks.into()) {
            Entry::Occupied(mut entry) => {
                *entry.get_mut() += 1;
                Arc::clone(entry.key())
            }
            Entry::Vacant(entry) => {
                let list = Arc::clone(entry.key());
                entry.insert(1);
                list
            }
        }
    }

    /// Gives back one reference to `list`; the last one forgets it.
    pub(crate) fn release(&mut self, list: &Arc<[Check]>) {
        let Some(users) = self.lists.get_mut(list) else { return };
        *users -= 1;
        if *users == 0 {
            self.lists.remove(list);
        }
    }

    /// How many distinct lists are in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lists.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_lists_are_shared_until_the_last_is_released() {
        let mut lists = CheckLists::default();
        let first = lists.acquire(vec![Check::Satisfied(1), Check::Satisfied(2)]);
        let second = lists.acquire(vec![Check::Satisfied(1), Check::Satisfied(2)]);
        let other = lists.acquire(vec![Check::Satisfied(2)]);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(lists.len(), 2);
        lists.release(&first);
        assert_eq!(lists.len(), 2, "the second still uses it");
        lists.release(&second);
        lists.release(&other);
        assert_eq!(lists.len(), 0);
    }
}
