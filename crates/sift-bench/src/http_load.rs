//! A minimal HTTP/1.1 load client for the HTTP scenarios: kept-alive
//! connections (one request in flight each, as a client without
//! pipelining sends them) and an event-stream reader that counts events.
//!
//! Built on hyper's client connection, the same HTTP implementation the
//! broker serves with, so that what is measured is the broker and not a
//! slow client.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::BenchError;

/// One kept-alive HTTP/1.1 connection.
pub struct HttpConnection {
    address: SocketAddr,
    sender: SendRequest<Full<Bytes>>,
}

fn failed(what: &str, error: impl std::fmt::Display) -> BenchError {
    BenchError::Usage(format!("HTTP {what}: {error}"))
}

impl HttpConnection {
    /// Connects to `address`.
    pub async fn open(address: SocketAddr) -> Result<HttpConnection, BenchError> {
        HttpConnection::open_with(address, None).await
    }

    /// Connects to `address`, over TLS when `tls` is given (checking the
    /// server's certificate against `address`'s IP).
    pub async fn open_with(
        address: SocketAddr,
        tls: Option<&sift_client::ClientTls>,
    ) -> Result<HttpConnection, BenchError> {
        let stream = TcpStream::connect(address).await.map_err(|error| failed("connect", error))?;
        let _ = stream.set_nodelay(true);
        let stream = match tls {
            Some(tls) => tls.connect(&address.ip().to_string(), stream).await.map_err(|error| failed("TLS", error))?,
            None => sift_tls::ClientStream::Plain(stream),
        };
        let (sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| failed("handshake", error))?;
        tokio::spawn(async move {
            let _ = driver.await;
        });
        Ok(HttpConnection { address, sender })
    }

    /// Sends one request and reads the whole answer; its status and body.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), BenchError> {
        self.sender.ready().await.map_err(|error| failed("connection", error))?;
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.address.to_string())
            .header("content-type", content_type)
            .body(Full::new(body))
            .map_err(|error| failed("request", error))?;
        let response = self.sender.send_request(request).await.map_err(|error| failed("request", error))?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|error| failed("answer", error))?.to_bytes();
        Ok((status, body))
    }

    /// `POST` of a JSON document; its status and the answer as JSON.
    pub async fn post_json(
        &mut self,
        path: &str,
        document: &serde_json::Value,
    ) -> Result<(StatusCode, serde_json::Value), BenchError> {
        let (status, body) = self.send("POST", path, "application/json", Bytes::from(document.to_string())).await?;
        let answer = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        Ok((status, answer))
    }
}

/// Reads an event stream (`GET path`) and calls `on_event` with the number
/// of events so far after each chunk, until it returns false or the stream
/// ends; returns the events read.
pub async fn read_events(
    address: SocketAddr,
    path: &str,
    mut on_event: impl FnMut(u64) -> bool,
) -> Result<u64, BenchError> {
    let stream = TcpStream::connect(address).await.map_err(|error| failed("connect", error))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, driver) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
        .await
        .map_err(|error| failed("handshake", error))?;
    tokio::spawn(async move {
        let _ = driver.await;
    });
    let request = Request::get(path)
        .header("host", address.to_string())
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .map_err(|error| failed("request", error))?;
    let response = sender.send_request(request).await.map_err(|error| failed("events", error))?;
    if response.status() != StatusCode::OK {
        return Err(failed("events", response.status()));
    }
    let mut body = response.into_body();
    let mut events = 0u64;
    // An event ends with a blank line; one may be split across chunks.
    let mut previous_was_newline = false;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| failed("events", error))?;
        let Some(data) = frame.data_ref() else { continue };
        for &byte in data.iter() {
            if byte == b'\n' {
                if previous_was_newline {
                    events += 1;
                }
                previous_was_newline = true;
            } else {
                previous_was_newline = false;
            }
        }
        if !on_event(events) {
            break;
        }
    }
    Ok(events)
}
