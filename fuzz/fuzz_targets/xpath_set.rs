//! Feeds arbitrary bytes as a metadata document to the shared XPath
//! automaton and to the tree parser, as a publisher could: neither may
//! panic, both must agree on whether the document is well-formed, and for a
//! well-formed document the automaton must return exactly the filters that
//! match when each is evaluated alone on the tree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sift_filter::{XPathFilter, XPathScratch, XPathSet, XmlDocument};

/// Filters of the shapes the automaton handles itself and of those it
/// leaves to the tree.
const FILTERS: [&str; 10] = [
    "/a",
    "//b",
    "/a/b[c = 'x']",
    "/a/*[@id > 2]",
    "/a/b/c >= 3 and //d",
    "not(/a/b)",
    "/a/b[2]",
    "//c[contains(., 'y')]",
    "/a[b = /a/c]",
    "//*[starts-with(@n, 'k')] or /a/text() = 'z'",
];

fuzz_target!(|data: &[u8]| {
    let filters: Vec<XPathFilter> =
        FILTERS.iter().map(|text| XPathFilter::parse(text).expect("fixed filters parse")).collect();
    let mut set = XPathSet::new();
    for (key, filter) in filters.iter().enumerate() {
        set.insert(key, filter);
    }
    let mut scratch = XPathScratch::new();
    let mut matched = Vec::new();
    let streamed = set.matching(data, &mut scratch, &mut matched);
    let tree = XmlDocument::parse(data);
    assert_eq!(streamed.is_ok(), tree.is_ok(), "the stream and the tree agree on well-formedness");
    if let Ok(document) = tree {
        matched.sort_unstable();
        let expected: Vec<usize> =
            (0..filters.len()).filter(|key| filters[*key].matches_document(&document)).collect();
        assert_eq!(matched, expected);
    }
});
