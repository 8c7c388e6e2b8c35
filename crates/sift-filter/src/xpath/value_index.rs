//! The value index: every indexed test of every filter, stored once per
//! (state, relative path, kind, constant) and grouped per (state, relative
//! path), so that at the end tag of a captured element each group reads its
//! path once and finds the satisfied tests by lookup instead of evaluating
//! each filter's residual.
//!
//! Tests are shared by the atoms that use them and counted; adding or
//! removing one touches its group's maps and arrays only.

use rustc_hash::FxHashMap;

use crate::xpath::automaton::{Automaton, StateId};
use crate::xpath::guards::Waiter;
use crate::xpath::relpath::RelPath;
use crate::xpath::value_group::Group;
use crate::xpath::value_test::{TestKind, TestSpec};

/// Index of a test.
pub(crate) type TestId = usize;

/// Index of a group.
pub(crate) type GroupId = usize;

/// How often a `!=` test on text is guessed to hold: nearly always.
const DIFFERS_ESTIMATE: f64 = 1.0;

/// One indexed test and the filters that wait for it.
#[derive(Debug, Clone)]
pub(crate) struct Test {
    pub(crate) group: GroupId,
    pub(crate) kind: TestKind,
    /// The atoms using the test; at zero it is removed.
    users: usize,
    /// How many filters mention the test, for selectivity guesses.
    mentions: usize,
    /// Filters to evaluate when the test holds (see `keys`).
    pub(crate) triggered: Vec<Waiter>,
    /// Filters to evaluate when both this test, an equality, and the
    /// partner hold, under the partner.
    pub(crate) pairs: FxHashMap<TestId, Vec<Waiter>>,
}

/// All indexed tests, and their groups.
#[derive(Debug, Clone, Default)]
pub(crate) struct ValueIndex {
    groups: Vec<Option<Group>>,
    free_groups: Vec<GroupId>,
    group_ids: FxHashMap<(StateId, RelPath), GroupId>,
    tests: Vec<Option<Test>>,
    free_tests: Vec<TestId>,
    test_ids: FxHashMap<(GroupId, TestKind), TestId>,
}

impl ValueIndex {
    /// One more than the largest test id in use or free.
    pub(crate) fn test_bound(&self) -> usize {
        self.tests.len()
    }

    pub(crate) fn test(&self, id: TestId) -> Option<&Test> {
        self.tests.get(id).and_then(Option::as_ref)
    }

    pub(crate) fn test_mut(&mut self, id: TestId) -> Option<&mut Test> {
        self.tests.get_mut(id).and_then(Option::as_mut)
    }

    pub(crate) fn group(&self, id: GroupId) -> Option<&Group> {
        self.groups.get(id).and_then(Option::as_ref)
    }

    /// The number of live tests and groups, for tests and statistics.
    #[cfg(test)]
    pub(crate) fn live(&self) -> (usize, usize) {
        (self.test_ids.len(), self.group_ids.len())
    }

    /// The test for `spec` on the elements of `state`, created (with its
    /// group) if new, with one more user.
    pub(crate) fn acquire(&mut self, automaton: &mut Automaton, state: StateId, spec: TestSpec) -> TestId {
        let group = self.acquire_group(automaton, state, spec.path);
        if let Some(&existing) = self.test_ids.get(&(group, spec.kind.clone())) {
            if let Some(test) = self.test_mut(existing) {
                test.users += 1;
            }
            return existing;
        }
        let id = self.free_tests.pop().unwrap_or(self.tests.len());
        if let Some(group) = self.groups.get_mut(group).and_then(Option::as_mut) {
            group.add(&spec.kind, id);
        }
        self.test_ids.insert((group, spec.kind.clone()), id);
        let test =
            Test { group, kind: spec.kind, users: 1, mentions: 0, triggered: Vec::new(), pairs: FxHashMap::default() };
        if id == self.tests.len() {
            self.tests.push(Some(test));
        } else {
            self.tests[id] = Some(test);
        }
        id
    }

    fn acquire_group(&mut self, automaton: &mut Automaton, state: StateId, path: RelPath) -> GroupId {
        if let Some(&existing) = self.group_ids.get(&(state, path.clone())) {
            return existing;
        }
        let id = self.free_groups.pop().unwrap_or(self.groups.len());
        let mut group = Group::new(state, path.clone());
        if let Some(state) = automaton.state_mut(state) {
            group.slot = state.groups.len();
            state.groups.push(id);
        }
        self.group_ids.insert((state, path), id);
        if id == self.groups.len() {
            self.groups.push(Some(group));
        } else {
            self.groups[id] = Some(group);
        }
        id
    }

    /// Drops a user of the test, removing the test when it has none left,
    /// and its group when that was the group's last test.
    pub(crate) fn release(&mut self, automaton: &mut Automaton, id: TestId) {
        let Some(test) = self.test_mut(id) else { return };
        test.users = test.users.saturating_sub(1);
        if test.users > 0 {
            return;
        }
        let Some(test) = self.tests[id].take() else { return };
        self.free_tests.push(id);
        self.test_ids.remove(&(test.group, test.kind.clone()));
        let Some(group) = self.groups.get_mut(test.group).and_then(Option::as_mut) else { return };
        group.remove(&test.kind);
        if group.is_empty() {
            self.delete_group(automaton, test.group);
        }
    }

    fn delete_group(&mut self, automaton: &mut Automaton, id: GroupId) {
        let Some(group) = self.groups[id].take() else { return };
        self.free_groups.push(id);
        self.group_ids.remove(&(group.state, group.path));
        let Some(state) = automaton.state_mut(group.state) else { return };
        state.groups.swap_remove(group.slot);
        // The group moved into the freed place must learn its new slot.
        if let Some(moved) = state.groups.get(group.slot).and_then(|&moved| self.groups[moved].as_mut()) {
            moved.slot = group.slot;
        }
    }

    /// Counts one more (or, with `added` false, one fewer) filter
    /// mentioning the test.
    pub(crate) fn count_mention(&mut self, id: TestId, added: bool) {
        let Some(test) = self.tests.get_mut(id).and_then(Option::as_mut) else { return };
        let change = |count: &mut usize| *count = if added { *count + 1 } else { count.saturating_sub(1) };
        change(&mut test.mentions);
        if test.kind.is_equality() {
            if let Some(group) = self.groups.get_mut(test.group).and_then(Option::as_mut) {
                change(&mut group.equality_mentions);
            }
        }
    }

    /// True for tests a hash lookup answers (`=`), which pair keys use.
    pub(crate) fn is_equality(&self, id: TestId) -> bool {
        self.test(id).is_some_and(|test| test.kind.is_equality())
    }

    /// A guess at the probability that a document satisfies the test,
    /// used to choose which tests wake a filter. An equality test counts
    /// as the share of its group's filters that name its constant
    /// (subscribers are taken to want the values documents carry); an
    /// ordered test by the rank of its threshold; `!=` as nearly always.
    pub(crate) fn estimate(&self, id: TestId) -> f64 {
        let Some(test) = self.test(id) else { return 1.0 };
        let Some(group) = self.group(test.group) else { return 1.0 };
        match &test.kind {
            TestKind::TextEquals(_) | TestKind::NumberEquals(_) => {
                (test.mentions + 1) as f64 / (group.equality_mentions + 2) as f64
            }
            TestKind::TextDiffers(_) => DIFFERS_ESTIMATE,
            TestKind::Ordered(op, threshold) => group.range_estimate(*op, *threshold),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::xpath::{XPathFilter, XPathScratch, XPathSet};

    fn set_of(texts: &[String]) -> XPathSet<usize> {
        let mut set = XPathSet::new();
        for (key, text) in texts.iter().enumerate() {
            set.insert(key, &XPathFilter::parse(text).expect("parses"));
        }
        set
    }

    fn matching(set: &XPathSet<usize>, document: &str) -> Vec<usize> {
        let mut matched = Vec::new();
        set.matching(document.as_bytes(), &mut XPathScratch::new(), &mut matched).expect("well-formed");
        matched.sort_unstable();
        matched
    }

    #[test]
    fn tests_are_shared_and_grouped_by_state_and_path() {
        let texts: Vec<String> = (0..1000)
            .map(|key| format!("/m/r[a = 'v{}' and b >= {}] and /m/r/c != {}", key % 10, key % 5, key % 3))
            .collect();
        let set = set_of(&texts);
        // Groups: r with a, r with b, c with itself. Tests: ten texts,
        // five thresholds, three numbers to differ from.
        assert_eq!(set.values.live(), (18, 3));
        assert_eq!(set.state_count(), 4, "start, m, r, c");
        let document = "<m><r><a>v3</a><b>2</b></r><r><c>1</c></r></m>";
        let wanted: Vec<usize> = (0..1000).filter(|key| key % 10 == 3 && key % 5 <= 2 && key % 3 != 1).collect();
        assert_eq!(matching(&set, document), wanted);
    }

    #[test]
    fn conjunctions_hold_on_one_element_not_across_siblings() {
        let set = set_of(&["/m/r[a = 1 and b = 'x']".to_string(), "/m/r[a = 1] and /m/r[b = 'x']".to_string()]);
        assert_eq!(matching(&set, "<m><r><a>1</a><b>x</b></r></m>"), [0, 1]);
        assert_eq!(matching(&set, "<m><r><a>1</a></r><r><b>x</b></r></m>"), [1], "two siblings");
        assert_eq!(matching(&set, "<m><r><a>1</a></r><r><a>1</a><b>x</b></r></m>"), [0, 1], "the second has both");
        assert_eq!(matching(&set, "<m><r><a>2</a><a>1.0</a><b>y</b><b>x</b></r></m>"), [0, 1], "some node of each");
    }

    #[test]
    fn nested_elements_of_one_state_are_told_apart() {
        let set = set_of(&["//r[a = 1 and b = 2]".to_string()]);
        assert!(matching(&set, "<m><r><a>1</a><r><b>2</b></r></r></m>").is_empty());
        assert_eq!(matching(&set, "<m><r><a>1</a><r><b>2</b><a>1</a></r></r></m>"), [0]);
    }

    #[test]
    fn removal_drops_unused_tests_and_groups() {
        let texts: Vec<String> = (0..40).map(|key| format!("/m/r[a = {}] or /m/r/@k < {}", key % 4, key % 7)).collect();
        let mut set = set_of(&texts);
        assert_eq!(set.values.live(), (11, 2));
        for key in (0..40).filter(|key| key % 4 != 0) {
            assert!(set.remove(&key));
        }
        // Left: keys 0, 4, ..., 36, with a = 0 and seven thresholds.
        assert_eq!(set.values.live(), (8, 2));
        let wanted: Vec<usize> = (0..40).filter(|key| key % 4 == 0 && key % 7 > 3).collect();
        assert_eq!(matching(&set, "<m><r k='3'><a>1</a></r></m>"), wanted);
        for key in (0..40).filter(|key| key % 4 == 0) {
            assert!(set.remove(&key));
        }
        assert_eq!(set.values.live(), (0, 0));
        assert_eq!(set.state_count(), 1);
    }

    #[test]
    fn woken_filters_grow_with_what_matches() {
        let texts: Vec<String> = (0..5000)
            .map(|key| {
                format!("/m/ATO[nickname = 'K{}' and serialno = 'targ{key}'] and /m/T[hour >= {}]", key % 10, key % 24)
            })
            .collect();
        let set = set_of(&texts);
        let mut scratch = XPathScratch::new();
        let mut matched = Vec::new();
        let document = "<m><ATO><nickname>K4</nickname><serialno>targ1234</serialno></ATO><T><hour>20</hour></T></m>";
        set.matching(document.as_bytes(), &mut scratch, &mut matched).expect("well-formed");
        assert_eq!(matched, [1234]);
        assert!(scratch.candidates.len() <= 1, "woken: {}", scratch.candidates.len());
    }
}
