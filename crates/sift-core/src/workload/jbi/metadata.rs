//! The XML metadata document of a published JBI object (JBI report §5.2).
//!
//! Subscriptions look only at the metadata (§5.2: "routing decisions based
//! upon tags contained in the metadata section"), so the document carries
//! the randomized fields of Fig. 11 at the paths Fig. 11 gives, below a
//! `<metadata>` root. Fig. 5 wraps metadata and payload in one `<root>` for
//! the hardware router; a Sift message carries them apart, so the document
//! starts at `<metadata>`.
//!
//! Fig. 8-10 draw each schema with more fields than the randomized ones, but
//! the report's text does not list them. To bring a document to its target
//! size (about 2 KB) the way such fields would, it gets a header of
//! descriptive fields (schema name of Fig. 7, object id, classification,
//! title, keywords) and a prose `Description`, the "verbose descriptions of
//! content" that §8 expects of real objects. These elements are outside the
//! Fig. 11 paths, so no subscription tests them.

use crate::workload::jbi::fields::Field;
use crate::workload::jbi::values::FieldValue;
use crate::workload::text::{self, VOCABULARY_WORD_MAX};

/// The XML declaration that starts every document.
const XML_DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

/// The version written in the header.
const SCHEMA_VERSION: &str = "1.0";

/// The classification written in the header (as on the report itself).
const CLASSIFICATION: &str = "UNCLASSIFIED";

/// Words in a header title.
const TITLE_WORDS: usize = 4;

/// Words in a header keyword list.
const KEYWORD_COUNT: usize = 6;

/// Spaces per level of indentation.
const INDENT: &str = "  ";

/// What closes a document after the description's text.
const CLOSING: &str = "</Description>\n</metadata>\n";

/// The metadata document of an object of `schema` whose Fig. 11 `fields`
/// have `values` (in the same order), padded with descriptive text drawn by
/// `rng` to at least `target_bytes` (exceeded by less than a word).
pub(crate) fn document(
    schema: &str,
    fields: &[Field],
    values: &[FieldValue],
    rng: &mut fastrand::Rng,
    target_bytes: usize,
) -> String {
    let mut xml = String::with_capacity(target_bytes + VOCABULARY_WORD_MAX + CLOSING.len());
    xml.push_str(XML_DECLARATION);
    xml.push_str("<metadata>\n");
    write_header(&mut xml, schema, rng);
    write_fields(&mut xml, fields, values);
    xml.push_str(INDENT);
    xml.push_str("<Description>");
    let text_start = xml.len();
    let mut description = String::new();
    let text_length = (target_bytes.saturating_sub(text_start + CLOSING.len())).max(1);
    text::append_words(rng, &mut description, text_length);
    xml.push_str(&description);
    xml.push_str(CLOSING);
    xml
}

/// Writes the descriptive header element.
fn write_header(xml: &mut String, schema: &str, rng: &mut fastrand::Rng) {
    let entries = [
        ("schema", schema.to_string()),
        ("schema_version", SCHEMA_VERSION.to_string()),
        ("object_id", format!("{:016x}", rng.u64(..))),
        ("classification", CLASSIFICATION.to_string()),
        ("title", text::word_list(rng, TITLE_WORDS, " ")),
        ("keywords", text::word_list(rng, KEYWORD_COUNT, ", ")),
    ];
    xml.push_str(INDENT);
    xml.push_str("<ObjectInfo>\n");
    for (name, value) in entries {
        write_leaf(xml, 2, name, &value);
    }
    xml.push_str(INDENT);
    xml.push_str("</ObjectInfo>\n");
}

/// Writes the fields in order, opening and closing their elements as the
/// paths go: fields of one element are consecutive in Fig. 11.
fn write_fields(xml: &mut String, fields: &[Field], values: &[FieldValue]) {
    let mut open: Vec<&str> = Vec::new();
    for (field, value) in fields.iter().zip(values) {
        let path: Vec<&str> = field.element.split('/').collect();
        let shared = open.iter().zip(&path).take_while(|(opened, wanted)| opened == wanted).count();
        close_to(xml, &mut open, shared);
        for name in &path[shared..] {
            xml.push_str(&INDENT.repeat(open.len() + 1));
            xml.push_str(&format!("<{name}>\n"));
            open.push(name);
        }
        write_leaf(xml, open.len() + 1, field.name, &value.as_xml_text());
    }
    close_to(xml, &mut open, 0);
}

/// Closes open elements until `depth` remain open.
fn close_to(xml: &mut String, open: &mut Vec<&str>, depth: usize) {
    while open.len() > depth {
        if let Some(name) = open.pop() {
            xml.push_str(&INDENT.repeat(open.len() + 1));
            xml.push_str(&format!("</{name}>\n"));
        }
    }
}

/// Writes `<name>text</name>` on its own line at `level`.
fn write_leaf(xml: &mut String, level: usize, name: &str, text: &str) {
    xml.push_str(&INDENT.repeat(level));
    xml.push_str(&format!("<{name}>{text}</{name}>\n"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::jbi::fields::BASIC_FIELDS;

    #[test]
    fn fields_nest_under_their_elements() {
        let values: Vec<FieldValue> = (0..BASIC_FIELDS.len()).map(|value| FieldValue::Integer(value as i64)).collect();
        let mut rng = fastrand::Rng::with_seed(1);
        let xml = document("mil.af.rl.jbi.training.basic", &BASIC_FIELDS, &values, &mut rng, 0);
        let expected = "  <BasicTemporal>
    <beginning_date_time_group>
      <day>0</day>
      <hour_time>1</hour_time>
      <minute_time>2</minute_time>
      <month_name>3</month_name>
      <year>4</year>
    </beginning_date_time_group>
    <ending_date_time_group>
      <day>5</day>
      <hour_time>6</hour_time>
      <minute_time>7</minute_time>
      <month_name>8</month_name>
      <year>9</year>
    </ending_date_time_group>
  </BasicTemporal>
  <Description>";
        assert!(xml.contains(expected), "{xml}");
        assert!(xml.starts_with(XML_DECLARATION) && xml.ends_with(CLOSING));
    }

    #[test]
    fn documents_reach_the_target_size() {
        let mut rng = fastrand::Rng::with_seed(2);
        for target in [1024, 2048, 4096] {
            let xml = document("schema", &[], &[], &mut rng, target);
            assert!(xml.len() >= target && xml.len() <= target + VOCABULARY_WORD_MAX, "{}", xml.len());
        }
    }
}
