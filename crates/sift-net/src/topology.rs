//! The link-state database: what every broker says about its own links.
//!
//! Each broker originates one [`LinkState`] (its neighbours and the cost of
//! each link) with a sequence number it raises at every change, and floods it
//! to the whole network. [`Topology::apply`] keeps only the newest state per
//! origin and tells the caller whether it was new, so that the caller floods
//! it on exactly when it learnt something (older and repeated states stop
//! there, which is what ends the flood in a cyclic graph).
//!
//! From the database, [`Topology::tree`] computes the shortest-path tree
//! rooted at any broker; trees are computed lazily, per origin, and cached
//! until the database changes.

use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::FxHashMap;

use crate::tree::{Graph, SpTree};

/// A broker's name, shared rather than copied.
pub type BrokerName = Arc<str>;

/// Most links one broker may advertise. Far above any real fan-out; it keeps
/// a malformed or hostile state from making every broker's graph huge.
pub const LINKS_PER_BROKER_MAX: usize = 4096;

/// Longest broker name accepted in a link state, in bytes.
pub const BROKER_NAME_BYTES_MAX: usize = 255;

/// What one broker says about its links at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// The broker that originated this state and whose links it lists.
    pub origin: BrokerName,
    /// Raised by the origin at every change; newer states replace older ones.
    pub sequence: u64,
    /// The origin's neighbours with the cost of the link to each.
    pub links: Vec<(BrokerName, u32)>,
}

/// Why a link state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkStateError {
    /// A broker name is empty or longer than [`BROKER_NAME_BYTES_MAX`].
    #[error("broker name {0:?} must be 1 to {BROKER_NAME_BYTES_MAX} bytes long")]
    BadName(String),
    /// The state lists more than [`LINKS_PER_BROKER_MAX`] links.
    #[error("link state of {origin} lists {count} links, more than {LINKS_PER_BROKER_MAX}")]
    TooManyLinks {
        /// The originating broker.
        origin: String,
        /// How many links it listed.
        count: usize,
    },
}

/// What [`Topology::apply`] did with a link state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The first state heard from this origin: flood it on.
    Inserted,
    /// A newer state than the one held, now replacing it: flood it on.
    Replaced,
    /// A state no newer than the one held: ignored, do not flood it.
    Stale,
}

impl Applied {
    /// True when the database changed, so the caller floods the state to its
    /// other neighbours.
    pub fn changed(self) -> bool {
        !matches!(self, Applied::Stale)
    }
}

/// The link-state database of one broker, with its cache of trees.
///
/// Deterministic: two topologies holding the same states compute the same
/// trees, whatever order the states arrived in, because brokers are numbered
/// by name and every tie is broken by name.
#[derive(Debug, Default)]
pub struct Topology {
    states: FxHashMap<BrokerName, LinkState>,
    generation: u64,
    cache: Mutex<Cache>,
}

/// The graph and trees derived from the database, valid for one generation.
/// Behind a mutex so that `tree` can take `&self` and be called by several
/// reader threads; computing a tree is O(L log B) and happens once per origin
/// per change.
#[derive(Debug, Default)]
struct Cache {
    graph: Option<Arc<Graph>>,
    trees: FxHashMap<BrokerName, Arc<SpTree>>,
}

impl Topology {
    /// An empty database.
    pub fn new() -> Topology {
        Topology::default()
    }

    /// Takes `state` when it is newer than what is held for its origin.
    ///
    /// The links are normalised first (self-links dropped, sorted by name, a
    /// neighbour listed twice keeps its cheaper cost), so equal information
    /// compares equal. A newer state with the same links is still
    /// [`Applied::Replaced`], since the other brokers must learn the new
    /// sequence too, but it leaves the cached trees alone.
    pub fn apply(&mut self, state: LinkState) -> Result<Applied, LinkStateError> {
        let state = normalise(state)?;
        let applied = match self.states.get(&state.origin) {
            None => Applied::Inserted,
            Some(held) if held.sequence >= state.sequence => return Ok(Applied::Stale),
            Some(held) if held.links == state.links => {
                let origin = state.origin.clone();
                self.states.insert(origin, state);
                return Ok(Applied::Replaced);
            }
            Some(_) => Applied::Replaced,
        };
        self.states.insert(state.origin.clone(), state);
        self.invalidate();
        Ok(applied)
    }

    /// Drops everything known from `origin` (the caller decides when a
    /// broker is gone, e.g. when its state has aged out). Returns false when
    /// nothing was held. A state from `origin` heard later is taken whatever
    /// its sequence, so the caller should keep aging consistent network-wide.
    pub fn forget(&mut self, origin: &str) -> bool {
        let removed = self.states.remove(origin).is_some();
        if removed {
            self.invalidate();
        }
        removed
    }

    /// The state held for `origin`, if any.
    pub fn state(&self, origin: &str) -> Option<&LinkState> {
        self.states.get(origin)
    }

    /// Every state held, in name order (for flooding the whole database to a
    /// new neighbour).
    pub fn states(&self) -> Vec<&LinkState> {
        let mut states: Vec<&LinkState> = self.states.values().collect();
        states.sort_by(|left, right| left.origin.cmp(&right.origin));
        states
    }

    /// Number of origins held.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True when no state is held.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Moves on with every change to the links (not with a bare sequence
    /// bump), so a caller can tell when its own derived state is stale.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The confirmed neighbours of `broker` (both ends advertise the link)
    /// with the cost used for routing, in name order.
    pub fn neighbours(&self, broker: &str) -> Vec<(BrokerName, u32)> {
        self.graph().neighbours(broker)
    }

    /// The shortest-path tree rooted at `source`, computed on first use and
    /// cached until the database changes. A source the database does not
    /// know gets an empty tree, which is not cached, so that unknown names
    /// cannot grow the cache.
    pub fn tree(&self, source: &str) -> Arc<SpTree> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tree) = cache.trees.get(source) {
            return tree.clone();
        }
        let graph = cache.graph.get_or_insert_with(|| Arc::new(Graph::build(&self.states))).clone();
        let Some(name) = graph.name_of(source).cloned() else {
            return Arc::new(SpTree::empty(graph));
        };
        let tree = Arc::new(SpTree::compute(graph, &name));
        cache.trees.insert(name, tree.clone());
        tree
    }

    /// The graph of confirmed links, built on first use after a change.
    fn graph(&self) -> Arc<Graph> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.graph.get_or_insert_with(|| Arc::new(Graph::build(&self.states))).clone()
    }

    fn invalidate(&mut self) {
        self.generation += 1;
        let cache = self.cache.get_mut().unwrap_or_else(PoisonError::into_inner);
        cache.graph = None;
        cache.trees.clear();
    }
}

/// Checks a state and puts its links in canonical form.
fn normalise(mut state: LinkState) -> Result<LinkState, LinkStateError> {
    check_name(&state.origin)?;
    if state.links.len() > LINKS_PER_BROKER_MAX {
        return Err(LinkStateError::TooManyLinks { origin: state.origin.to_string(), count: state.links.len() });
    }
    for (neighbour, _) in &state.links {
        check_name(neighbour)?;
    }
    let origin = state.origin.clone();
    state.links.retain(|(neighbour, _)| *neighbour != origin);
    // Sorting by (name, cost) puts a repeated neighbour's cheapest cost first.
    state.links.sort();
    state.links.dedup_by(|later, earlier| later.0 == earlier.0);
    Ok(state)
}

fn check_name(name: &str) -> Result<(), LinkStateError> {
    if name.is_empty() || name.len() > BROKER_NAME_BYTES_MAX {
        return Err(LinkStateError::BadName(name.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(origin: &str, sequence: u64, links: &[(&str, u32)]) -> LinkState {
        LinkState {
            origin: origin.into(),
            sequence,
            links: links.iter().map(|(name, cost)| (BrokerName::from(*name), *cost)).collect(),
        }
    }

    #[test]
    fn only_newer_sequences_are_taken() {
        let mut topology = Topology::new();
        assert_eq!(topology.apply(state("a", 2, &[("b", 1)])), Ok(Applied::Inserted));
        assert_eq!(topology.apply(state("a", 2, &[("c", 1)])), Ok(Applied::Stale));
        assert_eq!(topology.apply(state("a", 1, &[("c", 1)])), Ok(Applied::Stale));
        assert_eq!(topology.apply(state("a", 3, &[("c", 1)])), Ok(Applied::Replaced));
        assert!(Applied::Replaced.changed() && !Applied::Stale.changed());
        assert_eq!(topology.state("a").map(|held| held.sequence), Some(3));
    }

    #[test]
    fn a_link_counts_only_when_both_ends_advertise_it() {
        let mut topology = Topology::new();
        topology.apply(state("a", 1, &[("b", 1), ("c", 1)])).expect("valid");
        topology.apply(state("b", 1, &[("a", 1)])).expect("valid");
        topology.apply(state("c", 1, &[])).expect("valid");
        let neighbours: Vec<String> = topology.neighbours("a").iter().map(|(name, _)| name.to_string()).collect();
        assert_eq!(neighbours, ["b"]);
        assert!(topology.tree("a").distance("c").is_none());
    }

    #[test]
    fn the_cost_of_a_link_is_the_higher_of_the_two_advertised() {
        let mut topology = Topology::new();
        topology.apply(state("a", 1, &[("b", 3), ("b", 7), ("a", 1)])).expect("valid");
        topology.apply(state("b", 1, &[("a", 5)])).expect("valid");
        assert_eq!(topology.state("a").map(|held| held.links.len()), Some(1));
        assert_eq!(topology.neighbours("a"), vec![(BrokerName::from("b"), 5)]);
    }

    #[test]
    fn trees_are_cached_until_the_links_change() {
        let mut topology = Topology::new();
        topology.apply(state("a", 1, &[("b", 1)])).expect("valid");
        topology.apply(state("b", 1, &[("a", 1)])).expect("valid");
        let first = topology.tree("a");
        assert!(Arc::ptr_eq(&first, &topology.tree("a")));
        let generation = topology.generation();
        topology.apply(state("b", 2, &[("a", 1)])).expect("valid");
        assert!(Arc::ptr_eq(&first, &topology.tree("a")), "a bare sequence bump keeps the trees");
        assert_eq!(topology.generation(), generation);
        topology.apply(state("b", 3, &[])).expect("valid");
        assert!(!Arc::ptr_eq(&first, &topology.tree("a")));
        assert!(topology.tree("a").distance("b").is_none());
    }

    #[test]
    fn forgetting_a_broker_removes_its_links() {
        let mut topology = Topology::new();
        topology.apply(state("a", 1, &[("b", 1)])).expect("valid");
        topology.apply(state("b", 1, &[("a", 1)])).expect("valid");
        assert_eq!(topology.tree("a").distance("b"), Some(1));
        assert!(topology.forget("b"));
        assert!(!topology.forget("b"));
        assert_eq!(topology.tree("a").distance("b"), None);
        assert_eq!(topology.len(), 1);
    }

    #[test]
    fn malformed_states_are_refused() {
        let mut topology = Topology::new();
        assert!(matches!(topology.apply(state("", 1, &[])), Err(LinkStateError::BadName(_))));
        assert!(matches!(topology.apply(state("a", 1, &[("", 1)])), Err(LinkStateError::BadName(_))));
        let many: Vec<(BrokerName, u32)> =
            (0..=LINKS_PER_BROKER_MAX).map(|index| (BrokerName::from(index.to_string()), 1)).collect();
        let too_many = LinkState { origin: "a".into(), sequence: 1, links: many };
        assert!(matches!(topology.apply(too_many), Err(LinkStateError::TooManyLinks { .. })));
        assert!(topology.is_empty());
    }

    #[test]
    fn unknown_sources_get_an_empty_tree() {
        let topology = Topology::new();
        let tree = topology.tree("nobody");
        assert!(!tree.contains("nobody"));
        assert!(tree.children("nobody").is_empty());
    }
}
