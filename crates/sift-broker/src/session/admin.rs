//! `ADMIN`: describes the broker to an operator as JSON (its links, its
//! routes and interest, its counters).
//!
//! Any client may ask: there is no authentication yet (`docs/PROTOCOL.md`
//! §6.16), so nothing here may reveal more than an operator of the network
//! would see in the logs.

use serde_json::{json, Map, Value};
use sift_proto::{AdminQuery, ErrorCode, Frame};

use crate::link::{ContentText, LinkInfo, RouteInfo};
use crate::session::Session;
use crate::shared::BrokerShared;

/// Bytes of an `ADMIN_REPLY` besides its JSON: type, request id, length.
const REPLY_OVERHEAD_BYTES: usize = 1 + 8 + 4;

impl Session {
    /// Answers an `ADMIN` with an `ADMIN_REPLY`, or an `ERROR` when the
    /// reply would not fit in one frame.
    pub(crate) fn admin(&mut self, request_id: u64, query: AdminQuery) {
        if query == AdminQuery::Stats {
            // This connection's own counts are batched; publish them first
            // so that a client sees at least its own traffic.
            self.publisher.flush_counters();
        }
        let json = report(&self.shared, query).to_string();
        let limit = self.shared.config.limits.max_frame_bytes as usize;
        if json.len() + REPLY_OVERHEAD_BYTES > limit {
            let message = format!("the {query} report is {} bytes, more than max_frame_bytes = {limit}", json.len());
            self.refuse(ErrorCode::Internal, request_id, message);
            return;
        }
        self.conn.send_control(&Frame::AdminReply { request_id, json });
    }
}

/// The JSON document answering `query`.
pub fn report(shared: &BrokerShared, query: AdminQuery) -> Value {
    let mut document = match query {
        AdminQuery::Links => links_report(shared),
        AdminQuery::Routes => routes_report(shared),
        AdminQuery::Stats => stats_report(shared),
        AdminQuery::Subscriptions => subscriptions_report(shared),
    };
    document.insert("broker".into(), shared.links.name().to_string().into());
    document.insert("cluster".into(), shared.config.network.cluster.clone().into());
    document.insert("query".into(), query.name().into());
    Value::Object(document)
}

/// `links`: every link that is up, with its `FORWARD` traffic.
fn links_report(shared: &BrokerShared) -> Map<String, Value> {
    let links: Vec<Value> = shared.links.links().iter().map(link_json).collect();
    Map::from_iter([("links".to_string(), Value::Array(links))])
}

fn link_json(link: &LinkInfo) -> Value {
    json!({
        "neighbour": link.neighbour,
        "address": link.address,
        "cost": link.cost,
        "connected_for_ms": u64::try_from(link.connected_for.as_millis()).unwrap_or(u64::MAX),
        "messages_forwarded": link.traffic.messages_forwarded,
        "bytes_forwarded": link.traffic.bytes_forwarded,
        "messages_received": link.traffic.messages_received,
        "bytes_received": link.traffic.bytes_received,
        "clock_offset_ns": link.clock.map(|clock| clock.offset_ns),
        "clock_error_ns": link.clock.map(|clock| clock.error_ns),
    })
}

/// `routes`: the reachable brokers, what this broker advertises and what
/// every other broker advertises.
fn routes_report(shared: &BrokerShared) -> Map<String, Value> {
    let routes: Vec<Value> = shared.links.routes().iter().map(route_json).collect();
    let advertised: Vec<Value> = shared
        .links
        .advertised_interest()
        .into_iter()
        .map(|(topic, content)| json!({ "topic": topic, "content": content_json(content) }))
        .collect();
    let remote: Vec<Value> = shared
        .links
        .remote_interest()
        .into_iter()
        .map(|(broker, topic, content)| json!({ "broker": broker, "topic": topic, "content": content_json(content) }))
        .collect();
    Map::from_iter([
        ("routes".to_string(), Value::Array(routes)),
        ("advertised".to_string(), Value::Array(advertised)),
        ("remote_interest".to_string(), Value::Array(remote)),
    ])
}

fn route_json(route: &RouteInfo) -> Value {
    json!({ "broker": route.broker, "hops": route.hops, "cost": route.cost, "next_hop": route.next_hop })
}

/// A content filter as `{"language", "filter"}`, or `null` for none.
fn content_json(content: ContentText) -> Value {
    match content {
        Some((language, filter)) => json!({ "language": language, "filter": filter }),
        None => Value::Null,
    }
}

/// `stats`: every broker-wide counter by name.
fn stats_report(shared: &BrokerShared) -> Map<String, Value> {
    let mut counters: Map<String, Value> =
        shared.stats.snapshot().entries().into_iter().map(|(name, value)| (name.to_string(), value.into())).collect();
    for (name, value) in shared.storage.totals() {
        counters.insert(name.to_string(), value.into());
    }
    counters.insert("memory_bytes".into(), shared.memory.used_bytes().into());
    counters.insert("memory_bytes_max".into(), shared.memory.max_bytes().into());
    let streams: Vec<Value> = shared.storage.streams().iter().map(|stream| stream.info_json()).collect();
    let histograms = json!({
        "deliver_latency": histogram_json(&shared.deliver_latency.snapshot()),
        "fsync_latency": histogram_json(&shared.storage.fsync_latency()),
    });
    Map::from_iter([
        ("counters".to_string(), Value::Object(counters)),
        ("streams".to_string(), Value::Array(streams)),
        ("histograms".to_string(), histograms),
        ("doors".to_string(), Value::Object(shared.doors.report())),
    ])
}

/// A latency histogram as `{"bounds_us", "counts", "sum_ns", "count"}`:
/// `counts[i]` (not cumulative) holds latencies up to `bounds_us[i]`, and
/// the one count past the bounds everything longer.
fn histogram_json(snapshot: &sift_core::HistogramSnapshot) -> Value {
    let bounds: Vec<u64> = (0..snapshot.counts.len()).filter_map(sift_core::HistogramSnapshot::bound_us).collect();
    json!({ "bounds_us": bounds, "counts": snapshot.counts, "sum_ns": snapshot.sum_ns, "count": snapshot.count() })
}

/// `subscriptions`: every client connection (sorted by id) with its queued
/// bytes and its subscriptions, each with its filters and queue depth.
fn subscriptions_report(shared: &BrokerShared) -> Map<String, Value> {
    let mut connections = shared.connection_list();
    connections.sort_by_key(|conn| conn.id);
    let described: Vec<Value> = connections
        .iter()
        .map(|conn| {
            let (pending_bytes, unacked) = {
                let outbox = conn.lock();
                (outbox.pending_bytes(), outbox.unacked_count())
            };
            json!({
                "connection": conn.id,
                "client": &*conn.name,
                "door": conn.door.name(),
                "peer": &*conn.peer,
                "pending_bytes": pending_bytes,
                "unacked": unacked,
                "subscriptions": conn.listed_subscriptions(),
            })
        })
        .collect();
    Map::from_iter([("connections".to_string(), Value::Array(described))])
}
