//! Which facts of a document wake a filter after the pass: its *triggers*.
//!
//! A filter is evaluated only when one of its triggers holds, so they must
//! be a necessary condition: whenever the formula is true, some trigger
//! holds. A trigger is a decided atom being true, an indexed test holding,
//! or two tests both holding, the first an equality (a *pair*, found by
//! hashing the second among the first one's partners).
//!
//! For a conjunction any one necessary part will do, so the part guessed
//! rarest is chosen (see `ValueIndex::estimate`): JBI's
//! `/metadata/ATO[nickname = 'KTJR' and serialno = 'targ1234']` waits for
//! the serial number together with the nickname rather than for every
//! document with that nickname. The next rarest necessary tests become
//! the trigger's guards (see `guards`). For a disjunction every operand
//! needs a trigger. A formula with no such condition (under `not()`) falls
//! back to one trigger per atom it mentions, which is necessary as long as
//! the formula is false when every atom is, the only formulas that get
//! triggers at all; the others are evaluated on every document.
//!
//! The guesses only decide how much work a document causes, never what
//! matches: any necessary condition gives the same results.

use crate::xpath::atoms::{AtomTable, AtomTest, Leaf};
use crate::xpath::automaton::AtomId;
use crate::xpath::formula::Formula;
use crate::xpath::guards::Guards;
use crate::xpath::value_index::{TestId, ValueIndex};

/// How often a structural atom is guessed true: documents of one schema
/// have the same structure, so nearly always.
const STRUCTURAL_ESTIMATE: f64 = 1.0;

/// How often an atom with an evaluated residual is guessed true.
const RESIDUAL_ESTIMATE: f64 = 0.5;

/// One fact that wakes filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Trigger {
    /// A structural or residual atom is true.
    Atom(AtomId),
    /// An indexed test holds on some element.
    Test(TestId),
    /// Both tests hold; the first is an equality, under which the pair is filed.
    Pair(TestId, TestId),
}

/// What choosing triggers needs to know about atoms and tests.
pub(crate) trait Selectivity {
    /// The guessed probability that a document satisfies the test.
    fn test_estimate(&self, test: TestId) -> f64;
    /// True for equality tests, the ones pairs are made of.
    fn is_equality(&self, test: TestId) -> bool;
    /// The guessed probability that a decided atom is true.
    fn atom_estimate(&self, atom: AtomId) -> f64;
    /// The tests of an indexed atom of several tests.
    fn conjunction_tests(&self, atom: AtomId) -> &[TestId];
}

/// One way for a filter to be woken: the trigger, and the tests from which
/// its guards are chosen.
#[derive(Debug, Clone)]
struct Alternative {
    trigger: Trigger,
    pool: Vec<TestId>,
}

/// Alternatives, of which one fully holds whenever the formula does, and
/// the guessed number of trigger firings per document they cause.
#[derive(Debug, Clone)]
struct Choice {
    alternatives: Vec<Alternative>,
    cost: f64,
}

impl Choice {
    fn single(trigger: Trigger, cost: f64) -> Choice {
        Choice { alternatives: vec![Alternative { trigger, pool: Vec::new() }], cost }
    }
}

/// A trigger of a filter, with the guards it is filed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Wake {
    pub(crate) trigger: Trigger,
    pub(crate) guards: Guards,
}

/// Triggers for a formula that is false when every atom is false, each
/// trigger once, with guards.
pub(crate) fn choose_triggers(formula: &Formula<Leaf>, selectivity: &impl Selectivity) -> Vec<Wake> {
    let alternatives = match necessary(formula, selectivity) {
        Some(choice) => choice.alternatives,
        None => {
            let mut alternatives = Vec::new();
            formula.for_each_atom(&mut |&leaf| alternatives.extend(leaf_choice(leaf, selectivity).alternatives));
            alternatives
        }
    };
    let mut wakes: Vec<Wake> = alternatives
        .into_iter()
        .map(|alternative| Wake { trigger: alternative.trigger, guards: guards_of(alternative, selectivity) })
        .collect();
    wakes.sort_unstable();
    // A trigger reached twice keeps guards only if both ways agree on them.
    let mut merged: Vec<Wake> = Vec::with_capacity(wakes.len());
    for wake in wakes {
        match merged.last_mut() {
            Some(last) if last.trigger == wake.trigger => {
                if last.guards != wake.guards {
                    last.guards = Guards::NONE;
                }
            }
            _ => merged.push(wake),
        }
    }
    merged
}

/// The rarest tests of the pool that the trigger does not already test.
fn guards_of(alternative: Alternative, selectivity: &impl Selectivity) -> Guards {
    let in_trigger = |test: TestId| match alternative.trigger {
        Trigger::Test(trigger) => trigger == test,
        Trigger::Pair(first, second) => first == test || second == test,
        Trigger::Atom(_) => false,
    };
    let mut pool: Vec<(f64, TestId)> = alternative
        .pool
        .into_iter()
        .filter(|&test| !in_trigger(test))
        .map(|test| (selectivity.test_estimate(test), test))
        .collect();
    pool.sort_by(|left, right| left.0.total_cmp(&right.0).then(left.1.cmp(&right.1)));
    pool.dedup_by_key(|&mut (_, test)| test);
    Guards::from_tests(pool.into_iter().map(|(_, test)| test))
}

/// The cheapest alternatives of which one holds whenever `formula` does,
/// if the formula's shape gives any.
fn necessary(formula: &Formula<Leaf>, selectivity: &impl Selectivity) -> Option<Choice> {
    match formula {
        Formula::Constant(false) => Some(Choice { alternatives: Vec::new(), cost: 0.0 }),
        Formula::Constant(true) | Formula::Not(_) => None,
        Formula::Atom(leaf) => Some(leaf_choice(*leaf, selectivity)),
        Formula::All(operands) => {
            // Every test of every indexed operand is necessary, so pairs
            // may join tests of different operands, and any of them may
            // guard whichever alternative is chosen.
            let mut tests = Vec::new();
            collect_conjunct_tests(formula, selectivity, &mut tests);
            let mut best = best_of_tests(&tests, selectivity);
            for choice in operands.iter().filter_map(|operand| necessary(operand, selectivity)) {
                if best.as_ref().is_none_or(|best| choice.cost < best.cost) {
                    best = Some(choice);
                }
            }
            let mut best = best?;
            for alternative in &mut best.alternatives {
                alternative.pool.extend_from_slice(&tests);
            }
            Some(best)
        }
        Formula::Any(operands) => {
            let choices = operands.iter().map(|operand| necessary(operand, selectivity)).collect::<Option<Vec<_>>>()?;
            let cost = choices.iter().map(|choice| choice.cost).sum();
            Some(Choice { alternatives: choices.into_iter().flat_map(|choice| choice.alternatives).collect(), cost })
        }
    }
}

/// The alternatives of one atom.
fn leaf_choice(leaf: Leaf, selectivity: &impl Selectivity) -> Choice {
    match leaf {
        Leaf::Decided(atom) => Choice::single(Trigger::Atom(atom), selectivity.atom_estimate(atom)),
        Leaf::Test(test) => Choice::single(Trigger::Test(test), selectivity.test_estimate(test)),
        Leaf::Conjunction(atom) => {
            let tests = selectivity.conjunction_tests(atom);
            let Some(mut choice) = best_of_tests(tests, selectivity) else {
                // An indexed atom always has tests; waking on the atom is
                // the safe answer should it have none.
                return Choice::single(Trigger::Atom(atom), STRUCTURAL_ESTIMATE);
            };
            choice.alternatives.iter_mut().for_each(|alternative| alternative.pool.extend_from_slice(tests));
            choice
        }
    }
}

/// Appends the indexed tests that a conjunction needs, through nested
/// conjunctions.
fn collect_conjunct_tests(formula: &Formula<Leaf>, selectivity: &impl Selectivity, tests: &mut Vec<TestId>) {
    match formula {
        Formula::Atom(Leaf::Test(test)) => tests.push(*test),
        Formula::Atom(Leaf::Conjunction(atom)) => tests.extend_from_slice(selectivity.conjunction_tests(*atom)),
        Formula::All(operands) => {
            operands.iter().for_each(|operand| collect_conjunct_tests(operand, selectivity, tests));
        }
        _ => {}
    }
}

/// The rarer of the rarest single test and the rarest pair, all of
/// `tests` being necessary. A pair is filed under its first test, which
/// must be an equality: satisfied equality tests are few per document,
/// while an ordered test holds for many, and each satisfied first test
/// has its partners looked up.
fn best_of_tests(tests: &[TestId], selectivity: &impl Selectivity) -> Option<Choice> {
    let rarest_first =
        |left: &(f64, TestId), right: &(f64, TestId)| left.0.total_cmp(&right.0).then(left.1.cmp(&right.1));
    let estimated: Vec<(f64, TestId)> = tests.iter().map(|&test| (selectivity.test_estimate(test), test)).collect();
    let &(single_cost, single) = estimated.iter().min_by(|left, right| rarest_first(left, right))?;
    let mut best = Choice::single(Trigger::Test(single), single_cost);
    let outer = estimated
        .iter()
        .filter(|&&(_, test)| selectivity.is_equality(test))
        .min_by(|left, right| rarest_first(left, right));
    if let Some(&(outer_cost, outer)) = outer {
        let inner =
            estimated.iter().filter(|&&(_, test)| test != outer).min_by(|left, right| rarest_first(left, right));
        if let Some(&(inner_cost, inner)) = inner {
            let cost = outer_cost * inner_cost;
            if cost < best.cost {
                best = Choice::single(Trigger::Pair(outer, inner), cost);
            }
        }
    }
    Some(best)
}

/// The set's atoms and tests, seen through their guessed selectivity.
pub(crate) struct SetSelectivity<'s> {
    pub(crate) atoms: &'s AtomTable,
    pub(crate) values: &'s ValueIndex,
}

impl Selectivity for SetSelectivity<'_> {
    fn test_estimate(&self, test: TestId) -> f64 {
        self.values.estimate(test)
    }

    fn is_equality(&self, test: TestId) -> bool {
        self.values.is_equality(test)
    }

    fn atom_estimate(&self, atom: AtomId) -> f64 {
        match self.atoms.get(atom).map(|atom| &atom.test) {
            Some(AtomTest::Residual(_)) => RESIDUAL_ESTIMATE,
            _ => STRUCTURAL_ESTIMATE,
        }
    }

    fn conjunction_tests(&self, atom: AtomId) -> &[TestId] {
        self.atoms.indexed_tests(atom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests 0 to 9 with estimate (id + 1) / 100, equality for even ids;
    /// atom 50 is a conjunction of tests 8 and 9, other atoms decided.
    struct Fixed;

    impl Selectivity for Fixed {
        fn test_estimate(&self, test: TestId) -> f64 {
            (test + 1) as f64 / 100.0
        }
        fn is_equality(&self, test: TestId) -> bool {
            test.is_multiple_of(2)
        }
        fn atom_estimate(&self, _atom: AtomId) -> f64 {
            STRUCTURAL_ESTIMATE
        }
        fn conjunction_tests(&self, atom: AtomId) -> &[TestId] {
            if atom == 50 {
                &[8, 9]
            } else {
                &[]
            }
        }
    }

    fn test(id: TestId) -> Formula<Leaf> {
        Formula::Atom(Leaf::Test(id))
    }

    /// The triggers chosen, without their guards.
    fn triggers(formula: &Formula<Leaf>) -> Vec<Trigger> {
        choose_triggers(formula, &Fixed).into_iter().map(|wake| wake.trigger).collect()
    }

    fn guards(formula: &Formula<Leaf>) -> Vec<Vec<TestId>> {
        choose_triggers(formula, &Fixed).into_iter().map(|wake| wake.guards.tests().collect()).collect()
    }

    #[test]
    fn conjunctions_wait_for_their_rarest_part() {
        let formula = Formula::All(vec![test(5), test(3), Formula::Atom(Leaf::Decided(7))]);
        assert_eq!(triggers(&formula), [Trigger::Test(3)], "no equality to pair with");
        let formula = Formula::All(vec![test(6), test(3), Formula::Atom(Leaf::Conjunction(50))]);
        assert_eq!(triggers(&formula), [Trigger::Pair(6, 3)], "0.07 * 0.04 beats 0.04");
        let nested = Formula::All(vec![test(9), Formula::All(vec![test(2), Formula::Not(Box::new(test(0)))])]);
        assert_eq!(triggers(&nested), [Trigger::Pair(2, 9)], "0.03 * 0.1 beats 0.03");
    }

    #[test]
    fn guards_are_the_next_rarest_necessary_tests() {
        let formula = Formula::All(vec![test(5), test(3), test(7), test(1), test(9)]);
        assert_eq!(triggers(&formula), [Trigger::Test(1)]);
        assert_eq!(guards(&formula), [vec![3, 5, 7]]);
        let formula = Formula::All(vec![test(6), test(3), Formula::Atom(Leaf::Conjunction(50))]);
        assert_eq!(guards(&formula), [vec![8, 9]], "the pair's own tests are not guards");
        let formula = Formula::All(vec![test(7), Formula::Any(vec![test(1), test(2)]), test(9)]);
        assert_eq!(triggers(&formula), [Trigger::Test(1), Trigger::Test(2)]);
        assert_eq!(guards(&formula), [vec![7, 9], vec![7, 9]], "the conjunction guards each operand's trigger");
        let formula = Formula::Any(vec![Formula::All(vec![test(1), test(5)]), Formula::All(vec![test(1), test(7)])]);
        assert_eq!(guards(&formula), [Vec::<TestId>::new()], "one trigger reached two ways keeps no guard");
    }

    #[test]
    fn disjunctions_need_every_operand_and_negations_fall_back() {
        let formula = Formula::Any(vec![test(5), Formula::All(vec![test(1), test(9)])]);
        assert_eq!(triggers(&formula), [Trigger::Test(1), Trigger::Test(5)]);
        let formula = Formula::Any(vec![test(5), Formula::All(vec![test(1), Formula::Not(Box::new(test(9)))])]);
        assert_eq!(triggers(&formula), [Trigger::Test(1), Trigger::Test(5)]);
        let formula = Formula::Any(vec![test(5), Formula::Not(Box::new(test(9)))]);
        assert_eq!(triggers(&formula), [Trigger::Test(5), Trigger::Test(9)], "one trigger per atom");
        let formula = Formula::Any(vec![Formula::Constant(false), Formula::Atom(Leaf::Conjunction(50))]);
        assert_eq!(triggers(&formula), [Trigger::Pair(8, 9)]);
    }
}
