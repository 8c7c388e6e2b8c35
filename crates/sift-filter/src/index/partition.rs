//! Per partition: which conjunctions each predicate counts for, the
//! conjunctions that are candidates for every message, and how many
//! conjunctions need an XPath predicate (so that messages for partitions
//! with none skip the metadata pass).
//!
//! A conjunction sits in the list of each of its indexed predicates, or, if
//! it has none, on the partition's always-candidate list. It remembers its
//! position in each list, so that removing it is a swap with the last entry
//! rather than a search: unsubscribing stays cheap when thousands of
//! subscriptions share a predicate such as `sym = 'IBM'`.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::index::predicate::PredicateId;
use crate::index::residual::Residual;
use crate::index::slab::Slab;

/// One conjunction of a subscription's filter.
#[derive(Debug, Clone)]
pub(crate) struct Conjunction {
    /// The subscription whose key is output when the conjunction passes.
    pub(crate) subscription: usize,
    /// How many distinct indexed predicates must hold.
    pub(crate) required: usize,
    /// Tests that must pass once the indexed predicates hold.
    pub(crate) residual: Vec<Residual>,
    /// Each indexed predicate, with the conjunction's position in that
    /// predicate's list.
    memberships: Vec<(PredicateId, usize)>,
    /// The position on the always-candidate list, for a conjunction with no
    /// indexed predicate.
    always_position: Option<usize>,
    /// True when one of its predicates is an XPath filter.
    uses_xpath: bool,
}

impl Conjunction {
    /// A conjunction not yet filed in its partition; `uses_xpath` says
    /// whether one of its predicates is an XPath filter.
    pub(crate) fn new(subscription: usize, residual: Vec<Residual>, uses_xpath: bool) -> Conjunction {
        Conjunction { subscription, required: 0, residual, memberships: Vec::new(), always_position: None, uses_xpath }
    }

    /// The interned predicates it needs, for releasing them.
    pub(crate) fn predicates(&self) -> impl Iterator<Item = PredicateId> + '_ {
        self.memberships.iter().map(|(predicate, _)| *predicate)
    }

    fn move_in_list(&mut self, predicate: PredicateId, position: usize) {
        if let Some(membership) = self.memberships.iter_mut().find(|(member, _)| *member == predicate) {
            membership.1 = position;
        }
    }
}

/// The subscriptions of one partition and their conjunctions' lists.
#[derive(Debug, Clone)]
pub(crate) struct Partition<K> {
    /// For each predicate, the conjunctions that count it.
    pub(crate) by_predicate: FxHashMap<PredicateId, Vec<usize>>,
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
            always: Vec::new(),
            keys: HashMap::new(),
            xpath_conjunctions: 0,
        }
    }
}

impl<K> Partition<K> {
    /// Files conjunction `id` under `predicates` (distinct), or on the
    /// always-candidate list when there are none.
    pub(crate) fn link(&mut self, id: usize, conjunction: &mut Conjunction, predicates: &[PredicateId]) {
        conjunction.required = predicates.len();
        if conjunction.uses_xpath {
            self.xpath_conjunctions += 1;
        }
        if predicates.is_empty() {
            conjunction.always_position = Some(self.always.len());
            self.always.push(id);
            return;
        }
        for &predicate in predicates {
            let list = self.by_predicate.entry(predicate).or_default();
            conjunction.memberships.push((predicate, list.len()));
            list.push(id);
        }
    }

    /// Takes a removed conjunction out of its lists, updating the position of
    /// each conjunction moved into the gap.
    pub(crate) fn unlink(&mut self, conjunction: &Conjunction, conjunctions: &mut Slab<Conjunction>) {
        if conjunction.uses_xpath {
            self.xpath_conjunctions -= 1;
        }
        if let Some(position) = conjunction.always_position {
            self.always.swap_remove(position);
            if let Some(moved) = self.always.get(position).and_then(|moved| conjunctions.get_mut(*moved)) {
                moved.always_position = Some(position);
            }
        }
        for &(predicate, position) in &conjunction.memberships {
            let Some(list) = self.by_predicate.get_mut(&predicate) else { continue };
            list.swap_remove(position);
            if let Some(moved) = list.get(position).and_then(|moved| conjunctions.get_mut(*moved)) {
                moved.move_in_list(predicate, position);
            }
            if list.is_empty() {
                self.by_predicate.remove(&predicate);
            }
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
        let id = conjunctions.insert(Conjunction::new(0, Vec::new(), uses_xpath));
        if let Some(conjunction) = conjunctions.get_mut(id) {
            partition.link(id, conjunction, predicates);
        }
        id
    }

    fn remove(partition: &mut Partition<u32>, conjunctions: &mut Slab<Conjunction>, id: usize) {
        let conjunction = conjunctions.remove(id).expect("live");
        partition.unlink(&conjunction, conjunctions);
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
}
