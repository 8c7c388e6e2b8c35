//! The GES thesis experiment (§8.1, §8.4) on the 22 brokers of
//! `topologies/ges22.toml`, in one process: 5 GES subscribers on every
//! broker, a publisher at broker 22, matching rates of 100, 50, 25 and 10 %.
//!
//! Every subscriber must receive exactly the events its filter matches
//! (evaluated here, naively, on each event), and every link must carry
//! exactly what interest routing promises: a `FORWARD` of an event from a
//! broker to its child in broker 22's shortest-path tree when some
//! subscriber in that child's subtree matches the event, and nothing on any
//! other link or direction. The tree comes from the topology file through
//! `sift_net`, as the brokers compute it, and is checked against the hop
//! counts the running brokers report and the hop count each delivery
//! carries. Flood routing and the shortcut variant (broker 10 four server
//! hops from broker 22 instead of nine) run too. The three tests take a few
//! seconds together.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use sift_broker::config::RoutingMode;
use sift_broker::topology_file::TopologyFile;
use sift_broker::RunningBroker;
use sift_client::{Client, SubscribeOptions, Subscription};
use sift_core::workload::GesWorkload;
use sift_core::{Message, Value};
use sift_filter::TagFilter;
use sift_net::SpTree;
use sift_proto::FilterKind;

use crate::common::{client, next};
use crate::network_support::{converged, eventually, shutdown_all};

/// Ping interval of the 22 brokers (the broker's default).
const GES22_PING_MS: u64 = 1_000;

/// The seed of every workload here; any seed would do.
const SEED: u64 = 22;
/// Where the publisher is attached, as in the thesis.
const PUBLISHER_BROKER: &str = "22";
/// Clients per broker, as in the thesis.
const SUBSCRIBERS_PER_BROKER: u64 = 5;
/// Events published per matching rate: a whole number of footprint blocks
/// at every rate (1, 2, 4 and 10 footprints), so each rate is exact.
const EVENTS_PER_RATE: u64 = 200;
/// Subscription index stride between the subscribers of one broker. A
/// multiple of every footprint count, so that the 5 subscribers of a broker
/// share its footprint and a broker wants exactly the matching rate of the
/// events, as each thesis client does; indexes stay distinct.
const SUBSCRIBER_INDEX_STRIDE: u64 = 100;
/// The property that numbers the events, which no filter tests.
const EVENT_PROPERTY: &str = "event";

/// A FORWARD count per directed link, keyed by (sender, receiver).
type LinkCounts = HashMap<(String, String), u64>;

/// The 22 running brokers, with broker 22's tree as the brokers compute it.
struct Ges22 {
    brokers: Vec<RunningBroker>,
    tree: Arc<SpTree>,
    routing: RoutingMode,
}

/// One GES client: the broker it is attached to and its subscription.
struct GesSubscriber {
    broker: String,
    filter: TagFilter,
    client: Client,
    subscription: Subscription,
}

fn ges22_file() -> TopologyFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/ges22.toml");
    TopologyFile::load(&path).expect("topologies/ges22.toml is valid")
}

impl Ges22 {
    /// Starts the base topology or `variant` with short timers and waits
    /// until every broker knows all 22 and agrees with the file's tree.
    async fn start(variant: Option<&str>, routing: RoutingMode) -> Ges22 {
        let file = ges22_file();
        let brokers = file
            .start_network(variant, |config| {
                // The default ping interval: this test never waits for a
                // silent link to be noticed, and 22 brokers with 110
                // subscribers on one test thread must not be taken for
                // dead when another test holds the cores for a while.
                config.network.link_ping_interval_ms = GES22_PING_MS;
                config.network.link_reconnect_delay_min_ms = 20;
                config.network.link_reconnect_delay_max_ms = 100;
                config.network.link_handshake_timeout_ms = 2_000;
                config.network.routing = routing;
            })
            .await
            .expect("the 22 brokers start");
        let mut names = file.broker_names();
        names.sort_unstable();
        converged(&brokers.iter().collect::<Vec<_>>(), &names).await;
        let tree = file.routing_topology(variant).expect("valid links").tree(PUBLISHER_BROKER);
        let network = Ges22 { brokers, tree, routing };
        let publisher_broker = network.broker(PUBLISHER_BROKER);
        for name in names {
            assert_eq!(publisher_broker.shortest_path_hops(name), network.tree.hops(name), "links from 22 to {name}");
        }
        network
    }

    fn broker(&self, name: &str) -> &RunningBroker {
        self.brokers.iter().find(|broker| broker.network_name() == name).expect("a broker of the topology")
    }

    /// Runs one matching rate: subscribes, publishes, checks every delivery
    /// and every link's count, unsubscribes. Returns the FORWARDs sent.
    async fn run_rate(&self, rate_percent: u32) -> u64 {
        let workload = GesWorkload::new(SEED, rate_percent).expect("a valid rate");
        let mut subscribers = self.subscribe_all(&workload).await;
        self.wait_for_interest().await;
        let before = self.forwarded();
        let (events, sentinels) = publish_events(self.broker(PUBLISHER_BROKER), &workload, &subscribers).await;
        receive_exactly_the_matches(&mut subscribers, &events, &self.tree, rate_percent).await;
        // Every tree link leads to subscribers, so each carried a sentinel
        // after the events it carried: its count is complete. The sentinels'
        // own FORWARDs are taken off again.
        let sent =
            difference(&difference(&self.forwarded(), &before), &self.expected_forwards(&subscribers, &sentinels));
        let expected = self.expected_forwards(&subscribers, &events);
        assert_eq!(sent, expected, "FORWARDs per link at {rate_percent} % ({:?} routing)", self.routing);
        self.unsubscribe_all(subscribers).await;
        sent.values().sum()
    }

    /// Five clients per broker; subscriber `j` of the broker at position
    /// `p` in the file takes GES profile `p + j * SUBSCRIBER_INDEX_STRIDE`.
    async fn subscribe_all(&self, workload: &GesWorkload) -> Vec<GesSubscriber> {
        let mut subscribers = Vec::new();
        for (position, broker) in self.brokers.iter().enumerate() {
            for number in 0..SUBSCRIBERS_PER_BROKER {
                let index = position as u64 + number * SUBSCRIBER_INDEX_STRIDE;
                let (topic, _, filter_text) = workload.subscription(index);
                let name = format!("ges-{}-{number}", broker.network_name());
                let client = client(broker, &name).await;
                let options = SubscribeOptions::new(topic).filter(FilterKind::Tags, filter_text.clone());
                let subscription = client.subscribe(options).await.expect("subscribes");
                let filter = TagFilter::parse(&filter_text).expect("GES filters parse");
                subscribers.push(GesSubscriber {
                    broker: broker.network_name().to_string(),
                    filter,
                    client,
                    subscription,
                });
            }
        }
        subscribers
    }

    /// Waits until every broker holds the interest of every other: a relay
    /// decides by its own tables, so all must be complete before publishing.
    async fn wait_for_interest(&self) {
        let others = self.brokers.len() - 1;
        eventually("every broker holds every other broker's interest", || {
            self.brokers.iter().all(|broker| {
                let mut origins: Vec<String> = broker.remote_interest().into_iter().map(|entry| entry.0).collect();
                origins.dedup();
                origins.len() == others
            })
        })
        .await;
    }

    /// Closes every client and waits until no broker holds any interest, so
    /// the next rate starts from nothing.
    async fn unsubscribe_all(&self, subscribers: Vec<GesSubscriber>) {
        for subscriber in subscribers {
            subscriber.client.close().await;
        }
        eventually("every broker forgot all interest", || {
            self.brokers.iter().all(|broker| broker.remote_interest().is_empty() && broker.subscription_count() == 0)
        })
        .await;
    }

    /// FORWARDs sent so far on every link that is up, by direction.
    fn forwarded(&self) -> LinkCounts {
        let mut counts = LinkCounts::new();
        for broker in &self.brokers {
            for link in broker.links() {
                let key = (broker.network_name().to_string(), link.neighbour);
                counts.insert(key, link.traffic.messages_forwarded);
            }
        }
        counts
    }

    /// What each link must carry: from a broker to its child in the tree,
    /// the events some subscriber below the child matches (every event when
    /// flooding); nothing on any other link or direction.
    fn expected_forwards(&self, subscribers: &[GesSubscriber], events: &[Message]) -> LinkCounts {
        let mut expected = LinkCounts::new();
        for (sender, receiver) in self.forwarded().into_keys() {
            let is_tree_link = self.tree.parent(&receiver).is_some_and(|parent| **parent == *sender);
            let count = match (is_tree_link, self.routing) {
                (false, _) => 0,
                (true, RoutingMode::Flood) => events.len() as u64,
                (true, RoutingMode::Interest) => {
                    let below = self.tree.subtree(&receiver);
                    let wanted_below = |event: &Message| {
                        subscribers.iter().any(|subscriber| {
                            below.iter().any(|name| **name == *subscriber.broker) && subscriber.filter.matches(event)
                        })
                    };
                    events.iter().filter(|event| wanted_below(event)).count() as u64
                }
            };
            expected.insert((sender, receiver), count);
        }
        expected
    }

    async fn shutdown(self) {
        shutdown_all(self.brokers).await;
    }
}

/// Publishes the rate's events at broker 22, numbered by a property, then
/// one sentinel per subscriber, and returns both as published. A
/// subscriber's sentinel is a later event of the workload that its filter
/// passes, numbered [`sentinel_number`] of its position in `subscribers`.
async fn publish_events(
    broker: &RunningBroker,
    workload: &GesWorkload,
    subscribers: &[GesSubscriber],
) -> (Vec<Message>, Vec<Message>) {
    let publisher = client(broker, "ges-publisher").await;
    let mut events = Vec::new();
    for index in 0..EVENTS_PER_RATE {
        let mut event = workload.event(index);
        let number = i64::try_from(index).expect("a small index");
        event.properties.push((EVENT_PROPERTY.to_string(), Value::Int(number)));
        publisher.publish(event.clone()).await.expect("publish");
        events.push(event);
    }
    let mut sentinels = Vec::new();
    for (position, subscriber) in subscribers.iter().enumerate() {
        let mut sentinel = (EVENTS_PER_RATE..EVENTS_PER_RATE * 100)
            .map(|index| workload.event(index))
            .find(|candidate| subscriber.filter.matches(candidate))
            .expect("the workload has an event that the filter passes");
        sentinel.properties.push((EVENT_PROPERTY.to_string(), Value::Int(sentinel_number(position))));
        publisher.publish(sentinel.clone()).await.expect("publish");
        sentinels.push(sentinel);
    }
    publisher.ping().await.expect("ping");
    publisher.close().await;
    (events, sentinels)
}

/// The event number of the sentinel of the subscriber at `position`:
/// negative, unlike every event's.
fn sentinel_number(position: usize) -> i64 {
    -1 - i64::try_from(position).expect("a small position")
}

/// The number of the event `message` carries.
fn event_number(message: &Message) -> i64 {
    let value = message.properties.iter().find(|(name, _)| name == EVENT_PROPERTY).map(|(_, value)| value);
    match value {
        Some(Value::Int(number)) => *number,
        other => panic!("a GES event carries its number, not {other:?}"),
    }
}

/// Receives, for every subscriber, exactly the events its filter matches:
/// all of them, each once, and nothing else before its own sentinel. Each
/// arrives with the hop count of its broker's place in `tree`: the links
/// crossed, one less than the thesis's server hops.
///
/// Interest routing carries every event to a broker along broker 22's tree,
/// the path the subscriber's sentinel takes too, after the events and from
/// the same publisher: when the sentinel arrives, nothing more is on its way.
async fn receive_exactly_the_matches(
    subscribers: &mut [GesSubscriber],
    events: &[Message],
    tree: &SpTree,
    rate_percent: u32,
) {
    for (position, subscriber) in subscribers.iter_mut().enumerate() {
        let expected: Vec<i64> =
            events.iter().filter(|event| subscriber.filter.matches(event)).map(event_number).collect();
        let links = tree.hops(&subscriber.broker).expect("every broker is in the tree");
        let own_sentinel = sentinel_number(position);
        let mut received = Vec::with_capacity(expected.len());
        loop {
            let delivery = next(&mut subscriber.subscription).await;
            assert_eq!(u32::from(delivery.message.hop_count), links, "hop count at broker {}", subscriber.broker);
            let number = event_number(&delivery.message);
            if number == own_sentinel {
                break;
            }
            // Other subscribers' sentinels may pass this filter too; they
            // are not events of the workload.
            if number >= 0 {
                received.push(number);
            }
        }
        received.sort_unstable();
        assert_eq!(received, expected, "events at broker {} ({rate_percent} %), nothing more", subscriber.broker);
        let share = expected.len() as u64 * 100 / EVENTS_PER_RATE;
        assert_eq!(share, u64::from(rate_percent), "the workload's matching rate");
    }
}

/// `after - before` per link; a link that came up in between counts from 0.
fn difference(after: &LinkCounts, before: &LinkCounts) -> LinkCounts {
    after.iter().map(|(key, count)| (key.clone(), count - before.get(key).copied().unwrap_or(0))).collect()
}

#[tokio::test]
async fn every_subscriber_gets_exactly_its_matches_and_links_follow_interest() {
    let network = Ges22::start(None, RoutingMode::Interest).await;
    // Server hops count the brokers an event passes through: links + 1.
    let publisher_broker = network.broker(PUBLISHER_BROKER);
    let server_hops = |name: &str| publisher_broker.shortest_path_hops(name).map(|links| links + 1);
    assert_eq!((server_hops("22"), server_hops("1"), server_hops("10")), (Some(1), Some(2), Some(9)));
    let mut sent_per_rate = Vec::new();
    for rate_percent in sift_core::workload::ges::SEED_MATCHING_RATES {
        sent_per_rate.push(network.run_rate(rate_percent).await);
    }
    // Every broker wants every event at 100 %, so the 21 tree links carry
    // all of them; lower rates spare links whose subtrees want less.
    assert_eq!(sent_per_rate[0], 21 * EVENTS_PER_RATE);
    assert!(sent_per_rate.windows(2).all(|pair| pair[1] < pair[0]), "{sent_per_rate:?}");
    print_link_traffic(&sent_per_rate);
    network.shutdown().await;
}

/// The link traffic table of docs/BENCHMARKS.md ("Broker networks"): what
/// interest routing sent over all links at each rate, against the 21 tree
/// links × events that flooding sends (checked by the flood test below).
/// Shown with `--nocapture`.
fn print_link_traffic(sent_per_rate: &[u64]) {
    let flooded = 21 * EVENTS_PER_RATE;
    println!("| matching rate | FORWARDs (interest) | FORWARDs (flood) | interest / flood |");
    println!("| ---: | ---: | ---: | ---: |");
    for (rate_percent, sent) in sift_core::workload::ges::SEED_MATCHING_RATES.iter().zip(sent_per_rate) {
        let share = *sent as f64 / flooded as f64;
        println!("| {rate_percent} % | {sent} | {flooded} | {share:.2} |");
    }
}

#[tokio::test]
async fn flood_routing_sends_every_event_over_every_tree_link() {
    let network = Ges22::start(None, RoutingMode::Flood).await;
    let flooded = network.run_rate(10).await;
    assert_eq!(flooded, 21 * EVENTS_PER_RATE, "every event crosses each of the 21 tree links");
    network.shutdown().await;
    let interest = Ges22::start(None, RoutingMode::Interest).await;
    assert!(interest.run_rate(10).await < flooded, "interest routing sends fewer");
    interest.shutdown().await;
}

#[tokio::test]
async fn the_shortcut_brings_broker_10_within_four_server_hops() {
    let network = Ges22::start(Some("shortcut"), RoutingMode::Interest).await;
    // Server hops count the brokers an event passes through: links + 1.
    let publisher_broker = network.broker(PUBLISHER_BROKER);
    assert_eq!(publisher_broker.shortest_path_hops("10").map(|links| links + 1), Some(4));
    let path: Vec<String> = network.tree.path("10").iter().map(|name| name.to_string()).collect();
    assert_eq!(path, ["22", "1", "8", "10"]);
    for rate_percent in [50, 10] {
        network.run_rate(rate_percent).await;
    }
    network.shutdown().await;
}
