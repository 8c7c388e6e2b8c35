//! The link handshake (§10.4): `LINK_HELLO` from the dialler, checks,
//! `LINK_WELCOME` from the acceptor, the same checks by the dialler. A
//! refusal is a fatal `LINK_ERROR` written straight to the socket.

use std::time::Duration;

use bytes::BytesMut;
use sift_net::BrokerName;
use sift_proto::link::{
    LinkDecoder, LinkFrame, LinkHello, LinkWelcome, LINK_PROTOCOL_VERSION, LINK_PROTOCOL_VERSION_MIN,
};
use sift_tls::{PeerReadHalf, PeerStream, PeerWriteHalf};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::config::DEFAULT_LINK_COST;
use crate::shared::BrokerShared;

use super::error::LinkError;
use super::frames::{encode, read_handshake_frame, write_frame};
use super::network::Registered;

/// A link's socket with its read buffer and decoder.
#[derive(Debug)]
pub(crate) struct LinkStream {
    pub(crate) reader: PeerReadHalf,
    pub(crate) writer: PeerWriteHalf,
    pub(crate) buf: BytesMut,
    pub(crate) decoder: LinkDecoder,
}

/// A link whose handshake succeeded and that is registered as up.
#[derive(Debug)]
pub(crate) struct Established {
    pub(crate) peer: BrokerName,
    pub(crate) stream: LinkStream,
    pub(crate) registered: Registered,
}

impl LinkStream {
    fn new(stream: PeerStream, shared: &BrokerShared) -> LinkStream {
        let (reader, writer) = stream.into_split();
        let max_frame_bytes = shared.config.limits.max_frame_bytes;
        LinkStream { reader, writer, buf: BytesMut::new(), decoder: LinkDecoder::new(max_frame_bytes) }
    }

    /// Sends the fatal `LINK_ERROR` that `error` calls for, closes, and
    /// hands the error back.
    async fn refuse(mut self, error: LinkError, shared: &BrokerShared) -> LinkError {
        if let Some(reply) = error.reply() {
            // Two brokers dialling each other is normal, not an error.
            if !error.is_already_linked() {
                crate::stats::bump(&shared.stats.link_errors);
            }
            let _ = write_frame(&mut self.writer, &reply).await;
        }
        let _ = self.writer.shutdown().await;
        error
    }
}

fn handshake_limit(shared: &BrokerShared) -> Duration {
    Duration::from_millis(shared.config.network.link_handshake_timeout_ms)
}

/// Under mutual TLS, checks that the peer's certificate is for the broker
/// name it gives: a trusted certificate alone does not let one broker
/// pose as another.
fn check_certified(claimed: &str, certified: Option<&str>, shared: &BrokerShared) -> Result<(), LinkError> {
    if !shared.tls.links_are_mutual() || certified == Some(claimed) {
        return Ok(());
    }
    Err(LinkError::NameNotCertified { claimed: claimed.to_string(), certified: certified.unwrap_or("").to_string() })
}

/// Checks the peer's version range against this broker's.
fn check_versions(min: u16, max: u16) -> Result<(), LinkError> {
    if max < LINK_PROTOCOL_VERSION_MIN || min > LINK_PROTOCOL_VERSION {
        return Err(LinkError::UnsupportedVersion {
            min,
            max,
            ours_min: LINK_PROTOCOL_VERSION_MIN,
            ours_max: LINK_PROTOCOL_VERSION,
        });
    }
    Ok(())
}

/// Checks that the peer is in this broker's cluster.
fn check_cluster(shared: &BrokerShared, peer: &str, cluster: &str) -> Result<(), LinkError> {
    let network = &shared.config.network;
    if cluster != network.cluster {
        return Err(LinkError::ClusterMismatch {
            ours_name: network.name.clone(),
            ours: network.cluster.clone(),
            peer: peer.to_string(),
            theirs: cluster.to_string(),
        });
    }
    Ok(())
}

/// Accepts a link: reads `LINK_HELLO`, checks it, registers the link and
/// queues `LINK_WELCOME` as its first frame.
pub(crate) async fn accept(
    stream: PeerStream,
    address: String,
    shared: &BrokerShared,
) -> Result<Established, LinkError> {
    let certified = stream.peer_identity();
    let mut link = LinkStream::new(stream, shared);
    let limit = handshake_limit(shared);
    let first = read_handshake_frame(&mut link.reader, &mut link.buf, &mut link.decoder, "LINK_HELLO", limit).await;
    let hello = match first {
        Ok(LinkFrame::Hello(hello)) => hello,
        Ok(other) => {
            return Err(link.refuse(LinkError::Unexpected { expected: "LINK_HELLO", got: other.name() }, shared).await)
        }
        Err(error) => return Err(link.refuse(error, shared).await),
    };
    let admitted =
        check_certified(&hello.broker, certified.as_deref(), shared).and_then(|()| admit(&hello, &address, shared));
    match admitted {
        Ok(registered) => Ok(Established { peer: BrokerName::from(hello.broker.as_str()), stream: link, registered }),
        Err(error) => Err(link.refuse(error, shared).await),
    }
}

/// The acceptor's checks, in the order of §10.4, then registration.
fn admit(hello: &LinkHello, address: &str, shared: &BrokerShared) -> Result<Registered, LinkError> {
    check_versions(hello.version_min, hello.version_max)?;
    check_cluster(shared, &hello.broker, &hello.cluster)?;
    let network = &shared.config.network;
    // The acceptor has no configured cost for a link it did not dial.
    let welcome = LinkFrame::Welcome(LinkWelcome {
        version: hello.version_max.min(LINK_PROTOCOL_VERSION),
        cluster: network.cluster.clone(),
        broker: network.name.clone(),
        link_cost: DEFAULT_LINK_COST,
    });
    let cost = hello.link_cost.max(DEFAULT_LINK_COST);
    shared.links.register(&hello.broker, address, cost, encode(&welcome), false, &shared.stats)
}

/// Dials `address`, sends `LINK_HELLO`, checks the `LINK_WELCOME` and
/// registers the link.
pub(crate) async fn dial(address: &str, cost: u32, shared: &BrokerShared) -> Result<Established, LinkError> {
    let limit = handshake_limit(shared);
    let connect = tokio::time::timeout(limit, connect(address, shared)).await;
    let stream = connect.map_err(|_| LinkError::HandshakeTimeout { expected: "connection", limit })??;
    let certified = stream.peer_identity();
    let mut link = LinkStream::new(stream, shared);
    let network = &shared.config.network;
    let hello = LinkFrame::Hello(LinkHello {
        version_min: LINK_PROTOCOL_VERSION_MIN,
        version_max: LINK_PROTOCOL_VERSION,
        cluster: network.cluster.clone(),
        broker: network.name.clone(),
        link_cost: cost,
    });
    write_frame(&mut link.writer, &hello).await?;
    let answer = read_handshake_frame(&mut link.reader, &mut link.buf, &mut link.decoder, "LINK_WELCOME", limit).await;
    let welcome = match answer {
        Ok(LinkFrame::Welcome(welcome)) => welcome,
        Ok(LinkFrame::Error(refusal)) => {
            return Err(LinkError::Refused { code: refusal.code, message: refusal.message });
        }
        Ok(other) => {
            return Err(link
                .refuse(LinkError::Unexpected { expected: "LINK_WELCOME", got: other.name() }, shared)
                .await)
        }
        Err(error) => return Err(link.refuse(error, shared).await),
    };
    let checked = check_certified(&welcome.broker, certified.as_deref(), shared)
        .and_then(|()| check_versions(welcome.version, welcome.version))
        .and_then(|()| check_cluster(shared, &welcome.broker, &welcome.cluster))
        .and_then(|()| {
            let agreed = cost.max(welcome.link_cost);
            shared.links.register(&welcome.broker, address, agreed, None, true, &shared.stats)
        });
    match checked {
        Ok(registered) => Ok(Established { peer: BrokerName::from(welcome.broker.as_str()), stream: link, registered }),
        Err(error) => Err(link.refuse(error, shared).await),
    }
}

/// Opens a link's connection to `address`: under TLS when links are
/// (checking the peer's certificate against the host dialled), else plain.
async fn connect(address: &str, shared: &BrokerShared) -> Result<PeerStream, LinkError> {
    let stream = TcpStream::connect(address).await?;
    // Link frames are small and latency matters; writers batch on their own.
    let _ = stream.set_nodelay(true);
    match shared.tls.dial() {
        None => Ok(PeerStream::Plain(stream)),
        Some(tls) => {
            let host = sift_tls::host_of(address);
            let stream = tls.connect(host, stream).await.map_err(|error| LinkError::Tls(error.to_string()))?;
            Ok(PeerStream::from(stream))
        }
    }
}
