//! Where each Raft entry starts in the stream's log: an entry of `n`
//! messages takes `n` records, every other entry one, so a Raft index and
//! a stream sequence differ by the messages batched before it.
//!
//! The map keeps only break points: `(index, seq)` pairs such that every
//! entry from one break point to the next takes one record. An entry that
//! takes some other count adds a break point after it. So a log written a
//! message per entry (a publisher that waits for each confirm) has one
//! break point, and one written in batches has one per batch: a few bytes
//! per append, not per message.

use std::collections::BTreeMap;

/// Index → first sequence, as break points.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqMap {
    breaks: BTreeMap<u64, u64>,
}

impl SeqMap {
    /// A map whose entry `index` starts at `seq`, and nothing before.
    pub fn starting(index: u64, seq: u64) -> SeqMap {
        SeqMap { breaks: BTreeMap::from([(index, seq)]) }
    }

    /// The sequence entry `index` starts at (or would start at, for the
    /// next one); `None` before the first break point.
    pub fn seq_of(&self, index: u64) -> Option<u64> {
        let (break_index, break_seq) = self.breaks.range(..=index).next_back()?;
        Some(break_seq + (index - break_index))
    }

    /// The first entry the map knows, and where it starts.
    pub fn first(&self) -> Option<(u64, u64)> {
        self.breaks.first_key_value().map(|(index, seq)| (*index, *seq))
    }

    /// Where reading from entry `index` starts: that entry, or the first
    /// the map knows when `index` lies before it.
    pub fn from(&self, index: u64) -> Option<(u64, u64)> {
        match self.seq_of(index) {
            Some(seq) => Some((index, seq)),
            None => self.first(),
        }
    }

    /// Entry `index` starts at `seq` and takes `records` records.
    pub fn push(&mut self, index: u64, seq: u64, records: u64) {
        if self.seq_of(index) != Some(seq) {
            self.breaks.insert(index, seq);
        }
        if records != 1 {
            self.breaks.insert(index + 1, seq + records);
        }
        debug_assert_eq!(self.seq_of(index), Some(seq), "the entry starts where it was put");
        debug_assert_eq!(self.seq_of(index + 1), Some(seq + records), "the next entry starts after it");
    }

    /// Forgets every entry from `index` on; the next starts where `index`
    /// did.
    pub fn cut_from(&mut self, index: u64) {
        let tail: Vec<u64> = self.breaks.range(index + 1..).map(|(index, _)| *index).collect();
        for index in tail {
            self.breaks.remove(&index);
        }
    }

    /// The entry that holds `seq`, and where it starts; `None` before the
    /// first break point.
    pub fn index_of(&self, seq: u64) -> Option<(u64, u64)> {
        // Break points grow in both index and sequence: the run that holds
        // `seq` starts at the last one at or below it. Within a run every
        // entry but the last takes one record.
        let (break_index, break_seq) = self.breaks.iter().rev().find(|(_, break_seq)| **break_seq <= seq)?;
        let next_break = self.breaks.range(break_index + 1..).next().map(|(index, _)| *index);
        let index = break_index + (seq - break_seq);
        let index = next_break.map_or(index, |next| index.min(next - 1));
        Some((index, break_seq + (index - break_index)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a model: a vector of each entry's first sequence.
        #[test]
        fn the_map_agrees_with_every_entrys_start(records in prop::collection::vec(1u64..5, 1..60), cut in 0usize..60) {
            let mut map = SeqMap::starting(0, 1);
            let mut starts = Vec::new();
            let mut seq = 1;
            for (index, count) in records.iter().enumerate() {
                map.push(index as u64, seq, *count);
                starts.push(seq);
                seq += count;
            }
            for (index, start) in starts.iter().enumerate() {
                prop_assert_eq!(map.seq_of(index as u64), Some(*start));
                for within in 0..records[index] {
                    prop_assert_eq!(map.index_of(start + within), Some((index as u64, *start)));
                }
            }
            let cut = cut.min(starts.len() - 1);
            map.cut_from(cut as u64);
            prop_assert_eq!(map.seq_of(cut as u64), Some(starts[cut]));
            map.push(cut as u64, starts[cut], 3);
            prop_assert_eq!(map.seq_of(cut as u64 + 1), Some(starts[cut] + 3));
        }
    }
}
