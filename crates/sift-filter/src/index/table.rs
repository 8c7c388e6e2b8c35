//! The interned predicates of all partitions, with reference counts, and the
//! sources that find the satisfied ones for a message.
//!
//! Interning is global rather than per partition so that a predicate many
//! partitions use (`sym = 'IBM'`) is decided once per message; each
//! partition then looks up the conjunctions it has under the predicate.

use std::collections::HashMap;

use sift_core::Message;

use crate::index::attribute::AttributeTable;
use crate::index::predicate::{PredicateId, PredicateSource};
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
    references: usize,
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
        let id = self.entries.insert(Entry { source: source.clone(), references: 1 });
        match &source {
            PredicateSource::Value { attribute, test } => self.attributes.insert(attribute, test, id),
            PredicateSource::TopicRegex(pattern) => self.regexes.insert(id, pattern.0.clone()),
            PredicateSource::Xpath(pattern) => self.xpaths.insert(id, pattern.filter()),
        }
        self.ids.insert(source, id);
        id
    }

    /// Gives back one reference; the last one unfiles the predicate.
    pub(crate) fn release(&mut self, id: PredicateId) {
        let Some(entry) = self.entries.get_mut(id) else { return };
        entry.references -= 1;
        if entry.references > 0 {
            return;
        }
        let Some(entry) = self.entries.remove(id) else { return };
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
