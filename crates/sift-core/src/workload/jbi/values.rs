//! The random values of the JBI fields: JBI report Fig. 12.
//!
//! "A random uniform distribution determined the values assigned to a given
//! XPATH expression" (§6); objects draw their values the same way, from a
//! different stream. Fig. 12 lists the keyword sets; it gives no ranges for
//! the integer fields, so the ranges below are this module's choice: those
//! of a real calendar date and time (days stop at 28 so that every day
//! exists in every month), years around the 2003 of Fig. 6, and small
//! schema version numbers.

use std::ops::RangeInclusive;

/// The 12 month names of Fig. 12.
pub const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The 10 nicknames of Fig. 12 (ATO and xmlxpath `nickname`).
pub const NICKNAMES: [&str; 10] = ["KTJR", "KMYX", "KQAZ", "KWXS", "KDEC", "KFRV", "KTBG", "KNHY", "KUJM", "KIKL"];

/// The 10 originators of Fig. 12 (ATO and xmlxpath `originator`).
pub const ORIGINATORS: [&str; 10] = ["AFRL", "AFMC", "ACC", "AFSOC", "AFCA", "AFC2ISR", "AFSPC", "AFWIC", "NSA", "CIA"];

/// The 5 object types of Fig. 12 (xmlxpath `type`).
pub const ORIG_TYPES: [&str; 5] = ["Targets", "Protected", "Critical", "Friendly", "Moving"];

/// The 5 short type names of Fig. 12 that start an ATO serial number.
pub const NICKS: [&str; 5] = ["targ", "prot", "crit", "frnd", "move"];

/// Serial numbers carry a number below this (Fig. 12's `random(9999)`, read
/// as 0-9999, which gives the 50,000 and 260,000 distinct values it counts).
pub const SERIAL_NUMBER_LIMIT: u32 = 10_000;

/// The prefix of an xmlxpath serial number (Fig. 12).
pub const ORIG_SERIAL_PREFIX: &str = "JBI";

/// Days of the month (not in Fig. 12).
pub const DAY_RANGE: RangeInclusive<i64> = 1..=28;

/// Hours of the day (not in Fig. 12).
pub const HOUR_RANGE: RangeInclusive<i64> = 0..=23;

/// Minutes of the hour (not in Fig. 12).
pub const MINUTE_RANGE: RangeInclusive<i64> = 0..=59;

/// Years, centred on Fig. 6's 2003 (not in Fig. 12).
pub const YEAR_RANGE: RangeInclusive<i64> = 2001..=2005;

/// Versions of an xmlxpath object (not in Fig. 12).
pub const VERSION_RANGE: RangeInclusive<i64> = 1..=9;

/// What a field's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// One of [`MONTH_NAMES`].
    MonthName,
    /// One of [`NICKNAMES`].
    Nickname,
    /// One of [`ORIGINATORS`].
    Originator,
    /// One of [`ORIG_TYPES`].
    OrigType,
    /// A nick and a number, `targ1234`: 50,000 values (Fig. 12).
    AtoSerial,
    /// `JBI`, a number and a capital letter, `JBI4821Q`: 260,000 values.
    OrigSerial,
    /// A day of the month, [`DAY_RANGE`].
    Day,
    /// An hour, [`HOUR_RANGE`].
    Hour,
    /// A minute, [`MINUTE_RANGE`].
    Minute,
    /// A year, [`YEAR_RANGE`].
    Year,
    /// A version, [`VERSION_RANGE`].
    Version,
}

/// A drawn value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue {
    /// A string: XPath compares it in single quotes (§5.2.1).
    Text(String),
    /// An integer: XPath compares it as a bare number (§5.2.1).
    Integer(i64),
}

impl ValueKind {
    /// True for the kinds with integer values.
    pub fn is_integer(self) -> bool {
        matches!(self, ValueKind::Day | ValueKind::Hour | ValueKind::Minute | ValueKind::Year | ValueKind::Version)
    }

    /// A uniformly drawn value of this kind.
    pub fn draw(self, rng: &mut fastrand::Rng) -> FieldValue {
        let text = |word: &str| FieldValue::Text(word.to_string());
        match self {
            ValueKind::MonthName => text(pick(rng, &MONTH_NAMES)),
            ValueKind::Nickname => text(pick(rng, &NICKNAMES)),
            ValueKind::Originator => text(pick(rng, &ORIGINATORS)),
            ValueKind::OrigType => text(pick(rng, &ORIG_TYPES)),
            ValueKind::AtoSerial => {
                FieldValue::Text(format!("{}{}", pick(rng, &NICKS), rng.u32(..SERIAL_NUMBER_LIMIT)))
            }
            ValueKind::OrigSerial => {
                FieldValue::Text(format!("{ORIG_SERIAL_PREFIX}{}{}", rng.u32(..SERIAL_NUMBER_LIMIT), rng.uppercase()))
            }
            ValueKind::Day => FieldValue::Integer(rng.i64(DAY_RANGE)),
            ValueKind::Hour => FieldValue::Integer(rng.i64(HOUR_RANGE)),
            ValueKind::Minute => FieldValue::Integer(rng.i64(MINUTE_RANGE)),
            ValueKind::Year => FieldValue::Integer(rng.i64(YEAR_RANGE)),
            ValueKind::Version => FieldValue::Integer(rng.i64(VERSION_RANGE)),
        }
    }
}

impl FieldValue {
    /// The value as element text in the metadata.
    pub fn as_xml_text(&self) -> String {
        match self {
            FieldValue::Text(text) => text.clone(),
            FieldValue::Integer(number) => number.to_string(),
        }
    }

    /// The value as an XPath literal: strings in single quotes, numbers bare.
    pub fn as_xpath_literal(&self) -> String {
        match self {
            FieldValue::Text(text) => format!("'{text}'"),
            FieldValue::Integer(number) => number.to_string(),
        }
    }
}

/// A uniformly chosen element of a non-empty keyword list.
fn pick(rng: &mut fastrand::Rng, words: &[&'static str]) -> &'static str {
    words[rng.usize(..words.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_figure_12() {
        let mut rng = fastrand::Rng::with_seed(4);
        for _ in 0..200 {
            let FieldValue::Text(ato) = ValueKind::AtoSerial.draw(&mut rng) else { panic!("text") };
            let number = NICKS.iter().find_map(|nick| ato.strip_prefix(nick)).expect("starts with a nick");
            assert!(number.parse::<u32>().is_ok_and(|value| value < SERIAL_NUMBER_LIMIT), "{ato}");
            let FieldValue::Text(orig) = ValueKind::OrigSerial.draw(&mut rng) else { panic!("text") };
            let body = orig.strip_prefix(ORIG_SERIAL_PREFIX).expect("JBI prefix");
            let (digits, letter) = body.split_at(body.len() - 1);
            assert!(digits.parse::<u32>().is_ok() && letter.chars().all(|c| c.is_ascii_uppercase()), "{orig}");
            let FieldValue::Integer(day) = ValueKind::Day.draw(&mut rng) else { panic!("integer") };
            assert!(DAY_RANGE.contains(&day));
        }
    }

    #[test]
    fn literals_quote_strings_only() {
        assert_eq!(FieldValue::Text("KTJR".into()).as_xpath_literal(), "'KTJR'");
        assert_eq!(FieldValue::Integer(2003).as_xpath_literal(), "2003");
        assert_eq!(FieldValue::Integer(7).as_xml_text(), "7");
    }
}
