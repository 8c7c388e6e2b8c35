//! A filter's formula compiled into one flat array of operations, the form
//! in which woken filters are evaluated.
//!
//! With a hundred thousand filters, evaluating a woken one costs mostly
//! the cache misses of reaching it. A formula tree spreads a filter over
//! several allocations (one per `and` or `or`, plus each conjunction
//! atom's list of tests); the program holds all of it, conjunctions'
//! tests included, in one allocation, read from front to back.
//!
//! The operations are in prefix order: `All(n)` and `Any(n)` are followed
//! by their operands, which take `n` operations in all, so that a decided
//! `and` or `or` skips the rest at once; `Together(n)` is followed by its
//! `n` tests as `Member`s.

use crate::xpath::atoms::{AtomTable, Leaf};
use crate::xpath::automaton::AtomId;
use crate::xpath::formula::Formula;
use crate::xpath::value_index::TestId;

/// One operation of a [`Program`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// A constant.
    Constant(bool),
    /// A structural or residual atom, decided during the pass.
    Decided(AtomId),
    /// An indexed test holds on some element.
    Test(TestId),
    /// The next this many `Member` tests hold on one same element.
    Together(usize),
    /// A test of the preceding `Together`.
    Member(TestId),
    /// The negation of the operand that follows.
    Not,
    /// True when every operand in the next this many operations is.
    All(usize),
    /// True when some operand in the next this many operations is.
    Any(usize),
}

/// How many operations share a cache line, at most.
const OPS_PER_CACHE_LINE: usize = 64 / std::mem::size_of::<Op>();

impl Op {
    /// The number the operation carries, or zero.
    fn payload(&self) -> usize {
        match self {
            Op::Decided(id) | Op::Test(id) | Op::Together(id) | Op::Member(id) | Op::All(id) | Op::Any(id) => *id,
            Op::Constant(_) | Op::Not => 0,
        }
    }
}

/// What a program reads: the values of atoms and tests after the pass.
pub(crate) trait LeafValues {
    /// Whether a structural or residual atom is true.
    fn decided(&self, atom: AtomId) -> bool;
    /// Whether a test holds on some element.
    fn test(&self, test: TestId) -> bool;
    /// Whether all the tests hold on one same element.
    fn together(&self, tests: impl Iterator<Item = TestId> + Clone) -> bool;
}

/// A compiled formula.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Program {
    ops: Box<[Op]>,
}

impl Program {
    /// Compiles `formula`, reading the tests of conjunction atoms in `atoms`.
    pub(crate) fn compile(formula: &Formula<Leaf>, atoms: &AtomTable) -> Program {
        let mut ops = Vec::new();
        emit(formula, atoms, &mut ops);
        Program { ops: ops.into_boxed_slice() }
    }

    /// Reads a word of each cache line of the program, for
    /// [`crate::xpath::collect`] to bring it into cache ahead of evaluation.
    pub(crate) fn touch(&self) -> usize {
        self.ops.iter().step_by(OPS_PER_CACHE_LINE).map(|op| op.payload()).fold(0, |touched, word| touched ^ word)
    }

    /// The formula's value. An empty program, which only a free filter
    /// slot has, is false.
    pub(crate) fn evaluate(&self, values: &impl LeafValues) -> bool {
        !self.ops.is_empty() && evaluate_at(&self.ops, 0, values).0
    }
}

fn emit(formula: &Formula<Leaf>, atoms: &AtomTable, ops: &mut Vec<Op>) {
    match formula {
        Formula::Constant(value) => ops.push(Op::Constant(*value)),
        Formula::Atom(Leaf::Decided(atom)) => ops.push(Op::Decided(*atom)),
        Formula::Atom(Leaf::Test(test)) => ops.push(Op::Test(*test)),
        Formula::Atom(Leaf::Conjunction(atom)) => {
            let tests = atoms.indexed_tests(*atom);
            ops.push(Op::Together(tests.len()));
            ops.extend(tests.iter().map(|&test| Op::Member(test)));
        }
        Formula::Not(operand) => {
            ops.push(Op::Not);
            emit(operand, atoms, ops);
        }
        Formula::All(operands) | Formula::Any(operands) => {
            let header = ops.len();
            ops.push(Op::Constant(false));
            operands.iter().for_each(|operand| emit(operand, atoms, ops));
            let size = ops.len() - header - 1;
            ops[header] = if matches!(formula, Formula::All(_)) { Op::All(size) } else { Op::Any(size) };
        }
    }
}

/// The value of the operand starting at `position`, and where the next
/// operand starts.
fn evaluate_at(ops: &[Op], position: usize, values: &impl LeafValues) -> (bool, usize) {
    let Some(&op) = ops.get(position) else { return (false, position + 1) };
    let next = position + 1;
    match op {
        Op::Constant(value) => (value, next),
        Op::Decided(atom) => (values.decided(atom), next),
        Op::Test(test) => (values.test(test), next),
        Op::Member(test) => (values.test(test), next),
        Op::Together(count) => {
            let members = ops.get(next..next + count).unwrap_or_default();
            let tests = members.iter().filter_map(|op| match op {
                Op::Member(test) => Some(*test),
                _ => None,
            });
            (values.together(tests), next + count)
        }
        Op::Not => {
            let (value, after) = evaluate_at(ops, next, values);
            (!value, after)
        }
        Op::All(size) | Op::Any(size) => {
            // `and` stops at the first false operand, `or` at the first true one.
            let stop_at = matches!(op, Op::Any(_));
            let end = next + size;
            let mut operand = next;
            while operand < end {
                let (value, after) = evaluate_at(ops, operand, values);
                if value == stop_at {
                    return (stop_at, end);
                }
                operand = after;
            }
            (!stop_at, end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests below 10 hold; atoms hold when even; tests hold together when
    /// they are all below 10 and of the same parity.
    struct Values;

    impl LeafValues for Values {
        fn decided(&self, atom: AtomId) -> bool {
            atom.is_multiple_of(2)
        }
        fn test(&self, test: TestId) -> bool {
            test < 10
        }
        fn together(&self, tests: impl Iterator<Item = TestId> + Clone) -> bool {
            let tests: Vec<TestId> = tests.collect();
            tests.iter().all(|&test| test < 10 && test % 2 == tests[0] % 2)
        }
    }

    fn program(ops: Vec<Op>) -> Program {
        Program { ops: ops.into_boxed_slice() }
    }

    #[test]
    fn compiles_formulas_in_prefix_order() {
        let formula = Formula::All(vec![
            Formula::Atom(Leaf::Test(3)),
            Formula::Any(vec![Formula::Atom(Leaf::Decided(4)), Formula::Constant(false)]),
            Formula::Atom(Leaf::Test(1)).negated(),
        ]);
        let compiled = Program::compile(&formula, &AtomTable::default());
        let expected = [Op::All(6), Op::Test(3), Op::Any(2), Op::Decided(4), Op::Constant(false), Op::Not, Op::Test(1)];
        assert_eq!(&*compiled.ops, &expected);
        assert!(!compiled.evaluate(&Values), "test 1 holds, so its negation is false");
    }

    #[test]
    fn evaluates_with_short_cuts() {
        let together = |tests: &[TestId]| {
            let mut ops = vec![Op::Together(tests.len())];
            ops.extend(tests.iter().map(|&test| Op::Member(test)));
            ops
        };
        assert!(program(together(&[2, 4, 8])).evaluate(&Values));
        assert!(!program(together(&[2, 3])).evaluate(&Values));
        let mut any = vec![Op::Any(5)];
        any.extend(together(&[1, 2]));
        any.extend([Op::Not, Op::Decided(3)]);
        assert!(program(any.clone()).evaluate(&Values), "not(atom 3) holds");
        any.push(Op::Test(12));
        any[0] = Op::Any(6);
        let mut all = vec![Op::All(8)];
        all.extend_from_slice(&any);
        all.push(Op::Test(20));
        assert!(!program(all).evaluate(&Values), "test 20 fails the conjunction");
        assert!(!Program::default().evaluate(&Values));
    }
}
