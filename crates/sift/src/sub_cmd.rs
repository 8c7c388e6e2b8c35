//! `sift sub`.

use std::io::Write;

use base64::Engine;
use clap::Args;
use sift_client::{AckPolicy, Client, ClientOptions, Delivery, FilterKind, QueuePolicy, SubscribeOptions};
use sift_core::Value;

use crate::CliError;

/// Arguments of `sift sub`.
#[derive(Debug, Args)]
pub struct SubArgs {
    /// Broker address.
    #[arg(long, default_value = "127.0.0.1:7400")]
    server: String,
    /// Topic filter: `*` matches one token, `>` the rest.
    #[arg(long)]
    topic: String,
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
    /// Output format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
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

/// Subscribes and prints each delivery until `--count` or SIGINT.
pub async fn run(args: SubArgs) -> Result<(), CliError> {
    let policy = match &args.policy {
        Some(text) => {
            Some(text.parse::<QueuePolicy>().map_err(|error: String| CliError::Usage(format!("--policy: {error}")))?)
        }
        None => None,
    };
    let manual = args.ack == "manual";
    let mut options =
        SubscribeOptions::new(args.topic.as_str()).ack(if manual { AckPolicy::Manual } else { AckPolicy::Auto });
    options.policy = policy;
    options.queue_group = args.queue.clone();
    options.queue_capacity = args.queue_capacity;
    options.filter = args.content_filter();
    let client_options = ClientOptions { name: "sift-sub".into(), ..ClientOptions::default() };
    let client = Client::connect(args.server.as_str(), client_options).await?;
    let mut subscription = client.subscribe(options).await?;
    // Tells scripts and tests that the subscription is live.
    eprintln!("subscribed to {}", args.topic);
    let json = args.format == "json";
    let mut received = 0u64;
    let stdout = std::io::stdout();
    loop {
        if args.count.is_some_and(|count| received >= count) {
            break;
        }
        let delivery = tokio::select! {
            delivery = subscription.next() => delivery,
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(delivery) = delivery else { break };
        let line = if json { json_line(&delivery) } else { text_line(&delivery) };
        let mut out = stdout.lock();
        writeln!(out, "{line}").and_then(|()| out.flush()).map_err(CliError::Output)?;
        if manual {
            delivery.ack()?;
        }
        received += 1;
    }
    client.close().await;
    Ok(())
}

fn payload_text(bytes: &[u8]) -> (String, &'static str) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_string(), "utf8"),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(bytes), "base64"),
    }
}

fn text_line(delivery: &Delivery) -> String {
    let message = &delivery.message;
    let properties: Vec<String> = message.properties.iter().map(|(name, value)| format!("{name}={value}")).collect();
    let (payload, encoding) = payload_text(&message.payload);
    let payload = if encoding == "utf8" { payload } else { format!("base64:{payload}") };
    let redelivered = if delivery.redelivered { " (redelivered)" } else { "" };
    format!("[{}] {} {}{redelivered}", message.topic, properties.join(" "), payload)
}

fn json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::Int(int) => serde_json::Value::from(*int),
        Value::Float(float) => serde_json::Value::from(*float),
        Value::Str(text) => serde_json::Value::String(text.to_string()),
    }
}

/// One delivery as a JSON object: payload and metadata as UTF-8 text when
/// they are, base64 otherwise (with `payload_encoding` saying which).
pub fn json_line(delivery: &Delivery) -> String {
    let message = &delivery.message;
    let properties: serde_json::Map<String, serde_json::Value> =
        message.properties.iter().map(|(name, value)| (name.clone(), json_value(value))).collect();
    let (payload, payload_encoding) = payload_text(&message.payload);
    let metadata = message.metadata.as_ref().map(|bytes| payload_text(bytes).0);
    serde_json::json!({
        "topic": message.topic.as_str(),
        "properties": properties,
        "metadata": metadata,
        "payload": payload,
        "payload_encoding": payload_encoding,
        "timestamp_ns": message.timestamp_ns,
        "priority": message.priority.level(),
        "delivery_mode": message.delivery_mode.name(),
        "id": message.id,
        "publisher": &*message.publisher,
        "sequence": message.sequence,
        "redelivered": delivery.redelivered,
    })
    .to_string()
}
