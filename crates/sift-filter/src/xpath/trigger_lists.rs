//! The lists of filters each trigger wakes: on an atom, on a test, or on a
//! pair of tests (filed under the first test, by the second). A filter
//! remembers its index in each list, so that removing it is a swap with
//! the list's last filter, whose index is then corrected.

use std::hash::Hash;

use crate::xpath::guards::Waiter;
use crate::xpath::set::{FilterId, XPathSet};
use crate::xpath::triggers::Trigger;

impl<K: Clone + Eq + Hash> XPathSet<K> {
    /// Files a waiting filter under `trigger`; its index in the list, or `None`
    /// if the trigger names nothing live.
    pub(crate) fn file_trigger(&mut self, trigger: Trigger, waiter: Waiter) -> Option<usize> {
        let list = match trigger {
            Trigger::Atom(atom) => &mut self.atoms.get_mut(atom)?.triggered,
            Trigger::Test(test) => &mut self.values.test_mut(test)?.triggered,
            Trigger::Pair(first, second) => self.values.test_mut(first)?.pairs.entry(second).or_default(),
        };
        list.push(waiter);
        Some(list.len() - 1)
    }

    /// Takes the filter at `index` out of the trigger's list.
    pub(crate) fn unfile_trigger(&mut self, trigger: Trigger, index: usize) {
        let moved = match trigger {
            Trigger::Atom(atom) => self.atoms.get_mut(atom).and_then(|atom| swap_out(&mut atom.triggered, index)),
            Trigger::Test(test) => self.values.test_mut(test).and_then(|test| swap_out(&mut test.triggered, index)),
            Trigger::Pair(first, second) => {
                let Some(test) = self.values.test_mut(first) else { return };
                let Some(list) = test.pairs.get_mut(&second) else { return };
                let moved = swap_out(list, index);
                if list.is_empty() {
                    test.pairs.remove(&second);
                }
                moved
            }
        };
        // The filter moved into the freed place must learn its new index.
        if let Some(entry) = moved.and_then(|moved| self.filters.get_mut(moved)).and_then(Option::as_mut) {
            for link in entry.triggers.iter_mut().filter(|link| link.0 == trigger) {
                link.1 = index;
            }
        }
    }

    /// The filters a trigger wakes, for tests.
    #[cfg(test)]
    pub(crate) fn trigger_list(&self, trigger: Trigger) -> &[Waiter] {
        let list = match trigger {
            Trigger::Atom(atom) => self.atoms.get(atom).map(|atom| &atom.triggered),
            Trigger::Test(test) => self.values.test(test).map(|test| &test.triggered),
            Trigger::Pair(first, second) => self.values.test(first).and_then(|test| test.pairs.get(&second)),
        };
        list.map_or(&[], Vec::as_slice)
    }
}

/// Swap-removes the waiter at `index`; the filter moved into its place, if any.
fn swap_out(list: &mut Vec<Waiter>, index: usize) -> Option<FilterId> {
    if index >= list.len() {
        return None;
    }
    list.swap_remove(index);
    list.get(index).map(|waiter| waiter.filter)
}
