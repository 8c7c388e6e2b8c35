//! Filters as an OR of conjunctions of conditions, and when one such form
//! covers another.
//!
//! `wide` covers `narrow` when every conjunction of `narrow` that can be
//! true is covered by some conjunction of `wide`. A conjunction covers
//! another when each of its conditions is implied by the other: a
//! restriction by the other's restrictions on the same identifier taken
//! together (their intersection must lie inside it), an opaque literal by an
//! identical literal. This is sound, since each step only concludes "true
//! here implies true there", but not complete: `wide` conjunctions are not
//! combined, except those that restrict a single identifier, whose sets are
//! united (`x = 1 OR x = 2` covers `x IN (1, 2)`).

use crate::covering::condition::{analyse_literal, tag_condition, Analysed, Condition, Identifier};
use crate::covering::value_set::ValueSet;
use crate::sql::{Literal, SqlFilter};
use crate::tags::TagFilter;

/// One conjunction: all conditions must be true.
pub(crate) type Conjunction = Vec<Condition>;

/// A tags filter is a single conjunction.
pub(crate) fn tags_form(filter: &TagFilter) -> Vec<Conjunction> {
    vec![filter.predicates.iter().map(tag_condition).collect()]
}

/// A SQL selector's normal form, or `None` when it is too large to build.
/// Conjunctions with a literal that is never true are dropped.
pub(crate) fn sql_form(filter: &SqlFilter) -> Option<Vec<Conjunction>> {
    let disjuncts = filter.to_dnf()?;
    Some(disjuncts.iter().filter_map(|literals| sql_conjunction(literals)).collect())
}

fn sql_conjunction(literals: &[Literal]) -> Option<Conjunction> {
    let mut conditions = Vec::with_capacity(literals.len());
    for literal in literals {
        match analyse_literal(literal) {
            Analysed::Always => {}
            Analysed::Never => return None,
            Analysed::Condition(condition) => conditions.push(condition),
        }
    }
    Some(conditions)
}

/// What a conjunction allows, identifier by identifier, and the opaque
/// literals it requires.
struct Requirements<'c> {
    allowed: Vec<(&'c Identifier, ValueSet)>,
    opaque: Vec<&'c Literal>,
}

impl<'c> Requirements<'c> {
    fn of(conjunction: &'c [Condition]) -> Requirements<'c> {
        let mut requirements = Requirements { allowed: Vec::new(), opaque: Vec::new() };
        for condition in conjunction {
            match condition {
                Condition::Restrict { identifier, allowed } => {
                    match requirements.allowed.iter_mut().find(|(known, _)| *known == identifier) {
                        Some((_, set)) => *set = set.intersection(allowed),
                        None => requirements.allowed.push((identifier, allowed.clone())),
                    }
                }
                Condition::Opaque(literal) => requirements.opaque.push(literal),
            }
        }
        requirements
    }

    /// True when some identifier has no value left, so no message satisfies
    /// the conjunction.
    fn is_unsatisfiable(&self) -> bool {
        self.allowed.iter().any(|(_, set)| set.is_empty())
    }

    /// True when every message satisfying these requirements satisfies `condition`.
    fn imply(&self, condition: &Condition) -> bool {
        match condition {
            Condition::Restrict { identifier, allowed } => {
                match self.allowed.iter().find(|(known, _)| *known == identifier) {
                    Some((_, set)) => set.is_subset_of(allowed),
                    None => ValueSet::everything().is_subset_of(allowed),
                }
            }
            Condition::Opaque(literal) => self.opaque.contains(&literal),
        }
    }
}

/// Conjunctions of `disjuncts` made of one restriction each, united per
/// identifier; they stand for the OR of those conjunctions.
fn united_singletons(disjuncts: &[Conjunction]) -> Vec<Conjunction> {
    let mut united: Vec<(Identifier, ValueSet)> = Vec::new();
    for conjunction in disjuncts {
        if let [Condition::Restrict { identifier, allowed }] = conjunction.as_slice() {
            match united.iter_mut().find(|(known, _)| known == identifier) {
                Some((_, set)) => *set = set.union(allowed),
                None => united.push((identifier.clone(), allowed.clone())),
            }
        }
    }
    united.into_iter().map(|(identifier, allowed)| vec![Condition::Restrict { identifier, allowed }]).collect()
}

/// True when every message that satisfies `narrow` satisfies `wide`.
pub(crate) fn form_covers(wide: &[Conjunction], narrow: &[Conjunction]) -> bool {
    let united = united_singletons(wide);
    narrow.iter().all(|narrow_conjunction| {
        let requirements = Requirements::of(narrow_conjunction);
        requirements.is_unsatisfiable()
            || wide
                .iter()
                .chain(&united)
                .any(|wide_conjunction| wide_conjunction.iter().all(|condition| requirements.imply(condition)))
    })
}
