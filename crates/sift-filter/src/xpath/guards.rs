//! The few extra tests a filter waiting on a trigger also needs, checked
//! before the filter is woken.
//!
//! A trigger is chosen rare, but a filter usually needs more than it: JBI's
//! `basic` subscriptions wait on a month name, which one document in
//! twelve has, and also need a handful of ranges, each true for about half
//! the documents. Checking those ranges' marks while walking the trigger's
//! list, which is contiguous, is much cheaper than evaluating the filter's
//! formula, which lies elsewhere in memory, so most filters that would
//! fail are never woken.

use crate::xpath::set::FilterId;
use crate::xpath::value_index::TestId;

/// How many tests a waiting filter may require besides its trigger.
pub(crate) const GUARD_COUNT: usize = 3;

/// The placeholder of an unused guard.
const NO_GUARD: u32 = u32::MAX;

/// Up to [`GUARD_COUNT`] tests, each necessary for the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Guards([u32; GUARD_COUNT]);

impl Guards {
    /// No guard: the trigger alone wakes the filter.
    pub(crate) const NONE: Guards = Guards([NO_GUARD; GUARD_COUNT]);

    /// The first [`GUARD_COUNT`] of `tests`. An id too large to store is
    /// left out, which only makes the filter wake more often.
    pub(crate) fn from_tests(tests: impl IntoIterator<Item = TestId>) -> Guards {
        let mut guards = Guards::NONE;
        let stored = tests.into_iter().filter_map(|test| u32::try_from(test).ok().filter(|&test| test != NO_GUARD));
        for (slot, test) in guards.0.iter_mut().zip(stored) {
            *slot = test;
        }
        guards
    }

    /// The guard tests.
    pub(crate) fn tests(&self) -> impl Iterator<Item = TestId> + '_ {
        self.0.iter().filter(|&&test| test != NO_GUARD).map(|&test| test as TestId)
    }
}

/// One filter in a trigger's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waiter {
    pub(crate) filter: FilterId,
    pub(crate) guards: Guards,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_tests_that_fit() {
        assert_eq!(Guards::from_tests([4, 2, 9, 7]).tests().collect::<Vec<_>>(), [4, 2, 9]);
        assert_eq!(Guards::from_tests([5]).tests().collect::<Vec<_>>(), [5]);
        assert_eq!(Guards::from_tests([]), Guards::NONE);
        assert_eq!(Guards::from_tests([NO_GUARD as TestId, 3]).tests().collect::<Vec<_>>(), [3]);
    }
}
