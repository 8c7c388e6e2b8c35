//! The routes this broker would use: every reachable broker with its
//! distance and the neighbour the way to it starts with.

use super::network::LinkNetwork;

/// One broker reachable from this one, as [`LinkNetwork::routes`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    /// The broker reached.
    pub broker: String,
    /// Links on the shortest path to it; 0 for this broker itself.
    pub hops: u32,
    /// Total link cost of that path.
    pub cost: u64,
    /// The neighbour the path starts with; `None` for this broker itself.
    pub next_hop: Option<String>,
}

impl LinkNetwork {
    /// Every broker on this broker's shortest-path tree (itself included),
    /// sorted by name.
    pub fn routes(&self) -> Vec<RouteInfo> {
        let state = self.lock();
        let tree = state.topology.tree(&state.own_name);
        let mut routes: Vec<RouteInfo> = tree
            .subtree(&state.own_name)
            .iter()
            .map(|broker| RouteInfo {
                broker: broker.to_string(),
                hops: tree.hops(broker).unwrap_or(0),
                cost: tree.distance(broker).unwrap_or(0),
                // The path holds this broker first, so its second entry is
                // the neighbour messages to `broker` leave through.
                next_hop: tree.path(broker).get(1).map(|name| name.to_string()),
            })
            .collect();
        routes.sort_by(|left, right| left.broker.cmp(&right.broker));
        routes
    }
}
