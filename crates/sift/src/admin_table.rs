//! Renders an `ADMIN_REPLY` document as aligned text tables for people.
//!
//! Fields the broker left out print as `-`, so that a newer or older broker
//! still gives a readable (if partial) table rather than an error.

use serde_json::Value;
use sift_client::AdminQuery;

/// The tables for the reply to `query`.
pub fn render(query: AdminQuery, document: &Value) -> String {
    let header = format!("broker {} (cluster {})\n", text(&document["broker"]), text(&document["cluster"]));
    let body = match query {
        AdminQuery::Links => links(document),
        AdminQuery::Routes => routes(document),
        AdminQuery::Stats => stats(document),
        AdminQuery::Subscriptions => subscriptions(document),
    };
    header + &body
}

fn links(document: &Value) -> String {
    const COLUMNS: [&str; 8] = [
        "neighbour",
        "address",
        "cost",
        "connected_for_ms",
        "messages_forwarded",
        "bytes_forwarded",
        "messages_received",
        "bytes_received",
    ];
    let rows = rows_of(&document["links"], &COLUMNS);
    if rows.is_empty() {
        return "no links up\n".into();
    }
    table(&COLUMNS, &rows)
}

fn routes(document: &Value) -> String {
    let routes = table(
        &["broker", "hops", "cost", "next_hop"],
        &rows_of(&document["routes"], &["broker", "hops", "cost", "next_hop"]),
    );
    let advertised: Vec<Vec<String>> =
        entries(&document["advertised"]).map(|entry| vec![text(&entry["topic"]), content(&entry["content"])]).collect();
    let remote: Vec<Vec<String>> = entries(&document["remote_interest"])
        .map(|entry| vec![text(&entry["broker"]), text(&entry["topic"]), content(&entry["content"])])
        .collect();
    format!(
        "{routes}\nadvertised by this broker:\n{}\nadvertised by other brokers:\n{}",
        table(&["topic", "content"], &advertised),
        table(&["broker", "topic", "content"], &remote)
    )
}

/// The broker's counters, then each front-end's as `door.counter`.
fn stats(document: &Value) -> String {
    let named = |prefix: &str, counters: &Value| -> Vec<Vec<String>> {
        let counters = counters.as_object().into_iter().flatten();
        counters.map(|(name, value)| vec![format!("{prefix}{name}"), text(value)]).collect()
    };
    let mut rows = named("", &document["counters"]);
    for (door, counters) in document["doors"].as_object().into_iter().flatten() {
        rows.extend(named(&format!("{door}."), counters));
    }
    table(&["counter", "value"], &rows)
}

fn subscriptions(document: &Value) -> String {
    let rows: Vec<Vec<String>> = entries(&document["connections"])
        .flat_map(|connection| {
            entries(&connection["subscriptions"]).map(move |subscription| {
                let source = match (&subscription["durable"], &subscription["stream"]) {
                    (Value::String(durable), stream) => format!("durable {durable} on {}", text(stream)),
                    (_, Value::String(stream)) => format!("replay of {stream}"),
                    _ => "-".into(),
                };
                vec![
                    format!("{}#{}", text(&connection["client"]), text(&connection["connection"])),
                    text(&connection["door"]),
                    text(&connection["peer"]),
                    text(&subscription["sub_id"]),
                    text(&subscription["topic"]),
                    content(&subscription["content"]),
                    text(&subscription["queue_group"]),
                    text(&subscription["policy"]),
                    source,
                    text(&subscription["queued"]),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return "no subscriptions\n".into();
    }
    table(&["client", "door", "peer", "sub", "topic", "content", "group", "policy", "source", "queued"], &rows)
}

/// The objects of a JSON array (none when it is missing).
fn entries(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten()
}

/// One row per object of `list`, with the fields named by `columns`.
fn rows_of(list: &Value, columns: &[&str]) -> Vec<Vec<String>> {
    entries(list).map(|entry| columns.iter().map(|column| text(&entry[*column])).collect()).collect()
}

/// A scalar as text: strings bare, `null` and missing fields as `-`.
fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(string) => string.clone(),
        other => other.to_string(),
    }
}

/// A content filter `{"language", "filter"}` as `language: filter`, or `-`.
fn content(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        filter => format!("{}: {}", text(&filter["language"]), text(&filter["filter"])),
    }
}

/// Left-aligned columns separated by two spaces, under a header line.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|header| header.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let padded: Vec<String> =
            cells.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}", width = *width)).collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut output = line(headers.to_vec());
    for row in rows {
        output += &line(row.iter().map(String::as_str).collect());
    }
    output
}
