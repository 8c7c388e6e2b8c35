//! `sift stream` and `sift durable`: streams and durable subscriptions of a
//! running broker, and `sift stream verify`, an offline check of a stream's
//! files.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};
use sift_client::{Client, ClientError, ClientOptions, ManageOp};

use crate::CliError;

/// How long to wait for the broker's reply once connected.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for a change of a replicated stream's brokers: the new
/// ones catch up on the whole log first (the broker gives up after 300 s).
const MEMBERS_REPLY_TIMEOUT: Duration = Duration::from_secs(330);

/// Arguments of `sift stream`.
#[derive(Debug, Args)]
pub struct StreamArgs {
    #[command(subcommand)]
    command: StreamCommand,
}

#[derive(Debug, Subcommand)]
enum StreamCommand {
    /// Add a stream that stores the messages published on its topics.
    Add(StreamAddArgs),
    /// List the streams.
    Ls(ServerArgs),
    /// Describe one stream.
    Info(NamedArgs),
    /// Remove a stream and its stored messages.
    Rm(NamedArgs),
    /// Move a replicated stream's replica from one broker to another: the
    /// new broker catches up on the log and joins the group, then the old
    /// one leaves it and drops its files.
    Move(StreamMoveArgs),
    /// Add brokers to a replicated stream's group, or remove them (the
    /// group keeps 1 to 7 members).
    Members(StreamMembersArgs),
    /// Check a stream's files offline (the broker may be stopped): every
    /// record's checksum, the sequence numbers, a torn tail.
    Verify(VerifyArgs),
}

/// Arguments of `sift durable`.
#[derive(Debug, Args)]
pub struct DurableArgs {
    #[command(subcommand)]
    command: DurableCommand,
}

#[derive(Debug, Subcommand)]
enum DurableCommand {
    /// List the durable subscriptions.
    Ls(ServerArgs),
    /// Describe one durable subscription: its stream, filters and position.
    Info(NamedArgs),
    /// Remove a durable subscription (it must have no consumer).
    Rm(NamedArgs),
}

/// The broker to ask, and the output form.
#[derive(Debug, Args)]
struct ServerArgs {
    /// Broker address.
    #[arg(long, env = "SIFT_SERVER", default_value = "127.0.0.1:7400")]
    server: String,
    #[command(flatten)]
    sign_in: crate::sign_in::SignInArgs,
    /// Print the broker's JSON reply.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct NamedArgs {
    /// The stream's or durable subscription's name.
    name: String,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Args)]
struct StreamAddArgs {
    /// The stream's name: letters, digits, '-', '_' and '.'.
    name: String,
    /// Topic filter whose messages it stores (repeatable).
    #[arg(long = "topic", required = true)]
    topics: Vec<String>,
    /// Remove messages older than this (whole segments): 90s, 30m, 12h, 7d.
    #[arg(long)]
    max_age: Option<String>,
    /// Keep at most this many bytes (whole segments): 512MiB, 10GiB.
    #[arg(long)]
    max_bytes: Option<String>,
    /// Keep at most this many messages (whole segments).
    #[arg(long)]
    max_msgs: Option<u64>,
    /// When stored messages reach the disk: always, every:MS or os
    /// [default: the broker's storage.fsync_default; always when replicated].
    #[arg(long)]
    fsync: Option<String>,
    /// Brokers that keep the stream: 1, or up to 7 that make it a
    /// replicated stream (a Raft group of that many brokers; an odd number
    /// is best).
    #[arg(long, default_value_t = 1)]
    replicas: u32,
    /// The brokers of a replicated stream, by network name, comma-separated
    /// [default: the broker asked and the brokers nearest to it].
    #[arg(long, value_delimiter = ',')]
    members: Vec<String>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Args)]
struct StreamMoveArgs {
    /// The replicated stream.
    name: String,
    /// The broker that gives up its replica (network name).
    #[arg(long)]
    from: String,
    /// The broker that takes a replica (network name).
    #[arg(long)]
    to: String,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Args)]
struct StreamMembersArgs {
    /// The replicated stream.
    name: String,
    /// Brokers to add (network names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    add: Vec<String>,
    /// Brokers to remove (network names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    remove: Vec<String>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The stream's name.
    name: String,
    /// The broker's data directory (as `sift broker --data`).
    #[arg(long = "data", visible_alias = "data-dir", value_name = "DIR", default_value = sift_broker::config::DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Parses a duration such as `500ms`, `90s`, `30m`, `12h` or `7d` into milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let value: u64 = number.parse().map_err(|_| format!("{text:?}: expected a number and a unit, like 7d"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => return Err(format!("{text:?}: unknown unit {other:?}; use ms, s, m, h or d")),
    };
    value.checked_mul(unit_ms).ok_or_else(|| format!("{text:?} is too long"))
}

/// Parses a size such as `4096`, `64KiB`, `512MB` or `10GiB` into bytes.
pub fn parse_size_bytes(text: &str) -> Result<u64, String> {
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let value: u64 = number.parse().map_err(|_| format!("{text:?}: expected a number and a unit, like 10GiB"))?;
    let unit_bytes: u64 = match unit {
        "" | "B" => 1,
        "KB" => 1_000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        "GB" => 1_000_000_000,
        "GiB" => 1 << 30,
        "TB" => 1_000_000_000_000,
        "TiB" => 1 << 40,
        other => return Err(format!("{text:?}: unknown unit {other:?}; use B, KB, KiB, MB, MiB, GB, GiB, TB or TiB")),
    };
    value.checked_mul(unit_bytes).ok_or_else(|| format!("{text:?} is too large"))
}

/// Runs `sift stream`.
pub async fn run_stream(args: StreamArgs) -> Result<(), CliError> {
    match args.command {
        StreamCommand::Add(add) => {
            let max_age_ms = add.max_age.as_deref().map(parse_duration_ms).transpose().map_err(usage("--max-age"))?;
            let max_bytes = add.max_bytes.as_deref().map(parse_size_bytes).transpose().map_err(usage("--max-bytes"))?;
            let body = json!({
                "name": add.name,
                "topics": add.topics,
                "max_age_ms": max_age_ms.unwrap_or(0),
                "max_bytes": max_bytes.unwrap_or(0),
                "max_msgs": add.max_msgs.unwrap_or(0),
                "fsync": add.fsync.unwrap_or_default(),
                "replicas": add.replicas,
                "members": add.members,
            });
            let reply = manage(&add.server, ManageOp::StreamAdd, body).await?;
            print(&add.server, &reply, stream_line(&reply))
        }
        StreamCommand::Ls(server) => {
            let reply = manage(&server, ManageOp::StreamLs, json!({})).await?;
            let lines = list(&reply, "streams").iter().map(stream_line).collect::<Vec<_>>().join("\n");
            print(&server, &reply, lines)
        }
        StreamCommand::Info(named) => {
            let reply = manage(&named.server, ManageOp::StreamInfo, json!({ "name": named.name })).await?;
            print(&named.server, &reply, pretty(&reply))
        }
        StreamCommand::Rm(named) => {
            let reply = manage(&named.server, ManageOp::StreamRm, json!({ "name": named.name })).await?;
            print(&named.server, &reply, format!("removed stream {}", named.name))
        }
        StreamCommand::Move(moved) => {
            let body = json!({ "name": moved.name, "add": [moved.to], "remove": [moved.from] });
            let reply = manage_within(&moved.server, ManageOp::StreamMembers, body, MEMBERS_REPLY_TIMEOUT).await?;
            print(&moved.server, &reply, members_line(&reply))
        }
        StreamCommand::Members(members) => {
            let body = json!({ "name": members.name, "add": members.add, "remove": members.remove });
            let reply = manage_within(&members.server, ManageOp::StreamMembers, body, MEMBERS_REPLY_TIMEOUT).await?;
            print(&members.server, &reply, members_line(&reply))
        }
        StreamCommand::Verify(verify) => run_verify(verify),
    }
}

/// What a change of members says: the group now, and any removed broker
/// that could not drop its files.
fn members_line(reply: &Value) -> String {
    let members: Vec<&str> = list(reply, "members").iter().filter_map(Value::as_str).collect();
    let mut line = format!("stream {} is kept by {}", reply["name"].as_str().unwrap_or("?"), members.join(", "));
    for kept in list(reply, "removed_kept_files") {
        line.push_str(&format!(
            "\nbroker {} left the group but keeps its files ({}); run `sift stream rm` there",
            kept["broker"].as_str().unwrap_or("?"),
            kept["why"].as_str().unwrap_or("?")
        ));
    }
    line
}

/// Runs `sift durable`.
pub async fn run_durable(args: DurableArgs) -> Result<(), CliError> {
    match args.command {
        DurableCommand::Ls(server) => {
            let reply = manage(&server, ManageOp::DurableLs, json!({})).await?;
            let lines = list(&reply, "durables").iter().map(durable_line).collect::<Vec<_>>().join("\n");
            print(&server, &reply, lines)
        }
        DurableCommand::Info(named) => {
            let reply = manage(&named.server, ManageOp::DurableInfo, json!({ "name": named.name })).await?;
            print(&named.server, &reply, pretty(&reply))
        }
        DurableCommand::Rm(named) => {
            let reply = manage(&named.server, ManageOp::DurableRm, json!({ "name": named.name })).await?;
            print(&named.server, &reply, format!("removed durable subscription {}", named.name))
        }
    }
}

fn usage(option: &'static str) -> impl Fn(String) -> CliError {
    move |error| CliError::Usage(format!("{option} {error}"))
}

async fn manage(server: &ServerArgs, op: ManageOp, body: Value) -> Result<Value, CliError> {
    manage_within(server, op, body, REPLY_TIMEOUT).await
}

/// Sends one `MANAGE` and waits at most `timeout` for its reply.
async fn manage_within(server: &ServerArgs, op: ManageOp, body: Value, timeout: Duration) -> Result<Value, CliError> {
    let options = ClientOptions {
        name: crate::guidance::client_name("manage", None),
        reconnect: false,
        credentials: server.sign_in.credentials()?,
        tls: server.sign_in.tls()?,
        ..ClientOptions::default()
    };
    let client = Client::connect(server.server.as_str(), options).await?;
    let reply = tokio::time::timeout(timeout, client.manage(op, body)).await;
    client.close().await;
    Ok(reply.map_err(|_| ClientError::Timeout(timeout))??)
}

fn list<'a>(reply: &'a Value, key: &str) -> &'a [Value] {
    reply.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn print(server: &ServerArgs, reply: &Value, text: String) -> Result<(), CliError> {
    let text = if server.json { pretty(reply) } else { text };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").map_err(CliError::Output)
}

fn stream_line(stream: &Value) -> String {
    let field = |name: &str| stream.get(name).cloned().unwrap_or(Value::Null);
    format!(
        "{} topics={} fsync={} messages={} bytes={} seq={}..{} segments={}",
        field("name").as_str().unwrap_or("?"),
        field("topics"),
        field("fsync").as_str().unwrap_or("?"),
        field("messages"),
        field("bytes"),
        field("first_seq"),
        field("last_seq"),
        field("segments"),
    )
}

fn durable_line(durable: &Value) -> String {
    let field = |name: &str| durable.get(name).cloned().unwrap_or(Value::Null);
    format!(
        "{} stream={} topic={} {}={} ack_floor={} pending={} consumers={}{}",
        field("name").as_str().unwrap_or("?"),
        field("stream").as_str().unwrap_or("?"),
        field("topic_filter").as_str().unwrap_or("?"),
        field("filter_kind").as_str().unwrap_or("none"),
        field("filter"),
        field("ack_floor"),
        field("pending"),
        field("consumers"),
        if field("shared").as_bool() == Some(true) { " shared" } else { "" },
    )
}

fn run_verify(args: VerifyArgs) -> Result<(), CliError> {
    let dir = args.data_dir.join("streams").join(&args.name);
    if !dir.is_dir() {
        return Err(CliError::Usage(format!("no stream {} in {}", args.name, args.data_dir.display())));
    }
    // Verifying only reads, so a running broker is no reason to refuse;
    // but what it is writing now may look like a torn tail, so say so.
    let lock = sift_broker::store::DataDirLock::state(&args.data_dir)
        .map_err(|error| CliError::Usage(format!("{}: {error}", args.data_dir.display())))?;
    if let sift_broker::store::LockState::Held { .. } = lock {
        eprintln!(
            "note: {} is {lock}; verifying read-only, and records it is writing now may show as a torn tail",
            args.data_dir.display()
        );
    }
    let report = sift_store::verify(&dir).map_err(|error| CliError::Usage(format!("{}: {error}", dir.display())))?;
    let damaged = !report.damaged.is_empty() || report.torn_tail.is_some();
    let text = if args.json { pretty(&verify_json(&report)) } else { format!("stream {}: {report}", args.name) };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").map_err(CliError::Output)?;
    if damaged {
        return Err(CliError::Usage(format!("stream {} has damaged or torn records (above)", args.name)));
    }
    Ok(())
}

/// A verify report as JSON.
fn verify_json(report: &sift_store::Recovery) -> Value {
    let damaged: Vec<Value> = report
        .damaged
        .iter()
        .map(|damage| {
            json!({
                "segment": damage.segment.display().to_string(),
                "offset": damage.offset,
                "first_seq": damage.first_seq,
                "count": damage.count,
            })
        })
        .collect();
    let torn_tail = report.torn_tail.as_ref().map(
        |tail| json!({ "segment": tail.segment.display().to_string(), "offset": tail.offset, "bytes": tail.bytes_cut }),
    );
    json!({
        "segments": report.segments,
        "records": report.records,
        "bytes": report.bytes,
        "first_seq": report.first_seq,
        "last_seq": report.last_seq,
        "torn_tail": torn_tail,
        "damaged": damaged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_parse_with_units() {
        assert_eq!(parse_duration_ms("7d"), Ok(7 * 86_400_000));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert!(parse_duration_ms("7").is_err());
        assert!(parse_duration_ms("7w").is_err());
        assert_eq!(parse_size_bytes("10GiB"), Ok(10 << 30));
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert!(parse_size_bytes("1XB").is_err());
        assert!(parse_size_bytes("GiB").is_err());
    }
}
