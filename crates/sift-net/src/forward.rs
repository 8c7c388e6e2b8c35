//! The forwarding decision: to which neighbours a broker sends a message.
//!
//! A message published at broker `origin` travels down `origin`'s
//! shortest-path tree. A broker holding it sends it to those of its children
//! in that tree whose subtree contains a broker that wants it (interest
//! routing), or to all its children (flood mode, for comparison).
//!
//! # At most once, even in cyclic graphs
//!
//! In a tree every broker but the root has exactly one parent, and a broker
//! only ever sends `origin`'s messages to its children in `origin`'s tree.
//! So a broker can receive a message only from its parent, and its parent
//! sends it at most once: by induction from the root, every broker receives
//! each message at most once. The graph's cycles do not matter because the
//! message never travels along a link that is not a tree edge. The union of
//! the paths taken is the part of the tree spanning the origin and the
//! interested brokers, and every path in it is a shortest path.
//!
//! # While databases disagree
//!
//! The argument needs every broker to compute the same tree, i.e. to hold
//! the same link states. While a change floods through the network, two
//! brokers can briefly disagree about a tree: a message may then be lost
//! (a broker that no longer counts itself a parent does not forward) or
//! arrive twice (a broker is a child of two parents, one with the old view
//! and one with the new). The caller therefore keeps a
//! [`DuplicateFilter`](crate::DuplicateFilter) per broker, keyed by origin
//! and the origin's message sequence, and drops repeats; reliable delivery
//! end to end recovers losses. A message also carries its hop count: a
//! broker does not forward a message that has taken
//! [`HOP_LIMIT_DEFAULT`] hops (see [`within_hop_limit`]), so even a
//! transient forwarding loop between inconsistent views ends.

use crate::topology::{BrokerName, Topology};
use crate::tree::SpTree;

/// Most broker-to-broker hops a message may take before brokers stop
/// forwarding it. A shortest path in a network of a few hundred brokers is
/// far shorter; the limit only ends loops between inconsistent views. Fits
/// the message's `hop_count` (a `u8`).
pub const HOP_LIMIT_DEFAULT: u8 = 32;

/// True when a message that has taken `hop_count` hops may take one more.
pub fn within_hop_limit(hop_count: u8, hop_limit: u8) -> bool {
    hop_count < hop_limit
}

impl SpTree {
    /// The children of `local` in this tree whose subtree holds at least one
    /// broker for which `interested` is true, in name order.
    ///
    /// Each subtree is a contiguous slice of the tree's pre-order, so this
    /// asks `interested` at most once per broker below `local`, stopping in
    /// each subtree at its first interested broker.
    pub fn next_hops(&self, local: &str, interested: impl Fn(&str) -> bool) -> Vec<BrokerName> {
        self.child_subtrees(local)
            .filter(|(_, subtree)| subtree.iter().any(|broker| interested(broker)))
            .map(|(child, _)| child.clone())
            .collect()
    }

    /// Every child of `local` in this tree, whatever their interest.
    pub fn next_hops_flood(&self, local: &str) -> Vec<BrokerName> {
        self.children(local).to_vec()
    }

    /// The brokers below `local` that a message sent on by
    /// [`SpTree::next_hops`] at every broker reaches: each one with an
    /// interested broker in its subtree, in name order. `local` is not
    /// included.
    pub fn reached_below(&self, local: &str, interested: impl Fn(&str) -> bool) -> Vec<BrokerName> {
        let mut reached = Vec::new();
        let mut pending = self.next_hops(local, &interested);
        while let Some(broker) = pending.pop() {
            pending.extend(self.next_hops(&broker, &interested));
            reached.push(broker);
        }
        reached.sort();
        reached
    }

    /// The neighbour of the source on the tree path to `broker`: where the
    /// source sends something addressed to `broker`. `None` for the source
    /// itself and for brokers outside the tree.
    pub fn first_hop(&self, broker: &str) -> Option<BrokerName> {
        let path = self.path(broker);
        path.get(1).cloned()
    }
}

impl Topology {
    /// Where `local` sends a message that `origin` published: the children
    /// of `local` in `origin`'s tree with an interested broker below them.
    /// Empty when `local` or `origin` is not in the database or `local` is
    /// unreachable from `origin` in this broker's view.
    pub fn next_hops(&self, local: &str, origin: &str, interested: impl Fn(&str) -> bool) -> Vec<BrokerName> {
        self.tree(origin).next_hops(local, interested)
    }

    /// Flood mode: every child of `local` in `origin`'s tree, so that every
    /// reachable broker receives every message exactly once.
    pub fn next_hops_flood(&self, local: &str, origin: &str) -> Vec<BrokerName> {
        self.tree(origin).next_hops_flood(local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::topology;

    fn names(list: &[BrokerName]) -> Vec<&str> {
        list.iter().map(|name| &**name).collect()
    }

    #[test]
    fn chain_of_five_forwards_only_toward_interest() {
        let chain = topology(&[("b1", "b2", 1), ("b2", "b3", 1), ("b3", "b4", 1), ("b4", "b5", 1)]);
        let wants_b3 = |broker: &str| broker == "b3";
        assert_eq!(names(&chain.next_hops("b1", "b1", wants_b3)), ["b2"]);
        assert_eq!(names(&chain.next_hops("b2", "b1", wants_b3)), ["b3"]);
        assert!(chain.next_hops("b3", "b1", wants_b3).is_empty());
        // From the middle, only the side with interest.
        assert!(chain.next_hops("b3", "b3", |broker| broker == "b1").iter().all(|hop| &**hop == "b2"));
        assert!(chain.next_hops("b1", "b1", |_| false).is_empty());
        assert_eq!(names(&chain.next_hops_flood("b3", "b3")), ["b2", "b4"]);
    }

    #[test]
    fn ring_of_six_sends_each_way_once() {
        let ring =
            [("r0", "r1", 1), ("r1", "r2", 1), ("r2", "r3", 1), ("r3", "r4", 1), ("r4", "r5", 1), ("r5", "r0", 1)];
        let ring = topology(&ring);
        let everyone = |_: &str| true;
        assert_eq!(names(&ring.next_hops("r0", "r0", everyone)), ["r1", "r5"]);
        assert_eq!(names(&ring.next_hops("r2", "r0", everyone)), ["r3"]);
        // r3 hangs below r2, so r4 must not send it back round the ring.
        assert!(ring.next_hops("r4", "r0", everyone).is_empty());
        assert_eq!(names(&ring.next_hops("r0", "r0", |broker| broker == "r4")), ["r5"]);
        // A broker that receives from the wrong side (inconsistent views) forwards nothing extra.
        assert!(ring.next_hops("r3", "r0", everyone).is_empty());
    }

    #[test]
    fn reached_below_is_the_union_of_paths_to_interest() {
        // b1 - b2 - b3 - b4, and b2 - side.
        let tree = topology(&[("b1", "b2", 1), ("b2", "b3", 1), ("b3", "b4", 1), ("b2", "side", 1)]).tree("b1");
        assert_eq!(names(&tree.reached_below("b1", |broker| broker == "b4")), ["b2", "b3", "b4"]);
        assert_eq!(names(&tree.reached_below("b3", |broker| broker == "b4")), ["b4"]);
        assert_eq!(names(&tree.reached_below("b1", |broker| broker == "side" || broker == "b3")), ["b2", "b3", "side"]);
        assert!(tree.reached_below("b1", |broker| broker == "b1").is_empty());
    }

    #[test]
    fn first_hop_leads_toward_the_broker() {
        let ring = topology(&[("r0", "r1", 1), ("r1", "r2", 1), ("r2", "r3", 1), ("r3", "r0", 1)]).tree("r0");
        assert_eq!(ring.first_hop("r1").as_deref(), Some("r1"));
        assert_eq!(ring.first_hop("r3").as_deref(), Some("r3"));
        // r2 is two hops either way; the parent whose name sorts first wins.
        assert_eq!(ring.first_hop("r2").as_deref(), Some("r1"));
        assert_eq!(ring.first_hop("r0"), None);
        assert_eq!(ring.first_hop("nobody"), None);
    }

    #[test]
    fn unknown_brokers_forward_nothing() {
        let chain = topology(&[("a", "b", 1)]);
        assert!(chain.next_hops("a", "nobody", |_| true).is_empty());
        assert!(chain.next_hops("nobody", "a", |_| true).is_empty());
        assert!(chain.next_hops_flood("nobody", "a").is_empty());
    }

    #[test]
    fn hop_limit() {
        assert!(within_hop_limit(0, HOP_LIMIT_DEFAULT));
        assert!(within_hop_limit(HOP_LIMIT_DEFAULT - 1, HOP_LIMIT_DEFAULT));
        assert!(!within_hop_limit(HOP_LIMIT_DEFAULT, HOP_LIMIT_DEFAULT));
    }
}
