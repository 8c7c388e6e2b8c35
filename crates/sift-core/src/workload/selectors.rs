//! The JMS selector workload: `sym = 'S0042' AND price > 517` over quotes.
//!
//! Subscriptions are JMS message selectors (the `sql` language), the form
//! the FJM2 thesis's JMS provider and NaradaBrokering's SQL subscriptions
//! take; each wants one symbol's quotes above one price. Quotes carry a
//! symbol and a price as message properties.
//!
//! How the numbers give a match rate of about 0.05 %:
//!
//! - a subscription's symbol is uniform over the [`SYMBOL_COUNT`] (1,000)
//!   symbols `S0000`-`S0999`, and its threshold `N` uniform over the
//!   integers `0..PRICE_LIMIT` (0-999);
//! - a quote's symbol is uniform over the same symbols; its price is, with
//!   even odds, an integer uniform over `0..PRICE_LIMIT` or a decimal with
//!   cents, `c / 100` for `c` uniform over `0..PRICE_LIMIT·100`, so the
//!   workload exercises integer and float comparison alike;
//! - a quote matches a subscription when the symbols agree (probability
//!   1/1000) and its price exceeds `N` (probability 0.4995 for integer
//!   prices and 0.50049 for decimal ones, about one half).
//!
//! A quote therefore matches each subscription with probability 0.049999 %,
//! whatever the number of subscriptions: about 5 of 10,000.

use crate::message::{Message, Value};
use crate::topic::TopicName;
use crate::workload::seed::{item_rng, Stream};
use crate::workload::{text, Subscription, Workload, WorkloadError, LANGUAGE_SQL};

/// The topic quotes are published on, and every subscription's topic filter.
pub const QUOTES_TOPIC: &str = "market.quotes";

/// How many symbols there are.
pub const SYMBOL_COUNT: u32 = 1000;

/// Prices and thresholds are below this.
pub const PRICE_LIMIT: i64 = 1000;

/// The property holding a quote's symbol (a string).
pub const SYMBOL_PROPERTY: &str = "sym";

/// The property holding a quote's price (an integer or a float).
pub const PRICE_PROPERTY: &str = "price";

/// Default payload size of a quote, in bytes.
pub const PAYLOAD_BYTES_DEFAULT: usize = 64;

/// The expected fraction of subscriptions that a quote matches, as the
/// module explains: (0.4995 + 0.50049) / 2 / 1000.
pub const EXPECTED_MATCH_FRACTION: f64 = 0.000_499_995;

/// Cents in a price unit.
const CENTS_PER_UNIT: i64 = 100;

/// Stream of the subscriptions.
const SUBSCRIPTION_STREAM: Stream = Stream(0x7365_6c01);

/// Stream of the quotes.
const QUOTE_STREAM: Stream = Stream(0x7365_6c02);

/// A seeded selector workload.
#[derive(Debug, Clone)]
pub struct SelectorsWorkload {
    seed: u64,
    topic: TopicName,
    payload_bytes: usize,
}

impl SelectorsWorkload {
    /// The workload of `seed`.
    pub fn new(seed: u64) -> Result<SelectorsWorkload, WorkloadError> {
        Ok(SelectorsWorkload { seed, topic: TopicName::new(QUOTES_TOPIC)?, payload_bytes: PAYLOAD_BYTES_DEFAULT })
    }

    /// The same workload with payloads of `bytes` bytes.
    pub fn with_payload_bytes(mut self, bytes: usize) -> SelectorsWorkload {
        self.payload_bytes = bytes;
        self
    }

    /// Subscription `index`: `sym = 'S0042' AND price > 517`.
    pub fn subscription(&self, index: u64) -> Subscription {
        let mut rng = item_rng(self.seed, SUBSCRIPTION_STREAM, index);
        let symbol = symbol(&mut rng);
        let threshold = rng.i64(0..PRICE_LIMIT);
        let selector = format!("{SYMBOL_PROPERTY} = '{symbol}' AND {PRICE_PROPERTY} > {threshold}");
        (QUOTES_TOPIC.to_string(), LANGUAGE_SQL, selector)
    }

    /// Quote `index`: a symbol and a price, integer or decimal.
    pub fn message(&self, index: u64) -> Message {
        let mut rng = item_rng(self.seed, QUOTE_STREAM, index);
        let symbol = symbol(&mut rng);
        let price = if rng.bool() {
            Value::Int(rng.i64(0..PRICE_LIMIT))
        } else {
            let cents = rng.i64(0..PRICE_LIMIT * CENTS_PER_UNIT);
            // Exact: cents stay far below 2^53.
            Value::Float(cents as f64 / CENTS_PER_UNIT as f64)
        };
        let mut message = Message::new(self.topic.clone(), text::payload(&mut rng, self.payload_bytes));
        message.properties =
            vec![(SYMBOL_PROPERTY.to_string(), Value::Str(symbol.into())), (PRICE_PROPERTY.to_string(), price)];
        message
    }
}

impl Workload for SelectorsWorkload {
    fn subscription(&self, index: u64) -> Subscription {
        SelectorsWorkload::subscription(self, index)
    }

    fn message(&self, index: u64) -> Message {
        SelectorsWorkload::message(self, index)
    }
}

/// A uniformly drawn symbol, `S0000` to `S0999`.
fn symbol(rng: &mut fastrand::Rng) -> String {
    format!("S{:04}", rng.u32(..SYMBOL_COUNT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(seed: u64) -> SelectorsWorkload {
        SelectorsWorkload::new(seed).expect("valid topic")
    }

    /// The symbol and threshold of a generated selector.
    fn parts(selector: &str) -> (String, i64) {
        let symbol = selector.split('\'').nth(1).expect("quoted symbol").to_string();
        let threshold = selector.rsplit(' ').next().and_then(|last| last.parse().ok()).expect("threshold");
        (symbol, threshold)
    }

    #[test]
    fn subscriptions_are_selectors_on_symbol_and_price() {
        let (topic, language, selector) = workload(1).subscription(0);
        assert_eq!((topic.as_str(), language), (QUOTES_TOPIC, LANGUAGE_SQL));
        let (symbol, threshold) = parts(&selector);
        assert_eq!(selector, format!("sym = '{symbol}' AND price > {threshold}"));
        assert!(symbol.len() == 5 && symbol.starts_with('S'), "{symbol}");
        assert!((0..PRICE_LIMIT).contains(&threshold));
    }

    #[test]
    fn quotes_carry_symbol_and_integer_or_decimal_prices() {
        let selectors = workload(2);
        let (mut integers, mut floats) = (0, 0);
        for index in 0..200 {
            let quote = selectors.message(index);
            assert!(matches!(quote.property(SYMBOL_PROPERTY), Some(Value::Str(symbol)) if symbol.starts_with('S')));
            match quote.property(PRICE_PROPERTY) {
                Some(Value::Int(price)) => integers += usize::from((0..PRICE_LIMIT).contains(price)),
                Some(Value::Float(price)) => floats += usize::from((0.0..PRICE_LIMIT as f64).contains(price)),
                other => panic!("price {other:?}"),
            }
        }
        assert_eq!(integers + floats, 200);
        assert!(integers > 50 && floats > 50, "{integers} integers, {floats} floats");
    }

    #[test]
    fn match_probability_is_about_half_a_per_mille() {
        // Evaluates the selectors' meaning directly (sift-filter, which
        // parses them, depends on this crate); its integration test checks
        // the same with the real parser.
        let selectors = workload(3);
        let subscriptions: Vec<(String, i64)> =
            (0..2000).map(|index| parts(&selectors.subscription(index).2)).collect();
        let mut matches = 0u64;
        let quotes = 2000;
        for index in 0..quotes {
            let quote = selectors.message(index);
            let Some(Value::Str(symbol)) = quote.property(SYMBOL_PROPERTY) else { panic!("symbol") };
            let price = match quote.property(PRICE_PROPERTY) {
                Some(Value::Int(price)) => *price as f64,
                Some(Value::Float(price)) => *price,
                other => panic!("price {other:?}"),
            };
            let wanted = |(wanted, threshold): &&(String, i64)| **wanted == **symbol && price > *threshold as f64;
            matches += subscriptions.iter().filter(wanted).count() as u64;
        }
        let fraction = matches as f64 / (quotes * subscriptions.len() as u64) as f64;
        assert!((fraction / EXPECTED_MATCH_FRACTION - 1.0).abs() < 0.1, "{fraction}");
    }

    #[test]
    fn same_seed_same_workload_different_seed_different() {
        let (first, again, other) = (workload(8), workload(8), workload(9));
        for index in 0..20 {
            assert_eq!(first.subscription(index), again.subscription(index));
            assert_eq!(first.message(index), again.message(index));
        }
        assert!((0..20).any(|index| first.subscription(index) != other.subscription(index)));
        assert!((0..20).any(|index| first.message(index) != other.message(index)));
    }
}
