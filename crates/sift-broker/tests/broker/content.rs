//! Content-filtered subscriptions over the wire: each language, queue
//! groups with filters, refusals, and metadata checks on publish.

use sift_client::{ClientError, ConfirmStatus, FilterKind, PublishOptions, SubscribeOptions};
use sift_core::{Message, Value};
use sift_proto::ErrorCode;

use crate::common::*;

/// A message on `topic` with `payload` and the given properties.
fn with_properties(topic: &str, payload: &str, properties: &[(&str, Value)]) -> Message {
    let mut message = message(topic, payload);
    message.properties = properties.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
    message
}

fn text_value(text: &str) -> Value {
    Value::Str(text.into())
}

/// Quotes in a stock feed: symbol, price and volume.
fn quotes() -> Vec<Message> {
    let rows = [("IBM", 120, 500), ("IBM", 90, 100), ("HP", 150, 900), ("ACME", 10, 0), ("HPE", 101, 50)];
    rows.iter()
        .enumerate()
        .map(|(index, (symbol, price, volume))| {
            let payload = format!("q{index}");
            let properties =
                [("sym", text_value(symbol)), ("price", Value::Int(*price)), ("volume", Value::Int(*volume))];
            with_properties("quotes.nyse", &payload, &properties)
        })
        .collect()
}

/// A filter's language and text, the quotes it passes, and the properties
/// of a sentinel it passes.
type FilterCase = (FilterKind, &'static str, &'static [&'static str], Vec<(&'static str, Value)>);

#[tokio::test]
async fn each_subscriber_gets_exactly_what_its_filter_passes() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    // Each case ends with the properties of a sentinel that its filter passes.
    let cases: [FilterCase; 6] = [
        (
            FilterKind::Tags,
            r#"sym="IBM",price>100"#,
            &["q0"],
            vec![("sym", text_value("IBM")), ("price", Value::Int(200))],
        ),
        (FilterKind::Tags, "volume>=100", &["q0", "q1", "q2"], vec![("volume", Value::Int(100))]),
        (
            FilterKind::Sql,
            "sym IN ('HP', 'ACME') OR price BETWEEN 95 AND 110",
            &["q2", "q3", "q4"],
            vec![("sym", text_value("HP"))],
        ),
        (
            FilterKind::Sql,
            "sym LIKE 'HP%' AND NOT volume > 100",
            &["q4"],
            vec![("sym", text_value("HP")), ("volume", Value::Int(0))],
        ),
        (FilterKind::Sql, "missing = 1 OR price < 0", &[], vec![("missing", Value::Int(1))]),
        (FilterKind::Regex, r"^quotes\.(nyse|lse)$", &["q0", "q1", "q2", "q3", "q4"], vec![]),
    ];
    let mut subscriptions = Vec::new();
    let mut sentinels = Vec::new();
    for (index, (kind, text, expected, sentinel_properties)) in cases.into_iter().enumerate() {
        let options = SubscribeOptions::new("quotes.>").filter(kind, text);
        let sentinel = format!("{SENTINEL}-{index}");
        sentinels.push(with_properties("quotes.nyse", &sentinel, &sentinel_properties));
        subscriptions.push((text, expected, sentinel, subscriber.subscribe(options).await.expect("filter accepted")));
    }
    let mut everything = subscriber.subscribe(SubscribeOptions::new("quotes.*")).await.expect("subscribe");
    let publisher = client(&broker, "feed").await;
    for quote in quotes() {
        publisher.publish(quote).await.expect("publish");
    }
    // The sentinels follow the quotes from the same publisher, so when a
    // subscription's own sentinel arrives, every quote has either reached it
    // already or never will.
    for sentinel in sentinels {
        publisher.publish(sentinel).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    assert_eq!(texts(&mut everything, 5).await, ["q0", "q1", "q2", "q3", "q4"]);
    for (text, expected, sentinel, subscription) in &mut subscriptions {
        let mut received = texts_until(subscription, sentinel).await;
        // Another case's sentinel may pass this filter too; it is no quote.
        received.retain(|payload| !payload.starts_with(SENTINEL));
        assert_eq!(received, *expected, "filter {text} gets exactly these quotes and nothing more");
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn confirms_count_only_subscriptions_whose_filters_pass() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let options = SubscribeOptions::new("quotes.>").filter(FilterKind::Tags, r#"sym="IBM""#);
    let _ibm = subscriber.subscribe(options).await.expect("subscribe");
    let publisher = client(&broker, "feed").await;
    let quotes = quotes();
    let confirm = publisher.publish_confirmed(quotes[0].clone(), PublishOptions::default()).await.expect("confirm");
    assert_eq!((confirm.status, confirm.matched), (ConfirmStatus::Accepted, 1));
    let confirm = publisher.publish_confirmed(quotes[2].clone(), PublishOptions::default()).await.expect("confirm");
    assert_eq!(confirm.status, ConfirmStatus::NoSubscribers, "HP passes no filter");
    broker.shutdown().await;
}

#[tokio::test]
async fn xpath_filters_match_the_metadata_document() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let target = "/metadata/ATO[nickname='KTJR' and serialno='targ1234']";
    let dates = "/metadata/BasicTemporal/beginning_date_time_group/year >= 2003 and \
                 /metadata/BasicTemporal/ending_date_time_group/day <= 26";
    let mut by_target =
        subscriber.subscribe(SubscribeOptions::new("jbi.>").filter(FilterKind::Xpath, target)).await.expect("xpath");
    let mut by_dates =
        subscriber.subscribe(SubscribeOptions::new("jbi.>").filter(FilterKind::Xpath, dates)).await.expect("xpath");
    let documents = [
        ("m0", "<metadata><ATO><nickname>KTJR</nickname><serialno>targ1234</serialno></ATO></metadata>"),
        ("m1", "<metadata><ATO><nickname>KTJR</nickname><serialno>other</serialno></ATO></metadata>"),
        (
            "m2",
            "<metadata><BasicTemporal><beginning_date_time_group><year>2004</year></beginning_date_time_group>\
             <ending_date_time_group><day>12</day></ending_date_time_group></BasicTemporal></metadata>",
        ),
        (
            "m3",
            "<metadata><BasicTemporal><beginning_date_time_group><year>2001</year></beginning_date_time_group>\
             <ending_date_time_group><day>12</day></ending_date_time_group></BasicTemporal></metadata>",
        ),
    ];
    let publisher = client(&broker, "jbi").await;
    for (payload, document) in documents {
        let mut object = message("jbi.objects", payload);
        object.metadata = Some(document.as_bytes().to_vec().into());
        publisher.publish(object).await.expect("publish");
    }
    // No metadata at all: an XPath filter does not pass it.
    publisher.publish(message("jbi.objects", "m4")).await.expect("publish");
    // A sentinel whose document passes both filters, from the same
    // publisher after the others: when it arrives, the documents before it
    // have either arrived already or never will.
    let mut sentinel = message("jbi.objects", SENTINEL);
    let both = "<metadata><ATO><nickname>KTJR</nickname><serialno>targ1234</serialno></ATO>\
                <BasicTemporal><beginning_date_time_group><year>2004</year></beginning_date_time_group>\
                <ending_date_time_group><day>12</day></ending_date_time_group></BasicTemporal></metadata>";
    sentinel.metadata = Some(both.as_bytes().to_vec().into());
    publisher.publish(sentinel).await.expect("publish");
    publisher.ping().await.expect("ping");
    assert_eq!(texts(&mut by_target, 1).await, ["m0"]);
    assert_eq!(texts(&mut by_dates, 1).await, ["m2"]);
    assert_next_is(&mut by_target, SENTINEL, "the target filter passes nothing more").await;
    assert_next_is(&mut by_dates, SENTINEL, "the dates filter passes nothing more").await;
    broker.shutdown().await;
}

#[tokio::test]
async fn malformed_metadata_is_refused_to_its_publisher_only() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut all = subscriber.subscribe(SubscribeOptions::new("jbi.>")).await.expect("subscribe");
    let publisher = client(&broker, "jbi").await;
    // A mismatched tag, and a hostile document: one element with 40,000
    // attributes, refused at the attribute limit (reading it cost the
    // broker seconds when each attribute was compared with all before it).
    let hostile: String = (0..40_000).map(|index| format!(" a{index}='1'")).collect();
    let documents = ["<metadata><open></metadata>".to_string(), format!("<metadata{hostile}/>")];
    for (document, reason) in documents.iter().zip(["expected `</open>`", "more than 256 attributes on one element"]) {
        let mut broken = message("jbi.objects", "broken");
        broken.metadata = Some(document.clone().into_bytes().into());
        let refused = publisher.publish_confirmed(broken, PublishOptions::default()).await;
        match refused {
            Err(ClientError::Refused { code, message }) => {
                assert_eq!(code, ErrorCode::InvalidField);
                assert!(message.contains("metadata") && message.contains(reason), "names field and reason: {message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    publisher.publish(message("jbi.objects", "fine")).await.expect("publish");
    assert_eq!(texts(&mut all, 1).await, ["fine"], "the broker and the connection carry on");
    broker.shutdown().await;
}

#[tokio::test]
async fn filters_that_do_not_parse_are_refused_with_language_and_position() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let cases = [
        (FilterKind::Sql, "price > ", "sql"),
        (FilterKind::Tags, "price >> 3", "tags"),
        (FilterKind::Xpath, "/metadata/[", "xpath"),
        (FilterKind::Regex, "quotes.(", "regex"),
    ];
    for (kind, text, language) in cases {
        let refused = subscriber.subscribe(SubscribeOptions::new("quotes.>").filter(kind, text)).await;
        match refused {
            Err(ClientError::Refused { code, message }) => {
                assert_eq!(code, ErrorCode::InvalidFilter, "{text}");
                assert!(message.contains(language), "names the language: {message}");
            }
            other => panic!("{text}: expected a refusal, got {other:?}"),
        }
    }
    // The connection is still good.
    let _fine = subscriber.subscribe(SubscribeOptions::new("quotes.>")).await.expect("subscribe");
    broker.shutdown().await;
}

#[tokio::test]
async fn queue_groups_choose_among_members_whose_filters_pass() {
    let broker = broker().await;
    let mut members = Vec::new();
    for (name, filter) in [("ibm-a", r#"sym="IBM""#), ("ibm-b", r#"sym="IBM""#), ("hp", r#"sym="HP""#)] {
        let member = client(&broker, name).await;
        let options = SubscribeOptions::new("quotes.>").queue_group("desk").filter(FilterKind::Tags, filter);
        let subscription = member.subscribe(options).await.expect("subscribe");
        members.push((member, subscription));
    }
    let publisher = client(&broker, "feed").await;
    for index in 0..6 {
        let symbol = if index % 3 == 2 { "HP" } else { "IBM" };
        let quote = with_properties("quotes.nyse", &format!("{symbol}{index}"), &[("sym", text_value(symbol))]);
        publisher.publish(quote).await.expect("publish");
    }
    // Neither symbol: no member takes it.
    publisher.publish(with_properties("quotes.nyse", "none", &[("sym", text_value("X"))])).await.expect("publish");
    publisher.ping().await.expect("ping");
    // Sentinels that only the IBM members pass, then one only the HP member
    // passes: each member's sentinel shows that nothing more is coming to it.
    let [ibm_a, ibm_b, hp] = &mut members[..] else { panic!("three members") };
    let ibm_sentinel = with_properties("quotes.nyse", SENTINEL, &[("sym", text_value("IBM"))]);
    let (mut received, _) =
        group_texts_until_sentinels(&mut [&mut ibm_a.1, &mut ibm_b.1], &publisher, &ibm_sentinel).await;
    let hp_sentinel = with_properties("quotes.nyse", SENTINEL, &[("sym", text_value("HP"))]);
    let (hp_received, _) = group_texts_until_sentinels(&mut [&mut hp.1], &publisher, &hp_sentinel).await;
    received.extend(hp_received);
    let ibm: Vec<&String> = received[0].iter().chain(&received[1]).collect();
    assert_eq!(ibm.len(), 4, "each IBM quote to exactly one IBM member: {received:?}");
    assert!(ibm.iter().all(|text| text.starts_with("IBM")), "{received:?}");
    assert!(!received[0].is_empty() && !received[1].is_empty(), "both IBM members take turns: {received:?}");
    assert_eq!(received[2], ["HP2", "HP5"]);
    broker.shutdown().await;
}

#[tokio::test]
async fn unsubscribing_a_filtered_subscription_stops_its_deliveries() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let options = SubscribeOptions::new("quotes.>").filter(FilterKind::Sql, "price > 100");
    let mut first = subscriber.subscribe(options.clone()).await.expect("subscribe");
    let mut second = subscriber.subscribe(options).await.expect("subscribe");
    let publisher = client(&broker, "feed").await;
    publisher.publish(quotes()[0].clone()).await.expect("publish");
    publisher.ping().await.expect("ping");
    assert_eq!(texts(&mut first, 1).await, ["q0"]);
    assert_eq!(texts(&mut second, 1).await, ["q0"]);
    first.unsubscribe().await.expect("unsubscribe");
    publisher.publish(quotes()[2].clone()).await.expect("publish");
    publisher.ping().await.expect("ping");
    assert_eq!(texts(&mut second, 1).await, ["q2"], "the other subscription in the partition still matches");
    assert_eq!(broker.subscription_count(), 1);
    broker.shutdown().await;
}

/// Every subscription of a seeded workload, under three topic filters that
/// all match, receives exactly the messages its filter passes when
/// evaluated alone: the router's partitions and the index agree with the
/// filter languages end to end.
#[tokio::test]
async fn seeded_workloads_deliver_what_each_filter_passes_alone() {
    use sift_core::workload::{GesWorkload, SelectorsWorkload, Workload};
    use sift_filter::{ContentFilter, FilterLanguage};

    let broker = broker().await;
    let selectors = SelectorsWorkload::new(11).expect("workload");
    let ges = GesWorkload::new(11, 25).expect("workload");
    let workloads: [(&dyn Workload, [&str; 3]); 2] =
        [(&selectors, ["market.quotes", "market.*", "market.>"]), (&ges, ["ges.events", "ges.*", ">"])];
    for (workload, topic_filters) in workloads {
        let subscriber = client(&broker, "sub").await;
        let mut subscriptions = Vec::new();
        for index in 0..60u64 {
            let (_, language, text) = workload.subscription(index);
            let kind = if language == "sql" { FilterKind::Sql } else { FilterKind::Tags };
            let topic_filter = topic_filters[index as usize % topic_filters.len()];
            let options = SubscribeOptions::new(topic_filter).filter(kind, text.as_str());
            let filter = ContentFilter::parse(language.parse::<FilterLanguage>().expect("language"), &text)
                .expect("workload filters parse");
            subscriptions.push((filter, subscriber.subscribe(options).await.expect("subscribe")));
        }
        let publisher = client(&broker, "pub").await;
        let messages: Vec<Message> = (0..400).map(|index| workload.message(index)).collect();
        for (index, message) in messages.iter().enumerate() {
            let mut message = message.clone();
            message.payload = index.to_string().into_bytes().into();
            publisher.publish(message).await.expect("publish");
        }
        // Then one sentinel per subscription: a later message of the
        // workload that its filter passes. From the same publisher after the
        // others, a subscription's own sentinel shows that every message
        // before it has either arrived already or never will.
        for (position, (filter, _)) in subscriptions.iter().enumerate() {
            let mut sentinel = (messages.len() as u64..100_000)
                .map(|index| workload.message(index))
                .find(|candidate| filter.matches(candidate))
                .expect("the workload has a message that the filter passes");
            sentinel.payload = format!("{SENTINEL}-{position}").into_bytes().into();
            publisher.publish(sentinel).await.expect("publish");
        }
        publisher.ping().await.expect("ping");
        for (position, (filter, subscription)) in subscriptions.iter_mut().enumerate() {
            let expected: Vec<String> = messages
                .iter()
                .enumerate()
                .filter(|(_, message)| filter.matches(message))
                .map(|(index, _)| index.to_string())
                .collect();
            let mut received = texts_until(subscription, &format!("{SENTINEL}-{position}")).await;
            // Other subscriptions' sentinels may pass this filter too; they
            // are not part of the workload.
            received.retain(|payload| !payload.starts_with(SENTINEL));
            assert_eq!(received, expected, "filter {filter} gets exactly what it passes and nothing more");
        }
    }
    broker.shutdown().await;
}
