//! Property tests of routing over random connected graphs with cycles: trees
//! agree across brokers, interest routing delivers exactly once along
//! shortest paths and nowhere else, survives a lost link, flood mode reaches
//! everyone once, and the duplicate filter drops repeats within its bound.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;
use sift_net::{BrokerName, DuplicateFilter, LinkState, Topology, DUPLICATE_WINDOW};

const BROKERS_MAX: usize = 12;
const EXTRA_LINKS_MAX: usize = 12;
const COST_MAX: u32 = 4;

/// Undirected links by (lower index, higher index) with their cost.
type Links = BTreeMap<(usize, usize), u32>;

fn name(index: usize) -> String {
    format!("b{index:02}")
}

/// A random connected graph: a random spanning tree plus random extra links
/// (which make cycles), small costs so that ties are common.
fn graph_strategy() -> impl Strategy<Value = (usize, Links)> {
    (2..=BROKERS_MAX).prop_flat_map(|count| {
        let tree = proptest::collection::vec((any::<prop::sample::Index>(), 1..=COST_MAX), count - 1);
        let extra = proptest::collection::vec((0..count, 0..count, 1..=COST_MAX), 0..=EXTRA_LINKS_MAX);
        (Just(count), tree, extra).prop_map(|(count, tree, extra)| {
            let mut links = Links::new();
            for (child, (parent, cost)) in tree.into_iter().enumerate() {
                let child = child + 1;
                links.insert((parent.index(child), child), cost);
            }
            for (left, right, cost) in extra {
                if left != right {
                    links.insert((left.min(right), left.max(right)), cost);
                }
            }
            (count, links)
        })
    })
}

fn link_state(broker: usize, sequence: u64, links: &Links) -> LinkState {
    let own = links.iter().filter_map(|(&(left, right), &cost)| match broker {
        _ if broker == left => Some((BrokerName::from(name(right)), cost)),
        _ if broker == right => Some((BrokerName::from(name(left)), cost)),
        _ => None,
    });
    LinkState { origin: name(broker).into(), sequence, links: own.collect() }
}

fn topology(count: usize, links: &Links, order: impl Iterator<Item = usize>) -> Topology {
    let mut topology = Topology::new();
    for broker in order.take(count) {
        topology.apply(link_state(broker, 1, links)).expect("valid state");
    }
    topology
}

/// All-pairs shortest distances (Floyd–Warshall), the reference for Dijkstra.
fn distances(count: usize, links: &Links) -> Vec<Vec<Option<u64>>> {
    let mut distance = vec![vec![None; count]; count];
    for (broker, row) in distance.iter_mut().enumerate() {
        row[broker] = Some(0);
    }
    for (&(left, right), &cost) in links {
        distance[left][right] = Some(u64::from(cost));
        distance[right][left] = Some(u64::from(cost));
    }
    for middle in 0..count {
        for from in 0..count {
            for to in 0..count {
                if let (Some(first), Some(second)) = (distance[from][middle], distance[middle][to]) {
                    if distance[from][to].is_none_or(|held| first + second < held) {
                        distance[from][to] = Some(first + second);
                    }
                }
            }
        }
    }
    distance
}

fn index_of(broker: &str) -> usize {
    broker[1..].parse().expect("broker names are b<index>")
}

/// What a run of forwarding did: how often each broker received the
/// message, and every hop taken.
struct Delivery {
    received: BTreeMap<String, usize>,
    hops: Vec<(String, String)>,
}

/// Delivers one message from `origin`, each broker asking `next` where to
/// send it on; a broker forwards only its first copy, as a real one would.
fn simulate(origin: &str, next: impl Fn(&str) -> Vec<BrokerName>) -> Delivery {
    let mut received = BTreeMap::from([(origin.to_string(), 1)]);
    let mut hops = Vec::new();
    let mut queue = VecDeque::from([origin.to_string()]);
    while let Some(broker) = queue.pop_front() {
        for hop in next(&broker) {
            let count = received.entry(hop.to_string()).or_insert(0);
            *count += 1;
            hops.push((broker.clone(), hop.to_string()));
            if *count == 1 {
                queue.push_back(hop.to_string());
            }
        }
    }
    Delivery { received, hops }
}

fn reachable(count: usize, links: &Links, origin: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::from([origin]);
    let mut queue = VecDeque::from([origin]);
    while let Some(broker) = queue.pop_front() {
        for &(left, right) in links.keys() {
            let other = if left == broker {
                right
            } else if right == broker {
                left
            } else {
                continue;
            };
            if other < count && seen.insert(other) {
                queue.push_back(other);
            }
        }
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (a) Brokers holding the same states compute the same trees, whatever
    /// order the states arrived in, and the distances are the shortest.
    #[test]
    fn trees_agree_and_are_shortest((count, links) in graph_strategy(), rotation in 0..BROKERS_MAX) {
        let forward = topology(count, &links, 0..count);
        let rotated = topology(count, &links, (0..count).cycle().skip(rotation % count));
        let reversed = topology(count, &links, (0..count).rev());
        let reference = distances(count, &links);
        for source in (0..count).map(name) {
            let trees = [forward.tree(&source), rotated.tree(&source), reversed.tree(&source)];
            for broker in (0..count).map(name) {
                let parents: Vec<_> = trees.iter().map(|tree| tree.parent(&broker).cloned()).collect();
                prop_assert!(parents.iter().all(|parent| *parent == parents[0]), "{source} {broker} {parents:?}");
                let hops: Vec<_> = trees.iter().map(|tree| tree.hops(&broker)).collect();
                prop_assert!(hops.iter().all(|hop| *hop == hops[0]));
                prop_assert_eq!(trees[0].children(&broker), trees[2].children(&broker));
                prop_assert_eq!(trees[0].distance(&broker), reference[index_of(&source)][index_of(&broker)]);
            }
        }
    }

    /// (b) Every interested broker receives the message exactly once, only
    /// brokers on the tree paths to them receive it, and every hop lies on a
    /// shortest path from the origin.
    #[test]
    fn interest_routing_is_exact(
        (count, links) in graph_strategy(),
        origin in any::<prop::sample::Index>(),
        interested in proptest::collection::btree_set(0..BROKERS_MAX, 0..=BROKERS_MAX),
    ) {
        let topology = topology(count, &links, 0..count);
        let origin = name(origin.index(count));
        let interested: BTreeSet<String> = interested.into_iter().filter(|&broker| broker < count).map(name).collect();
        let delivery = simulate(&origin, |broker| {
            topology.next_hops(broker, &origin, |candidate| interested.contains(candidate))
        });
        prop_assert!(delivery.received.values().all(|&times| times == 1), "{:?}", delivery.received);
        for broker in &interested {
            prop_assert_eq!(delivery.received.get(broker), Some(&1), "{} missed", broker);
        }
        let tree = topology.tree(&origin);
        let on_paths: BTreeSet<String> =
            interested.iter().flat_map(|broker| tree.path(broker)).map(|broker| broker.to_string()).collect();
        for broker in delivery.received.keys() {
            prop_assert!(*broker == origin || on_paths.contains(broker), "{} is off the paths", broker);
        }
        let reference = distances(count, &links);
        let from_origin = &reference[index_of(&origin)];
        for (from, to) in &delivery.hops {
            let (from, to) = (index_of(from), index_of(to));
            let cost = links[&(from.min(to), from.max(to))];
            prop_assert_eq!(from_origin[to], from_origin[from].map(|distance| distance + u64::from(cost)));
        }
    }

    /// (c) After a link is lost (both ends advertise the change), interest
    /// routing still reaches every interested broker the origin can reach.
    #[test]
    fn delivery_survives_a_lost_link(
        (count, links) in graph_strategy(),
        lost in any::<prop::sample::Index>(),
        origin in any::<prop::sample::Index>(),
        interested in proptest::collection::btree_set(0..BROKERS_MAX, 0..=BROKERS_MAX),
    ) {
        let mut topology = topology(count, &links, 0..count);
        let origin_index = origin.index(count);
        let origin = name(origin_index);
        // Warm the cache so that the change must invalidate it.
        let _ = topology.tree(&origin);
        let mut remaining = links.clone();
        let (left, right) = *lost.get(&links.keys().copied().collect::<Vec<_>>());
        remaining.remove(&(left, right));
        for end in [left, right] {
            prop_assert!(topology.apply(link_state(end, 2, &remaining)).expect("valid state").changed());
        }
        let interested: BTreeSet<usize> = interested.into_iter().filter(|&broker| broker < count).collect();
        let delivery = simulate(&origin, |broker| {
            topology.next_hops(broker, &origin, |candidate| interested.contains(&index_of(candidate)))
        });
        let reachable = reachable(count, &remaining, origin_index);
        prop_assert!(delivery.received.values().all(|&times| times == 1));
        for broker in &interested {
            let expected = reachable.contains(broker).then_some(&1);
            prop_assert_eq!(delivery.received.get(&name(*broker)), expected, "{}", name(*broker));
        }
    }

    /// (d) Flood mode reaches every reachable broker exactly once.
    #[test]
    fn flood_reaches_everyone_once((count, links) in graph_strategy(), origin in any::<prop::sample::Index>()) {
        let topology = topology(count, &links, 0..count);
        let origin = name(origin.index(count));
        let delivery = simulate(&origin, |broker| topology.next_hops_flood(broker, &origin));
        prop_assert_eq!(delivery.received.len(), count);
        prop_assert!(delivery.received.values().all(|&times| times == 1));
        prop_assert_eq!(delivery.hops.len(), count - 1);
    }

    /// (e) The duplicate filter accepts a sequence exactly when it is new and
    /// within the window, as a model that remembers everything says.
    #[test]
    fn duplicate_filter_matches_its_model(
        offers in proptest::collection::vec((0..3usize, 0..3 * DUPLICATE_WINDOW), 1..400),
    ) {
        let mut filter = DuplicateFilter::default();
        let mut model: BTreeMap<usize, (u64, BTreeSet<u64>)> = BTreeMap::new();
        for (origin, sequence) in offers {
            let expected = match model.get(&origin) {
                None => true,
                Some((highest, seen)) => {
                    sequence > *highest || (*highest - sequence < DUPLICATE_WINDOW && !seen.contains(&sequence))
                }
            };
            prop_assert_eq!(filter.accept(&name(origin), sequence), expected, "{} {}", origin, sequence);
            prop_assert!(!filter.accept(&name(origin), sequence), "a repeat is always dropped");
            if expected {
                let (highest, seen) = model.entry(origin).or_insert((sequence, BTreeSet::new()));
                *highest = (*highest).max(sequence);
                seen.insert(sequence);
            }
        }
    }

    /// (e) However many origins are heard, the filter remembers at most its
    /// bound.
    #[test]
    fn duplicate_filter_is_bounded(
        origins_max in 1..4usize,
        offers in proptest::collection::vec((0..10usize, 0..100u64), 1..200),
    ) {
        let mut filter = DuplicateFilter::new(origins_max);
        for (origin, sequence) in offers {
            filter.accept(&name(origin), sequence);
            prop_assert!(filter.origins() <= origins_max);
        }
    }
}

/// A 22-broker network in the shape of the GES test bed: clusters of
/// brokers meshed cheaply, cluster gateways joined in super-clusters, and the
/// super-clusters joined by dearer wide-area links in a ring (a cycle).
fn clustered_network() -> (usize, Links) {
    const CLUSTER: u32 = 1;
    const SUPER_CLUSTER: u32 = 5;
    const WIDE_AREA: u32 = 20;
    let clusters: [&[usize]; 6] =
        [&[0, 1, 2, 3], &[4, 5, 6], &[7, 8, 9, 10], &[11, 12, 13], &[14, 15, 16, 17], &[18, 19, 20, 21]];
    let mut links = Links::new();
    for cluster in clusters {
        for (position, &left) in cluster.iter().enumerate() {
            for &right in &cluster[position + 1..] {
                links.insert((left, right), CLUSTER);
            }
        }
    }
    // Super-clusters: {0, 1}, {2, 3}, {4, 5}, joined through each cluster's first broker.
    for (left, right) in [(0, 4), (7, 11), (14, 18)] {
        links.insert((left, right), SUPER_CLUSTER);
    }
    for (left, right) in [(3, 10), (10, 17), (3, 21)] {
        links.insert((left, right), WIDE_AREA);
    }
    (22, links)
}

#[test]
fn clustered_network_of_twenty_two() {
    let (count, links) = clustered_network();
    let topology = topology(count, &links, 0..count);
    for origin in (0..count).map(name) {
        let flood = simulate(&origin, |broker| topology.next_hops_flood(broker, &origin));
        assert_eq!(flood.received.len(), count);
        assert!(flood.received.values().all(|&times| times == 1));
    }
    // One subscriber in the far cluster: only the brokers on the path carry it.
    let wanted = name(20);
    let delivery = simulate(&name(5), |broker| topology.next_hops(broker, &name(5), |candidate| candidate == wanted));
    let path: Vec<String> = topology.tree(&name(5)).path(&wanted).iter().map(|broker| broker.to_string()).collect();
    assert_eq!(delivery.received.keys().cloned().collect::<BTreeSet<_>>(), path.iter().cloned().collect());
    assert_eq!(path, ["b05", "b04", "b00", "b03", "b21", "b20"]);
}
