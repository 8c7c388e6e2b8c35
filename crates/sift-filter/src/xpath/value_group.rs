//! The indexed tests of one relative path at one automaton state, grouped
//! so that one reading of the path's values on a captured element answers
//! them all: equality tests in hash maps from the constant to the test,
//! ordered tests in sorted arrays per operator.

use std::borrow::Cow;

use rustc_hash::FxHashMap;

use crate::compare::ComparisonOp;
use crate::xpath::automaton::StateId;
use crate::xpath::document::{NodeId, XmlDocument};
use crate::xpath::range_tests::{NumberSummary, RangeTests};
use crate::xpath::relpath::RelPath;
use crate::xpath::value::string_to_number;
use crate::xpath::value_index::TestId;
use crate::xpath::value_test::{NumberKey, TestKind};

/// The operators with a sorted array each, in the order of `ranges`.
const RANGE_OPS: [ComparisonOp; 5] = [
    ComparisonOp::NotEqual,
    ComparisonOp::Less,
    ComparisonOp::LessOrEqual,
    ComparisonOp::Greater,
    ComparisonOp::GreaterOrEqual,
];

/// The tests on one path from the elements of one state.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) state: StateId,
    pub(crate) path: RelPath,
    /// Where the group sits in its state's `groups`.
    pub(crate) slot: usize,
    text_equals: FxHashMap<Box<str>, TestId>,
    text_differs: FxHashMap<Box<str>, TestId>,
    number_equals: FxHashMap<NumberKey, TestId>,
    /// One array per operator of [`RANGE_OPS`].
    ranges: [RangeTests; RANGE_OPS.len()],
    /// The number of tests in the group.
    tests: usize,
    /// How many filters mention an equality test of the group, each test
    /// counted per filter: the denominator of equality estimates.
    pub(crate) equality_mentions: usize,
}

/// Position of an operator in [`RANGE_OPS`]; `=` has none.
fn range_slot(op: ComparisonOp) -> Option<usize> {
    RANGE_OPS.iter().position(|&candidate| candidate == op)
}

impl Group {
    /// An empty group for `path` at `state`.
    pub(crate) fn new(state: StateId, path: RelPath) -> Group {
        Group {
            state,
            path,
            slot: 0,
            text_equals: FxHashMap::default(),
            text_differs: FxHashMap::default(),
            number_equals: FxHashMap::default(),
            ranges: Default::default(),
            tests: 0,
            equality_mentions: 0,
        }
    }

    /// True when the group holds no test.
    pub(crate) fn is_empty(&self) -> bool {
        self.tests == 0
    }

    /// Files test `id`, which no test of the group has the kind of.
    pub(crate) fn add(&mut self, kind: &TestKind, id: TestId) {
        self.tests += 1;
        match kind {
            TestKind::TextEquals(text) => {
                self.text_equals.insert(text.clone(), id);
            }
            TestKind::TextDiffers(text) => {
                self.text_differs.insert(text.clone(), id);
            }
            TestKind::NumberEquals(number) => {
                self.number_equals.insert(*number, id);
            }
            TestKind::Ordered(op, threshold) => {
                if let Some(slot) = range_slot(*op) {
                    self.ranges[slot].insert(threshold.value(), id);
                }
            }
        }
    }

    /// Drops the test of this kind.
    pub(crate) fn remove(&mut self, kind: &TestKind) {
        self.tests = self.tests.saturating_sub(1);
        match kind {
            TestKind::TextEquals(text) => {
                self.text_equals.remove(text);
            }
            TestKind::TextDiffers(text) => {
                self.text_differs.remove(text);
            }
            TestKind::NumberEquals(number) => {
                self.number_equals.remove(number);
            }
            TestKind::Ordered(op, threshold) => {
                if let Some(slot) = range_slot(*op) {
                    self.ranges[slot].remove(threshold.value());
                }
            }
        }
    }

    /// A guess at how often an ordered test is satisfied (see
    /// [`RangeTests::estimate`]).
    pub(crate) fn range_estimate(&self, op: ComparisonOp, threshold: NumberKey) -> f64 {
        range_slot(op).map_or(1.0, |slot| self.ranges[slot].estimate(op, threshold.value()))
    }

    /// True when some test needs the values as numbers.
    fn needs_numbers(&self) -> bool {
        !self.number_equals.is_empty() || self.ranges.iter().any(|range| !range.is_empty())
    }

    /// Reads the path's values from `node` once and calls `mark` with each
    /// test that some value satisfies, possibly more than once.
    pub(crate) fn satisfied(&self, document: &XmlDocument, node: NodeId, mark: &mut impl FnMut(TestId)) {
        let needs_numbers = self.needs_numbers();
        let needs_texts = !self.text_differs.is_empty();
        let mut texts = DistinctTexts::default();
        let mut numbers = NumberSummary::default();
        self.path.for_each_value(document, node, &mut |value| {
            if let Some(&test) = self.text_equals.get(&*value) {
                mark(test);
            }
            if needs_numbers {
                let number = string_to_number(&value);
                if let Some(&test) = NumberKey::new(number).and_then(|key| self.number_equals.get(&key)) {
                    mark(test);
                }
                numbers.add(number);
            }
            if needs_texts {
                texts.add(value);
            }
        });
        self.mark_differing(&texts, mark);
        for (range, op) in self.ranges.iter().zip(RANGE_OPS) {
            if !range.is_empty() && !numbers.is_empty() {
                range.satisfied(op, &numbers, mark);
            }
        }
    }

    /// `path != 'text'` holds when some value is not the text: for every
    /// test once two distinct values were seen, and for all but the one
    /// naming it when only one was.
    fn mark_differing(&self, texts: &DistinctTexts<'_>, mark: &mut impl FnMut(TestId)) {
        let Some(first) = &texts.first else { return };
        for (text, &test) in &self.text_differs {
            if texts.several || **text != **first {
                mark(test);
            }
        }
    }
}

/// Whether a path's string-values were all one text.
#[derive(Debug, Default)]
struct DistinctTexts<'d> {
    first: Option<Cow<'d, str>>,
    several: bool,
}

impl<'d> DistinctTexts<'d> {
    fn add(&mut self, value: Cow<'d, str>) {
        match &self.first {
            None => self.first = Some(value),
            Some(first) => self.several |= *first != value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xpath::ast::Expr;
    use crate::xpath::document::ROOT;
    use crate::xpath::parser::parse;

    fn path(text: &str) -> RelPath {
        let Expr::Path(path) = parse(text).expect("parses") else { panic!("a path") };
        RelPath::from_path(&path).expect("a relative path")
    }

    fn number(value: f64) -> NumberKey {
        NumberKey::new(value).expect("not NaN")
    }

    /// A group on `b` with tests 0 to 6.
    fn group() -> Group {
        let mut group = Group::new(1, path("b"));
        let kinds = [
            TestKind::TextEquals("x".into()),
            TestKind::TextEquals("3".into()),
            TestKind::NumberEquals(number(3.0)),
            TestKind::TextDiffers("x".into()),
            TestKind::Ordered(ComparisonOp::GreaterOrEqual, number(2.0)),
            TestKind::Ordered(ComparisonOp::Less, number(3.0)),
            TestKind::Ordered(ComparisonOp::NotEqual, number(3.0)),
        ];
        for (id, kind) in kinds.iter().enumerate() {
            group.add(kind, id);
        }
        group
    }

    fn satisfied(group: &Group, xml: &str) -> Vec<TestId> {
        let document = XmlDocument::parse(xml.as_bytes()).expect("well-formed");
        let element = document.children(ROOT).next().expect("root element");
        let mut marked = Vec::new();
        group.satisfied(&document, element, &mut |test| marked.push(test));
        marked.sort_unstable();
        marked.dedup();
        marked
    }

    #[test]
    fn equality_maps_compare_strings_and_numbers_apart() {
        let group = group();
        assert_eq!(satisfied(&group, "<a><b>3</b></a>"), [1, 2, 3, 4]);
        assert_eq!(satisfied(&group, "<a><b> 3.0 </b></a>"), [2, 3, 4], "the text differs, the number is 3");
        assert_eq!(satisfied(&group, "<a><b>x</b></a>"), [0, 6], "x is NaN, which only != takes");
        assert!(satisfied(&group, "<a><c>3</c></a>").is_empty(), "no node, no test");
    }

    #[test]
    fn several_values_satisfy_what_any_of_them_does() {
        let group = group();
        assert_eq!(satisfied(&group, "<a><b>x</b><b>2.5</b></a>"), [0, 3, 4, 5, 6]);
        assert_eq!(satisfied(&group, "<a><b>x</b><b>x</b></a>"), [0, 6], "one distinct text is not different from x");
        assert_eq!(satisfied(&group, "<a><b>3</b><b>3</b></a>"), [1, 2, 3, 4]);
    }

    #[test]
    fn removal_leaves_the_other_tests() {
        let mut group = group();
        group.remove(&TestKind::TextEquals("3".into()));
        group.remove(&TestKind::Ordered(ComparisonOp::GreaterOrEqual, number(2.0)));
        assert_eq!(satisfied(&group, "<a><b>3</b></a>"), [2, 3]);
        for kind in [
            TestKind::TextEquals("x".into()),
            TestKind::NumberEquals(number(3.0)),
            TestKind::TextDiffers("x".into()),
            TestKind::Ordered(ComparisonOp::Less, number(3.0)),
            TestKind::Ordered(ComparisonOp::NotEqual, number(3.0)),
        ] {
            assert!(!group.is_empty());
            group.remove(&kind);
        }
        assert!(group.is_empty());
        assert!(!group.needs_numbers());
    }
}
