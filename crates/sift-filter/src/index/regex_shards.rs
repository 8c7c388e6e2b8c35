//! The topic regular expressions of all regex predicates, matched together.
//!
//! The expressions are compiled into `regex::RegexSet`s, which test a topic
//! against all their members in one pass. One set for everything would have
//! to be recompiled whole on every subscribe or unsubscribe, which costs time
//! in proportion to all the expressions, and might outgrow any sane size
//! limit. So the expressions are split into shards of at most
//! [`REGEX_SHARD_PATTERNS_MAX`], each with its own set:
//!
//! - A new expression goes into the one *open* shard, as *pending*: it is
//!   matched on its own until the shard's set is rebuilt. When the open shard
//!   is full, its set is rebuilt (it is sealed) and another shard opens. So at
//!   most one shard's worth of expressions is ever matched one by one, and a
//!   bulk of subscriptions costs one set build per shard, not one per
//!   expression.
//! - A removed expression is forgotten at once, but stays in its shard's set
//!   until the set is rebuilt; its matches are ignored meanwhile.
//! - [`RegexShards::refresh`] rebuilds every shard with pending or removed
//!   expressions, off the matching path, for a broker that wants the open
//!   shard sealed after a burst of subscriptions.
//!
//! Every change takes a fresh *epoch* from a process-wide counter, so that a
//! per-topic cache of results (in the scratch) knows when it is stale, even
//! when one scratch serves several indexes.

use std::sync::atomic::{AtomicU64, Ordering};

use regex::{Regex, RegexSet, RegexSetBuilder};
use rustc_hash::FxHashMap;

use crate::index::predicate::PredicateId;
use crate::regex_filter::REGEX_SIZE_LIMIT;

/// Most expressions in one shard. Small enough that rebuilding a shard's set
/// after a change is quick, large enough that a topic is tested against many
/// expressions per pass.
pub const REGEX_SHARD_PATTERNS_MAX: usize = 64;

/// Compiled size limit of one shard's set: room for a full shard of
/// expressions each at the per-filter limit, so that expressions that
/// compiled alone also compile as a set.
const REGEX_SET_SIZE_LIMIT: usize = REGEX_SHARD_PATTERNS_MAX * REGEX_SIZE_LIMIT;

/// The source of epochs; 0 is never handed out, so it can mean "no results".
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

fn fresh_epoch() -> u64 {
    NEXT_EPOCH.fetch_add(1, Ordering::Relaxed)
}

/// An expression and the predicate it decides.
#[derive(Debug, Clone)]
struct Member {
    id: PredicateId,
    regex: Regex,
}

/// Up to [`REGEX_SHARD_PATTERNS_MAX`] expressions with their compiled set.
#[derive(Debug, Clone, Default)]
struct Shard {
    set: Option<RegexSet>,
    /// The members compiled into `set`, by their index in it; `None` once
    /// removed (the set still matches them until it is rebuilt).
    compiled: Vec<Option<Member>>,
    compiled_live: usize,
    /// Members added since `set` was built, matched one by one.
    pending: Vec<Member>,
}

impl Shard {
    /// Slots taken, removed members included until the set is rebuilt.
    fn load(&self) -> usize {
        self.compiled.len() + self.pending.len()
    }

    fn live(&self) -> usize {
        self.compiled_live + self.pending.len()
    }

    fn needs_rebuild(&self) -> bool {
        !self.pending.is_empty() || self.compiled_live < self.compiled.len()
    }
}

/// Where a member is: its shard, and its place in that shard.
#[derive(Debug, Clone, Copy)]
enum Place {
    Compiled(usize, usize),
    Pending(usize, usize),
}

/// All topic expressions, sharded into sets.
#[derive(Debug, Clone)]
pub(crate) struct RegexShards {
    shards: Vec<Shard>,
    places: FxHashMap<PredicateId, Place>,
    open: Option<usize>,
    epoch: u64,
}

impl Default for RegexShards {
    fn default() -> Self {
        RegexShards { shards: Vec::new(), places: FxHashMap::default(), open: None, epoch: fresh_epoch() }
    }
}

impl RegexShards {
    /// True when there are no expressions, so the topic need not be matched.
    pub(crate) fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Changes with every insertion and removal, never repeating across
    /// indexes: the results for a topic are valid while it stays the same.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Expressions matched one by one until their shard is rebuilt.
    pub(crate) fn pending(&self) -> usize {
        self.shards.iter().map(|shard| shard.pending.len()).sum()
    }

    /// Adds the expression that decides predicate `id`, as pending in the open
    /// shard.
    pub(crate) fn insert(&mut self, id: PredicateId, regex: Regex) {
        let shard_index = self.open_shard();
        let shard = &mut self.shards[shard_index];
        shard.pending.push(Member { id, regex });
        self.places.insert(id, Place::Pending(shard_index, shard.pending.len() - 1));
        self.epoch = fresh_epoch();
    }

    /// Forgets the expression of predicate `id`.
    pub(crate) fn remove(&mut self, id: PredicateId) {
        let Some(place) = self.places.remove(&id) else { return };
        self.epoch = fresh_epoch();
        match place {
            Place::Compiled(shard_index, index) => {
                let shard = &mut self.shards[shard_index];
                shard.compiled[index] = None;
                shard.compiled_live -= 1;
                if shard.live() == 0 {
                    // Nothing left to match: drop the set now rather than
                    // test topics against dead expressions.
                    *shard = Shard::default();
                }
            }
            Place::Pending(shard_index, index) => {
                let shard = &mut self.shards[shard_index];
                shard.pending.swap_remove(index);
                if let Some(moved) = shard.pending.get(index) {
                    self.places.insert(moved.id, Place::Pending(shard_index, index));
                }
            }
        }
    }

    /// Rebuilds every shard with pending or removed expressions.
    pub(crate) fn refresh(&mut self) {
        for shard_index in 0..self.shards.len() {
            if self.shards[shard_index].needs_rebuild() {
                self.rebuild(shard_index);
            }
        }
    }

    /// The shard new expressions go to, sealing the current one when full.
    fn open_shard(&mut self) -> usize {
        if let Some(open) = self.open {
            if self.shards[open].load() < REGEX_SHARD_PATTERNS_MAX {
                return open;
            }
            self.rebuild(open);
        }
        let roomy = self.shards.iter().position(|shard| shard.live() < REGEX_SHARD_PATTERNS_MAX);
        let chosen = match roomy {
            Some(index) => {
                // Compact away removed members, so the free room is usable.
                if self.shards[index].load() >= REGEX_SHARD_PATTERNS_MAX {
                    self.rebuild(index);
                }
                index
            }
            None => {
                self.shards.push(Shard::default());
                self.shards.len() - 1
            }
        };
        self.open = Some(chosen);
        chosen
    }

    /// Compiles a shard's live members into a new set. Should the set not
    /// compile (it cannot be bigger than its members were alone, but the
    /// limit is approximate), the members stay pending and are matched one
    /// by one: slower, still exact.
    fn rebuild(&mut self, shard_index: usize) {
        let shard = &mut self.shards[shard_index];
        let mut members: Vec<Member> = shard.compiled.drain(..).flatten().collect();
        members.append(&mut shard.pending);
        let built = if members.is_empty() {
            None
        } else {
            let patterns = members.iter().map(|member| member.regex.as_str());
            RegexSetBuilder::new(patterns).size_limit(REGEX_SET_SIZE_LIMIT).build().ok()
        };
        match built {
            Some(set) => {
                for (index, member) in members.iter().enumerate() {
                    self.places.insert(member.id, Place::Compiled(shard_index, index));
                }
                shard.compiled_live = members.len();
                shard.compiled = members.into_iter().map(Some).collect();
                shard.set = Some(set);
            }
            None => {
                for (index, member) in members.iter().enumerate() {
                    self.places.insert(member.id, Place::Pending(shard_index, index));
                }
                shard.compiled_live = 0;
                shard.pending = members;
                shard.set = None;
            }
        }
    }

    /// Appends the predicates whose expression matches `topic`.
    pub(crate) fn collect(&self, topic: &str, satisfied: &mut Vec<PredicateId>) {
        for shard in &self.shards {
            if let Some(set) = &shard.set {
                for index in set.matches(topic).iter() {
                    if let Some(Some(member)) = shard.compiled.get(index) {
                        satisfied.push(member.id);
                    }
                }
            }
            satisfied
                .extend(shard.pending.iter().filter(|member| member.regex.is_match(topic)).map(|member| member.id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regex(text: &str) -> Regex {
        Regex::new(text).expect("compiles")
    }

    fn matching(shards: &RegexShards, topic: &str) -> Vec<PredicateId> {
        let mut satisfied = Vec::new();
        shards.collect(topic, &mut satisfied);
        satisfied.sort_unstable();
        satisfied
    }

    #[test]
    fn pending_and_compiled_members_match_alike() {
        let mut shards = RegexShards::default();
        shards.insert(1, regex("^a"));
        shards.insert(2, regex("b$"));
        assert_eq!(shards.pending(), 2);
        assert_eq!(matching(&shards, "ab"), vec![1, 2]);
        shards.refresh();
        assert_eq!(shards.pending(), 0);
        assert_eq!(matching(&shards, "ab"), vec![1, 2]);
        assert_eq!(matching(&shards, "xb"), vec![2]);
    }

    #[test]
    fn removed_members_stop_matching_before_the_rebuild() {
        let mut shards = RegexShards::default();
        shards.insert(1, regex("a"));
        shards.insert(2, regex("a"));
        shards.refresh();
        let epoch = shards.epoch();
        shards.remove(1);
        assert_ne!(shards.epoch(), epoch);
        assert_eq!(matching(&shards, "a"), vec![2]);
        shards.remove(2);
        assert!(shards.is_empty());
        assert!(matching(&shards, "a").is_empty());
    }

    #[test]
    fn full_shards_are_sealed_and_others_opened() {
        let mut shards = RegexShards::default();
        let count = 3 * REGEX_SHARD_PATTERNS_MAX + 5;
        for id in 0..count {
            shards.insert(id, regex(&format!("^t{id}$")));
        }
        assert_eq!(shards.shards.len(), 4);
        assert_eq!(shards.pending(), 5, "only the open shard is pending");
        for id in (0..count).step_by(7) {
            assert_eq!(matching(&shards, &format!("t{id}")), vec![id]);
        }
        // Emptying most of the first shard lets new members reuse its room
        // once the open shard is full, rather than open a fifth shard.
        for id in 0..REGEX_SHARD_PATTERNS_MAX - 1 {
            shards.remove(id);
        }
        for id in count..count + REGEX_SHARD_PATTERNS_MAX {
            shards.insert(id, regex(&format!("^t{id}$")));
        }
        assert_eq!(shards.shards.len(), 4);
        assert_eq!(
            matching(&shards, &format!("t{}", REGEX_SHARD_PATTERNS_MAX - 1)),
            vec![REGEX_SHARD_PATTERNS_MAX - 1]
        );
        assert_eq!(matching(&shards, &format!("t{count}")), vec![count]);
        assert!(matching(&shards, "t0").is_empty());
    }
}
