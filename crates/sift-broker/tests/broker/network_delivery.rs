//! Delivery across broker links beyond best-effort: reliable messages that
//! survive a failed link, queue groups spanning brokers, and await=delivered
//! reports that count remote subscribers.

use std::time::Duration;

use sift_broker::RunningBroker;
use sift_client::{AckPolicy, Client, ConfirmStatus, PublishOptions, SubscribeOptions, Subscription};

use crate::common::{
    assert_next_is, client, group_texts_until_sentinels, message, next, reliable, text, texts, SENTINEL,
};
use crate::cut_proxy::CutProxy;
use crate::network_support::{converged, eventually, link_addr, linked_broker_with, node, shutdown_all, CLUSTER};
use sift_broker::config::RoutingMode;

/// Waits until `broker` holds interest of `origin` on `topic`.
async fn sees_interest_on(broker: &RunningBroker, origin: &str, topic: &str) {
    eventually("the interest has spread", || {
        broker.remote_interest().iter().any(|(holder, filter, _)| holder == origin && filter == topic)
    })
    .await;
}

/// Publishes reliable messages `m{first}..m{last}` with confirms, in order.
async fn publish_reliable(publisher: &Client, topic: &str, numbers: std::ops::Range<usize>) {
    for index in numbers {
        let confirm = publisher
            .publish_confirmed(reliable(topic, &format!("m{index}")), PublishOptions::default())
            .await
            .expect("confirm");
        assert_eq!(confirm.status, ConfirmStatus::Accepted, "m{index} went somewhere");
    }
}

fn numbered(numbers: std::ops::Range<usize>) -> Vec<String> {
    numbers.map(|index| format!("m{index}")).collect()
}

#[tokio::test]
async fn reliable_messages_survive_a_cut_and_restored_link_in_order() {
    let first = node("r1", &[]).await;
    let proxy = CutProxy::start(link_addr(&first)).await;
    let second = node("r2", &[proxy.address()]).await;
    converged(&[&first, &second], &["r1", "r2"]).await;
    let subscriber = client(&second, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("orders")).await.expect("subscribe");
    sees_interest_on(&first, "r2", "orders").await;
    let publisher = client(&first, "pub").await;
    publish_reliable(&publisher, "orders", 0..10).await;
    assert_eq!(texts(&mut subscription, 10).await, numbered(0..10));

    // The link fails silently: what is sent now is lost on the wire, and
    // neither end knows until the pings stop.
    proxy.black_hole();
    publish_reliable(&publisher, "orders", 10..60).await;
    eventually("r1 notices the link is down", || first.links().is_empty()).await;
    proxy.restore();
    assert_eq!(texts(&mut subscription, 50).await, numbered(10..60), "re-sent in publisher order");

    sees_interest_on(&first, "r2", "orders").await;
    publish_reliable(&publisher, "orders", 60..70).await;
    assert_eq!(texts(&mut subscription, 10).await, numbered(60..70));
    // The sentinel follows the numbered messages from the same publisher
    // over the one link, restored: when it comes next, no copy of any of them
    // (re-sent or not) is still on the way.
    publisher.publish_confirmed(reliable("orders", SENTINEL), PublishOptions::default()).await.expect("confirm");
    assert_next_is(&mut subscription, SENTINEL, "nothing twice").await;
    let stats = first.stats();
    assert!(stats.forwards_rerouted >= 1, "the stranded messages were re-routed: {stats:?}");
    // r2's acknowledgement of the sentinel travels back after its delivery.
    eventually("everything was acknowledged in the end", || first.stats().forward_frames_kept == 0).await;
    shutdown_all(vec![second, first]).await;
}

#[tokio::test]
async fn reliable_messages_take_the_other_way_round_a_ring_when_a_link_fails() {
    // q1 - q2 - q3 - q4 - q1, with the q1-q2 link through the proxy.
    let first = node("q1", &[]).await;
    let proxy = CutProxy::start(link_addr(&first)).await;
    let second = node("q2", &[proxy.address()]).await;
    let third = node("q3", &[link_addr(&second)]).await;
    let fourth = node("q4", &[link_addr(&third), link_addr(&first)]).await;
    converged(&[&first, &second, &third, &fourth], &["q1", "q2", "q3", "q4"]).await;
    let subscriber = client(&second, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("orders")).await.expect("subscribe");
    sees_interest_on(&first, "q2", "orders").await;
    let publisher = client(&first, "pub").await;
    proxy.black_hole();
    publish_reliable(&publisher, "orders", 0..20).await;
    // q2 stays reachable over q4 and q3: the stranded messages go that way
    // without waiting for the link to come back.
    assert_eq!(texts(&mut subscription, 20).await, numbered(0..20));
    // The sentinel is reliable too and follows the numbered messages from
    // the same publisher: whichever way q1 sends it, round the ring or into
    // the cut link and then re-routed, it comes after every copy sent that
    // way before it. The cut link does not come back before the end.
    publisher.publish_confirmed(reliable("orders", SENTINEL), PublishOptions::default()).await.expect("confirm");
    assert_next_is(&mut subscription, SENTINEL, "nothing twice").await;
    assert!(first.stats().forwards_rerouted >= 1);
    drop(proxy);
    shutdown_all(vec![fourth, third, second, first]).await;
}

/// Subscribes `name` on `broker` to `jobs` in queue group `workers`.
async fn worker(broker: &RunningBroker, name: &str) -> (Client, Subscription) {
    let member = client(broker, name).await;
    let subscription = member.subscribe(SubscribeOptions::new("jobs").queue_group("workers")).await.expect("subscribe");
    (member, subscription)
}

#[tokio::test]
async fn queue_groups_span_brokers_one_member_overall_the_local_one_first() {
    // A hub with two leaves, each with a member; the publisher at the hub.
    let hub = node("hub", &[]).await;
    let left = node("left", &[link_addr(&hub)]).await;
    let right = node("right", &[link_addr(&hub)]).await;
    converged(&[&hub, &left, &right], &["hub", "left", "right"]).await;
    let (_left_member, mut left_jobs) = worker(&left, "left-worker").await;
    let (_right_member, mut right_jobs) = worker(&right, "right-worker").await;
    sees_interest_on(&hub, "left", "jobs").await;
    sees_interest_on(&hub, "right", "jobs").await;
    let publisher = client(&hub, "pub").await;
    for index in 0..20 {
        publisher.publish(message("jobs", &format!("j{index}"))).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    // Sentinels from the same publisher go to the group after the jobs, each
    // over the link to the member it reaches: once both members have had
    // one, no job is still on its way to either.
    let sentinel = message("jobs", SENTINEL);
    let (received, mut sentinels_forwarded) =
        group_texts_until_sentinels(&mut [&mut left_jobs, &mut right_jobs], &publisher, &sentinel).await;
    let [at_left, at_right] = [&received[0], &received[1]];
    assert!(!at_left.is_empty() && !at_right.is_empty(), "equally near members take turns");
    let mut all: Vec<String> = at_left.iter().chain(at_right).cloned().collect();
    all.sort_by_key(|name| name[1..].parse::<usize>().expect("numbered"));
    assert_eq!(all, (0..20).map(|index| format!("j{index}")).collect::<Vec<_>>(), "each job once overall");

    // A member at the publisher's broker takes everything.
    let (_hub_member, mut hub_jobs) = worker(&hub, "hub-worker").await;
    for index in 20..30 {
        publisher.publish(message("jobs", &format!("j{index}"))).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    assert_eq!(texts(&mut hub_jobs, 10).await.len(), 10);
    // With the hub's member gone, sentinels from the same publisher go to
    // the leaves over the links any copy of the jobs would have taken before
    // them: once both leaves have had one, no copy left the hub.
    hub_jobs.unsubscribe().await.expect("unsubscribe");
    let (received, more_sentinels) =
        group_texts_until_sentinels(&mut [&mut left_jobs, &mut right_jobs], &publisher, &sentinel).await;
    assert_eq!(received, [Vec::<String>::new(), Vec::new()], "no copy left the hub");
    sentinels_forwarded += more_sentinels;
    // The first twenty jobs went to the leaves, and so did every sentinel.
    assert_eq!(hub.stats().group_forwards, 20 + sentinels_forwarded as u64);
    shutdown_all(vec![right, left, hub]).await;
}

#[tokio::test]
async fn await_delivered_counts_and_names_remote_subscribers() {
    let first = node("a1", &[]).await;
    let second = node("a2", &[link_addr(&first)]).await;
    let third = node("a3", &[link_addr(&second)]).await;
    converged(&[&first, &second, &third], &["a1", "a2", "a3"]).await;
    let local = client(&first, "local").await;
    let mut local_sync = local.subscribe(SubscribeOptions::new("sync")).await.expect("subscribe");
    let far = client(&third, "far").await;
    let mut far_one = far.subscribe(SubscribeOptions::new("sync")).await.expect("subscribe");
    let mut far_two = far.subscribe(SubscribeOptions::new("sync")).await.expect("subscribe");
    sees_interest_on(&first, "a3", "sync").await;
    let publisher = client(&first, "pub").await;
    let options = PublishOptions { await_delivered: true, await_timeout: Some(Duration::from_secs(5)) };
    let publish = publisher.publish_confirmed(message("sync", "a"), options);
    let (confirm, _, _, _) = tokio::join!(publish, next(&mut local_sync), next(&mut far_one), next(&mut far_two));
    let confirm = confirm.expect("confirm");
    assert_eq!((confirm.status, confirm.matched, confirm.acked), (ConfirmStatus::Delivered, 3, 3), "{confirm:?}");

    // A subscriber in the middle that never acknowledges is named, with its broker.
    let silent = client(&second, "silent").await;
    let _silent_sync = silent.subscribe(SubscribeOptions::new("sync").ack(AckPolicy::Manual)).await.expect("subscribe");
    sees_interest_on(&first, "a2", "sync").await;
    let options = PublishOptions { await_delivered: true, await_timeout: Some(Duration::from_millis(800)) };
    let publish = publisher.publish_confirmed(message("sync", "b"), options);
    let (confirm, _, _, _) = tokio::join!(publish, next(&mut local_sync), next(&mut far_one), next(&mut far_two));
    let confirm = confirm.expect("confirm");
    assert_eq!((confirm.status, confirm.matched, confirm.acked), (ConfirmStatus::Incomplete, 4, 3), "{confirm:?}");
    assert_eq!(confirm.pending.len(), 1, "{confirm:?}");
    assert!(confirm.pending[0].starts_with("silent#") && confirm.pending[0].ends_with("@a2"), "{confirm:?}");

    // Only remote subscribers: the confirm still waits for them.
    let mut lonely = far.subscribe(SubscribeOptions::new("lonely")).await.expect("subscribe");
    sees_interest_on(&first, "a3", "lonely").await;
    let options = PublishOptions { await_delivered: true, await_timeout: Some(Duration::from_secs(5)) };
    let (confirm, _) = tokio::join!(publisher.publish_confirmed(message("lonely", "c"), options), next(&mut lonely));
    let confirm = confirm.expect("confirm");
    assert_eq!((confirm.status, confirm.matched, confirm.acked), (ConfirmStatus::Delivered, 1, 1), "{confirm:?}");
    shutdown_all(vec![third, second, first]).await;
}

#[tokio::test]
async fn a_publish_that_matches_only_remotely_is_accepted_not_unmatched() {
    let first = node("u1", &[]).await;
    let second = node("u2", &[link_addr(&first)]).await;
    converged(&[&first, &second], &["u1", "u2"]).await;
    let subscriber = client(&second, "sub").await;
    let mut remote = subscriber.subscribe(SubscribeOptions::new("far.away")).await.expect("subscribe");
    sees_interest_on(&first, "u2", "far.away").await;
    let publisher = client(&first, "pub").await;
    let confirm = publisher.publish_confirmed(message("far.away", "x"), PublishOptions::default()).await.expect("ok");
    assert_eq!(confirm.status, ConfirmStatus::Accepted);
    assert_eq!(text(&next(&mut remote).await), "x");
    let nowhere = publisher.publish_confirmed(message("nowhere", "y"), PublishOptions::default()).await.expect("ok");
    assert_eq!(nowhere.status, ConfirmStatus::NoSubscribers);
    shutdown_all(vec![second, first]).await;
}

/// A broker whose link send queues hold only 512 frames. Reads are cut to
/// 4 KiB, so that one read (under two hundred small messages) fits half the
/// queue: the wait happens between reads.
async fn narrow_node(name: &str, dials: &[std::net::SocketAddr]) -> RunningBroker {
    linked_broker_with(name, CLUSTER, None, dials, RoutingMode::Interest, |config| {
        config.network.link_send_queue_frames = 512;
        config.delivery.read_buffer_bytes = 4096;
    })
    .await
}

#[tokio::test]
async fn a_fast_publisher_is_held_back_by_a_full_link_instead_of_losing_messages() {
    let first = narrow_node("n1", &[]).await;
    let second = narrow_node("n2", &[link_addr(&first)]).await;
    let third = narrow_node("n3", &[link_addr(&second)]).await;
    converged(&[&first, &second, &third], &["n1", "n2", "n3"]).await;
    let subscriber = client(&third, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("burst")).await.expect("subscribe");
    sees_interest_on(&first, "n3", "burst").await;
    let publisher = client(&first, "pub").await;
    let count = 20_000;
    for index in 0..count {
        publisher
            .publish_payload(&sift_core::TopicName::new("burst").expect("valid"), index.to_string().as_bytes())
            .await
            .expect("publish");
    }
    publisher.ping().await.expect("ping");
    let received = texts(&mut subscription, count).await;
    assert_eq!(received, (0..count).map(|index| index.to_string()).collect::<Vec<_>>(), "all, in order");
    let stats = first.stats();
    assert_eq!(stats.forward_queue_full_dropped, 0, "{stats:?}");
    assert!(stats.link_congestion_stalls > 0, "the 512-frame queue filled and the publisher waited: {stats:?}");
    shutdown_all(vec![third, second, first]).await;
}
