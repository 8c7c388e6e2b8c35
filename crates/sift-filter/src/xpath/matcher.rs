//! One streaming pass of a metadata document through the shared automaton.
//!
//! Each element's set of states is computed from its parent's (child
//! edges) and from every state of an ancestor that has descendant edges
//! (the YFilter `//` states, which stay active below the element that
//! entered them). Reaching a state makes its structural atom true. When an
//! element enters a state with value atoms not yet true, its subtree is
//! recorded as it streams by, and at its end tag the atoms' residuals are
//! evaluated on that small tree: value predicates are only looked at once
//! the structure has matched. After the pass, only filters that mention a
//! true atom (plus the few that hold with no atom true) are evaluated; the
//! document tree is built only if one of them must fall back to it.

use std::hash::Hash;

use crate::xpath::automaton::{AtomId, StateId, START};
use crate::xpath::document::{NodeId, XmlDocument};
use crate::xpath::eval::holds;
use crate::xpath::reader::{read_xml, AttributeList, XmlSink};
use crate::xpath::set::{FilterId, XPathSet};
use crate::xpath::value::NodeRef;
use crate::xpath::xml_error::XmlError;

/// Working memory for [`XPathSet::matching`], reused from document to
/// document so that a pass allocates nothing once warm and costs nothing
/// for the filters it does not touch. Keep one per thread.
#[derive(Debug)]
pub struct XPathScratch {
    /// Bumped per element; a state whose mark equals it is already in the
    /// current element's set.
    element_stamp: u32,
    state_marks: Vec<u32>,
    /// States with descendant edges active for the current element.
    in_sources: Vec<bool>,
    /// Bumped per document; an atom or filter whose mark equals it is true
    /// or already a candidate.
    document_stamp: u32,
    atom_marks: Vec<u32>,
    filter_marks: Vec<u32>,
    /// The states of each open element, level after level (the root first).
    level_states: Vec<StateId>,
    level_starts: Vec<usize>,
    /// States with descendant edges of all open elements, level after level.
    sources: Vec<StateId>,
    source_starts: Vec<usize>,
    true_atoms: Vec<AtomId>,
    captures: Vec<Capture>,
    /// States whose value atoms wait for the end of a capture, per capture.
    capture_states: Vec<StateId>,
    /// The subtrees being captured, and after the pass the whole document
    /// when a fallback filter needs it.
    tree: XmlDocument,
    candidates: Vec<FilterId>,
}

/// An element whose subtree is being recorded for its states' value atoms.
#[derive(Debug)]
struct Capture {
    /// Its level (the number of open elements, itself included).
    level: usize,
    /// Its node in the recorded tree.
    node: NodeId,
    /// Where its states start in `capture_states`.
    states_start: usize,
}

impl Default for XPathScratch {
    fn default() -> Self {
        XPathScratch::new()
    }
}

impl XPathScratch {
    /// Empty working memory; it grows to fit the sets it is used with.
    pub fn new() -> XPathScratch {
        XPathScratch {
            element_stamp: 0,
            state_marks: Vec::new(),
            in_sources: Vec::new(),
            document_stamp: 0,
            atom_marks: Vec::new(),
            filter_marks: Vec::new(),
            level_states: Vec::new(),
            level_starts: Vec::new(),
            sources: Vec::new(),
            source_starts: Vec::new(),
            true_atoms: Vec::new(),
            captures: Vec::new(),
            capture_states: Vec::new(),
            tree: XmlDocument::empty(),
            candidates: Vec::new(),
        }
    }

    /// Readies the memory for a new document over a set with the given id
    /// bounds. Only what the previous pass left (it may have stopped at an
    /// error) is cleaned, so the cost does not grow with the set.
    fn begin(&mut self, states: usize, atoms: usize, filters: usize, start_has_descendants: bool) {
        grow(&mut self.state_marks, states, 0);
        grow(&mut self.in_sources, states, false);
        grow(&mut self.atom_marks, atoms, 0);
        grow(&mut self.filter_marks, filters, 0);
        for &state in &self.sources {
            self.in_sources[state] = false;
        }
        self.document_stamp = next_stamp(self.document_stamp, &mut [&mut self.atom_marks, &mut self.filter_marks]);
        self.level_states.clear();
        self.level_states.push(START);
        self.level_starts.clear();
        self.level_starts.push(0);
        self.sources.clear();
        self.source_starts.clear();
        self.source_starts.push(0);
        if start_has_descendants {
            self.sources.push(START);
            self.in_sources[START] = true;
        }
        self.true_atoms.clear();
        self.captures.clear();
        self.capture_states.clear();
        self.tree.clear();
        self.candidates.clear();
    }

    /// Adds a state to the current element's set, once.
    fn enter_state(&mut self, state: StateId) {
        if self.state_marks[state] != self.element_stamp {
            self.state_marks[state] = self.element_stamp;
            self.level_states.push(state);
        }
    }

    fn atom_is_true(&self, atom: AtomId) -> bool {
        self.atom_marks[atom] == self.document_stamp
    }

    fn mark_atom(&mut self, atom: AtomId) {
        if !self.atom_is_true(atom) {
            self.atom_marks[atom] = self.document_stamp;
            self.true_atoms.push(atom);
        }
    }

    fn add_candidate(&mut self, filter: FilterId) {
        if self.filter_marks[filter] != self.document_stamp {
            self.filter_marks[filter] = self.document_stamp;
            self.candidates.push(filter);
        }
    }
}

fn grow<T: Clone>(marks: &mut Vec<T>, length: usize, fill: T) {
    if marks.len() < length {
        marks.resize(length, fill);
    }
}

/// The stamp after `stamp`; on wrapping, the marks are zeroed so that no
/// stale mark can equal a new stamp.
fn next_stamp(stamp: u32, marks: &mut [&mut Vec<u32>]) -> u32 {
    if stamp == u32::MAX {
        for marks in marks.iter_mut() {
            marks.iter_mut().for_each(|mark| *mark = 0);
        }
        return 1;
    }
    stamp + 1
}

impl<K: Clone + Eq + Hash> XPathSet<K> {
    /// Appends to `out` the key of every filter that matches the metadata
    /// document, in no particular order, after one streaming pass over it.
    /// Malformed metadata is an error, and `out` is then left as it was.
    ///
    /// Takes `&self`, so any number of threads may match at once, each with
    /// its own `scratch`.
    pub fn matching(&self, metadata: &[u8], scratch: &mut XPathScratch, out: &mut Vec<K>) -> Result<(), XmlError> {
        let start_has_descendants = self.automaton.state(START).is_some_and(|start| start.has_descendant_edges());
        scratch.begin(self.automaton.id_bound(), self.atoms.len(), self.filters.len(), start_has_descendants);
        read_xml(metadata, &mut Pass { set: self, scratch })?;
        let matched_before = out.len();
        self.collect(metadata, scratch, out).inspect_err(|_| out.truncate(matched_before))
    }

    /// Evaluates the filters that mention a true atom, and the unconditional
    /// ones, after the pass.
    fn collect(&self, metadata: &[u8], scratch: &mut XPathScratch, out: &mut Vec<K>) -> Result<(), XmlError> {
        for index in 0..scratch.true_atoms.len() {
            let atom = scratch.true_atoms[index];
            for &filter in self.atoms[atom].as_ref().map_or(&[][..], |atom| &atom.filters) {
                scratch.add_candidate(filter);
            }
        }
        for &filter in &self.unconditional {
            scratch.add_candidate(filter);
        }
        let mut tree_built = false;
        for index in 0..scratch.candidates.len() {
            let Some(entry) = self.filters[scratch.candidates[index]].as_ref() else {
                continue;
            };
            if !entry.formula.evaluate(&|&atom| scratch.atom_is_true(atom)) {
                continue;
            }
            let Some(filter) = &entry.fallback else {
                out.push(entry.key.clone());
                continue;
            };
            if !tree_built {
                scratch.tree.parse_into(metadata)?;
                tree_built = true;
            }
            if filter.matches_document(&scratch.tree) {
                out.push(entry.key.clone());
            }
        }
        Ok(())
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
    /// true when some state has value atoms still to decide, so the
    /// element must be captured.
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
            if state.value_atoms.iter().any(|&atom| !scratch.atom_is_true(atom)) {
                scratch.capture_states.push(id);
                capture = true;
            }
        }
        capture
    }

    /// Evaluates the value atoms of a finished capture on its subtree.
    fn decide_capture(&mut self, capture: &Capture) {
        let scratch = &mut *self.scratch;
        for index in capture.states_start..scratch.capture_states.len() {
            let Some(state) = self.set.automaton.state(scratch.capture_states[index]) else { continue };
            for &atom_id in &state.value_atoms {
                if scratch.atom_is_true(atom_id) {
                    continue;
                }
                let residual = self.set.atoms[atom_id].as_ref().and_then(|atom| atom.residual.as_ref());
                if residual.is_some_and(|residual| holds(&scratch.tree, residual, NodeRef::Node(capture.node))) {
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
                scratch.captures.push(Capture { level, node, states_start: capture_states_start });
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
