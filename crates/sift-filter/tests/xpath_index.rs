//! The shared XPath automaton against the tree evaluator: for random small
//! documents and random filters over the same small vocabulary,
//! `XPathSet::matching` returns exactly the filters that
//! `XPathFilter::matches_document` accepts one by one, also after removals
//! and with one scratch reused across documents.
//!
//! A second generator makes the JBI shape that the value index is built
//! for: many filters on the same few paths that differ in their constants
//! and thresholds, against documents with repeated elements (so that paths
//! select several nodes, and a conjunction may hold across two siblings but
//! not within one), numbers written as strings, and text that is not a
//! number.

use proptest::prelude::*;
use sift_filter::{XPathFilter, XPathScratch, XPathSet, XmlDocument};

/// A generated document node.
#[derive(Debug, Clone)]
enum Node {
    Element { name: &'static str, attributes: Vec<(&'static str, &'static str)>, children: Vec<Node> },
    Text(&'static str),
}

impl Node {
    fn write(&self, out: &mut String) {
        match self {
            Node::Text(text) => out.push_str(text),
            Node::Element { name, attributes, children } => {
                out.push('<');
                out.push_str(name);
                for (attribute, value) in attributes {
                    out.push_str(&format!(" {attribute}=\"{value}\""));
                }
                out.push('>');
                children.iter().for_each(|child| child.write(out));
                out.push_str(&format!("</{name}>"));
            }
        }
    }
}

const NAMES: [&str; 3] = ["a", "b", "c"];
const VALUES: [&str; 6] = ["1", "2", "10", "x", " 3 ", "1.5"];

fn attributes() -> impl Strategy<Value = Vec<(&'static str, &'static str)>> {
    (prop::option::of(prop::sample::select(&VALUES[..])), prop::option::of(prop::sample::select(&VALUES[..])))
        .prop_map(|(x, y)| x.map(|value| ("x", value)).into_iter().chain(y.map(|value| ("y", value))).collect())
}

fn element(children: impl Strategy<Value = Vec<Node>>) -> impl Strategy<Value = Node> {
    (prop::sample::select(&NAMES[..]), attributes(), children).prop_map(|(name, attributes, children)| Node::Element {
        name,
        attributes,
        children,
    })
}

fn document() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![prop::sample::select(&VALUES[..]).prop_map(Node::Text), element(Just(Vec::new())),];
    let node = leaf.prop_recursive(4, 32, 3, |inner| element(prop::collection::vec(inner, 0..4)));
    element(prop::collection::vec(node, 0..4)).prop_map(|root| {
        let mut text = String::new();
        root.write(&mut text);
        text
    })
}

fn literal() -> impl Strategy<Value = String> {
    prop::sample::select(&["'1'", "'2'", "'10'", "'x'", "' 3 '", "1", "2", "3", "1.5", "-1", "true()", "false()"][..])
        .prop_map(str::to_string)
}

fn operator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["=", "!=", "<", "<=", ">", ">="][..])
}

fn name_test() -> impl Strategy<Value = String> {
    prop::sample::select(&["a", "b", "c", "*"][..]).prop_map(str::to_string)
}

/// An element step with, when `depth` allows, an optional predicate.
fn element_step(depth: u32) -> BoxedStrategy<String> {
    if depth == 0 {
        return name_test().boxed();
    }
    let predicate = prop_oneof![
        1 => prop::sample::select(&["1", "2"][..]).prop_map(str::to_string),
        2 => predicate(depth - 1),
    ];
    (name_test(), prop::option::weighted(0.3, predicate))
        .prop_map(|(name, predicate)| match predicate {
            Some(predicate) => format!("{name}[{predicate}]"),
            None => name,
        })
        .boxed()
}

/// The last step of a path: an element, an attribute, text or a node.
fn final_step(depth: u32) -> BoxedStrategy<String> {
    prop_oneof![
        4 => element_step(depth),
        1 => prop::sample::select(&["@x", "@y", "@*", "text()", "node()"][..]).prop_map(str::to_string),
    ]
    .boxed()
}

/// Predicates over the context node; their paths nest predicates up to `depth`.
fn predicate(depth: u32) -> BoxedStrategy<String> {
    let relative = relative_path(depth);
    let leaf = prop_oneof![
        3 => relative.clone(),
        3 => (relative, operator(), literal()).prop_map(|(path, op, value)| format!("{path} {op} {value}")),
        2 => (operator(), literal()).prop_map(|(op, value)| format!(". {op} {value}")),
        1 => prop::sample::select(&["1", "2", "-(-1)"][..]).prop_map(str::to_string),
        2 => prop::sample::select(&["@x", "@y = 1", "contains(., 'x')", "starts-with(@x, '1')"][..])
            .prop_map(str::to_string),
        1 => prop::sample::select(&["/a/b", "//b = 2", "//*[@x = 1]", "/*//c"][..]).prop_map(str::to_string),
    ];
    leaf.prop_recursive(1, 3, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("{left} and {right}")),
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("({left} or {right})")),
            inner.prop_map(|operand| format!("not({operand})")),
        ]
    })
    .boxed()
}

/// Steps separated by `/` or `//`, the last one possibly not an element.
fn steps(depth: u32) -> BoxedStrategy<String> {
    (prop::collection::vec((prop::bool::ANY, element_step(depth)), 0..3), final_step(depth))
        .prop_map(|(leading, last)| {
            let mut text = String::new();
            for (descendant, step) in leading {
                text.push_str(&step);
                text.push_str(if descendant { "//" } else { "/" });
            }
            text.push_str(&last);
            text
        })
        .boxed()
}

fn relative_path(depth: u32) -> BoxedStrategy<String> {
    (prop::bool::weighted(0.2), steps(depth))
        .prop_map(|(from_self, steps)| if from_self { format!(".//{steps}") } else { steps })
        .boxed()
}

fn absolute_path() -> impl Strategy<Value = String> {
    let steps = prop_oneof![3 => steps(1), 1 => steps(2)];
    (prop::bool::ANY, steps).prop_map(|(descendant, steps)| format!("{}{steps}", if descendant { "//" } else { "/" }))
}

/// Whole filters: paths, comparisons, functions, and their combinations.
fn filter() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => absolute_path(),
        3 => (absolute_path(), operator(), literal()).prop_map(|(path, op, value)| format!("{path} {op} {value}")),
        1 => (literal(), operator(), absolute_path()).prop_map(|(value, op, path)| format!("{value} {op} {path}")),
        1 => (absolute_path(), operator(), absolute_path()).prop_map(|(left, op, right)| format!("{left} {op} {right}")),
        1 => (absolute_path(), literal()).prop_map(|(path, value)| format!("contains({path}, {value})")),
        1 => (absolute_path(), literal()).prop_map(|(path, value)| format!("starts-with({path}, {value})")),
        1 => prop::sample::select(&["1 < 2", "false()", "-(/a/@x) < 0", "a/b", "."][..]).prop_map(str::to_string),
    ];
    leaf.prop_recursive(2, 4, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("({left}) and ({right})")),
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("({left}) or ({right})")),
            inner.prop_map(|operand| format!("not({operand})")),
        ]
    })
}

/// Values of the JBI-shaped documents: numbers in several spellings, text,
/// and strings that XPath converts to NaN.
const JBI_VALUES: [&str; 12] = ["1", "2", "10", " 3 ", "1.5", "-0", "x", "KTJR", "", "NaN", "1e3", "3.0"];

/// String constants of the JBI-shaped filters.
const JBI_TEXTS: [&str; 8] = ["'1'", "'2'", "'10'", "' 3 '", "'x'", "'KTJR'", "''", "'NaN'"];

/// Number constants of the JBI-shaped filters, some written as strings.
const JBI_NUMBERS: [&str; 10] = ["0", "1", "1.5", "2", "3", "10", "-1", "'3'", "-0", "' 2 '"];

/// A leaf `<name>value</name>`, or `<name/>` without a value.
fn jbi_leaf(name: &'static str) -> impl Strategy<Value = String> {
    prop::option::weighted(0.9, prop::sample::select(&JBI_VALUES[..])).prop_map(move |value| match value {
        Some(value) => format!("<{name}>{value}</{name}>"),
        None => format!("<{name}/>"),
    })
}

/// An `r` element: an optional `k` attribute, up to two of each of `a`,
/// `b` and `c` in any order, and sometimes an `r` inside.
fn jbi_record(depth: u32) -> BoxedStrategy<String> {
    let children = prop::collection::vec(prop_oneof![jbi_leaf("a"), jbi_leaf("b"), jbi_leaf("c")], 0..5);
    let nested: BoxedStrategy<Option<String>> =
        if depth == 0 { Just(None).boxed() } else { prop::option::weighted(0.2, jbi_record(depth - 1)).boxed() };
    (prop::option::of(prop::sample::select(&JBI_VALUES[..])), children, nested)
        .prop_map(|(attribute, children, nested)| {
            let attribute = attribute.map(|value| format!(" k='{value}'")).unwrap_or_default();
            format!("<r{attribute}>{}{}</r>", children.concat(), nested.unwrap_or_default())
        })
        .boxed()
}

/// A document `<m>` of one to three records and sometimes an `s`.
fn jbi_document() -> impl Strategy<Value = String> {
    (prop::collection::vec(jbi_record(1), 1..4), prop::option::of(jbi_leaf("s")))
        .prop_map(|(records, extra)| format!("<m>{}{}</m>", records.concat(), extra.unwrap_or_default()))
}

/// An operator and a constant: `= 'x'`, `!= 'KTJR'`, `>= 2`, `< '3'`.
fn jbi_test() -> impl Strategy<Value = String> {
    let equality = (prop::sample::select(&["=", "!="][..]), prop::sample::select(&JBI_TEXTS[..]))
        .prop_map(|(op, text)| format!("{op} {text}"));
    let ordered =
        (operator(), prop::sample::select(&JBI_NUMBERS[..])).prop_map(|(op, number)| format!("{op} {number}"));
    prop_oneof![equality, ordered]
}

/// One comparison of a relative path from a record with a constant.
fn jbi_comparison() -> impl Strategy<Value = String> {
    let path = prop::sample::select(&["a", "b", "c", "@k", ".", "a/text()", "./b", "*"][..]);
    (path, jbi_test()).prop_map(|(path, test)| format!("{path} {test}"))
}

/// Filters on the records: predicates of one to three comparisons joined
/// by `and`, top-level comparisons of their fields, and a few other
/// shapes, combined with `and`, `or` and `not()`.
fn jbi_filter() -> impl Strategy<Value = String> {
    let record = prop::sample::select(&["/m/r", "//r", "/m/*", "/m/r/r"][..]);
    let predicate = (record.clone(), prop::collection::vec(jbi_comparison(), 1..4))
        .prop_map(|(record, tests)| format!("{record}[{}]", tests.join(" and ")));
    let top_level = (record, prop::sample::select(&["a", "b", "@k", "c/text()"][..]), jbi_test())
        .prop_map(|(record, field, test)| format!("{record}/{field} {test}"));
    let other = prop::sample::select(&["/m/r[a][b = 1]", "/m/r[contains(a, 'K')]", "/m/s >= 1", "/m/r[2][a = 1]"][..])
        .prop_map(str::to_string);
    let leaf = prop_oneof![4 => predicate, 3 => top_level, 1 => other];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("{left} and {right}")),
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("({left}) or ({right})")),
            inner.prop_map(|operand| format!("not({operand})")),
        ]
    })
}

/// Matches `documents` with a set of `texts` (some removed) and with each
/// filter alone, and says where they differ.
fn check_set(documents: &[String], texts: &[String], removed: &[bool]) -> Result<(), TestCaseError> {
    let mut set = XPathSet::new();
    let mut kept = Vec::new();
    for (key, text) in texts.iter().enumerate() {
        let parsed = XPathFilter::parse(text);
        prop_assert!(parsed.is_ok(), "{text}: {parsed:?}");
        let Ok(parsed) = parsed else { continue };
        set.insert(key, &parsed);
        if removed.get(key).copied().unwrap_or(false) {
            prop_assert!(set.remove(&key));
        } else {
            kept.push((key, parsed));
        }
    }
    prop_assert_eq!(set.len(), kept.len());
    let mut scratch = XPathScratch::new();
    for document in documents {
        let tree = XmlDocument::parse(document.as_bytes());
        prop_assert!(tree.is_ok(), "{document}: {tree:?}");
        let Ok(tree) = tree else { continue };
        let mut matched = Vec::new();
        prop_assert!(set.matching(document.as_bytes(), &mut scratch, &mut matched).is_ok());
        matched.sort_unstable();
        let wanted = expected(&kept, &tree);
        prop_assert_eq!(&matched, &wanted, "document {}", document);
    }
    Ok(())
}

/// The keys of the filters `matches_document` accepts, in order.
fn expected(filters: &[(usize, XPathFilter)], document: &XmlDocument) -> Vec<usize> {
    filters.iter().filter(|(_, filter)| filter.matches_document(document)).map(|(key, _)| *key).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn set_matches_exactly_what_the_tree_evaluator_accepts(
        documents in prop::collection::vec(document(), 1..4),
        texts in prop::collection::vec(filter(), 1..24),
        removed in prop::collection::vec(prop::bool::weighted(0.25), 24),
    ) {
        check_set(&documents, &texts, &removed)?;
    }

    #[test]
    fn jbi_shaped_sets_match_exactly_what_the_tree_evaluator_accepts(
        documents in prop::collection::vec(jbi_document(), 1..5),
        texts in prop::collection::vec(jbi_filter(), 1..80),
        removed in prop::collection::vec(prop::bool::weighted(0.2), 80),
    ) {
        check_set(&documents, &texts, &removed)?;
    }

    #[test]
    fn display_parses_back_to_the_same_filter(text in filter()) {
        let parsed = XPathFilter::parse(&text);
        prop_assert!(parsed.is_ok(), "{text}");
        let Ok(parsed) = parsed else { return Ok(()) };
        let printed = parsed.to_string();
        prop_assert_eq!(XPathFilter::parse(&printed).ok(), Some(parsed), "{}", printed);
    }

    #[test]
    fn arbitrary_input_never_panics(text in "\\PC{0,40}", bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = XPathFilter::parse(&text);
        let _ = XmlDocument::parse(&bytes);
        let mut set = XPathSet::new();
        set.insert(0, &XPathFilter::parse("//*[. = 1] or not(/a)").expect("parses"));
        let _ = set.matching(&bytes, &mut XPathScratch::new(), &mut Vec::new());
    }
}

#[test]
fn many_filters_share_the_automaton() {
    // Ten thousand subscriptions on the same structure, each wanting a
    // different serial number: one state chain, ten thousand value atoms.
    let mut set = XPathSet::new();
    for number in 0..10_000 {
        let text = format!("/metadata/ATO[nickname = 'KTJR' and serialno = 'targ{number}']");
        set.insert(number, &XPathFilter::parse(&text).expect("parses"));
    }
    assert_eq!(set.state_count(), 3, "start, metadata, ATO");
    let mut scratch = XPathScratch::new();
    let mut matched = Vec::new();
    let document = b"<metadata><ATO><nickname>KTJR</nickname><serialno>targ1234</serialno></ATO></metadata>";
    set.matching(document, &mut scratch, &mut matched).expect("well-formed");
    assert_eq!(matched, [1234]);
    matched.clear();
    set.matching(b"<metadata><Orig/></metadata>", &mut scratch, &mut matched).expect("well-formed");
    assert!(matched.is_empty());
    for number in 0..10_000 {
        assert!(set.remove(&number));
    }
    assert_eq!(set.state_count(), 1);
}
