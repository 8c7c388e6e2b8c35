//! What a multicast receiver's local subscriptions want: the topic trie
//! and the content index the broker uses, here matched on the receiver,
//! since with no broker in between every receiver gets every message of
//! the group and keeps only its matches.

use std::collections::HashSet;

use sift_core::{Message, SubjectTrie, TopicFilter};
use sift_filter::{ContentFilter, ContentIndex, IndexScratch};

/// The content index partition every local subscription files its filter in.
const PARTITION: u32 = 0;

/// Local subscriptions by id, matched by topic, then by content.
#[derive(Default)]
pub struct LocalInterest {
    topics: SubjectTrie<u32>,
    content: ContentIndex<u32>,
    /// Subscriptions with a content filter (the others pass on topic alone).
    filtered: HashSet<u32>,
    scratch: IndexScratch,
    content_matches: Vec<u32>,
}

impl LocalInterest {
    /// No subscriptions.
    pub fn new() -> LocalInterest {
        LocalInterest::default()
    }

    /// Adds subscription `id` for `topic_filter` and, optionally, `content`.
    pub fn insert(&mut self, id: u32, topic_filter: &TopicFilter, content: Option<&ContentFilter>) {
        self.topics.insert(topic_filter, None, id);
        if let Some(filter) = content {
            self.content.insert(PARTITION, id, filter);
            self.content.refresh();
            self.filtered.insert(id);
        }
    }

    /// The subscriptions `message` matches, in id order.
    pub fn matching(&mut self, message: &Message) -> Vec<u32> {
        let by_topic = self.topics.matches(&message.topic);
        let mut ids: Vec<u32> = by_topic.plain;
        if ids.iter().any(|id| self.filtered.contains(id)) {
            self.content_matches.clear();
            self.content.matching(message, &[PARTITION], &mut self.scratch, &mut self.content_matches);
            let passed: HashSet<u32> = self.content_matches.iter().copied().collect();
            ids.retain(|id| !self.filtered.contains(id) || passed.contains(id));
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}
