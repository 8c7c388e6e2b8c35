//! Boolean formulas over atoms: the shape in which the shared automaton
//! keeps each filter, with one atom per path test it can answer.

/// A boolean formula whose leaves are atoms of type `A`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Formula<A> {
    /// A constant.
    Constant(bool),
    /// An atom, true or false per document.
    Atom(A),
    /// The negation of a formula.
    Not(Box<Formula<A>>),
    /// True when every operand is.
    All(Vec<Formula<A>>),
    /// True when some operand is.
    Any(Vec<Formula<A>>),
}

impl<A> Formula<A> {
    /// The formula's value, given each atom's.
    pub(crate) fn evaluate(&self, atom_holds: &impl Fn(&A) -> bool) -> bool {
        match self {
            Formula::Constant(value) => *value,
            Formula::Atom(atom) => atom_holds(atom),
            Formula::Not(operand) => !operand.evaluate(atom_holds),
            Formula::All(operands) => operands.iter().all(|operand| operand.evaluate(atom_holds)),
            Formula::Any(operands) => operands.iter().any(|operand| operand.evaluate(atom_holds)),
        }
    }

    /// The same formula with each atom replaced by `convert(atom)`, converted
    /// in order from left to right.
    pub(crate) fn map<B>(self, convert: &mut impl FnMut(A) -> B) -> Formula<B> {
        match self {
            Formula::Constant(value) => Formula::Constant(value),
            Formula::Atom(atom) => Formula::Atom(convert(atom)),
            Formula::Not(operand) => Formula::Not(Box::new(operand.map(convert))),
            Formula::All(operands) => Formula::All(operands.into_iter().map(|operand| operand.map(convert)).collect()),
            Formula::Any(operands) => Formula::Any(operands.into_iter().map(|operand| operand.map(convert)).collect()),
        }
    }

    /// Calls `visit` with each atom, from left to right.
    pub(crate) fn for_each_atom(&self, visit: &mut impl FnMut(&A)) {
        match self {
            Formula::Constant(_) => {}
            Formula::Atom(atom) => visit(atom),
            Formula::Not(operand) => operand.for_each_atom(visit),
            Formula::All(operands) | Formula::Any(operands) => {
                operands.iter().for_each(|operand| operand.for_each_atom(visit));
            }
        }
    }

    /// The formula negated.
    pub(crate) fn negated(self) -> Formula<A> {
        match self {
            Formula::Constant(value) => Formula::Constant(!value),
            Formula::Not(operand) => *operand,
            other => Formula::Not(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_and_maps() {
        let formula = Formula::All(vec![
            Formula::Atom(1),
            Formula::Any(vec![Formula::Atom(2), Formula::Constant(false)]),
            Formula::Atom(3).negated(),
        ]);
        assert!(formula.evaluate(&|atom| *atom != 3));
        assert!(!formula.evaluate(&|atom| *atom != 2));
        let mut seen = Vec::new();
        let mapped = formula.map(&mut |atom| {
            seen.push(atom);
            atom * 10
        });
        assert_eq!(seen, [1, 2, 3]);
        let mut visited = Vec::new();
        mapped.for_each_atom(&mut |atom| visited.push(*atom));
        assert_eq!(visited, [10, 20, 30]);
        assert!(mapped.evaluate(&|atom| *atom == 10 || *atom == 20));
        assert_eq!(Formula::<u8>::Constant(true).negated(), Formula::Constant(false));
    }
}
