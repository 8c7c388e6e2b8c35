//! What follows the pass: waking the filters whose triggers hold, and
//! evaluating their formulas.
//!
//! A trigger is a satisfied test (read off the value index's marks), a
//! satisfied pair of tests whose first is an equality, or a true
//! structural or residual atom; a filter in its list is woken when its
//! guards hold too. Filters that hold with no atom true are always
//! evaluated. A woken filter's program then reads its atoms: decided ones
//! from the pass's marks, indexed ones from the test marks, a conjunction
//! of tests being true only when they hold on one same element. The
//! document tree is built only if a woken filter must fall back to it.

use std::hash::Hash;

use crate::xpath::automaton::AtomId;
use crate::xpath::guards::Waiter;
use crate::xpath::program::LeafValues;
use crate::xpath::scratch::XPathScratch;
use crate::xpath::set::{FilterId, XPathSet};
use crate::xpath::value_index::{Test, TestId};
use crate::xpath::xml_error::XmlError;

impl<K: Clone + Eq + Hash> XPathSet<K> {
    /// Evaluates the woken filters after the pass, appending the keys of
    /// those that match.
    pub(crate) fn collect(
        &self,
        metadata: &[u8],
        scratch: &mut XPathScratch,
        out: &mut Vec<K>,
    ) -> Result<(), XmlError> {
        scratch.tests.finish();
        self.wake(scratch);
        self.touch_programs(&scratch.candidates);
        let mut tree_built = false;
        for index in 0..scratch.candidates.len() {
            let filter = scratch.candidates[index];
            let Some(compiled) = self.compiled.get(filter).and_then(Option::as_ref) else { continue };
            if !compiled.program.evaluate(&PassValues { scratch }) {
                continue;
            }
            if !compiled.fallback {
                out.push(compiled.key.clone());
                continue;
            }
            let Some(tree_filter) = self.filters[filter].as_ref().and_then(|entry| entry.fallback.as_ref()) else {
                continue;
            };
            if !tree_built {
                scratch.tree.parse_into(metadata)?;
                tree_built = true;
            }
            if tree_filter.matches_document(&scratch.tree) {
                out.push(compiled.key.clone());
            }
        }
        Ok(())
    }

    /// Reads each candidate's program in a loop of its own. With many
    /// filters the programs are mostly not in cache; the iterations here
    /// depend on nothing but the list, so the processor fetches many at
    /// once, where evaluating the candidates one after the other would
    /// wait for each in turn.
    fn touch_programs(&self, candidates: &[FilterId]) {
        let mut touched = 0;
        for &filter in candidates {
            touched ^=
                self.compiled.get(filter).and_then(Option::as_ref).map_or(0, |compiled| compiled.program.touch());
        }
        std::hint::black_box(touched);
    }

    /// Makes candidates of the filters whose triggers hold, and of the
    /// unconditional ones.
    fn wake(&self, scratch: &mut XPathScratch) {
        for index in 0..scratch.tests.list.len() {
            let Some(test) = self.values.test(scratch.tests.list[index]) else { continue };
            wake_waiters(&test.triggered, scratch);
            if !test.pairs.is_empty() {
                wake_pairs(test, scratch);
            }
        }
        for index in 0..scratch.true_atoms.len() {
            let Some(atom) = self.atoms.get(scratch.true_atoms[index]) else { continue };
            wake_waiters(&atom.triggered, scratch);
        }
        for &filter in &self.unconditional {
            scratch.add_candidate(filter);
        }
    }
}

/// The values of atoms and tests, once the pass is over.
struct PassValues<'s> {
    scratch: &'s XPathScratch,
}

impl LeafValues for PassValues<'_> {
    fn decided(&self, atom: AtomId) -> bool {
        self.scratch.atom_is_true(atom)
    }

    fn test(&self, test: TestId) -> bool {
        self.scratch.tests.holds(test)
    }

    fn together(&self, tests: impl Iterator<Item = TestId> + Clone) -> bool {
        self.scratch.tests.hold_together(tests)
    }
}

/// Wakes the filters of the pairs filed under a satisfied test whose
/// partner holds too, walking the partners or the satisfied tests,
/// whichever are fewer: a common test may have many partners.
fn wake_pairs(test: &Test, scratch: &mut XPathScratch) {
    if test.pairs.len() <= scratch.tests.list.len() {
        for (&partner, filters) in &test.pairs {
            if scratch.tests.holds(partner) {
                wake_waiters(filters, scratch);
            }
        }
        return;
    }
    for index in 0..scratch.tests.list.len() {
        if let Some(filters) = test.pairs.get(&scratch.tests.list[index]) {
            wake_waiters(filters, scratch);
        }
    }
}

/// Wakes the filters of a trigger's list whose guards hold.
fn wake_waiters(waiters: &[Waiter], scratch: &mut XPathScratch) {
    for waiter in waiters {
        if waiter.guards.tests().all(|test| scratch.tests.holds(test)) {
            scratch.add_candidate(waiter.filter);
        }
    }
}
