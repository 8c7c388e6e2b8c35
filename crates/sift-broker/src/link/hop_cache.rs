//! Next hops per (origin, topic), for messages whose routing depends on
//! nothing else.
//!
//! Choosing where a message goes walks the origin's tree below this broker
//! and asks, for each broker there, whether it wants the message: about a
//! thousand instructions per message on a relay, paid again for every
//! message of a topic. When no broker's interest in the topic has a content
//! filter and the message carries no queue-group assignment, the answer
//! depends only on the origin, the topic, the origin's tree and the
//! interest tables, so it is kept here and reused until the tree or the
//! interest changes.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use sift_net::{BrokerName, SpTree};

/// Next hops computed for one origin and topic, with what they depend on.
#[derive(Debug)]
struct Cached {
    /// The origin's tree they were computed in; a topology change makes a
    /// new tree, which no longer matches.
    tree: Arc<SpTree>,
    /// The interest generation they were computed for.
    generation: u64,
    hops: Arc<[BrokerName]>,
}

/// Next hops by origin, then topic; bounded by `entries_max` in all.
#[derive(Debug)]
pub(crate) struct HopCache {
    by_origin: FxHashMap<BrokerName, FxHashMap<Box<str>, Cached>>,
    entries: usize,
    entries_max: usize,
}

impl HopCache {
    /// An empty cache holding at most `entries_max` entries.
    pub(crate) fn new(entries_max: usize) -> HopCache {
        HopCache { by_origin: FxHashMap::default(), entries: 0, entries_max }
    }

    /// The hops kept for `origin` and `topic`, if computed in `tree` for
    /// `generation`.
    pub(crate) fn get(
        &self,
        origin: &str,
        topic: &str,
        tree: &Arc<SpTree>,
        generation: u64,
    ) -> Option<Arc<[BrokerName]>> {
        let cached = self.by_origin.get(origin)?.get(topic)?;
        (cached.generation == generation && Arc::ptr_eq(&cached.tree, tree)).then(|| cached.hops.clone())
    }

    /// Keeps `hops` for `origin` and `topic`. A full cache is emptied first:
    /// it refills with the topics in use, and a stale entry is never used.
    pub(crate) fn insert(
        &mut self,
        origin: &BrokerName,
        topic: &str,
        tree: Arc<SpTree>,
        generation: u64,
        hops: Arc<[BrokerName]>,
    ) {
        if self.entries >= self.entries_max {
            self.by_origin.clear();
            self.entries = 0;
        }
        let topics = self.by_origin.entry(origin.clone()).or_default();
        if topics.insert(topic.into(), Cached { tree, generation, hops }).is_none() {
            self.entries += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_net::Topology;

    fn tree() -> Arc<SpTree> {
        Topology::new().tree("a")
    }

    fn hops(names: &[&str]) -> Arc<[BrokerName]> {
        names.iter().map(|name| BrokerName::from(*name)).collect()
    }

    #[test]
    fn hops_are_reused_only_for_the_same_tree_and_generation() {
        let mut cache = HopCache::new(8);
        let (first_tree, other_tree) = (tree(), tree());
        cache.insert(&BrokerName::from("a"), "t", first_tree.clone(), 3, hops(&["b"]));
        assert_eq!(cache.get("a", "t", &first_tree, 3).as_deref(), Some(&hops(&["b"])[..]));
        assert!(cache.get("a", "t", &first_tree, 4).is_none(), "interest changed");
        assert!(cache.get("a", "t", &other_tree, 3).is_none(), "topology changed");
        assert!(cache.get("a", "u", &first_tree, 3).is_none(), "another topic");
        assert!(cache.get("z", "t", &first_tree, 3).is_none(), "another origin");
    }

    #[test]
    fn a_full_cache_starts_again() {
        let mut cache = HopCache::new(2);
        let tree = tree();
        let origin = BrokerName::from("a");
        cache.insert(&origin, "t1", tree.clone(), 1, hops(&["b"]));
        cache.insert(&origin, "t2", tree.clone(), 1, hops(&["b"]));
        cache.insert(&origin, "t3", tree.clone(), 1, hops(&["c"]));
        assert!(cache.get("a", "t1", &tree, 1).is_none());
        assert_eq!(cache.get("a", "t3", &tree, 1).as_deref(), Some(&hops(&["c"])[..]));
    }
}
