//! The tests a clustered conjunction makes of its predicates other than its
//! access predicate, once a message has satisfied the access predicate.
//!
//! A clustered conjunction is not counted (see `cluster.rs`), so it tests
//! its other predicates itself, each in constant time: a predicate that a
//! source finds for the whole message (an equality, presence, a topic regex
//! or an XPath filter) by the stamp matching left when it found the
//! predicate satisfied; a range predicate by comparing the attribute's
//! recorded value with its bound. Range predicates are compared rather than
//! looked up so that those only clustered conjunctions use need not be
//! enumerated for every message: with `sym = 'S0042' AND price > N`, the
//! hundreds of `price > N` a quote satisfies are never listed.

use sift_core::Message;

use crate::index::predicate::{Bound, PredicateId, RangeOp};
use crate::index::scratch::Stamps;

/// One predicate of a clustered conjunction, as the conjunction tests it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Check {
    /// Holds when the predicate was found satisfied for the message.
    Satisfied(PredicateId),
    /// Holds when the attribute's value orders against the bound as the
    /// operator says.
    Range {
        /// The interned predicate, for releasing it.
        predicate: PredicateId,
        /// The attribute id whose recorded value is compared.
        attribute: usize,
        /// The operator.
        op: RangeOp,
        /// The constant side.
        bound: Bound,
    },
}

impl Check {
    /// The predicate tested.
    pub(crate) fn predicate(&self) -> PredicateId {
        match self {
            Check::Satisfied(predicate) | Check::Range { predicate, .. } => *predicate,
        }
    }

    /// True when the predicate holds for `message`, given the stamps that
    /// collecting its satisfied predicates left.
    pub(crate) fn holds(&self, stamps: &Stamps, message: &Message) -> bool {
        match self {
            Check::Satisfied(predicate) => stamps.is_satisfied(*predicate),
            Check::Range { attribute, op, bound, .. } => {
                stamps.attribute_value(*attribute).is_some_and(|value| value.satisfies(*op, bound, message))
            }
        }
    }

    /// Sorts stamp tests, the cheapest, first, so that a failing one spares
    /// the comparisons.
    pub(crate) fn order(checks: &mut [Check]) {
        checks.sort_by_key(|check| matches!(check, Check::Range { .. }));
    }
}

#[cfg(test)]
mod tests {
    use sift_core::{TopicName, Value};

    use super::*;
    use crate::compare::Scalar;
    use crate::index::attribute_value::AttributeValue;
    use crate::index::number::NumberKey;
    use crate::index::scratch::IdBounds;

    #[test]
    fn checks_read_the_stamps_and_the_recorded_values() {
        let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
        message.properties = vec![("price".to_string(), Value::Int(5))];
        let mut stamps = Stamps::default();
        stamps.begin(IdBounds { conjunctions: 0, subscriptions: 0, attributes: 2, predicates: 3 });
        stamps.mark_satisfied(1);
        stamps.mark_attribute(0, AttributeValue::of_property(0, &Scalar::Int(5)));
        let above = |bound: i64, attribute: usize| Check::Range {
            predicate: 2,
            attribute,
            op: RangeOp::Greater,
            bound: Bound::Number(NumberKey::from_int(bound)),
        };
        assert!(Check::Satisfied(1).holds(&stamps, &message));
        assert!(!Check::Satisfied(0).holds(&stamps, &message));
        assert!(above(4, 0).holds(&stamps, &message));
        assert!(!above(5, 0).holds(&stamps, &message));
        assert!(!above(4, 1).holds(&stamps, &message), "an attribute the message lacks orders with nothing");
        let mut checks = vec![above(4, 0), Check::Satisfied(1)];
        Check::order(&mut checks);
        assert_eq!(checks.iter().map(Check::predicate).collect::<Vec<_>>(), vec![1, 2]);
    }
}
