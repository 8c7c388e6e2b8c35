//! Cutting a transfer into fragment messages, and reading a fragment's
//! header back: both sides of the format in [`super`].

use bytes::Bytes;
use sift_core::{Message, Value};

use super::*;

/// A fragment's transfer properties, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentHeader {
    /// The transfer.
    pub id: String,
    /// This fragment's number.
    pub index: u64,
    /// Fragments in the transfer.
    pub count: u64,
    /// Payload bytes of every fragment but the last.
    pub chunk_bytes: u64,
    /// Bytes of the whole.
    pub total_bytes: u64,
    /// CRC-32 of this fragment's payload.
    pub crc: u32,
    /// The name to save under, as sent (not yet made safe).
    pub name: String,
    /// Connections the fragments were spread over.
    pub streams: u64,
    /// CRC-32 of the whole, on the last fragment.
    pub file_crc: Option<u32>,
}

/// Why a message that claims to be a fragment is not a valid one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FragmentError {
    /// A transfer property is missing or of the wrong type.
    #[error("fragment property {0} is missing or not of its type")]
    Missing(&'static str),
    /// The properties contradict each other or the payload.
    #[error("fragment {index} of transfer {id:?}: {why}")]
    Inconsistent {
        /// The transfer.
        id: String,
        /// The fragment.
        index: u64,
        /// What does not add up.
        why: String,
    },
}

impl FragmentHeader {
    /// The header of `message`: `None` when it is no fragment (no
    /// `sift-chunk-id`), an error when it claims to be one but is not valid.
    pub fn of(message: &Message) -> Option<Result<FragmentHeader, FragmentError>> {
        let Some(Value::Str(id)) = message.property(CHUNK_ID) else { return None };
        Some(FragmentHeader::read(id, message))
    }

    fn read(id: &str, message: &Message) -> Result<FragmentHeader, FragmentError> {
        let int = |name: &'static str| match message.property(name) {
            Some(Value::Int(value)) if *value >= 0 => Ok(*value as u64),
            _ => Err(FragmentError::Missing(name)),
        };
        let name = match message.property(CHUNK_NAME) {
            Some(Value::Str(name)) => name.to_string(),
            _ => return Err(FragmentError::Missing(CHUNK_NAME)),
        };
        let file_crc = match message.property(CHUNK_FILE_CRC) {
            Some(Value::Int(crc)) => Some(u32::try_from(*crc).map_err(|_| FragmentError::Missing(CHUNK_FILE_CRC))?),
            _ => None,
        };
        let header = FragmentHeader {
            id: id.to_string(),
            index: int(CHUNK_INDEX)?,
            count: int(CHUNK_COUNT)?,
            chunk_bytes: int(CHUNK_BYTES)?,
            total_bytes: int(CHUNK_TOTAL_BYTES)?,
            crc: u32::try_from(int(CHUNK_CRC)?).map_err(|_| FragmentError::Missing(CHUNK_CRC))?,
            name,
            streams: int(CHUNK_STREAMS)?.max(1),
            file_crc,
        };
        header.check(message.payload.len() as u64)?;
        Ok(header)
    }

    /// Checks that the numbers describe one layout and that the payload
    /// has the length that layout gives this fragment.
    fn check(&self, payload_bytes: u64) -> Result<(), FragmentError> {
        let fail = |why: String| Err(FragmentError::Inconsistent { id: self.id.clone(), index: self.index, why });
        if self.chunk_bytes == 0 {
            return fail("sift-chunk-bytes is 0".into());
        }
        let expected_count = fragment_count(self.total_bytes, self.chunk_bytes);
        if self.count != expected_count {
            return fail(format!(
                "{} bytes in fragments of {} make {expected_count} fragments, not {}",
                self.total_bytes, self.chunk_bytes, self.count
            ));
        }
        if self.index >= self.count {
            return fail(format!("index {} is beyond the {} fragments", self.index, self.count));
        }
        if payload_bytes != self.payload_bytes() {
            return fail(format!("{payload_bytes} payload bytes where the layout gives {}", self.payload_bytes()));
        }
        if (self.index + 1 == self.count) != self.file_crc.is_some() {
            return fail("only the last fragment carries sift-chunk-file-crc, and it must".into());
        }
        Ok(())
    }

    /// Where this fragment's bytes start in the whole.
    pub fn offset(&self) -> u64 {
        self.index * self.chunk_bytes
    }

    /// The payload length this fragment must have.
    pub fn payload_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.offset()).min(self.chunk_bytes)
    }
}

/// Fragments of `total_bytes` in pieces of `chunk_bytes`: at least one, so
/// that an empty transfer still arrives (as one empty fragment).
pub fn fragment_count(total_bytes: u64, chunk_bytes: u64) -> u64 {
    total_bytes.div_ceil(chunk_bytes.max(1)).max(1)
}

/// The payload length of each fragment of `total_bytes` in pieces of
/// `chunk_bytes`, in index order.
pub fn payload_sizes(total_bytes: u64, chunk_bytes: u64) -> impl Iterator<Item = u64> {
    let chunk_bytes = chunk_bytes.max(1);
    (0..fragment_count(total_bytes, chunk_bytes))
        .map(move |index| total_bytes.saturating_sub(index * chunk_bytes).min(chunk_bytes))
}

/// Makes the fragment messages of one transfer, in index order.
#[derive(Debug)]
pub struct Fragmenter {
    template: Message,
    id: String,
    total_bytes: u64,
    chunk_bytes: u64,
    count: u64,
    next_index: u64,
    /// CRC of the fragments made so far, for the last one's file CRC.
    file_hasher: crc32fast::Hasher,
}

impl Fragmenter {
    /// Fragments of `total_bytes` under transfer `id`, each a copy of
    /// `template` (topic, properties, metadata, priority, mode) with the
    /// transfer properties added and its share of the payload.
    pub fn new(
        template: Message,
        id: String,
        name: &str,
        total_bytes: u64,
        chunk_bytes: u64,
        streams: u64,
    ) -> Fragmenter {
        let chunk_bytes = chunk_bytes.max(1);
        let count = fragment_count(total_bytes, chunk_bytes);
        let mut template = template;
        template.payload = Bytes::new();
        let int = |value: u64| Value::Int(i64::try_from(value).unwrap_or(i64::MAX));
        template.properties.extend([
            (CHUNK_ID.to_string(), Value::Str(id.as_str().into())),
            (CHUNK_COUNT.to_string(), int(count)),
            (CHUNK_BYTES.to_string(), int(chunk_bytes)),
            (CHUNK_TOTAL_BYTES.to_string(), int(total_bytes)),
            (CHUNK_NAME.to_string(), Value::Str(name.into())),
            (CHUNK_STREAMS.to_string(), int(streams.max(1))),
        ]);
        Fragmenter {
            template,
            id,
            total_bytes,
            chunk_bytes,
            count,
            next_index: 0,
            file_hasher: crc32fast::Hasher::new(),
        }
    }

    /// Fragments in the transfer.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The transfer id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Payload bytes the next fragment must have; `None` once all are made.
    pub fn next_payload_bytes(&self) -> Option<u64> {
        payload_sizes(self.total_bytes, self.chunk_bytes).nth(self.next_index as usize)
    }

    /// The next fragment, carrying `payload` (of [`Self::next_payload_bytes`]).
    pub fn fragment(&mut self, payload: Bytes) -> Message {
        debug_assert_eq!(Some(payload.len() as u64), self.next_payload_bytes(), "fragments come whole and in order");
        let crc = crc32fast::hash(&payload);
        self.file_hasher.combine(&crc32fast::Hasher::new_with_initial_len(crc, payload.len() as u64));
        let index = self.next_index;
        self.next_index += 1;
        let mut message = self.template.clone();
        message.properties.push((CHUNK_INDEX.to_string(), Value::Int(index as i64)));
        message.properties.push((CHUNK_CRC.to_string(), Value::Int(i64::from(crc))));
        if index + 1 == self.count {
            let file_crc = self.file_hasher.clone().finalize();
            message.properties.push((CHUNK_FILE_CRC.to_string(), Value::Int(i64::from(file_crc))));
        }
        message.payload = payload;
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::TopicName;

    fn fragments(data: &[u8], chunk_bytes: u64) -> Vec<Message> {
        let template = Message::new(TopicName::new("files.x").expect("topic"), Bytes::new());
        let mut fragmenter = Fragmenter::new(template, "t1".into(), "x.bin", data.len() as u64, chunk_bytes, 1);
        let mut out = Vec::new();
        let mut offset = 0usize;
        while let Some(length) = fragmenter.next_payload_bytes() {
            let length = length as usize;
            out.push(fragmenter.fragment(Bytes::copy_from_slice(&data[offset..offset + length])));
            offset += length;
        }
        out
    }

    #[test]
    fn sizes_around_the_chunk_boundary_cut_and_read_back() {
        for size in [0usize, 1, 99, 100, 101, 199, 200, 201, 1000] {
            let data: Vec<u8> = (0..size).map(|index| (index * 7 % 251) as u8).collect();
            let messages = fragments(&data, 100);
            assert_eq!(messages.len() as u64, fragment_count(size as u64, 100), "size {size}");
            let mut joined = Vec::new();
            let mut combined = crc32fast::Hasher::new();
            for (index, message) in messages.iter().enumerate() {
                let header = FragmentHeader::of(message).expect("a fragment").expect("valid");
                assert_eq!(header.index, index as u64);
                assert_eq!(header.offset(), joined.len() as u64);
                assert_eq!(header.crc, crc32fast::hash(&message.payload));
                combined.combine(&crc32fast::Hasher::new_with_initial_len(header.crc, message.payload.len() as u64));
                joined.extend_from_slice(&message.payload);
            }
            assert_eq!(joined, data);
            let last = FragmentHeader::of(messages.last().expect("one at least")).expect("fragment").expect("valid");
            assert_eq!(last.file_crc, Some(crc32fast::hash(&data)));
            assert_eq!(combined.finalize(), crc32fast::hash(&data), "combined fragment CRCs give the whole's");
        }
    }

    #[test]
    fn inconsistent_headers_are_refused_with_what_is_wrong() {
        let mut messages = fragments(&[1u8; 250], 100);
        let mut short = messages.remove(1);
        short.payload = Bytes::from_static(&[1u8; 99]);
        let error = FragmentHeader::of(&short).expect("claims to be one").expect_err("short payload");
        assert!(error.to_string().contains("99 payload bytes where the layout gives 100"), "{error}");
        let mut miscounted = messages.remove(0);
        for (name, value) in &mut miscounted.properties {
            if name == CHUNK_COUNT {
                *value = Value::Int(7);
            }
        }
        let error = FragmentHeader::of(&miscounted).expect("claims").expect_err("bad count");
        assert!(error.to_string().contains("make 3 fragments, not 7"), "{error}");
        let plain = Message::new(TopicName::new("files.x").expect("topic"), Bytes::new());
        assert!(FragmentHeader::of(&plain).is_none());
    }
}
