//! TLS on the native door and on broker links, through real sockets: a
//! client that trusts the broker's CA publishes and receives; a plain-text
//! client is told `tls_required`; a client certificate signs its user in;
//! links come up only between brokers whose certificates the same CA
//! signed, and only under the name each certificate proves.

use std::sync::atomic::Ordering;

use sift_broker::config::RoutingMode;
use sift_broker::RunningBroker;
use sift_client::{Client, ClientError, ClientOptions, ClientTls, SubscribeOptions};
use sift_proto::ErrorCode;
use sift_tls::testing::TestCa;

use crate::common::*;
use crate::network_support::{converged, eventually, link_addr, linked_broker_with, names, shutdown_all, CLUSTER};

async fn tls_broker(ca: &TestCa, adjust: impl FnOnce(&mut sift_broker::Config)) -> RunningBroker {
    let files = ca.server_files("native");
    broker_with(|config| {
        config.tls = Some(files);
        adjust(config);
    })
    .await
}

async fn tls_client(broker: &RunningBroker, tls: ClientTls, name: &str) -> Result<Client, ClientError> {
    let options = ClientOptions { name: name.into(), reconnect: false, tls: Some(tls), ..ClientOptions::default() };
    Client::connect(broker.local_addr().to_string(), options).await
}

#[tokio::test]
async fn a_client_that_trusts_the_ca_publishes_and_receives_over_tls() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let broker = tls_broker(&ca, |_| {}).await;
    let trusting = ClientTls::load(&ca.client_files(None)).expect("client TLS");
    let subscriber = tls_client(&broker, trusting.clone(), "subscriber").await.expect("TLS subscriber");
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("secure.>")).await.expect("subscribe");
    let publisher = tls_client(&broker, trusting, "publisher").await.expect("TLS publisher");
    for index in 0..100 {
        publisher.publish(message("secure.data", &format!("m{index}"))).await.expect("publish");
    }
    let expected: Vec<String> = (0..100).map(|index| format!("m{index}")).collect();
    assert_eq!(texts(&mut subscription, 100).await, expected);
    let counters = &broker.tls().native.as_ref().expect("native TLS").counters;
    assert_eq!(counters.handshakes.load(Ordering::Relaxed), 2);
    let stats = publisher.admin(sift_proto::AdminQuery::Stats).await.expect("stats");
    assert_eq!(stats["doors"]["native"]["tls_handshakes"], 2, "the admin report shows the door's TLS: {stats}");
    publisher.close().await;
    subscriber.close().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn plain_text_and_untrusted_clients_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let other = TestCa::new(dir.path(), "other");
    let broker = tls_broker(&ca, |_| {}).await;
    let options = ClientOptions { reconnect: false, ..ClientOptions::default() };
    match Client::connect(broker.local_addr().to_string(), options).await {
        Err(ClientError::Connect { reason, .. }) => assert!(reason.contains("tls_required"), "{reason}"),
        other => panic!("a plain-text client must be told tls_required, got {other:?}"),
    }
    let stranger = ClientTls::load(&other.client_files(None)).expect("client TLS");
    match tls_client(&broker, stranger, "stranger").await {
        Err(ClientError::Connect { reason, .. }) => assert!(reason.contains("UnknownIssuer"), "{reason}"),
        other => panic!("a client trusting another CA must refuse the broker, got {other:?}"),
    }
    let counters = &broker.tls().native.as_ref().expect("native TLS").counters;
    // The broker counts when its side of the handshake ends, which may be
    // after the client gave up.
    eventually("both refusals are counted", || {
        counters.plain_text_refused.load(Ordering::Relaxed) == 1
            && counters.handshake_failures.load(Ordering::Relaxed) == 1
    })
    .await;
    broker.shutdown().await;
}

#[tokio::test]
async fn a_client_certificate_signs_its_user_in() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "main");
    let users = dir.path().join("users.toml");
    std::fs::write(&users, "[[user]]\nname = \"alice\"\npublish = [\"orders.>\"]\nsubscribe = [\"orders.>\"]\n")
        .expect("users file");
    let broker = tls_broker(&ca, |config| config.auth.users_file = Some(users)).await;
    let alice = ca.issue("alice", &["alice"]);
    let as_alice = ClientTls::load(&ca.client_files(Some(&alice))).expect("client TLS");
    let client = tls_client(&broker, as_alice, "alice").await.expect("signed in by certificate");
    let mut orders = client.subscribe(SubscribeOptions::new("orders.>")).await.expect("alice reads orders");
    let denied = client.publish_confirmed(message("payroll.run", "no"), Default::default()).await;
    match denied {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::PermissionDenied),
        other => panic!("alice may not publish on payroll, got {other:?}"),
    }
    client.publish(message("orders.new", "yes")).await.expect("alice publishes orders");
    assert_next_is(&mut orders, "yes", "alice's own order").await;
    let anonymous = ClientTls::load(&ca.client_files(None)).expect("client TLS");
    let refused = tls_client(&broker, anonymous, "nobody").await;
    let subscribed = match refused {
        Ok(client) => client.subscribe(SubscribeOptions::new("orders.>")).await.map(|_| ()),
        Err(error) => Err(error),
    };
    // Without a certificate, and with no anonymous grants, the session
    // must sign in before it acts: it is closed with auth_required.
    assert!(subscribed.is_err(), "a client without a certificate may not read orders");
    eventually("the unsigned session is closed", || broker.stats().auth_required_closes == 1).await;
    client.close().await;
    broker.shutdown().await;
}

/// A broker `name` whose links run mutual TLS with `certificate`, checked
/// against `ca`, dialling `dials`.
async fn tls_node(
    name: &str,
    (ca, certificate): (&TestCa, &sift_tls::testing::Issued),
    dials: &[std::net::SocketAddr],
) -> RunningBroker {
    let files = sift_tls::TlsFiles {
        cert: certificate.cert.clone(),
        key: certificate.key.clone(),
        client_ca: Some(ca.cert.clone()),
    };
    linked_broker_with(name, CLUSTER, None, dials, RoutingMode::Interest, |config| config.tls = Some(files)).await
}

#[tokio::test]
async fn links_come_up_only_between_brokers_the_ca_vouches_for_under_their_own_names() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new(dir.path(), "cluster");
    let rogue_ca = TestCa::new(dir.path(), "rogue");
    let first = tls_node("a", (&ca, &ca.issue("a", &["a", "127.0.0.1"])), &[]).await;
    let second = tls_node("b", (&ca, &ca.issue("b", &["b", "127.0.0.1"])), &[link_addr(&first)]).await;
    converged(&[&first, &second], &["a", "b"]).await;
    let trusting = ClientTls::load(&ca.client_files(None)).expect("client TLS");
    let reader = tls_client(&second, trusting.clone(), "reader").await.expect("reader");
    let mut subscription = reader.subscribe(SubscribeOptions::new("over.tls")).await.expect("subscribe");
    let publisher = tls_client(&first, trusting, "writer").await.expect("writer");
    eventually("a knows b's interest", || first.stats().interest_updates_received > 0).await;
    publisher.publish(message("over.tls", "across")).await.expect("publish");
    assert_next_is(&mut subscription, "across", "a message across the TLS link").await;

    let rogue = tls_node("r", (&rogue_ca, &rogue_ca.issue("r", &["r", "127.0.0.1"])), &[link_addr(&first)]).await;
    eventually("the rogue's dial fails", || !rogue.link_failures().is_empty()).await;
    assert!(rogue.link_failures()[0].error.contains("UnknownIssuer"), "{:?}", rogue.link_failures());
    // A certificate for "b" does not let a broker link in as "c".
    let impostor = tls_node("c", (&ca, &ca.issue("b-again", &["b", "127.0.0.1"])), &[link_addr(&first)]).await;
    eventually("the impostor is refused", || !impostor.link_failures().is_empty()).await;
    assert!(impostor.link_failures()[0].error.contains("certificate is for \"b\""), "{:?}", impostor.link_failures());
    assert_eq!(first.topology_brokers(), names(&["a", "b"]));
    let links_in = first.tls().links_in.as_ref().expect("link TLS");
    assert!(links_in.counters.handshake_failures.load(Ordering::Relaxed) >= 1);
    publisher.close().await;
    reader.close().await;
    shutdown_all(vec![impostor, rogue, second, first]).await;
}

#[tokio::test]
async fn a_socket_client_cannot_claim_a_certificate_it_did_not_present() {
    let users = std::env::temp_dir().join(format!("sift-users-claim-{}.toml", sift_core::system_now_ns()));
    std::fs::write(&users, "[[user]]\nname = \"alice\"\npublish = [\">\"]\n").expect("users file");
    let broker = broker_with(|config| config.auth.users_file = Some(users)).await;
    let options = ClientOptions {
        reconnect: false,
        credentials: Some(sift_client::Credentials::certified("alice")),
        ..ClientOptions::default()
    };
    match Client::connect(broker.local_addr().to_string(), options).await {
        Err(ClientError::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::AuthFailed);
            assert!(message.contains("front-ends"), "{message}");
        }
        other => panic!("a claimed certificate must be refused, got {other:?}"),
    }
    assert_eq!(broker.stats().auth_failures, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_neighbours_grant_limits_what_it_forwards_in_and_what_it_is_sent() {
    let users = std::env::temp_dir().join(format!("sift-users-links-{}.toml", sift_core::system_now_ns()));
    let grants = "[anonymous]\npublish = [\">\"]\nsubscribe = [\">\"]\n\n\
                  [[broker]]\nname = \"a\"\nforward_in = [\"public.>\"]\nforward_out = [\"public.>\"]\n";
    std::fs::write(&users, grants).expect("users file");
    let first = linked_broker_with("a", CLUSTER, None, &[], RoutingMode::Interest, |_| {}).await;
    let second = linked_broker_with("b", CLUSTER, None, &[link_addr(&first)], RoutingMode::Interest, |config| {
        config.auth.users_file = Some(users)
    })
    .await;
    converged(&[&first, &second], &["a", "b"]).await;
    let on_a = client(&first, "on-a").await;
    let on_b = client(&second, "on-b").await;
    let mut at_b = on_b.subscribe(SubscribeOptions::new(">")).await.expect("subscribe at b");
    let mut at_a = on_a.subscribe(SubscribeOptions::new(">")).await.expect("subscribe at a");
    eventually("each knows the other's interest", || {
        first.stats().interest_updates_received > 0 && second.stats().interest_updates_received > 0
    })
    .await;
    // a may send b only public topics: the secret one is dropped on arrival.
    on_a.publish(message("secret.plans", "from a")).await.expect("publish");
    on_a.publish(message("public.news", SENTINEL)).await.expect("publish");
    assert_eq!(texts_until(&mut at_b, SENTINEL).await, Vec::<String>::new(), "nothing but the sentinel from a");
    // b sends a only public topics: the secret one is never sent.
    on_b.publish(message("secret.accounts", "from b")).await.expect("publish");
    on_b.publish(message("public.weather", "sentinel from b")).await.expect("publish");
    let at_a_texts = texts_until(&mut at_a, "sentinel from b").await;
    assert!(!at_a_texts.iter().any(|text| text == "from b"), "{at_a_texts:?}");
    assert_eq!(second.stats().link_permission_drops, 2, "one dropped on arrival, one never sent");
    on_a.close().await;
    on_b.close().await;
    shutdown_all(vec![second, first]).await;
}
