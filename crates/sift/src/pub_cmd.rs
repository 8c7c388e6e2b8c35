//! `sift pub`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use sift_client::transfer::{self, TransferOptions};
use sift_client::{Client, ClientOptions, ConfirmStatus, PublishOptions};
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::CliError;

/// Arguments of `sift pub`.
#[derive(Debug, Args)]
pub struct PubArgs {
    /// Broker address.
    #[arg(long, env = "SIFT_SERVER", default_value = "127.0.0.1:7400")]
    server: String,
    #[command(flatten)]
    sign_in: crate::sign_in::SignInArgs,
    /// Topic to publish on.
    #[arg(long)]
    topic: String,
    /// Sign every message with the Ed25519 private key in this file
    /// (PKCS#8 PEM, from `sift token keygen`), as --signer.
    #[arg(long, value_name = "FILE", requires = "signer")]
    sign_key: Option<PathBuf>,
    /// The name receivers and the broker know the --sign-key by (a
    /// `[[signing_key]]` of their keys or users file).
    #[arg(long, value_name = "NAME", requires = "sign_key")]
    signer: Option<String>,
    /// The key of --sign-key, read once.
    #[arg(skip)]
    signing: Option<std::sync::Arc<sift_auth::signing::SigningKey>>,
    /// Property NAME=VALUE, typed by form: true/false, integers, decimals, else
    /// strings; NAME="42" forces a string. Repeatable.
    #[arg(long = "prop", value_name = "NAME=VALUE")]
    props: Vec<String>,
    /// XML metadata document.
    #[arg(long, conflicts_with = "metadata_file")]
    metadata: Option<String>,
    /// File holding the XML metadata document.
    #[arg(long)]
    metadata_file: Option<PathBuf>,
    /// Payload text.
    #[arg(long, conflicts_with_all = ["payload_file", "size", "stdin", "stdin_lines"])]
    payload: Option<String>,
    /// Read the payload from standard input: all of it, as one message.
    #[arg(long, conflicts_with_all = ["payload_file", "size", "stdin_lines", "file"])]
    stdin: bool,
    /// Read payloads from standard input, one message per line (without its
    /// line end), until the input ends; --count does not apply.
    #[arg(long, conflicts_with_all = ["payload_file", "size", "file", "count", "multicast"])]
    stdin_lines: bool,
    /// The name this publisher gives the broker (admin reports, the
    /// dashboard) [default: sift-pub-PID].
    #[arg(long)]
    name: Option<String>,
    /// File holding the payload.
    #[arg(long, conflicts_with = "size")]
    payload_file: Option<PathBuf>,
    /// Generate a payload of this many bytes.
    #[arg(long)]
    size: Option<usize>,
    /// Delivery mode: best-effort, reliable or persistent (stored before
    /// the confirm, under its stream's fsync policy).
    #[arg(long, default_value = "best-effort")]
    mode: String,
    /// Priority 0-9.
    #[arg(long, default_value_t = 4)]
    priority: u8,
    /// Number of messages to publish.
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// Messages per second (0 = as fast as confirms allow).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// `delivered`: confirm only when every matched subscriber acknowledged.
    #[arg(long = "await", value_name = "delivered")]
    await_mode: Option<String>,
    /// With --await delivered: how long the broker waits, in milliseconds.
    #[arg(long)]
    await_timeout_ms: Option<u64>,
    /// Time to live in milliseconds (0 = never expires).
    #[arg(long, default_value_t = 0)]
    ttl_ms: u64,
    /// Append each message's number, counting from N, to its payload, so
    /// that the messages can be told apart (`scripts/crash-check` uses it).
    #[arg(long, value_name = "N")]
    number_from: Option<u64>,
    /// Go on across a lost broker: reconnect (to the next of several
    /// comma-separated --server addresses), give each message a
    /// `Sift-Msg-Id` of this run's and its number, and publish again a
    /// message whose broker was lost or that was refused for want of a
    /// quorum, with the same id, so that a replicated stream stores it
    /// once (`scripts/chaos` uses it).
    #[arg(long)]
    failover: bool,
    /// Stamp each message with this machine's clock carried into the
    /// broker's (after TIME exchanges), so that receivers can order and
    /// space messages by when they were sent (`sift sub --order`, `--tds`).
    #[arg(long)]
    publisher_time: bool,
    /// Send this file as one chunked transfer (any size): fragments of
    /// --chunk-bytes that `sift sub --save-dir` puts back together.
    #[arg(long, conflicts_with_all = ["payload", "payload_file", "size", "number_from"])]
    file: Option<PathBuf>,
    /// With --file: spread the fragments over this many connections.
    #[arg(long, default_value_t = 1, requires = "file")]
    streams: usize,
    /// With --file: payload bytes per fragment (at most the broker's max_payload_bytes).
    #[arg(long, default_value_t = sift_client::transfer::CHUNK_BYTES_DEFAULT, requires = "file")]
    chunk_bytes: usize,
    /// Brokerless multicast (NORM) instead of a broker.
    #[command(flatten)]
    multicast: crate::multicast_cmd::MulticastArgs,
}

/// Parses `NAME=VALUE` into a typed property.
pub fn parse_property(text: &str) -> Result<(String, Value), CliError> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(CliError::Usage(format!("--prop {text:?}: expected NAME=VALUE")));
    };
    if name.is_empty() {
        return Err(CliError::Usage(format!("--prop {text:?}: the property name is empty")));
    }
    Ok((name.to_string(), Value::parse_typed(value)))
}

fn read_file(path: &PathBuf) -> Result<Bytes, CliError> {
    std::fs::read(path).map(Bytes::from).map_err(|source| CliError::File { path: path.display().to_string(), source })
}

fn read_stdin() -> Result<Bytes, CliError> {
    use std::io::Read;
    let mut payload = Vec::new();
    std::io::stdin()
        .read_to_end(&mut payload)
        .map_err(|source| CliError::File { path: "standard input".into(), source })?;
    Ok(Bytes::from(payload))
}

fn build_message(args: &PubArgs) -> Result<Message, CliError> {
    crate::guidance::warn_about_topic("--topic", &args.topic);
    let topic = TopicName::new(args.topic.as_str()).map_err(|error| CliError::Usage(format!("--topic: {error}")))?;
    let payload = match (&args.payload, &args.payload_file, args.size) {
        (Some(text), _, _) => Bytes::from(text.clone()),
        (_, Some(path), _) => read_file(path)?,
        (_, _, Some(size)) => Bytes::from(vec![b'x'; size]),
        _ if args.stdin => read_stdin()?,
        _ => Bytes::new(),
    };
    let mut message = Message::new(topic, payload);
    message.metadata = match (&args.metadata, &args.metadata_file) {
        (Some(xml), _) => Some(Bytes::from(xml.clone())),
        (_, Some(path)) => Some(read_file(path)?),
        _ => None,
    };
    for prop in &args.props {
        message.properties.push(parse_property(prop)?);
    }
    message.priority = Priority::new(args.priority).map_err(|error| CliError::Usage(format!("--priority: {error}")))?;
    message.delivery_mode =
        args.mode.parse::<DeliveryMode>().map_err(|error| CliError::Usage(format!("--mode: {error}")))?;
    Ok(message)
}

/// Publishes `--count` messages, printing one line per confirm.
pub async fn run(mut args: PubArgs) -> Result<(), CliError> {
    if let (Some(path), Some(name)) = (&args.sign_key, &args.signer) {
        let pem = std::fs::read_to_string(path)
            .map_err(|source| CliError::File { path: path.display().to_string(), source })?;
        let key = sift_auth::signing::SigningKey::from_pem(name, &pem)
            .map_err(|reason| CliError::Usage(format!("--sign-key {}: {reason}", path.display())))?;
        args.signing = Some(std::sync::Arc::new(key));
    }
    let message = build_message(&args)?;
    let await_delivered = match args.await_mode.as_deref() {
        None => false,
        Some("delivered") => true,
        Some(other) => return Err(CliError::Usage(format!("--await {other:?}: the only choice is `delivered`"))),
    };
    let options = PublishOptions { await_delivered, await_timeout: args.await_timeout_ms.map(Duration::from_millis) };
    let client_options = ClientOptions {
        name: crate::guidance::client_name("pub", args.name.as_deref()),
        reconnect: args.failover,
        publisher_time: args.publisher_time,
        credentials: args.sign_in.credentials()?,
        tls: args.sign_in.tls()?,
        ..ClientOptions::default()
    };
    if let Some(path) = &args.file {
        return send_file(&args, path, message, client_options).await;
    }
    if let Some(group) = args.multicast.multicast {
        let messages = (0..args.count).map(|index| nth_message(&args, &message, index));
        return crate::multicast_cmd::publish(&args.multicast, group, messages, args.rate).await;
    }
    let client = Client::connect(args.server.as_str(), client_options).await?;
    let published = match args.stdin_lines {
        true => publish_lines(&args, &client, &message, options).await,
        false => publish_count(&args, &client, &message, options).await,
    };
    client.close().await;
    published
}

/// Publishes `--count` messages at `--rate`, printing each confirm.
async fn publish_count(
    args: &PubArgs,
    client: &Client,
    message: &Message,
    options: PublishOptions,
) -> Result<(), CliError> {
    let interval = (args.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / args.rate));
    let started = Instant::now();
    for index in 0..args.count {
        if let Some(interval) = interval {
            let due = started + interval.mul_f64(index as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        let message = nth_message(args, message, index);
        let confirm = match args.failover {
            true => publish_until_confirmed(client, message, options).await?,
            false => client.publish_confirmed(message, options).await?,
        };
        print_confirm(index + 1, &confirm);
    }
    Ok(())
}

/// Most times `--failover` publishes one message again.
const FAILOVER_ATTEMPTS_MAX: u32 = 100;
/// The pause before a message refused for want of a quorum is sent again.
const FAILOVER_PAUSE: Duration = Duration::from_millis(200);

/// Publishes `message` until it is confirmed: again (with its id) after a
/// refusal for want of a quorum or a lost broker, at most
/// [`FAILOVER_ATTEMPTS_MAX`] times.
async fn publish_until_confirmed(
    client: &Client,
    message: Message,
    options: PublishOptions,
) -> Result<sift_client::Confirm, CliError> {
    let mut attempt = 1;
    loop {
        match client.publish_confirmed(message.clone(), options).await {
            Ok(confirm) => return Ok(confirm),
            Err(error) if attempt < FAILOVER_ATTEMPTS_MAX && is_passing(&error) => {
                eprintln!("sift pub: {error}; publishing again");
                attempt += 1;
                tokio::time::sleep(FAILOVER_PAUSE).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// True for a refusal that a later attempt may not meet: no quorum, a
/// broker shutting down, a connection lost before the answer.
fn is_passing(error: &sift_client::ClientError) -> bool {
    use sift_proto::ErrorCode;
    match error {
        sift_client::ClientError::Refused { code, .. } => {
            matches!(code, ErrorCode::NoQuorum | ErrorCode::ShuttingDown | ErrorCode::StorageError)
        }
        sift_client::ClientError::Disconnected => true,
        _ => false,
    }
}

/// Publishes one message per line of standard input (its line end
/// removed), printing each confirm, until the input ends.
async fn publish_lines(
    args: &PubArgs,
    client: &Client,
    template: &Message,
    options: PublishOptions,
) -> Result<(), CliError> {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut index = 0u64;
    while let Some(line) =
        lines.next_line().await.map_err(|source| CliError::File { path: "standard input".into(), source })?
    {
        let mut message = nth_message(args, template, index);
        message.payload = Bytes::from(line);
        sign_if_asked(args, &mut message);
        index += 1;
        print_confirm(index, &client.publish_confirmed(message, options).await?);
    }
    Ok(())
}

/// Prints the confirm of the `number`th message: how many subscriptions it
/// matched, `no subscribers`, or with `--await delivered` who acknowledged.
fn print_confirm(number: u64, confirm: &sift_client::Confirm) {
    let stored = match confirm.stream_seq {
        0 => String::new(),
        seq => format!(", stored in {} #{seq}", confirm.stream),
    };
    match confirm.status {
        ConfirmStatus::NoSubscribers => println!("{number}: no subscribers"),
        ConfirmStatus::Accepted => println!("{number}: matched {}{stored}", confirm.matched),
        ConfirmStatus::Delivered => {
            println!("{number}: delivered to {} of {} matched{stored}", confirm.acked, confirm.matched)
        }
        ConfirmStatus::Incomplete => println!(
            "{number}: incomplete: {} of {} matched acknowledged; not acknowledged: {}",
            confirm.acked,
            confirm.matched,
            confirm.pending.join(", ")
        ),
    }
}

/// Message `index` of the run: `template`, numbered (`--number-from`) and
/// given its expiry (`--ttl-ms`).
pub fn nth_message(args: &PubArgs, template: &Message, index: u64) -> Message {
    let mut next = template.clone();
    if let Some(first) = args.number_from {
        let mut numbered = next.payload.to_vec();
        numbered.extend_from_slice((first + index).to_string().as_bytes());
        next.payload = Bytes::from(numbered);
    }
    if args.ttl_ms > 0 {
        next.expiry_ns = sift_core::system_now_ns() + args.ttl_ms * 1_000_000;
    }
    if args.failover {
        let id = format!("{}-{}", crate::guidance::client_name("pub", args.name.as_deref()), index);
        next.properties.push((sift_core::MSG_ID_PROPERTY.to_string(), sift_core::Value::Str(id.into())));
    }
    sign_if_asked(args, &mut next);
    next
}

/// Signs `message` with `--sign-key`, when given: last, over what it now
/// holds.
fn sign_if_asked(args: &PubArgs, message: &mut Message) {
    if let Some(key) = &args.signing {
        sift_auth::signing::sign(message, key);
    }
}

/// `--file`: opens `--streams` connections and sends the file over them.
async fn send_file(args: &PubArgs, path: &Path, template: Message, options: ClientOptions) -> Result<(), CliError> {
    if args.streams == 0 || args.streams > STREAMS_MAX {
        return Err(CliError::Usage(format!("--streams must be 1 to {STREAMS_MAX}")));
    }
    if args.count != 1 {
        return Err(CliError::Usage("--count does not apply to --file (one transfer)".into()));
    }
    let mut clients = Vec::with_capacity(args.streams);
    for stream in 0..args.streams {
        let options = ClientOptions { name: format!("{}-{stream}", options.name), ..options.clone() };
        clients.push(Client::connect(args.server.as_str(), options).await?);
    }
    let signing = args.signing.clone();
    let finish_fragment: Option<sift_client::transfer::FragmentHook> = signing
        .map(|key| std::sync::Arc::new(move |fragment: &mut Message| sift_auth::signing::sign(fragment, &key)) as _);
    let transfer_options =
        TransferOptions { chunk_bytes: args.chunk_bytes, finish_fragment, ..TransferOptions::default() };
    let sent = transfer::send_file(&clients, template, path, &transfer_options).await;
    for client in &clients {
        client.close().await;
    }
    let report = sent.map_err(|error| CliError::Usage(format!("--file: {error}")))?;
    let seconds = report.elapsed.as_secs_f64();
    println!(
        "sent {} ({}): {} bytes in {} fragments over {} streams in {seconds:.3} s ({:.1} MB/s); every fragment matched at least {}",
        path.display(),
        report.id,
        report.total_bytes,
        report.fragments,
        report.streams,
        report.total_bytes as f64 / seconds.max(1e-9) / 1e6,
        report.matched_min
    );
    Ok(())
}

/// Most connections one transfer may use.
const STREAMS_MAX: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_are_typed_by_form() {
        assert_eq!(parse_property("a=1").expect("valid"), ("a".into(), Value::Int(1)));
        assert_eq!(parse_property("a=\"1\"").expect("valid"), ("a".into(), Value::Str("1".into())));
        assert_eq!(parse_property("a=x=y").expect("valid"), ("a".into(), Value::Str("x=y".into())));
        assert!(parse_property("novalue").is_err());
        assert!(parse_property("=1").is_err());
    }
}
