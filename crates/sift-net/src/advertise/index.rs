//! Which advertised entries a new or departing entry has to be compared
//! with.
//!
//! Comparing every entry with every advertised one makes subscribing
//! quadratic: twelve thousand XPath subscriptions on one topic took minutes
//! to register. Most pairs cannot cover each other, and which ones can
//! follows from three facts about [`InterestEntry::covers`]:
//!
//! - a literal topic filter covers only the same topic filter, so only
//!   entries with the same topic text, or with a wildcard in theirs, can
//!   cover an entry;
//! - an entry without a content filter covers whatever content its topic
//!   allows, and is covered only by entries without one;
//! - an XPath or regular-expression filter covers, and is covered by, only a
//!   filter of the same canonical text; tags and SQL filters compare with
//!   each other through their normal forms.
//!
//! So the advertised entries are kept in buckets by topic text (one more
//! bucket holds every entry whose topic has a wildcard), and within a
//! bucket by content: none, XPath/regex by text, tags/SQL together. The
//! candidates a bucket yields are a superset of the entries that can cover
//! (or be covered); the caller still decides each pair with `covers`.

use std::collections::{BTreeMap, BTreeSet};

use sift_filter::ContentFilter;

use crate::interest::{EntryKey, InterestEntry};

/// How an entry's content filter compares with others (see the module
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ContentClass {
    /// No content filter.
    Unfiltered,
    /// XPath or regular expression: compared by canonical text only.
    ExactText,
    /// Tags or SQL: compared through normal forms.
    Formed,
}

fn content_class(entry: &InterestEntry) -> ContentClass {
    match &entry.content {
        None => ContentClass::Unfiltered,
        Some(filter) => filter_class(filter),
    }
}

/// A filter's class; a conjunction (a subscription under a restricted
/// grant) is advertised as its first filter, so it compares as that one.
fn filter_class(filter: &ContentFilter) -> ContentClass {
    match filter {
        ContentFilter::Xpath(_) | ContentFilter::Regex(_) => ContentClass::ExactText,
        ContentFilter::Tags(_) | ContentFilter::Sql(_) => ContentClass::Formed,
        ContentFilter::And(both) => filter_class(&both.0),
    }
}

/// The advertised entries of one topic text (or of every wildcard topic).
#[derive(Debug, Default)]
struct Bucket {
    unfiltered: BTreeSet<EntryKey>,
    /// By the content part of the key (language and canonical text).
    exact_text: BTreeMap<String, BTreeSet<EntryKey>>,
    formed: BTreeSet<EntryKey>,
}

impl Bucket {
    fn is_empty(&self) -> bool {
        self.unfiltered.is_empty() && self.exact_text.is_empty() && self.formed.is_empty()
    }

    fn set_for(&mut self, class: ContentClass, identity: &EntryKey) -> &mut BTreeSet<EntryKey> {
        match class {
            ContentClass::Unfiltered => &mut self.unfiltered,
            ContentClass::ExactText => self.exact_text.entry(identity.1.clone()).or_default(),
            ContentClass::Formed => &mut self.formed,
        }
    }

    fn insert(&mut self, class: ContentClass, identity: &EntryKey) {
        self.set_for(class, identity).insert(identity.clone());
    }

    fn remove(&mut self, class: ContentClass, identity: &EntryKey) {
        self.set_for(class, identity).remove(identity);
        if class == ContentClass::ExactText && self.exact_text.get(&identity.1).is_some_and(BTreeSet::is_empty) {
            self.exact_text.remove(&identity.1);
        }
    }

    /// Entries here that may cover an entry of `class` with content key
    /// `content_key`.
    fn may_cover(&self, class: ContentClass, content_key: &str, into: &mut Vec<EntryKey>) {
        into.extend(self.unfiltered.iter().cloned());
        match class {
            ContentClass::Unfiltered => {}
            ContentClass::ExactText => into.extend(self.exact_text.get(content_key).into_iter().flatten().cloned()),
            ContentClass::Formed => into.extend(self.formed.iter().cloned()),
        }
    }

    /// Entries here that an entry of `class` with content key `content_key`
    /// may cover.
    fn may_be_covered(&self, class: ContentClass, content_key: &str, into: &mut Vec<EntryKey>) {
        match class {
            ContentClass::Unfiltered => {
                into.extend(self.unfiltered.iter().cloned());
                into.extend(self.exact_text.values().flatten().cloned());
                into.extend(self.formed.iter().cloned());
            }
            ContentClass::ExactText => into.extend(self.exact_text.get(content_key).into_iter().flatten().cloned()),
            ContentClass::Formed => into.extend(self.formed.iter().cloned()),
        }
    }
}

/// The advertised entries, bucketed for [`CoverIndex::may_cover`] and
/// [`CoverIndex::may_be_covered`].
#[derive(Debug, Default)]
pub(super) struct CoverIndex {
    by_literal_topic: BTreeMap<String, Bucket>,
    wildcard_topics: Bucket,
}

impl CoverIndex {
    fn bucket_mut(&mut self, entry: &InterestEntry) -> &mut Bucket {
        if entry.topic.is_literal() {
            self.by_literal_topic.entry(entry.topic.as_str().to_string()).or_default()
        } else {
            &mut self.wildcard_topics
        }
    }

    /// Records `entry` (held under `identity`) as advertised.
    pub(super) fn insert(&mut self, identity: &EntryKey, entry: &InterestEntry) {
        self.bucket_mut(entry).insert(content_class(entry), identity);
    }

    /// Forgets that `entry` is advertised.
    pub(super) fn remove(&mut self, identity: &EntryKey, entry: &InterestEntry) {
        self.bucket_mut(entry).remove(content_class(entry), identity);
        if entry.topic.is_literal() && self.by_literal_topic.get(entry.topic.as_str()).is_some_and(Bucket::is_empty) {
            self.by_literal_topic.remove(entry.topic.as_str());
        }
    }

    /// Every advertised entry that may cover `entry` (and more), sorted.
    pub(super) fn may_cover(&self, identity: &EntryKey, entry: &InterestEntry) -> Vec<EntryKey> {
        let class = content_class(entry);
        let mut candidates = Vec::new();
        if let Some(bucket) = self.by_literal_topic.get(entry.topic.as_str()) {
            bucket.may_cover(class, &identity.1, &mut candidates);
        }
        self.wildcard_topics.may_cover(class, &identity.1, &mut candidates);
        candidates.sort();
        candidates
    }

    /// Every advertised entry that `entry` may cover (and more), sorted.
    pub(super) fn may_be_covered(&self, identity: &EntryKey, entry: &InterestEntry) -> Vec<EntryKey> {
        let class = content_class(entry);
        let mut candidates = Vec::new();
        if entry.topic.is_literal() {
            if let Some(bucket) = self.by_literal_topic.get(entry.topic.as_str()) {
                bucket.may_be_covered(class, &identity.1, &mut candidates);
            }
        } else {
            for bucket in self.by_literal_topic.values().chain([&self.wildcard_topics]) {
                bucket.may_be_covered(class, &identity.1, &mut candidates);
            }
        }
        candidates.sort();
        candidates
    }
}
