//! Splits a filter into what the shared automaton answers while it streams
//! and what it leaves to the document tree.
//!
//! A path used at the top level of a filter (alone, under `and`, `or`,
//! `not()`, or compared with a constant) becomes an *atom*: a prefix of
//! element steps without predicates, which the automaton follows, ending at
//! a *capture step*, and a *residual*, an expression evaluated on the
//! captured subtree of each element the prefix reaches. The residual holds
//! the capture step's predicates, the steps after it and the comparison,
//! all of which look only inside that subtree, so evaluating them there is
//! exact. When every path of a filter fits, the filter is a formula over
//! atoms; otherwise it falls back to the tree, and the formula kept is a
//! necessary condition over purely structural atoms, so that the tree is
//! built only for filters whose structure matched.

use crate::compare::ComparisonOp;
use crate::xpath::ast::{Axis, Expr, Kind, LocationPath, NodeTest, Step};
use crate::xpath::document::{XmlDocument, ROOT};
use crate::xpath::eval::{evaluate, holds_at_root};
use crate::xpath::formula::Formula;
use crate::xpath::value::{compare, NodeRef, Value};

/// One step of an automaton path: `name`, `*`, `//name` or `//*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ElementStep {
    /// True for `//`: the element may be any descendant, not only a child.
    pub(crate) descendants: bool,
    /// The element name, or `None` for `*`.
    pub(crate) name: Option<String>,
}

/// One test the automaton answers per document: whether some element that
/// `prefix` reaches from the root has `residual` true, evaluated with the
/// element as the context node on its captured subtree. Without a
/// residual, whether `prefix` reaches any element at all.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AtomSpec {
    pub(crate) prefix: Vec<ElementStep>,
    pub(crate) residual: Option<Expr>,
}

/// How the shared automaton handles one filter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// The formula over atoms is the filter's value on every document.
    Exact(Formula<AtomSpec>),
    /// The filter is evaluated on the document tree, but only when this
    /// formula over structural atoms, which the filter implies, holds.
    Fallback(Formula<AtomSpec>),
}

/// The plan for a parsed filter.
pub(crate) fn plan(expr: &Expr) -> Plan {
    match exact(expr) {
        Some(formula) => Plan::Exact(formula),
        None => Plan::Fallback(requirement(expr)),
    }
}

/// The filter as a formula over atoms, if every path in it fits an atom.
fn exact(expr: &Expr) -> Option<Formula<AtomSpec>> {
    if !expr.mentions_path() {
        return Some(Formula::Constant(holds_at_root(&XmlDocument::empty(), expr)));
    }
    match expr {
        Expr::Or(operands) => operands.iter().map(exact).collect::<Option<Vec<_>>>().map(Formula::Any),
        Expr::And(operands) => operands.iter().map(exact).collect::<Option<Vec<_>>>().map(Formula::All),
        Expr::Not(operand) => exact(operand).map(Formula::negated),
        Expr::Path(path) => path_atom(path, None),
        Expr::Compare { op, left, right } => match (&**left, &**right) {
            (Expr::Path(path), constant) if !constant.mentions_path() => path_against_constant(path, *op, constant),
            (constant, Expr::Path(path)) if !constant.mentions_path() => {
                path_against_constant(path, op.mirrored(), constant)
            }
            _ => None,
        },
        _ => None,
    }
}

/// `path OP constant`, where the constant does not depend on the document.
fn path_against_constant(path: &LocationPath, op: ComparisonOp, constant: &Expr) -> Option<Formula<AtomSpec>> {
    let document = XmlDocument::empty();
    match evaluate(&document, constant, NodeRef::Node(ROOT)) {
        Value::Boolean(wanted) => {
            // Against a boolean, a node-set counts as its own emptiness
            // test, so the comparison is a function of one structural fact.
            let outcome = |not_empty: bool| compare(&document, op, &Value::Boolean(not_empty), &Value::Boolean(wanted));
            match (outcome(false), outcome(true)) {
                (when_empty, when_not_empty) if when_empty == when_not_empty => Some(Formula::Constant(when_empty)),
                (false, _) => path_atom(path, None),
                (true, _) => path_atom(path, None).map(Formula::negated),
            }
        }
        Value::Number(number) => path_atom(path, Some((op, Expr::Number(number)))),
        Value::Text(text) => path_atom(path, Some((op, Expr::Literal(text.into_owned())))),
        Value::Nodes(_) => None,
    }
}

/// The atom for "some node of `path` passes `test`" (or "`path` is not
/// empty" without a test), if the path has an element prefix and looks
/// only inside the capture step's subtree.
fn path_atom(path: &LocationPath, test: Option<(ComparisonOp, Expr)>) -> Option<Formula<AtomSpec>> {
    let steps: Vec<&Step> = path.steps.iter().filter(|step| !step.is_identity()).collect();
    let mut prefix = Vec::new();
    for step in &steps {
        if !step.is_element_step() {
            break;
        }
        prefix.push(element_step(step));
        if !step.predicates.is_empty() {
            break;
        }
    }
    let capture = *steps.get(prefix.len().checked_sub(1)?)?;
    let rest = &steps[prefix.len()..];
    // A position depends on siblings, and an absolute path on the whole
    // document: neither is in the captured subtree.
    let looks_outside = capture.predicates.iter().any(Expr::mentions_absolute_path)
        || rest.iter().any(|step| step.predicates.iter().any(Expr::mentions_absolute_path));
    if capture.is_positional() || looks_outside {
        return None;
    }
    if capture.predicates.is_empty() && rest.is_empty() && test.is_none() {
        return Some(Formula::Atom(AtomSpec { prefix, residual: None }));
    }
    let own =
        Step { descendants: false, axis: Axis::SelfNode, test: NodeTest::Node, predicates: capture.predicates.clone() };
    let steps = std::iter::once(own).chain(rest.iter().map(|step| (*step).clone())).collect();
    let residual_path = Expr::Path(LocationPath { absolute: false, steps });
    let residual = match test {
        None => residual_path,
        Some((op, constant)) => Expr::Compare { op, left: Box::new(residual_path), right: Box::new(constant) },
    };
    Some(Formula::Atom(AtomSpec { prefix, residual: Some(residual) }))
}

fn element_step(step: &Step) -> ElementStep {
    let name = match &step.test {
        NodeTest::Name(name) => Some(name.clone()),
        _ => None,
    };
    ElementStep { descendants: step.descendants, name }
}

/// A formula over structural atoms that holds whenever `expr` does: a
/// path that is not empty, or that compares true with something other
/// than a boolean, needs its element steps to match.
fn requirement(expr: &Expr) -> Formula<AtomSpec> {
    match expr {
        Expr::Or(operands) => Formula::Any(operands.iter().map(requirement).collect()),
        Expr::And(operands) => Formula::All(operands.iter().map(requirement).collect()),
        Expr::Path(path) => structure_of(path),
        Expr::Compare { left, right, .. } if left.kind() != Kind::Boolean && right.kind() != Kind::Boolean => {
            Formula::All(vec![node_set_requirement(left), node_set_requirement(right)])
        }
        _ => Formula::Constant(true),
    }
}

fn node_set_requirement(expr: &Expr) -> Formula<AtomSpec> {
    match expr {
        Expr::Path(path) => structure_of(path),
        _ => Formula::Constant(true),
    }
}

/// The atom "the leading element steps of `path`, predicates ignored,
/// reach some element", or true when the path has no such steps.
fn structure_of(path: &LocationPath) -> Formula<AtomSpec> {
    let prefix: Vec<ElementStep> = path
        .steps
        .iter()
        .filter(|step| !step.is_identity())
        .take_while(|step| step.is_element_step())
        .map(element_step)
        .collect();
    if prefix.is_empty() {
        return Formula::Constant(true);
    }
    Formula::Atom(AtomSpec { prefix, residual: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xpath::parser::parse;

    fn plan_of(text: &str) -> Plan {
        plan(&parse(text).expect("parses"))
    }

    fn atom(steps: &[(bool, &str)], residual: Option<&str>) -> AtomSpec {
        let prefix = steps
            .iter()
            .map(|&(descendants, name)| ElementStep { descendants, name: (name != "*").then(|| name.to_string()) })
            .collect();
        AtomSpec { prefix, residual: residual.map(|text| parse(text).expect("residual parses")) }
    }

    #[test]
    fn predicates_and_comparisons_become_residuals() {
        let Plan::Exact(Formula::Atom(spec)) = plan_of("/metadata/ATO[nickname='KTJR' and serialno='targ1234']") else {
            panic!("exact atom")
        };
        assert_eq!(spec.prefix, atom(&[(false, "metadata"), (false, "ATO")], None).prefix);
        assert_eq!(
            spec.residual.map(|residual| residual.to_string()),
            Some(".[((nickname = 'KTJR') and (serialno = 'targ1234'))]".to_string())
        );
        let Plan::Exact(Formula::All(atoms)) = plan_of("/m/year >= 2003 and 26 >= //day") else {
            panic!("exact conjunction")
        };
        assert_eq!(atoms[0], Formula::Atom(atom(&[(false, "m"), (false, "year")], Some(". >= 2003"))));
        assert_eq!(atoms[1], Formula::Atom(atom(&[(true, "day")], Some(". <= 26"))));
    }

    #[test]
    fn pure_structure_needs_no_residual() {
        assert_eq!(plan_of("//a/*"), Plan::Exact(Formula::Atom(atom(&[(true, "a"), (false, "*")], None))));
        assert_eq!(
            plan_of("not(/a/./b = true())"),
            Plan::Exact(Formula::Not(Box::new(Formula::Atom(atom(&[(false, "a"), (false, "b")], None)))))
        );
        assert_eq!(
            plan_of("/a = false()"),
            Plan::Exact(Formula::Not(Box::new(Formula::Atom(atom(&[(false, "a")], None)))))
        );
        assert_eq!(plan_of("/a >= false()"), Plan::Exact(Formula::Constant(true)));
        assert_eq!(
            plan_of("1 < 2 or /a"),
            Plan::Exact(Formula::Any(vec![Formula::Constant(true), Formula::Atom(atom(&[(false, "a")], None))]))
        );
    }

    #[test]
    fn shapes_outside_the_subtree_fall_back_with_a_structural_requirement() {
        let structural = |steps: &[(bool, &str)]| Formula::Atom(atom(steps, None));
        assert_eq!(plan_of("/a[1]/b"), Plan::Fallback(structural(&[(false, "a"), (false, "b")])));
        assert_eq!(plan_of("/a[b = /c]"), Plan::Fallback(structural(&[(false, "a")])));
        assert_eq!(
            plan_of("/a/b = /c"),
            Plan::Fallback(Formula::All(vec![structural(&[(false, "a"), (false, "b")]), structural(&[(false, "c")])]))
        );
        assert_eq!(plan_of("contains(/a, 'x')"), Plan::Fallback(Formula::Constant(true)));
        assert_eq!(plan_of("//@id"), Plan::Fallback(Formula::Constant(true)));
        assert_eq!(
            plan_of("/a[2] = 1"),
            Plan::Fallback(Formula::All(vec![structural(&[(false, "a")]), Formula::Constant(true)]))
        );
    }

    #[test]
    fn later_steps_may_be_positional_inside_the_capture() {
        let Plan::Exact(Formula::Atom(spec)) = plan_of("/a[@k = 'v']/b[2]/text() = 'x'") else { panic!("exact atom") };
        assert_eq!(spec.prefix.len(), 1);
        assert_eq!(
            spec.residual.map(|residual| residual.to_string()),
            Some("(.[(@k = 'v')]/b[2]/text() = 'x')".to_string())
        );
    }
}
