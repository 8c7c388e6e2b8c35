//! The router: the broker's subject trie behind a lock, with a generation
//! number that readers check without taking the lock.
//!
//! Every connection reader keeps its own [`MatchCache`]; a hit costs one
//! atomic load and one hash lookup. Subscribing or unsubscribing bumps the
//! generation and so invalidates every reader's cache at its next lookup.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use sift_core::{MatchCache, MatchResult, SubjectTrie, TopicName};

use crate::connection::LocalCounters;
use crate::subscription::SubRef;

/// The broker's subscriptions, indexed by topic filter.
#[derive(Debug, Default)]
pub struct Router {
    trie: RwLock<SubjectTrie<SubRef>>,
    generation: AtomicU64,
}

impl Router {
    /// Adds a subscription.
    pub fn insert(&self, subscription: SubRef) {
        let mut trie = self.write();
        let group = subscription.group.clone();
        let filter = subscription.topic_filter.clone();
        trie.insert(&filter, group.as_deref(), subscription);
        self.generation.store(trie.generation(), Ordering::Release);
    }

    /// Removes a subscription; false when it was not there.
    pub fn remove(&self, subscription: &SubRef) -> bool {
        let mut trie = self.write();
        let removed = trie.remove(&subscription.topic_filter, subscription.group.as_deref(), subscription);
        self.generation.store(trie.generation(), Ordering::Release);
        removed
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when there are no subscriptions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Everything that matches `topic`, from `cache` when still valid.
    pub fn matches(
        &self,
        topic: &TopicName,
        cache: &mut MatchCache<SubRef>,
        counters: &mut LocalCounters,
    ) -> Arc<MatchResult<SubRef>> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(found) = cache.get(topic.as_str(), generation) {
            counters.cache_hits += 1;
            return found;
        }
        counters.cache_misses += 1;
        let trie = self.read();
        let result = Arc::new(trie.matches(topic));
        cache.insert(topic.as_str(), trie.generation(), result.clone());
        result
    }

    /// Everything that matches `topic`, walking the trie (off the hot path).
    pub fn matches_uncached(&self, topic: &TopicName) -> MatchResult<SubRef> {
        self.read().matches(topic)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, SubjectTrie<SubRef>> {
        // The trie is only changed by complete insert/remove calls, which do
        // not panic midway; a poisoned lock still holds a consistent trie.
        self.trie.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, SubjectTrie<SubRef>> {
        self.trie.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
