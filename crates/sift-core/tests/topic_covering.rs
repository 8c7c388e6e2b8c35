//! Property tests for [`TopicFilter::covers`]: over a small alphabet, every
//! topic that can tell two filters apart is enumerated, so the test checks
//! that `covers` is both sound (no topic of `b` escapes `a`) and complete
//! (when it says no, such a topic exists).

use proptest::prelude::*;
use sift_core::{TopicFilter, TopicName};

/// Literal tokens of the random filters. Topics also use `c`, which no filter
/// names, so that a `*` against a literal always has a witness.
const FILTER_TOKENS: [&str; 5] = ["a", "b", "*", ">", "a*"];
const TOPIC_TOKENS: [&str; 4] = ["a", "b", "c", "a*"];

/// Filters have at most this many tokens; topics one more, enough to
/// separate `>` from any fixed-length filter.
const FILTER_TOKENS_MAX: usize = 4;

fn any_filter() -> impl Strategy<Value = TopicFilter> {
    prop::collection::vec(prop::sample::select(FILTER_TOKENS.to_vec()), 1..=FILTER_TOKENS_MAX).prop_map(|tokens| {
        // `>` is only allowed last; elsewhere it becomes `*`.
        let last = tokens.len() - 1;
        let text: Vec<&str> = tokens
            .iter()
            .enumerate()
            .map(|(index, token)| if *token == ">" && index != last { "*" } else { token })
            .collect();
        TopicFilter::new(text.join(".")).expect("generated filter is valid")
    })
}

/// Every topic over [`TOPIC_TOKENS`] with one to `FILTER_TOKENS_MAX + 1` tokens.
fn all_topics() -> Vec<TopicName> {
    let mut topics = Vec::new();
    let mut layer: Vec<String> = vec![String::new()];
    for _ in 0..=FILTER_TOKENS_MAX {
        let mut next = Vec::new();
        for prefix in &layer {
            for token in TOPIC_TOKENS {
                let text = if prefix.is_empty() { token.to_string() } else { format!("{prefix}.{token}") };
                topics.push(TopicName::new(&text).expect("generated topic is valid"));
                next.push(text);
            }
        }
        layer = next;
    }
    topics
}

/// A topic that `narrow` matches and `wide` does not, if there is one.
fn witness<'t>(wide: &TopicFilter, narrow: &TopicFilter, topics: &'t [TopicName]) -> Option<&'t TopicName> {
    topics.iter().find(|topic| narrow.matches(topic) && !wide.matches(topic))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn covers_exactly_when_no_topic_escapes(wide in any_filter(), narrow in any_filter()) {
        let topics = all_topics();
        let found = witness(&wide, &narrow, &topics);
        prop_assert_eq!(wide.covers(&narrow), found.is_none(), "{} covers {}: witness {:?}", wide, narrow, found);
    }

    #[test]
    fn every_filter_covers_itself_and_is_covered_by_everything(filter in any_filter()) {
        prop_assert!(filter.covers(&filter));
        prop_assert!(TopicFilter::new(">").expect("valid").covers(&filter));
    }
}

#[test]
fn hand_cases_have_witnesses() {
    let topics = all_topics();
    let filter = |text: &str| TopicFilter::new(text).expect("valid filter");
    let cases = [("a.b", "a.*", "a.a"), ("*", ">", "a.a"), ("a.*.>", "a.>", "a.a"), ("a.*", "a.a*", "")];
    for (wide, narrow, expected) in cases {
        let found = witness(&filter(wide), &filter(narrow), &topics).map(TopicName::as_str);
        if expected.is_empty() {
            assert_eq!(found, None, "{wide} covers {narrow}");
            assert!(filter(wide).covers(&filter(narrow)));
        } else {
            assert_eq!(found, Some(expected), "{wide} against {narrow}");
            assert!(!filter(wide).covers(&filter(narrow)));
        }
    }
}
