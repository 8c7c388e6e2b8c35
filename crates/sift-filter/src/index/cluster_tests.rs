//! Tests of access-predicate clustering in the whole index: which equality
//! a conjunction is filed under, range predicates compared rather than
//! enumerated, removal, and clustered beside counted conjunctions.

use sift_core::{Message, Priority, TopicName, Value};

use super::conjunction::Filing;
use super::predicate::{Attribute, PredicateId, PredicateSource, ValueTest};
use super::*;
use crate::FilterLanguage;

fn filter(language: FilterLanguage, text: &str) -> ContentFilter {
    ContentFilter::parse(language, text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

fn sql(text: &str) -> ContentFilter {
    filter(FilterLanguage::Sql, text)
}

fn tags(text: &str) -> ContentFilter {
    filter(FilterLanguage::Tags, text)
}

fn message(properties: &[(&str, Value)]) -> Message {
    let mut message = Message::new(TopicName::new("quotes").expect("valid topic"), "");
    message.properties = properties.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
    message
}

fn quote(sym: &str, price: Value) -> Message {
    message(&[("sym", Value::Str(sym.into())), ("price", price)])
}

/// The matching keys, sorted, and how many predicates the message was
/// found to satisfy (the ones enumerated).
fn matching(
    index: &ContentIndex<&'static str>,
    message: &Message,
    scratch: &mut IndexScratch,
) -> (Vec<&'static str>, usize) {
    let mut out = Vec::new();
    index.matching(message, &[1], scratch, &mut out);
    out.sort_unstable();
    (out, scratch.satisfied.len())
}

/// The access predicate of the first conjunction of `key` in partition 1,
/// if it is clustered.
fn access_of(index: &ContentIndex<&'static str>, key: &'static str) -> Option<PredicateId> {
    let subscription = index.partitions.get(&1)?.keys.get(key)?;
    let conjunction = index.subscriptions.get(*subscription)?.conjunctions.first()?;
    match index.conjunctions.get(*conjunction)?.filing {
        Filing::Clustered { access, .. } => Some(access),
        _ => None,
    }
}

/// The id of the interned predicate `name = value`.
fn equality(index: &ContentIndex<&'static str>, name: &str, value: Value) -> Option<PredicateId> {
    let test = ValueTest::equal(&value)?;
    index.predicates.id_of(&PredicateSource::Value { attribute: Attribute::Property(name.into()), test })
}

#[test]
fn the_least_used_equality_is_the_access_predicate() {
    let mut index = ContentIndex::new();
    let text = |value: &str| Value::Str(value.into());
    // All three equalities are new, so all are used once: the first
    // interned (the lowest id) is chosen.
    index.insert(1, "first", &tags(r#"tag1="a",tag2="b",tag4=0"#));
    assert_eq!(access_of(&index, "first"), equality(&index, "tag1", text("a")));
    // `tag4=1` is new where the shared tags are used twice.
    index.insert(1, "second", &tags(r#"tag1="a",tag2="b",tag4=1"#));
    assert_eq!(access_of(&index, "second"), equality(&index, "tag4", Value::Int(1)));
    // Now `tag2="c"` is the new one, and `tag4=1` is used twice.
    index.insert(1, "third", &tags(r#"tag1="a",tag2="c",tag4=1"#));
    assert_eq!(access_of(&index, "third"), equality(&index, "tag2", text("c")));
    // Usage counts over all partitions: `tag4=2` is used by two
    // subscriptions elsewhere, `tag2="c"` by one.
    index.insert(2, "other", &tags("tag4=2"));
    index.insert(3, "other", &tags("tag4=2"));
    index.insert(1, "fourth", &tags(r#"tag2="c",tag4=2"#));
    assert_eq!(access_of(&index, "fourth"), equality(&index, "tag2", text("c")));
    // A conjunction without equality is not clustered.
    index.insert(1, "ranged", &tags("tag4>0"));
    assert_eq!(access_of(&index, "ranged"), None);
    // The single equalities of "other" and the single range of "ranged" are
    // output directly rather than clustered or counted.
    let stats = index.stats();
    assert_eq!((stats.clustered, stats.direct), (4, 3));
    let mut scratch = IndexScratch::new();
    let event = message(&[("tag1", text("a")), ("tag2", text("b")), ("tag4", Value::Int(1))]);
    assert_eq!(matching(&index, &event, &mut scratch).0, vec!["ranged", "second"]);
    let event = message(&[("tag1", text("a")), ("tag2", text("c")), ("tag4", Value::Int(2))]);
    assert_eq!(matching(&index, &event, &mut scratch).0, vec!["fourth", "ranged"]);
}

#[test]
fn ranges_of_clustered_conjunctions_are_compared_not_enumerated() {
    let mut index = ContentIndex::new();
    for (key, threshold) in [("above-0", 0), ("above-1", 1), ("above-2", 2), ("above-3", 3)] {
        index.insert(1, key, &sql(&format!("sym = 'IBM' AND price > {threshold}")));
    }
    index.insert(1, "between", &sql("sym = 'IBM' AND price BETWEEN 1.5 AND 2.5"));
    index.insert(1, "hp-cheap", &sql("sym = 'HP' AND price < 2"));
    index.insert(1, "name-after-m", &tags(r#"sym="IBM",name>"M""#));
    assert_eq!(index.stats().clustered, 7);
    let mut scratch = IndexScratch::new();
    // Only `sym = 'IBM'` is enumerated: the ranges are all clustered.
    assert_eq!(
        matching(&index, &quote("IBM", Value::Int(2)), &mut scratch),
        (vec!["above-0", "above-1", "between"], 1)
    );
    assert_eq!(
        matching(&index, &quote("IBM", Value::Float(2.5)), &mut scratch).0,
        vec!["above-0", "above-1", "above-2", "between"]
    );
    assert_eq!(matching(&index, &quote("HP", Value::Float(1.5)), &mut scratch).0, vec!["hp-cheap"]);
    for unordered in [Value::Float(f64::NAN), Value::Str("5".into()), Value::Bool(true)] {
        assert!(matching(&index, &quote("IBM", unordered), &mut scratch).0.is_empty());
    }
    assert!(matching(&index, &message(&[("sym", Value::Str("IBM".into()))]), &mut scratch).0.is_empty());
    // A filter sees the first of repeated properties, so do the checks.
    let repeated = message(&[
        ("price", Value::Int(1)),
        ("sym", Value::Str("IBM".into())),
        ("price", Value::Int(9)),
        ("name", Value::Str("Nemo".into())),
        ("name", Value::Str("Adam".into())),
    ]);
    assert_eq!(matching(&index, &repeated, &mut scratch).0, vec!["above-0", "name-after-m"]);
}

#[test]
fn header_equalities_and_ranges_are_clustered_alike() {
    let mut index = ContentIndex::new();
    index.insert(1, "urgent-ibm", &sql("sym = 'IBM' AND JMSPriority > 6"));
    index.insert(1, "persistent", &sql("JMSDeliveryMode = 'PERSISTENT' AND JMSPriority >= 4"));
    let mut scratch = IndexScratch::new();
    let mut urgent = quote("IBM", Value::Int(1));
    urgent.priority = Priority::new(7).expect("valid priority");
    assert_eq!(matching(&index, &urgent, &mut scratch).0, vec!["urgent-ibm"]);
    urgent.delivery_mode = sift_core::DeliveryMode::Persistent;
    assert_eq!(matching(&index, &urgent, &mut scratch).0, vec!["persistent", "urgent-ibm"]);
    urgent.priority = Priority::new(3).expect("valid priority");
    assert!(matching(&index, &urgent, &mut scratch).0.is_empty());
}

#[test]
fn removing_the_last_conjunctions_of_an_access_predicate() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    for (key, threshold) in [("a", 10), ("b", 20), ("c", 30), ("c-again", 30)] {
        index.insert(1, key, &sql(&format!("sym = 'IBM' AND price > {threshold}")));
    }
    assert_eq!((index.stats().sorted, index.check_lists.len()), (4, 0), "sorted members need no check list");
    assert!(index.remove(1, &"c-again"));
    let access = equality(&index, "sym", Value::Str("IBM".into())).expect("interned");
    // The others stay removable and matchable in their run.
    assert!(index.remove(1, &"a"));
    assert_eq!(index.partitions[&1].clusters.cluster(access).map_or(0, |cluster| cluster.len()), 2);
    assert_eq!(matching(&index, &quote("IBM", Value::Int(40)), &mut scratch).0, vec!["b", "c"]);
    assert!(index.remove(1, &"c"));
    assert!(index.remove(1, &"b"));
    assert_eq!(index.stats(), IndexStats::default(), "the cluster and its predicates are given back");
    assert_eq!(index.stats().sorted, 0);
    assert!(matching(&index, &quote("IBM", Value::Int(40)), &mut scratch).0.is_empty());
    // The freed ids are reused by a filter of another shape.
    index.insert(1, "d", &sql("price > 10"));
    assert_eq!(index.stats().clustered, 0);
    assert_eq!(matching(&index, &quote("IBM", Value::Int(40)), &mut scratch), (vec!["d"], 1));
}

#[test]
fn clustered_and_counted_conjunctions_share_a_partition() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    index.insert(1, "ibm-above-10", &sql("sym = 'IBM' AND price > 10"));
    index.insert(1, "above-10", &sql("price > 10"));
    index.insert(1, "band", &sql("price > 5 AND price < 50"));
    index.insert(1, "not-hp", &sql("sym <> 'HP'"));
    index.insert(1, "either", &sql("sym = 'HP' OR price >= 100"));
    index.insert(1, "regex", &filter(FilterLanguage::Regex, "^quo"));
    let stats = index.stats();
    // Sorted: "ibm-above-10"; direct: "above-10", both disjuncts of
    // "either" and "regex"; counted: "band".
    assert_eq!(
        (stats.conjunctions, stats.clustered, stats.sorted, stats.direct, stats.always_candidates),
        (7, 1, 1, 4, 1)
    );
    // `price > 10`, shared by a clustered and a counted conjunction, is
    // enumerated for the counted one: `sym = 'IBM'`, `price > 5`,
    // `price > 10`, `price < 50` and the regex.
    let (keys, satisfied) = matching(&index, &quote("IBM", Value::Int(20)), &mut scratch);
    assert_eq!(keys, vec!["above-10", "band", "ibm-above-10", "not-hp", "regex"]);
    assert_eq!(satisfied, 5);
    assert_eq!(matching(&index, &quote("HP", Value::Int(200)), &mut scratch).0, vec!["above-10", "either", "regex"]);
    // Once no counted conjunction needs `price > 10`, it is no longer
    // enumerated, and the clustered conjunction still compares it.
    assert!(index.remove(1, &"above-10"));
    let (keys, satisfied) = matching(&index, &quote("IBM", Value::Int(20)), &mut scratch);
    assert_eq!(keys, vec!["band", "ibm-above-10", "not-hp", "regex"]);
    assert_eq!(satisfied, 4);
    assert_eq!(matching(&index, &quote("IBM", Value::Int(8)), &mut scratch).0, vec!["band", "not-hp", "regex"]);
}

#[test]
fn repeated_and_present_predicates_in_a_cluster() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    index.insert(1, "twice", &sql("sym = 'IBM' AND sym = 'IBM'"));
    index.insert(1, "present", &sql("sym = 'IBM' AND price IS NOT NULL AND flag"));
    // "twice" is one predicate once repeats are dropped: output directly.
    assert_eq!((index.stats().clustered, index.stats().direct), (1, 1));
    assert_eq!(matching(&index, &quote("IBM", Value::Int(1)), &mut scratch).0, vec!["twice"]);
    let flagged = message(&[("sym", Value::Str("IBM".into())), ("flag", Value::Bool(true)), ("price", Value::Int(0))]);
    assert_eq!(matching(&index, &flagged, &mut scratch).0, vec!["present", "twice"]);
    let unpriced = message(&[("sym", Value::Str("IBM".into())), ("flag", Value::Bool(true))]);
    assert_eq!(matching(&index, &unpriced, &mut scratch).0, vec!["twice"]);
}

#[test]
fn checked_members_share_check_lists_and_survive_moves() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    // Two ranges besides the access predicate: checked one by one.
    for (key, low) in [("a", 10), ("b", 20), ("c", 30), ("c-again", 30)] {
        index.insert(1, key, &sql(&format!("sym = 'IBM' AND price > {low} AND price < 100")));
    }
    assert_eq!((index.stats().clustered, index.stats().sorted), (4, 0));
    assert_eq!(index.check_lists.len(), 3, "equal checks share a list");
    assert!(index.remove(1, &"c-again"));
    let access = equality(&index, "sym", Value::Str("IBM".into())).expect("interned");
    // Removing the first moves the last into its place, which must stay
    // removable and matchable there.
    assert!(index.remove(1, &"a"));
    assert_eq!(index.partitions[&1].clusters.checked(access).len(), 2);
    assert_eq!(matching(&index, &quote("IBM", Value::Int(40)), &mut scratch).0, vec!["b", "c"]);
    assert!(matching(&index, &quote("IBM", Value::Int(100)), &mut scratch).0.is_empty());
    assert!(index.remove(1, &"c"));
    assert!(index.remove(1, &"b"));
    assert_eq!(index.stats(), IndexStats::default());
    assert_eq!(index.check_lists.len(), 0, "the check lists are given back");
}
