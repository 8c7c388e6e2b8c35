//! Value indexes per attribute: for one property or header value of a
//! message, the value predicates it satisfies, found by hash lookup (`=`) and
//! binary search (`<`, `<=`, `>`, `>=`), at a cost that grows with the number
//! satisfied rather than the number filed.
//!
//! A range predicate sits in its attribute's ordered maps only while some
//! counted conjunction needs it: clustered conjunctions compare the value
//! with their bounds themselves (`check.rs`), so a range predicate only they
//! use is never enumerated, and an attribute with no counted range predicate
//! skips the range search altogether. Looking an attribute up also records
//! its value in the scratch, for those comparisons.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use sift_core::Message;

use crate::compare::Scalar;
use crate::index::attribute_value::AttributeValue;
use crate::index::number::NumberKey;
use crate::index::predicate::{Attribute, Bound, Constant, PredicateId, ValueTest};
use crate::index::range::RangeIndex;
use crate::index::scratch::Stamps;
use crate::index::slab::Slab;
use crate::sql::HeaderField;

/// The value predicates on one attribute. Each distinct test is one interned
/// predicate, so every map holds one id per key.
#[derive(Debug, Clone, Default)]
struct AttributeIndex {
    present: Option<PredicateId>,
    /// Indexed by the boolean as a number: `false` at 0, `true` at 1.
    booleans: [Option<PredicateId>; 2],
    numbers: FxHashMap<NumberKey, PredicateId>,
    texts: HashMap<Box<str>, PredicateId>,
    /// The range predicates some counted conjunction needs.
    number_ranges: RangeIndex<NumberKey>,
    text_ranges: RangeIndex<Box<str>>,
    /// How many range predicates the ordered maps hold: when none, the
    /// range search is skipped.
    counted_ranges: usize,
    /// How many predicates on the attribute are interned, range predicates
    /// outside the maps included, so that an unused index can be dropped.
    filed: usize,
}

impl AttributeIndex {
    /// Files predicate `id`; a range predicate goes into the ordered maps
    /// only once [`AttributeIndex::count_range`] says a counted conjunction
    /// needs it.
    fn insert(&mut self, test: &ValueTest, id: PredicateId) {
        match test.clone() {
            ValueTest::Present => self.present = Some(id),
            ValueTest::Equal(Constant::Bool(flag)) => self.booleans[usize::from(flag)] = Some(id),
            ValueTest::Equal(Constant::Number(number)) => _ = self.numbers.insert(number, id),
            ValueTest::Equal(Constant::Text(text)) => _ = self.texts.insert(text, id),
            ValueTest::Range(..) => {}
        }
        self.filed += 1;
    }

    fn remove(&mut self, test: &ValueTest) {
        match test {
            ValueTest::Present => self.present = None,
            ValueTest::Equal(Constant::Bool(flag)) => self.booleans[usize::from(*flag)] = None,
            ValueTest::Equal(Constant::Number(number)) => _ = self.numbers.remove(number),
            ValueTest::Equal(Constant::Text(text)) => _ = self.texts.remove(text),
            ValueTest::Range(..) => {}
        }
        self.filed -= 1;
    }

    /// Puts range predicate `id` into the ordered maps; other tests are
    /// always filed.
    fn count_range(&mut self, test: &ValueTest, id: PredicateId) {
        match test.clone() {
            ValueTest::Range(op, Bound::Number(number)) => self.number_ranges.insert(op, number, id),
            ValueTest::Range(op, Bound::Text(text)) => self.text_ranges.insert(op, text, id),
            ValueTest::Present | ValueTest::Equal(_) => return,
        }
        self.counted_ranges += 1;
    }

    /// Takes range predicate `test` out of the ordered maps.
    fn uncount_range(&mut self, test: &ValueTest) {
        match test {
            ValueTest::Range(op, Bound::Number(number)) => self.number_ranges.remove(*op, number),
            ValueTest::Range(op, Bound::Text(text)) => self.text_ranges.remove(*op, &**text),
            ValueTest::Present | ValueTest::Equal(_) => return,
        }
        self.counted_ranges -= 1;
    }

    /// Appends the predicates that the attribute's value satisfies, range
    /// predicates only if some are counted.
    fn collect(&self, value: &Scalar<'_>, satisfied: &mut Vec<PredicateId>) {
        satisfied.extend(self.present);
        let ranges = self.counted_ranges > 0;
        match value {
            Scalar::Bool(flag) => satisfied.extend(self.booleans[usize::from(*flag)]),
            Scalar::Int(_) | Scalar::Float(_) => {
                // NaN has no key: it equals nothing and orders with nothing.
                if let Some(number) = NumberKey::from_scalar(value) {
                    satisfied.extend(self.numbers.get(&number).copied());
                    if ranges {
                        self.number_ranges.collect(&number, satisfied);
                    }
                }
            }
            Scalar::Str(text) => {
                satisfied.extend(self.texts.get(&**text).copied());
                if ranges {
                    self.text_ranges.collect(&**text, satisfied);
                }
            }
        }
    }
}

/// The value indexes of every attribute some predicate tests, with the
/// lookups from a property name or header field to its index.
#[derive(Debug, Clone, Default)]
pub(crate) struct AttributeTable {
    by_property: HashMap<Box<str>, usize>,
    /// Indexed by the field's position in [`HeaderField::ALL`].
    by_header: [Option<usize>; HeaderField::ALL.len()],
    indexes: Slab<AttributeIndex>,
}

/// The field's place in the per-header array.
fn header_slot(field: HeaderField) -> usize {
    match field {
        HeaderField::Priority => 0,
        HeaderField::Timestamp => 1,
        HeaderField::MessageId => 2,
        HeaderField::DeliveryMode => 3,
        HeaderField::Expiration => 4,
    }
}

impl AttributeTable {
    /// One more than the largest attribute id: the size of the per-message
    /// "already seen" stamps.
    pub(crate) fn id_bound(&self) -> usize {
        self.indexes.id_bound()
    }

    /// Files predicate `id`, which is `test` on `attribute`; returns the
    /// attribute's id, which stays valid while the predicate is filed.
    pub(crate) fn insert(&mut self, attribute: &Attribute, test: &ValueTest, id: PredicateId) -> usize {
        let slot = match attribute {
            Attribute::Property(name) => match self.by_property.get(name) {
                Some(slot) => *slot,
                None => {
                    let slot = self.indexes.insert(AttributeIndex::default());
                    self.by_property.insert(name.clone(), slot);
                    slot
                }
            },
            Attribute::Header(field) => *self.by_header[header_slot(*field)]
                .get_or_insert_with(|| self.indexes.insert(AttributeIndex::default())),
        };
        if let Some(index) = self.indexes.get_mut(slot) {
            index.insert(test, id);
        }
        slot
    }

    /// Makes range predicate `id` (`test` on attribute `slot`) found by the
    /// range search, because a counted conjunction now needs it.
    pub(crate) fn count_range(&mut self, slot: usize, test: &ValueTest, id: PredicateId) {
        if let Some(index) = self.indexes.get_mut(slot) {
            index.count_range(test, id);
        }
    }

    /// Leaves range predicate `test` on attribute `slot` out of the range
    /// search, because no counted conjunction needs it any more.
    pub(crate) fn uncount_range(&mut self, slot: usize, test: &ValueTest) {
        if let Some(index) = self.indexes.get_mut(slot) {
            index.uncount_range(test);
        }
    }

    /// Unfiles the predicate that is `test` on `attribute`, dropping the
    /// attribute's index once it is empty.
    pub(crate) fn remove(&mut self, attribute: &Attribute, test: &ValueTest) {
        let slot = match attribute {
            Attribute::Property(name) => self.by_property.get(name).copied(),
            Attribute::Header(field) => self.by_header[header_slot(*field)],
        };
        let Some(slot) = slot else { return };
        let Some(index) = self.indexes.get_mut(slot) else { return };
        index.remove(test);
        if index.filed == 0 {
            self.indexes.remove(slot);
            match attribute {
                Attribute::Property(name) => _ = self.by_property.remove(name),
                Attribute::Header(field) => self.by_header[header_slot(*field)] = None,
            }
        }
    }

    /// Appends the value predicates the message satisfies, each once, and
    /// records the value of each attribute the message has.
    pub(crate) fn collect(&self, message: &Message, stamps: &mut Stamps, satisfied: &mut Vec<PredicateId>) {
        if !self.by_property.is_empty() {
            for (position, (name, value)) in message.properties.iter().enumerate() {
                let Some(&slot) = self.by_property.get(name.as_str()) else { continue };
                let scalar = Scalar::from_value(value);
                // A filter sees the first property of a repeated name (as
                // `Message::property` does), so later ones are skipped.
                if !stamps.mark_attribute(slot, AttributeValue::of_property(position, &scalar)) {
                    continue;
                }
                if let Some(index) = self.indexes.get(slot) {
                    index.collect(&scalar, satisfied);
                }
            }
        }
        for field in HeaderField::ALL {
            let Some(slot) = self.by_header[header_slot(field)] else { continue };
            let Some(index) = self.indexes.get(slot) else { continue };
            let scalar = field.scalar(message);
            stamps.mark_attribute(slot, AttributeValue::of_header(field, &scalar));
            index.collect(&scalar, satisfied);
        }
    }
}
