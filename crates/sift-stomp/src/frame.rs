//! STOMP frames and their sans-IO codec (STOMP 1.2, and the 1.0/1.1
//! frames it includes).
//!
//! A frame is a command line, header lines, a blank line and a body ended
//! by NUL; a `content-length` header makes the body binary-safe (it may
//! then hold NULs). Between frames a peer may send end-of-line bytes as
//! heart-beats. In 1.2 header names and values escape `\r`, `\n`, `:` and
//! `\` (as `\r`, `\n`, `\c`, `\\`), except in CONNECT and CONNECTED, whose
//! headers are never escaped (1.0 clients could not know the rule).
//!
//! [`Decoder::decode`] takes whole frames off the front of a buffer and
//! leaves a partial frame where it is; every size is checked before it is
//! trusted, so a hostile peer costs at most the configured limits.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Default bound on one frame: command, headers and body.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 8 * 1024 * 1024;
/// Default bound on the headers of one frame.
pub const HEADERS_MAX_DEFAULT: usize = 128;
/// Default bound on one header line (or the command line).
pub const HEADER_LINE_BYTES_MAX_DEFAULT: usize = 16 * 1024;

/// The commands of STOMP 1.2, both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Client: open a session (1.0 and later).
    Connect,
    /// Client: open a session (1.2 spelling).
    Stomp,
    /// Client: publish.
    Send,
    /// Client: subscribe.
    Subscribe,
    /// Client: unsubscribe.
    Unsubscribe,
    /// Client: acknowledge.
    Ack,
    /// Client: refuse.
    Nack,
    /// Client: start a transaction.
    Begin,
    /// Client: commit a transaction.
    Commit,
    /// Client: abort a transaction.
    Abort,
    /// Client: close the session.
    Disconnect,
    /// Server: the session is open.
    Connected,
    /// Server: a delivery.
    Message,
    /// Server: a receipt.
    Receipt,
    /// Server: an error.
    Error,
}

impl Command {
    const ALL: [(Command, &'static str); 15] = [
        (Command::Connect, "CONNECT"),
        (Command::Stomp, "STOMP"),
        (Command::Send, "SEND"),
        (Command::Subscribe, "SUBSCRIBE"),
        (Command::Unsubscribe, "UNSUBSCRIBE"),
        (Command::Ack, "ACK"),
        (Command::Nack, "NACK"),
        (Command::Begin, "BEGIN"),
        (Command::Commit, "COMMIT"),
        (Command::Abort, "ABORT"),
        (Command::Disconnect, "DISCONNECT"),
        (Command::Connected, "CONNECTED"),
        (Command::Message, "MESSAGE"),
        (Command::Receipt, "RECEIPT"),
        (Command::Error, "ERROR"),
    ];

    /// The command's name on the wire.
    pub fn name(self) -> &'static str {
        Command::ALL.iter().find(|(command, _)| *command == self).map_or("?", |(_, name)| name)
    }

    fn parse(text: &[u8]) -> Option<Command> {
        Command::ALL.iter().find(|(_, name)| name.as_bytes() == text).map(|(command, _)| *command)
    }

    /// True for the commands whose headers are not escaped.
    fn raw_headers(self) -> bool {
        matches!(self, Command::Connect | Command::Stomp | Command::Connected)
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The command.
    pub command: Command,
    /// Headers in order; a repeated header's first value is the one that counts.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl Frame {
    /// A frame with no headers and no body.
    pub fn new(command: Command) -> Frame {
        Frame { command, headers: Vec::new(), body: Bytes::new() }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Frame {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// The first value of header `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// Appends the frame's encoding to `out`: escaped headers, a
    /// `content-length` for any body, and the closing NUL.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_slice(self.command.name().as_bytes());
        out.put_u8(b'\n');
        let raw = self.command.raw_headers();
        for (name, value) in &self.headers {
            put_escaped(out, name, raw);
            out.put_u8(b':');
            put_escaped(out, value, raw);
            out.put_u8(b'\n');
        }
        if !self.body.is_empty() && self.get("content-length").is_none() {
            out.put_slice(format!("content-length:{}\n", self.body.len()).as_bytes());
        }
        out.put_u8(b'\n');
        out.put_slice(&self.body);
        out.put_u8(0);
    }
}

/// Appends `text` as a header name or value: escaped as STOMP 1.2 says
/// for every frame but CONNECT, STOMP and CONNECTED (`raw`).
pub(crate) fn put_escaped(out: &mut BytesMut, text: &str, raw: bool) {
    if raw {
        out.put_slice(text.as_bytes());
        return;
    }
    // Most names and values need no escape: copy them whole.
    if !text.bytes().any(|byte| matches!(byte, b'\r' | b'\n' | b':' | b'\\')) {
        out.put_slice(text.as_bytes());
        return;
    }
    for byte in text.bytes() {
        match byte {
            b'\r' => out.put_slice(b"\\r"),
            b'\n' => out.put_slice(b"\\n"),
            b':' => out.put_slice(b"\\c"),
            b'\\' => out.put_slice(b"\\\\"),
            other => out.put_u8(other),
        }
    }
}

/// Why bytes are not a frame. Every one of them ends the connection (an
/// ERROR frame naming it, then close): after a malformed frame the stream
/// cannot be resynchronised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The command line is not a STOMP command.
    #[error("unknown command {0:?}")]
    UnknownCommand(String),
    /// A header line has no colon.
    #[error("header line {0:?} has no ':'")]
    HeaderWithoutColon(String),
    /// A header holds an escape that STOMP 1.2 does not define.
    #[error("header {0:?} holds an undefined escape sequence (only \\r \\n \\c \\\\ are defined)")]
    BadEscape(String),
    /// A header or command is not UTF-8.
    #[error("a header or the command is not UTF-8")]
    NotUtf8,
    /// `content-length` is not a number.
    #[error("content-length {0:?} is not a number")]
    BadContentLength(String),
    /// The frame is larger than the limit.
    #[error("the frame is larger than {limit} bytes")]
    FrameTooLarge {
        /// The limit.
        limit: usize,
    },
    /// More headers than the limit.
    #[error("the frame has more than {limit} headers")]
    TooManyHeaders {
        /// The limit.
        limit: usize,
    },
    /// A header line longer than the limit.
    #[error("a header line is longer than {limit} bytes")]
    HeaderTooLong {
        /// The limit.
        limit: usize,
    },
    /// The body did not end with NUL where content-length said.
    #[error("the body is not followed by NUL where content-length ends it")]
    MissingNul,
    /// A NUL byte before the end of the headers: NUL ends a frame, so a
    /// peer that reads up to it would see a different frame.
    #[error("a NUL byte in the command or headers")]
    NulInHead,
}

/// The limits a decoder enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest frame, all of it.
    pub frame_bytes_max: usize,
    /// Most headers in a frame.
    pub headers_max: usize,
    /// Longest command or header line.
    pub header_line_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
            headers_max: HEADERS_MAX_DEFAULT,
            header_line_bytes_max: HEADER_LINE_BYTES_MAX_DEFAULT,
        }
    }
}

/// Decodes frames from a byte stream.
#[derive(Debug, Clone)]
pub struct Decoder {
    limits: Limits,
}

/// What a decode found at the front of the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// A whole frame.
    Frame(Frame),
    /// End-of-line bytes between frames: the peer's heart-beat.
    HeartBeat,
}

impl Decoder {
    /// A decoder with `limits`.
    pub fn new(limits: Limits) -> Decoder {
        Decoder { limits }
    }

    /// Takes the next frame (or heart-beat) off the front of `buf`; `None`
    /// when `buf` holds only part of one (it is left in place).
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Decoded>, FrameError> {
        let leading = buf.iter().take_while(|byte| matches!(byte, b'\n' | b'\r')).count();
        if leading > 0 {
            buf.advance(leading);
            return Ok(Some(Decoded::HeartBeat));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        let Some(head_end) = self.find_head_end(buf)? else { return Ok(None) };
        let (command, headers) = self.parse_head(&buf[..head_end])?;
        let body_start = head_end;
        let body_len = match headers.iter().find(|(name, _)| name == "content-length") {
            Some((_, value)) => {
                Some(value.trim().parse::<usize>().map_err(|_| FrameError::BadContentLength(value.clone()))?)
            }
            None => None,
        };
        let (body_end, frame_end) = match body_len {
            Some(length) => {
                let body_end = body_start.saturating_add(length);
                if body_end.saturating_add(1) > self.limits.frame_bytes_max {
                    return Err(FrameError::FrameTooLarge { limit: self.limits.frame_bytes_max });
                }
                if buf.len() <= body_end {
                    return Ok(None);
                }
                if buf[body_end] != 0 {
                    return Err(FrameError::MissingNul);
                }
                (body_end, body_end + 1)
            }
            None => match buf[body_start..].iter().position(|byte| *byte == 0) {
                Some(offset) => (body_start + offset, body_start + offset + 1),
                None if buf.len() > self.limits.frame_bytes_max => {
                    return Err(FrameError::FrameTooLarge { limit: self.limits.frame_bytes_max });
                }
                None => return Ok(None),
            },
        };
        let mut frame_bytes = buf.split_to(frame_end).freeze();
        let body = frame_bytes.split_off(body_start).slice(..body_end - body_start);
        Ok(Some(Decoded::Frame(Frame { command, headers, body })))
    }

    /// The offset just past the blank line that ends the headers, or `None`
    /// when it is not in `buf` yet.
    fn find_head_end(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let mut line_start = 0;
        let mut lines = 0;
        while let Some(offset) = buf[line_start..].iter().position(|byte| *byte == b'\n') {
            let line_end = line_start + offset;
            let line = &buf[line_start..line_end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.len() > self.limits.header_line_bytes_max {
                return Err(FrameError::HeaderTooLong { limit: self.limits.header_line_bytes_max });
            }
            if line.is_empty() && lines > 0 {
                return Ok(Some(line_end + 1));
            }
            lines += 1;
            if lines > self.limits.headers_max + 1 {
                return Err(FrameError::TooManyHeaders { limit: self.limits.headers_max });
            }
            line_start = line_end + 1;
        }
        if buf.len() - line_start > self.limits.header_line_bytes_max {
            return Err(FrameError::HeaderTooLong { limit: self.limits.header_line_bytes_max });
        }
        if buf.len() > self.limits.frame_bytes_max {
            return Err(FrameError::FrameTooLarge { limit: self.limits.frame_bytes_max });
        }
        Ok(None)
    }

    /// The command and headers of a head (which ends with its blank line).
    fn parse_head(&self, head: &[u8]) -> Result<(Command, Vec<(String, String)>), FrameError> {
        if head.contains(&0) {
            return Err(FrameError::NulInHead);
        }
        let mut lines = head.split(|byte| *byte == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line));
        let command_line = lines.next().unwrap_or_default();
        let command = Command::parse(command_line)
            .ok_or_else(|| FrameError::UnknownCommand(String::from_utf8_lossy(command_line).into_owned()))?;
        let raw = command.raw_headers();
        let mut headers = Vec::new();
        for line in lines.filter(|line| !line.is_empty()) {
            let text = std::str::from_utf8(line).map_err(|_| FrameError::NotUtf8)?;
            let (name, value) = text.split_once(':').ok_or_else(|| FrameError::HeaderWithoutColon(text.to_string()))?;
            let (name, value) = match raw {
                true => (name.to_string(), value.to_string()),
                false => (unescape(name)?, unescape(value)?),
            };
            headers.push((name, value));
        }
        Ok((command, headers))
    }
}

/// Undoes STOMP 1.2 header escaping.
fn unescape(text: &str) -> Result<String, FrameError> {
    if !text.contains('\\') {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(character) = chars.next() {
        if character != '\\' {
            out.push(character);
            continue;
        }
        match chars.next() {
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some('c') => out.push(':'),
            Some('\\') => out.push('\\'),
            _ => return Err(FrameError::BadEscape(text.to_string())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(bytes: &[u8]) -> Result<Vec<Decoded>, FrameError> {
        let decoder = Decoder::new(Limits::default());
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(decoded) = decoder.decode(&mut buf)? {
            out.push(decoded);
        }
        Ok(out)
    }

    #[test]
    fn frames_with_and_without_content_length_and_heart_beats() {
        let bytes =
            b"\nSEND\ndestination:/topic/a\ncontent-length:3\n\na\0b\0\r\nSEND\ndestination:/queue/q\n\nhello\0";
        let decoded = decode_all(bytes).expect("valid");
        assert_eq!(decoded.len(), 4);
        assert_eq!(decoded[0], Decoded::HeartBeat);
        let Decoded::Frame(first) = &decoded[1] else { panic!("a frame") };
        assert_eq!((first.command, first.get("destination")), (Command::Send, Some("/topic/a")));
        assert_eq!(&first.body[..], b"a\0b", "content-length bodies may hold NUL");
        let Decoded::Frame(second) = &decoded[3] else { panic!("a frame") };
        assert_eq!(&second.body[..], b"hello");
    }

    #[test]
    fn headers_are_escaped_except_in_connect() {
        let frame = Frame::new(Command::Message).header("key:colon", "line\nbreak\\");
        let mut out = BytesMut::new();
        frame.encode(&mut out);
        assert!(out.starts_with(b"MESSAGE\nkey\\ccolon:line\\nbreak\\\\\n\n\0"), "{out:?}");
        let decoded = decode_all(&out).expect("valid");
        assert_eq!(decoded, vec![Decoded::Frame(frame)]);
        let connect = decode_all(b"CONNECT\nlogin:a\\b\n\n\0").expect("raw headers");
        let Decoded::Frame(connect) = &connect[0] else { panic!("a frame") };
        assert_eq!(connect.get("login"), Some("a\\b"));
        assert_eq!(decode_all(b"SEND\nx:a\\tb\n\n\0"), Err(FrameError::BadEscape("a\\tb".into())));
    }

    #[test]
    fn limits_and_malformed_frames_are_named() {
        let small = Decoder::new(Limits { frame_bytes_max: 64, headers_max: 2, header_line_bytes_max: 32 });
        let cases: [(&[u8], FrameError); 6] = [
            (b"FLY\n\n\0", FrameError::UnknownCommand("FLY".into())),
            (b"SEND\nnocolon\n\n\0", FrameError::HeaderWithoutColon("nocolon".into())),
            (b"SEND\na:1\nb:2\nc:3\n\n\0", FrameError::TooManyHeaders { limit: 2 }),
            (b"SEND\ncontent-length:x\n\n\0", FrameError::BadContentLength("x".into())),
            (b"SEND\ncontent-length:1\n\nab\0", FrameError::MissingNul),
            (b"SEND\na:b\0c\n\n\0", FrameError::NulInHead),
        ];
        for (bytes, expected) in cases {
            assert_eq!(small.decode(&mut BytesMut::from(bytes)), Err(expected));
        }
        let long_body = [b"SEND\n\n".as_slice(), &[b'x'; 100]].concat();
        assert_eq!(small.decode(&mut BytesMut::from(&long_body[..])), Err(FrameError::FrameTooLarge { limit: 64 }));
        let long_line = [b"SEND\nh:".as_slice(), &[b'y'; 40]].concat();
        assert_eq!(small.decode(&mut BytesMut::from(&long_line[..])), Err(FrameError::HeaderTooLong { limit: 32 }));
    }

    proptest! {
        #[test]
        fn any_split_of_encoded_frames_decodes_the_same(
            values in prop::collection::vec("[ -~\n\r:\\\\]{0,12}", 1..4),
            body in prop::collection::vec(any::<u8>(), 0..40),
            split in 0usize..200,
        ) {
            let mut frame = Frame::new(Command::Send);
            for (index, value) in values.iter().enumerate() {
                frame = frame.header(&format!("h{index}"), value.clone());
            }
            frame.body = Bytes::from(body);
            let mut encoded = BytesMut::new();
            frame.encode(&mut encoded);
            let split = split.min(encoded.len());
            let decoder = Decoder::new(Limits::default());
            let mut buf = BytesMut::from(&encoded[..split]);
            let mut decoded = Vec::new();
            while let Some(item) = decoder.decode(&mut buf).expect("valid") { decoded.push(item); }
            buf.extend_from_slice(&encoded[split..]);
            while let Some(item) = decoder.decode(&mut buf).expect("valid") { decoded.push(item); }
            let frames: Vec<Frame> = decoded.into_iter().filter_map(|item| match item {
                Decoded::Frame(frame) => Some(frame),
                Decoded::HeartBeat => None,
            }).collect();
            let mut expected = frame.clone();
            if !expected.body.is_empty() {
                expected.headers.push(("content-length".into(), expected.body.len().to_string()));
            }
            prop_assert_eq!(frames, vec![expected]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let decoder = Decoder::new(Limits { frame_bytes_max: 256, headers_max: 8, header_line_bytes_max: 64 });
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = decoder.decode(&mut buf) {}
        }
    }
}
