//! Tests of XPath filters in the index: shared predicates, one pass over
//! the metadata per message, and no pass for partitions without XPath.

use sift_core::{Message, TopicName};

use super::*;
use crate::FilterLanguage;

fn xpath(text: &str) -> ContentFilter {
    ContentFilter::parse(FilterLanguage::Xpath, text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

fn sql(text: &str) -> ContentFilter {
    ContentFilter::parse(FilterLanguage::Sql, text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

/// A message on topic `t` with the metadata given, if any.
fn message(metadata: Option<&str>) -> Message {
    let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
    message.metadata = metadata.map(|text| text.as_bytes().to_vec().into());
    message
}

/// The matching keys, sorted.
fn matching(
    index: &ContentIndex<&'static str>,
    message: &Message,
    partitions: &[u32],
    scratch: &mut IndexScratch,
) -> Vec<&'static str> {
    let mut out = Vec::new();
    index.matching(message, partitions, scratch, &mut out);
    out.sort_unstable();
    out
}

const ATO: &str = "<metadata><ATO><nickname>KTJR</nickname><serialno>targ1234</serialno></ATO></metadata>";

#[test]
fn identical_filters_share_one_predicate() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    index.insert(1, "first", &xpath("/metadata/ATO[nickname = 'KTJR']"));
    // The same filter, spaced differently and in another partition.
    index.insert(2, "second", &xpath("/metadata/ATO[ nickname='KTJR' ]"));
    assert_eq!(index.stats().predicates, 1);
    assert_eq!(matching(&index, &message(Some(ATO)), &[1, 2], &mut scratch), vec!["first", "second"]);
    assert!(index.remove(1, &"first"));
    assert_eq!(index.stats().predicates, 1, "the other subscription still holds it");
    assert_eq!(matching(&index, &message(Some(ATO)), &[1, 2], &mut scratch), vec!["second"]);
    assert!(matching(&index, &message(Some("<metadata/>")), &[2], &mut scratch).is_empty());
    assert!(index.remove(2, &"second"));
    assert_eq!(index.stats(), IndexStats::default(), "everything is given back");
}

#[test]
fn one_pass_serves_every_xpath_filter_of_a_message() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    index.insert(1, "ato", &xpath("/metadata/ATO/serialno = 'targ1234'"));
    index.insert(1, "no-orig", &xpath("not(//Orig)"));
    index.insert(2, "orig", &xpath("//Orig"));
    index.insert(2, "both", &sql("x = 1"));
    assert_eq!(index.stats().always_candidates, 0, "no XPath filter is evaluated for every message");
    assert_eq!(matching(&index, &message(Some(ATO)), &[1, 2], &mut scratch), vec!["ato", "no-orig"]);
    assert_eq!(scratch.xpath_passes(), 1);
    let orig = message(Some("<metadata><Orig/></metadata>"));
    assert_eq!(matching(&index, &orig, &[2, 1], &mut scratch), vec!["orig"]);
    assert_eq!(scratch.xpath_passes(), 2);
}

#[test]
fn absent_or_malformed_metadata_passes_no_xpath_filter() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    index.insert(1, "absent", &xpath("not(/a)"));
    index.insert(1, "sql", &sql("x IS NULL"));
    assert_eq!(matching(&index, &message(None), &[1], &mut scratch), vec!["sql"]);
    assert_eq!(scratch.xpath_passes(), 0, "no document, nothing to parse");
    assert_eq!(matching(&index, &message(Some("<b>")), &[1], &mut scratch), vec!["sql"]);
    assert_eq!(matching(&index, &message(Some("<b/>")), &[1], &mut scratch), vec!["absent", "sql"]);
    assert_eq!(scratch.xpath_passes(), 2);
}

#[test]
fn partitions_without_xpath_do_not_parse_the_metadata() {
    let mut index = ContentIndex::new();
    let mut scratch = IndexScratch::new();
    index.insert(1, "xpath", &xpath("/a"));
    index.insert(2, "sql", &sql("x IS NULL"));
    index.insert(3, "regex", &ContentFilter::parse(FilterLanguage::Regex, "^t$").expect("compiles"));
    let document = message(Some("<a/>"));
    assert_eq!(matching(&index, &document, &[2, 3, 9], &mut scratch), vec!["regex", "sql"]);
    assert_eq!(scratch.xpath_passes(), 0);
    assert_eq!(matching(&index, &document, &[1, 2], &mut scratch), vec!["sql", "xpath"]);
    assert_eq!(scratch.xpath_passes(), 1);
    // Once the partition's last XPath subscription goes, so does the pass.
    index.insert(1, "xpath", &sql("x IS NULL"));
    assert_eq!(matching(&index, &document, &[1, 2], &mut scratch), vec!["sql", "xpath"]);
    assert_eq!(scratch.xpath_passes(), 1);
}
