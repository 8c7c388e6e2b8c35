//! The interned predicates of all partitions, with reference counts, and the
//! sources that find the satisfied ones for a message.
//!
//! Interning is global rather than per partition so that a predicate many
//! partitions use (`sym = 'IBM'`) is decided once per message; each
//! partition then looks up the conjunctions it has under the predicate.
//!
//! Each entry also counts the conjunctions that use it (which chooses the
//! access predicate of a clustered conjunction, see `cluster.rs`) and the
//! counted conjunctions among them (which decides whether a range predicate
//! must be enumerated for every message).

use std::collections::HashMap;

use sift_core::Message;

use crate::index::attribute::AttributeTable;
use crate::index::check::Check;
use crate::index::predicate::{PredicateId, PredicateSource, ValueTest};
use crate::index::regex_shards::RegexShards;
use crate::index::scratch::Stamps;
use crate::index::slab::Slab;
use crate::index::topic_cache::TopicCache;
use crate::index::xpath_source::XPathSource;
use crate::xpath::XPathScratch;

/// An interned predicate and how many conjunctions use it.
#[derive(Debug, Clone)]
struct Entry {
    source: PredicateSource,
    /// The id of the attribute a value predicate tests.
    attribute: Option<usize>,
    /// How many conjunctions use it: its usage, for choosing access
    /// predicates.
    references: usize,
    /// How many counted conjunctions use it.
    counted: usize,
}

impl Entry {
    /// The range test, for a range predicate.
    fn range_test(&self) -> Option<(usize, &ValueTest)> {
        match &self.source {
            PredicateSource::Value { test: test @ ValueTest::Range(..), .. } => Some((self.attribute?, test)),
            _ => None,
        }
    }
}

/// Every distinct predicate in use, filed with the source that decides it.
#[derive(Debug, Clone, Default)]
pub(crate) struct PredicateTable {
    ids: HashMap<PredicateSource, PredicateId>,
    entries: Slab<Entry>,
    attributes: AttributeTable,
    regexes: RegexShards,
    xpaths: XPathSource,
}

impl PredicateTable {
    /// The number of distinct predicates.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// One more than the largest attribute id, for the scratch's stamps.
    pub(crate) fn attribute_id_bound(&self) -> usize {
        self.attributes.id_bound()
    }

    /// One more than the largest predicate id, for the scratch's stamps.
    pub(crate) fn id_bound(&self) -> usize {
        self.entries.id_bound()
    }

    /// Regex predicates still matched one by one (see `regex_shards.rs`).
    pub(crate) fn regex_pending(&self) -> usize {
        self.regexes.pending()
    }

    /// Compiles pending and removed expressions into their shards' sets.
    pub(crate) fn refresh(&mut self) {
        self.regexes.refresh();
    }

    /// The id of `source`, interning and filing it if new; each call takes
    /// one reference, given back with [`PredicateTable::release`].
    pub(crate) fn acquire(&mut self, source: PredicateSource) -> PredicateId {
        if let Some(&id) = self.ids.get(&source) {
            if let Some(entry) = self.entries.get_mut(id) {
                entry.references += 1;
            }
            return id;
        }
        let id = self.entries.insert(Entry { source: source.clone(), attribute: None, references: 1, counted: 0 });
        let attribute = match &source {
            PredicateSource::Value { attribute, test } => Some(self.attributes.insert(attribute, test, id)),
            PredicateSource::TopicRegex(pattern) => {
                self.regexes.insert(id, pattern.0.clone());
                None
            }
            PredicateSource::Xpath(pattern) => {
                self.xpaths.insert(id, pattern.filter());
                None
            }
        };
        if let Some(entry) = self.entries.get_mut(id) {
            entry.attribute = attribute;
        }
        self.ids.insert(source, id);
        id
    }

    /// The id of `source` if it is interned.
    #[cfg(test)]
    pub(crate) fn id_of(&self, source: &PredicateSource) -> Option<PredicateId> {
        self.ids.get(source).copied()
    }

    /// Of `predicates`, the equality predicate the fewest conjunctions use
    /// (the lowest id among equals), to be a conjunction's access predicate;
    /// `None` when there is no equality.
    pub(crate) fn least_used_equality(&self, predicates: &[PredicateId]) -> Option<PredicateId> {
        let usage = |id: PredicateId| {
            let entry = self.entries.get(id)?;
            let equality = matches!(entry.source, PredicateSource::Value { test: ValueTest::Equal(_), .. });
            equality.then_some((entry.references, id))
        };
        predicates.iter().filter_map(|id| usage(*id)).min().map(|(_, id)| id)
    }

    /// How a clustered conjunction tests predicate `id`.
    pub(crate) fn check(&self, id: PredicateId) -> Check {
        let Some(entry) = self.entries.get(id) else { return Check::Satisfied(id) };
        match (&entry.source, entry.attribute) {
            (PredicateSource::Value { test: ValueTest::Range(op, bound), .. }, Some(attribute)) => {
                Check::Range { predicate: id, attribute, op: *op, bound: bound.clone() }
            }
            _ => Check::Satisfied(id),
        }
    }

    /// Records that one more counted conjunction uses predicate `id`; the
    /// first makes a range predicate enumerated for every message.
    pub(crate) fn count(&mut self, id: PredicateId) {
        let Some(entry) = self.entries.get_mut(id) else { return };
        entry.counted += 1;
        if entry.counted == 1 {
            if let Some((attribute, test)) = entry.range_test() {
                self.attributes.count_range(attribute, test, id);
            }
        }
    }

    /// Records that one counted conjunction fewer uses predicate `id`; after
    /// the last, a range predicate is no longer enumerated.
    pub(crate) fn uncount(&mut self, id: PredicateId) {
        let Some(entry) = self.entries.get_mut(id) else { return };
        if entry.counted == 0 {
            return;
        }
        entry.counted -= 1;
        if entry.counted == 0 {
            if let Some((attribute, test)) = entry.range_test() {
                self.attributes.uncount_range(attribute, test);
            }
        }
    }

    /// Gives back one reference; the last one unfiles the predicate.
    pub(crate) fn release(&mut self, id: PredicateId) {
        let Some(entry) = self.entries.get_mut(id) else { return };
        entry.references -= 1;
        if entry.references > 0 {
            return;
        }
        let Some(entry) = self.entries.remove(id) else { return };
        // Callers uncount before they release, so this is only a safeguard
        // against leaving a dead id in a range map.
        if entry.counted > 0 {
            if let Some((attribute, test)) = entry.range_test() {
                self.attributes.uncount_range(attribute, test);
            }
        }
        match &entry.source {
            PredicateSource::Value { attribute, test } => self.attributes.remove(attribute, test),
            PredicateSource::TopicRegex(_) => self.regexes.remove(id),
            PredicateSource::Xpath(_) => self.xpaths.remove(id),
        }
        self.ids.remove(&entry.source);
    }

    /// Appends every value and regex predicate the message satisfies, each
    /// once. XPath predicates are left to [`PredicateTable::collect_xpath`],
    /// which the caller runs only when it needs them.
    pub(crate) fn collect(
        &self,
        message: &Message,
        stamps: &mut Stamps,
        topic_cache: &mut TopicCache,
        satisfied: &mut Vec<PredicateId>,
    ) {
        self.attributes.collect(message, stamps, satisfied);
        if !self.regexes.is_empty() {
            topic_cache.extend_satisfied(&self.regexes, &message.topic, satisfied);
        }
    }

    /// Appends the XPath predicates the metadata document satisfies, each
    /// once, after one streaming pass over it; none when it is malformed.
    pub(crate) fn collect_xpath(&self, metadata: &[u8], scratch: &mut XPathScratch, satisfied: &mut Vec<PredicateId>) {
        self.xpaths.collect(metadata, scratch, satisfied);
    }
}
