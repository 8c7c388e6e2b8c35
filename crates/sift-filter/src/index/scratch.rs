//! The per-message working memory of [`crate::index::ContentIndex::matching`].
//!
//! Matching counts satisfied predicates per conjunction and remembers which
//! subscriptions and attributes it has already dealt with. Clearing arrays
//! of counters for every message would cost time in proportion to all the
//! subscriptions, so each counter carries the *generation* (message number)
//! it was last written in, and a counter from an older generation reads as
//! zero. The buffers are kept between messages, so that matching allocates
//! nothing once they have grown to the index's size.

use crate::index::predicate::PredicateId;
use crate::index::topic_cache::TopicCache;
use crate::xpath::XPathScratch;

/// Reusable buffers for matching messages against a
/// [`crate::index::ContentIndex`]: one per thread, passed to every call.
///
/// A scratch is not tied to one index; using it with several works, at the
/// price of refilling its regex topic cache on each switch.
#[derive(Debug, Default)]
pub struct IndexScratch {
    pub(crate) stamps: Stamps,
    /// The partitions asked for, sorted and without repeats.
    pub(crate) partitions: Vec<u32>,
    /// The predicates the message satisfies, each once.
    pub(crate) satisfied: Vec<PredicateId>,
    /// Conjunctions whose indexed predicates all hold.
    pub(crate) candidates: Vec<usize>,
    pub(crate) topic_cache: TopicCache,
    /// The working memory of the XPath automaton's pass over the metadata.
    pub(crate) xpath: XPathScratch,
    /// Metadata documents run through the XPath automaton so far.
    pub(crate) xpath_passes: u64,
}

impl IndexScratch {
    /// Empty buffers; they grow on first use.
    pub fn new() -> IndexScratch {
        IndexScratch::default()
    }

    /// How many messages' metadata documents matching has parsed with this
    /// scratch: one per message whose partitions asked for have an XPath
    /// filter, none for the others. For statistics and tests.
    pub fn xpath_passes(&self) -> u64 {
        self.xpath_passes
    }
}

/// A counter valid for one generation.
#[derive(Debug, Clone, Copy, Default)]
struct Count {
    generation: u32,
    value: usize,
}

/// Generation-stamped counters and marks, indexed by the index's dense ids.
#[derive(Debug, Default)]
pub(crate) struct Stamps {
    /// The current message's generation; never 0, which marks "never".
    generation: u32,
    /// Satisfied predicates so far, per conjunction.
    counts: Vec<Count>,
    /// The generation a subscription's key was last output in.
    emitted: Vec<u32>,
    /// The generation an attribute's value was last looked up in.
    attributes: Vec<u32>,
}

impl Stamps {
    /// Starts a new message, for an index with ids below these bounds.
    pub(crate) fn begin(&mut self, conjunctions: usize, subscriptions: usize, attributes: usize) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // After 2^32 messages old stamps could be mistaken for current
            // ones, so every stamp starts over.
            self.counts.fill(Count::default());
            self.emitted.fill(0);
            self.attributes.fill(0);
            self.generation = 1;
        }
        grow(&mut self.counts, conjunctions);
        grow(&mut self.emitted, subscriptions);
        grow(&mut self.attributes, attributes);
    }

    /// Counts one more satisfied predicate for a conjunction; returns the
    /// count for this message.
    pub(crate) fn count(&mut self, conjunction: usize) -> usize {
        let count = &mut self.counts[conjunction];
        if count.generation != self.generation {
            *count = Count { generation: self.generation, value: 0 };
        }
        count.value += 1;
        count.value
    }

    /// True when the subscription's key has been output for this message.
    pub(crate) fn is_emitted(&self, subscription: usize) -> bool {
        self.emitted[subscription] == self.generation
    }

    /// Records that the subscription's key has been output.
    pub(crate) fn mark_emitted(&mut self, subscription: usize) {
        self.emitted[subscription] = self.generation;
    }

    /// Records that the attribute has been looked up; false when it already
    /// was for this message.
    pub(crate) fn mark_attribute(&mut self, attribute: usize) -> bool {
        let stamp = &mut self.attributes[attribute];
        let first = *stamp != self.generation;
        *stamp = self.generation;
        first
    }

    #[cfg(test)]
    fn set_generation(&mut self, generation: u32) {
        self.generation = generation;
    }
}

/// Lengthens `slots` to at least `length` with never-stamped values.
fn grow<T: Default + Clone>(slots: &mut Vec<T>, length: usize) {
    if slots.len() < length {
        slots.resize(length, T::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_restart_with_each_message() {
        let mut stamps = Stamps::default();
        stamps.begin(2, 1, 1);
        assert_eq!(stamps.count(0), 1);
        assert_eq!(stamps.count(0), 2);
        assert_eq!(stamps.count(1), 1);
        assert!(stamps.mark_attribute(0));
        assert!(!stamps.mark_attribute(0));
        assert!(!stamps.is_emitted(0));
        stamps.mark_emitted(0);
        assert!(stamps.is_emitted(0));
        stamps.begin(2, 1, 1);
        assert_eq!(stamps.count(0), 1);
        assert!(stamps.mark_attribute(0));
        assert!(!stamps.is_emitted(0));
    }

    #[test]
    fn stamps_start_over_when_the_generation_wraps() {
        let mut stamps = Stamps::default();
        stamps.begin(1, 1, 1);
        stamps.set_generation(u32::MAX);
        stamps.count(0);
        stamps.mark_emitted(0);
        stamps.begin(1, 1, 1);
        // Generation 0 is skipped and every stamp was cleared, so nothing
        // from generation u32::MAX or earlier is seen as current.
        assert!(!stamps.is_emitted(0));
        assert_eq!(stamps.count(0), 1);
    }
}
