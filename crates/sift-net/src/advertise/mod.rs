//! What a broker advertises for its own local subscriptions, kept up to date
//! one subscribe or unsubscribe at a time.
//!
//! [`Advertiser`] turns the stream of local subscription changes into the
//! stream of interest changes (`add key entry`, `remove key`) that the broker
//! sends to the network, following the summary rule:
//!
//! - identical entries (same topic filter, content filter and queue group)
//!   are one entry, reference-counted: the second subscription changes
//!   nothing, and the entry goes only when the last one does;
//! - an entry that one of the advertised entries covers
//!   ([`InterestEntry::covers`]) is not advertised; a new entry that covers
//!   advertised ones replaces them;
//! - when an advertised entry goes, the entries no remaining advertised entry
//!   covers are advertised.
//!
//! Every held entry is therefore either advertised or wants only messages an
//! advertised one wants, so a neighbour that forwards by the advertised
//! entries forwards everything this broker's subscribers want.

mod index;
#[cfg(test)]
mod reference;

use std::collections::{BTreeMap, BTreeSet};

use crate::interest::{EntryKey, InterestEntry};

use index::CoverIndex;

/// One change to advertise, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum InterestUpdate {
    /// `entry` is advertised under `key`.
    Add {
        /// The key the entry is advertised under.
        key: u64,
        /// The entry.
        entry: InterestEntry,
    },
    /// The entry advertised under `key` is withdrawn.
    Remove {
        /// The key it was advertised under.
        key: u64,
    },
}

/// A distinct local entry and how many subscriptions stand behind it.
#[derive(Debug)]
struct Held {
    entry: InterestEntry,
    count: usize,
}

/// A broker's own interest: its distinct local entries and which of them are
/// advertised, under which keys.
///
/// State is O(distinct entries). Adding an entry compares it only with the
/// advertised entries that can cover it or that it can cover
/// ([`index`]): those of the same topic text or with a wildcard topic, and
/// of a compatible kind of content filter; removing an advertised one
/// re-checks the covered entries it covered. Both are paid on subscribe and
/// unsubscribe only, never per message.
#[derive(Debug)]
pub struct Advertiser {
    held: BTreeMap<EntryKey, Held>,
    advertised: BTreeMap<EntryKey, u64>,
    /// Held entries that are not advertised, because an advertised one
    /// covers them.
    covered: BTreeSet<EntryKey>,
    index: CoverIndex,
    next_key: u64,
}

impl Default for Advertiser {
    fn default() -> Self {
        Advertiser {
            held: BTreeMap::new(),
            advertised: BTreeMap::new(),
            covered: BTreeSet::new(),
            index: CoverIndex::default(),
            next_key: 1,
        }
    }
}

impl Advertiser {
    /// Nothing held, nothing advertised.
    pub fn new() -> Advertiser {
        Advertiser::default()
    }

    /// A local subscription wanting `entry` appeared; returns what to
    /// advertise because of it (often nothing).
    pub fn add(&mut self, entry: InterestEntry) -> Vec<InterestUpdate> {
        let identity = entry.order_key();
        if let Some(held) = self.held.get_mut(&identity) {
            held.count += 1;
            return Vec::new();
        }
        self.held.insert(identity.clone(), Held { entry, count: 1 });
        self.advertise_if_uncovered(&identity)
    }

    /// A local subscription wanting `entry` went away; returns what to
    /// advertise because of it. An entry never added changes nothing.
    pub fn remove(&mut self, entry: &InterestEntry) -> Vec<InterestUpdate> {
        let identity = entry.order_key();
        let Some(held) = self.held.get_mut(&identity) else {
            return Vec::new();
        };
        held.count -= 1;
        if held.count > 0 {
            return Vec::new();
        }
        let Some(removed) = self.held.remove(&identity) else {
            return Vec::new();
        };
        self.covered.remove(&identity);
        let Some(key) = self.advertised.remove(&identity) else {
            return Vec::new();
        };
        self.index.remove(&identity, &removed.entry);
        let mut updates = vec![InterestUpdate::Remove { key }];
        // The covered entries the removed one covered may now be
        // uncovered; they are re-checked in order. Every other covered
        // entry still has an advertised entry covering it.
        let candidates: Vec<EntryKey> = self
            .covered
            .iter()
            .filter(|candidate| self.held.get(*candidate).is_some_and(|held| removed.entry.covers(&held.entry)))
            .cloned()
            .collect();
        for candidate in candidates {
            updates.extend(self.advertise_if_uncovered(&candidate));
        }
        updates
    }

    /// Advertises the held entry `identity` unless an advertised entry covers
    /// it, withdrawing the advertised entries it covers in turn.
    fn advertise_if_uncovered(&mut self, identity: &EntryKey) -> Vec<InterestUpdate> {
        let Some(entry) = self.held.get(identity).map(|held| held.entry.clone()) else {
            return Vec::new();
        };
        let covered = self
            .index
            .may_cover(identity, &entry)
            .iter()
            .any(|wider| self.held.get(wider).is_some_and(|held| held.entry.covers(&entry)));
        if covered {
            self.covered.insert(identity.clone());
            return Vec::new();
        }
        let narrower: Vec<EntryKey> = self
            .index
            .may_be_covered(identity, &entry)
            .into_iter()
            .filter(|other| self.held.get(other).is_some_and(|held| entry.covers(&held.entry)))
            .collect();
        let mut updates = Vec::with_capacity(narrower.len() + 1);
        for other in narrower {
            if let (Some(key), Some(held)) = (self.advertised.remove(&other), self.held.get(&other)) {
                self.index.remove(&other, &held.entry);
                self.covered.insert(other);
                updates.push(InterestUpdate::Remove { key });
            }
        }
        let key = self.next_key;
        self.next_key += 1;
        self.covered.remove(identity);
        self.advertised.insert(identity.clone(), key);
        self.index.insert(identity, &entry);
        updates.push(InterestUpdate::Add { key, entry });
        updates
    }

    /// The advertised entries with their keys, in a deterministic order.
    pub fn advertised(&self) -> Vec<(u64, &InterestEntry)> {
        self.advertised
            .iter()
            .filter_map(|(identity, key)| self.held.get(identity).map(|held| (*key, &held.entry)))
            .collect()
    }

    /// Distinct entries held (advertised or covered).
    pub fn distinct_len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::TopicFilter;
    use sift_filter::{ContentFilter, FilterLanguage};

    fn entry(topic: &str, tags: Option<&str>) -> InterestEntry {
        InterestEntry {
            topic: TopicFilter::new(topic).expect("valid filter"),
            content: tags.map(|text| ContentFilter::parse(FilterLanguage::Tags, text).expect("valid filter")),
            group: None,
        }
    }

    fn topics(advertiser: &Advertiser) -> Vec<String> {
        advertiser.advertised().iter().map(|(_, entry)| entry.topic.as_str().to_string()).collect()
    }

    #[test]
    fn identical_entries_are_counted_and_advertised_once() {
        let mut advertiser = Advertiser::new();
        let first = advertiser.add(entry("a.b", None));
        assert_eq!(first, vec![InterestUpdate::Add { key: 1, entry: entry("a.b", None) }]);
        assert!(advertiser.add(entry("a.b", None)).is_empty());
        assert!(advertiser.remove(&entry("a.b", None)).is_empty(), "one subscription is left");
        assert_eq!(advertiser.remove(&entry("a.b", None)), vec![InterestUpdate::Remove { key: 1 }]);
        assert!(advertiser.remove(&entry("a.b", None)).is_empty(), "nothing left to remove");
        assert_eq!(advertiser.distinct_len(), 0);
    }

    #[test]
    fn a_covered_entry_waits_until_its_cover_goes() {
        let mut advertiser = Advertiser::new();
        advertiser.add(entry("a.>", None));
        assert!(advertiser.add(entry("a.b", None)).is_empty());
        assert_eq!(topics(&advertiser), ["a.>"]);
        let updates = advertiser.remove(&entry("a.>", None));
        assert_eq!(
            updates,
            vec![InterestUpdate::Remove { key: 1 }, InterestUpdate::Add { key: 2, entry: entry("a.b", None) }]
        );
        assert_eq!(topics(&advertiser), ["a.b"]);
    }

    #[test]
    fn a_wider_entry_replaces_the_ones_it_covers() {
        let mut advertiser = Advertiser::new();
        advertiser.add(entry("q", Some("price>200")));
        advertiser.add(entry("r", None));
        let updates = advertiser.add(entry("q", Some("price>100")));
        assert_eq!(
            updates,
            vec![
                InterestUpdate::Remove { key: 1 },
                InterestUpdate::Add { key: 3, entry: entry("q", Some("price>100")) }
            ]
        );
        assert_eq!(advertiser.advertised().len(), 2);
        advertiser.remove(&entry("q", Some("price>100")));
        let contents: Vec<Option<(String, String)>> =
            advertiser.advertised().iter().map(|(_, entry)| entry.content_text()).collect();
        assert!(contents
            .contains(&Some(("tags".to_string(), entry("q", Some("price>200")).content_text().expect("filter").1))));
    }

    #[test]
    fn only_uncovered_entries_come_back_when_a_cover_goes() {
        let mut advertiser = Advertiser::new();
        advertiser.add(entry("a.>", None));
        advertiser.add(entry("a.*", None));
        advertiser.add(entry("a.b", None));
        advertiser.add(entry("z", None));
        assert_eq!(topics(&advertiser), ["a.>", "z"]);
        advertiser.remove(&entry("a.>", None));
        assert_eq!(topics(&advertiser), ["a.*", "z"], "a.* covers a.b");
        advertiser.remove(&entry("a.*", None));
        assert_eq!(topics(&advertiser), ["a.b", "z"]);
    }
}
