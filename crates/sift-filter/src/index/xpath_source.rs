//! The XPath predicates of all partitions, matched together in one
//! streaming pass over a message's metadata document.
//!
//! Every distinct XPath filter is one predicate, filed in an [`XPathSet`]
//! under its predicate id. The set shares the element paths of all filters
//! in one automaton and checks value predicates only once the structure
//! they hang on has matched; a filter the automaton cannot decide alone is
//! evaluated on the parsed tree, and only when it is a candidate. Adding or
//! removing a predicate touches only its own atoms and states, so
//! subscribing stays cheap however many XPath filters there are.
//!
//! The pass is the costliest predicate source, so the index runs it only
//! when a partition asked for has a conjunction that needs an XPath
//! predicate (see [`crate::index::ContentIndex::matching`]).

use crate::index::predicate::PredicateId;
use crate::xpath::{XPathFilter, XPathScratch, XPathSet};

/// All XPath predicates, keyed by predicate id.
#[derive(Debug, Clone, Default)]
pub(crate) struct XPathSource {
    set: XPathSet<PredicateId>,
}

impl XPathSource {
    /// Files the filter that decides predicate `id`.
    pub(crate) fn insert(&mut self, id: PredicateId, filter: &XPathFilter) {
        self.set.insert(id, filter);
    }

    /// Forgets the filter of predicate `id`.
    pub(crate) fn remove(&mut self, id: PredicateId) {
        self.set.remove(&id);
    }

    /// Appends the predicates whose filter matches the metadata document,
    /// each once, after one streaming pass over it. Malformed metadata
    /// satisfies none, as [`XPathFilter::matches`] says, and leaves
    /// `satisfied` as it was.
    pub(crate) fn collect(&self, metadata: &[u8], scratch: &mut XPathScratch, satisfied: &mut Vec<PredicateId>) {
        // The error only says that the document is malformed, which makes
        // every XPath predicate false; index matching itself never fails.
        let _malformed = self.set.matching(metadata, scratch, satisfied);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(text: &str) -> XPathFilter {
        XPathFilter::parse(text).expect("parses")
    }

    fn matching(source: &XPathSource, metadata: &[u8]) -> Vec<PredicateId> {
        let mut satisfied = vec![99];
        source.collect(metadata, &mut XPathScratch::new(), &mut satisfied);
        satisfied.sort_unstable();
        satisfied
    }

    #[test]
    fn malformed_metadata_satisfies_nothing() {
        let mut source = XPathSource::default();
        source.insert(1, &filter("/a"));
        source.insert(2, &filter("not(/b)"));
        assert_eq!(matching(&source, b"<a/>"), vec![1, 2, 99]);
        assert_eq!(matching(&source, b"<a>"), vec![99], "malformed keeps what was there");
        source.remove(1);
        assert_eq!(matching(&source, b"<a/>"), vec![2, 99]);
        source.remove(2);
        assert_eq!(matching(&source, b"<a/>"), vec![99]);
    }
}
