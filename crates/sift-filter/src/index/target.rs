//! What a conjunction outputs when it passes, kept beside it in the lists
//! that emit keys directly (`direct.rs`, `sorted_run.rs`).
//!
//! The general path turns a passing conjunction into a key through two
//! lookups in scattered memory, the conjunction and then its subscription,
//! plus the per-subscription "already output" stamp. A conjunction with no
//! residual test needs neither lookup once it is known to pass, so the lists
//! that decide such conjunctions wholesale hold the key itself, and output a
//! run of keys by reading one contiguous slice.
//!
//! The stamp is needed only when the subscription has other conjunctions
//! that may pass the same message (SQL disjuncts, expanded IN lists): each
//! conjunction becomes a candidate at most once per message, so the key of
//! a *sole* conjunction cannot be output twice and skips the stamp.

use crate::index::scratch::Stamps;

/// A conjunction's output: the key of its subscription, with what removal
/// and deduplication need.
#[derive(Debug, Clone)]
pub(crate) struct Target<K> {
    /// The conjunction, for finding the entry again on removal.
    pub(crate) conjunction: usize,
    /// The subscription, for the "already output" stamp.
    pub(crate) subscription: usize,
    /// True when the subscription's filter is this one conjunction, so its
    /// key needs no deduplication.
    pub(crate) sole: bool,
    /// The key output.
    pub(crate) key: K,
}

/// Appends the keys of `targets` to `out`, each subscription once per
/// message.
pub(crate) fn emit_all<K: Clone>(targets: &[Target<K>], stamps: &mut Stamps, out: &mut Vec<K>) {
    out.reserve(targets.len());
    for target in targets {
        emit_one(target, stamps, out);
    }
}

/// Appends the key of `target` to `out` unless its subscription's was
/// output already for this message.
#[inline]
pub(crate) fn emit_one<K: Clone>(target: &Target<K>, stamps: &mut Stamps, out: &mut Vec<K>) {
    if target.sole || stamps.claim_emission(target.subscription) {
        out.push(target.key.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::scratch::IdBounds;

    fn target(subscription: usize, sole: bool) -> Target<&'static str> {
        Target { conjunction: subscription, subscription, sole, key: if sole { "sole" } else { "shared" } }
    }

    #[test]
    fn shared_subscriptions_are_output_once_and_sole_ones_unchecked() {
        let mut stamps = Stamps::default();
        stamps.begin(IdBounds { conjunctions: 0, subscriptions: 2, attributes: 0, predicates: 0 });
        let mut out = Vec::new();
        emit_all(&[target(0, true), target(1, false)], &mut stamps, &mut out);
        emit_all(&[target(1, false)], &mut stamps, &mut out);
        assert_eq!(out, vec!["sole", "shared"]);
        assert!(!stamps.is_emitted(0), "a sole conjunction leaves no stamp");
        assert!(stamps.is_emitted(1));
    }
}
