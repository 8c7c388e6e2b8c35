//! Unit tests of the JBI workload: reproducibility, the Fig. 11
//! frequencies, and the shape and size of the metadata documents.

use super::*;
use crate::workload::jbi::values::{MONTH_NAMES, NICKNAMES};

/// Subscriptions per object type in the frequency test.
const FREQUENCY_SAMPLE: u64 = 10_000;

/// Largest accepted gap between a field's observed frequency and its Fig. 11
/// probability, in percentage points: five standard deviations of a
/// frequency near 50 % measured over [`FREQUENCY_SAMPLE`] subscriptions.
const FREQUENCY_TOLERANCE_POINTS: f64 = 2.5;

fn workload(seed: u64) -> JbiWorkload {
    JbiWorkload::new(seed).expect("valid topics")
}

/// The text that a test of `field` contains in a filter of `object_type`,
/// operator included: `nickname=` or `/metadata/.../day <= `.
fn signature(object_type: ObjectType, field: &Field) -> String {
    match object_type.spelling() {
        Spelling::ElementPredicates => format!("{}{}", field.name, field.comparison.symbol()),
        Spelling::AbsolutePaths => format!("{} {} ", field.path(), field.comparison.symbol()),
    }
}

/// The leaf elements of a document as `(path, text)`, checking on the way
/// that every tag is closed in order and that text holds no markup.
fn leaves(document: &str) -> Vec<(String, String)> {
    let body = document.strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n").expect("declaration");
    let mut open: Vec<&str> = Vec::new();
    let mut found = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find('<') {
        let text = &rest[..start];
        assert!(!text.contains('>') && !text.contains('&'), "markup in text {text:?}");
        let end = rest[start..].find('>').expect("tag ends") + start;
        let tag = &rest[start + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.last(), Some(&name), "closing tag in order");
            if !text.trim().is_empty() {
                found.push((format!("/{}", open.join("/")), text.to_string()));
            }
            open.pop();
        } else {
            assert!(tag.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_'), "{tag:?}");
            open.push(tag);
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty() && rest.trim().is_empty(), "document closes");
    found
}

#[test]
fn same_seed_same_workload_different_seed_different() {
    let (first, again, other) = (workload(11), workload(11), workload(12));
    for index in 0..30 {
        assert_eq!(first.subscription(index), again.subscription(index));
        assert_eq!(first.object(index), again.object(index));
    }
    assert!((0..30).any(|index| first.subscription(index) != other.subscription(index)));
    assert!((0..30).all(|index| first.object(index) != other.object(index)));
}

#[test]
fn types_take_turns_on_their_own_topics() {
    let jbi = workload(1);
    for index in 0..9 {
        let object_type = ObjectType::ALL[index as usize % 3];
        let (topic, language, filter) = jbi.subscription(index);
        assert_eq!((topic.as_str(), language), (object_type.topic(), LANGUAGE_XPATH));
        assert!(filter.starts_with("/metadata/"), "{filter}");
        assert_eq!(jbi.object(index).topic.as_str(), object_type.topic());
        assert_eq!(jbi.subscription(index), jbi.subscription_of(object_type, index / 3));
    }
}

#[test]
fn fields_appear_with_figure_11_frequencies_and_operators() {
    let jbi = workload(2003);
    for object_type in ObjectType::ALL {
        let mut counts = vec![0u64; object_type.fields().len()];
        for index in 0..FREQUENCY_SAMPLE {
            let (_, _, filter) = jbi.subscription_of(object_type, index);
            for (count, field) in counts.iter_mut().zip(object_type.fields()) {
                let occurrences = filter.matches(&signature(object_type, field)).count();
                assert!(occurrences <= 1, "{filter}");
                *count += occurrences as u64;
            }
        }
        for (count, field) in counts.iter().zip(object_type.fields()) {
            let observed = 100.0 * *count as f64 / FREQUENCY_SAMPLE as f64;
            let expected = f64::from(field.probability_percent);
            assert!(
                (observed - expected).abs() <= FREQUENCY_TOLERANCE_POINTS,
                "{} {}: {observed:.2} % observed, {expected} % in Fig. 11",
                field.path(),
                field.comparison.symbol()
            );
        }
    }
}

#[test]
fn subscription_values_come_from_figure_12() {
    let jbi = workload(5);
    for index in 0..300 {
        let (_, _, filter) = jbi.subscription_of(ObjectType::Ato, index);
        for (position, _) in filter.match_indices("nickname='") {
            let value = &filter[position + "nickname='".len()..][..4];
            assert!(NICKNAMES.contains(&value), "{filter}");
        }
        for (position, _) in filter.match_indices("month_name='") {
            let rest = &filter[position + "month_name='".len()..];
            let value = &rest[..rest.find('\'').expect("closing tick")];
            assert!(MONTH_NAMES.contains(&value), "{filter}");
        }
    }
}

#[test]
fn metadata_is_well_formed_about_2_kb_and_carries_every_field() {
    let jbi = workload(7);
    for index in 0..300 {
        let object = jbi.object(index);
        let object_type = ObjectType::ALL[index as usize % 3];
        let metadata = object.metadata.as_ref().expect("metadata");
        let size = metadata.len();
        assert!((METADATA_BYTES_DEFAULT..METADATA_BYTES_DEFAULT + 32).contains(&size), "{size} bytes");
        let document = std::str::from_utf8(metadata).expect("UTF-8");
        let leaves = leaves(document);
        for field in object_type.fields() {
            let matching: Vec<&(String, String)> = leaves.iter().filter(|(path, _)| *path == field.path()).collect();
            assert_eq!(matching.len(), 1, "{} in {document}", field.path());
            assert_eq!(matching[0].1.parse::<i64>().is_ok(), field.kind.is_integer(), "{}", field.path());
        }
        assert!(leaves
            .iter()
            .any(|(path, text)| path == "/metadata/ObjectInfo/schema" && text == object_type.schema()));
        assert_eq!(object.payload.len(), PAYLOAD_BYTES_DEFAULT);
    }
}

#[test]
fn sizes_can_be_changed() {
    let jbi = workload(1).with_payload_bytes(25 * 1024).with_metadata_bytes(4096);
    let object = jbi.object(4);
    assert_eq!(object.payload.len(), 25 * 1024);
    assert!(object.metadata.as_ref().is_some_and(|metadata| metadata.len() >= 4096));
}
