//! The transmit queue of a session and the framing of its objects (sans-IO).
//!
//! NORM's cost is per object as much as per packet: each object is
//! created, announced, tracked for repair and purged, with three events to
//! the application. A sender of small messages that made each one an
//! object would pay all of that per message. So records (an application's
//! messages) wait in a [`TxQueue`], highest priority first, and while NORM
//! is busy sending what it has, the records that queue up behind it leave
//! together as one object ([`TxQueue::take_batch`]). A lone record still
//! leaves at once when NORM is idle: batching costs no latency, it only
//! happens when records arrive faster than they can be sent.
//!
//! Object data is a sequence of frames, each a record's length as a
//! big-endian `u32` and then the record. Records batch only with records
//! of the same info (the object's info is theirs), so that a best-effort
//! record never rides in a repaired object nor the other way round.

use std::collections::BinaryHeap;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes of a frame's length prefix.
pub const FRAME_HEADER_BYTES: usize = 4;

/// One record waiting to be sent.
#[derive(Debug, PartialEq, Eq)]
struct Queued {
    priority: u8,
    order: std::cmp::Reverse<u64>,
    info: Bytes,
    record: Bytes,
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.priority, &self.order).cmp(&(other.priority, &other.order))
    }
}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Records taken together: the data of one object and its info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The framed records.
    pub data: Bytes,
    /// The info the records share.
    pub info: Bytes,
    /// How many records it holds.
    pub records: usize,
}

/// Records waiting for NORM, highest priority first, then first queued.
#[derive(Debug)]
pub struct TxQueue {
    heap: BinaryHeap<Queued>,
    next_order: u64,
    records_max: usize,
}

impl TxQueue {
    /// An empty queue holding at most `records_max` records.
    pub fn new(records_max: usize) -> TxQueue {
        TxQueue { heap: BinaryHeap::new(), next_order: 0, records_max: records_max.max(1) }
    }

    /// Queues `record` (sent with `info`); gives it back when the queue is full.
    pub fn push(&mut self, priority: u8, info: Bytes, record: Bytes) -> Result<(), Bytes> {
        if self.heap.len() >= self.records_max {
            return Err(record);
        }
        self.next_order += 1;
        self.heap.push(Queued { priority, order: std::cmp::Reverse(self.next_order), info, record });
        debug_assert!(self.heap.len() <= self.records_max, "the queue keeps its bound");
        Ok(())
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no record waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Whether another record fits.
    pub fn has_room(&self) -> bool {
        self.heap.len() < self.records_max
    }

    /// Takes the first record and, behind it in queue order, those of the
    /// same info while the framed object stays within `bytes_max` (a first
    /// record larger than that goes alone). `None` when empty.
    pub fn take_batch(&mut self, bytes_max: usize) -> Option<Batch> {
        let first = self.heap.pop()?;
        let mut data = BytesMut::with_capacity((FRAME_HEADER_BYTES + first.record.len()).min(bytes_max.max(1)));
        put_frame(&mut data, &first.record);
        let mut records = 1;
        while let Some(next) = self.heap.peek() {
            let fits = data.len() + FRAME_HEADER_BYTES + next.record.len() <= bytes_max;
            if !fits || next.info != first.info {
                break;
            }
            if let Some(next) = self.heap.pop() {
                put_frame(&mut data, &next.record);
                records += 1;
            }
        }
        Some(Batch { data: data.freeze(), info: first.info, records })
    }
}

fn put_frame(data: &mut BytesMut, record: &[u8]) {
    // A record is bounded far below 4 GiB by the caller's message limit.
    data.put_u32(u32::try_from(record.len()).unwrap_or(u32::MAX));
    data.extend_from_slice(record);
}

/// Why an object's data is not a sequence of frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame announces more bytes than the object has left.
    #[error("a frame at byte {at} announces {length} bytes; {left} are left")]
    Truncated {
        /// Offset of the frame's header.
        at: usize,
        /// Its announced length.
        length: usize,
        /// Bytes after its header.
        left: usize,
    },
    /// The object is empty or ends inside a frame header.
    #[error("no whole frame header at byte {at}")]
    NoHeader {
        /// Offset where one was expected.
        at: usize,
    },
}

/// Splits an object's data into its records (slices of `data`, no copy).
pub fn split_frames(data: &Bytes) -> Result<Vec<Bytes>, FrameError> {
    let mut records = Vec::new();
    let mut rest = data.clone();
    loop {
        let at = data.len() - rest.len();
        if rest.len() < FRAME_HEADER_BYTES {
            if rest.is_empty() && !records.is_empty() {
                return Ok(records);
            }
            return Err(FrameError::NoHeader { at });
        }
        let length = rest.get_u32() as usize;
        if length > rest.len() {
            return Err(FrameError::Truncated { at, length, left: rest.len() });
        }
        records.push(rest.split_to(length));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    #[test]
    fn records_behind_the_first_ride_along_in_priority_order() {
        let mut queue = TxQueue::new(10);
        for (priority, text) in [(4, "a"), (9, "b"), (4, "c")] {
            queue.push(priority, Bytes::new(), bytes(text)).expect("room");
        }
        let batch = queue.take_batch(1024).expect("a batch");
        assert_eq!(batch.records, 3);
        assert_eq!(split_frames(&batch.data), Ok(vec![bytes("b"), bytes("a"), bytes("c")]));
        assert!(queue.is_empty());
    }

    #[test]
    fn a_batch_keeps_to_one_info_and_its_size() {
        let mut queue = TxQueue::new(10);
        queue.push(4, bytes("x"), bytes("12345678")).expect("room");
        queue.push(4, bytes("x"), bytes("12345678")).expect("room");
        queue.push(4, bytes("y"), bytes("1")).expect("room");
        let first = queue.take_batch(12).expect("a batch");
        assert_eq!((first.records, first.info.clone()), (1, bytes("x")), "the second would exceed 12 bytes");
        assert_eq!(queue.take_batch(100).map(|batch| batch.records), Some(1), "then x alone: y has other info");
        assert_eq!(queue.take_batch(100).map(|batch| batch.info), Some(bytes("y")));
        assert_eq!(queue.take_batch(100), None);
    }

    #[test]
    fn a_full_queue_gives_the_record_back() {
        let mut queue = TxQueue::new(1);
        queue.push(0, Bytes::new(), bytes("a")).expect("room");
        assert_eq!(queue.push(0, Bytes::new(), bytes("b")), Err(bytes("b")));
    }

    #[test]
    fn broken_frames_are_refused() {
        assert_eq!(split_frames(&Bytes::new()), Err(FrameError::NoHeader { at: 0 }));
        assert_eq!(
            split_frames(&Bytes::from_static(b"\0\0\0\x05abc")),
            Err(FrameError::Truncated { at: 0, length: 5, left: 3 })
        );
        assert_eq!(split_frames(&Bytes::from_static(b"\0\0\0\x01a\0")), Err(FrameError::NoHeader { at: 5 }));
    }

    proptest! {
        /// Every record comes out once, highest priority first, in batches
        /// within the bound (but for a lone oversized record).
        #[test]
        fn batches_carry_every_record_once_in_order(
            records in proptest::collection::vec((0u8..4, proptest::collection::vec(any::<u8>(), 0..40)), 0..60),
            bytes_max in 1usize..200,
        ) {
            let mut queue = TxQueue::new(records.len().max(1));
            for (priority, record) in &records {
                queue.push(*priority, Bytes::new(), Bytes::from(record.clone())).expect("room");
            }
            let mut out = Vec::new();
            while let Some(batch) = queue.take_batch(bytes_max) {
                prop_assert!(batch.data.len() <= bytes_max || batch.records == 1);
                out.extend(split_frames(&batch.data).expect("frames"));
            }
            let mut expected: Vec<(u8, usize)> = records.iter().enumerate().map(|(index, (priority, _))| (*priority, index)).collect();
            expected.sort_by_key(|(priority, index)| (std::cmp::Reverse(*priority), *index));
            let expected: Vec<Bytes> = expected.into_iter().map(|(_, index)| Bytes::from(records[index].1.clone())).collect();
            prop_assert_eq!(out, expected);
        }

        /// Arbitrary bytes split or are refused, never panic.
        #[test]
        fn splitting_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = split_frames(&Bytes::from(data));
        }
    }
}
