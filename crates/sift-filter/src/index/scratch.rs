//! The per-message working memory of [`crate::index::ContentIndex::matching`].
//!
//! Matching counts satisfied predicates per conjunction, marks the
//! predicates the message satisfies, records the value of each attribute
//! it looks up (for the checks of clustered conjunctions, see `cluster.rs`)
//! and remembers which subscriptions it has already output. Clearing arrays
//! of counters for every message would cost time in proportion to all the
//! subscriptions, so each counter carries the *generation* (message number)
//! it was last written in, and a counter from an older generation reads as
//! zero. The buffers are kept between messages, so that matching allocates
//! nothing once they have grown to the index's size.

use crate::index::attribute_value::AttributeValue;
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
    /// Conjunctions whose indexed predicates all hold, found by counting or
    /// by walking clusters.
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

/// An attribute's value, valid for one generation.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    generation: u32,
    value: AttributeValue,
}

/// The sizes of the index's id spaces, which the stamps must cover.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IdBounds {
    /// One more than the largest conjunction id.
    pub(crate) conjunctions: usize,
    /// One more than the largest subscription id.
    pub(crate) subscriptions: usize,
    /// One more than the largest attribute id.
    pub(crate) attributes: usize,
    /// One more than the largest predicate id.
    pub(crate) predicates: usize,
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
    /// Each attribute's value, stamped with the generation it was last
    /// looked up in.
    attributes: Vec<Seen>,
    /// The generation a predicate was last found satisfied in.
    predicates: Vec<u32>,
}

impl Stamps {
    /// Starts a new message, for an index with ids below these bounds.
    pub(crate) fn begin(&mut self, bounds: IdBounds) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // After 2^32 messages old stamps could be mistaken for current
            // ones, so every stamp starts over.
            self.counts.fill(Count::default());
            self.emitted.fill(0);
            self.attributes.fill(Seen::default());
            self.predicates.fill(0);
            self.generation = 1;
        }
        grow(&mut self.counts, bounds.conjunctions);
        grow(&mut self.emitted, bounds.subscriptions);
        grow(&mut self.attributes, bounds.attributes);
        grow(&mut self.predicates, bounds.predicates);
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

    /// Records that the subscription's key is being output; false when it
    /// already was for this message, so that it is output once.
    pub(crate) fn claim_emission(&mut self, subscription: usize) -> bool {
        let stamp = &mut self.emitted[subscription];
        if *stamp == self.generation {
            return false;
        }
        *stamp = self.generation;
        true
    }

    /// Records that the attribute has been looked up and has `value`; false,
    /// keeping the first value, when it already was for this message.
    pub(crate) fn mark_attribute(&mut self, attribute: usize, value: AttributeValue) -> bool {
        let seen = &mut self.attributes[attribute];
        if seen.generation == self.generation {
            return false;
        }
        *seen = Seen { generation: self.generation, value };
        true
    }

    /// The attribute's value in this message; `None` when the message has
    /// none (or it was not looked up).
    pub(crate) fn attribute_value(&self, attribute: usize) -> Option<&AttributeValue> {
        let seen = self.attributes.get(attribute)?;
        (seen.generation == self.generation).then_some(&seen.value)
    }

    /// Records that the message satisfies the predicate.
    pub(crate) fn mark_satisfied(&mut self, predicate: PredicateId) {
        if let Some(stamp) = self.predicates.get_mut(predicate) {
            *stamp = self.generation;
        }
    }

    /// True when the predicate was marked satisfied for this message.
    pub(crate) fn is_satisfied(&self, predicate: PredicateId) -> bool {
        self.predicates.get(predicate) == Some(&self.generation)
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

    use crate::index::number::NumberKey;

    const BOUNDS: IdBounds = IdBounds { conjunctions: 2, subscriptions: 1, attributes: 1, predicates: 2 };

    fn number(int: i64) -> AttributeValue {
        AttributeValue::Number(NumberKey::from_int(int))
    }

    #[test]
    fn counters_restart_with_each_message() {
        let mut stamps = Stamps::default();
        stamps.begin(BOUNDS);
        assert_eq!(stamps.count(0), 1);
        assert_eq!(stamps.count(0), 2);
        assert_eq!(stamps.count(1), 1);
        assert_eq!(stamps.attribute_value(0), None);
        assert!(stamps.mark_attribute(0, number(1)));
        assert!(!stamps.mark_attribute(0, number(2)));
        assert_eq!(stamps.attribute_value(0), Some(&number(1)), "the first value is kept");
        assert!(!stamps.is_satisfied(1));
        stamps.mark_satisfied(1);
        assert!(stamps.is_satisfied(1));
        assert!(!stamps.is_emitted(0));
        stamps.mark_emitted(0);
        assert!(stamps.is_emitted(0));
        assert!(!stamps.claim_emission(0), "already output");
        stamps.begin(BOUNDS);
        assert!(stamps.claim_emission(0));
        assert!(!stamps.claim_emission(0));
        stamps.begin(BOUNDS);
        assert_eq!(stamps.count(0), 1);
        assert_eq!(stamps.attribute_value(0), None);
        assert!(stamps.mark_attribute(0, number(3)));
        assert!(!stamps.is_satisfied(1));
        assert!(!stamps.is_emitted(0));
    }

    #[test]
    fn stamps_start_over_when_the_generation_wraps() {
        let mut stamps = Stamps::default();
        stamps.begin(BOUNDS);
        stamps.set_generation(u32::MAX);
        stamps.count(0);
        stamps.mark_emitted(0);
        stamps.mark_satisfied(0);
        stamps.mark_attribute(0, number(1));
        stamps.begin(BOUNDS);
        // Generation 0 is skipped and every stamp was cleared, so nothing
        // from generation u32::MAX or earlier is seen as current.
        assert!(!stamps.is_emitted(0));
        assert!(!stamps.is_satisfied(0));
        assert_eq!(stamps.attribute_value(0), None);
        assert_eq!(stamps.count(0), 1);
    }

    #[test]
    fn ids_beyond_the_bounds_are_never_satisfied() {
        let mut stamps = Stamps::default();
        stamps.begin(BOUNDS);
        stamps.mark_satisfied(BOUNDS.predicates);
        assert!(!stamps.is_satisfied(BOUNDS.predicates));
        assert_eq!(stamps.attribute_value(BOUNDS.attributes), None);
    }
}
