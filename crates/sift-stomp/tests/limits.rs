//! The STOMP front-end over real sockets, with raw frames: version and
//! heart-beat negotiation, heart-beats both ways, and every limit.

use sift_broker::front_end::FrontEnd;
use std::time::Duration;

use bytes::BytesMut;
use sift_broker::{Config, RunningBroker};
use sift_stomp::frame::{Command, Decoded, Decoder, Frame, Limits};
use sift_stomp::{StompConfig, StompFrontEnd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest wait for something that should happen.
const PATIENCE: Duration = Duration::from_secs(10);

async fn served(adjust: impl FnOnce(&mut StompConfig)) -> (RunningBroker, StompFrontEnd) {
    let mut stomp_config = StompConfig::scratch();
    adjust(&mut stomp_config);
    let broker = RunningBroker::start(Config::scratch()).await.expect("broker starts");
    let stomp = StompFrontEnd::start(stomp_config, broker.connector()).await.expect("STOMP starts");
    (broker, stomp)
}

async fn stop(broker: RunningBroker, stomp: StompFrontEnd) {
    stomp.shutdown().await;
    broker.shutdown().await;
}

/// A raw connection that reads frames and heart-beats.
struct Raw {
    stream: TcpStream,
    buf: BytesMut,
    decoder: Decoder,
}

impl Raw {
    async fn open(stomp: &StompFrontEnd) -> Raw {
        let stream = TcpStream::connect(stomp.local_addr()).await.expect("connect");
        Raw { stream, buf: BytesMut::new(), decoder: Decoder::new(Limits::default()) }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    async fn send(&mut self, frame: Frame) {
        let mut bytes = BytesMut::new();
        frame.encode(&mut bytes);
        self.write(&bytes).await;
    }

    /// The next frame or heart-beat; `None` once the server closed.
    async fn next(&mut self) -> Option<Decoded> {
        tokio::time::timeout(PATIENCE, async {
            loop {
                if let Some(decoded) = self.decoder.decode(&mut self.buf).expect("the server sends valid frames") {
                    return Some(decoded);
                }
                match self.stream.read_buf(&mut self.buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await
        .expect("the server answers in time")
    }

    /// The next frame, skipping heart-beats.
    async fn frame(&mut self) -> Option<Frame> {
        loop {
            match self.next().await? {
                Decoded::Frame(frame) => return Some(frame),
                Decoded::HeartBeat => continue,
            }
        }
    }
}

fn connect(version: Option<&str>, heart_beat: &str) -> Frame {
    let frame = Frame::new(Command::Connect).header("host", "localhost").header("heart-beat", heart_beat);
    match version {
        Some(version) => frame.header("accept-version", version),
        None => frame,
    }
}

#[tokio::test]
async fn versions_are_negotiated_and_unsupported_ones_refused() {
    let (broker, stomp) = served(|_| {}).await;
    for (offered, chosen) in [(Some("1.1,1.2"), "1.2"), (Some("1.0,1.1"), "1.1"), (None, "1.0")] {
        let mut raw = Raw::open(&stomp).await;
        raw.send(connect(offered, "0,0")).await;
        let connected = raw.frame().await.expect("CONNECTED");
        assert_eq!((connected.command, connected.get("version")), (Command::Connected, Some(chosen)), "{offered:?}");
    }
    let mut raw = Raw::open(&stomp).await;
    raw.send(connect(Some("2.0"), "0,0")).await;
    let error = raw.frame().await.expect("ERROR");
    assert_eq!((error.command, error.get("message")), (Command::Error, Some("unsupported version")));
    assert!(String::from_utf8_lossy(&error.body).contains("1.0,1.1,1.2"));
    assert!(raw.frame().await.is_none(), "closed after the ERROR");
    stop(broker, stomp).await;
}

#[tokio::test]
async fn heart_beats_flow_both_ways_and_a_silent_client_is_closed() {
    let (broker, stomp) = served(|config| config.heart_beat_ms = 200).await;
    let mut raw = Raw::open(&stomp).await;
    raw.send(connect(Some("1.2"), "200,200")).await;
    assert_eq!(raw.frame().await.map(|frame| frame.command), Some(Command::Connected));
    // The server beats while nothing else is sent.
    assert_eq!(raw.next().await, Some(Decoded::HeartBeat));
    // This client beats, so it stays; then it goes silent and is closed.
    for _ in 0..3 {
        raw.write(b"\n").await;
        assert_eq!(raw.next().await, Some(Decoded::HeartBeat));
    }
    let error = raw.frame().await.expect("an ERROR for the silence");
    assert_eq!(error.get("message"), Some("heart-beat missed"));
    assert!(raw.frame().await.is_none());
    stop(broker, stomp).await;
}

#[tokio::test]
async fn limits_get_error_frames_and_the_connection_closes() {
    let (broker, stomp) = served(|config| {
        config.connect_timeout_ms = 100;
        config.max_frame_bytes = 1024;
        config.max_transaction_frames = 2;
        config.max_connections = 3;
    })
    .await;
    // No CONNECT in time.
    let mut silent = Raw::open(&stomp).await;
    assert_eq!(
        silent.frame().await.and_then(|frame| frame.get("message").map(str::to_string)).as_deref(),
        Some("no CONNECT")
    );
    // A frame over max_frame_bytes.
    let mut large = Raw::open(&stomp).await;
    large.send(connect(Some("1.2"), "0,0")).await;
    large.frame().await.expect("CONNECTED");
    let body = vec![b'x'; 4096];
    large.send(Frame { body: body.into(), ..Frame::new(Command::Send).header("destination", "/topic/a") }).await;
    let error = large.frame().await.expect("ERROR");
    assert!(String::from_utf8_lossy(&error.body).contains("1024"), "{error:?}");
    // A transaction over max_transaction_frames.
    let mut busy = Raw::open(&stomp).await;
    busy.send(connect(Some("1.2"), "0,0")).await;
    busy.frame().await.expect("CONNECTED");
    busy.send(Frame::new(Command::Begin).header("transaction", "t")).await;
    for _ in 0..3 {
        busy.send(Frame::new(Command::Send).header("destination", "/topic/a").header("transaction", "t")).await;
    }
    assert_eq!(
        busy.frame().await.and_then(|frame| frame.get("message").map(str::to_string)).as_deref(),
        Some("transaction too large")
    );
    // The first frame must be CONNECT.
    let mut rude = Raw::open(&stomp).await;
    rude.send(Frame::new(Command::Send).header("destination", "/topic/a")).await;
    assert_eq!(
        rude.frame().await.and_then(|frame| frame.get("message").map(str::to_string)).as_deref(),
        Some("expected CONNECT")
    );
    stop(broker, stomp).await;
}

#[tokio::test]
async fn connections_over_the_limit_are_refused_with_an_error() {
    let (broker, stomp) = served(|config| config.max_connections = 1).await;
    let mut first = Raw::open(&stomp).await;
    first.send(connect(Some("1.2"), "0,0")).await;
    first.frame().await.expect("CONNECTED");
    let mut second = Raw::open(&stomp).await;
    let error = second.frame().await.expect("ERROR");
    assert_eq!(error.get("message"), Some("too many connections"));
    assert_eq!(stomp.counters().connections_refused.load(std::sync::atomic::Ordering::Relaxed), 1);
    drop(first);
    stop(broker, stomp).await;
}

/// Waits until `condition` holds, failing the test after [`PATIENCE`].
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_holds_bounded_memory_and_gives_it_back() {
    let (broker, stomp) = served(|config| config.delivery_batches = 2).await;
    let mut subscriber = Raw::open(&stomp).await;
    subscriber.send(connect(Some("1.2"), "0,0")).await;
    assert_eq!(subscriber.frame().await.map(|frame| frame.command), Some(Command::Connected));
    let subscribe = Frame::new(Command::Subscribe).header("destination", "/topic/held").header("id", "0");
    subscriber.send(subscribe.header("receipt", "r")).await;
    assert_eq!(subscriber.frame().await.map(|frame| frame.command), Some(Command::Receipt));
    // The subscriber reads nothing more: its socket, then the door's
    // batches, then its queue fill, and each holds what it holds.
    let options = sift_client::ClientOptions { name: "publisher".into(), reconnect: false, ..Default::default() };
    let publisher = sift_client::Client::connect(broker.local_addr().to_string(), options).await.expect("connects");
    let payload = bytes::Bytes::from(vec![b'x'; 16 * 1024]);
    let topic = sift_core::TopicName::new("held").expect("topic");
    for _ in 0..1_999 {
        publisher.publish(sift_core::Message::new(topic.clone(), payload.clone())).await.expect("publish");
    }
    // The confirm of the last comes once it has been routed, so every
    // message before it is queued towards the subscriber, or written.
    let last = sift_core::Message::new(topic.clone(), payload.clone());
    publisher.publish_confirmed(last, sift_client::PublishOptions::default()).await.expect("confirmed");
    assert!(broker.memory_bytes() > 0, "messages wait for the subscriber");
    assert!(broker.memory_bytes() <= broker.config().limits.memory_bytes_max);
    drop(subscriber);
    publisher.close().await;
    // Nothing that waited for the subscriber keeps its bytes counted: the
    // outbox and the door's batches give them back when it goes.
    eventually("the memory is given back", || broker.memory_bytes() == 0).await;
    stop(broker, stomp).await;
}
