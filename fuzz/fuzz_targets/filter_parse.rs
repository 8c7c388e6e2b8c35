//! Feeds arbitrary text to every content-filter parser, as a subscriber
//! could: parsing must never panic, and whatever parses must print as text
//! that parses back to a filter printing the same, and must evaluate on a
//! message without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sift_core::{Message, TopicName, Value};
use sift_filter::{ContentFilter, FilterLanguage};

const LANGUAGES: [FilterLanguage; 4] =
    [FilterLanguage::Tags, FilterLanguage::Sql, FilterLanguage::Xpath, FilterLanguage::Regex];

fn sample_message() -> Message {
    let topic = TopicName::new("orders.eu.new").expect("valid topic");
    let mut message = Message::new(topic, "payload");
    message.properties = vec![
        ("sym".to_string(), Value::Str("IBM".into())),
        ("price".to_string(), Value::Int(120)),
        ("ratio".to_string(), Value::Float(0.5)),
        ("flag".to_string(), Value::Bool(true)),
    ];
    message.metadata = Some(b"<metadata><ATO a='1'><nickname>KTJR</nickname></ATO></metadata>".to_vec().into());
    message
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, text)) = data.split_first() else { return };
    let language = LANGUAGES[usize::from(selector) % LANGUAGES.len()];
    let text = String::from_utf8_lossy(text);
    let Ok(filter) = ContentFilter::parse(language, &text) else { return };
    let printed = filter.to_string();
    let reparsed = ContentFilter::parse(language, &printed).expect("a printed filter parses");
    assert_eq!(reparsed.to_string(), printed, "printing is stable");
    let _ = filter.matches(&sample_message());
});
