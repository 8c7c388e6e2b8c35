//! What a user's content restriction costs the broker: 10k users, each
//! subscribed to `orders.new` with its own filter (`amount > N`) and each
//! restricted by its grant to one region (`region = 'Rk'`, a hundred
//! regions). The broker files each subscription as its own filter ANDed
//! with the restriction, one conjunction of the index (`restricted`);
//! the yardstick is the same users with the restriction filed as one more
//! subscription of its own (`separate`, 20k filters), and the floor is
//! the users without restrictions (`unrestricted`).
//!
//! Run with `cargo bench -p sift-filter --bench restrictions`; figures are
//! per message.

use std::hint::black_box;

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sift_core::{Message, TopicName, Value};
use sift_filter::{ContentFilter, ContentIndex, FilterLanguage, IndexScratch};

/// Users, each with one subscription.
const USERS: u64 = 10_000;
/// Regions the users are restricted to.
const REGIONS: u64 = 100;
/// Distinct messages cycled through.
const MESSAGES: u64 = 512;

fn sql(text: &str) -> ContentFilter {
    ContentFilter::parse(FilterLanguage::Sql, text).expect("the bench's filters parse")
}

fn own_filter(user: u64) -> ContentFilter {
    sql(&format!("amount > {}", user % 1_000))
}

fn restriction(user: u64) -> ContentFilter {
    sql(&format!("region = 'R{}'", user % REGIONS))
}

fn message(index: u64) -> Message {
    let mut message = Message::new(TopicName::new("orders.new").expect("topic"), "order");
    message.properties = vec![
        ("region".into(), Value::Str(format!("R{}", (index * 7) % REGIONS).into())),
        ("amount".into(), Value::Int(((index * 37) % 1_000) as i64)),
    ];
    message
}

/// The three ways of filing the users' subscriptions.
fn indexes() -> [(&'static str, ContentIndex<u64>); 3] {
    let mut unrestricted = ContentIndex::new();
    let mut restricted = ContentIndex::new();
    let mut separate = ContentIndex::new();
    for user in 0..USERS {
        unrestricted.insert(0, user, &own_filter(user));
        restricted.insert(0, user, &ContentFilter::and(own_filter(user), restriction(user)));
        separate.insert(0, 2 * user, &own_filter(user));
        separate.insert(0, 2 * user + 1, &restriction(user));
    }
    [("unrestricted", unrestricted), ("restricted", restricted), ("separate", separate)]
}

fn restrictions(criterion: &mut Criterion) {
    let messages: Vec<Message> = (0..MESSAGES).map(message).collect();
    let mut group = criterion.benchmark_group("restrictions");
    group.throughput(Throughput::Elements(1));
    let mut scratch = IndexScratch::new();
    let mut out = Vec::new();
    for (name, index) in indexes() {
        let matched: usize = messages
            .iter()
            .map(|message| {
                out.clear();
                index.matching(message, &[0], &mut scratch, &mut out);
                out.len()
            })
            .sum();
        println!("restrictions/{name}: matches_per_message = {:.1}", matched as f64 / messages.len() as f64);
        let mut next = 0usize;
        group.bench_function(BenchmarkId::new(name, USERS), |bencher| {
            bencher.iter(|| {
                next = (next + 1) % messages.len();
                out.clear();
                index.matching(&messages[next], &[0], &mut scratch, &mut out);
                black_box(out.len())
            })
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = support::config(); targets = restrictions }
criterion_main!(benches);
