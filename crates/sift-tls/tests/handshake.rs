//! The TLS acceptor and connector over real loopback sockets: a trusted
//! handshake carries bytes both ways; plain text, an untrusted CA, a wrong
//! host name, an expired certificate and a missing client certificate on a
//! mutual-TLS port are each refused; a reload changes the certificate the
//! next handshake sees and leaves open connections alone.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sift_tls::testing::TestCa;
use sift_tls::{AcceptError, ClientTls, DoorStream, ServerTls};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Accepts one connection with `tls`, echoes one line-less chunk back,
/// and reports the outcome of the handshake.
async fn serve_once(
    listener: &TcpListener,
    tls: Arc<ServerTls>,
) -> tokio::task::JoinHandle<Result<Option<String>, AcceptError>> {
    let (stream, _) = listener.accept().await.expect("accept");
    tokio::spawn(async move {
        let mut door: DoorStream = tls.accept(stream, b"ERROR this port speaks TLS\n").await?;
        let identity = door.peer_identity();
        let mut buf = [0_u8; 5];
        if door.read_exact(&mut buf).await.is_ok() {
            let _ = door.write_all(&buf).await;
            let _ = door.flush().await;
        }
        Ok(identity)
    })
}

async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.expect("bind")
}

#[tokio::test]
async fn a_trusted_handshake_carries_bytes_and_names_the_client() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let server = ServerTls::load(ca.server_files("server")).expect("server TLS");
    let alice = ca.issue("alice", &["alice"]);
    let client = ClientTls::load(&ca.client_files(Some(&alice))).expect("client TLS");
    let listener = listener().await;
    let address = listener.local_addr().expect("address");
    let connecting = tokio::spawn(async move {
        let tcp = TcpStream::connect(address).await.expect("connect");
        let mut stream = client.connect("localhost", tcp).await.expect("handshake");
        stream.write_all(b"hello").await.expect("write");
        let mut echoed = [0_u8; 5];
        stream.read_exact(&mut echoed).await.expect("read");
        echoed
    });
    let served = serve_once(&listener, server.clone()).await;
    assert_eq!(&connecting.await.expect("client"), b"hello");
    assert_eq!(served.await.expect("server").expect("accepted").as_deref(), Some("alice"));
    assert_eq!(server.counters.handshakes.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn plain_text_on_the_tls_port_is_told_so() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let server = ServerTls::load(ca.server_files("server")).expect("server TLS");
    let listener = listener().await;
    let address = listener.local_addr().expect("address");
    let client = tokio::spawn(async move {
        let mut tcp = TcpStream::connect(address).await.expect("connect");
        tcp.write_all(b"CONNECT\n\n\0").await.expect("write");
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.expect("read");
        answer
    });
    let served = serve_once(&listener, server.clone()).await;
    assert!(matches!(served.await.expect("server"), Err(AcceptError::PlainText)));
    assert_eq!(client.await.expect("client"), "ERROR this port speaks TLS\n");
    assert_eq!(server.counters.plain_text_refused.load(Ordering::Relaxed), 1);
}

/// Connects with `client` to a fresh server with `server`, checking the
/// broker as `host`; returns the client's error text.
async fn refused(server: Arc<ServerTls>, client: ClientTls, host: &'static str) -> String {
    let listener = listener().await;
    let address = listener.local_addr().expect("address");
    let connecting = tokio::spawn(async move {
        let tcp = TcpStream::connect(address).await.expect("connect");
        match client.connect(host, tcp).await {
            Ok(mut stream) => {
                // TLS 1.3 reports a refused client certificate on the first read.
                let _ = stream.write_all(b"hello").await;
                let mut buf = [0_u8; 5];
                match stream.read_exact(&mut buf).await {
                    Ok(_) => "accepted".to_string(),
                    Err(error) => error.to_string(),
                }
            }
            Err(error) => error.to_string(),
        }
    });
    let served = serve_once(&listener, server.clone()).await;
    let _ = served.await;
    connecting.await.expect("client")
}

#[tokio::test]
async fn an_untrusted_ca_a_wrong_name_and_an_expired_certificate_are_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let other = TestCa::new(dir.path(), "other");
    let server = ServerTls::load(ca.server_files("server")).expect("server TLS");
    let stranger = ClientTls::load(&other.client_files(None)).expect("client TLS");
    assert!(refused(server.clone(), stranger, "localhost").await.contains("UnknownIssuer"));
    let trusting = ClientTls::load(&ca.client_files(None)).expect("client TLS");
    let answer = refused(server.clone(), trusting.clone(), "broker.example").await;
    assert!(answer.contains("not valid for name"), "{answer}");
    let expired = ca.issue_with("expired", &["localhost"], |params| {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let expired_files = sift_tls::TlsFiles { cert: expired.cert, key: expired.key, client_ca: None };
    let expired_server = ServerTls::load(expired_files).expect("server TLS");
    let answer = refused(expired_server, trusting, "localhost").await;
    assert!(answer.contains("expired"), "{answer}");
    assert_eq!(server.counters.handshake_failures.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn a_mutual_tls_port_refuses_a_client_without_a_trusted_certificate() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let other = TestCa::new(dir.path(), "other");
    let server = ServerTls::load_mutual(ca.server_files("server")).expect("server TLS");
    let anonymous = ClientTls::load(&ca.client_files(None)).expect("client TLS");
    let answer = refused(server.clone(), anonymous, "localhost").await;
    assert!(answer.contains("CertificateRequired"), "{answer}");
    let forged = other.issue("broker-b", &["broker-b"]);
    let mut files = ca.client_files(None);
    files.cert = Some(forged.cert);
    files.key = Some(forged.key);
    let forger = ClientTls::load(&files).expect("client TLS");
    let answer = refused(server.clone(), forger, "localhost").await;
    assert!(answer.contains("UnknownCA") || answer.contains("BadCertificate"), "{answer}");
    let trusted = ClientTls::load(&ca.client_files(Some(&ca.issue("broker-c", &["broker-c"])))).expect("client TLS");
    assert_eq!(refused(server.clone(), trusted, "localhost").await, "accepted");
}

#[tokio::test]
async fn a_reload_changes_the_next_handshake_and_keeps_bad_files_out() {
    let dir = tempfile::tempdir().expect("dir");
    let first = TestCa::new(dir.path(), "first");
    let second = TestCa::new(dir.path(), "second");
    let files = first.server_files("server");
    let server = ServerTls::load(files.clone()).expect("server TLS");
    let trusts_second = ClientTls::load(&second.client_files(None)).expect("client TLS");
    assert!(refused(server.clone(), trusts_second.clone(), "localhost").await.contains("UnknownIssuer"));
    std::fs::write(&files.cert, "not a certificate").expect("spoil");
    assert!(server.reload().is_err());
    let renewed = second.issue("renewed", &["localhost"]);
    std::fs::copy(&renewed.cert, &files.cert).expect("copy certificate");
    std::fs::copy(&renewed.key, &files.key).expect("copy key");
    server.reload().expect("reload");
    assert_eq!(refused(server.clone(), trusts_second, "localhost").await, "accepted");
    assert_eq!(server.counters.reloads.load(Ordering::Relaxed), 1);
    assert_eq!(server.counters.reload_failures.load(Ordering::Relaxed), 1);
}

#[test]
fn bad_files_are_named_in_the_error() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let mut files = ca.server_files("server");
    files.key = dir.path().join("missing.pem");
    let error = ServerTls::load(files.clone()).expect_err("missing key").to_string();
    assert!(error.contains("missing.pem") && error.contains("private key"), "{error}");
    files.key = files.cert.clone();
    let error = ServerTls::load(files).expect_err("no key in a certificate file").to_string();
    assert!(error.contains("holds no PRIVATE KEY"), "{error}");
}
