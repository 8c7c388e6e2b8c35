//! Interest propagation: subscriptions at one broker become visible at every
//! other broker of the network, summarised, and resynchronised after a link
//! is cut and restored.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sift_broker::RunningBroker;
use sift_client::SubscribeOptions;
use sift_proto::FilterKind;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use crate::common::client;
use crate::network_support::{converged, eventually, link_addr, node, shutdown_all};

/// `broker`'s remote interest as (broker, topic filter) pairs.
fn remote_topics(broker: &RunningBroker) -> Vec<(String, String)> {
    broker.remote_interest().into_iter().map(|(origin, topic, _)| (origin, topic)).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(origin, topic)| (origin.to_string(), topic.to_string())).collect()
}

/// `broker`'s advertised topic filters.
fn advertised_topics(broker: &RunningBroker) -> Vec<String> {
    broker.advertised_interest().into_iter().map(|(topic, _)| topic).collect()
}

#[tokio::test]
async fn a_subscription_crosses_a_chain_of_three_and_leaves_with_its_unsubscribe() {
    let first = node("a", &[]).await;
    let second = node("b", &[link_addr(&first)]).await;
    let third = node("c", &[link_addr(&second)]).await;
    converged(&[&first, &second, &third], &["a", "b", "c"]).await;

    let subscriber = client(&third, "far").await;
    let subscription = subscriber.subscribe(SubscribeOptions::new("orders.>")).await.expect("subscribes");
    eventually("the far end sees c's interest", || remote_topics(&first) == pairs(&[("c", "orders.>")])).await;
    assert_eq!(remote_topics(&second), pairs(&[("c", "orders.>")]));
    assert_eq!(first.stats().interest_entries, 1);
    assert!(third.stats().interest_updates_sent >= 1);
    assert!(first.stats().interest_updates_received >= 1);

    subscription.unsubscribe().await.expect("unsubscribes");
    eventually("the interest is gone at the far end", || first.remote_interest().is_empty()).await;
    assert!(second.remote_interest().is_empty());
    assert_eq!(first.stats().interest_entries, 0);
    subscriber.close().await;
    shutdown_all(vec![third, second, first]).await;
}

#[tokio::test]
async fn covered_subscriptions_are_advertised_only_when_uncovered() {
    let origin = node("a", &[]).await;
    let neighbour = node("b", &[link_addr(&origin)]).await;
    converged(&[&origin, &neighbour], &["a", "b"]).await;
    let subscriber = client(&origin, "covering").await;

    let wide = subscriber.subscribe(SubscribeOptions::new("a.>")).await.expect("subscribes");
    let _narrow = subscriber.subscribe(SubscribeOptions::new("a.b")).await.expect("subscribes");
    // SUBSCRIBED and the unsubscribe return before the broker updates its
    // interest, so every check waits.
    eventually("a advertises a.> alone", || advertised_topics(&origin) == ["a.>"]).await;
    eventually("the neighbour sees a.>", || remote_topics(&neighbour) == pairs(&[("a", "a.>")])).await;
    wide.unsubscribe().await.expect("unsubscribes");
    eventually("a advertises a.b once a.> is gone", || advertised_topics(&origin) == ["a.b"]).await;
    eventually("the neighbour sees only a.b", || remote_topics(&neighbour) == pairs(&[("a", "a.b")])).await;

    let cheap = SubscribeOptions::new("quotes").filter(FilterKind::Tags, "price > 100");
    let cheap = subscriber.subscribe(cheap).await.expect("subscribes");
    let dear = SubscribeOptions::new("quotes").filter(FilterKind::Tags, "price > 200");
    let _dear = subscriber.subscribe(dear).await.expect("subscribes");
    let quotes = |broker: &RunningBroker| -> Vec<String> {
        let entries = broker.remote_interest().into_iter().filter(|(_, topic, _)| topic == "quotes");
        entries.filter_map(|(_, _, content)| content.map(|(language, text)| format!("{language}:{text}"))).collect()
    };
    eventually("only price > 100 is advertised", || {
        let seen = quotes(&neighbour);
        seen.len() == 1 && seen[0].starts_with("tags:") && seen[0].contains("100")
    })
    .await;
    cheap.unsubscribe().await.expect("unsubscribes");
    eventually("price > 200 replaces it", || {
        let seen = quotes(&neighbour);
        seen.len() == 1 && seen[0].contains("200")
    })
    .await;
    eventually("a advertises a.b and one quotes entry", || advertised_topics(&origin) == ["a.b", "quotes"]).await;
    subscriber.close().await;
    shutdown_all(vec![neighbour, origin]).await;
}

/// A TCP relay that can be cut (its connections dropped, new ones refused)
/// and restored, to break a link without stopping either broker.
struct Relay {
    address: SocketAddr,
    open: Arc<AtomicBool>,
    pipes: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl Relay {
    async fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("relay binds");
        let address = listener.local_addr().expect("relay address");
        let open = Arc::new(AtomicBool::new(true));
        let pipes: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (accept_open, accept_pipes) = (open.clone(), pipes.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !accept_open.load(Ordering::SeqCst) {
                    continue;
                }
                let pipe = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                accept_pipes.lock().unwrap_or_else(PoisonError::into_inner).push(pipe.abort_handle());
            }
        })
        .abort_handle();
        Relay { address, open, pipes, accept }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for pipe in self.pipes.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
            pipe.abort();
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

#[tokio::test]
async fn a_cut_link_resyncs_interest_added_while_it_was_down() {
    let first = node("a", &[]).await;
    let relay = Relay::start(link_addr(&first)).await;
    let second = node("b", &[relay.address]).await;
    converged(&[&first, &second], &["a", "b"]).await;
    let subscriber = client(&second, "during-cut").await;
    let before = subscriber.subscribe(SubscribeOptions::new("before")).await.expect("subscribes");
    eventually("a sees b's first interest", || remote_topics(&first) == pairs(&[("b", "before")])).await;

    relay.cut();
    converged(&[&first], &["a"]).await;
    converged(&[&second], &["b"]).await;
    assert!(first.remote_interest().is_empty(), "an unreachable broker's interest is dropped");
    before.unsubscribe().await.expect("unsubscribes");
    let _during = subscriber.subscribe(SubscribeOptions::new("during")).await.expect("subscribes");
    eventually("b advertises only its new interest", || advertised_topics(&second) == ["during"]).await;

    relay.restore();
    converged(&[&first, &second], &["a", "b"]).await;
    eventually("the resync brings b's new interest", || remote_topics(&first) == pairs(&[("b", "during")])).await;
    assert!(first.stats().interest_resyncs_received >= 2);
    subscriber.close().await;
    drop(relay);
    shutdown_all(vec![second, first]).await;
}

#[tokio::test]
async fn identical_subscriptions_are_advertised_once_until_both_are_gone() {
    let origin = node("a", &[]).await;
    let neighbour = node("b", &[link_addr(&origin)]).await;
    converged(&[&origin, &neighbour], &["a", "b"]).await;
    let one = client(&origin, "one").await;
    let two = client(&origin, "two").await;
    let first = one.subscribe(SubscribeOptions::new("shared.*")).await.expect("subscribes");
    let _second = two.subscribe(SubscribeOptions::new("shared.*")).await.expect("subscribes");
    eventually("the neighbour sees one entry", || remote_topics(&neighbour) == pairs(&[("a", "shared.*")])).await;
    eventually("a advertises one entry", || origin.advertised_interest().len() == 1).await;

    first.unsubscribe().await.expect("unsubscribes");
    // A sentinel subscription made after the unsubscribe: a sends its
    // interest changes over the one link in order, so once the neighbour
    // sees the sentinel, it has seen whatever the unsubscribe changed.
    let sentinel = one.subscribe(SubscribeOptions::new("sentinel")).await.expect("subscribes");
    let with_sentinel = pairs(&[("a", "sentinel"), ("a", "shared.*")]);
    eventually("the neighbour sees the sentinel", || remote_topics(&neighbour).contains(&with_sentinel[0])).await;
    assert_eq!(remote_topics(&neighbour), with_sentinel, "the other subscription remains");
    sentinel.unsubscribe().await.expect("unsubscribes");
    eventually("the sentinel's interest goes", || remote_topics(&neighbour) == pairs(&[("a", "shared.*")])).await;
    two.close().await;
    eventually("the entry goes with the last subscription", || neighbour.remote_interest().is_empty()).await;
    eventually("a advertises nothing", || origin.advertised_interest().is_empty()).await;
    one.close().await;
    shutdown_all(vec![neighbour, origin]).await;
}
