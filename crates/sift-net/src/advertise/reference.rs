//! The advertiser as first written, comparing every entry with every
//! advertised one, kept to check that the indexed [`Advertiser`] produces
//! exactly the same updates.

use std::collections::BTreeMap;

use proptest::prelude::*;
use sift_core::TopicFilter;
use sift_filter::{ContentFilter, FilterLanguage};

use super::{Advertiser, InterestUpdate};
use crate::interest::{EntryKey, InterestEntry};

/// The quadratic reference: the summary rule applied by brute force.
#[derive(Default)]
struct ReferenceAdvertiser {
    held: BTreeMap<EntryKey, (InterestEntry, usize)>,
    advertised: BTreeMap<EntryKey, u64>,
    next_key: u64,
}

impl ReferenceAdvertiser {
    fn add(&mut self, entry: InterestEntry) -> Vec<InterestUpdate> {
        let identity = entry.order_key();
        if let Some(held) = self.held.get_mut(&identity) {
            held.1 += 1;
            return Vec::new();
        }
        self.held.insert(identity.clone(), (entry, 1));
        self.advertise_if_uncovered(&identity)
    }

    fn remove(&mut self, entry: &InterestEntry) -> Vec<InterestUpdate> {
        let identity = entry.order_key();
        let Some(held) = self.held.get_mut(&identity) else { return Vec::new() };
        held.1 -= 1;
        if held.1 > 0 {
            return Vec::new();
        }
        self.held.remove(&identity);
        let Some(key) = self.advertised.remove(&identity) else { return Vec::new() };
        let mut updates = vec![InterestUpdate::Remove { key }];
        let candidates: Vec<EntryKey> =
            self.held.keys().filter(|candidate| !self.advertised.contains_key(*candidate)).cloned().collect();
        for candidate in candidates {
            updates.extend(self.advertise_if_uncovered(&candidate));
        }
        updates
    }

    fn advertise_if_uncovered(&mut self, identity: &EntryKey) -> Vec<InterestUpdate> {
        let entry = self.held[identity].0.clone();
        if self.advertised.keys().any(|wider| self.held[wider].0.covers(&entry)) {
            return Vec::new();
        }
        let narrower: Vec<EntryKey> =
            self.advertised.keys().filter(|other| entry.covers(&self.held[*other].0)).cloned().collect();
        let mut updates: Vec<InterestUpdate> = narrower
            .iter()
            .filter_map(|other| self.advertised.remove(other).map(|key| InterestUpdate::Remove { key }))
            .collect();
        self.next_key += 1;
        self.advertised.insert(identity.clone(), self.next_key);
        updates.push(InterestUpdate::Add { key: self.next_key, entry });
        updates
    }
}

const TOPICS: [&str; 7] = ["a", "a.b", "a.c", "a.*", "a.>", "b", ">"];
const CONTENTS: [Option<(FilterLanguage, &str)>; 7] = [
    None,
    Some((FilterLanguage::Tags, "x>1")),
    Some((FilterLanguage::Tags, "x>5")),
    Some((FilterLanguage::Tags, "x=7,y=2")),
    Some((FilterLanguage::Sql, "x > 3")),
    Some((FilterLanguage::Xpath, "/order")),
    Some((FilterLanguage::Xpath, "/order[price > 3]")),
];

fn entry_strategy() -> impl Strategy<Value = InterestEntry> {
    (0..TOPICS.len(), 0..CONTENTS.len(), prop::bool::weighted(0.2)).prop_map(|(topic, content, grouped)| {
        InterestEntry {
            topic: TopicFilter::new(TOPICS[topic]).expect("valid topic filter"),
            content: CONTENTS[content]
                .map(|(language, text)| ContentFilter::parse(language, text).expect("valid content filter")),
            group: grouped.then(|| "workers".to_string()),
        }
    })
}

proptest! {
    /// Any sequence of subscribes and unsubscribes (an unsubscribe of an
    /// entry never subscribed changes nothing) gives the same updates from
    /// the indexed advertiser as from the brute-force one.
    #[test]
    fn the_index_changes_nothing_but_the_cost(
        steps in prop::collection::vec((prop::bool::weighted(0.6), entry_strategy()), 1..60)
    ) {
        let mut indexed = Advertiser::new();
        let mut reference = ReferenceAdvertiser { next_key: 0, ..ReferenceAdvertiser::default() };
        for (adding, entry) in steps {
            let (got, expected) = if adding {
                (indexed.add(entry.clone()), reference.add(entry))
            } else {
                (indexed.remove(&entry), reference.remove(&entry))
            };
            prop_assert_eq!(got, expected);
        }
    }
}

#[test]
fn twelve_thousand_distinct_xpath_entries_on_one_topic_are_each_advertised() {
    // The JBI benchmark's largest level. With pairwise comparison this took
    // minutes (`sift bench jbi` shows registration times); now each entry
    // meets only the entries of its own text.
    let mut advertiser = Advertiser::new();
    for index in 0..12_000 {
        let content = ContentFilter::parse(FilterLanguage::Xpath, &format!("/order[id = {index}]"));
        let entry = InterestEntry {
            topic: TopicFilter::new("jbi.objects").expect("valid topic filter"),
            content: Some(content.expect("valid XPath")),
            group: None,
        };
        assert_eq!(advertiser.add(entry).len(), 1, "each distinct entry is advertised");
    }
    assert_eq!(advertiser.advertised().len(), 12_000);
}
