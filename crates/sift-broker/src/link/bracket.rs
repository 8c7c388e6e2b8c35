//! Collecting a full interest resync bracket from one link (§10.6):
//! `INTEREST_SYNC_BEGIN`, `INTEREST` frames of adds with the bracket's origin
//! and sequence, `INTEREST_SYNC_END`. Anything else inside is a broken
//! bracket, which ends the link.

use sift_proto::link::{Interest as InterestFrame, InterestAdd, InterestChange};

use super::error::LinkError;

/// Most adds one bracket may hold. A broker's table is one entry per
/// distinct local subscription at most; this only bounds what a broken peer
/// can make this broker buffer.
pub(crate) const BRACKET_ADDS_MAX: usize = 1_000_000;

/// A bracket received so far.
#[derive(Debug)]
pub(crate) struct Bracket {
    /// The broker whose table is copied.
    pub(crate) origin: String,
    /// The sequence the copy is as of.
    pub(crate) sequence: u64,
    /// The table's entries.
    pub(crate) adds: Vec<InterestAdd>,
}

/// The bracket open on one link, if any.
#[derive(Debug, Default)]
pub(crate) struct BracketReader {
    open: Option<Bracket>,
}

fn broken(message: String) -> LinkError {
    LinkError::InterestOutOfOrder(message)
}

impl BracketReader {
    /// True while a bracket is open: every `INTEREST` then belongs to it.
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Opens a bracket; a nested begin is an error.
    pub(crate) fn begin(&mut self, origin: String, sequence: u64) -> Result<(), LinkError> {
        if let Some(open) = &self.open {
            return Err(broken(format!("INTEREST_SYNC_BEGIN for {origin:?} inside the bracket of {:?}", open.origin)));
        }
        self.open = Some(Bracket { origin, sequence, adds: Vec::new() });
        Ok(())
    }

    /// Adds the changes of an `INTEREST` inside the open bracket: it must
    /// have the bracket's origin and sequence and hold only adds.
    pub(crate) fn interest(&mut self, frame: InterestFrame) -> Result<(), LinkError> {
        let Some(open) = &mut self.open else {
            return Err(broken("INTEREST outside a bracket handed to the bracket reader".to_string()));
        };
        if frame.origin != open.origin || frame.sequence != open.sequence {
            return Err(broken(format!(
                "INTEREST {:?} #{} inside the bracket of {:?} #{}",
                frame.origin, frame.sequence, open.origin, open.sequence
            )));
        }
        if open.adds.len() + frame.changes.len() > BRACKET_ADDS_MAX {
            return Err(broken(format!("bracket of {:?} exceeds {BRACKET_ADDS_MAX} entries", open.origin)));
        }
        for change in frame.changes {
            match change {
                InterestChange::Add(add) => open.adds.push(add),
                InterestChange::Remove { key } => {
                    return Err(broken(format!("remove of key {key} inside the bracket of {:?}", open.origin)))
                }
            }
        }
        Ok(())
    }

    /// Closes the bracket and hands it over; the end must match the begin.
    pub(crate) fn end(&mut self, origin: &str, sequence: u64) -> Result<Bracket, LinkError> {
        match self.open.take() {
            Some(open) if open.origin == origin && open.sequence == sequence => Ok(open),
            Some(open) => Err(broken(format!(
                "INTEREST_SYNC_END {origin:?} #{sequence} closes the bracket of {:?} #{}",
                open.origin, open.sequence
            ))),
            None => Err(broken(format!("INTEREST_SYNC_END {origin:?} #{sequence} without a begin"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_proto::FilterKind;

    fn frame(origin: &str, sequence: u64, changes: Vec<InterestChange>) -> InterestFrame {
        InterestFrame { origin: origin.to_string(), sequence, changes }
    }

    fn add(key: u64) -> InterestChange {
        InterestChange::Add(InterestAdd {
            key,
            topic_filter: "a".to_string(),
            filter_kind: FilterKind::None,
            filter: String::new(),
            queue_group: String::new(),
        })
    }

    #[test]
    fn a_well_formed_bracket_is_collected() {
        let mut reader = BracketReader::default();
        reader.begin("b1".to_string(), 5).expect("begin");
        assert!(reader.is_open());
        reader.interest(frame("b1", 5, vec![add(1), add(2)])).expect("adds");
        reader.interest(frame("b1", 5, vec![add(3)])).expect("adds");
        let bracket = reader.end("b1", 5).expect("end");
        assert_eq!(bracket.adds.len(), 3);
        assert!(!reader.is_open());
    }

    #[test]
    fn broken_brackets_are_refused() {
        let mut reader = BracketReader::default();
        assert!(reader.end("b1", 1).is_err(), "end without begin");
        reader.begin("b1".to_string(), 5).expect("begin");
        assert!(reader.begin("b2".to_string(), 1).is_err(), "nested begin");
        assert!(reader.interest(frame("b1", 6, vec![add(1)])).is_err(), "other sequence");
        assert!(reader.interest(frame("b1", 5, vec![InterestChange::Remove { key: 1 }])).is_err(), "remove");
        assert!(reader.end("b2", 5).is_err(), "end of another origin");
    }
}
