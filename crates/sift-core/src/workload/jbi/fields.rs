//! The randomized fields of the JBI objects: JBI report Fig. 11.
//!
//! Each row gives a field's place in the metadata, the operator that
//! subscriptions test it with, the kind of its random value (Fig. 12), and
//! the probability that a subscription tests it. The report: "for each
//! object there is a corresponding XPATH generated with a random data type
//! based on a probability. A uniform distribution determined the probability
//! of a field being present in an XPATH expression" (§6).

use crate::workload::jbi::values::ValueKind;

/// The operator a subscription compares a field with (Fig. 11, column Op).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `=`: the string fields.
    Equal,
    /// `>=`: the ATO date-time fields, the beginning of the basic date-time
    /// group and the xmlxpath version.
    AtLeast,
    /// `<=`: the end of the basic date-time group.
    AtMost,
}

impl Comparison {
    /// The XPath operator.
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Equal => "=",
            Comparison::AtLeast => ">=",
            Comparison::AtMost => "<=",
        }
    }
}

/// One row of Fig. 11.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The element holding the field, below `/metadata`; nested elements are
    /// separated by `/` (`BasicTemporal/ending_date_time_group`).
    pub element: &'static str,
    /// The field's own element name (`nickname`, `hour_time`).
    pub name: &'static str,
    /// How subscriptions compare it.
    pub comparison: Comparison,
    /// What its random values are (Fig. 12).
    pub kind: ValueKind,
    /// Percentage of subscriptions that test it.
    pub probability_percent: u32,
}

impl Field {
    /// The field's absolute path, as Fig. 11 writes it
    /// (`/metadata/ATO/nickname`).
    pub fn path(&self) -> String {
        format!("/metadata/{}/{}", self.element, self.name)
    }
}

/// The probability of `/metadata/BasicTemporal/beginning_date_time_group/day`,
/// which Fig. 11 leaves blank (the cell is lost in the report's table). It is
/// taken from the same field of the ATO object, whose other four date-time
/// probabilities (80, 60, 70, 80 %) equal those of this group.
pub const BASIC_BEGINNING_DAY_PERCENT: u32 = 30;

/// Shorthand for one row of the tables below.
const fn field(
    element: &'static str,
    name: &'static str,
    comparison: Comparison,
    kind: ValueKind,
    probability_percent: u32,
) -> Field {
    Field { element, name, comparison, kind, probability_percent }
}

/// Element of the ATO identification fields.
const ATO: &str = "ATO";

/// Element of the ATO date-time fields.
const TEMPORAL_ATO: &str = "TemporalATO";

/// Element of the beginning of a basic object's period.
const BEGINNING: &str = "BasicTemporal/beginning_date_time_group";

/// Element of the end of a basic object's period.
const ENDING: &str = "BasicTemporal/ending_date_time_group";

/// Element of the xmlxpath origin fields.
const ORIG: &str = "Orig";

/// The `ato` (air tasking order) rows of Fig. 11.
pub const ATO_FIELDS: [Field; 8] = [
    field(ATO, "nickname", Comparison::Equal, ValueKind::Nickname, 80),
    field(ATO, "serialno", Comparison::Equal, ValueKind::AtoSerial, 80),
    field(ATO, "originator", Comparison::Equal, ValueKind::Originator, 40),
    field(TEMPORAL_ATO, "day", Comparison::AtLeast, ValueKind::Day, 30),
    field(TEMPORAL_ATO, "hour_time", Comparison::AtLeast, ValueKind::Hour, 80),
    field(TEMPORAL_ATO, "minute_time", Comparison::AtLeast, ValueKind::Minute, 60),
    field(TEMPORAL_ATO, "month_name", Comparison::Equal, ValueKind::MonthName, 70),
    field(TEMPORAL_ATO, "year", Comparison::AtLeast, ValueKind::Year, 80),
];

/// The `basic` rows of Fig. 11: a period from a beginning to an ending
/// date-time group; Fig. 6 is one such subscription.
pub const BASIC_FIELDS: [Field; 10] = [
    field(BEGINNING, "day", Comparison::AtLeast, ValueKind::Day, BASIC_BEGINNING_DAY_PERCENT),
    field(BEGINNING, "hour_time", Comparison::AtLeast, ValueKind::Hour, 80),
    field(BEGINNING, "minute_time", Comparison::AtLeast, ValueKind::Minute, 60),
    field(BEGINNING, "month_name", Comparison::Equal, ValueKind::MonthName, 70),
    field(BEGINNING, "year", Comparison::AtLeast, ValueKind::Year, 80),
    field(ENDING, "day", Comparison::AtMost, ValueKind::Day, 40),
    field(ENDING, "hour_time", Comparison::AtMost, ValueKind::Hour, 80),
    field(ENDING, "minute_time", Comparison::AtMost, ValueKind::Minute, 60),
    field(ENDING, "month_name", Comparison::Equal, ValueKind::MonthName, 70),
    field(ENDING, "year", Comparison::AtMost, ValueKind::Year, 80),
];

/// The `xmlxpath` rows of Fig. 11.
pub const XMLXPATH_FIELDS: [Field; 5] = [
    field(ORIG, "type", Comparison::Equal, ValueKind::OrigType, 80),
    field(ORIG, "nickname", Comparison::Equal, ValueKind::Nickname, 80),
    field(ORIG, "serialno", Comparison::Equal, ValueKind::OrigSerial, 70),
    field(ORIG, "originator", Comparison::Equal, ValueKind::Originator, 80),
    field(ORIG, "version", Comparison::AtLeast, ValueKind::Version, 40),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_compare_for_equality_and_integers_for_order() {
        for field in ATO_FIELDS.iter().chain(&BASIC_FIELDS).chain(&XMLXPATH_FIELDS) {
            let ordered = field.comparison != Comparison::Equal;
            assert_eq!(ordered, field.kind.is_integer(), "{}", field.path());
            assert!((1..=100).contains(&field.probability_percent), "{}", field.path());
        }
        assert_eq!(BASIC_FIELDS[9].path(), "/metadata/BasicTemporal/ending_date_time_group/year");
    }
}
