//! Toxiproxy, driven from Rust: finds `toxiproxy-server`, runs it on an
//! ephemeral loopback port, creates proxies and adds latency and jitter
//! through its HTTP API, and kills it when dropped. `sift bench nb tds`
//! puts it between a broker and its subscriber; the broker tests use it
//! for delayed links and jittered deliveries.
//!
//! The server is `$SIFT_TOXIPROXY_SERVER` when set, else
//! `toxiproxy-server` on the `PATH`, else `target/tools/bin/toxiproxy-server`
//! (where `scripts/test` builds it). The API is driven with small HTTP/1.1
//! requests written here, one connection each.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::BenchError;

/// Attempts at starting the server, each on a newly chosen port: another
/// process may take a port between choosing it and the server binding it.
const START_ATTEMPTS: u32 = 5;
/// Longest wait for a started server to answer.
const START_PATIENCE: Duration = Duration::from_secs(10);
/// How often a starting server is asked whether it answers.
const START_POLL: Duration = Duration::from_millis(20);

/// The server binary, or why none was found.
pub fn find_server() -> Result<PathBuf, String> {
    match std::env::var_os("SIFT_TOXIPROXY_SERVER").map(PathBuf::from) {
        Some(path) if path.is_file() => return Ok(path),
        Some(path) => return Err(format!("SIFT_TOXIPROXY_SERVER={} is not a file", path.display())),
        None => {}
    }
    if let Some(path) = on_path("toxiproxy-server") {
        return Ok(path);
    }
    let built = PathBuf::from("target/tools/bin/toxiproxy-server");
    match built.is_file() {
        true => Ok(built),
        false => Err("toxiproxy-server is not on the PATH nor in target/tools/bin (scripts/test builds it there; \
                      or set SIFT_TOXIPROXY_SERVER)"
            .to_string()),
    }
}

/// The first file called `name` in a directory of the `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|directory| directory.join(name)).find(|candidate| candidate.is_file())
}

/// A port that was free a moment ago on loopback.
fn free_port() -> Result<u16, BenchError> {
    let listener =
        TcpListener::bind(("127.0.0.1", 0)).map_err(|error| BenchError::Usage(format!("no free port: {error}")))?;
    Ok(listener.local_addr().map_err(|error| BenchError::Usage(format!("no bound address: {error}")))?.port())
}

/// A running Toxiproxy server, killed when dropped.
pub struct Toxiproxy {
    process: Child,
    api: SocketAddr,
}

impl Toxiproxy {
    /// Starts `binary` on a free loopback port and waits until its API
    /// answers, trying other ports when the server exits at once.
    pub async fn start(binary: &Path) -> Result<Toxiproxy, BenchError> {
        for _ in 0..START_ATTEMPTS {
            let api = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            let process = Command::new(binary)
                .args(["-host", "127.0.0.1", "-port", &api.port().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|error| BenchError::Usage(format!("cannot run {}: {error}", binary.display())))?;
            let mut server = Toxiproxy { process, api };
            if server.answers().await {
                return Ok(server);
            }
        }
        Err(BenchError::Usage(format!("Toxiproxy ({}) did not start in {START_ATTEMPTS} attempts", binary.display())))
    }

    /// Waits until the API answers; false when the process exited first.
    async fn answers(&mut self) -> bool {
        let deadline = tokio::time::Instant::now() + START_PATIENCE;
        while tokio::time::Instant::now() < deadline {
            if self.process.try_wait().ok().flatten().is_some() {
                return false;
            }
            if let Ok((200, _)) = self.request("GET", "/version", "").await {
                return true;
            }
            tokio::time::sleep(START_POLL).await;
        }
        false
    }

    /// Creates proxy `name` to `upstream`, listening on an ephemeral
    /// loopback port, and returns the address it listens on.
    pub async fn proxy(&self, name: &str, upstream: SocketAddr) -> Result<SocketAddr, BenchError> {
        self.proxy_at(name, SocketAddr::from(([127, 0, 0, 1], 0)), upstream).await
    }

    /// Creates proxy `name` to `upstream` listening on `listen`, and returns
    /// the address it listens on.
    pub async fn proxy_at(
        &self,
        name: &str,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> Result<SocketAddr, BenchError> {
        let body = serde_json::json!({ "name": name, "listen": listen.to_string(), "upstream": upstream.to_string() });
        let reply = self.expect_status("POST", "/proxies", &body.to_string(), 201).await?;
        let proxy: serde_json::Value = serde_json::from_str(&reply)
            .map_err(|error| BenchError::Usage(format!("Toxiproxy answered {reply:?}: {error}")))?;
        let listen = proxy["listen"].as_str().unwrap_or_default();
        listen.parse().map_err(|error| BenchError::Usage(format!("Toxiproxy proxy address {listen:?}: {error}")))
    }

    /// Delays everything proxy `name` sends from its upstream to the side
    /// that connected to it (the `downstream` stream) by `latency_ms`.
    pub async fn add_latency(&self, name: &str, latency_ms: u64) -> Result<(), BenchError> {
        self.add_jittery_latency(name, latency_ms, 0).await
    }

    /// Delays what proxy `name` sends downstream by `latency_ms` give or
    /// take up to `jitter_ms`, drawn afresh for each chunk.
    pub async fn add_jittery_latency(&self, name: &str, latency_ms: u64, jitter_ms: u64) -> Result<(), BenchError> {
        self.add_stream_latency(name, "downstream", latency_ms, jitter_ms).await
    }

    /// Delays what proxy `name` carries on `stream` (`downstream`: from its
    /// upstream; `upstream`: towards it) by `latency_ms` ± `jitter_ms`.
    pub async fn add_stream_latency(
        &self,
        name: &str,
        stream: &str,
        latency_ms: u64,
        jitter_ms: u64,
    ) -> Result<(), BenchError> {
        let toxic = serde_json::json!({
            "name": format!("latency_{stream}"),
            "type": "latency",
            "stream": stream,
            "toxicity": 1.0,
            "attributes": { "latency": latency_ms, "jitter": jitter_ms },
        });
        self.expect_status("POST", &format!("/proxies/{name}/toxics"), &toxic.to_string(), 200).await.map(drop)
    }

    /// Sends a request and checks its status; returns the body.
    async fn expect_status(&self, method: &str, path: &str, body: &str, status: u16) -> Result<String, BenchError> {
        let (got, reply) = self
            .request(method, path, body)
            .await
            .map_err(|error| BenchError::Usage(format!("Toxiproxy {method} {path}: {error}")))?;
        match got == status {
            true => Ok(reply),
            false => Err(BenchError::Usage(format!("Toxiproxy {method} {path}: status {got}, {reply}"))),
        }
    }

    /// One HTTP/1.1 request on a new connection: (status, body).
    async fn request(&self, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
        let mut stream = TcpStream::connect(self.api).await?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            self.api,
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        parse_response(&String::from_utf8_lossy(&response))
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP/1.1 response"))
    }
}

/// The status and body of a whole response read until the server closed;
/// a chunked body is joined.
fn parse_response(response: &str) -> Option<(u16, String)> {
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|line| line.eq_ignore_ascii_case("transfer-encoding: chunked"));
    Some((status, if chunked { join_chunks(body)? } else { body.to_string() }))
}

/// The data of a chunked body: hexadecimal size, CRLF, data, CRLF, until a
/// chunk of size 0.
fn join_chunks(mut body: &str) -> Option<String> {
    let mut joined = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(joined);
        }
        joined.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
