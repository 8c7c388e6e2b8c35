//! The content index against evaluating each filter one by one, on the
//! seeded workloads of `sift_core::workload`, at 1k, 10k and 100k
//! subscriptions; and the cost of subscribing and unsubscribing at 100k.
//!
//! Run with `cargo bench -p sift-filter --bench index`. Each matching
//! figure is per message (criterion's "elements"); the GES figures are
//! bound by their output, so `matches_per_message` is printed beside them
//! to turn messages/s into matches/s.

use std::collections::HashMap;
use std::hint::black_box;

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sift_core::workload::{GesWorkload, JbiWorkload, SelectorsWorkload, Workload};
use sift_core::Message;
use sift_filter::{ContentFilter, ContentIndex, FilterLanguage, IndexScratch, XmlDocument};

/// Subscription counts measured.
const SIZES: [u64; 3] = [1_000, 10_000, 100_000];
/// Distinct messages cycled through in each run.
const MESSAGES: u64 = 512;
/// The seed of every workload, so that runs compare.
const SEED: u64 = 7;

/// A workload loaded both ways: into the index, and as a list of filters
/// per partition for the one-by-one evaluation.
struct Loaded {
    index: ContentIndex<u64>,
    filters: HashMap<u32, Vec<ContentFilter>>,
    partition_of_topic: HashMap<String, u32>,
    messages: Vec<Message>,
}

impl Loaded {
    fn new(workload: &dyn Workload, subscriptions: u64) -> Loaded {
        let mut loaded = Loaded {
            index: ContentIndex::new(),
            filters: HashMap::new(),
            partition_of_topic: HashMap::new(),
            messages: (0..MESSAGES).map(|index| workload.message(index)).collect(),
        };
        for key in 0..subscriptions {
            let (topic_filter, language, text) = workload.subscription(key);
            let language: FilterLanguage = language.parse().expect("a known language");
            let filter = ContentFilter::parse(language, &text).expect("workload filters parse");
            let next = loaded.partition_of_topic.len() as u32;
            // The workloads subscribe to literal topics, so a partition is
            // found from a message's topic by equality.
            let partition = *loaded.partition_of_topic.entry(topic_filter).or_insert(next);
            loaded.index.insert(partition, key, &filter);
            loaded.filters.entry(partition).or_default().push(filter);
        }
        loaded
    }

    fn partitions(&self, message: &Message) -> Vec<u32> {
        self.partition_of_topic.get(message.topic.as_str()).map(|partition| vec![*partition]).unwrap_or_default()
    }

    /// Matches per message, averaged over the messages.
    fn matches_per_message(&self) -> f64 {
        let mut scratch = IndexScratch::new();
        let mut out = Vec::new();
        for message in &self.messages {
            self.index.matching(message, &self.partitions(message), &mut scratch, &mut out);
        }
        out.len() as f64 / self.messages.len() as f64
    }
}

/// One by one, as a selector engine without an index does it: every filter
/// of the message's partitions is evaluated. The metadata document is
/// parsed once per message, not once per filter, to be fair to it.
fn one_by_one(loaded: &Loaded, message: &Message, partitions: &[u32]) -> usize {
    let document = message.metadata.as_ref().and_then(|metadata| XmlDocument::parse(metadata).ok());
    let mut matched = 0;
    for partition in partitions {
        for filter in loaded.filters.get(partition).map(Vec::as_slice).unwrap_or_default() {
            let passes = match (filter, &document) {
                (ContentFilter::Xpath(xpath), Some(document)) => xpath.matches_document(document),
                (ContentFilter::Xpath(_), None) => false,
                (other, _) => other.matches(message),
            };
            matched += usize::from(passes);
        }
    }
    matched
}

fn bench_workload(criterion: &mut Criterion, name: &str, workload: &dyn Workload, naive_max: u64) {
    let mut group = criterion.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    for size in SIZES {
        let loaded = Loaded::new(workload, size);
        let partitions: Vec<Vec<u32>> = loaded.messages.iter().map(|message| loaded.partitions(message)).collect();
        println!("{name}/{size}: matches_per_message = {:.2}", loaded.matches_per_message());
        let mut scratch = IndexScratch::new();
        let mut out = Vec::new();
        let mut next = 0usize;
        group.bench_function(BenchmarkId::new("index", size), |bencher| {
            bencher.iter(|| {
                next = (next + 1) % loaded.messages.len();
                out.clear();
                loaded.index.matching(&loaded.messages[next], &partitions[next], &mut scratch, &mut out);
                black_box(out.len())
            })
        });
        if size <= naive_max {
            group.bench_function(BenchmarkId::new("one_by_one", size), |bencher| {
                bencher.iter(|| {
                    next = (next + 1) % loaded.messages.len();
                    black_box(one_by_one(&loaded, &loaded.messages[next], &partitions[next]))
                })
            });
        }
    }
    group.finish();
}

/// Subscribing and unsubscribing one filter in an index of 100k.
fn bench_churn(criterion: &mut Criterion, name: &str, workload: &dyn Workload) {
    let size = 100_000;
    let mut loaded = Loaded::new(workload, size);
    let (topic_filter, language, text) = workload.subscription(size + 1);
    let language: FilterLanguage = language.parse().expect("a known language");
    let filter = ContentFilter::parse(language, &text).expect("workload filters parse");
    let partition = loaded.partition_of_topic.get(&topic_filter).copied().unwrap_or(0);
    let mut group = criterion.benchmark_group(format!("{name}_churn_at_100k"));
    let key = u64::MAX;
    group.bench_function("subscribe_then_unsubscribe", |bencher| {
        bencher.iter(|| {
            loaded.index.insert(partition, key, &filter);
            black_box(loaded.index.remove(partition, &key))
        })
    });
    group.finish();
}

fn matching(criterion: &mut Criterion) {
    let selectors = SelectorsWorkload::new(SEED).expect("workload");
    bench_workload(criterion, "selectors", &selectors, 100_000);
    let ges = GesWorkload::new(SEED, 10).expect("workload");
    bench_workload(criterion, "ges_10pct", &ges, 100_000);
    let jbi = JbiWorkload::new(SEED).expect("workload");
    // One by one at 100k XPath filters takes seconds per message; 10k shows the ratio.
    bench_workload(criterion, "jbi_xpath", &jbi, 10_000);
}

fn churn(criterion: &mut Criterion) {
    bench_churn(criterion, "selectors", &SelectorsWorkload::new(SEED).expect("workload"));
    bench_churn(criterion, "ges_10pct", &GesWorkload::new(SEED, 10).expect("workload"));
    bench_churn(criterion, "jbi_xpath", &JbiWorkload::new(SEED).expect("workload"));
}

criterion_group! { name = benches; config = support::config(); targets = matching, churn }
criterion_main!(benches);
