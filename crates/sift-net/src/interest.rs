//! What each broker's subscribers want, as far as routing needs to know.
//!
//! [`Interest`] keeps, per broker, its subscriptions as (topic filter,
//! optional content filter) entries under caller-chosen keys. It answers the
//! forwarding callback's question, "does broker X want this message?", with
//! a [`SubjectTrie`] for the topic and [`ContentFilter::matches`] for the
//! content of the entries the trie returns.
//!
//! This is deliberately a simple per-broker structure: the content filters of
//! one broker's topic matches are evaluated one by one. The broker will later
//! reuse its content index (`sift_filter::ContentIndex`) for remote interest
//! as it does for local subscriptions, so that the cost grows with what
//! matches there too.
//!
//! [`Interest::summary`] is what a broker advertises: its entries without
//! those another entry covers ([`subscription_covers`]), since a neighbour
//! sending the wider one's messages sends the narrower one's as well.

use std::hash::Hash;

use rustc_hash::FxHashMap;
use sift_core::{Message, SubjectTrie, TopicFilter, TopicName};
use sift_filter::{subscription_covers, ContentFilter};

use crate::topology::BrokerName;

/// An entry's identity: topic filter, `language:filter` text, queue group.
pub(crate) type EntryKey = (String, String, String);

/// One subscription as routing sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct InterestEntry {
    /// Which topics it wants.
    pub topic: TopicFilter,
    /// Which of those messages it wants by content; `None` takes them all.
    pub content: Option<ContentFilter>,
    /// The queue group its subscriptions belong to; `None` for none.
    pub group: Option<String>,
}

impl InterestEntry {
    /// True when `message` is wanted by this entry alone.
    pub fn matches(&self, message: &Message) -> bool {
        self.topic.matches(&message.topic) && self.content.as_ref().is_none_or(|filter| filter.matches(message))
    }

    /// True when every message `other` wants is also wanted by `self`, for
    /// the same queue group: a group entry stands for its members only, so
    /// entries of different groups (or a group and none) never cover each
    /// other.
    pub fn covers(&self, other: &InterestEntry) -> bool {
        self.group == other.group
            && subscription_covers(&self.topic, self.content.as_ref(), &other.topic, other.content.as_ref())
    }

    /// The content filter as (language name, text), the text in the
    /// filter's own canonical form.
    pub fn content_text(&self) -> Option<(String, String)> {
        self.content.as_ref().map(|filter| (filter.language().name().to_string(), filter.to_string()))
    }

    /// Identity and sort key: two entries with equal keys want the same
    /// messages for the same group. Makes summaries deterministic.
    pub(crate) fn order_key(&self) -> EntryKey {
        let content = self.content.as_ref().map(|filter| format!("{}:{filter}", filter.language().name()));
        (self.topic.as_str().to_string(), content.unwrap_or_default(), self.group.clone().unwrap_or_default())
    }
}

/// One broker's entries, by key and in a trie by topic filter.
#[derive(Debug)]
struct BrokerInterest<K> {
    entries: FxHashMap<K, InterestEntry>,
    trie: SubjectTrie<K>,
    /// Entries with a queue group, so that a broker without any costs
    /// nothing when a message's groups are looked for.
    grouped: usize,
}

impl<K: Clone + Eq + Hash> BrokerInterest<K> {
    fn matches(&self, message: &Message, with_groups: bool) -> bool {
        let found = self.trie.matches(&message.topic);
        found.plain.iter().filter_map(|key| self.entries.get(key)).any(|entry| {
            if !with_groups && entry.group.is_some() {
                return false;
            }
            // The trie has already matched the topic; only content remains.
            entry.content.as_ref().is_none_or(|filter| filter.matches(message))
        })
    }

    /// The queue groups of the entries that want `message`, sorted, each once.
    fn matching_groups(&self, message: &Message) -> Vec<&str> {
        let found = self.trie.matches(&message.topic);
        let mut groups: Vec<&str> = found
            .plain
            .iter()
            .filter_map(|key| self.entries.get(key))
            .filter(|entry| entry.content.as_ref().is_none_or(|filter| filter.matches(message)))
            .filter_map(|entry| entry.group.as_deref())
            .collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }
}

/// What the brokers' entries outside queue groups say about one topic: the
/// brokers that want every message on it, and the content filters that
/// decide for the others. A forwarding broker caches it per topic (valid
/// for one [`Interest::generation`]), so that a message costs a few filter
/// evaluations instead of a trie walk per broker.
#[derive(Debug, Clone, Default)]
pub struct TopicInterest {
    /// Brokers with an entry for the topic and no content filter, sorted.
    pub plain: Vec<BrokerName>,
    /// Brokers with an entry for the topic and a content filter, with it.
    pub filtered: Vec<(BrokerName, ContentFilter)>,
}

impl TopicInterest {
    /// The brokers that want `message` (on this topic), sorted, each once.
    pub fn wanting(&self, message: &Message) -> Vec<BrokerName> {
        let mut wanting = self.plain.clone();
        for (broker, filter) in &self.filtered {
            if wanting.binary_search(broker).is_err() && filter.matches(message) {
                let at = wanting.partition_point(|held| held < broker);
                wanting.insert(at, broker.clone());
            }
        }
        wanting
    }
}

/// Per-broker interest tables, keyed by `K` within each broker (a
/// subscription id, say).
#[derive(Debug)]
pub struct Interest<K> {
    brokers: FxHashMap<BrokerName, BrokerInterest<K>>,
    /// Moves on with every change, for caches of [`TopicInterest`].
    generation: u64,
}

impl<K> Default for Interest<K> {
    fn default() -> Self {
        Interest { brokers: FxHashMap::default(), generation: 0 }
    }
}

impl<K: Clone + Eq + Hash> Interest<K> {
    /// No interest anywhere.
    pub fn new() -> Interest<K> {
        Interest::default()
    }

    /// Records `entry` for `broker` under `key`, replacing and returning the
    /// entry held under that key.
    pub fn add(&mut self, broker: &str, key: K, entry: InterestEntry) -> Option<InterestEntry> {
        let replaced = self.remove(broker, &key);
        self.generation += 1;
        let table = self.brokers.entry(broker.into()).or_insert_with(|| BrokerInterest {
            entries: FxHashMap::default(),
            trie: SubjectTrie::new(),
            grouped: 0,
        });
        table.trie.insert(&entry.topic, None, key.clone());
        table.grouped += usize::from(entry.group.is_some());
        table.entries.insert(key, entry);
        replaced
    }

    /// Removes the entry of `broker` under `key`, returning it.
    pub fn remove(&mut self, broker: &str, key: &K) -> Option<InterestEntry> {
        let table = self.brokers.get_mut(broker)?;
        let entry = table.entries.remove(key)?;
        self.generation += 1;
        table.trie.remove(&entry.topic, None, key);
        table.grouped -= usize::from(entry.group.is_some());
        if table.entries.is_empty() {
            self.brokers.remove(broker);
        }
        Some(entry)
    }

    /// Forgets everything about `broker` (it left the network).
    pub fn remove_broker(&mut self, broker: &str) -> bool {
        self.generation += 1;
        self.brokers.remove(broker).is_some()
    }

    /// Moves on with every change to any table.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What the entries outside queue groups say about `topic`.
    pub fn topic_interest(&self, topic: &TopicName) -> TopicInterest {
        let mut found = TopicInterest::default();
        for (broker, table) in &self.brokers {
            let mut plain = false;
            for entry in table.trie.matches(topic).plain.iter().filter_map(|key| table.entries.get(key)) {
                match (&entry.group, &entry.content) {
                    (Some(_), _) => {}
                    (None, None) => plain = true,
                    (None, Some(filter)) => found.filtered.push((broker.clone(), filter.clone())),
                }
            }
            if plain {
                found.plain.push(broker.clone());
            }
        }
        found.plain.sort();
        // A broker that wants the whole topic needs no filter evaluated.
        found.filtered.retain(|(broker, _)| found.plain.binary_search(broker).is_err());
        found
    }

    /// True when some entry of `broker` wants `message`.
    pub fn wants(&self, broker: &str, message: &Message) -> bool {
        self.brokers.get(broker).is_some_and(|table| table.matches(message, true))
    }

    /// True when some entry of `broker` outside any queue group wants
    /// `message`: for a caller that serves queue groups on its own.
    pub fn wants_outside_groups(&self, broker: &str, message: &Message) -> bool {
        self.brokers.get(broker).is_some_and(|table| table.matches(message, false))
    }

    /// Every (queue group, broker) pair where an entry of the broker in that
    /// group wants `message`, sorted by group then broker.
    pub fn group_candidates(&self, message: &Message) -> Vec<(String, BrokerName)> {
        let mut found: Vec<(String, BrokerName)> = self
            .brokers
            .iter()
            .filter(|(_, table)| table.grouped > 0)
            .flat_map(|(broker, table)| {
                table.matching_groups(message).into_iter().map(move |group| (group.to_string(), broker.clone()))
            })
            .collect();
        found.sort();
        found
    }

    /// Number of entries held for `broker`.
    pub fn len(&self, broker: &str) -> usize {
        self.brokers.get(broker).map_or(0, |table| table.entries.len())
    }

    /// True when no broker has any entry.
    pub fn is_empty(&self) -> bool {
        self.brokers.is_empty()
    }

    /// Entries held in all, over every broker.
    pub fn total_len(&self) -> usize {
        self.brokers.values().map(|table| table.entries.len()).sum()
    }

    /// The brokers with at least one entry, in no particular order.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerName> {
        self.brokers.keys()
    }

    /// The entries of `broker` with their keys, in no particular order.
    pub fn entries<'a>(&'a self, broker: &str) -> Box<dyn Iterator<Item = (&'a K, &'a InterestEntry)> + 'a> {
        match self.brokers.get(broker) {
            Some(table) => Box::new(table.entries.iter()),
            None => Box::new(std::iter::empty()),
        }
    }

    /// What to advertise for all the brokers held: every entry not covered
    /// by another, in a deterministic order. O(n²) coverage checks at worst,
    /// paid when advertising, not per message.
    pub fn summary(&self) -> Vec<InterestEntry> {
        summarise(self.brokers.values().flat_map(|table| table.entries.values()))
    }

    /// [`Interest::summary`] of one broker's entries.
    pub fn broker_summary(&self, broker: &str) -> Vec<InterestEntry> {
        self.brokers.get(broker).map_or_else(Vec::new, |table| summarise(table.entries.values()))
    }
}

/// The entries without those covered by another.
///
/// Greedy in a fixed order: an entry is dropped when a kept entry covers it,
/// and a new kept entry drops the kept entries it covers. Every dropped entry
/// is thus covered by one kept at that time, which is itself kept or covered
/// by a later kept one, so the result wants every message the input wants,
/// even though the covering test is only sound, not complete or transitive.
/// Of two equal entries the first in order is kept.
fn summarise<'a>(entries: impl Iterator<Item = &'a InterestEntry>) -> Vec<InterestEntry> {
    let mut sorted: Vec<(&InterestEntry, EntryKey)> = entries.map(|entry| (entry, entry.order_key())).collect();
    sorted.sort_by(|left, right| left.1.cmp(&right.1));
    let mut kept: Vec<&InterestEntry> = Vec::new();
    for (entry, _) in sorted {
        if kept.iter().any(|wider| wider.covers(entry)) {
            continue;
        }
        kept.retain(|narrower| !entry.covers(narrower));
        kept.push(entry);
    }
    kept.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::{TopicName, Value};
    use sift_filter::FilterLanguage;

    fn entry(topic: &str, content: Option<(FilterLanguage, &str)>) -> InterestEntry {
        InterestEntry {
            topic: TopicFilter::new(topic).expect("valid filter"),
            content: content.map(|(language, text)| ContentFilter::parse(language, text).expect("valid filter")),
            group: None,
        }
    }

    #[test]
    fn topic_interest_agrees_with_wants_outside_groups() {
        let mut interest: Interest<u64> = Interest::new();
        interest.add("b1", 1, entry("a.>", None));
        interest.add("b2", 1, entry("a.b", Some((FilterLanguage::Sql, "price > 100"))));
        interest.add("b3", 1, entry("a.*", Some((FilterLanguage::Sql, "price < 10"))));
        interest.add("b3", 2, entry("a.b", None));
        let mut grouped = entry("a.b", None);
        grouped.group = Some("g".to_string());
        interest.add("b4", 1, grouped);
        let before = interest.generation();
        let topic = TopicName::new("a.b").expect("valid topic");
        let route = interest.topic_interest(&topic);
        assert_eq!(route.plain.iter().map(|name| &**name).collect::<Vec<_>>(), ["b1", "b3"]);
        assert_eq!(route.filtered.len(), 1, "b3's filter is not needed: it wants the whole topic");
        for price in [5, 50, 500] {
            let message = message("a.b", price);
            let expected: Vec<&str> = ["b1", "b2", "b3", "b4"]
                .into_iter()
                .filter(|broker| interest.wants_outside_groups(broker, &message))
                .collect();
            let wanting = route.wanting(&message);
            assert_eq!(wanting.iter().map(|name| &**name).collect::<Vec<_>>(), expected, "price {price}");
        }
        interest.remove("b1", &1);
        assert!(interest.generation() > before);
    }

    #[test]
    fn group_candidates_list_each_group_and_broker_once() {
        let mut interest: Interest<u64> = Interest::new();
        let mut workers = entry("jobs.>", None);
        workers.group = Some("workers".to_string());
        let mut cheap = entry("jobs.>", Some((FilterLanguage::Sql, "price < 10")));
        cheap.group = Some("cheap".to_string());
        interest.add("b2", 1, workers.clone());
        interest.add("b2", 2, workers.clone());
        interest.add("b3", 1, workers);
        interest.add("b3", 2, cheap);
        interest.add("b4", 1, entry("jobs.>", None));
        let pairs = |price| -> Vec<(String, String)> {
            interest
                .group_candidates(&message("jobs.a", price))
                .into_iter()
                .map(|(group, broker)| (group, broker.to_string()))
                .collect()
        };
        let expected = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(group, broker)| (group.to_string(), broker.to_string())).collect()
        };
        assert_eq!(pairs(5), expected(&[("cheap", "b3"), ("workers", "b2"), ("workers", "b3")]));
        assert_eq!(pairs(50), expected(&[("workers", "b2"), ("workers", "b3")]));
    }

    fn message(topic: &str, price: i64) -> Message {
        let mut message = Message::new(TopicName::new(topic).expect("valid topic"), "");
        message.properties = vec![("price".to_string(), Value::Int(price))];
        message
    }

    #[test]
    fn answers_by_topic_then_content() {
        let mut interest: Interest<u32> = Interest::new();
        interest.add("b1", 1, entry("stocks.*", Some((FilterLanguage::Tags, "price>100"))));
        interest.add("b2", 1, entry("stocks.>", None));
        assert!(interest.wants("b1", &message("stocks.ibm", 120)));
        assert!(!interest.wants("b1", &message("stocks.ibm", 90)));
        assert!(!interest.wants("b1", &message("bonds.ibm", 120)));
        assert!(interest.wants("b2", &message("stocks.ibm", 90)));
        assert!(!interest.wants("b3", &message("stocks.ibm", 90)));
        assert!(entry("stocks.*", None).matches(&message("stocks.ibm", 1)));
    }

    #[test]
    fn add_replaces_and_remove_forgets() {
        let mut interest: Interest<u32> = Interest::new();
        assert!(interest.add("b1", 7, entry("a", None)).is_none());
        let replaced = interest.add("b1", 7, entry("b", None));
        assert_eq!(replaced, Some(entry("a", None)));
        assert!(!interest.wants("b1", &message("a", 0)));
        assert!(interest.wants("b1", &message("b", 0)));
        assert_eq!(interest.len("b1"), 1);
        assert_eq!(interest.remove("b1", &7), Some(entry("b", None)));
        assert!(interest.remove("b1", &7).is_none());
        assert!(!interest.wants("b1", &message("b", 0)));
        assert!(interest.is_empty());
        interest.add("b2", 1, entry("a", None));
        assert!(interest.remove_broker("b2"));
        assert!(interest.is_empty());
    }

    #[test]
    fn summary_drops_covered_entries() {
        let mut interest: Interest<u32> = Interest::new();
        interest.add("b1", 1, entry("stocks.ibm", Some((FilterLanguage::Tags, "price>200"))));
        interest.add("b1", 2, entry("stocks.*", Some((FilterLanguage::Tags, "price>100"))));
        interest.add("b1", 3, entry("bonds.>", None));
        interest.add("b2", 1, entry("bonds.us", Some((FilterLanguage::Sql, "price > 5"))));
        interest.add("b2", 2, entry("stocks.*", Some((FilterLanguage::Tags, "price>100"))));
        interest.add("b2", 3, entry("fx.>", Some((FilterLanguage::Regex, "^fx\\.eur"))));
        let summary = interest.summary();
        let expected = vec![
            entry("bonds.>", None),
            entry("fx.>", Some((FilterLanguage::Regex, "^fx\\.eur"))),
            entry("stocks.*", Some((FilterLanguage::Tags, "price>100"))),
        ];
        assert_eq!(summary, expected);
        let own = interest.broker_summary("b2");
        assert_eq!(own.len(), 3, "nothing of b2 covers another of b2");
        assert!(interest.broker_summary("nobody").is_empty());
        assert_eq!(interest.total_len(), 6);
        assert_eq!(interest.entries("b2").count(), 3);
        assert_eq!(interest.entries("nobody").count(), 0);
    }

    #[test]
    fn entries_of_different_groups_never_cover_each_other() {
        let wide = entry("a.>", None);
        let mut grouped = entry("a.b", None);
        grouped.group = Some("workers".to_string());
        assert!(!wide.covers(&grouped));
        let mut interest: Interest<u32> = Interest::new();
        interest.add("b1", 1, grouped.clone());
        assert!(interest.wants("b1", &message("a.b", 0)));
        assert!(!interest.wants_outside_groups("b1", &message("a.b", 0)));
        interest.add("b1", 2, entry("a.b", None));
        assert!(interest.wants_outside_groups("b1", &message("a.b", 0)));
        let mut wide_grouped = wide.clone();
        wide_grouped.group = Some("workers".to_string());
        assert!(wide_grouped.covers(&grouped));
        assert_ne!(grouped.order_key(), entry("a.b", None).order_key());
    }
}
