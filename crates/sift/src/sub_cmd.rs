//! `sift sub`.

use std::io::Write;

use clap::Args;
use sift_client::json::payload_text;
use sift_client::{
    AckPolicy, Client, ClientOptions, Delivery, FilterKind, Gap, GapReason, OrderingConfig, QueuePolicy, StartPosition,
    SubscribeOptions, SubscriptionEvent, TdsConfig,
};
use sift_core::Message;

use crate::sub_files::{Inbox, Saver};
use crate::sub_timing::TimedOutput;
use crate::CliError;

/// Arguments of `sift sub`.
#[derive(Debug, Args)]
pub struct SubArgs {
    /// Broker address.
    #[arg(long, env = "SIFT_SERVER", default_value = "127.0.0.1:7400")]
    server: String,
    #[command(flatten)]
    sign_in: crate::sign_in::SignInArgs,
    /// Verify every message's signature with the `[[signing_key]]`s of
    /// this TOML file (a keys file, or a broker's users file); messages
    /// unsigned, by other keys or changed after signing are refused on
    /// standard error and not printed.
    #[arg(long, value_name = "KEYS")]
    verify: Option<std::path::PathBuf>,
    /// Topic filter: `*` matches one token, `>` the rest. Optional with
    /// --stream, which then reads every topic of the stream.
    #[arg(long)]
    topic: Option<String>,
    /// The name this subscriber gives the broker (admin reports, the
    /// dashboard) [default: sift-sub-PID].
    #[arg(long)]
    name: Option<String>,
    /// Queue group: each message goes to one member of the group.
    #[arg(long)]
    queue: Option<String>,
    /// Exit after this many messages.
    #[arg(long)]
    count: Option<u64>,
    /// auto: acknowledge on receipt; manual: acknowledge after printing.
    #[arg(long, default_value = "auto", value_parser = ["auto", "manual"])]
    ack: String,
    /// Full-queue policy: block, keep-last:N, drop-new or disconnect
    /// [default: the broker's `delivery.policy_default`].
    #[arg(long)]
    policy: Option<String>,
    /// Queue bound at the broker, in messages.
    #[arg(long)]
    queue_capacity: Option<u32>,
    /// Output format; `none` prints no message, only the counts at the end
    /// (for measuring).
    #[arg(long, default_value = "text", value_parser = ["text", "json", "none"])]
    format: String,
    /// Content filter: comma-separated `NAME OP VALUE` over properties, all
    /// of which must hold (`sym="IBM",price>100`).
    #[arg(long, group = "content_filter")]
    tags: Option<String>,
    /// Content filter: a JMS message selector over properties and headers
    /// (`sym IN ('IBM','HP') AND price BETWEEN 100 AND 200`).
    #[arg(long = "where", visible_alias = "sql", value_name = "SQL", group = "content_filter")]
    sql: Option<String>,
    /// Content filter: an XPath 1.0 expression over the XML metadata
    /// (`/metadata/ATO[nickname='KTJR']`).
    #[arg(long, group = "content_filter")]
    xpath: Option<String>,
    /// Content filter: a regular expression searched for in the topic
    /// (anchor it with `^...$` to match the whole topic).
    #[arg(long, group = "content_filter")]
    regex: Option<String>,
    /// Read this stream: its stored messages from --from (default first),
    /// then live ones, with no gap or duplicate between them.
    #[arg(long)]
    stream: Option<String>,
    /// Create or resume the durable subscription NAME: what matches while it
    /// is away is kept for it, and acknowledgements move its stored position.
    #[arg(long, conflicts_with = "queue")]
    durable: Option<String>,
    /// Where a replay or a new durable subscription starts: first, last:N,
    /// seq:N, time:RFC3339 or new (a durable's default).
    #[arg(long, value_name = "POSITION")]
    from: Option<String>,
    /// Share the durable subscription with other consumers (each message to one).
    #[arg(long, requires = "durable")]
    shared: bool,
    /// Release messages in publisher-timestamp order through a buffer that
    /// lets the earliest out when one of its rules fires:
    /// `entries=N,bytes=B,wait=MS,release=F` (F from 0.5 to 1.0).
    #[arg(long, value_name = "RULES")]
    order: Option<String>,
    /// Release messages with the spacing they were sent with, each at its
    /// send time plus a playout delay: `max-delay=MS[,tick=US][,spin=US]`.
    #[arg(long, value_name = "SETTINGS")]
    tds: Option<String>,
    /// Put chunked transfers (`sift pub --file`) back together in this
    /// directory: each is written as it arrives, checked, and renamed to its
    /// name only when whole. --count then counts finished transfers too.
    #[arg(long, value_name = "DIR")]
    save_dir: Option<std::path::PathBuf>,
    /// Receive over this many connections (one private queue group), for
    /// transfers sent with `sift pub --file --streams`.
    #[arg(long, default_value_t = 1)]
    streams: usize,
    /// A transfer with no fragment for this long is reported as failed.
    #[arg(long, default_value_t = 30_000, requires = "save_dir")]
    transfer_timeout_ms: u64,
    /// Brokerless multicast (NORM) instead of a broker.
    #[command(flatten)]
    multicast: crate::multicast_cmd::MulticastArgs,
}

impl SubArgs {
    /// The content filter given, if any (clap allows at most one).
    fn content_filter(&self) -> Option<(FilterKind, String)> {
        let given = [
            (FilterKind::Tags, &self.tags),
            (FilterKind::Sql, &self.sql),
            (FilterKind::Xpath, &self.xpath),
            (FilterKind::Regex, &self.regex),
        ];
        given.into_iter().find_map(|(kind, text)| text.clone().map(|text| (kind, text)))
    }
}

/// The stream source of `--stream`, `--durable` and `--from`, if any.
fn stream_source(args: &SubArgs) -> Result<Option<(String, String, StartPosition)>, CliError> {
    if args.stream.is_none() && args.durable.is_none() {
        if args.from.is_some() {
            return Err(CliError::Usage("--from needs --stream or --durable".into()));
        }
        return Ok(None);
    }
    let default_start = if args.durable.is_some() { StartPosition::New } else { StartPosition::First };
    let start = match &args.from {
        Some(text) => text.parse::<StartPosition>().map_err(|error| CliError::Usage(format!("--from: {error}")))?,
        None => default_start,
    };
    Ok(Some((args.stream.clone().unwrap_or_default(), args.durable.clone().unwrap_or_default(), start)))
}

/// Subscribes and prints each delivery until `--count` or SIGINT.
/// The topic filter: `--topic`, or with `--stream` alone every topic
/// of the stream (as `sift query` reads it).
fn topic_filter(args: &SubArgs) -> Result<String, CliError> {
    match (&args.topic, &args.stream) {
        (Some(topic), _) => {
            crate::guidance::warn_about_topic("--topic", topic);
            Ok(topic.clone())
        }
        (None, Some(_)) if args.multicast.multicast.is_none() => Ok(">".to_string()),
        (None, _) => Err(CliError::Usage(
            "--topic is needed: a topic filter such as 'quotes.>' (or --stream NAME to read a whole stream)".into(),
        )),
    }
}

pub async fn run(args: SubArgs) -> Result<(), CliError> {
    let topic = topic_filter(&args)?;
    let verify_keys = args.verify.as_deref().map(read_verify_keys).transpose()?;
    if let Some(group) = args.multicast.multicast {
        let (content, count) = (args.content_filter(), args.count);
        return crate::multicast_cmd::subscribe(
            &args.multicast,
            (group, verify_keys.as_ref()),
            &topic,
            content,
            count,
            &args.format,
        )
        .await;
    }
    let policy = match &args.policy {
        Some(text) => {
            Some(text.parse::<QueuePolicy>().map_err(|error: String| CliError::Usage(format!("--policy: {error}")))?)
        }
        None => None,
    };
    let manual = args.ack == "manual";
    let order = args
        .order
        .as_deref()
        .map(OrderingConfig::parse)
        .transpose()
        .map_err(|error| CliError::Usage(error.to_string()))?;
    let tds = args.tds.as_deref().map(TdsConfig::parse).transpose().map_err(CliError::Usage)?;
    if manual && (order.is_some() || tds.is_some()) {
        return Err(CliError::Usage(
            "--ack manual cannot be combined with --order or --tds (they acknowledge on receipt)".into(),
        ));
    }
    let mut options =
        SubscribeOptions::new(topic.as_str()).ack(if manual { AckPolicy::Manual } else { AckPolicy::Auto });
    options.policy = policy;
    options.queue_group = args.queue.clone();
    options.queue_capacity = args.queue_capacity;
    options.filter = args.content_filter();
    options = match stream_source(&args)? {
        Some((stream, durable, start)) if durable.is_empty() => options.replay(stream, start),
        Some((stream, durable, start)) => options.durable(durable, stream, start),
        None => options,
    };
    if args.shared {
        options = options.shared();
    }
    let name = crate::guidance::client_name("sub", args.name.as_deref());
    let client_options = ClientOptions {
        name,
        credentials: args.sign_in.credentials()?,
        tls: args.sign_in.tls()?,
        ..ClientOptions::default()
    };
    let client = Client::connect(args.server.as_str(), client_options.clone()).await?;
    // Watched from the start: a loss between the subscription and the
    // first wait in the loop below is then told too (watched after the
    // "subscribed" line, a broker killed at once went untold, and the
    // subscriber reconnected in silence).
    let mut connection = client.connection_changes();
    connection.mark_unchanged();
    let json = args.format == "json";
    let mut timed = TimedOutput::start(&client, order, tds, json).await?;
    if args.streams == 0 || args.streams > STREAMS_MAX {
        return Err(CliError::Usage(format!("--streams must be 1 to {STREAMS_MAX}")));
    }
    let mut saver = match &args.save_dir {
        Some(dir) => Some(Saver::new(dir.clone(), args.streams, args.transfer_timeout_ms, json)?),
        None => None,
    };
    let filter = options.filter.clone();
    let mut inbox = match Inbox::open(&client, (&args.server, &client_options), options, args.streams).await {
        Ok(inbox) => inbox,
        Err(CliError::Client(error)) => return Err(crate::guidance::with_caret(error, filter.as_ref())),
        Err(error) => return Err(error),
    };
    // Tells scripts and tests that the subscription is live.
    eprintln!("subscribed to {topic}");
    let mut received = 0u64;
    let stdout = std::io::stdout();
    loop {
        if let Some(saver) = &mut saver {
            received += saver.take_finished();
        }
        if args.count.is_some_and(|count| received >= count) {
            break;
        }
        let wait_rule = timed.next_deadline_ns().map(|deadline_ns| {
            let wait_ns = deadline_ns.saturating_sub(client.now_ns());
            tokio::time::Instant::now() + std::time::Duration::from_nanos(wait_ns)
        });
        let transfer_timeout = saver.as_ref().and_then(Saver::next_deadline).map(tokio::time::Instant::from_std);
        let event = tokio::select! {
            event = inbox.next_event() => event,
            _ = tokio::signal::ctrl_c() => None,
            Ok(()) = connection.changed() => {
                say_connection(*connection.borrow_and_update(), &args.server);
                continue;
            }
            () = sift_client::sleep_until(wait_rule) => {
                timed.poll()?;
                continue;
            }
            () = sift_client::sleep_until(transfer_timeout) => {
                if let Some(saver) = &mut saver {
                    saver.expire()?;
                }
                continue;
            }
        };
        let delivery = match event {
            None => break,
            Some(SubscriptionEvent::Gap(gap)) => {
                print_gap(&gap, json)?;
                continue;
            }
            Some(SubscriptionEvent::Delivery(delivery)) => delivery,
        };
        if !verified(&delivery.message, verify_keys.as_ref()) {
            if manual {
                delivery.ack()?;
            }
            continue;
        }
        let delivery = match &mut saver {
            Some(saver) => match saver.accept(delivery)? {
                Some(plain) => plain,
                None => continue,
            },
            None => delivery,
        };
        if !timed.is_direct() {
            timed.accept(delivery)?;
            received += 1;
            continue;
        }
        if args.format != "none" {
            let line = if json { json_line(&delivery) } else { text_line(&delivery) };
            let mut out = stdout.lock();
            writeln!(out, "{line}").and_then(|()| out.flush()).map_err(CliError::Output)?;
        }
        if manual {
            delivery.ack()?;
        }
        received += 1;
    }
    timed.finish()?;
    inbox.close().await;
    client.close().await;
    match saver {
        Some(saver) => saver.finish(),
        None => Ok(()),
    }
}

/// A verifier of the `[[signing_key]]`s of the `--verify` file.
fn read_verify_keys(path: &std::path::Path) -> Result<sift_auth::signing::Verifier, CliError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| CliError::File { path: path.display().to_string(), source })?;
    let file = sift_auth::UsersFile::parse(&text)
        .map_err(|error| CliError::Usage(format!("--verify {}: {error}", path.display())))?;
    if file.signing_keys.is_empty() {
        return Err(CliError::Usage(format!("--verify {}: the file names no [[signing_key]]", path.display())));
    }
    Ok(sift_auth::signing::Verifier::new(file.signing_keys))
}

/// Whether `message` passes `--verify` (always, without it); a refusal
/// is told on standard error.
pub fn verified(message: &sift_core::Message, verifier: Option<&sift_auth::signing::Verifier>) -> bool {
    let Some(verifier) = verifier else { return true };
    match verifier.verify(message) {
        Ok(_) => true,
        Err(error) => {
            // A closed standard error (a script that stopped listening)
            // loses the line rather than the subscriber.
            let _ = writeln!(std::io::stderr().lock(), "refused a message on {}: {error}", message.topic);
            false
        }
    }
}

/// Most connections `--streams` may open.
const STREAMS_MAX: usize = 64;

/// Tells the user, on standard error, that the broker was lost (the
/// client reconnects by itself, and the subscription resumes) or is back.
fn say_connection(connected: bool, server: &str) {
    match connected {
        false => eprintln!("lost the broker at {server}; reconnecting"),
        true => eprintln!("reconnected to {server}; subscription resumed"),
    }
}

/// Tells the user which stored messages will never come, and why.
fn print_gap(gap: &Gap, json: bool) -> Result<(), CliError> {
    let reason = match gap.reason {
        GapReason::Removed => "removed by the stream's retention",
        GapReason::Damaged => "damaged on disk",
    };
    let last = gap.first_seq + gap.count.saturating_sub(1);
    if json {
        let line = serde_json::json!({ "gap": { "first_seq": gap.first_seq, "count": gap.count, "reason": reason } });
        let mut out = std::io::stdout().lock();
        return writeln!(out, "{line}").and_then(|()| out.flush()).map_err(CliError::Output);
    }
    eprintln!("missed {} stored messages (#{}..#{last}): {reason}", gap.count, gap.first_seq);
    Ok(())
}

/// A message as one line: `[topic] name=value ... payload`.
pub fn message_text(message: &Message) -> String {
    let properties: Vec<String> = message.properties.iter().map(|(name, value)| format!("{name}={value}")).collect();
    let (payload, encoding) = payload_text(&message.payload);
    let payload = if encoding == "utf8" { payload } else { format!("base64:{payload}") };
    format!("[{}] {} {}", message.topic, properties.join(" "), payload)
}

fn text_line(delivery: &Delivery) -> String {
    let redelivered = if delivery.redelivered { " (redelivered)" } else { "" };
    let seq = match delivery.stream_seq {
        0 => String::new(),
        seq => format!("#{seq} "),
    };
    format!("{seq}{}{redelivered}", message_text(&delivery.message))
}

/// One delivery as a JSON object: payload and metadata as UTF-8 text when
/// they are, base64 otherwise (with `payload_encoding` saying which).
pub fn json_line(delivery: &Delivery) -> String {
    let mut extra = vec![("redelivered", serde_json::Value::Bool(delivery.redelivered))];
    if delivery.stream_seq != 0 {
        extra.push(("stream_seq", delivery.stream_seq.into()));
    }
    message_json(&delivery.message, &extra)
}

/// A message as one line of JSON, with `extra` fields added.
pub fn message_json(message: &Message, extra: &[(&str, serde_json::Value)]) -> String {
    sift_client::json::message_json(message, extra).to_string()
}
