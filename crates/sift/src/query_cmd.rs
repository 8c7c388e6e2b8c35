//! `sift query`: the archive query service. Prints the stored messages of a
//! stream that match, then a count.

use std::io::Write;

use clap::Args;
use sift_client::{Client, ClientOptions, FilterKind, QueryEvent, QueryOptions, StartPosition};

use crate::sub_cmd::{message_json, message_text};
use crate::CliError;

/// Arguments of `sift query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// Broker address.
    #[arg(long, env = "SIFT_SERVER", default_value = "127.0.0.1:7400")]
    server: String,
    #[command(flatten)]
    sign_in: crate::sign_in::SignInArgs,
    /// The stream to search.
    #[arg(long)]
    stream: String,
    /// Topic filter [default: every topic].
    #[arg(long)]
    topic: Option<String>,
    /// Content filter over properties (see `sift sub --tags`).
    #[arg(long, group = "content_filter")]
    tags: Option<String>,
    /// Content filter: a JMS message selector.
    #[arg(long = "where", visible_alias = "sql", value_name = "SQL", group = "content_filter")]
    sql: Option<String>,
    /// Content filter: XPath 1.0 over the XML metadata.
    #[arg(long, group = "content_filter")]
    xpath: Option<String>,
    /// Content filter: a regular expression over the topic.
    #[arg(long, group = "content_filter")]
    regex: Option<String>,
    /// Only messages stored at or after this time (RFC 3339, e.g. 2026-11-24T18:00:00Z).
    #[arg(long)]
    since: Option<String>,
    /// Only messages stored at or before this time (RFC 3339).
    #[arg(long)]
    until: Option<String>,
    /// At most this many results.
    #[arg(long)]
    limit: Option<u32>,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
}

impl QueryArgs {
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

/// Parses an RFC 3339 time into nanoseconds since the epoch.
fn parse_time(option: &str, text: &str) -> Result<u64, CliError> {
    match format!("time:{text}").parse::<StartPosition>() {
        Ok(StartPosition::Time(nanos)) => Ok(nanos),
        Ok(_) => Err(CliError::Usage(format!("{option} {text:?}: expected an RFC 3339 time"))),
        Err(error) => Err(CliError::Usage(format!("{option} {text:?}: {error}"))),
    }
}

/// Runs the query and prints its results, then `N matched (M scanned)`.
pub async fn run(args: QueryArgs) -> Result<(), CliError> {
    let options = QueryOptions {
        stream: args.stream.clone(),
        topic_filter: args.topic.clone().unwrap_or_default(),
        filter: args.content_filter(),
        since_ns: args.since.as_deref().map(|text| parse_time("--since", text)).transpose()?.unwrap_or(0),
        until_ns: args.until.as_deref().map(|text| parse_time("--until", text)).transpose()?.unwrap_or(0),
        limit: args.limit.unwrap_or(0),
    };
    let client_options = ClientOptions {
        name: crate::guidance::client_name("query", None),
        reconnect: false,
        credentials: args.sign_in.credentials()?,
        tls: args.sign_in.tls()?,
        ..ClientOptions::default()
    };
    let client = Client::connect(args.server.as_str(), client_options).await?;
    let mut results = client.query(options)?;
    let json = args.format == "json";
    let stdout = std::io::stdout();
    let outcome = loop {
        let Some(event) = results.next().await else {
            break Err(CliError::Client(sift_client::ClientError::Disconnected));
        };
        let line = match event {
            QueryEvent::Message { stream_seq, message } => match json {
                true => message_json(&message, &[("stream_seq", stream_seq.into())]),
                false => format!("#{stream_seq} {}", message_text(&message)),
            },
            QueryEvent::Done { matched, scanned, missed } => {
                let summary = match json {
                    true => serde_json::json!({ "matched": matched, "scanned": scanned, "missed": missed }).to_string(),
                    false => format!("{matched} matched ({scanned} scanned, {missed} unreadable)"),
                };
                let mut out = stdout.lock();
                break writeln!(out, "{summary}").map_err(CliError::Output);
            }
            QueryEvent::Failed(error) => break Err(crate::guidance::with_caret(error, args.content_filter().as_ref())),
        };
        let mut out = stdout.lock();
        if let Err(error) = writeln!(out, "{line}") {
            break Err(CliError::Output(error));
        }
    };
    client.close().await;
    outcome
}
