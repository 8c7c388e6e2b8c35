//! `sift bench nb transfer`: large transfers over parallel streams
//! (NaradaBrokering §2.2, Fig. 5-7).
//!
//! **The experiment.** A file of each size is sent as one chunked transfer
//! through a broker, its fragments spread over 1, 2, 4, 8 and 16
//! connections, to a receiver with as many connections (one queue group)
//! that writes each fragment in place and checks every CRC. A point is the
//! time from the first read to the receiver's checked, complete file (not
//! synced to disk: the network path is measured, not the disk). The paper
//! compared a LAN, where streams only added overhead, with continental and
//! transatlantic WANs, where they won; here the LAN is loopback, and the
//! WAN a path this process makes: a network namespace behind `tc tbf` at a
//! chosen rate, with Toxiproxy adding latency each way (`--shaped-mbit`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sift_client::transfer::{send_file, Reassembler, ReassemblyConfig, TransferEvent, TransferOptions};
use sift_client::{Client, ClientOptions, SubscribeOptions};
use sift_core::{Message, TopicName};
use tokio::sync::mpsc;

use super::NbArgs;
use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::output::{finish, Printed};
use crate::plot::Plot;
use crate::report::{Cell, Report, Table};
use crate::shaped::ShapedPath;

const MIB: u64 = 1024 * 1024;
const SIZES_MIB_FULL: [u64; 4] = [1, 16, 128, 1024];
const SIZES_MIB_QUICK: [u64; 2] = [1, 16];
const STREAMS_FULL: [usize; 5] = [1, 2, 4, 8, 16];
const STREAMS_QUICK: [usize; 2] = [1, 4];
/// Longest wait for a transfer to complete at the receiver.
const TRANSFER_PATIENCE: Duration = Duration::from_secs(600);
/// Deliveries buffered between the receiving connections and the reassembler.
const MERGED_DELIVERIES_MAX: usize = 256;

/// One transfer measured.
#[derive(Debug, Clone)]
struct Point {
    path: &'static str,
    mebibytes: u64,
    streams: usize,
    seconds: f64,
}

/// Runs the grid on loopback, then on the shaped path when asked.
pub async fn run(args: NbArgs) -> Result<(), BenchError> {
    let quick = args.common.quick;
    let sizes = if args.mebibytes.is_empty() {
        if quick {
            SIZES_MIB_QUICK.to_vec()
        } else {
            SIZES_MIB_FULL.to_vec()
        }
    } else {
        args.mebibytes.clone()
    };
    let streams = if args.streams.is_empty() {
        if quick {
            STREAMS_QUICK.to_vec()
        } else {
            STREAMS_FULL.to_vec()
        }
    } else {
        args.streams.clone()
    };
    if sizes.contains(&0) || streams.contains(&0) || streams.iter().any(|count| *count > 64) {
        return Err(BenchError::Usage("--mebibytes need values above 0, --streams 1 to 64".into()));
    }
    let scratch = std::env::temp_dir().join(format!("sift-bench-transfer-{}", std::process::id()));
    let measured = measure_all(&args, &sizes, &streams, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    let points = measured?;
    let mut report = Report::new(super::NAME, "NaradaBrokering §2.2: transfer time against size and parallel streams");
    report.parameter("mebibytes", list(&sizes));
    report.parameter("streams", list(&streams));
    report.parameter("shaped_mbit", args.shaped_mbit.map_or("off".to_string(), |mbit| mbit.to_string()));
    report.parameter("shaped_latency_ms_each_way", args.shaped_latency_ms);
    fill_report(&mut report, &points)?;
    finish(&report, &args.common, Printed::Tables)?;
    Ok(())
}

fn list<T: ToString>(values: &[T]) -> String {
    values.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

async fn measure_all(
    args: &NbArgs,
    sizes: &[u64],
    streams: &[usize],
    scratch: &Path,
) -> Result<Vec<Point>, BenchError> {
    std::fs::create_dir_all(scratch).map_err(|source| BenchError::File { path: scratch.to_path_buf(), source })?;
    let mut points = Vec::new();
    let endpoints = Endpoints::single(sift_broker::Config::scratch()).await?;
    let loopback = grid("loopback", endpoints.publish_addr(), sizes, streams, scratch, args.common.json).await;
    endpoints.shutdown().await;
    points.extend(loopback?);
    if let Some(mbit) = args.shaped_mbit {
        let path = ShapedPath::start(mbit, args.shaped_latency_ms, &[]).await?;
        let address = path.address.to_string();
        points.extend(grid("shaped", &address, sizes, streams, scratch, args.common.json).await?);
    }
    Ok(points)
}

async fn grid(
    path: &'static str,
    address: &str,
    sizes: &[u64],
    streams: &[usize],
    scratch: &Path,
    quiet: bool,
) -> Result<Vec<Point>, BenchError> {
    let mut points = Vec::new();
    for &mebibytes in sizes {
        let source = scratch.join(format!("source-{mebibytes}.bin"));
        if !source.exists() {
            write_source(&source, mebibytes)?;
        }
        for &count in streams {
            if !quiet {
                eprintln!("transfer: {path}, {mebibytes} MiB over {count} streams");
            }
            let seconds = transfer_once(address, &source, count, &scratch.join("received")).await?;
            points.push(Point { path, mebibytes, streams: count, seconds });
        }
    }
    Ok(points)
}

/// A file of `mebibytes` MiB whose blocks differ.
fn write_source(path: &Path, mebibytes: u64) -> Result<(), BenchError> {
    use std::io::Write;
    let error = |source| BenchError::File { path: path.to_path_buf(), source };
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(error)?);
    let mut block = vec![0u8; MIB as usize];
    for number in 0..mebibytes {
        for (offset, byte) in block.iter_mut().enumerate() {
            *byte = (offset as u8) ^ (number as u8).wrapping_mul(7);
        }
        file.write_all(&block).map_err(error)?;
    }
    file.flush().map_err(error)
}

/// Sends `source` over `streams` connections to a receiver with as many;
/// returns the seconds until the receiver holds the checked file.
async fn transfer_once(address: &str, source: &Path, streams: usize, into: &Path) -> Result<f64, BenchError> {
    let topic = format!("bench.transfer.{}", sift_client::system_now_ns());
    let receiving = Receiver::open(address, &topic, streams, into).await?;
    let mut senders = Vec::with_capacity(streams);
    for stream in 0..streams {
        let options = ClientOptions { name: format!("sender-{stream}"), reconnect: false, ..ClientOptions::default() };
        senders.push(Client::connect(address, options).await?);
    }
    let template =
        Message::new(TopicName::new(topic.as_str()).map_err(|e| BenchError::Usage(e.to_string()))?, Bytes::new());
    let started = Instant::now();
    let receiver_task = tokio::spawn(receiving.complete_one());
    send_file(&senders, template, source, &TransferOptions::default())
        .await
        .map_err(|error| BenchError::Usage(format!("sending {}: {error}", source.display())))?;
    let (saved, completed) = tokio::time::timeout(TRANSFER_PATIENCE, receiver_task)
        .await
        .map_err(|_| BenchError::Timeout("the receiver holds the whole transfer".into()))?
        .map_err(|error| BenchError::Task { role: "subscriber", reason: error.to_string() })??;
    let seconds = completed.saturating_duration_since(started).as_secs_f64();
    let _ = std::fs::remove_file(saved);
    for sender in senders {
        sender.close().await;
    }
    Ok(seconds)
}

/// The receiving side: N connections in one queue group, merged into one
/// reassembler.
struct Receiver {
    clients: Vec<Client>,
    deliveries: mpsc::Receiver<Box<Message>>,
    reassembler: Reassembler,
}

impl Receiver {
    async fn open(address: &str, topic: &str, streams: usize, into: &Path) -> Result<Receiver, BenchError> {
        let mut config = ReassemblyConfig::new(PathBuf::from(into));
        config.ordered_streams = streams == 1;
        config.sync = false;
        let reassembler =
            Reassembler::new(config).map_err(|source| BenchError::File { path: into.to_path_buf(), source })?;
        let (sender, deliveries) = mpsc::channel(MERGED_DELIVERIES_MAX);
        let mut clients = Vec::with_capacity(streams);
        for stream in 0..streams {
            let options =
                ClientOptions { name: format!("receiver-{stream}"), reconnect: false, ..ClientOptions::default() };
            let client = Client::connect(address, options).await?;
            let mut subscription = client.subscribe(SubscribeOptions::new(topic).queue_group("receivers")).await?;
            let sender = sender.clone();
            tokio::spawn(async move {
                while let Some(delivery) = subscription.next().await {
                    if sender.send(delivery.message).await.is_err() {
                        return;
                    }
                }
            });
            clients.push(client);
        }
        Ok(Receiver { clients, deliveries, reassembler })
    }

    /// Feeds fragments until one transfer completes; returns its file and
    /// when it completed (before the connections are closed, which takes
    /// a round trip each).
    async fn complete_one(mut self) -> Result<(PathBuf, Instant), BenchError> {
        let outcome = loop {
            let Some(message) = self.deliveries.recv().await else {
                break Err(BenchError::Timeout("the receiving connections ended first".into()));
            };
            match self.reassembler.accept(&message, Instant::now()) {
                Some(Some(TransferEvent::Completed { path, .. })) => break Ok((path, Instant::now())),
                Some(Some(TransferEvent::Failed(failure))) => {
                    break Err(BenchError::Usage(format!("the transfer failed: {}", failure.reason)));
                }
                _ => {}
            }
        };
        for client in self.clients {
            client.close().await;
        }
        outcome
    }
}

const COLUMNS: [(&str, &str); 5] =
    [("path", ""), ("size", "MiB"), ("streams", ""), ("seconds", "s"), ("throughput", "MB/s")];

fn fill_report(report: &mut Report, points: &[Point]) -> Result<(), BenchError> {
    let mut table =
        Table::new("transfer", "Sift: time to a checked, complete file, by path, size and streams", &COLUMNS);
    for point in points {
        let megabytes = (point.mebibytes * MIB) as f64 / 1e6;
        table.push_row(vec![
            Cell::from(point.path),
            point.mebibytes.into(),
            point.streams.into(),
            point.seconds.into(),
            (megabytes / point.seconds.max(1e-9)).into(),
        ])?;
    }
    for path in ["loopback", "shaped"] {
        if points.iter().any(|point| point.path == path) {
            report.plots.push(
                Plot::lines(
                    &format!("transfer-{path}.svg"),
                    &format!("Transfer time against streams, {path} (cf. Fig. 5-7)"),
                    &table,
                    "streams",
                    "seconds",
                )?
                .only("path", path)
                .series(&["size"])
                .log_x(2.0)
                .log_y(10.0)
                .labels("parallel streams", "seconds to a complete file"),
            );
        }
    }
    report.tables.push(table);
    report.tables.push(paper_table()?);
    report.note("The paper's rule: parallel time = slowest stream + overhead (fragmenting, merging), and streams pay off when the single stream's time exceeds that overhead, i.e. on long, fat paths.");
    Ok(())
}

/// What §2.2 reports, in words and the iperf bandwidths it gives.
fn paper_table() -> Result<Table, BenchError> {
    let mut table =
        Table::new("transfer_paper", "NaradaBrokering §2.2, as stated", &[("setting", ""), ("finding", "")]);
    let rows = [
        ("LAN, 94.6 Mbit/s (iperf)", "no gain from parallel streams; small files lose to the overhead (Fig. 5)"),
        ("continental WAN, 89.4 Mbit/s", "streams win; overhead visible below 100 MB (Fig. 6)"),
        ("transatlantic WAN, 69.1 Mbit/s", "streams win; overhead visible below 100 MB (Fig. 7)"),
    ];
    for (setting, finding) in rows {
        table.push_row(vec![Cell::from(setting), Cell::from(finding)])?;
    }
    Ok(table)
}
