//! The XPath subscriptions of the JBI workload (JBI report §5.2.1, §6).
//!
//! A subscription tests each Fig. 11 field of its object type with that
//! field's probability, against a value drawn as Fig. 12 says, and joins the
//! tests with `and`. Two spellings are used, both from the report's own
//! examples, so that routers see both shapes:
//!
//! - absolute paths, one per test, as Fig. 6 writes its `basic`
//!   subscription: `/metadata/BasicTemporal/beginning_date_time_group/year
//!   >= 2003 and /metadata/BasicTemporal/ending_date_time_group/day <= 26`;
//! - one predicate per element for `ato` and `xmlxpath`:
//!   `/metadata/ATO[nickname='KTJR' and serialno='targ1234']`.
//!
//! In both, strings are quoted with single ticks and numbers are bare, as
//! §5.2.1 notes the router required. A subscription whose draws pick no
//! field at all (0.14 % of `xmlxpath` subscriptions, fewer for the others)
//! asks for every object of its type: `/metadata/Orig`.

use crate::workload::jbi::fields::Field;
use crate::workload::jbi::values::FieldValue;

/// How a subscription's tests are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spelling {
    /// `/metadata/a/b >= 1 and /metadata/a/c = 'x'` (Fig. 6).
    AbsolutePaths,
    /// `/metadata/a[b>=1 and c='x']`.
    ElementPredicates,
}

/// One test of a subscription: a field and the value it is compared with.
pub(crate) type Test = (&'static Field, FieldValue);

/// Probabilities are percentages.
const PERCENT: u32 = 100;

/// Draws the tests of one subscription: each field with its probability.
/// Every field's value is drawn, chosen or not, so that the values do not
/// shift with the choices.
pub(crate) fn draw_tests(fields: &'static [Field], rng: &mut fastrand::Rng) -> Vec<Test> {
    let mut tests = Vec::new();
    for field in fields {
        let chosen = rng.u32(..PERCENT) < field.probability_percent;
        let value = field.kind.draw(rng);
        if chosen {
            tests.push((field, value));
        }
    }
    tests
}

/// Writes `tests` as one XPath expression; with no tests, the expression
/// selecting `/metadata/{root_element}`, true of every object of the type.
pub(crate) fn filter_text(tests: &[Test], spelling: Spelling, root_element: &str) -> String {
    if tests.is_empty() {
        return format!("/metadata/{root_element}");
    }
    match spelling {
        Spelling::AbsolutePaths => tests
            .iter()
            .map(|(field, value)| {
                format!("{} {} {}", field.path(), field.comparison.symbol(), value.as_xpath_literal())
            })
            .collect::<Vec<_>>()
            .join(" and "),
        Spelling::ElementPredicates => element_predicates(tests),
    }
}

/// `/metadata/E[t1 and t2] and /metadata/F[t3]`, elements in field order.
fn element_predicates(tests: &[Test]) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for (field, value) in tests {
        let condition = format!("{}{}{}", field.name, field.comparison.symbol(), value.as_xpath_literal());
        match groups.iter_mut().find(|(element, _)| *element == field.element) {
            Some((_, conditions)) => conditions.push(condition),
            None => groups.push((field.element, vec![condition])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(element, conditions)| format!("/metadata/{element}[{}]", conditions.join(" and ")))
        .collect();
    parts.join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::jbi::fields::{ATO_FIELDS, BASIC_FIELDS};

    fn text(value: &str) -> FieldValue {
        FieldValue::Text(value.to_string())
    }

    #[test]
    fn predicates_group_by_element() {
        let tests = [
            (&ATO_FIELDS[0], text("KTJR")),
            (&ATO_FIELDS[1], text("targ1234")),
            (&ATO_FIELDS[4], FieldValue::Integer(13)),
        ];
        assert_eq!(
            filter_text(&tests, Spelling::ElementPredicates, "ATO"),
            "/metadata/ATO[nickname='KTJR' and serialno='targ1234'] and /metadata/TemporalATO[hour_time>=13]"
        );
    }

    #[test]
    fn absolute_paths_spell_figure_6() {
        let tests = [(&BASIC_FIELDS[4], FieldValue::Integer(2003)), (&BASIC_FIELDS[5], FieldValue::Integer(26))];
        assert_eq!(
            filter_text(&tests, Spelling::AbsolutePaths, "BasicTemporal"),
            "/metadata/BasicTemporal/beginning_date_time_group/year >= 2003 and \
             /metadata/BasicTemporal/ending_date_time_group/day <= 26"
        );
        assert_eq!(filter_text(&[], Spelling::AbsolutePaths, "BasicTemporal"), "/metadata/BasicTemporal");
    }
}
