//! Sending a file as a chunked transfer, over one connection or several.
//!
//! A reader thread reads the file a fragment at a time into a bounded
//! channel (so a transfer holds at most a few fragments in memory, whatever
//! its size); fragment `i` goes out on connection `i mod N`. Each
//! connection keeps up to `window` confirmed publishes in flight, so that
//! a slow path holds back only its own fragments. The transfer is done when
//! every fragment is confirmed by the broker.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sift_core::{DeliveryMode, Message};
use tokio::sync::{mpsc, oneshot};

use super::fragment::Fragmenter;
use super::CHUNK_BYTES_DEFAULT;
use crate::{Client, ClientError, Confirm, ConfirmStatus, PublishOptions};

/// Fragments read ahead of the connections, per connection.
const READ_AHEAD_PER_STREAM: usize = 2;

/// How to send a transfer.
#[derive(Clone)]
pub struct TransferOptions {
    /// Payload bytes per fragment; lowered to the broker's `max_payload_bytes`.
    pub chunk_bytes: usize,
    /// Confirmed fragments in flight per connection.
    pub window: usize,
    /// The name the receiver saves under (default: the file's name).
    pub name: Option<String>,
    /// Applied to each fragment last, just before it is published: a
    /// publisher that signs its messages signs each fragment here.
    pub finish_fragment: Option<FragmentHook>,
}

/// What [`TransferOptions::finish_fragment`] holds.
pub type FragmentHook = std::sync::Arc<dyn Fn(&mut Message) + Send + Sync>;

impl std::fmt::Debug for TransferOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TransferOptions")
            .field("chunk_bytes", &self.chunk_bytes)
            .field("window", &self.window)
            .field("name", &self.name)
            .field("finish_fragment", &self.finish_fragment.is_some())
            .finish()
    }
}

impl Default for TransferOptions {
    fn default() -> Self {
        TransferOptions { chunk_bytes: CHUNK_BYTES_DEFAULT, window: 8, name: None, finish_fragment: None }
    }
}

/// What a finished transfer did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferReport {
    /// The transfer id.
    pub id: String,
    /// Bytes sent.
    pub total_bytes: u64,
    /// Fragments sent.
    pub fragments: u64,
    /// Connections used.
    pub streams: usize,
    /// The fewest subscriptions any fragment matched (0: someone missed it).
    pub matched_min: u32,
    /// From the first read to the last confirm.
    pub elapsed: Duration,
}

/// Why a transfer could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A fragment was refused or the connection failed.
    #[error("fragment {index}: {source}")]
    Client {
        /// The fragment.
        index: u64,
        /// Why.
        source: ClientError,
    },
    /// No connection to send on.
    #[error("a transfer needs at least one connection")]
    NoConnection,
}

/// Sends the file at `path` as a transfer of copies of `template` (its
/// topic, properties, metadata, priority; best-effort becomes reliable,
/// since a lost fragment loses the file) over `clients`, one stream each.
pub async fn send_file(
    clients: &[Client],
    template: Message,
    path: &Path,
    options: &TransferOptions,
) -> Result<TransferReport, TransferError> {
    let first = clients.first().ok_or(TransferError::NoConnection)?;
    let file_error = |source| TransferError::File { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(file_error)?;
    let total_bytes = file.metadata().map_err(file_error)?.len();
    let chunk_bytes = chunk_bytes_for(first, options.chunk_bytes);
    let name = options.name.clone().unwrap_or_else(|| file_name_of(path));
    let mut template = template;
    if template.delivery_mode == DeliveryMode::BestEffort {
        template.delivery_mode = DeliveryMode::Reliable;
    }
    let id = transfer_id(first);
    let streams = clients.len();
    let mut fragmenter = Fragmenter::new(template, id.clone(), &name, total_bytes, chunk_bytes, streams as u64);
    let started = Instant::now();
    let (payloads, reader) = spawn_reader(file, total_bytes, chunk_bytes, streams * READ_AHEAD_PER_STREAM);
    let mut sending = Sending::new(streams, options.window.max(1));
    let mut payloads = payloads;
    let mut index = 0u64;
    while let Some(read) = payloads.recv().await {
        let payload = read.map_err(file_error)?;
        let stream = (index % streams as u64) as usize;
        sending.make_room(stream).await?;
        let mut fragment = fragmenter.fragment(payload);
        if let Some(finish) = &options.finish_fragment {
            finish(&mut fragment);
        }
        let receiver = clients[stream]
            .start_confirmed(fragment, PublishOptions::default())
            .await
            .map_err(|source| TransferError::Client { index, source })?;
        sending.in_flight[stream].push_back((index, receiver));
        index += 1;
    }
    let _ = reader.join();
    if index != fragmenter.count() {
        let source = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file shrank while it was sent");
        return Err(file_error(source));
    }
    sending.drain().await?;
    Ok(TransferReport {
        id,
        total_bytes,
        fragments: index,
        streams,
        matched_min: sending.matched_min,
        elapsed: started.elapsed(),
    })
}

/// A fragment's number and the channel its confirm arrives on.
type Awaited = (u64, oneshot::Receiver<Result<Confirm, ClientError>>);

/// Confirms awaited per stream.
struct Sending {
    in_flight: Vec<VecDeque<Awaited>>,
    window: usize,
    matched_min: u32,
}

impl Sending {
    fn new(streams: usize, window: usize) -> Sending {
        Sending { in_flight: (0..streams).map(|_| VecDeque::new()).collect(), window, matched_min: u32::MAX }
    }

    /// Waits for the oldest confirms of `stream` until its window has room.
    async fn make_room(&mut self, stream: usize) -> Result<(), TransferError> {
        while self.in_flight[stream].len() >= self.window {
            self.settle_oldest(stream).await?;
        }
        Ok(())
    }

    /// Waits for every confirm.
    async fn drain(&mut self) -> Result<(), TransferError> {
        for stream in 0..self.in_flight.len() {
            while !self.in_flight[stream].is_empty() {
                self.settle_oldest(stream).await?;
            }
        }
        if self.matched_min == u32::MAX {
            self.matched_min = 0;
        }
        Ok(())
    }

    async fn settle_oldest(&mut self, stream: usize) -> Result<(), TransferError> {
        let Some((index, receiver)) = self.in_flight[stream].pop_front() else { return Ok(()) };
        let confirm = receiver
            .await
            .map_err(|_| TransferError::Client { index, source: ClientError::Closed })?
            .map_err(|source| TransferError::Client { index, source })?;
        let matched = if confirm.status == ConfirmStatus::NoSubscribers { 0 } else { confirm.matched };
        self.matched_min = self.matched_min.min(matched);
        Ok(())
    }
}

/// The fragment size: as asked, within the broker's payload limit.
fn chunk_bytes_for(client: &Client, asked: usize) -> u64 {
    let limit = client.server_info().map_or(u32::MAX, |welcome| welcome.max_payload_bytes);
    (asked.max(1) as u64).min(u64::from(limit.max(1)))
}

/// Reads the file's fragments on a thread of its own, in order, into a
/// bounded channel; the channel ends after the last or at the first error.
fn spawn_reader(
    mut file: File,
    total_bytes: u64,
    chunk_bytes: u64,
    capacity: usize,
) -> (mpsc::Receiver<std::io::Result<Bytes>>, std::thread::JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel(capacity.max(1));
    let reader = std::thread::spawn(move || {
        for size in super::fragment::payload_sizes(total_bytes, chunk_bytes) {
            let read = read_fragment(&mut file, size);
            let failed = read.is_err();
            if sender.blocking_send(read).is_err() || failed {
                return;
            }
        }
    });
    (receiver, reader)
}

/// Reads the next `size` bytes of `file` into a buffer of their own.
/// `read_to_end` fills the buffer's spare capacity without zeroing it first.
fn read_fragment(file: &mut File, size: u64) -> std::io::Result<Bytes> {
    let mut buffer = Vec::with_capacity(size as usize);
    let read = file.take(size).read_to_end(&mut buffer)?;
    if read as u64 != size {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file shrank while it was sent"));
    }
    Ok(Bytes::from(buffer))
}

/// A transfer id unique per publisher: its name, the time and the process.
fn transfer_id(client: &Client) -> String {
    let name = client.options().name.clone();
    format!("{name}-{}-{}", crate::system_now_ns(), std::process::id())
}

fn file_name_of(path: &Path) -> String {
    path.file_name().and_then(|name| name.to_str()).unwrap_or("transfer").to_string()
}
