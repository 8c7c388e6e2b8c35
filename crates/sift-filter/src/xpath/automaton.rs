//! The states of the shared automaton over element paths, in the manner of
//! YFilter: one state per distinct prefix of element steps across all
//! filters, so that filters sharing a prefix share the work of following it.
//!
//! A state has child edges (`name`, `*`: the next element must be a child
//! of one in this state) and descendant edges (`//name`, `//*`: any
//! descendant). States are created when a filter needs them and removed
//! when the last user goes, so that adding or removing a filter touches
//! only its own path.

use rustc_hash::FxHashMap;

use crate::xpath::plan::ElementStep;
use crate::xpath::value_index::GroupId;

/// Index of a state.
pub(crate) type StateId = usize;

/// Index of an atom (see [`crate::xpath::plan::AtomSpec`]).
pub(crate) type AtomId = usize;

/// The state of the root node, before any element.
pub(crate) const START: StateId = 0;

/// One state: the elements reached by one prefix of element steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    /// The state this one is reached from, and by which step; `None` for [`START`].
    parent: Option<(StateId, ElementStep)>,
    children: FxHashMap<String, StateId>,
    any_child: Option<StateId>,
    descendants: FxHashMap<String, StateId>,
    any_descendant: Option<StateId>,
    /// Atoms at this state plus states reached from it; at zero the state
    /// is removed.
    users: usize,
    /// The atom "some element reaches this state", if a filter uses it.
    pub(crate) structural_atom: Option<AtomId>,
    /// Atoms whose residual is evaluated on each element in this state.
    pub(crate) value_atoms: Vec<AtomId>,
    /// Groups of indexed tests read on each element in this state.
    pub(crate) groups: Vec<GroupId>,
}

impl State {
    /// The state a child element named `name` enters through a named edge.
    pub(crate) fn child(&self, name: &str) -> Option<StateId> {
        self.children.get(name).copied()
    }

    /// The state any child element enters through `*`.
    pub(crate) fn any_child(&self) -> Option<StateId> {
        self.any_child
    }

    /// The state a descendant element named `name` enters through `//name`.
    pub(crate) fn descendant(&self, name: &str) -> Option<StateId> {
        self.descendants.get(name).copied()
    }

    /// The state any descendant element enters through `//*`.
    pub(crate) fn any_descendant(&self) -> Option<StateId> {
        self.any_descendant
    }

    /// True when some edge leads to descendants, so the state must stay
    /// active below the element that entered it.
    pub(crate) fn has_descendant_edges(&self) -> bool {
        self.any_descendant.is_some() || !self.descendants.is_empty()
    }

    fn edge(&self, step: &ElementStep) -> Option<StateId> {
        match (step.descendants, &step.name) {
            (false, Some(name)) => self.child(name),
            (false, None) => self.any_child,
            (true, Some(name)) => self.descendant(name),
            (true, None) => self.any_descendant,
        }
    }

    fn set_edge(&mut self, step: &ElementStep, target: Option<StateId>) {
        let (named, any) = if step.descendants {
            (&mut self.descendants, &mut self.any_descendant)
        } else {
            (&mut self.children, &mut self.any_child)
        };
        match (&step.name, target) {
            (Some(name), Some(target)) => {
                named.insert(name.clone(), target);
            }
            (Some(name), None) => {
                named.remove(name);
            }
            (None, target) => *any = target,
        }
    }
}

/// All states, indexed by [`StateId`]; freed ids are reused.
#[derive(Debug, Clone)]
pub(crate) struct Automaton {
    states: Vec<Option<State>>,
    free: Vec<StateId>,
}

impl Automaton {
    /// An automaton with only the start state.
    pub(crate) fn new() -> Automaton {
        Automaton { states: vec![Some(State::default())], free: Vec::new() }
    }

    /// One more than the largest state id in use or free.
    pub(crate) fn id_bound(&self) -> usize {
        self.states.len()
    }

    /// The number of live states, the start state included.
    pub(crate) fn live_states(&self) -> usize {
        self.states.len() - self.free.len()
    }

    pub(crate) fn state(&self, id: StateId) -> Option<&State> {
        self.states.get(id).and_then(Option::as_ref)
    }

    pub(crate) fn state_mut(&mut self, id: StateId) -> Option<&mut State> {
        self.states.get_mut(id).and_then(Option::as_mut)
    }

    /// The state `prefix` leads to from the start, created with any missing
    /// states on the way. A new final state has no users: the caller adds one.
    pub(crate) fn intern(&mut self, prefix: &[ElementStep]) -> StateId {
        let mut current = START;
        for step in prefix {
            current = match self.state(current).and_then(|state| state.edge(step)) {
                Some(next) => next,
                None => self.add_state(current, step),
            };
        }
        current
    }

    fn add_state(&mut self, parent: StateId, step: &ElementStep) -> StateId {
        let state = State { parent: Some((parent, step.clone())), ..State::default() };
        let id = match self.free.pop() {
            Some(id) => {
                self.states[id] = Some(state);
                id
            }
            None => {
                self.states.push(Some(state));
                self.states.len() - 1
            }
        };
        if let Some(parent_state) = self.state_mut(parent) {
            parent_state.set_edge(step, Some(id));
            parent_state.users += 1;
        }
        id
    }

    /// Counts one more atom at `id`.
    pub(crate) fn add_user(&mut self, id: StateId) {
        if let Some(state) = self.state_mut(id) {
            state.users += 1;
        }
    }

    /// Counts one atom fewer at `id`, removing the state, and then its
    /// ancestors, once nothing uses them.
    pub(crate) fn remove_user(&mut self, id: StateId) {
        let mut current = id;
        while let Some(state) = self.state_mut(current) {
            state.users = state.users.saturating_sub(1);
            if state.users > 0 || current == START {
                return;
            }
            let Some((parent, step)) = state.parent.take() else { return };
            self.states[current] = None;
            self.free.push(current);
            if let Some(parent_state) = self.state_mut(parent) {
                parent_state.set_edge(&step, None);
            }
            current = parent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(path: &[(bool, &str)]) -> Vec<ElementStep> {
        path.iter()
            .map(|&(descendants, name)| ElementStep { descendants, name: (name != "*").then(|| name.to_string()) })
            .collect()
    }

    #[test]
    fn shares_prefixes_and_removes_unused_states() {
        let mut automaton = Automaton::new();
        let ato = automaton.intern(&steps(&[(false, "metadata"), (false, "ATO")]));
        automaton.add_user(ato);
        let temporal = automaton.intern(&steps(&[(false, "metadata"), (true, "*")]));
        automaton.add_user(temporal);
        assert_eq!(automaton.live_states(), 4, "start, metadata, ATO and //*");
        let metadata = automaton.state(START).and_then(|start| start.child("metadata")).expect("shared state");
        let metadata_state = automaton.state(metadata).expect("live");
        assert_eq!(metadata_state.child("ATO"), Some(ato));
        assert_eq!(metadata_state.any_descendant(), Some(temporal));
        assert!(metadata_state.has_descendant_edges());
        automaton.remove_user(ato);
        assert_eq!(automaton.live_states(), 3);
        automaton.remove_user(temporal);
        assert_eq!(automaton.live_states(), 1, "only the start state is left");
        assert_eq!(automaton.state(START).and_then(|start| start.child("metadata")), None);
        let reused = automaton.intern(&steps(&[(false, "x")]));
        assert!(reused < automaton.id_bound(), "freed ids are reused");
    }
}
