//! `sift bench stomp`: STOMP publishing and selector routing, against
//! Sift's STOMP front-end (embedded) or any STOMP 1.2 broker (`--stomp
//! ADDR`, e.g. ActiveMQ), with the workloads of the peers' `stompbench`.
//!
//! - `plain1`: one publisher → one subscriber on `/topic/bench.plain`.
//! - `sel1000`: one subscriber connection with 1 000 subscriptions whose
//!   selectors are `sym = 'S<j mod 50>' AND price > <5 × (j div 50)>`;
//!   messages carry `sym = S<i mod 50>` and a price spread over 0-99, so
//!   each matches about 1 % of the subscriptions (10 on average).
//! - `sel1000none`: the same subscriptions, messages with price 0: none
//!   matches, every selector is evaluated and fails.
//! - `pubonly`: one publisher, no subscriber.
//!
//! The publisher sends `count` SENDs back to back without receipts, then
//! one with a receipt: the publish rate counts to that receipt. Deliveries
//! are counted at the subscriber until the number the selectors owe
//! arrived (computed here, message by message), or none came for a while.

use sift_broker::front_end::FrontEnd;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::Args;
use sift_stomp::frame::{Command, Decoded, Decoder, Frame, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::BenchError;
use crate::options::CommonArgs;
use crate::output::{finish, Printed};
use crate::plot::Plot;
use crate::report::{Report, Table};

/// The scenario's name on the command line.
pub const NAME: &str = "stomp";
const TITLE: &str = "STOMP: publish and delivery msgs/s, plain and with 1,000 JMS selectors (stompbench's workloads)";
/// Subscriptions of the selector modes.
const SELECTOR_SUBSCRIPTIONS: u64 = 1_000;
/// Distinct symbols of the selector workload.
const SYMBOLS: u64 = 50;
/// Deliveries still missing after this long without a new one are lost.
const IDLE_END: Duration = Duration::from_secs(2);
/// Payload of every message.
const PAYLOAD_BYTES: usize = 128;
/// SENDs gathered into one write.
const SEND_BATCH: u64 = 256;

/// Arguments of `sift bench stomp`.
#[derive(Debug, Args, Clone)]
pub struct StompArgs {
    /// A running STOMP broker to measure instead of an embedded Sift.
    #[arg(long, value_name = "ADDR")]
    pub stomp: Option<SocketAddr>,
    /// Modes, comma-separated: plain1, sel1000, sel1000none, pubonly; default all.
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Messages per mode; default 200000 (with `--quick` 2000).
    #[arg(long)]
    pub count: Option<u64>,
    /// Options every scenario takes (`--server` does not apply: use `--stomp`).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs the scenario, writes its results and prints them.
pub async fn run(args: StompArgs) -> Result<(), BenchError> {
    let count = args.count.unwrap_or(if args.common.quick { 2_000 } else { 200_000 });
    let modes = match args.modes.is_empty() {
        true => vec!["plain1".to_string(), "sel1000".into(), "sel1000none".into(), "pubonly".into()],
        false => args.modes.clone(),
    };
    let embedded = match args.stomp {
        Some(_) => None,
        None => Some(Embedded::start().await?),
    };
    let address = match (&embedded, args.stomp) {
        (Some(embedded), _) => embedded.stomp.local_addr(),
        (None, Some(address)) => address,
        (None, None) => return Err(BenchError::Usage("no STOMP broker".into())),
    };
    let mut table = Table::new(
        "stomp",
        "STOMP: messages published per second and deliveries per second",
        &[
            ("mode", ""),
            ("subscriptions", ""),
            ("messages", ""),
            ("publish msgs/s", "1/s"),
            ("deliveries", ""),
            ("deliveries/s", "1/s"),
        ],
    );
    let mut outcome = Ok(());
    for mode in &modes {
        match measure(address, mode, count).await {
            Ok(row) => table.push_row(row)?,
            Err(error) => {
                outcome = Err(error);
                break;
            }
        }
    }
    if let Some(embedded) = embedded {
        embedded.stop().await;
    }
    outcome?;
    let mut report = Report::new(NAME, TITLE);
    report.parameter("server", args.stomp.map_or("embedded".to_string(), |address| address.to_string()));
    report.parameter("count", count);
    report.parameter("payload_bytes", PAYLOAD_BYTES);
    let plot = Plot::lines(
        "stomp-rates.svg",
        "STOMP: published msgs/s against subscriptions, by mode",
        &table,
        "subscriptions",
        "publish msgs/s",
    )?
    .series(&["mode"]);
    report.plots.push(plot);
    report.tables.push(table);
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

/// An embedded broker with its STOMP front-end.
struct Embedded {
    broker: sift_broker::RunningBroker,
    stomp: sift_stomp::StompFrontEnd,
}

impl Embedded {
    async fn start() -> Result<Embedded, BenchError> {
        let config = sift_broker::Config::scratch();
        let stomp_config = sift_stomp::StompConfig::scratch();
        let broker = sift_broker::RunningBroker::start(config).await?;
        match sift_stomp::StompFrontEnd::start(stomp_config, broker.connector()).await {
            Ok(stomp) => Ok(Embedded { broker, stomp }),
            Err(error) => {
                broker.shutdown().await;
                Err(BenchError::Usage(error.to_string()))
            }
        }
    }

    async fn stop(self) {
        self.stomp.shutdown().await;
        self.broker.shutdown().await;
    }
}

/// One mode: its table row.
async fn measure(address: SocketAddr, mode: &str, count: u64) -> Result<Vec<crate::report::Cell>, BenchError> {
    let (subscriptions, topic) = match mode {
        "plain1" => (1, "bench.plain"),
        "sel1000" | "sel1000none" => (SELECTOR_SUBSCRIPTIONS, "bench.sel"),
        "pubonly" => (0, "bench.pubonly"),
        other => {
            return Err(BenchError::Usage(format!("unknown mode {other:?}: plain1, sel1000, sel1000none, pubonly")))
        }
    };
    let matching = mode == "sel1000";
    let mut subscriber = match subscriptions {
        0 => None,
        1 => Some(Connection::subscriber(address, topic, &[None]).await?),
        _ => Some(Connection::subscriber(address, topic, &selectors()).await?),
    };
    let owed: u64 = match mode {
        "plain1" => count,
        "sel1000" => (0..count).map(matches_of).sum(),
        _ => 0,
    };
    let mut publisher = Connection::open(address).await?;
    let started = Instant::now();
    let counting = subscriber.take().map(|subscriber| tokio::spawn(subscriber.count_until(owed)));
    publisher.publish(topic, count, matching).await?;
    let publish_seconds = started.elapsed().as_secs_f64();
    let (delivered, delivery_seconds) = match counting {
        Some(task) => {
            task.await.map_err(|error| BenchError::Task { role: "subscriber", reason: error.to_string() })??
        }
        None => (0, 0.0),
    };
    let delivery_rate = if delivery_seconds > 0.0 { delivered as f64 / delivery_seconds } else { 0.0 };
    Ok(vec![
        mode.into(),
        subscriptions.into(),
        count.into(),
        (count as f64 / publish_seconds).into(),
        delivered.into(),
        delivery_rate.into(),
    ])
}

/// The selectors of subscription `j`: `sym = 'S<j mod 50>' AND price > <5 (j div 50)>`.
fn selectors() -> Vec<Option<String>> {
    (0..SELECTOR_SUBSCRIPTIONS)
        .map(|j| Some(format!("sym = 'S{}' AND price > {}", j % SYMBOLS, 5 * (j / SYMBOLS))))
        .collect()
}

/// The price of message `index` of the matching workload: spread over 0-99.
fn price_of(index: u64) -> u64 {
    (index * 37 + index / SYMBOLS) % 100
}

/// How many of the 1 000 selectors message `index` matches.
fn matches_of(index: u64) -> u64 {
    let price = price_of(index);
    (0..SELECTOR_SUBSCRIPTIONS / SYMBOLS).filter(|level| 5 * level < price).count() as u64
}

/// A STOMP connection with its read buffer.
struct Connection {
    stream: TcpStream,
    buf: BytesMut,
    decoder: Decoder,
}

impl Connection {
    async fn open(address: SocketAddr) -> Result<Connection, BenchError> {
        let stream =
            TcpStream::connect(address).await.map_err(|error| BenchError::Usage(format!("STOMP connect: {error}")))?;
        let _ = stream.set_nodelay(true);
        let mut connection = Connection { stream, buf: BytesMut::new(), decoder: Decoder::new(Limits::default()) };
        let connect = Frame::new(Command::Connect)
            .header("accept-version", "1.2")
            .header("host", "localhost")
            .header("heart-beat", "0,0");
        connection.write(&[connect]).await?;
        match connection.next_frame(Duration::from_secs(10)).await? {
            Some(frame) if frame.command == Command::Connected => Ok(connection),
            other => Err(BenchError::Usage(format!("STOMP: expected CONNECTED, got {other:?}"))),
        }
    }

    /// A connection with one subscription per selector (`None`: no selector) on `topic`.
    async fn subscriber(
        address: SocketAddr,
        topic: &str,
        selectors: &[Option<String>],
    ) -> Result<Connection, BenchError> {
        let mut connection = Connection::open(address).await?;
        let mut frames = Vec::with_capacity(selectors.len());
        for (index, selector) in selectors.iter().enumerate() {
            let mut frame = Frame::new(Command::Subscribe)
                .header("id", index.to_string())
                .header("destination", format!("/topic/{topic}"))
                .header("ack", "auto");
            if let Some(selector) = selector {
                frame = frame.header("selector", selector.clone());
            }
            if index + 1 == selectors.len() {
                frame = frame.header("receipt", "subscribed");
            }
            frames.push(frame);
        }
        connection.write(&frames).await?;
        connection.await_receipt("subscribed").await?;
        Ok(connection)
    }

    async fn write(&mut self, frames: &[Frame]) -> Result<(), BenchError> {
        let mut bytes = BytesMut::new();
        for frame in frames {
            frame.encode(&mut bytes);
        }
        self.stream.write_all(&bytes).await.map_err(|error| BenchError::Usage(format!("STOMP write: {error}")))
    }

    /// The next frame, `None` after `idle` without one.
    async fn next_frame(&mut self, idle: Duration) -> Result<Option<Frame>, BenchError> {
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(Decoded::Frame(frame))) => return Ok(Some(frame)),
                Ok(Some(Decoded::HeartBeat)) => continue,
                Ok(None) => {}
                Err(error) => return Err(BenchError::Usage(format!("STOMP: {error}"))),
            }
            match tokio::time::timeout(idle, self.stream.read_buf(&mut self.buf)).await {
                Err(_) => return Ok(None),
                Ok(Ok(0)) => return Err(BenchError::Usage("STOMP: the server closed the connection".into())),
                Ok(Err(error)) => return Err(BenchError::Usage(format!("STOMP read: {error}"))),
                Ok(Ok(_)) => {}
            }
        }
    }

    async fn await_receipt(&mut self, receipt: &str) -> Result<(), BenchError> {
        loop {
            match self.next_frame(Duration::from_secs(60)).await? {
                Some(frame) if frame.command == Command::Receipt && frame.get("receipt-id") == Some(receipt) => {
                    return Ok(())
                }
                Some(frame) if frame.command == Command::Error => {
                    return Err(BenchError::Usage(format!(
                        "STOMP ERROR: {:?} {}",
                        frame.get("message"),
                        String::from_utf8_lossy(&frame.body)
                    )));
                }
                Some(_) => {}
                None => return Err(BenchError::Timeout(format!("the receipt {receipt}"))),
            }
        }
    }

    /// Sends `count` messages, then one with a receipt, and waits for it.
    async fn publish(&mut self, topic: &str, count: u64, matching: bool) -> Result<(), BenchError> {
        let destination = format!("/topic/{topic}");
        let payload = bytes::Bytes::from(vec![b'x'; PAYLOAD_BYTES]);
        let mut sent = 0;
        while sent < count {
            let batch: Vec<Frame> = (sent..count.min(sent + SEND_BATCH))
                .map(|index| {
                    let price = if matching { price_of(index) } else { 0 };
                    let frame = Frame::new(Command::Send)
                        .header("destination", destination.clone())
                        .header("sym", format!("S{}", index % SYMBOLS))
                        .header("price", price.to_string());
                    Frame { body: payload.clone(), ..frame }
                })
                .collect();
            sent += batch.len() as u64;
            self.write(&batch).await?;
        }
        let last =
            Frame::new(Command::Send).header("destination", "/topic/bench.receipt").header("receipt", "published");
        self.write(&[last]).await?;
        self.await_receipt("published").await
    }

    /// Counts MESSAGE frames until `owed` arrived or none came for
    /// [`IDLE_END`]; the count and the seconds from the first to the last.
    async fn count_until(mut self, owed: u64) -> Result<(u64, f64), BenchError> {
        let mut delivered = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        while delivered < owed {
            match self.next_frame(IDLE_END).await? {
                Some(frame) if frame.command == Command::Message => {
                    delivered += 1;
                    last = Instant::now();
                    first.get_or_insert(last);
                }
                Some(_) => {}
                None => break,
            }
        }
        Ok((delivered, first.map_or(0.0, |first| last.duration_since(first).as_secs_f64())))
    }
}
