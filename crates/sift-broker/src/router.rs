//! The router: the broker's subscriptions, indexed by topic and by content,
//! behind one lock, with a generation number that readers check without
//! taking the lock.
//!
//! Matching is topic first, then content:
//!
//! - Subscriptions without a content filter, and every queue-group member,
//!   live in the subject trie. A match gives them directly.
//! - Subscriptions with a content filter (outside queue groups) live in the
//!   content index, grouped into *partitions*: one per distinct topic
//!   filter. The partition trie says which partitions a topic falls in; the
//!   content index then finds which of their subscriptions pass, with cost
//!   that grows with what matches, not with how many filters there are.
//! - Queue-group members with a content filter are checked one by one while
//!   a member is chosen; groups are small.
//!
//! Every connection reader keeps its own [`MatchCache`] of [`Route`]s (the
//! topic half of the answer); a hit costs one atomic load and one hash
//! lookup. Subscribing or unsubscribing bumps the generation and so
//! invalidates every reader's cache at its next lookup.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use sift_core::{MatchCache, MatchResult, Message, SubjectTrie, TopicName};
use sift_filter::{ContentIndex, IndexScratch};

use crate::stats::LocalCounters;
use crate::subscription::SubRef;

/// What a topic matches: the subscriptions the topic alone decides, and the
/// content partitions whose filters still have to be asked.
#[derive(Debug)]
pub struct Route {
    /// Plain subscriptions without content filters, and queue groups.
    pub matches: Arc<MatchResult<SubRef>>,
    /// Partitions of content-filtered subscriptions under matching filters.
    pub partitions: Vec<u32>,
    /// True when some matched queue-group member has a content filter.
    pub filtered_members: bool,
}

impl Route {
    /// True when the topic decides alone: no content filter to evaluate.
    pub fn is_topic_only(&self) -> bool {
        self.partitions.is_empty() && !self.filtered_members
    }
}

/// One partition: the content-filtered subscriptions under one topic filter.
#[derive(Debug)]
struct Partition {
    id: u32,
    members: usize,
}

#[derive(Debug, Default)]
struct Tables {
    trie: SubjectTrie<SubRef>,
    partition_trie: SubjectTrie<u32>,
    partitions: HashMap<String, Partition>,
    next_partition: u32,
    content: ContentIndex<SubRef>,
    len: usize,
}

impl Tables {
    fn insert(&mut self, subscription: SubRef) {
        self.len += 1;
        let filter = subscription.topic_filter.clone();
        let Some(content) = subscription.content.clone().filter(|_| subscription.group.is_none()) else {
            let group = subscription.group.clone();
            self.trie.insert(&filter, group.as_deref(), subscription);
            return;
        };
        let partition = match self.partitions.get_mut(filter.as_str()) {
            Some(partition) => partition,
            None => {
                let id = self.next_partition;
                self.next_partition += 1;
                self.partition_trie.insert(&filter, None, id);
                self.partitions.entry(filter.as_str().to_string()).or_insert(Partition { id, members: 0 })
            }
        };
        partition.members += 1;
        let id = partition.id;
        self.content.insert(id, subscription, &content);
    }

    fn remove(&mut self, subscription: &SubRef) -> bool {
        let filter = &subscription.topic_filter;
        if subscription.content.is_none() || subscription.group.is_some() {
            let removed = self.trie.remove(filter, subscription.group.as_deref(), subscription);
            self.len -= usize::from(removed);
            return removed;
        }
        let Some(partition) = self.partitions.get_mut(filter.as_str()) else { return false };
        let id = partition.id;
        if !self.content.remove(id, subscription) {
            return false;
        }
        self.len -= 1;
        partition.members -= 1;
        if partition.members == 0 {
            self.partitions.remove(filter.as_str());
            self.partition_trie.remove(filter, None, &id);
        }
        true
    }

    fn route(&self, topic: &TopicName) -> Route {
        let matches = self.trie.matches(topic);
        let filtered_members =
            matches.groups.iter().any(|(_, members)| members.iter().any(|member| member.content.is_some()));
        let partitions = self.partition_trie.matches(topic).plain;
        Route { matches: Arc::new(matches), partitions, filtered_members }
    }
}

/// The broker's subscriptions, indexed by topic filter and content.
#[derive(Debug, Default)]
pub struct Router {
    tables: RwLock<Tables>,
    generation: AtomicU64,
}

impl Router {
    /// Adds a subscription.
    pub fn insert(&self, subscription: SubRef) {
        let mut tables = self.write();
        tables.insert(subscription);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes a subscription; false when it was not there.
    pub fn remove(&self, subscription: &SubRef) -> bool {
        let mut tables = self.write();
        let removed = tables.remove(subscription);
        self.generation.fetch_add(1, Ordering::AcqRel);
        removed
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.read().len
    }

    /// True when there are no subscriptions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The route of `topic`, from `cache` when still valid.
    pub fn route(&self, topic: &TopicName, cache: &mut MatchCache<Route>, counters: &mut LocalCounters) -> Arc<Route> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(found) = cache.get(topic.as_str(), generation) {
            counters.cache_hits += 1;
            return found;
        }
        counters.cache_misses += 1;
        let tables = self.read();
        // Read under the lock, so that the route and its generation agree.
        let generation = self.generation.load(Ordering::Acquire);
        let route = Arc::new(tables.route(topic));
        cache.insert(topic.as_str(), generation, route.clone());
        route
    }

    /// Every subscription `message` goes to: the topic-only part of `route`
    /// plus the content-filtered subscriptions whose filters pass, and each
    /// queue group narrowed to the members whose filters pass.
    pub fn select(&self, route: &Route, message: &Message, scratch: &mut IndexScratch) -> MatchResult<SubRef> {
        let mut plain = route.matches.plain.clone();
        if !route.partitions.is_empty() {
            self.read().content.matching(message, &route.partitions, scratch, &mut plain);
        }
        let mut groups = Vec::with_capacity(route.matches.groups.len());
        for (name, members) in &route.matches.groups {
            let passing: Vec<SubRef> = members.iter().filter(|member| member.accepts(message)).cloned().collect();
            if !passing.is_empty() {
                groups.push((name.clone(), passing));
            }
        }
        MatchResult { plain, groups }
    }

    /// Everything that matches `topic` by topic alone, walking the trie (off
    /// the hot path). Content-filtered subscriptions outside queue groups are
    /// not included.
    pub fn matches_uncached(&self, topic: &TopicName) -> MatchResult<SubRef> {
        self.read().trie.matches(topic)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        // The tables are only changed by complete insert/remove calls, which
        // do not panic midway; a poisoned lock still holds consistent tables.
        self.tables.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
