//! The working memory of a pass, kept from document to document.

use crate::xpath::automaton::{AtomId, StateId, START};
use crate::xpath::document::{NodeId, XmlDocument};
use crate::xpath::set::FilterId;
use crate::xpath::test_marks::{Instance, TestMarks};

/// Working memory for [`crate::xpath::XPathSet::matching`], reused from
/// document to document so that a pass allocates nothing once warm and
/// costs nothing for the filters it does not touch. Keep one per thread.
#[derive(Debug)]
pub struct XPathScratch {
    /// Bumped per element; a state whose mark equals it is already in the
    /// current element's set.
    pub(crate) element_stamp: u32,
    pub(crate) state_marks: Vec<u32>,
    /// States with descendant edges active for the current element.
    pub(crate) in_sources: Vec<bool>,
    /// Bumped per document; an atom or filter whose mark equals it is true
    /// or already a candidate.
    document_stamp: u32,
    atom_marks: Vec<u32>,
    filter_marks: Vec<u32>,
    /// The states of each open element, level after level (the root first).
    pub(crate) level_states: Vec<StateId>,
    pub(crate) level_starts: Vec<usize>,
    /// States with descendant edges of all open elements, level after level.
    pub(crate) sources: Vec<StateId>,
    pub(crate) source_starts: Vec<usize>,
    /// The structural and residual atoms found true.
    pub(crate) true_atoms: Vec<AtomId>,
    pub(crate) captures: Vec<Capture>,
    /// States whose value atoms or groups wait for the end of a capture,
    /// per capture.
    pub(crate) capture_states: Vec<StateId>,
    /// The number of elements captured so far in the document.
    pub(crate) instances: Instance,
    /// The indexed tests satisfied, and on which captured elements.
    pub(crate) tests: TestMarks,
    /// The subtrees being captured, and after the pass the whole document
    /// when a fallback filter needs it.
    pub(crate) tree: XmlDocument,
    pub(crate) candidates: Vec<FilterId>,
}

/// An element whose subtree is being recorded for its states' value atoms
/// and groups.
#[derive(Debug)]
pub(crate) struct Capture {
    /// Its level (the number of open elements, itself included).
    pub(crate) level: usize,
    /// Its node in the recorded tree.
    pub(crate) node: NodeId,
    /// Where its states start in `capture_states`.
    pub(crate) states_start: usize,
    /// Its instance number, which its satisfied tests are marked with.
    pub(crate) instance: Instance,
}

impl Default for XPathScratch {
    fn default() -> Self {
        XPathScratch::new()
    }
}

/// The sizes of a set's id spaces, which the scratch arrays must cover.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) states: usize,
    pub(crate) atoms: usize,
    pub(crate) tests: usize,
    pub(crate) filters: usize,
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
            instances: 0,
            tests: TestMarks::default(),
            tree: XmlDocument::empty(),
            candidates: Vec::new(),
        }
    }

    /// Readies the memory for a new document over a set with the given id
    /// bounds. Only what the previous pass left (it may have stopped at an
    /// error) is cleaned, so the cost does not grow with the set.
    pub(crate) fn begin(&mut self, bounds: Bounds, start_has_descendants: bool) {
        grow(&mut self.state_marks, bounds.states, 0);
        grow(&mut self.in_sources, bounds.states, false);
        grow(&mut self.atom_marks, bounds.atoms, 0);
        grow(&mut self.filter_marks, bounds.filters, 0);
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
        self.instances = 0;
        self.tests.begin(bounds.tests);
        self.tree.clear();
        self.candidates.clear();
    }

    /// Adds a state to the current element's set, once.
    pub(crate) fn enter_state(&mut self, state: StateId) {
        if self.state_marks[state] != self.element_stamp {
            self.state_marks[state] = self.element_stamp;
            self.level_states.push(state);
        }
    }

    /// True when a structural or residual atom was found true.
    pub(crate) fn atom_is_true(&self, atom: AtomId) -> bool {
        self.atom_marks[atom] == self.document_stamp
    }

    pub(crate) fn mark_atom(&mut self, atom: AtomId) {
        if !self.atom_is_true(atom) {
            self.atom_marks[atom] = self.document_stamp;
            self.true_atoms.push(atom);
        }
    }

    /// Adds a filter to evaluate after the pass, once.
    pub(crate) fn add_candidate(&mut self, filter: FilterId) {
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
pub(crate) fn next_stamp(stamp: u32, marks: &mut [&mut Vec<u32>]) -> u32 {
    if stamp == u32::MAX {
        for marks in marks.iter_mut() {
            marks.iter_mut().for_each(|mark| *mark = 0);
        }
        return 1;
    }
    stamp + 1
}
