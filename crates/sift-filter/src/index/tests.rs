//! Tests of the whole index: filing, matching, removal.

use sift_core::{Message, Priority, TopicName, Value};

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

fn message(topic: &str, properties: &[(&str, Value)]) -> Message {
    let mut message = Message::new(TopicName::new(topic).expect("valid topic"), "");
    message.properties = properties.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
    message
}

/// The matching keys, sorted.
fn matching(index: &ContentIndex<&'static str>, message: &Message, partitions: &[u32]) -> Vec<&'static str> {
    let mut out = Vec::new();
    index.matching(message, partitions, &mut IndexScratch::new(), &mut out);
    out.sort_unstable();
    out
}

fn quote(sym: &str, price: i64) -> Message {
    message("quotes", &[("sym", Value::Str(sym.into())), ("price", Value::Int(price))])
}

#[test]
fn finds_the_subscriptions_whose_filters_pass() {
    let mut index = ContentIndex::new();
    index.insert(1, "ibm", &tags("sym=IBM"));
    index.insert(1, "cheap", &sql("price < 100"));
    index.insert(1, "ibm-dear", &sql("sym = 'IBM' AND price >= 100"));
    index.insert(1, "not-hp", &sql("sym <> 'HP'"));
    index.insert(1, "quotes", &filter(FilterLanguage::Regex, "^quo"));
    assert_eq!(index.len(), 5);
    assert_eq!(matching(&index, &quote("IBM", 120), &[1]), vec!["ibm", "ibm-dear", "not-hp", "quotes"]);
    assert_eq!(matching(&index, &quote("HP", 50), &[1]), vec!["cheap", "quotes"]);
    assert!(matching(&index, &message("other", &[]), &[1]).is_empty());
}

#[test]
fn only_the_partitions_asked_for_are_searched() {
    let mut index = ContentIndex::new();
    index.insert(1, "one", &tags("sym=IBM"));
    index.insert(2, "two", &tags("sym=IBM"));
    index.insert(3, "three", &tags("sym=IBM"));
    assert_eq!(matching(&index, &quote("IBM", 1), &[2]), vec!["two"]);
    assert_eq!(matching(&index, &quote("IBM", 1), &[3, 1, 3, 1, 9]), vec!["one", "three"]);
    assert!(matching(&index, &quote("IBM", 1), &[]).is_empty());
    assert_eq!(index.stats().predicates, 1, "one predicate shared by three partitions");
}

#[test]
fn a_key_is_output_once_however_many_disjuncts_pass() {
    let mut index = ContentIndex::new();
    index.insert(1, "either", &sql("sym = 'IBM' OR price > 10 OR sym IN ('IBM', 'HP')"));
    assert_eq!(matching(&index, &quote("IBM", 20), &[1]), vec!["either"]);
    index.insert(1, "same", &sql("sym = 'IBM'"));
    index.insert(2, "same", &sql("sym = 'IBM'"));
    let mut out = Vec::new();
    index.matching(&quote("IBM", 20), &[1, 2], &mut IndexScratch::new(), &mut out);
    assert_eq!(out.iter().filter(|key| **key == "same").count(), 2, "one per partition");
}

#[test]
fn insert_replaces_and_remove_forgets() {
    let mut index = ContentIndex::new();
    index.insert(1, "sub", &tags("sym=IBM"));
    index.insert(1, "sub", &tags("sym=HP"));
    assert_eq!(index.len(), 1);
    assert!(matching(&index, &quote("IBM", 1), &[1]).is_empty());
    assert_eq!(matching(&index, &quote("HP", 1), &[1]), vec!["sub"]);
    assert!(!index.remove(2, &"sub"));
    assert!(index.remove(1, &"sub"));
    assert!(!index.remove(1, &"sub"));
    assert!(index.is_empty());
    assert_eq!(index.stats(), IndexStats::default(), "everything is given back");
}

#[test]
fn indexable_filters_are_not_candidates_for_every_message() {
    let mut index = ContentIndex::new();
    index.insert(1, "a", &sql("sym IN ('IBM', 'HP') AND price BETWEEN 1 AND 5"));
    index.insert(1, "b", &sql("flag AND region IS NOT NULL"));
    index.insert(1, "c", &tags(r#"price>=3,sym>"A""#));
    index.insert(1, "d", &sql("JMSPriority > 4 AND NOT (x IS NULL)"));
    index.insert(1, "e", &filter(FilterLanguage::Regex, "x"));
    assert_eq!(index.stats().always_candidates, 0);
    index.insert(1, "f", &sql("sym <> 'IBM'"));
    assert_eq!(index.stats().always_candidates, 1);
}

#[test]
fn sql_three_valued_logic_is_kept() {
    let mut index = ContentIndex::new();
    index.insert(1, "not-equal", &sql("NOT (price = 5)"));
    index.insert(1, "null", &sql("price IS NULL"));
    index.insert(1, "string-order", &sql("sym > 'A'"));
    index.insert(1, "nan-not-less", &sql("NOT (price < 1)"));
    let missing = message("t", &[("sym", Value::Str("IBM".into()))]);
    assert_eq!(matching(&index, &missing, &[1]), vec!["null"]);
    let text_price = message("t", &[("price", Value::Str("5".into()))]);
    assert!(matching(&index, &text_price, &[1]).is_empty(), "string against number is UNKNOWN");
    let nan = message("t", &[("price", Value::Float(f64::NAN))]);
    assert_eq!(matching(&index, &nan, &[1]), vec!["nan-not-less", "not-equal"]);
}

#[test]
fn numbers_compare_across_integer_and_float() {
    let mut index = ContentIndex::new();
    index.insert(1, "one", &sql("x = 1"));
    index.insert(1, "above", &tags("x>0.5"));
    index.insert(1, "big", &sql("x = 9007199254740993"));
    assert_eq!(matching(&index, &message("t", &[("x", Value::Float(1.0))]), &[1]), vec!["above", "one"]);
    let rounded = message("t", &[("x", Value::Float(9_007_199_254_740_992.0))]);
    assert_eq!(matching(&index, &rounded, &[1]), vec!["above"]);
}

#[test]
fn the_first_of_repeated_properties_counts() {
    let mut index = ContentIndex::new();
    index.insert(1, "first", &tags("x=1"));
    index.insert(1, "second", &tags("x=2"));
    let repeated = message("t", &[("x", Value::Int(1)), ("x", Value::Int(2))]);
    assert_eq!(matching(&index, &repeated, &[1]), vec!["first"]);
}

#[test]
fn headers_are_indexed_apart_from_properties() {
    let mut index = ContentIndex::new();
    index.insert(1, "urgent", &sql("JMSPriority >= 7"));
    index.insert(1, "property", &tags("JMSPriority>=7"));
    let mut urgent = message("t", &[]);
    urgent.priority = Priority::new(8).expect("valid priority");
    assert_eq!(matching(&index, &urgent, &[1]), vec!["urgent"]);
    let named = message("t", &[("JMSPriority", Value::Int(9))]);
    assert_eq!(matching(&index, &named, &[1]), vec!["property"]);
}

#[test]
fn regexes_match_before_and_after_refresh() {
    let mut index = ContentIndex::new();
    for number in 0..(REGEX_SHARD_PATTERNS_MAX + 3) {
        let key: &'static str = Box::leak(format!("r{number}").into_boxed_str());
        index.insert(1, key, &filter(FilterLanguage::Regex, &format!(r"^t\.{number}$")));
    }
    assert_eq!(index.stats().regex_pending, 3);
    let mut scratch = IndexScratch::new();
    let mut out = Vec::new();
    index.matching(&message("t.65", &[]), &[1], &mut scratch, &mut out);
    assert_eq!(out, vec!["r65"]);
    index.refresh();
    assert_eq!(index.stats().regex_pending, 0);
    out.clear();
    index.matching(&message("t.65", &[]), &[1], &mut scratch, &mut out);
    assert_eq!(out, vec!["r65"]);
    index.remove(1, &"r65");
    out.clear();
    index.matching(&message("t.65", &[]), &[1], &mut scratch, &mut out);
    assert!(out.is_empty(), "the cached result for the topic is stale after a removal");
}

#[test]
fn oversized_selectors_are_evaluated_whole() {
    // Seven three-way ORs under an AND make 3^7 disjuncts, too many.
    let selector =
        (0..7).map(|number| format!("(a = {number} OR b = {number} OR c)")).collect::<Vec<_>>().join(" AND ");
    let mut index = ContentIndex::new();
    index.insert(1, "big", &sql(&selector));
    assert_eq!(index.stats().always_candidates, 1);
    let failing = message("t", &[("a", Value::Int(1)), ("b", Value::Int(0)), ("c", Value::Bool(false))]);
    assert!(matching(&index, &failing, &[1]).is_empty());
    let passing = message("t", &[("c", Value::Bool(true))]);
    assert_eq!(matching(&index, &passing, &[1]), vec!["big"]);
}

#[test]
fn scratch_buffers_stop_growing_once_warm() {
    let mut index = ContentIndex::new();
    for number in 0..100_i64 {
        index.insert(1, number, &sql(&format!("price > {number} AND sym = 'IBM'")));
    }
    let mut scratch = IndexScratch::new();
    let mut out = Vec::with_capacity(100);
    // The dearest quote satisfies the most predicates: the buffers' high water.
    index.matching(&quote("IBM", 100), &[1], &mut scratch, &mut out);
    assert_eq!(out.len(), 100);
    let warm = (scratch.satisfied.capacity(), scratch.candidates.capacity(), scratch.partitions.capacity());
    for price in [10, 99, 0, 50] {
        out.clear();
        index.matching(&quote("IBM", price), &[1], &mut scratch, &mut out);
        assert_eq!(out.len(), usize::try_from(price).expect("small"));
        let now = (scratch.satisfied.capacity(), scratch.candidates.capacity(), scratch.partitions.capacity());
        assert_eq!(now, warm);
    }
}

#[test]
fn cached_regex_results_do_not_outlive_their_predicate() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    let mut out = Vec::new();
    index.insert(1, "regex", &filter(FilterLanguage::Regex, "^t"));
    index.insert(1, "other", &filter(FilterLanguage::Regex, "^u"));
    index.matching(&message("t", &[]), &[1], &mut scratch, &mut out);
    assert_eq!(out, vec!["regex"]);
    // The freed predicate id is reused by a value predicate, which the stale
    // cache entry for topic `t` would claim is satisfied.
    index.remove(1, &"regex");
    index.insert(1, "value", &tags("x=1"));
    out.clear();
    index.matching(&message("t", &[]), &[1], &mut scratch, &mut out);
    assert!(out.is_empty(), "{out:?}");
}
