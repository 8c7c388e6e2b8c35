//! The atoms of all filters, each stored once however many filters use it.
//!
//! An atom (see `plan`) is kept in one of three forms. Without a residual
//! it is structural, true when some element reaches its state. A residual
//! of an indexed shape (see `value_test`) becomes a conjunction of tests in
//! the value index, decided by lookups when a captured element ends. Any
//! other residual is evaluated on each captured element, as a small tree.

use rustc_hash::FxHashMap;

use crate::xpath::ast::Expr;
use crate::xpath::automaton::{AtomId, Automaton, StateId};
use crate::xpath::guards::Waiter;
use crate::xpath::plan::AtomSpec;
use crate::xpath::value_index::{TestId, ValueIndex};
use crate::xpath::value_test::indexed_tests;

/// What decides an atom.
#[derive(Debug, Clone)]
pub(crate) enum AtomTest {
    /// Some element reaches the state.
    Structural,
    /// The residual holds on some element of the state, evaluated on its
    /// captured subtree.
    Residual(Expr),
    /// All these tests hold on one same element of the state.
    Indexed(Vec<TestId>),
}

/// One atom and the filters that use it.
#[derive(Debug, Clone)]
pub(crate) struct Atom {
    /// The state where the atom's prefix ends.
    pub(crate) state: StateId,
    pub(crate) test: AtomTest,
    /// Identifies the atom among the state's atoms.
    key: AtomKey,
    /// The filters whose formula mentions the atom; at zero it is removed.
    users: usize,
    /// Where a residual atom sits in its state's `value_atoms`.
    slot: usize,
    /// Filters to evaluate when this atom, decided during the pass, is true.
    pub(crate) triggered: Vec<Waiter>,
}

/// What makes two atoms of one state the same atom.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum AtomKey {
    Structural,
    /// The sorted ids of an indexed atom's tests: atoms that test the same
    /// on the same state are one, however their filters spell them.
    Tests(Box<[TestId]>),
    /// The debug form of a residual, which spells out the whole tree, so
    /// that equal keys mean equal residuals.
    Residual(String),
}

/// How a filter's formula reads one of its atoms after the pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Leaf {
    /// A structural or residual atom, decided during the pass.
    Decided(AtomId),
    /// An indexed atom of one test: true when the test holds.
    Test(TestId),
    /// An indexed atom of several tests: true when they hold on one element.
    Conjunction(AtomId),
}

/// All atoms, indexed by [`AtomId`]; freed ids are reused.
#[derive(Debug, Clone, Default)]
pub(crate) struct AtomTable {
    atoms: Vec<Option<Atom>>,
    free: Vec<AtomId>,
    index: FxHashMap<(StateId, AtomKey), AtomId>,
}

impl AtomTable {
    /// One more than the largest atom id in use or free.
    pub(crate) fn bound(&self) -> usize {
        self.atoms.len()
    }

    /// The number of live atoms.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn get(&self, id: AtomId) -> Option<&Atom> {
        self.atoms.get(id).and_then(Option::as_ref)
    }

    pub(crate) fn get_mut(&mut self, id: AtomId) -> Option<&mut Atom> {
        self.atoms.get_mut(id).and_then(Option::as_mut)
    }

    /// The tests of an indexed atom; none for other atoms.
    pub(crate) fn indexed_tests(&self, id: AtomId) -> &[TestId] {
        match self.get(id).map(|atom| &atom.test) {
            Some(AtomTest::Indexed(tests)) => tests,
            _ => &[],
        }
    }

    /// How formulas read the atom.
    pub(crate) fn leaf(&self, id: AtomId) -> Leaf {
        match self.get(id).map(|atom| &atom.test) {
            Some(AtomTest::Indexed(tests)) if tests.len() == 1 => Leaf::Test(tests[0]),
            Some(AtomTest::Indexed(_)) => Leaf::Conjunction(id),
            _ => Leaf::Decided(id),
        }
    }

    /// The atom for `spec`, created if new, with one more user.
    pub(crate) fn acquire(&mut self, spec: AtomSpec, automaton: &mut Automaton, values: &mut ValueIndex) -> AtomId {
        let state = automaton.intern(&spec.prefix);
        let (key, test) = classify(spec.residual, state, automaton, values);
        if let Some(&existing) = self.index.get(&(state, key.clone())) {
            if let Some(atom) = self.get_mut(existing) {
                atom.users += 1;
            }
            // The existing atom holds its own uses of the same tests.
            if let AtomTest::Indexed(tests) = test {
                tests.into_iter().for_each(|test| values.release(automaton, test));
            }
            return existing;
        }
        let id = self.free.pop().unwrap_or(self.atoms.len());
        let mut slot = 0;
        if let Some(state) = automaton.state_mut(state) {
            match test {
                AtomTest::Structural => state.structural_atom = Some(id),
                AtomTest::Residual(_) => {
                    slot = state.value_atoms.len();
                    state.value_atoms.push(id);
                }
                AtomTest::Indexed(_) => {}
            }
        }
        automaton.add_user(state);
        self.index.insert((state, key.clone()), id);
        let atom = Atom { state, test, key, users: 1, slot, triggered: Vec::new() };
        if id == self.atoms.len() {
            self.atoms.push(Some(atom));
        } else {
            self.atoms[id] = Some(atom);
        }
        id
    }

    /// Drops a user of the atom, deleting it when none is left.
    pub(crate) fn release(&mut self, id: AtomId, automaton: &mut Automaton, values: &mut ValueIndex) {
        let Some(atom) = self.get_mut(id) else { return };
        atom.users = atom.users.saturating_sub(1);
        if atom.users > 0 {
            return;
        }
        let Some(atom) = self.atoms[id].take() else { return };
        self.free.push(id);
        self.index.remove(&(atom.state, atom.key));
        match atom.test {
            AtomTest::Structural => {
                if let Some(state) = automaton.state_mut(atom.state) {
                    state.structural_atom = None;
                }
            }
            AtomTest::Residual(_) => self.unfile_residual(automaton, atom.state, atom.slot),
            AtomTest::Indexed(tests) => tests.into_iter().for_each(|test| values.release(automaton, test)),
        }
        automaton.remove_user(atom.state);
    }

    /// Takes the residual atom at `slot` out of its state's list.
    fn unfile_residual(&mut self, automaton: &mut Automaton, state: StateId, slot: usize) {
        let Some(state) = automaton.state_mut(state) else { return };
        state.value_atoms.swap_remove(slot);
        // The atom moved into the freed place must learn its new slot.
        if let Some(moved) = state.value_atoms.get(slot).and_then(|&moved| self.get_mut(moved)) {
            moved.slot = slot;
        }
    }

    /// Checks that every residual atom is where its state says, for tests.
    #[cfg(test)]
    pub(crate) fn assert_slots(&self, automaton: &Automaton) {
        for (id, atom) in self.atoms.iter().enumerate() {
            let Some(atom) = atom else { continue };
            let state = automaton.state(atom.state).expect("live state");
            if let AtomTest::Residual(_) = atom.test {
                assert_eq!(state.value_atoms[atom.slot], id);
            }
        }
    }
}

/// The key and test of an atom with this residual at `state`, acquiring
/// the tests of an indexed one.
fn classify(
    residual: Option<Expr>,
    state: StateId,
    automaton: &mut Automaton,
    values: &mut ValueIndex,
) -> (AtomKey, AtomTest) {
    let Some(residual) = residual else { return (AtomKey::Structural, AtomTest::Structural) };
    match indexed_tests(&residual) {
        Some(specs) if !specs.is_empty() => {
            let tests: Vec<TestId> = specs.into_iter().map(|spec| values.acquire(automaton, state, spec)).collect();
            let mut sorted = tests.clone();
            sorted.sort_unstable();
            (AtomKey::Tests(sorted.into_boxed_slice()), AtomTest::Indexed(tests))
        }
        _ => (AtomKey::Residual(format!("{residual:?}")), AtomTest::Residual(residual)),
    }
}
