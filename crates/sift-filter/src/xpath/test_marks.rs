//! Which indexed tests one document satisfied, and on which elements.
//!
//! Every captured element gets an *instance* number. A test satisfied on
//! an element is marked with it, so that a conjunction of tests can be
//! required to hold on one same element: `/m/ATO[a = 1 and b = 2]` is
//! false for `<ATO><a>1</a></ATO><ATO><b>2</b></ATO>`, although both tests
//! hold. Most tests hold on at most one element per document; the first
//! element is kept in an array, and the rare further ones in a list that
//! is sorted once the pass is over.

use crate::xpath::value_index::TestId;

/// The instance number of a captured element, unique within a document.
pub(crate) type Instance = u32;

/// Per-document marks of the satisfied tests, reused from document to
/// document; ids index arrays that grow to fit the set.
///
/// Whether a test holds is one bit, so that the marks of tens of
/// thousands of tests stay in the fastest cache while trigger lists are
/// walked and formulas read them; the bits a document set are cleared
/// before the next one, at a cost that grows with what was satisfied.
#[derive(Debug, Default)]
pub(crate) struct TestMarks {
    satisfied: Vec<u64>,
    /// The tests that hold on more than one element.
    repeated: Vec<u64>,
    first_instance: Vec<Instance>,
    last_instance: Vec<Instance>,
    /// The further elements of repeated tests, as (test, instance).
    further: Vec<(TestId, Instance)>,
    /// The satisfied tests, each once, in the order first satisfied.
    pub(crate) list: Vec<TestId>,
}

/// Bits per word of the bit sets.
const WORD_BITS: usize = u64::BITS as usize;

/// Whether bit `index` is set.
fn bit(bits: &[u64], index: usize) -> bool {
    bits.get(index / WORD_BITS).is_some_and(|word| word & (1 << (index % WORD_BITS)) != 0)
}

fn set_bit(bits: &mut [u64], index: usize, value: bool) {
    if let Some(word) = bits.get_mut(index / WORD_BITS) {
        let mask = 1 << (index % WORD_BITS);
        *word = if value { *word | mask } else { *word & !mask };
    }
}

impl TestMarks {
    /// Readies the marks for a new document over `tests` test ids.
    pub(crate) fn begin(&mut self, tests: usize) {
        for &test in &self.list {
            set_bit(&mut self.satisfied, test, false);
            set_bit(&mut self.repeated, test, false);
        }
        let words = tests.div_ceil(WORD_BITS);
        for bits in [&mut self.satisfied, &mut self.repeated] {
            if bits.len() < words {
                bits.resize(words, 0);
            }
        }
        for instances in [&mut self.first_instance, &mut self.last_instance] {
            if instances.len() < tests {
                instances.resize(tests, 0);
            }
        }
        self.further.clear();
        self.list.clear();
    }

    /// Marks `test` as satisfied on the element `instance`.
    pub(crate) fn satisfy(&mut self, test: TestId, instance: Instance) {
        if !bit(&self.satisfied, test) {
            set_bit(&mut self.satisfied, test, true);
            self.first_instance[test] = instance;
            self.last_instance[test] = instance;
            self.list.push(test);
        } else if self.last_instance[test] != instance {
            // An element's tests are all marked at its end tag, one after
            // the other, so comparing with the last one keeps each
            // (test, element) once.
            set_bit(&mut self.repeated, test, true);
            self.last_instance[test] = instance;
            self.further.push((test, instance));
        }
    }

    /// Sorts the further elements for lookups; call once the pass is over.
    pub(crate) fn finish(&mut self) {
        if !self.further.is_empty() {
            self.further.sort_unstable();
        }
    }

    /// True when the test holds on some element of the document.
    pub(crate) fn holds(&self, test: TestId) -> bool {
        bit(&self.satisfied, test)
    }

    /// True when every test holds on one same element. Call after `finish`.
    /// No test at all names no element, so it is false.
    pub(crate) fn hold_together(&self, tests: impl Iterator<Item = TestId> + Clone) -> bool {
        let mut rest = tests.clone();
        let Some(first) = rest.next() else { return false };
        if !tests.clone().all(|test| self.holds(test)) {
            return false;
        }
        if !tests.clone().any(|test| bit(&self.repeated, test)) {
            let instance = self.first_instance[first];
            return rest.all(|test| self.first_instance[test] == instance);
        }
        self.instances(first).any(|instance| rest.clone().all(|test| self.holds_on(test, instance)))
    }

    /// The elements a satisfied test holds on.
    fn instances(&self, test: TestId) -> impl Iterator<Item = Instance> + '_ {
        std::iter::once(self.first_instance[test]).chain(self.further_of(test).iter().map(|&(_, instance)| instance))
    }

    fn further_of(&self, test: TestId) -> &[(TestId, Instance)] {
        if !bit(&self.repeated, test) {
            return &[];
        }
        let start = self.further.partition_point(|&(other, _)| other < test);
        let end = self.further.partition_point(|&(other, _)| other <= test);
        &self.further[start..end]
    }

    fn holds_on(&self, test: TestId, instance: Instance) -> bool {
        self.first_instance[test] == instance || self.further_of(test).binary_search(&(test, instance)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conjunctions_need_one_element() {
        let mut marks = TestMarks::default();
        marks.begin(4);
        // Two sibling elements: tests 0 and 1 on the first, 1 and 2 on the second.
        marks.satisfy(0, 1);
        marks.satisfy(1, 1);
        marks.satisfy(1, 1);
        marks.satisfy(1, 2);
        marks.satisfy(2, 2);
        marks.finish();
        assert_eq!(marks.list, [0, 1, 2]);
        assert!(marks.hold_together([0, 1].into_iter()));
        assert!(marks.hold_together([2, 1].into_iter()));
        assert!(!marks.hold_together([0, 2].into_iter()), "on different elements");
        assert!(!marks.hold_together([0, 3].into_iter()), "test 3 does not hold");
        assert!(marks.hold_together([1].into_iter()));
    }

    #[test]
    fn a_new_document_forgets_the_last() {
        let mut marks = TestMarks::default();
        marks.begin(2);
        marks.satisfy(0, 1);
        marks.satisfy(0, 2);
        marks.begin(2);
        assert!(!marks.holds(0));
        marks.satisfy(0, 2);
        marks.satisfy(1, 2);
        marks.finish();
        assert!(marks.hold_together([0, 1].into_iter()));
        assert_eq!(marks.list, [0, 1]);
    }
}
