//! One streaming pass of a metadata document through the shared automaton.
//!
//! Each element's set of states is computed from its parent's (child
//! edges) and from every state of an ancestor that has descendant edges
//! (the YFilter `//` states, which stay active below the element that
//! entered them). Reaching a state makes its structural atom true. When an
//! element enters a state with groups of indexed tests, or with residual
//! atoms not yet true, its subtree is recorded as it streams by, and at its
//! end tag each group reads its relative path on that small tree once and
//! marks the tests its values satisfy (see `value_group`), while residuals
//! are evaluated: value predicates are only looked at once the structure
//! has matched. What happens after the pass is in `collect`.

use std::hash::Hash;

use crate::xpath::atoms::AtomTest;
use crate::xpath::automaton::START;
use crate::xpath::eval::holds;
use crate::xpath::reader::{read_xml, AttributeList, XmlSink};
use crate::xpath::scratch::{next_stamp, Bounds, Capture, XPathScratch};
use crate::xpath::set::XPathSet;
use crate::xpath::value::NodeRef;
use crate::xpath::xml_error::XmlError;

impl<K: Clone + Eq + Hash> XPathSet<K> {
    /// Appends to `out` the key of every filter that matches the metadata
    /// document, in no particular order, after one streaming pass over it.
    /// Malformed metadata is an error, and `out` is then left as it was.
    ///
    /// Takes `&self`, so any number of threads may match at once, each with
    /// its own `scratch`.
    pub fn matching(&self, metadata: &[u8], scratch: &mut XPathScratch, out: &mut Vec<K>) -> Result<(), XmlError> {
        let start_has_descendants = self.automaton.state(START).is_some_and(|start| start.has_descendant_edges());
        let bounds = Bounds {
            states: self.automaton.id_bound(),
            atoms: self.atoms.bound(),
            tests: self.values.test_bound(),
            filters: self.filters.len(),
        };
        scratch.begin(bounds, start_has_descendants);
        read_xml(metadata, &mut Pass { set: self, scratch })?;
        let matched_before = out.len();
        self.collect(metadata, scratch, out).inspect_err(|_| out.truncate(matched_before))
    }
}

/// The automaton's side of one pass: receives the reader's events.
struct Pass<'p, K> {
    set: &'p XPathSet<K>,
    scratch: &'p mut XPathScratch,
}

impl<K> Pass<'_, K> {
    /// Puts into the current element's set the states its parent's states
    /// lead to by child edges, and the active descendant states lead to.
    fn follow_edges(&mut self, name: &str, parent_start: usize) {
        let automaton = &self.set.automaton;
        let scratch = &mut *self.scratch;
        let parent_end = scratch.level_states.len();
        for index in parent_start..parent_end {
            let Some(state) = automaton.state(scratch.level_states[index]) else { continue };
            for next in [state.child(name), state.any_child()].into_iter().flatten() {
                scratch.enter_state(next);
            }
        }
        for index in 0..scratch.sources.len() {
            let Some(state) = automaton.state(scratch.sources[index]) else { continue };
            for next in [state.descendant(name), state.any_descendant()].into_iter().flatten() {
                scratch.enter_state(next);
            }
        }
    }

    /// Activates the new states' descendant edges and structural atoms;
    /// true when some state has groups to read or residual atoms still to
    /// decide, so the element must be captured.
    fn settle_states(&mut self, states_start: usize) -> bool {
        let automaton = &self.set.automaton;
        let scratch = &mut *self.scratch;
        let mut capture = false;
        for index in states_start..scratch.level_states.len() {
            let id = scratch.level_states[index];
            let Some(state) = automaton.state(id) else { continue };
            if state.has_descendant_edges() && !scratch.in_sources[id] {
                scratch.in_sources[id] = true;
                scratch.sources.push(id);
            }
            if let Some(atom) = state.structural_atom {
                scratch.mark_atom(atom);
            }
            // Groups are read on every element of the state, since a
            // conjunction must hold on one element and it is not known
            // yet which tests the filters woken after the pass will need.
            if !state.groups.is_empty() || state.value_atoms.iter().any(|&atom| !scratch.atom_is_true(atom)) {
                scratch.capture_states.push(id);
                capture = true;
            }
        }
        capture
    }

    /// Reads the groups and evaluates the residual atoms of a finished
    /// capture on its subtree.
    fn decide_capture(&mut self, capture: &Capture) {
        let scratch = &mut *self.scratch;
        for index in capture.states_start..scratch.capture_states.len() {
            let Some(state) = self.set.automaton.state(scratch.capture_states[index]) else { continue };
            for group in state.groups.iter().filter_map(|&group| self.set.values.group(group)) {
                group.satisfied(&scratch.tree, capture.node, &mut |test| scratch.tests.satisfy(test, capture.instance));
            }
            for &atom_id in &state.value_atoms {
                if scratch.atom_is_true(atom_id) {
                    continue;
                }
                let residual = match self.set.atoms.get(atom_id).map(|atom| &atom.test) {
                    Some(AtomTest::Residual(residual)) => residual,
                    _ => continue,
                };
                if holds(&scratch.tree, residual, NodeRef::Node(capture.node)) {
                    scratch.mark_atom(atom_id);
                }
            }
        }
        scratch.capture_states.truncate(capture.states_start);
    }
}

impl<K> XmlSink for Pass<'_, K> {
    fn start_element(&mut self, name: &str, attributes: &AttributeList) {
        self.scratch.element_stamp = next_stamp(self.scratch.element_stamp, &mut [&mut self.scratch.state_marks]);
        let parent_start = self.scratch.level_starts.last().copied().unwrap_or(0);
        let states_start = self.scratch.level_states.len();
        self.follow_edges(name, parent_start);
        self.scratch.level_starts.push(states_start);
        self.scratch.source_starts.push(self.scratch.sources.len());
        let capture_states_start = self.scratch.capture_states.len();
        let capture = self.settle_states(states_start);
        let scratch = &mut *self.scratch;
        if capture || !scratch.captures.is_empty() {
            let node = scratch.tree.push_element(name, attributes);
            if capture {
                let level = scratch.level_starts.len();
                scratch.instances += 1;
                let instance = scratch.instances;
                scratch.captures.push(Capture { level, node, states_start: capture_states_start, instance });
            }
        }
    }

    fn text(&mut self, text: &str) {
        if !self.scratch.captures.is_empty() {
            self.scratch.tree.push_text(text);
        }
    }

    fn end_element(&mut self) {
        if !self.scratch.captures.is_empty() {
            self.scratch.tree.close_element();
        }
        let level = self.scratch.level_starts.len();
        if self.scratch.captures.last().is_some_and(|capture| capture.level == level) {
            if let Some(capture) = self.scratch.captures.pop() {
                self.decide_capture(&capture);
            }
            if self.scratch.captures.is_empty() {
                self.scratch.tree.clear();
            }
        }
        let scratch = &mut *self.scratch;
        if let Some(start) = scratch.level_starts.pop() {
            scratch.level_states.truncate(start);
        }
        if let Some(start) = scratch.source_starts.pop() {
            for &state in &scratch.sources[start..] {
                scratch.in_sources[state] = false;
            }
            scratch.sources.truncate(start);
        }
    }
}
