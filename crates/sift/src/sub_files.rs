//! `sift sub --save-dir` and `--streams`: chunked transfers put back
//! together on disk, received over one connection or several.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use sift_client::transfer::{Reassembler, ReassemblyConfig, TransferEvent};
use sift_client::{Client, ClientOptions, Delivery, SubscribeOptions, Subscription, SubscriptionEvent};
use tokio::sync::mpsc;

use crate::CliError;

/// Events buffered from the extra connections of `--streams`.
const MERGED_EVENTS_MAX: usize = 1024;

/// Where deliveries come from: one subscription, or one per connection
/// (a queue group, so that each fragment comes once) merged.
pub enum Inbox {
    /// One connection.
    One(Subscription),
    /// Several; the clients are kept to close them at the end.
    Merged(mpsc::Receiver<SubscriptionEvent>, Vec<Client>),
}

impl Inbox {
    /// Subscribes with `options` on `client`, and with `streams − 1` more
    /// connections when `streams` > 1, all in one private queue group.
    pub async fn open(
        client: &Client,
        (server, connection_options): (&str, &ClientOptions),
        mut options: SubscribeOptions,
        streams: usize,
    ) -> Result<Inbox, CliError> {
        if streams <= 1 {
            return Ok(Inbox::One(client.subscribe(options).await?));
        }
        if options.queue_group.is_some() {
            return Err(CliError::Usage("--streams makes its own queue group; it cannot join --queue".into()));
        }
        options.queue_group = Some(format!("sift-sub-{}-{}", std::process::id(), sift_client::system_now_ns()));
        let (sender, receiver) = mpsc::channel(MERGED_EVENTS_MAX);
        let mut clients = Vec::with_capacity(streams);
        for stream in 0..streams {
            let connection = match stream {
                0 => client.clone(),
                _ => {
                    let options = ClientOptions {
                        name: format!("{}-{stream}", crate::guidance::client_name("sub", None)),
                        ..connection_options.clone()
                    };
                    Client::connect(server, options).await?
                }
            };
            let mut subscription = connection.subscribe(options.clone()).await?;
            let sender = sender.clone();
            tokio::spawn(async move {
                while let Some(event) = subscription.next_event().await {
                    if sender.send(event).await.is_err() {
                        return;
                    }
                }
            });
            clients.push(connection);
        }
        Ok(Inbox::Merged(receiver, clients))
    }

    /// The next event from any connection; `None` when all have ended.
    pub async fn next_event(&mut self) -> Option<SubscriptionEvent> {
        match self {
            Inbox::One(subscription) => subscription.next_event().await,
            Inbox::Merged(receiver, _) => receiver.recv().await,
        }
    }

    /// Closes the extra connections.
    pub async fn close(self) {
        if let Inbox::Merged(_, clients) = self {
            for client in clients.iter().skip(1) {
                client.close().await;
            }
        }
    }
}

/// The reassembler behind `--save-dir`, and what it reports.
pub struct Saver {
    reassembler: Reassembler,
    json: bool,
    /// Transfers finished (saved or failed) since the caller last asked.
    finished: u64,
    failed: u64,
}

impl Saver {
    /// Saves into `dir`; with one stream, a fragment that skips others of
    /// its stream proves them lost at once.
    pub fn new(dir: PathBuf, streams: usize, idle_timeout_ms: u64, json: bool) -> Result<Saver, CliError> {
        let mut config = ReassemblyConfig::new(&dir);
        config.ordered_streams = streams <= 1;
        config.idle_timeout = std::time::Duration::from_millis(idle_timeout_ms);
        let reassembler =
            Reassembler::new(config).map_err(|source| CliError::File { path: dir.display().to_string(), source })?;
        Ok(Saver { reassembler, json, finished: 0, failed: 0 })
    }

    /// Takes `delivery` if it is a fragment; gives it back otherwise.
    pub fn accept(&mut self, delivery: Delivery) -> Result<Option<Delivery>, CliError> {
        let id = match delivery.message.property(sift_client::transfer::CHUNK_ID) {
            Some(sift_core::Value::Str(id)) => Some(id.clone()),
            _ => None,
        };
        let new = id.as_deref().is_some_and(|id| self.reassembler.receiving(id).is_none());
        match self.reassembler.accept(&delivery.message, Instant::now()) {
            None => Ok(Some(delivery)),
            Some(event) => {
                if new {
                    self.report_start(id.as_deref().unwrap_or_default());
                }
                if let Some(event) = event {
                    self.report(&event)?;
                }
                Ok(None)
            }
        }
    }

    /// Says on standard error that a transfer began arriving (when its
    /// first fragment did not also finish it).
    fn report_start(&self, id: &str) {
        if let Some((name, total_bytes, fragments)) = self.reassembler.receiving(id) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "receiving {name}: {total_bytes} bytes in {fragments} fragments (transfer {id})"
            );
        }
    }

    /// When the next idle transfer times out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.reassembler.next_deadline()
    }

    /// Fails the transfers that went idle.
    pub fn expire(&mut self) -> Result<(), CliError> {
        for event in self.reassembler.expire(Instant::now()) {
            self.report(&event)?;
        }
        Ok(())
    }

    /// Transfers finished since the last call.
    pub fn take_finished(&mut self) -> u64 {
        std::mem::take(&mut self.finished)
    }

    /// Gives up what is in progress; an error if any transfer failed.
    pub fn finish(mut self) -> Result<(), CliError> {
        for event in self.reassembler.abandon_all() {
            self.report(&event)?;
        }
        let counters = self.reassembler.counters();
        let _ = writeln!(
            std::io::stderr().lock(),
            "transfers: {} saved, {} failed; {} fragments, {} bytes written, {} duplicates",
            counters.completed,
            counters.failed,
            counters.fragments,
            counters.bytes_written,
            counters.duplicates
        );
        match self.failed {
            0 => Ok(()),
            failed => Err(CliError::Usage(format!("{failed} transfers failed"))),
        }
    }

    /// Prints a saved transfer on standard output, a failed one on
    /// standard error (and as JSON on standard output with --format json).
    fn report(&mut self, event: &TransferEvent) -> Result<(), CliError> {
        self.finished += 1;
        let line = match event {
            TransferEvent::Completed { id, path, total_bytes, fragments, elapsed } => {
                if self.json {
                    serde_json::json!({ "transfer": { "id": id, "saved": path, "bytes": total_bytes,
                        "fragments": fragments, "seconds": elapsed.as_secs_f64() } })
                    .to_string()
                } else {
                    format!(
                        "saved {}: {total_bytes} bytes in {fragments} fragments, checksums match ({:.3} s)",
                        path.display(),
                        elapsed.as_secs_f64()
                    )
                }
            }
            TransferEvent::Failed(failure) => {
                self.failed += 1;
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "transfer {} ({}) failed: {}; missing fragments: {:?}",
                    failure.id,
                    failure.name,
                    failure.reason,
                    failure.missing
                );
                if !self.json {
                    return Ok(());
                }
                serde_json::json!({ "transfer": { "id": failure.id, "name": failure.name, "failed": failure.reason,
                    "missing": failure.missing } })
                .to_string()
            }
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").and_then(|()| out.flush()).map_err(CliError::Output)
    }
}
