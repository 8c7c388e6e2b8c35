//! The subject trie: from a topic to the subscriptions whose topic filter
//! matches it, in time that grows with the topic's depth and the number of
//! matches, not with the number of subscriptions.
//!
//! Each trie level is one topic token. A node has literal children, one `*`
//! child and one `>` child; matching walks the literal child and the `*` child
//! at every level and collects everything under `>`. Subscriptions in a queue
//! group are kept apart from plain ones, merged by group name across nodes, so
//! that the caller can pick one member per group.
//!
//! The trie counts its changes in a generation number. A [`MatchCache`] keeps
//! recent results and throws them away when the generation moves on, which is
//! how the broker avoids walking the trie for every message on a hot topic.

use std::collections::HashMap;
use std::sync::Arc;

use crate::topic::{FilterToken, TopicFilter, TopicName};

/// The subscriptions that match one topic.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchResult<T> {
    /// Subscriptions outside any queue group: each gets its own copy.
    pub plain: Vec<T>,
    /// Queue groups by name with their members: one member of each gets a copy.
    pub groups: Vec<(Arc<str>, Vec<T>)>,
}

impl<T> MatchResult<T> {
    /// An empty result.
    pub fn empty() -> Self {
        MatchResult { plain: Vec::new(), groups: Vec::new() }
    }

    /// True when nothing matched.
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.groups.is_empty()
    }
}

#[derive(Debug)]
struct Node<T> {
    literals: HashMap<String, Node<T>>,
    any_one: Option<Box<Node<T>>>,
    rest: Option<Box<Node<T>>>,
    plain: Vec<T>,
    groups: Vec<(Arc<str>, Vec<T>)>,
}

impl<T> Default for Node<T> {
    fn default() -> Self {
        Node { literals: HashMap::new(), any_one: None, rest: None, plain: Vec::new(), groups: Vec::new() }
    }
}

impl<T: Clone + PartialEq> Node<T> {
    fn is_empty(&self) -> bool {
        self.literals.is_empty()
            && self.any_one.is_none()
            && self.rest.is_none()
            && self.plain.is_empty()
            && self.groups.is_empty()
    }

    fn child_mut(&mut self, token: &FilterToken) -> &mut Node<T> {
        match token {
            FilterToken::Literal(literal) => self.literals.entry(literal.clone()).or_default(),
            FilterToken::AnyOne => self.any_one.get_or_insert_with(Box::default),
            FilterToken::Rest => self.rest.get_or_insert_with(Box::default),
        }
    }

    fn add_entries_to(&self, result: &mut MatchResult<T>) {
        result.plain.extend(self.plain.iter().cloned());
        for (name, members) in &self.groups {
            match result.groups.iter_mut().find(|(existing, _)| existing == name) {
                Some((_, merged)) => merged.extend(members.iter().cloned()),
                None => result.groups.push((name.clone(), members.clone())),
            }
        }
    }

    fn collect(&self, tokens: &[&str], result: &mut MatchResult<T>) {
        let Some((first, remaining)) = tokens.split_first() else {
            self.add_entries_to(result);
            return;
        };
        if let Some(rest) = &self.rest {
            rest.add_entries_to(result);
        }
        if let Some(child) = self.literals.get(*first) {
            child.collect(remaining, result);
        }
        if let Some(child) = &self.any_one {
            child.collect(remaining, result);
        }
    }

    /// Removes `entry` below this node along `tokens`; prunes emptied nodes.
    fn remove(&mut self, tokens: &[FilterToken], group: Option<&str>, entry: &T) -> bool {
        let Some((first, remaining)) = tokens.split_first() else {
            return self.remove_entry(group, entry);
        };
        let (removed, child_empty) = match first {
            FilterToken::Literal(literal) => match self.literals.get_mut(literal) {
                Some(child) => (child.remove(remaining, group, entry), child.is_empty()),
                None => return false,
            },
            FilterToken::AnyOne => match self.any_one.as_mut() {
                Some(child) => (child.remove(remaining, group, entry), child.is_empty()),
                None => return false,
            },
            FilterToken::Rest => match self.rest.as_mut() {
                Some(child) => (child.remove(remaining, group, entry), child.is_empty()),
                None => return false,
            },
        };
        if removed && child_empty {
            match first {
                FilterToken::Literal(literal) => {
                    self.literals.remove(literal);
                }
                FilterToken::AnyOne => self.any_one = None,
                FilterToken::Rest => self.rest = None,
            }
        }
        removed
    }

    fn remove_entry(&mut self, group: Option<&str>, entry: &T) -> bool {
        let list = match group {
            None => &mut self.plain,
            Some(group) => match self.groups.iter_mut().position(|(name, _)| &**name == group) {
                Some(index) => {
                    let removed = remove_first(&mut self.groups[index].1, entry);
                    if self.groups[index].1.is_empty() {
                        self.groups.swap_remove(index);
                    }
                    return removed;
                }
                None => return false,
            },
        };
        remove_first(list, entry)
    }
}

fn remove_first<T: PartialEq>(list: &mut Vec<T>, entry: &T) -> bool {
    match list.iter().position(|candidate| candidate == entry) {
        Some(index) => {
            list.swap_remove(index);
            true
        }
        None => false,
    }
}

/// A trie of topic filters, each holding subscriptions of type `T`.
///
/// `T` is whatever the caller uses to name a subscription (the broker stores
/// a reference-counted handle); equality decides what [`SubjectTrie::remove`]
/// removes.
#[derive(Debug)]
pub struct SubjectTrie<T> {
    root: Node<T>,
    generation: u64,
    len: usize,
}

impl<T> Default for SubjectTrie<T> {
    fn default() -> Self {
        SubjectTrie { root: Node::default(), generation: 0, len: 0 }
    }
}

impl<T: Clone + PartialEq> SubjectTrie<T> {
    /// An empty trie.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a subscription under `filter`, in queue `group` if given.
    pub fn insert(&mut self, filter: &TopicFilter, group: Option<&str>, entry: T) {
        let mut node = &mut self.root;
        for token in filter.tokens() {
            node = node.child_mut(token);
        }
        match group {
            None => node.plain.push(entry),
            Some(group) => match node.groups.iter_mut().find(|(name, _)| &**name == group) {
                Some((_, members)) => members.push(entry),
                None => node.groups.push((Arc::from(group), vec![entry])),
            },
        }
        self.len += 1;
        self.generation += 1;
    }

    /// Removes one subscription; returns false when it was not there.
    pub fn remove(&mut self, filter: &TopicFilter, group: Option<&str>, entry: &T) -> bool {
        let removed = self.root.remove(filter.tokens(), group, entry);
        if removed {
            self.len -= 1;
            self.generation += 1;
        }
        removed
    }

    /// Every subscription whose filter matches `topic`.
    pub fn matches(&self, topic: &TopicName) -> MatchResult<T> {
        let tokens: Vec<&str> = topic.tokens().collect();
        let mut result = MatchResult::empty();
        self.root.collect(&tokens, &mut result);
        result
    }

    /// Number of subscriptions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no subscription is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Changes so far; moves on with every insert and remove.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// Recent match results for one reader, valid for one trie generation. The
/// cached value `V` is whatever the reader derives from a match (a
/// [`MatchResult`], or a richer route built from one).
///
/// Bounded by `capacity` entries; when full, a quarter of the entries are
/// evicted (in hash order, which is as good as random here) so that a burst of
/// distinct topics cannot grow it without limit.
#[derive(Debug)]
pub struct MatchCache<V> {
    /// Keyed with FxHash: topics are short and the cache is private to one
    /// reader, so a fast non-keyed hash is the right trade.
    entries: HashMap<String, Arc<V>, rustc_hash::FxBuildHasher>,
    generation: u64,
    capacity: usize,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to walk the trie.
    pub misses: u64,
}

impl<V> MatchCache<V> {
    /// An empty cache holding at most `capacity` topics (at least one).
    pub fn new(capacity: usize) -> Self {
        MatchCache {
            entries: HashMap::with_hasher(rustc_hash::FxBuildHasher),
            generation: 0,
            capacity: capacity.max(1),
            hits: 0,
            misses: 0,
        }
    }

    /// The cached result for `topic`, if it was computed at `generation`.
    pub fn get(&mut self, topic: &str, generation: u64) -> Option<Arc<V>> {
        if generation != self.generation {
            self.entries.clear();
            self.generation = generation;
        }
        let found = self.entries.get(topic).cloned();
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        found
    }

    /// Stores the result for `topic` computed at `generation`.
    pub fn insert(&mut self, topic: &str, generation: u64, result: Arc<V>) {
        if generation != self.generation {
            self.entries.clear();
            self.generation = generation;
        }
        if self.entries.len() >= self.capacity {
            let evict = (self.capacity / 4).max(1);
            let victims: Vec<String> = self.entries.keys().take(evict).cloned().collect();
            for victim in victims {
                self.entries.remove(&victim);
            }
        }
        self.entries.insert(topic.to_string(), result);
    }

    /// Number of cached topics.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn filter(text: &str) -> TopicFilter {
        TopicFilter::new(text).expect("valid filter")
    }

    fn name(text: &str) -> TopicName {
        TopicName::new(text).expect("valid topic")
    }

    fn sorted(mut entries: Vec<u32>) -> Vec<u32> {
        entries.sort_unstable();
        entries
    }

    #[test]
    fn literal_and_wildcard_filters_match() {
        let mut trie = SubjectTrie::new();
        trie.insert(&filter("a.b.c"), None, 1);
        trie.insert(&filter("a.*.c"), None, 2);
        trie.insert(&filter("a.>"), None, 3);
        trie.insert(&filter(">"), None, 4);
        trie.insert(&filter("a.b"), None, 5);
        assert_eq!(sorted(trie.matches(&name("a.b.c")).plain), vec![1, 2, 3, 4]);
        assert_eq!(sorted(trie.matches(&name("a.b")).plain), vec![3, 4, 5]);
        assert_eq!(sorted(trie.matches(&name("a")).plain), vec![4]);
        assert_eq!(sorted(trie.matches(&name("x.y")).plain), vec![4]);
    }

    #[test]
    fn groups_merge_by_name_across_filters() {
        let mut trie = SubjectTrie::new();
        trie.insert(&filter("a.b"), Some("workers"), 1);
        trie.insert(&filter("a.*"), Some("workers"), 2);
        trie.insert(&filter("a.*"), Some("audit"), 3);
        trie.insert(&filter("a.b"), None, 4);
        let result = trie.matches(&name("a.b"));
        assert_eq!(result.plain, vec![4]);
        let mut groups: Vec<(String, Vec<u32>)> =
            result.groups.into_iter().map(|(name, members)| (name.to_string(), sorted(members))).collect();
        groups.sort();
        assert_eq!(groups, vec![("audit".into(), vec![3]), ("workers".into(), vec![1, 2])]);
    }

    #[test]
    fn remove_prunes_and_counts_generations() {
        let mut trie = SubjectTrie::new();
        trie.insert(&filter("a.b.c"), None, 1);
        trie.insert(&filter("a.b.c"), Some("g"), 2);
        assert_eq!(trie.generation(), 2);
        assert!(!trie.remove(&filter("a.b.c"), None, &9));
        assert_eq!(trie.generation(), 2, "a failed remove changes nothing");
        assert!(trie.remove(&filter("a.b.c"), None, &1));
        assert!(trie.remove(&filter("a.b.c"), Some("g"), &2));
        assert!(trie.is_empty());
        assert!(trie.root.is_empty(), "all nodes pruned");
        assert_eq!(trie.generation(), 4);
    }

    #[test]
    fn cache_drops_results_of_old_generations_and_stays_bounded() {
        let mut cache: MatchCache<MatchResult<u32>> = MatchCache::new(4);
        let result = Arc::new(MatchResult { plain: vec![1], groups: Vec::new() });
        cache.insert("a", 1, result.clone());
        assert_eq!(cache.get("a", 1), Some(result));
        assert_eq!(cache.get("a", 2), None, "a new generation invalidates");
        for index in 0..100 {
            cache.insert(&format!("t{index}"), 2, Arc::new(MatchResult::empty()));
            assert!(cache.len() <= 4);
        }
        assert_eq!((cache.hits, cache.misses), (1, 1));
    }

    fn token_strategy() -> impl Strategy<Value = String> {
        prop_oneof![Just("a".to_string()), Just("b".to_string()), Just("c".to_string())]
    }

    fn filter_strategy() -> impl Strategy<Value = String> {
        (prop::collection::vec(prop_oneof![token_strategy(), Just("*".to_string())], 1..4), any::<bool>()).prop_map(
            |(mut tokens, rest)| {
                if rest {
                    tokens.push(">".to_string());
                }
                tokens.join(".")
            },
        )
    }

    proptest! {
        /// The trie returns exactly the subscriptions whose filter, evaluated
        /// alone, matches the topic.
        #[test]
        fn trie_agrees_with_one_by_one_evaluation(
            filters in prop::collection::vec(filter_strategy(), 0..40),
            removals in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
            topics in prop::collection::vec(prop::collection::vec(token_strategy(), 1..6), 1..20),
        ) {
            let mut trie = SubjectTrie::new();
            let mut live: Vec<(u32, TopicFilter)> = Vec::new();
            for (index, text) in filters.iter().enumerate() {
                let parsed = filter(text);
                trie.insert(&parsed, None, index as u32);
                live.push((index as u32, parsed));
            }
            for removal in removals {
                if live.is_empty() { break; }
                let (id, parsed) = live.remove(removal.index(live.len()));
                prop_assert!(trie.remove(&parsed, None, &id));
            }
            prop_assert_eq!(trie.len(), live.len());
            for tokens in topics {
                let topic = name(&tokens.join("."));
                let expected: Vec<u32> =
                    live.iter().filter(|(_, f)| f.matches(&topic)).map(|(id, _)| *id).collect();
                prop_assert_eq!(sorted(trie.matches(&topic).plain), sorted(expected));
            }
        }
    }
}
