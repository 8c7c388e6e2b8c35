//! A walk over AMQP-encoded values (AMQP 1.0 part 1, §1.6) that checks
//! every length a value declares against the bytes that are really there,
//! before the AMQP library decodes them.
//!
//! The library's stream decoder sizes its buffer by a value's declared
//! length before it reads: a 15-byte frame that declares a 4 GiB string
//! would have it allocate 4 GiB, and a list that declares 2³² items could
//! do worse. Here a length never exceeds what follows it, a count never
//! exceeds the bytes of its compound (every item takes at least a byte,
//! but for a few empty constructors), and nesting stops at
//! [`NESTING_MAX`] (the library's decoder recurses). What passes allocates
//! at most what it occupies.

/// How deeply values may nest (lists, maps, arrays, described values).
pub const NESTING_MAX: usize = 32;

/// Why bytes are not well-formed AMQP values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodingError {
    /// A value runs past the end of its bytes.
    #[error("at byte {0}: a value runs past the end of its frame or message")]
    Truncated(usize),
    /// A compound or array declares more items than its bytes can hold.
    #[error("at byte {0}: a list, map or array declares more items than its size holds")]
    Count(usize),
    /// Values nest deeper than [`NESTING_MAX`].
    #[error("at byte {0}: values nest more than {NESTING_MAX} deep")]
    TooDeep(usize),
    /// The bytes end inside a value whose length is allowed to go on
    /// (only while checking a prefix).
    #[error("the bytes end inside a value")]
    CutOff,
}

/// Checks that `bytes` hold whole values one after another, up to its end.
pub fn check_values(bytes: &[u8]) -> Result<(), EncodingError> {
    let mut position = 0;
    while position < bytes.len() {
        position = skip_value(bytes, position, 0, None)?;
    }
    Ok(())
}

/// Checks one value at `start`; where it ends.
pub fn check_value(bytes: &[u8], start: usize) -> Result<usize, EncodingError> {
    skip_value(bytes, start, 0, None)
}

/// Checks that `bytes` begin a run of values (the first frames of a
/// message that spans frames): whole values, and at the end one cut off
/// whose declared length is at most `length_max` (the rest of it comes in
/// the next frames).
pub fn check_prefix(bytes: &[u8], length_max: usize) -> Result<(), EncodingError> {
    let mut position = 0;
    while position < bytes.len() {
        match skip_value(bytes, position, 0, Some(length_max)) {
            Ok(end) => position = end,
            Err(EncodingError::CutOff) => return Ok(()),
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The end of the value at `position`, checked.
fn skip_value(bytes: &[u8], position: usize, depth: usize, cut: Option<usize>) -> Result<usize, EncodingError> {
    if depth > NESTING_MAX {
        return Err(EncodingError::TooDeep(position));
    }
    let constructor = *bytes.get(position).ok_or_else(|| ended(position, 1, cut))?;
    if constructor == 0x00 {
        // A described value: its descriptor, then the value.
        let after_descriptor = skip_value(bytes, position + 1, depth + 1, cut)?;
        return skip_value(bytes, after_descriptor, depth + 1, cut);
    }
    skip_body(bytes, constructor, position + 1, depth, cut)
}

/// The end of a value's body that starts at `body` after `constructor`.
fn skip_body(
    bytes: &[u8],
    constructor: u8,
    body: usize,
    depth: usize,
    cut: Option<usize>,
) -> Result<usize, EncodingError> {
    match constructor >> 4 {
        0x4 => Ok(body),
        0x5 => take(bytes, body, 1, cut),
        0x6 => take(bytes, body, 2, cut),
        0x7 => take(bytes, body, 4, cut),
        0x8 => take(bytes, body, 8, cut),
        0x9 => take(bytes, body, 16, cut),
        0xa => {
            let size = read_size(bytes, body, 1, cut)?;
            take(bytes, body + 1, size, cut)
        }
        0xb => {
            let size = read_size(bytes, body, 4, cut)?;
            take(bytes, body + 4, size, cut)
        }
        0xc => skip_compound(bytes, body, 1, depth, cut),
        0xd => skip_compound(bytes, body, 4, depth, cut),
        0xe => skip_array(bytes, body, 1, depth, cut),
        0xf => skip_array(bytes, body, 4, depth, cut),
        // Not a constructor: the library refuses it; nothing to size here.
        _ => Ok(body),
    }
}

/// The header of a list, map or array at `start` (sizes `width` bytes
/// wide): where its items begin, how many there are, and where it ends.
struct Compound {
    items: usize,
    count: usize,
    end: usize,
}

impl Compound {
    fn read(bytes: &[u8], start: usize, width: usize, cut: Option<usize>) -> Result<Compound, EncodingError> {
        let size = read_size(bytes, start, width, cut)?;
        if size < width {
            return Err(EncodingError::Truncated(start));
        }
        let count = read_size(bytes, start + width, width, cut)?;
        if count > size {
            return Err(EncodingError::Count(start));
        }
        let end = take(bytes, start + width, size, cut)?;
        Ok(Compound { items: start + 2 * width, count, end })
    }

    /// Its items must fill its size exactly: a reader that stops after the
    /// last item (the library does) and one that goes by the size must
    /// agree on where the next value starts.
    fn filled(&self, position: usize, start: usize) -> Result<usize, EncodingError> {
        if position != self.end {
            return Err(EncodingError::Count(start));
        }
        Ok(self.end)
    }
}

/// A list or map: size, count, then `count` values within the size.
fn skip_compound(
    bytes: &[u8],
    start: usize,
    width: usize,
    depth: usize,
    cut: Option<usize>,
) -> Result<usize, EncodingError> {
    let compound = Compound::read(bytes, start, width, cut)?;
    let mut position = compound.items;
    for _ in 0..compound.count {
        position = skip_value(&bytes[..compound.end], position, depth + 1, None)?;
    }
    compound.filled(position, start)
}

/// An array: size, count, one element constructor, then `count` bodies.
fn skip_array(
    bytes: &[u8],
    start: usize,
    width: usize,
    depth: usize,
    cut: Option<usize>,
) -> Result<usize, EncodingError> {
    let compound = Compound::read(bytes, start, width, cut)?;
    let bounded = &bytes[..compound.end];
    let mut position = compound.items;
    // The element constructor, described or not.
    let mut constructor = *bounded.get(position).ok_or(EncodingError::Truncated(position))?;
    position += 1;
    if constructor == 0x00 {
        position = skip_value(bounded, position, depth + 1, None)?;
        constructor = *bounded.get(position).ok_or(EncodingError::Truncated(position))?;
        position += 1;
    }
    for _ in 0..compound.count {
        position = skip_body(bounded, constructor, position, depth + 1, None)?;
    }
    compound.filled(position, start)
}

/// The end of `length` bytes at `start`, if they are there; with `cut`, a
/// value cut off by the end of the bytes is [`EncodingError::CutOff`] when
/// its length is within `cut`.
fn take(bytes: &[u8], start: usize, length: usize, cut: Option<usize>) -> Result<usize, EncodingError> {
    let end = start.checked_add(length).ok_or(EncodingError::Truncated(start))?;
    if end > bytes.len() {
        return Err(ended(start, length, cut));
    }
    Ok(end)
}

/// The error of a value that does not end within the bytes.
fn ended(start: usize, length: usize, cut: Option<usize>) -> EncodingError {
    match cut {
        Some(length_max) if length <= length_max => EncodingError::CutOff,
        _ => EncodingError::Truncated(start),
    }
}

/// A big-endian size of `width` bytes (1 or 4) at `start`.
fn read_size(bytes: &[u8], start: usize, width: usize, cut: Option<usize>) -> Result<usize, EncodingError> {
    let field = bytes.get(start..start + width).ok_or_else(|| ended(start, width, cut))?;
    Ok(field.iter().fold(0usize, |size, byte| (size << 8) | usize::from(*byte)))
}

/// True when the value at `start` is described (what a performative and a
/// message section are); the library reads a described type where it
/// expects one even without the marker, and so past what was checked.
pub fn is_described(bytes: &[u8], start: usize) -> bool {
    bytes.get(start) == Some(&0x00)
}

#[cfg(test)]
mod tests {
    use fe2o3_amqp::types::primitives::{OrderedMap, Value};

    use super::*;

    #[test]
    fn what_the_library_encodes_passes() {
        let mut map = OrderedMap::new();
        map.insert(Value::String("qty".into()), Value::Int(3));
        map.insert(Value::Symbol("s".into()), Value::List(vec![Value::Null, Value::Binary(vec![1, 2].into())]));
        let values = [
            Value::Map(map),
            Value::String("x".repeat(300)),
            Value::Array(vec![Value::Long(1), Value::Long(2)].into()),
            Value::Array(vec![Value::String("a".into()), Value::String("bb".into())].into()),
            Value::Uuid([7u8; 16].into()),
        ];
        for value in values {
            let encoded = serde_amqp::to_vec(&value).expect("encodes");
            check_values(&encoded).unwrap_or_else(|error| panic!("{value:?}: {error}"));
        }
    }

    #[test]
    fn lengths_and_counts_beyond_the_bytes_are_refused() {
        // str32 declaring about 4 GiB in a few bytes.
        assert_eq!(check_values(&[0xb1, 0xff, 0xff, 0x41, 0x0a, 0x46]), Err(EncodingError::Truncated(5)));
        // list32 of size 4 declaring 2^32 - 1 items.
        let list = [0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(check_values(&list), Err(EncodingError::Count(1)));
        // array8 of nulls declaring 200 items in 2 bytes.
        assert_eq!(check_values(&[0xe0, 2, 200, 0x40]), Err(EncodingError::Count(1)));
        assert_eq!(check_values(&[0xe0, 2, 2, 0x40]), Ok(()), "two nulls");
        assert_eq!(check_prefix(&[0xb1, 0, 0, 0x10, 0, b'a'], 4096), Ok(()), "cut off within the limit");
        assert_eq!(check_prefix(&[0xb1, 0xff, 0xff, 0x41, 0x0a, 0x46], 4096), Err(EncodingError::Truncated(5)));
        let mut nested = vec![0x00; 40];
        nested.extend([0x40; 41]);
        assert!(matches!(check_values(&nested), Err(EncodingError::TooDeep(_))));
    }
}
