//! Helpers: a broker with its HTTP front-end, a raw HTTP/1.1 client and
//! native clients.

use sift_broker::front_end::FrontEnd;
use std::net::SocketAddr;
use std::time::Duration;

use sift_broker::{Config, RunningBroker};
use sift_client::{Client, ClientOptions, Delivery, Subscription};
use sift_http::{HttpConfig, HttpFrontEnd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest wait for something that should happen.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A broker and its HTTP front-end.
pub struct Served {
    pub broker: RunningBroker,
    pub http: HttpFrontEnd,
}

impl Served {
    /// The HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// Stops the front-end, then the broker.
    pub async fn stop(self) {
        self.http.shutdown().await;
        self.broker.shutdown().await;
    }
}

/// A broker with `adjust` applied to the scratch defaults, and its front-end.
pub async fn served_with(adjust: impl FnOnce(&mut HttpConfig)) -> Served {
    served_with_broker(|_| {}, adjust).await
}

/// A broker with `adjust_broker` applied to its scratch defaults, and its
/// front-end with `adjust`.
pub async fn served_with_broker(
    adjust_broker: impl FnOnce(&mut Config),
    adjust: impl FnOnce(&mut HttpConfig),
) -> Served {
    let mut http_config = HttpConfig::scratch();
    adjust(&mut http_config);
    let mut config = Config::scratch();
    adjust_broker(&mut config);
    let broker = RunningBroker::start(config).await.expect("broker starts");
    let http = HttpFrontEnd::start(http_config, broker.connector()).await.expect("HTTP starts");
    Served { broker, http }
}

/// A broker with default settings and its front-end.
pub async fn served() -> Served {
    served_with(|_| {}).await
}

/// A native client named `name` that does not reconnect.
pub async fn native(served: &Served, name: &str) -> Client {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    Client::connect(served.broker.local_addr().to_string(), options).await.expect("client connects")
}

/// The next delivery, failing the test after [`PATIENCE`].
pub async fn next(subscription: &mut Subscription) -> Delivery {
    tokio::time::timeout(PATIENCE, subscription.next())
        .await
        .expect("a delivery arrives in time")
        .expect("subscription is open")
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// Sends one request on a new connection (`Connection: close`) and reads
/// the whole answer.
pub async fn request(address: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body).await.expect("write body");
    read_reply(&mut stream).await.expect("an answer")
}

/// `POST` of a JSON document.
pub async fn post_json(address: SocketAddr, path: &str, body: &serde_json::Value) -> Reply {
    request(address, "POST", path, &[("Content-Type", "application/json")], body.to_string().as_bytes()).await
}

/// `GET`.
pub async fn get(address: SocketAddr, path: &str) -> Reply {
    request(address, "GET", path, &[], b"").await
}

/// Reads one answer: head, then a body by `Content-Length`, chunked, or
/// to the end of the stream. `None` when the server closed first.
pub async fn read_reply(stream: &mut TcpStream) -> Option<Reply> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end;
        }
        let mut chunk = [0u8; 4096];
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut chunk)).await.expect("answer in time").ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut rest = buffer[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let header = |name: &str| headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    let body = if let Some(length) = header("content-length").and_then(|value| value.parse::<usize>().ok()) {
        while rest.len() < length {
            let mut chunk = [0u8; 65536];
            let read = stream.read(&mut chunk).await.ok()?;
            if read == 0 {
                break;
            }
            rest.extend_from_slice(&chunk[..read]);
        }
        rest.truncate(length);
        rest
    } else {
        let _ = stream.read_to_end(&mut rest).await;
        match header("transfer-encoding").as_deref() {
            Some("chunked") => dechunk(&rest),
            _ => rest,
        }
    };
    Some(Reply { status, headers, body })
}

/// The position of `needle` in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Decodes a whole chunked body.
fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(line_end) = find(bytes, b"\r\n") {
        let size_text = String::from_utf8_lossy(&bytes[..line_end]);
        let Ok(size) = usize::from_str_radix(size_text.trim(), 16) else { break };
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        body.extend_from_slice(&bytes[start..(start + size).min(bytes.len())]);
        bytes = &bytes[(start + size + 2).min(bytes.len())..];
    }
    body
}

/// Waits until `stream` is closed by the server, failing the test after
/// [`PATIENCE`]; returns what was read before the close.
pub async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut everything = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut everything))
        .await
        .expect("the server closes the connection in time")
        .ok();
    everything
}

/// One server-sent event.
#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// The data as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap_or_else(|error| panic!("{error}: {}", self.data))
    }

    /// The payload of a delivery event.
    pub fn payload(&self) -> String {
        self.json()["payload"].as_str().unwrap_or_default().to_string()
    }
}

/// A server-sent-event stream read over a raw connection.
pub struct EventStream {
    stream: TcpStream,
    raw: Vec<u8>,
    text: String,
    /// True once the last chunk (size 0) arrived.
    ended: bool,
}

impl EventStream {
    /// Opens `path` with `headers`; returns the answer's status and, on
    /// 200, the stream.
    pub async fn open(address: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Result<EventStream, Reply> {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        let mut head =
            format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAccept: text/event-stream\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut raw = Vec::new();
        let head_end = loop {
            if let Some(end) = find(&raw, b"\r\n\r\n") {
                break end;
            }
            let mut chunk = [0u8; 4096];
            let read =
                tokio::time::timeout(PATIENCE, stream.read(&mut chunk)).await.expect("head in time").expect("read");
            assert!(read > 0, "closed before the head");
            raw.extend_from_slice(&chunk[..read]);
        };
        let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
        let status: u16 = head.split(' ').nth(1).and_then(|code| code.parse().ok()).expect("status");
        if status != 200 {
            // Not a stream: read the rest as an ordinary answer.
            let mut whole = raw.clone();
            let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut whole)).await;
            let body_start = head_end + 4;
            let body = whole[body_start..].to_vec();
            let length = head
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                })
                .and_then(|value| value.parse::<usize>().ok())
                .unwrap_or(body.len());
            return Err(Reply { status, headers: Vec::new(), body: body[..length.min(body.len())].to_vec() });
        }
        let rest = raw[head_end + 4..].to_vec();
        Ok(EventStream { stream, raw: rest, text: String::new(), ended: false })
    }

    /// The next event (keep-alive comments skipped), failing after [`PATIENCE`].
    pub async fn next(&mut self) -> SseEvent {
        tokio::time::timeout(PATIENCE, self.next_event()).await.expect("an event in time").expect("stream open")
    }

    /// The next event, or `None` when the server ended the stream.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            self.dechunk();
            while let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                if let Some(event) = parse_event(&block) {
                    return Some(event);
                }
            }
            if self.ended {
                return None;
            }
            let mut chunk = [0u8; 16384];
            let read = self.stream.read(&mut chunk).await.ok()?;
            if read == 0 {
                return None;
            }
            self.raw.extend_from_slice(&chunk[..read]);
        }
    }

    /// Moves whole chunks of the chunked body into the text buffer.
    fn dechunk(&mut self) {
        while let Some(line_end) = find(&self.raw, b"\r\n") {
            let size_text = String::from_utf8_lossy(&self.raw[..line_end]).into_owned();
            let Ok(size) = usize::from_str_radix(size_text.trim(), 16) else { return };
            if size == 0 {
                self.ended = true;
                return;
            }
            let start = line_end + 2;
            if self.raw.len() < start + size + 2 {
                return;
            }
            self.text.push_str(&String::from_utf8_lossy(&self.raw[start..start + size]));
            self.raw.drain(..start + size + 2);
        }
    }
}

fn parse_event(block: &str) -> Option<SseEvent> {
    let mut event = SseEvent::default();
    let mut has_data = false;
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("data:") {
            if has_data {
                event.data.push('\n');
            }
            event.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            has_data = true;
        } else if let Some(value) = line.strip_prefix("id:") {
            event.id = Some(value.trim().to_string());
        } else if let Some(value) = line.strip_prefix("event:") {
            event.event = Some(value.trim().to_string());
        }
    }
    has_data.then_some(event)
}

/// Creates an HTTP subscription from `spec`; returns its id.
pub async fn create_subscription(address: SocketAddr, spec: serde_json::Value) -> String {
    let reply = post_json(address, "/v1/subscriptions", &spec).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    reply.json()["id"].as_str().expect("an id").to_string()
}

/// A message on `topic` with `payload` and `properties`, published natively
/// and confirmed.
pub async fn publish_native(client: &Client, topic: &str, payload: &str, properties: &[(&str, sift_core::Value)]) {
    let mut message = sift_core::Message::new(sift_core::TopicName::new(topic).expect("topic"), payload.to_string());
    message.properties = properties.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
    client.publish_confirmed(message, Default::default()).await.expect("confirmed");
}
