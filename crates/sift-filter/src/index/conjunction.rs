//! One conjunction of a subscription's filter, and where in its partition it
//! is filed: counted, clustered (checked or sorted), in a direct list, or a
//! candidate for every message.

use std::sync::Arc;

use crate::index::check::Check;
use crate::index::predicate::PredicateId;
use crate::index::range_runs::SortedRange;
use crate::index::residual::Residual;

/// Where a conjunction is filed in its partition, with the positions that
/// make its removal a swap rather than a search.
#[derive(Debug, Clone)]
pub(crate) enum Filing {
    /// Not filed yet.
    Unfiled,
    /// No indexed predicate: on the always-candidate list, at this position.
    Always {
        /// The position on the list.
        position: usize,
    },
    /// No equality predicate: in the counting list of each of its
    /// predicates.
    Counted {
        /// Each predicate, with the conjunction's position in its list.
        memberships: Vec<(PredicateId, usize)>,
    },
    /// A checked member of the cluster of its access predicate (see
    /// `cluster.rs`).
    Clustered {
        /// The equality predicate whose cluster holds it.
        access: PredicateId,
        /// The position in that cluster.
        position: usize,
        /// Its other predicates, tested when the access predicate holds;
        /// interned (`check_lists.rs`).
        checks: Arc<[Check]>,
    },
    /// A sorted member of the cluster of its access predicate: one range
    /// predicate besides it and no residual test (see `range_runs.rs`).
    Sorted {
        /// The equality predicate whose cluster holds it.
        access: PredicateId,
        /// The range predicate it is sorted by, which finds it again.
        range: SortedRange,
    },
    /// One predicate and no residual test: in that predicate's direct list
    /// (see `direct.rs`).
    Direct {
        /// The predicate.
        predicate: PredicateId,
        /// The position in its list.
        position: usize,
    },
}

/// One conjunction of a subscription's filter.
#[derive(Debug, Clone)]
pub(crate) struct Conjunction {
    /// The subscription whose key is output when the conjunction passes.
    pub(crate) subscription: usize,
    /// How many distinct indexed predicates must be counted; 0 unless the
    /// conjunction is counted.
    pub(crate) required: usize,
    /// Tests that must pass once the indexed predicates hold.
    pub(crate) residual: Vec<Residual>,
    /// Where it is filed.
    pub(crate) filing: Filing,
    /// True when one of its predicates is an XPath filter.
    pub(crate) uses_xpath: bool,
    /// True when its subscription's filter is this one conjunction, so that
    /// its key, output at most once per message, needs no deduplication.
    pub(crate) sole: bool,
}

impl Conjunction {
    /// A conjunction not yet filed in its partition; `uses_xpath` says
    /// whether one of its predicates is an XPath filter, `sole` whether it is
    /// its subscription's only conjunction.
    pub(crate) fn new(subscription: usize, residual: Vec<Residual>, uses_xpath: bool, sole: bool) -> Conjunction {
        Conjunction { subscription, required: 0, residual, filing: Filing::Unfiled, uses_xpath, sole }
    }

    /// The interned predicates it needs, for releasing them.
    pub(crate) fn predicates(&self) -> impl Iterator<Item = PredicateId> + '_ {
        type Parts<'a> = ([Option<PredicateId>; 2], &'a [Check], &'a [(PredicateId, usize)]);
        let (single, checks, memberships): Parts<'_> = match &self.filing {
            Filing::Unfiled | Filing::Always { .. } => ([None, None], &[], &[]),
            Filing::Counted { memberships } => ([None, None], &[], memberships),
            Filing::Clustered { access, checks, .. } => ([Some(*access), None], checks, &[]),
            Filing::Sorted { access, range } => ([Some(*access), Some(range.predicate)], &[], &[]),
            Filing::Direct { predicate, .. } => ([Some(*predicate), None], &[], &[]),
        };
        single
            .into_iter()
            .flatten()
            .chain(checks.iter().map(Check::predicate))
            .chain(memberships.iter().map(|(predicate, _)| *predicate))
    }

    /// True when it is counted or direct: it is found through its
    /// predicates being listed as satisfied, so its range predicates must be
    /// enumerated for every message.
    pub(crate) fn enumerates_predicates(&self) -> bool {
        matches!(self.filing, Filing::Counted { .. } | Filing::Direct { .. })
    }

    /// The interned check list of a clustered conjunction, for releasing it.
    pub(crate) fn check_list(&self) -> Option<&Arc<[Check]>> {
        match &self.filing {
            Filing::Clustered { checks, .. } => Some(checks),
            _ => None,
        }
    }

    /// Records that the conjunction now sits at `position` in the list of
    /// `predicate`: its counting list or direct list, or its cluster if it
    /// is the access predicate. Called for the conjunction moved into a
    /// removed one's gap.
    pub(crate) fn move_in_list(&mut self, predicate: PredicateId, to: usize) {
        match &mut self.filing {
            Filing::Counted { memberships } => {
                if let Some(membership) = memberships.iter_mut().find(|(member, _)| *member == predicate) {
                    membership.1 = to;
                }
            }
            Filing::Clustered { access, position, .. } if *access == predicate => *position = to,
            Filing::Direct { predicate: filed, position } if *filed == predicate => *position = to,
            Filing::Unfiled
            | Filing::Always { .. }
            | Filing::Clustered { .. }
            | Filing::Sorted { .. }
            | Filing::Direct { .. } => {}
        }
    }

    /// Records that the conjunction now sits at `to` on the always-candidate
    /// list.
    pub(crate) fn move_in_always(&mut self, to: usize) {
        if let Filing::Always { position } = &mut self.filing {
            *position = to;
        }
    }
}
