//! Filler text for payloads and descriptive metadata.
//!
//! The JBI report's payloads were textual (§5.3) and its follow-on work asks
//! for metadata with "verbose descriptions of content" (§8), so filler is
//! prose-like words rather than random bytes: it compresses and scans like
//! real text. Words are plain ASCII letters, safe inside XML without escapes.

use bytes::Bytes;

/// Words that filler text is drawn from: the vocabulary of intelligence and
/// tasking reports, as a published JBI object would describe itself.
const VOCABULARY: &[&str] = &[
    "aircraft",
    "airspace",
    "alert",
    "analysis",
    "area",
    "asset",
    "assessment",
    "base",
    "battle",
    "bearing",
    "brief",
    "channel",
    "collection",
    "command",
    "contact",
    "convoy",
    "coordinates",
    "corridor",
    "coverage",
    "damage",
    "data",
    "deployment",
    "detection",
    "direction",
    "estimate",
    "event",
    "feed",
    "flight",
    "force",
    "frequency",
    "grid",
    "ground",
    "imagery",
    "indicator",
    "intelligence",
    "intercept",
    "latitude",
    "logistics",
    "longitude",
    "maritime",
    "mission",
    "movement",
    "objective",
    "observation",
    "operation",
    "package",
    "patrol",
    "position",
    "priority",
    "radar",
    "range",
    "reconnaissance",
    "report",
    "route",
    "sector",
    "sensor",
    "signal",
    "sortie",
    "source",
    "status",
    "strike",
    "summary",
    "supply",
    "support",
    "surveillance",
    "target",
    "tasking",
    "terrain",
    "threat",
    "time",
    "track",
    "unit",
    "vehicle",
    "weather",
    "window",
    "zone",
];

/// Appends words chosen by `rng`, separated by single spaces, to `out` until
/// it is at least `length` bytes long.
pub(crate) fn append_words(rng: &mut fastrand::Rng, out: &mut String, length: usize) {
    while out.len() < length {
        if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
        out.push_str(VOCABULARY[rng.usize(..VOCABULARY.len())]);
    }
}

/// `count` words drawn by `rng`, joined by `separator`: a title or a keyword
/// list.
pub(crate) fn word_list(rng: &mut fastrand::Rng, count: usize, separator: &str) -> String {
    let words: Vec<&str> = (0..count).map(|_| VOCABULARY[rng.usize(..VOCABULARY.len())]).collect();
    words.join(separator)
}

/// A textual payload of exactly `length` bytes.
pub(crate) fn payload(rng: &mut fastrand::Rng, length: usize) -> Bytes {
    let mut text = String::with_capacity(length + VOCABULARY_WORD_MAX);
    append_words(rng, &mut text, length);
    text.truncate(length);
    Bytes::from(text)
}

/// Length of the longest vocabulary word, which bounds how far
/// [`append_words`] overshoots the length asked for.
pub(crate) const VOCABULARY_WORD_MAX: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_has_the_exact_length() {
        let mut rng = fastrand::Rng::with_seed(1);
        for length in [0, 1, 30, 500, 2048] {
            assert_eq!(payload(&mut rng, length).len(), length);
        }
    }

    #[test]
    fn vocabulary_is_xml_safe_and_bounded() {
        for word in VOCABULARY {
            assert!(word.bytes().all(|byte| byte.is_ascii_lowercase()), "{word}");
            assert!(word.len() <= VOCABULARY_WORD_MAX, "{word}");
        }
    }

    #[test]
    fn words_reach_the_length_and_overshoot_by_less_than_a_word() {
        let mut rng = fastrand::Rng::with_seed(2);
        let mut text = String::new();
        append_words(&mut rng, &mut text, 300);
        assert!(text.len() >= 300 && text.len() <= 300 + VOCABULARY_WORD_MAX, "{}", text.len());
        assert_eq!(word_list(&mut rng, 3, ", ").matches(", ").count(), 2);
    }
}
