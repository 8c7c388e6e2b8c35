//! Many XPath filters, kept so that one pass over a document finds all that
//! match: registration and removal. The pass itself is in `matcher`.
//!
//! Each filter is planned into atoms (see `plan`); identical atoms of
//! different filters are stored once, at the automaton state their prefix
//! leads to, with the list of filters that use them. Adding or removing a
//! filter touches only its own atoms and states, so a set of a hundred
//! thousand filters never needs rebuilding.

use std::collections::HashMap;
use std::hash::Hash;

use crate::xpath::ast::Expr;
use crate::xpath::automaton::{AtomId, Automaton, StateId};
use crate::xpath::formula::Formula;
use crate::xpath::plan::{plan, AtomSpec, Plan};
use crate::xpath::XPathFilter;

/// Index of a filter slot.
pub(crate) type FilterId = usize;

/// One atom: a test answered once per document for every filter using it.
#[derive(Debug, Clone)]
pub(crate) struct Atom {
    /// The state where the atom's prefix ends.
    pub(crate) state: StateId,
    /// Evaluated on each element reaching the state; `None` for an atom
    /// that only needs the state reached.
    pub(crate) residual: Option<Expr>,
    /// Identifies the residual among the state's atoms.
    key: String,
    /// The filters whose formula mentions the atom, each once.
    pub(crate) filters: Vec<FilterId>,
    /// Where the atom sits in its state's `value_atoms`.
    slot: usize,
}

/// One filter of the set.
#[derive(Debug, Clone)]
pub(crate) struct Entry<K> {
    pub(crate) key: K,
    /// The filter's value over atoms (exact plans), or a condition the
    /// filter implies (fallback plans).
    pub(crate) formula: Formula<AtomId>,
    /// The filter itself when it must be evaluated on the document tree.
    pub(crate) fallback: Option<XPathFilter>,
    /// Each atom the formula mentions, with this filter's index in the
    /// atom's `filters`.
    links: Vec<(AtomId, usize)>,
    /// Where the filter sits in `unconditional`, if there.
    unconditional_slot: Option<usize>,
}

/// A set of XPath filters, each under a key, matched together against
/// metadata documents by [`XPathSet::matching`] at a cost that grows with
/// what matches rather than with the number of filters.
#[derive(Debug, Clone)]
pub struct XPathSet<K> {
    pub(crate) automaton: Automaton,
    pub(crate) atoms: Vec<Option<Atom>>,
    free_atoms: Vec<AtomId>,
    atom_index: HashMap<(StateId, String), AtomId>,
    pub(crate) filters: Vec<Option<Entry<K>>>,
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
            atoms: Vec::new(),
            free_atoms: Vec::new(),
            atom_index: HashMap::new(),
            filters: Vec::new(),
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
    /// when the key is new. Costs a few hash lookups per step and atom of
    /// the filter, whatever the size of the set.
    pub fn insert(&mut self, key: K, filter: &XPathFilter) -> bool {
        let replaced = self.remove(&key);
        let (formula, fallback) = match plan(filter.expr()) {
            Plan::Exact(formula) => (formula, None),
            Plan::Fallback(formula) => (formula, Some(filter.clone())),
        };
        let id = self.free_filters.pop().unwrap_or(self.filters.len());
        let mut links = Vec::new();
        let formula = formula.map(&mut |spec| self.register(spec, id, &mut links));
        let unconditional_slot = formula.evaluate(&|_| false).then(|| {
            self.unconditional.push(id);
            self.unconditional.len() - 1
        });
        let entry = Entry { key: key.clone(), formula, fallback, links, unconditional_slot };
        if id == self.filters.len() {
            self.filters.push(Some(entry));
        } else {
            self.filters[id] = Some(entry);
        }
        self.keys.insert(key, id);
        !replaced
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
        for (atom, index) in entry.links {
            self.unlink(atom, index);
        }
        if let Some(slot) = entry.unconditional_slot {
            self.unconditional.swap_remove(slot);
            if let Some(moved) = self.unconditional.get(slot).and_then(|&moved| self.filters[moved].as_mut()) {
                moved.unconditional_slot = Some(slot);
            }
        }
        true
    }

    /// The atom for `spec`, created if new, linked to `filter` once.
    fn register(&mut self, spec: AtomSpec, filter: FilterId, links: &mut Vec<(AtomId, usize)>) -> AtomId {
        let state = self.automaton.intern(&spec.prefix);
        // The debug form spells out the whole tree, so equal keys mean
        // equal residuals.
        let key = spec.residual.as_ref().map(|residual| format!("{residual:?}")).unwrap_or_default();
        let atom_id = match self.atom_index.get(&(state, key.clone())) {
            Some(&existing) => existing,
            None => self.create_atom(state, spec.residual, key),
        };
        if !links.iter().any(|&(linked, _)| linked == atom_id) {
            if let Some(atom) = self.atoms[atom_id].as_mut() {
                links.push((atom_id, atom.filters.len()));
                atom.filters.push(filter);
            }
        }
        atom_id
    }

    fn create_atom(&mut self, state_id: StateId, residual: Option<Expr>, key: String) -> AtomId {
        let id = self.free_atoms.pop().unwrap_or(self.atoms.len());
        let mut slot = 0;
        if let Some(state) = self.automaton.state_mut(state_id) {
            if residual.is_some() {
                slot = state.value_atoms.len();
                state.value_atoms.push(id);
            } else {
                state.structural_atom = Some(id);
            }
        }
        self.automaton.add_user(state_id);
        self.atom_index.insert((state_id, key.clone()), id);
        let atom = Atom { state: state_id, residual, key, filters: Vec::new(), slot };
        if id == self.atoms.len() {
            self.atoms.push(Some(atom));
        } else {
            self.atoms[id] = Some(atom);
        }
        id
    }

    /// Drops the link at `index` of the atom's filters, deleting the atom
    /// when no filter is left.
    fn unlink(&mut self, atom_id: AtomId, index: usize) {
        let Some(atom) = self.atoms[atom_id].as_mut() else {
            return;
        };
        atom.filters.swap_remove(index);
        let moved = atom.filters.get(index).copied();
        let now_unused = atom.filters.is_empty();
        // The filter moved into the freed place must learn its new index.
        if let Some(entry) = moved.and_then(|moved| self.filters[moved].as_mut()) {
            for link in entry.links.iter_mut().filter(|link| link.0 == atom_id) {
                link.1 = index;
            }
        }
        if now_unused {
            self.delete_atom(atom_id);
        }
    }

    fn delete_atom(&mut self, atom_id: AtomId) {
        let Some(atom) = self.atoms[atom_id].take() else {
            return;
        };
        self.free_atoms.push(atom_id);
        self.atom_index.remove(&(atom.state, atom.key));
        if let Some(state) = self.automaton.state_mut(atom.state) {
            if atom.residual.is_none() {
                state.structural_atom = None;
            } else {
                state.value_atoms.swap_remove(atom.slot);
                if let Some(moved) = state.value_atoms.get(atom.slot).and_then(|&moved| self.atoms[moved].as_mut()) {
                    moved.slot = atom.slot;
                }
            }
        }
        self.automaton.remove_user(atom.state);
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
        let live_atoms = set.atoms.iter().flatten().count();
        assert_eq!(live_atoms, 3, "the ATO predicate is one atom for two filters");
        assert_eq!(set.unconditional.len(), 1);
        assert!(!set.insert("a", &filter("/metadata/Orig")), "replacing keeps the count");
        assert_eq!(set.len(), 3);
        for key in ["a", "b", "c"] {
            assert!(set.remove(&key));
        }
        assert!(!set.remove(&"a"));
        assert!(set.is_empty());
        assert_eq!(set.state_count(), 1);
        assert_eq!(set.atoms.iter().flatten().count(), 0);
        assert!(set.atom_index.is_empty());
        assert!(set.unconditional.is_empty());
    }

    #[test]
    fn removal_keeps_the_other_links_right() {
        let mut set = XPathSet::new();
        for key in 0..50 {
            set.insert(key, &filter(&format!("/m/x[. = {}] or /m/y", key % 5)));
        }
        for key in (0..50).filter(|key| key % 3 == 0) {
            assert!(set.remove(&key));
        }
        for (id, entry) in set.filters.iter().enumerate() {
            let Some(entry) = entry else { continue };
            for &(atom, index) in &entry.links {
                let atom = set.atoms[atom].as_ref().expect("linked atoms are live");
                assert_eq!(atom.filters[index], id);
            }
        }
        for (id, atom) in set.atoms.iter().enumerate() {
            let Some(atom) = atom else { continue };
            let state = set.automaton.state(atom.state).expect("live state");
            if atom.residual.is_some() {
                assert_eq!(state.value_atoms[atom.slot], id);
            }
        }
    }
}
