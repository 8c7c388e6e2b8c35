//! The protocol header and the server side of SASL (AMQP 1.0 part 5.3),
//! played here rather than by the AMQP library: the library's SASL hook is
//! synchronous, and a password check is the broker's session's to make
//! (an argon2id verification, off the async threads). The client's
//! credentials open the connection's native session while the SASL
//! exchange waits, so a refused sign-in is answered with the SASL outcome
//! `auth`, which Qpid JMS reports as a `JMSSecurityException`.
//!
//! Mechanisms: PLAIN (user and password, or a bearer token as the
//! password) and, on a broker that admits anonymous clients, ANONYMOUS.

use bytes::{BufMut, BytesMut};
use fe2o3_amqp::frames::sasl::{Frame, FrameCodec};
use fe2o3_amqp::types::primitives::{Array, Symbol};
use fe2o3_amqp::types::sasl::{SaslCode, SaslMechanisms, SaslOutcome};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::{Decoder, Encoder};

/// The header a client opens a SASL layer with.
pub const SASL_HEADER: [u8; 8] = *b"AMQP\x03\x01\x00\x00";
/// The header of AMQP itself (after SASL, or without it).
pub const AMQP_HEADER: [u8; 8] = *b"AMQP\x00\x01\x00\x00";
/// Largest SASL frame taken: a PLAIN response with a bearer token fits.
pub const SASL_FRAME_BYTES_MAX: usize = 64 * 1024;
/// A frame's fixed header: size, data offset, type, channel.
const FRAME_HEADER_BYTES: usize = 8;

/// What a client presented in its `sasl-init`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignIn {
    /// ANONYMOUS: no identity.
    Anonymous,
    /// PLAIN: a user name (the authentication identity) and a password.
    Plain {
        /// The user name.
        user: String,
        /// The password, or a bearer token.
        password: String,
    },
}

/// Why a connection ended before AMQP began.
#[derive(Debug, thiserror::Error)]
pub enum SaslError {
    /// The socket failed or closed.
    #[error("connection lost during the protocol header or SASL: {0}")]
    Io(#[from] std::io::Error),
    /// The client sent a header this server does not speak (answered with
    /// the SASL header, as the specification asks, then closed).
    #[error("unsupported protocol header {0:?}")]
    Header([u8; 8]),
    /// A SASL frame out of place, too large, or not decodable.
    #[error("bad SASL frame: {0}")]
    Frame(String),
    /// A mechanism not offered, or a PLAIN response without its parts.
    #[error("SASL sign-in refused: {0}")]
    Mechanism(String),
}

/// The protocol header a client opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// `AMQP 3.1.0.0`: a SASL layer first.
    Sasl,
    /// `AMQP 0.1.0.0`: AMQP straight away.
    Amqp,
}

/// Reads the client's protocol header. An unknown one is answered with
/// the SASL header (what this server speaks) and refused.
pub async fn read_header<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> Result<Header, SaslError> {
    let mut header = [0u8; 8];
    stream.read_exact(&mut header).await?;
    match header {
        SASL_HEADER => Ok(Header::Sasl),
        AMQP_HEADER => Ok(Header::Amqp),
        other => {
            stream.write_all(&SASL_HEADER).await?;
            stream.flush().await?;
            Err(SaslError::Header(other))
        }
    }
}

/// Answers the SASL header and offers the mechanisms (ANONYMOUS only with
/// `anonymous`); returns what the client's `sasl-init` presented.
pub async fn read_sign_in<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    anonymous: bool,
) -> Result<SignIn, SaslError> {
    stream.write_all(&SASL_HEADER).await?;
    let mut mechanisms = vec![Symbol::from("PLAIN")];
    if anonymous {
        mechanisms.push(Symbol::from("ANONYMOUS"));
    }
    let offer = SaslMechanisms { sasl_server_mechanisms: Array::from(mechanisms) };
    write_frame(stream, Frame::Mechanisms(offer)).await?;
    let Frame::Init(init) = read_frame(stream).await? else {
        return Err(SaslError::Frame("expected sasl-init".into()));
    };
    let response = init.initial_response.map(|bytes| bytes.into_vec()).unwrap_or_default();
    match init.mechanism.as_str() {
        "ANONYMOUS" if anonymous => Ok(SignIn::Anonymous),
        "PLAIN" => plain(&response),
        other => Err(SaslError::Mechanism(format!("mechanism {other:?} is not offered"))),
    }
}

/// The parts of a PLAIN response: `authzid NUL authcid NUL passwd`.
fn plain(response: &[u8]) -> Result<SignIn, SaslError> {
    let mut parts = response.split(|byte| *byte == 0);
    let (Some(_authorization), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::Mechanism("a PLAIN response is authzid, user and password, NUL-separated".into()));
    };
    let text = |bytes: &[u8], what: &str| {
        String::from_utf8(bytes.to_vec()).map_err(|_| SaslError::Mechanism(format!("the PLAIN {what} is not UTF-8")))
    };
    Ok(SignIn::Plain { user: text(user, "user")?, password: text(password, "password")? })
}

/// Sends the SASL outcome: `ok`, or `auth` for a refused sign-in.
pub async fn write_outcome<S: AsyncWrite + Unpin>(stream: &mut S, accepted: bool) -> Result<(), SaslError> {
    let code = if accepted { SaslCode::Ok } else { SaslCode::Auth };
    write_frame(stream, Frame::Outcome(SaslOutcome { code, additional_data: None })).await
}

async fn write_frame<S: AsyncWrite + Unpin>(stream: &mut S, frame: Frame) -> Result<(), SaslError> {
    let mut body = BytesMut::new();
    FrameCodec {}.encode(frame, &mut body).map_err(|error| SaslError::Frame(error.to_string()))?;
    let mut out = BytesMut::with_capacity(body.len() + 4);
    out.put_u32((body.len() + 4) as u32);
    out.extend_from_slice(&body);
    stream.write_all(&out).await?;
    // A TLS stream holds what it was given until flushed.
    stream.flush().await?;
    Ok(())
}

async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Frame, SaslError> {
    let size = stream.read_u32().await? as usize;
    if !(FRAME_HEADER_BYTES + 1..=SASL_FRAME_BYTES_MAX).contains(&size) {
        return Err(SaslError::Frame(format!("frame of {size} bytes (SASL frames are 9 to {SASL_FRAME_BYTES_MAX})")));
    }
    let mut body = BytesMut::zeroed(size - 4);
    stream.read_exact(&mut body).await?;
    decode_frame(body)
}

/// Decodes a SASL frame after its size: data offset, type, channel and
/// the performative.
pub fn decode_frame(mut body: BytesMut) -> Result<Frame, SaslError> {
    // The codec reads the four header bytes without looking: never hand
    // it fewer.
    if body.len() <= FRAME_HEADER_BYTES - 4 {
        return Err(SaslError::Frame("no performative".into()));
    }
    // The codec sizes its buffers by declared lengths before it reads.
    crate::encoding::check_values(&body[FRAME_HEADER_BYTES - 4..])
        .map_err(|error| SaslError::Frame(error.to_string()))?;
    let decoded = FrameCodec {}.decode(&mut body);
    match decoded {
        Ok(Some(frame)) => Ok(frame),
        Ok(None) => Err(SaslError::Frame("incomplete frame".into())),
        Err(error) => Err(SaslError::Frame(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_response_has_three_parts() {
        let signed = plain(b"\0alice\0secret").expect("valid");
        assert_eq!(signed, SignIn::Plain { user: "alice".into(), password: "secret".into() });
        assert!(plain(b"alice\0secret").is_err());
        assert!(plain(b"\0a\0b\0c").is_err());
        assert!(plain(b"\0\xff\0x").is_err());
    }

    #[test]
    fn a_short_or_garbled_frame_is_an_error_not_a_panic() {
        for body in [&b""[..], b"\x02", b"\x02\x01\x00\x00", b"\x02\x01\x00\x00\xff\xff", b"\x02\x00\x00\x00\x00"] {
            assert!(decode_frame(BytesMut::from(body)).is_err(), "{body:?}");
        }
    }

    #[tokio::test]
    async fn the_exchange_reads_a_plain_sign_in() {
        let (mut client, mut server) = tokio::io::duplex(4096);
        let serving = tokio::spawn(async move {
            let header = read_header(&mut server).await?;
            assert_eq!(header, Header::Sasl);
            let sign_in = read_sign_in(&mut server, false).await?;
            write_outcome(&mut server, true).await?;
            Ok::<_, SaslError>(sign_in)
        });
        client.write_all(&SASL_HEADER).await.expect("written");
        let mut answer = [0u8; 8];
        client.read_exact(&mut answer).await.expect("header back");
        assert_eq!(answer, SASL_HEADER);
        let Frame::Mechanisms(offer) = read_frame(&mut client).await.expect("mechanisms") else { panic!("mechanisms") };
        assert_eq!(offer.sasl_server_mechanisms.0, vec![Symbol::from("PLAIN")], "no ANONYMOUS when refused");
        let init = fe2o3_amqp::types::sasl::SaslInit {
            mechanism: Symbol::from("PLAIN"),
            initial_response: Some(b"\0alice\0secret".to_vec().into()),
            hostname: None,
        };
        write_frame(&mut client, Frame::Init(init)).await.expect("init");
        let Frame::Outcome(outcome) = read_frame(&mut client).await.expect("outcome") else { panic!("outcome") };
        assert_eq!(outcome.code, SaslCode::Ok);
        let sign_in = serving.await.expect("joined").expect("served");
        assert_eq!(sign_in, SignIn::Plain { user: "alice".into(), password: "secret".into() });
    }
}
