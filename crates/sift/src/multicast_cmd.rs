//! `sift pub --multicast` and `sift sub --multicast`: publish and subscribe
//! over NORM reliable multicast with no broker (FJM2).

use std::io::Write;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use clap::Args;
use sift_client::multicast::{MulticastEvent, MulticastOptions, MulticastPublisher, MulticastSubscriber};
use sift_client::FilterKind;
use sift_core::{Message, TopicFilter};
use sift_filter::{ContentFilter, FilterLanguage};

use crate::CliError;

/// The multicast options `sift pub` and `sift sub` share.
#[derive(Debug, Args, Clone)]
pub struct MulticastArgs {
    /// Publish or subscribe on this multicast group (GROUP:PORT) with no
    /// broker, over NORM reliable multicast.
    #[arg(long, value_name = "GROUP:PORT")]
    pub multicast: Option<SocketAddrV4>,
    /// With --multicast: the interface to send and join on.
    #[arg(long, value_name = "NAME", requires = "multicast")]
    pub iface: Option<String>,
    /// With --multicast: transmit rate in Mbit/s.
    #[arg(long, default_value_t = 100.0, requires = "multicast")]
    pub rate_mbit: f64,
    /// With --multicast: the sender's NORM transmit buffer (its repair
    /// window), KiB.
    #[arg(long, default_value_t = sift_norm::TX_BUFFER_BYTES_DEFAULT / 1024, requires = "multicast")]
    pub tx_buffer_kb: u32,
    /// With --multicast: the receiver's NORM buffer per sender, KiB.
    #[arg(long, default_value_t = sift_norm::RX_BUFFER_BYTES_DEFAULT / 1024, requires = "multicast")]
    pub rx_buffer_kb: u32,
    /// With --multicast: received message KiB queued for this subscriber at
    /// most; beyond it messages are dropped, counted and reported as missed.
    #[arg(long, default_value_t = sift_norm::SESSION_QUEUED_BYTES_MAX_DEFAULT / 1024, requires = "multicast")]
    pub rx_queue_kb: u64,
    /// With --multicast: receive this host's own sends too.
    #[arg(long, requires = "multicast")]
    pub loopback: bool,
    /// With --multicast: NORM's test hook, drop this percentage of packets sent.
    #[arg(long, default_value_t = 0.0, requires = "multicast")]
    pub norm_tx_loss: f64,
    /// With --multicast: NORM's test hook, drop this percentage of packets received.
    #[arg(long, default_value_t = 0.0, requires = "multicast")]
    pub norm_rx_loss: f64,
}

impl MulticastArgs {
    /// The transport options these flags give for `group`.
    pub(crate) fn options(&self, group: SocketAddrV4) -> Result<MulticastOptions, CliError> {
        let percent = |value: f64, flag: &str| match (0.0..=100.0).contains(&value) {
            true => Ok(value),
            false => Err(CliError::Usage(format!("{flag} is a percentage, 0 to 100"))),
        };
        if self.rate_mbit.is_nan() || self.rate_mbit <= 0.0 {
            return Err(CliError::Usage("--rate-mbit must be above 0".into()));
        }
        let kib = |value: u32, flag: &str| match value {
            1..=4_194_303 => Ok(value * 1024),
            _ => Err(CliError::Usage(format!("{flag} must be from 1 to 4194303 KiB"))),
        };
        if self.rx_queue_kb == 0 || self.rx_queue_kb > u64::MAX / 1024 {
            return Err(CliError::Usage("--rx-queue-kb must be above 0".into()));
        }
        // NORM would only say that it cannot send or receive on the group.
        if let Some(name) = &self.iface {
            sift_norm::interface_index(name)
                .map_err(|_| CliError::Usage(format!("--iface: no network interface named {name:?}")))?;
        }
        Ok(MulticastOptions {
            interface: self.iface.clone(),
            tx_buffer_bytes: kib(self.tx_buffer_kb, "--tx-buffer-kb")?,
            rx_buffer_bytes: kib(self.rx_buffer_kb, "--rx-buffer-kb")?,
            rx_queue_bytes_max: self.rx_queue_kb * 1024,
            tx_rate_bps: self.rate_mbit * 1e6,
            loopback: self.loopback,
            tx_loss_percent: percent(self.norm_tx_loss, "--norm-tx-loss")?,
            rx_loss_percent: percent(self.norm_rx_loss, "--norm-rx-loss")?,
            ..MulticastOptions::new(group)
        })
    }
}

/// Publishes `messages` at `rate` messages/s (0: as fast as NORM's rate
/// allows), then flushes and lingers for late repairs.
pub async fn publish(
    args: &MulticastArgs,
    group: SocketAddrV4,
    messages: impl Iterator<Item = Message>,
    rate: f64,
) -> Result<(), CliError> {
    let options = args.options(group)?;
    let mut publisher =
        MulticastPublisher::open(&options, "sift-pub").map_err(|error| CliError::Usage(error.to_string()))?;
    let interval = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
    let started = Instant::now();
    let mut count = 0u64;
    for message in messages {
        if let Some(interval) = interval {
            tokio::time::sleep_until((started + interval.mul_f64(count as f64)).into()).await;
        }
        publisher.publish(message).await.map_err(|error| CliError::Usage(error.to_string()))?;
        count += 1;
    }
    publisher.flush().await.map_err(|error| CliError::Usage(error.to_string()))?;
    let (seconds, cpu_ms) =
        (started.elapsed().as_secs_f64(), sift_client::cpu::process_cpu_ns().unwrap_or(0) as f64 / 1e6);
    let user_ms = sift_client::cpu::process_user_cpu_ns().unwrap_or(0) as f64 / 1e6;
    let objects = publisher.objects();
    println!("sent {count} messages to {group} in {objects} objects ({seconds:.3} s, {cpu_ms:.1} ms CPU, {user_ms:.1} ms user)");
    let _ = std::io::stdout().flush();
    publisher.close().await.map_err(|error| CliError::Usage(error.to_string()))?;
    Ok(())
}

/// Subscribes to `topic` (with `content`) on the group and prints matches
/// until `count` or SIGINT; missed ranges go to standard error.
pub async fn subscribe(
    args: &MulticastArgs,
    (group, verify_keys): (SocketAddrV4, Option<&sift_auth::signing::Verifier>),
    topic: &str,
    content: Option<(FilterKind, String)>,
    count: Option<u64>,
    format: &str,
) -> Result<(), CliError> {
    let topic_filter = TopicFilter::new(topic).map_err(|error| CliError::Usage(format!("--topic: {error}")))?;
    let content = match content {
        Some((kind, text)) => Some(parse_filter(kind, &text)?),
        None => None,
    };
    let options = args.options(group)?;
    let mut subscriber = MulticastSubscriber::open(&options).map_err(|error| CliError::Usage(error.to_string()))?;
    subscriber.subscribe(&topic_filter, content.as_ref());
    eprintln!("subscribed to {topic} on {group}");
    let mut received = 0u64;
    while count.is_none_or(|count| received < count) {
        let event = tokio::select! {
            event = subscriber.next() => event,
            _ = tokio::signal::ctrl_c() => None,
        };
        match event {
            None => break,
            Some(MulticastEvent::Message { message, .. }) => {
                // A forged packet on the LAN is dropped here, by the
                // receiver: there is no broker on the way to refuse it.
                if !crate::sub_cmd::verified(&message, verify_keys) {
                    continue;
                }
                let line = match format {
                    "json" => Some(crate::sub_cmd::message_json(&message, &[])),
                    "none" => None,
                    _ => Some(crate::sub_cmd::message_text(&message)),
                };
                if let Some(line) = line {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{line}").and_then(|()| out.flush()).map_err(CliError::Output)?;
                }
                received += 1;
            }
            Some(MulticastEvent::Overflowed { messages }) => {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "overflowed: dropped {messages} messages, this subscriber fell behind the group (--rx-queue-kb {})",
                    args.rx_queue_kb
                );
            }
            Some(MulticastEvent::Missed { publisher, first, last }) => {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "missed {} messages of publisher {publisher:08x} (sequences {first}..={last})",
                    last - first + 1
                );
            }
        }
    }
    let counters = subscriber.counters();
    let _ = writeln!(
        std::io::stderr().lock(),
        "multicast: {} received, {} matched, {} invalid, {} lost, {} overflowed; {:.1} ms CPU",
        counters.received,
        counters.matched,
        counters.invalid,
        counters.lost,
        counters.overflowed,
        sift_client::cpu::process_cpu_ns().unwrap_or(0) as f64 / 1e6
    );
    Ok(())
}

fn parse_filter(kind: FilterKind, text: &str) -> Result<ContentFilter, CliError> {
    let language = match kind {
        FilterKind::Tags => FilterLanguage::Tags,
        FilterKind::Sql => FilterLanguage::Sql,
        FilterKind::Xpath => FilterLanguage::Xpath,
        FilterKind::Regex | FilterKind::None => FilterLanguage::Regex,
    };
    ContentFilter::parse(language, text).map_err(|error| CliError::Usage(format!("content filter: {error}")))
}
