//! MQTT topics and filters as Sift topics and filters, both ways.
//!
//! MQTT separates levels with `/` and allows empty levels and any
//! character but the wildcards inside a level; Sift separates tokens with
//! `.` and allows neither empty tokens nor whitespace. The mapping is
//! lossless for every MQTT topic:
//!
//! - `/` is `.`; the filter wildcards `+` and `#` are `*` and `>`.
//! - An empty level is the token `%` (`a//b` is `a.%.b`, `/a` is `%.a`).
//! - Inside a level, `.` is `%2E`, `%` is `%25`, whitespace and control
//!   characters are `%XX` per UTF-8 byte, and a level that is exactly `*`
//!   or `>` is `%2A` or `%3E`, so that it stays a plain name in Sift.
//!
//! Going back, `%XX` is decoded and a lone `%` is an empty level. A native
//! token with a `%` not followed by two hex digits keeps it as it is.
//!
//! MQTT's filter `a/#` also matches `a` itself, where Sift's `a.>` does
//! not: such a filter becomes two Sift filters, `a` and `a.>`.

use sift_core::{TopicFilter, TopicName};

/// The prefix of a shared subscription: `$share/GROUP/FILTER`.
const SHARE_PREFIX: &str = "$share/";

/// Why a topic or a filter is refused.
pub type TopicError = String;

/// Appends the Sift token of one MQTT level (not a wildcard) to `out`.
fn push_level(out: &mut String, level: &str) {
    match level {
        "" => out.push('%'),
        "*" => out.push_str("%2A"),
        ">" => out.push_str("%3E"),
        _ => {
            for character in level.chars() {
                if character == '.' || character == '%' || character.is_whitespace() || character.is_control() {
                    let mut utf8 = [0u8; 4];
                    for byte in character.encode_utf8(&mut utf8).bytes() {
                        out.push_str(&format!("%{byte:02X}"));
                    }
                } else {
                    out.push(character);
                }
            }
        }
    }
}

/// The Sift topic of an MQTT topic name.
pub fn topic_to_sift(mqtt_topic: &str) -> Result<TopicName, TopicError> {
    if mqtt_topic.is_empty() {
        return Err("the topic name is empty".into());
    }
    if let Some(position) = mqtt_topic.find(['+', '#']) {
        return Err(format!("topic name {mqtt_topic:?} has a wildcard at byte {position}"));
    }
    let mut sift = String::with_capacity(mqtt_topic.len() + 4);
    for (index, level) in mqtt_topic.split('/').enumerate() {
        if index > 0 {
            sift.push('.');
        }
        push_level(&mut sift, level);
    }
    TopicName::new(&sift).map_err(|error| format!("topic name {mqtt_topic:?}: {error}"))
}

/// The MQTT topic name of a Sift topic.
pub fn topic_to_mqtt(sift_topic: &str) -> String {
    let mut mqtt = String::with_capacity(sift_topic.len());
    for (index, token) in sift_topic.split('.').enumerate() {
        if index > 0 {
            mqtt.push('/');
        }
        if token != "%" {
            decode_token(token, &mut mqtt);
        }
    }
    mqtt
}

/// Decodes `%XX` escapes of one token into `out`; other text is copied.
fn decode_token(token: &str, out: &mut String) {
    if !token.contains('%') {
        out.push_str(token);
        return;
    }
    let bytes = token.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escape = bytes.get(index + 1..index + 3).and_then(|hex| std::str::from_utf8(hex).ok());
        match (bytes[index], escape.and_then(|hex| u8::from_str_radix(hex, 16).ok())) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                index += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                index += 1;
            }
        }
    }
    out.push_str(&String::from_utf8_lossy(&decoded));
}

/// An MQTT subscription's topic filter, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// The filter as the client sent it (the subscription's key).
    pub text: String,
    /// The filter without a `$share/GROUP/` prefix.
    pub mqtt: String,
    /// The queue group of a shared subscription.
    pub share_group: Option<String>,
    /// The Sift topic filters that together match what `mqtt` matches.
    pub sift: Vec<TopicFilter>,
}

impl Filter {
    /// Parses and checks an MQTT topic filter.
    pub fn parse(text: &str) -> Result<Filter, TopicError> {
        let (share_group, mqtt) = match text.strip_prefix(SHARE_PREFIX) {
            Some(rest) => {
                let (group, filter) =
                    rest.split_once('/').ok_or_else(|| format!("shared subscription {text:?} names no filter"))?;
                if group.is_empty() || group.contains(['+', '#']) {
                    return Err(format!("shared subscription {text:?}: the group must be a plain non-empty name"));
                }
                (Some(group.to_string()), filter)
            }
            None => (None, text),
        };
        if mqtt.is_empty() {
            return Err(format!("topic filter {text:?} is empty"));
        }
        let levels: Vec<&str> = mqtt.split('/').collect();
        let mut sift = String::with_capacity(mqtt.len() + 4);
        for (index, level) in levels.iter().enumerate() {
            if index > 0 {
                sift.push('.');
            }
            match *level {
                "+" => sift.push('*'),
                "#" if index + 1 == levels.len() => sift.push('>'),
                "#" => return Err(format!("topic filter {text:?}: '#' must be the last level")),
                other if other.contains(['+', '#']) => {
                    return Err(format!("topic filter {text:?}: a wildcard must be a whole level"))
                }
                other => push_level(&mut sift, other),
            }
        }
        let mut filters = Vec::with_capacity(2);
        // `a/#` matches `a` too; a bare `#` needs no second filter (every
        // topic has at least one level).
        if let Some(parent) = sift.strip_suffix(".>") {
            filters.push(TopicFilter::new(parent).map_err(|error| format!("topic filter {text:?}: {error}"))?);
        }
        filters.push(TopicFilter::new(&sift).map_err(|error| format!("topic filter {text:?}: {error}"))?);
        Ok(Filter { text: text.to_string(), mqtt: mqtt.to_string(), share_group, sift: filters })
    }

    /// Whether the filter starts with a wildcard, so that it must not
    /// match topics beginning with `$` (MQTT 4.7.2).
    pub fn starts_with_wildcard(&self) -> bool {
        self.mqtt.starts_with('+') || self.mqtt.starts_with('#')
    }
}

/// The last topic mapped each way on a connection: a client usually
/// publishes, and is delivered, one topic many times in a row, and the
/// mapping then costs a comparison instead of a validation and two
/// allocations.
#[derive(Debug, Default)]
pub struct TopicCache {
    to_sift: Option<(String, TopicName)>,
    to_mqtt: Option<(TopicName, String)>,
}

impl TopicCache {
    /// [`topic_to_sift`], remembered.
    pub fn sift(&mut self, mqtt_topic: &str) -> Result<TopicName, TopicError> {
        if let Some((known, topic)) = &self.to_sift {
            if known == mqtt_topic {
                return Ok(topic.clone());
            }
        }
        let topic = topic_to_sift(mqtt_topic)?;
        self.to_sift = Some((mqtt_topic.to_string(), topic.clone()));
        Ok(topic)
    }

    /// [`topic_to_mqtt`], remembered.
    pub fn mqtt(&mut self, sift_topic: &TopicName) -> &str {
        let hit = matches!(&self.to_mqtt, Some((known, _)) if known.as_str() == sift_topic.as_str());
        if !hit {
            self.to_mqtt = Some((sift_topic.clone(), topic_to_mqtt(sift_topic.as_str())));
        }
        self.to_mqtt.as_ref().map_or("", |(_, mqtt)| mqtt.as_str())
    }
}

/// Whether the MQTT filter `filter` (without a `$share` prefix) matches
/// the MQTT topic name `topic`, by MQTT's rules.
pub fn mqtt_matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
        return false;
    }
    let mut topic_levels = topic.split('/');
    for filter_level in filter.split('/') {
        if filter_level == "#" {
            return true;
        }
        match topic_levels.next() {
            Some(level) if filter_level == "+" || filter_level == level => {}
            _ => return false,
        }
    }
    topic_levels.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn levels_map_to_tokens_and_back() {
        let cases = [
            ("sensors/kitchen/temp", "sensors.kitchen.temp"),
            ("a//b", "a.%.b"),
            ("/a", "%.a"),
            ("a/", "a.%"),
            ("v1.2/x", "v1%2E2.x"),
            ("100%/x", "100%25.x"),
            ("hello world", "hello%20world"),
            ("*/>", "%2A.%3E"),
            ("$SYS/broker", "$SYS.broker"),
        ];
        for (mqtt, sift) in cases {
            assert_eq!(topic_to_sift(mqtt).expect("valid").as_str(), sift, "{mqtt}");
            assert_eq!(topic_to_mqtt(sift), mqtt, "{sift}");
        }
        assert_eq!(topic_to_mqtt("native.100%.x"), "native/100%/x", "a stray % stays");
        assert!(topic_to_sift("a/+").is_err());
        assert!(topic_to_sift("").is_err());
    }

    #[test]
    fn filters_map_wildcards_and_parent_levels() {
        let filter = Filter::parse("a/+/#").expect("valid");
        let texts: Vec<&str> = filter.sift.iter().map(TopicFilter::as_str).collect();
        assert_eq!(texts, ["a.*", "a.*.>"]);
        assert_eq!(Filter::parse("#").expect("valid").sift.len(), 1);
        let shared = Filter::parse("$share/workers/jobs/+").expect("valid");
        assert_eq!(shared.share_group.as_deref(), Some("workers"));
        assert_eq!(shared.sift[0].as_str(), "jobs.*");
        for bad in ["a/#/b", "a+/b", "$share/g", "$share//a", ""] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mqtt_matching_follows_the_spec() {
        assert!(mqtt_matches("a/#", "a"));
        assert!(mqtt_matches("a/+/c", "a/b/c"));
        assert!(mqtt_matches("+/+", "/a"));
        assert!(!mqtt_matches("a/+", "a/b/c"));
        assert!(!mqtt_matches("#", "$SYS/x"));
        assert!(mqtt_matches("$SYS/#", "$SYS/x"));
    }

    proptest! {
        /// Every MQTT topic name survives the trip through Sift.
        #[test]
        fn any_topic_round_trips(levels in proptest::collection::vec("[a-z.%* >\t/é]{0,4}", 1..5)) {
            let topic = levels.join("/");
            if let Ok(sift) = topic_to_sift(&topic) {
                prop_assert_eq!(topic_to_mqtt(sift.as_str()), topic);
            }
        }

        /// A Sift filter made from an MQTT filter matches what MQTT matches.
        #[test]
        fn filters_agree_with_mqtt_matching(
            filter_levels in proptest::collection::vec(prop_oneof!["[ab]{0,1}", Just("+".to_string())], 1..4),
            tail in any::<bool>(),
            topic_levels in proptest::collection::vec("[ab]{0,1}", 1..5),
        ) {
            let mut filter = filter_levels.join("/");
            if tail { filter.push_str("/#"); }
            let topic = topic_levels.join("/");
            // MQTT has no empty topic names or filters.
            prop_assume!(!filter.is_empty() && !topic.is_empty());
            let parsed = Filter::parse(&filter).expect("valid filter");
            let sift_topic = topic_to_sift(&topic).expect("valid topic");
            let sift_match = parsed.sift.iter().any(|sift| sift.matches(&sift_topic));
            prop_assert_eq!(sift_match, mqtt_matches(&filter, &topic), "{} vs {}", filter, topic);
        }
    }
}
