//! Shortest-path trees over the graph of confirmed links.
//!
//! [`Graph`] numbers the brokers by name and keeps, per broker, the links
//! both ends advertise. [`SpTree::compute`] runs Dijkstra from one source
//! with a total order on paths, so that every broker computing the tree of
//! the same source from the same database gets the same tree:
//!
//! 1. lower total cost;
//! 2. then fewer hops;
//! 3. then the parent whose name sorts first.
//!
//! The tree also keeps its brokers in pre-order (children in name order), so
//! the brokers below any broker are one contiguous slice: [`SpTree::subtree`]
//! is a slice, and asking whether a subtree holds an interested broker costs
//! no more than walking it, with O(B) memory per tree.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::topology::{BrokerName, LinkState};

/// Brokers with a link state, numbered in name order, and their confirmed
/// links.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    names: Vec<BrokerName>,
    index: FxHashMap<BrokerName, u32>,
    /// Per broker, (neighbour index, cost), in neighbour index order.
    adjacency: Vec<Vec<(u32, u32)>>,
}

impl Graph {
    /// The graph of the links both ends advertise. The cost of a link is the
    /// higher of the two advertised, so it is the same in both directions
    /// (the path from A to B is the path from B to A reversed) and a link
    /// whose ends disagree is priced pessimistically.
    pub(crate) fn build(states: &FxHashMap<BrokerName, LinkState>) -> Graph {
        let mut names: Vec<BrokerName> = states.keys().cloned().collect();
        names.sort();
        let index: FxHashMap<BrokerName, u32> =
            names.iter().enumerate().map(|(position, name)| (name.clone(), to_index(position))).collect();
        let adjacency = names
            .iter()
            .map(|name| {
                let mut links: Vec<(u32, u32)> = states[name]
                    .links
                    .iter()
                    .filter_map(|(neighbour, cost)| {
                        let reverse = advertised_cost(states.get(neighbour)?, name)?;
                        Some((*index.get(neighbour)?, (*cost).max(reverse)))
                    })
                    .collect();
                links.sort_unstable();
                links
            })
            .collect();
        Graph { names, index, adjacency }
    }

    /// The graph's own copy of `broker`'s name, when it has a link state.
    pub(crate) fn name_of(&self, broker: &str) -> Option<&BrokerName> {
        self.index.get(broker).map(|&position| &self.names[position as usize])
    }

    /// The confirmed neighbours of `broker` with their costs, in name order.
    pub(crate) fn neighbours(&self, broker: &str) -> Vec<(BrokerName, u32)> {
        let Some(&position) = self.index.get(broker) else {
            return Vec::new();
        };
        self.adjacency[position as usize]
            .iter()
            .map(|&(neighbour, cost)| (self.names[neighbour as usize].clone(), cost))
            .collect()
    }
}

/// The cost `state` advertises for its link to `neighbour`, if it lists one.
/// Links are sorted by name after normalisation, so this is a binary search.
fn advertised_cost(state: &LinkState, neighbour: &str) -> Option<u32> {
    let position = state.links.binary_search_by(|(name, _)| (**name).cmp(neighbour)).ok()?;
    Some(state.links[position].1)
}

/// Broker counts are bounded by the link-state limits far below `u32::MAX`.
fn to_index(position: usize) -> u32 {
    u32::try_from(position).unwrap_or(u32::MAX)
}

/// Total cost and hops from the source; compared in that order.
type Label = (u64, u32);

/// A position in [`SpTree::order`]: `start..end` is a broker's subtree.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: u32,
    end: u32,
}

/// The shortest-path tree rooted at one broker.
#[derive(Debug)]
pub struct SpTree {
    graph: Arc<Graph>,
    source: Option<u32>,
    parent: Vec<Option<u32>>,
    /// Cost and hops from the source; `None` when unreachable.
    label: Vec<Option<Label>>,
    children: Vec<Vec<BrokerName>>,
    children_index: Vec<Vec<u32>>,
    /// Reachable brokers in pre-order, children in name order.
    order: Vec<BrokerName>,
    span: Vec<Span>,
}

impl SpTree {
    /// The tree of a source the database does not know: it holds nobody.
    pub(crate) fn empty(graph: Arc<Graph>) -> SpTree {
        SpTree {
            graph,
            source: None,
            parent: Vec::new(),
            label: Vec::new(),
            children: Vec::new(),
            children_index: Vec::new(),
            order: Vec::new(),
            span: Vec::new(),
        }
    }

    /// Dijkstra from `source`, which must be in `graph`.
    pub(crate) fn compute(graph: Arc<Graph>, source: &str) -> SpTree {
        let Some(&root) = graph.index.get(source) else {
            return SpTree::empty(graph);
        };
        let (label, parent) = dijkstra(&graph, root);
        let count = graph.names.len();
        let mut children_index: Vec<Vec<u32>> = vec![Vec::new(); count];
        // Visiting brokers in index order fills each child list in name order.
        for (position, parent) in parent.iter().enumerate() {
            if let Some(parent) = parent {
                children_index[*parent as usize].push(to_index(position));
            }
        }
        let children = children_index
            .iter()
            .map(|list| list.iter().map(|&child| graph.names[child as usize].clone()).collect())
            .collect();
        let (order, span) = pre_order(&graph, root, &children_index);
        SpTree { graph, source: Some(root), parent, label, children, children_index, order, span }
    }

    /// The root of the tree, unless the source was unknown.
    pub fn source(&self) -> Option<&BrokerName> {
        self.source.map(|root| &self.graph.names[root as usize])
    }

    /// Number of brokers in the tree (those reachable from the source).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when the tree holds nobody (unknown source).
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// True when `broker` is reachable from the source.
    pub fn contains(&self, broker: &str) -> bool {
        self.position(broker).is_some()
    }

    /// The broker `broker` receives the source's messages from; `None` for
    /// the source itself and for brokers outside the tree.
    pub fn parent(&self, broker: &str) -> Option<&BrokerName> {
        let parent = self.parent[self.position(broker)?]?;
        Some(&self.graph.names[parent as usize])
    }

    /// The brokers `broker` forwards the source's messages to, in name order.
    pub fn children(&self, broker: &str) -> &[BrokerName] {
        self.position(broker).map_or(&[], |position| &self.children[position])
    }

    /// Total link cost from the source to `broker`.
    pub fn distance(&self, broker: &str) -> Option<u64> {
        self.label[self.position(broker)?].map(|(cost, _)| cost)
    }

    /// Number of links from the source to `broker`.
    pub fn hops(&self, broker: &str) -> Option<u32> {
        self.label[self.position(broker)?].map(|(_, hops)| hops)
    }

    /// `broker` and every broker below it, in pre-order (`broker` first);
    /// empty when `broker` is not in the tree.
    pub fn subtree(&self, broker: &str) -> &[BrokerName] {
        self.position(broker).map_or(&[], |position| self.span_slice(position))
    }

    /// The brokers on the tree path from the source to `broker`, both
    /// included; empty when `broker` is not in the tree.
    pub fn path(&self, broker: &str) -> Vec<BrokerName> {
        let mut path = Vec::new();
        let mut next = self.position(broker);
        while let Some(position) = next {
            path.push(self.graph.names[position].clone());
            next = self.parent[position].map(|parent| parent as usize);
        }
        path.reverse();
        path
    }

    /// Each child of `broker` with its subtree, in name order.
    pub(crate) fn child_subtrees(&self, broker: &str) -> impl Iterator<Item = (&BrokerName, &[BrokerName])> {
        let children: &[u32] = self.position(broker).map_or(&[], |position| &self.children_index[position]);
        children.iter().map(|&child| (&self.graph.names[child as usize], self.span_slice(child as usize)))
    }

    /// The index of `broker` when it is in the tree.
    fn position(&self, broker: &str) -> Option<usize> {
        let position = *self.graph.index.get(broker)? as usize;
        self.label.get(position)?.as_ref()?;
        Some(position)
    }

    fn span_slice(&self, position: usize) -> &[BrokerName] {
        let span = self.span[position];
        &self.order[span.start as usize..span.end as usize]
    }
}

/// Labels (cost, hops) and parents of every broker reachable from `root`.
///
/// Every link adds one hop, so a label strictly grows along a path even over
/// zero-cost links; hence every parent candidate of a broker is settled
/// before the broker itself, and keeping the lowest-index (first by name)
/// parent among equal labels is a deterministic, final choice.
fn dijkstra(graph: &Graph, root: u32) -> (Vec<Option<Label>>, Vec<Option<u32>>) {
    let count = graph.names.len();
    let mut label: Vec<Option<Label>> = vec![None; count];
    let mut parent: Vec<Option<u32>> = vec![None; count];
    let mut settled = vec![false; count];
    let mut queue = BinaryHeap::new();
    label[root as usize] = Some((0, 0));
    queue.push(Reverse((0_u64, 0_u32, root)));
    while let Some(Reverse((cost, hops, broker))) = queue.pop() {
        if std::mem::replace(&mut settled[broker as usize], true) {
            continue;
        }
        for &(neighbour, link_cost) in &graph.adjacency[broker as usize] {
            let candidate = (cost + u64::from(link_cost), hops + 1);
            let slot = neighbour as usize;
            match label[slot] {
                Some(held) if held < candidate => {}
                Some(held) if held == candidate => {
                    if parent[slot].is_some_and(|current| broker < current) {
                        parent[slot] = Some(broker);
                    }
                }
                _ => {
                    label[slot] = Some(candidate);
                    parent[slot] = Some(broker);
                    queue.push(Reverse((candidate.0, candidate.1, neighbour)));
                }
            }
        }
    }
    (label, parent)
}

/// The reachable brokers in pre-order and each one's span in that order.
fn pre_order(graph: &Graph, root: u32, children: &[Vec<u32>]) -> (Vec<BrokerName>, Vec<Span>) {
    let mut order = Vec::new();
    let mut span = vec![Span::default(); graph.names.len()];
    // Iterative, so a long chain cannot overflow the stack: each frame is a
    // broker and how many of its children have been entered.
    let mut stack: Vec<(u32, usize)> = vec![(root, 0)];
    span[root as usize].start = 0;
    order.push(graph.names[root as usize].clone());
    while let Some((broker, entered)) = stack.last_mut() {
        let broker = *broker as usize;
        if let Some(&child) = children[broker].get(*entered) {
            *entered += 1;
            span[child as usize].start = to_index(order.len());
            order.push(graph.names[child as usize].clone());
            stack.push((child, 0));
        } else {
            span[broker].end = to_index(order.len());
            stack.pop();
        }
    }
    (order, span)
}

#[cfg(test)]
mod tests {
    use crate::testing::topology;
    use crate::topology::Topology;

    fn names(list: &[crate::BrokerName]) -> Vec<&str> {
        list.iter().map(|name| &**name).collect()
    }

    #[test]
    fn chain_of_five() {
        let topology = topology(&[("b1", "b2", 1), ("b2", "b3", 1), ("b3", "b4", 1), ("b4", "b5", 1)]);
        let tree = topology.tree("b1");
        assert_eq!(names(tree.children("b1")), ["b2"]);
        assert_eq!(names(tree.children("b4")), ["b5"]);
        assert!(tree.children("b5").is_empty());
        assert_eq!(tree.distance("b5"), Some(4));
        assert_eq!(tree.hops("b5"), Some(4));
        assert_eq!(names(tree.subtree("b3")), ["b3", "b4", "b5"]);
        assert_eq!(tree.parent("b3").map(|name| &**name), Some("b2"));
        assert_eq!(tree.parent("b1"), None);
        let middle = topology.tree("b3");
        assert_eq!(names(middle.children("b3")), ["b2", "b4"]);
        assert_eq!(names(&middle.path("b5")), ["b3", "b4", "b5"]);
    }

    #[test]
    fn ring_of_six_splits_at_the_far_side_by_name() {
        let ring =
            [("r0", "r1", 1), ("r1", "r2", 1), ("r2", "r3", 1), ("r3", "r4", 1), ("r4", "r5", 1), ("r5", "r0", 1)];
        let topology = topology(&ring);
        let tree = topology.tree("r0");
        assert_eq!(names(tree.children("r0")), ["r1", "r5"]);
        // r3 is three hops either way; the tie goes to the parent first by name.
        assert_eq!(tree.parent("r3").map(|name| &**name), Some("r2"));
        assert_eq!(names(tree.subtree("r1")), ["r1", "r2", "r3"]);
        assert_eq!(names(tree.subtree("r5")), ["r5", "r4"]);
        assert_eq!(tree.distance("r3"), Some(3));
        assert_eq!(tree.len(), 6);
    }

    #[test]
    fn cost_wins_over_hops_and_hops_over_names() {
        // a-b-c costs 2 in two hops; a-c costs 5 directly.
        let topology = topology(&[("a", "b", 1), ("b", "c", 1), ("a", "c", 5)]);
        assert_eq!(topology.tree("a").parent("c").map(|name| &**name), Some("b"));
        // Equal cost 2: direct a-z (one hop) beats a-b-z (two hops).
        let topology = topology_with_equal_costs();
        assert_eq!(topology.tree("a").parent("z").map(|name| &**name), Some("a"));
    }

    fn topology_with_equal_costs() -> Topology {
        topology(&[("a", "b", 1), ("b", "z", 1), ("a", "z", 2)])
    }

    #[test]
    fn zero_cost_links_still_form_a_tree() {
        let topology = topology(&[("a", "b", 0), ("b", "c", 0), ("a", "c", 0)]);
        let tree = topology.tree("a");
        assert_eq!(names(tree.children("a")), ["b", "c"]);
        assert_eq!(tree.distance("c"), Some(0));
    }
}
