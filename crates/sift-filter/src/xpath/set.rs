//! Many XPath filters, kept so that one pass over a document finds all that
//! match: registration and removal. The pass itself is in `matcher`, what
//! follows it in `collect`.
//!
//! Each filter is planned into atoms (see `plan`); identical atoms of
//! different filters are stored once (see `atoms`), at the automaton state
//! their prefix leads to. The residual of an atom, when it compares
//! relative paths with constants (`/m/year >= 2003`,
//! `/m/ATO[nickname = 'KTJR' and serialno = 'targ1234']`), is not evaluated
//! per atom but answered by the *value index* (see `value_index`): its
//! comparisons are tests grouped per state and relative path, equality
//! tests in hash maps from constant to test, ordered tests in sorted arrays,
//! so that reading a path once per captured element finds every satisfied
//! test by lookup, whatever the number of filters. An atom of several tests
//! holds when they hold on one same element.
//!
//! A filter is then evaluated only when one of its *triggers* holds (see
//! `triggers`): a necessary condition chosen rare, such as the equality
//! test with the least common constant, or that test together with another
//! one, and filed with a few more necessary tests as guards, so that the cost
//! of a document grows with what matches rather than with the number of
//! filters. Adding or removing a filter touches only its own atoms, tests,
//! triggers and states, so a set of a hundred thousand filters never needs
//! rebuilding.

use std::collections::HashMap;
use std::hash::Hash;

use crate::xpath::atoms::{AtomTable, Leaf};
use crate::xpath::automaton::{AtomId, Automaton};
use crate::xpath::formula::Formula;
use crate::xpath::guards::Waiter;
use crate::xpath::plan::{plan, Plan};
use crate::xpath::program::Program;
use crate::xpath::triggers::{choose_triggers, SetSelectivity, Trigger};
use crate::xpath::value_index::{TestId, ValueIndex};
use crate::xpath::XPathFilter;

/// Index of a filter slot.
pub(crate) type FilterId = usize;

/// What evaluating a woken filter needs, kept apart from the rest of its
/// entry in a dense array, so that evaluating touches little memory.
#[derive(Debug, Clone)]
pub(crate) struct Compiled<K> {
    pub(crate) key: K,
    /// The filter's value over its atoms (exact plans), or a condition the
    /// filter implies (fallback plans).
    pub(crate) program: Program,
    /// True when the filter must then be evaluated on the document tree.
    pub(crate) fallback: bool,
}

/// One filter of the set: what its insertion acquired, to release on removal.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The filter itself when it must be evaluated on the document tree.
    pub(crate) fallback: Option<XPathFilter>,
    /// Each atom acquired for the formula, as often as acquired.
    atoms: Vec<AtomId>,
    /// Each indexed test the formula mentions, once.
    tests: Vec<TestId>,
    /// The filter's triggers, each with this filter's index in its list.
    pub(crate) triggers: Vec<(Trigger, usize)>,
    /// Where the filter sits in `unconditional`, if there.
    unconditional_slot: Option<usize>,
}

/// A set of XPath filters, each under a key, matched together against
/// metadata documents by [`XPathSet::matching`] at a cost that grows with
/// what matches rather than with the number of filters.
#[derive(Debug, Clone)]
pub struct XPathSet<K> {
    pub(crate) automaton: Automaton,
    pub(crate) atoms: AtomTable,
    pub(crate) values: ValueIndex,
    pub(crate) filters: Vec<Option<Entry>>,
    /// Per filter slot, what evaluating the filter needs.
    pub(crate) compiled: Vec<Option<Compiled<K>>>,
    free_filters: Vec<FilterId>,
    keys: HashMap<K, FilterId>,
    /// Filters whose formula holds when no atom does (`not(/a)`), which
    /// must be checked on every document.
    pub(crate) unconditional: Vec<FilterId>,
}

impl<K: Clone + Eq + Hash> Default for XPathSet<K> {
    fn default() -> Self {
        XPathSet::new()
    }
}

impl<K: Clone + Eq + Hash> XPathSet<K> {
    /// An empty set.
    pub fn new() -> XPathSet<K> {
        XPathSet {
            automaton: Automaton::new(),
            atoms: AtomTable::default(),
            values: ValueIndex::default(),
            filters: Vec::new(),
            compiled: Vec::new(),
            free_filters: Vec::new(),
            keys: HashMap::new(),
            unconditional: Vec::new(),
        }
    }

    /// The number of filters in the set.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when the set holds no filter.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The number of automaton states, the start state included; shared
    /// prefixes count once. For tests and statistics.
    pub fn state_count(&self) -> usize {
        self.automaton.live_states()
    }

    /// Adds `filter` under `key`, replacing the filter the key had; true
    /// when the key is new. Costs a few hash lookups per step, atom and
    /// test of the filter, whatever the size of the set, plus for an
    /// ordered test with a new threshold an insertion into its group's
    /// sorted array.
    pub fn insert(&mut self, key: K, filter: &XPathFilter) -> bool {
        let replaced = self.remove(&key);
        let (formula, fallback) = match plan(filter.expr()) {
            Plan::Exact(formula) => (formula, None),
            Plan::Fallback(formula) => (formula, Some(filter.clone())),
        };
        let id = self.free_filters.pop().unwrap_or(self.filters.len());
        let mut atoms = Vec::new();
        let formula = formula.map(&mut |spec| {
            let atom = self.atoms.acquire(spec, &mut self.automaton, &mut self.values);
            atoms.push(atom);
            self.atoms.leaf(atom)
        });
        let tests = self.count_mentions(&formula);
        let compiled = Compiled {
            key: key.clone(),
            program: Program::compile(&formula, &self.atoms),
            fallback: fallback.is_some(),
        };
        let mut entry = Entry { fallback, atoms, tests, triggers: Vec::new(), unconditional_slot: None };
        if formula.evaluate(&|_| false) {
            self.unconditional.push(id);
            entry.unconditional_slot = Some(self.unconditional.len() - 1);
        } else {
            let selectivity = SetSelectivity { atoms: &self.atoms, values: &self.values };
            for wake in choose_triggers(&formula, &selectivity) {
                let waiter = Waiter { filter: id, guards: wake.guards };
                if let Some(index) = self.file_trigger(wake.trigger, waiter) {
                    entry.triggers.push((wake.trigger, index));
                }
            }
        }
        if id == self.filters.len() {
            self.filters.push(Some(entry));
            self.compiled.push(Some(compiled));
        } else {
            self.filters[id] = Some(entry);
            self.compiled[id] = Some(compiled);
        }
        self.keys.insert(key, id);
        !replaced
    }

    /// Counts one more mention of each indexed test of the formula, which
    /// it returns, each once.
    fn count_mentions(&mut self, formula: &Formula<Leaf>) -> Vec<TestId> {
        let mut tests = Vec::new();
        formula.for_each_atom(&mut |leaf| match *leaf {
            Leaf::Test(test) => tests.push(test),
            Leaf::Conjunction(atom) => tests.extend_from_slice(self.atoms.indexed_tests(atom)),
            Leaf::Decided(_) => {}
        });
        tests.sort_unstable();
        tests.dedup();
        for &test in &tests {
            self.values.count_mention(test, true);
        }
        tests
    }

    /// Removes the filter under `key`; false when there was none.
    pub fn remove(&mut self, key: &K) -> bool {
        let Some(id) = self.keys.remove(key) else {
            return false;
        };
        let Some(entry) = self.filters.get_mut(id).and_then(Option::take) else {
            return false;
        };
        self.free_filters.push(id);
        self.compiled[id] = None;
        for &(trigger, index) in &entry.triggers {
            self.unfile_trigger(trigger, index);
        }
        for &test in &entry.tests {
            self.values.count_mention(test, false);
        }
        for &atom in &entry.atoms {
            self.atoms.release(atom, &mut self.automaton, &mut self.values);
        }
        if let Some(slot) = entry.unconditional_slot {
            self.unconditional.swap_remove(slot);
            if let Some(moved) = self.unconditional.get(slot).and_then(|&moved| self.filters[moved].as_mut()) {
                moved.unconditional_slot = Some(slot);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(text: &str) -> XPathFilter {
        XPathFilter::parse(text).expect("parses")
    }

    #[test]
    fn shares_atoms_and_states_and_cleans_up() {
        let mut set = XPathSet::new();
        assert!(set.insert("a", &filter("/metadata/ATO[nickname = 'KTJR']")));
        assert!(set.insert("b", &filter("/metadata/ATO[nickname = 'KTJR'] or /metadata/Orig")));
        assert!(set.insert("c", &filter("not(/metadata/ATO/serialno)")));
        assert_eq!(set.len(), 3);
        assert_eq!(set.state_count(), 5, "start, metadata, ATO, Orig, serialno");
        assert_eq!(set.atoms.live(), 3, "the ATO predicate is one atom for two filters");
        assert_eq!(set.values.live(), (1, 1), "one test, in one group");
        assert_eq!(set.unconditional.len(), 1);
        assert!(!set.insert("a", &filter("/metadata/Orig")), "replacing keeps the count");
        assert_eq!(set.len(), 3);
        for key in ["a", "b", "c"] {
            assert!(set.remove(&key));
        }
        assert!(!set.remove(&"a"));
        assert!(set.is_empty());
        assert_eq!(set.state_count(), 1);
        assert_eq!(set.atoms.live(), 0);
        assert_eq!(set.values.live(), (0, 0));
        assert!(set.unconditional.is_empty());
    }

    /// Every filter is where its triggers say, and every residual atom
    /// where its state says.
    fn assert_links(set: &XPathSet<usize>) {
        for (id, entry) in set.filters.iter().enumerate() {
            let Some(entry) = entry else { continue };
            for &(trigger, index) in &entry.triggers {
                assert_eq!(set.trigger_list(trigger).get(index).map(|waiter| waiter.filter), Some(id), "{trigger:?}");
            }
        }
        set.atoms.assert_slots(&set.automaton);
    }

    #[test]
    fn removal_keeps_the_other_links_right() {
        let mut set = XPathSet::new();
        for key in 0..60 {
            let text = match key % 3 {
                0 => format!("/m/x[. = {}] or /m/y", key % 5),
                1 => format!("/m/r[a = 'k{}' and b = 'j{}']", key % 4, key % 7),
                _ => format!("/m/z[contains(., '{}')] and /m/x >= {}", key % 6, key % 8),
            };
            set.insert(key, &filter(&text));
        }
        for key in (0..60).filter(|key| key % 4 == 0) {
            assert!(set.remove(&key));
        }
        assert_links(&set);
        for key in (0..60).filter(|key| key % 4 != 0) {
            assert!(set.remove(&key));
            assert_links(&set);
        }
        assert_eq!(set.values.live(), (0, 0));
        assert_eq!(set.state_count(), 1);
    }
}
