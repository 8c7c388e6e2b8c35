//! Sift broker network routing core: how linked brokers decide where a
//! message goes. No I/O: the broker feeds it link states and asks it
//! questions; flooding, timers and sockets are the broker's.
//!
//! # The algorithm
//!
//! Brokers link into any graph (chain, star, ring, mesh, clusters of
//! clusters). Routing is link-state, with source-rooted shortest-path trees:
//!
//! 1. **Link state** ([`Topology`]). Every broker originates a [`LinkState`]
//!    listing its neighbours and link costs, numbered by a sequence it
//!    raises at each change, and floods it. [`Topology::apply`] keeps the
//!    newest per origin and says whether to flood it on. A link is used only
//!    when both ends advertise it, so a half-broken link or a stale state is
//!    not routed over.
//! 2. **Trees** ([`SpTree`]). For a message published at broker `origin`,
//!    every broker computes the same tree: Dijkstra from `origin` by link
//!    cost, ties broken by fewer hops and then by the parent's name, over
//!    brokers numbered by name. [`Topology::tree`] computes a tree the first
//!    time an origin is asked for and caches it until the links change.
//! 3. **Forwarding** ([`Topology::next_hops`]). A broker sends a message to
//!    its children in the origin's tree whose subtree holds a broker that
//!    wants it, so the message travels the shortest paths from the origin to
//!    the interested brokers and nowhere else. Each broker has one parent in
//!    a tree, so each receives a message at most once, even in cyclic graphs
//!    (see [`forward`] for the argument and for what happens while brokers'
//!    databases disagree, which [`DuplicateFilter`] and the hop limit
//!    [`HOP_LIMIT_DEFAULT`] cover). [`Topology::next_hops_flood`] sends to
//!    every child, for comparison.
//! 4. **Interest** ([`Interest`]). Per-broker subscription tables answer
//!    "does broker X want this message?" and summarise what to advertise,
//!    leaving out entries another entry covers. [`Advertiser`] keeps a
//!    broker's own entries (reference-counted, covered ones held back) and
//!    turns each local subscribe or unsubscribe into the [`InterestUpdate`]s
//!    to flood.
//!
//! # State size
//!
//! With B brokers and L links: the link-state database is O(B + L); each
//! cached tree is O(B) (parent, label, children and a pre-order in which
//! every subtree is one slice); trees are computed lazily, one per origin
//! that actually publishes, in O(L log B) each, so at most O(B²) for all of
//! them. The duplicate filter is a fixed window per origin
//! ([`DUPLICATE_WINDOW`] bits) for a bounded number of origins.

mod advertise;
mod duplicates;
pub mod forward;
mod interest;
mod topology;
mod tree;

pub use advertise::{Advertiser, InterestUpdate};
pub use duplicates::{DuplicateFilter, DUPLICATE_ORIGINS_MAX_DEFAULT, DUPLICATE_WINDOW};
pub use forward::{within_hop_limit, HOP_LIMIT_DEFAULT};
pub use interest::{Interest, InterestEntry, TopicInterest};
pub use topology::{
    Applied, BrokerName, LinkState, LinkStateError, Topology, BROKER_NAME_BYTES_MAX, LINKS_PER_BROKER_MAX,
};
pub use tree::SpTree;

/// Helpers shared by the unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::topology::{LinkState, Topology};

    /// A topology from undirected links `(a, b, cost)`, each advertised by
    /// both ends with sequence 1.
    pub(crate) fn topology(links: &[(&str, &str, u32)]) -> Topology {
        let mut names: Vec<&str> = links.iter().flat_map(|(left, right, _)| [*left, *right]).collect();
        names.sort_unstable();
        names.dedup();
        let mut topology = Topology::new();
        for name in names {
            let own = links.iter().filter_map(|&(left, right, cost)| {
                if name == left {
                    Some((right.into(), cost))
                } else if name == right {
                    Some((left.into(), cost))
                } else {
                    None
                }
            });
            let state = LinkState { origin: name.into(), sequence: 1, links: own.collect() };
            topology.apply(state).expect("valid state");
        }
        topology
    }
}
