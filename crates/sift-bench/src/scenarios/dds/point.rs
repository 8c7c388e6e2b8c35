//! One point of the grid: start its client threads, run them, and gather
//! what they and the broker counted into a [`Measured`].

use std::time::{Duration, Instant};

use sift_broker::{RunningBroker, StatsSnapshot};
use sift_core::TopicName;

use super::clients::{publisher, subscriber, Published, PublisherJob, Received, SubscriberJob};
use super::plan::Point;
use super::threads::{ClientThread, Gate, Phase};
use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::stats::Samples;
use sift_client::cpu::{elapsed_ns, process_cpu_ns};

/// Topic every point publishes on.
pub const DDS_TOPIC: &str = "bench.dds";
/// Bytes of a `PING` frame and of its `PONG` (docs/PROTOCOL.md §4.16): each
/// publisher pings once after its last message, and those bytes are not
/// the messages' overhead.
const PING_FRAME_BYTES: u64 = 13;
/// How often the broker's byte counters are read while they settle.
const SETTLE_POLL: Duration = Duration::from_millis(5);
/// Longest wait for them to settle.
const SETTLE_POLLS_MAX: u32 = 40;

/// What the broker counted during a point (an embedded broker only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BrokerCounts {
    /// Bytes the broker read from clients, less the publishers' pings.
    pub bytes_received: u64,
    /// Bytes the broker wrote to clients, less the answers to those pings.
    pub bytes_sent: u64,
    /// Deliveries a full queue dropped or a `keep-last` queue overwrote.
    pub dropped: u64,
}

impl BrokerCounts {
    fn between(before: &StatsSnapshot, after: &StatsSnapshot, publishers: usize) -> BrokerCounts {
        let pings = PING_FRAME_BYTES * publishers as u64;
        let difference = |pick: fn(&StatsSnapshot) -> u64| pick(after).saturating_sub(pick(before));
        BrokerCounts {
            bytes_received: difference(|stats| stats.bytes_received).saturating_sub(pings),
            bytes_sent: difference(|stats| stats.bytes_sent).saturating_sub(pings),
            dropped: difference(|stats| stats.dropped_keep_last) + difference(|stats| stats.dropped_queue_full),
        }
    }
}

/// Everything measured at one point.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Messages published, all publishers together.
    pub published: u64,
    /// Deliveries received, all subscribers together.
    pub delivered: u64,
    /// Latency of every delivery, in nanoseconds.
    pub latency_ns: Samples,
    /// Messages per second each publisher achieved, averaged over them.
    pub publish_rate_hz: f64,
    /// CPU time of all publisher threads, in nanoseconds.
    pub publisher_cpu_ns: Option<u64>,
    /// CPU time of all subscriber threads, in nanoseconds.
    pub subscriber_cpu_ns: Option<u64>,
    /// CPU time of the whole process (broker, clients, coordinator), in nanoseconds.
    pub process_cpu_ns: Option<u64>,
    /// The broker's counts, when it is embedded.
    pub broker: Option<BrokerCounts>,
}

impl Measured {
    fn gather(published: &[Published], received: &[Received]) -> Measured {
        let mut latency_ns = Samples::new();
        received.iter().for_each(|received| latency_ns.merge(&received.latency_ns));
        // A publisher's n messages span n - 1 periods.
        let rates = published.iter().map(|p| p.messages.saturating_sub(1) as f64 / p.seconds.max(f64::EPSILON));
        Measured {
            published: published.iter().map(|p| p.messages).sum(),
            delivered: received.iter().map(|r| r.count).sum(),
            latency_ns,
            publish_rate_hz: rates.sum::<f64>() / published.len().max(1) as f64,
            publisher_cpu_ns: published.iter().map(|p| p.cpu_ns).sum(),
            subscriber_cpu_ns: received.iter().map(|r| r.cpu_ns).sum(),
            process_cpu_ns: None,
            broker: None,
        }
    }

    /// CPU time of the rest of the process (the broker, and the bench's
    /// own coordination, which mostly waits), in nanoseconds.
    pub fn broker_cpu_ns(&self) -> Option<u64> {
        let clients = self.publisher_cpu_ns? + self.subscriber_cpu_ns?;
        Some(self.process_cpu_ns?.saturating_sub(clients))
    }
}

/// Runs `point` against `endpoints`: subscribers and publishers connect on
/// their own threads, start together, and close once everything is counted.
pub async fn run_point(endpoints: &Endpoints, point: &Point) -> Result<Measured, BenchError> {
    let topic = TopicName::new(DDS_TOPIC).map_err(|error| BenchError::Usage(format!("topic: {error}")))?;
    let gate = Gate::new();
    let epoch = Instant::now();
    let (mut publishers, mut subscribers) = (Vec::new(), Vec::new());
    let mut outcome = Ok(());
    for index in 0..point.fan.subscribers {
        let job = SubscriberJob {
            address: endpoints.subscribe_addr().to_string(),
            name: format!("bench-dds-sub-{index}"),
            topic: DDS_TOPIC.to_string(),
            point: *point,
            epoch,
        };
        match ClientThread::spawn("subscriber", job.name.clone(), &gate, move |links| subscriber(job, links)) {
            Ok(thread) => subscribers.push(thread),
            Err(error) => outcome = Err(error),
        }
    }
    // Publishers spread their first messages over one period, as
    // independent hosts would, instead of all sending at the same instant.
    let period = Duration::from_secs_f64(1.0 / point.rate_hz as f64);
    for index in 0..point.fan.publishers {
        if outcome.is_err() {
            break;
        }
        let job = PublisherJob {
            address: endpoints.publish_addr().to_string(),
            name: format!("bench-dds-pub-{index}"),
            topic: topic.clone(),
            point: *point,
            offset: period.mul_f64(index as f64 / point.fan.publishers as f64),
            epoch,
        };
        match ClientThread::spawn("publisher", job.name.clone(), &gate, move |links| publisher(job, links)) {
            Ok(thread) => publishers.push(thread),
            Err(error) => outcome = Err(error),
        }
    }
    let measured = match outcome {
        Ok(()) => drive(endpoints, &gate, &mut publishers, &mut subscribers).await,
        Err(error) => Err(error),
    };
    gate.open(Phase::Close);
    let mut joined = Ok(());
    for thread in publishers {
        joined = joined.and(thread.join().await);
    }
    for thread in subscribers {
        joined = joined.and(thread.join().await);
    }
    let measured = measured?;
    joined.map(|()| measured)
}

/// Waits until every client is connected, starts them, and collects what
/// they measured, with the broker's counters and the process's CPU time
/// read just before the start and just after the last report.
async fn drive(
    endpoints: &Endpoints,
    gate: &Gate,
    publishers: &mut [ClientThread<Published>],
    subscribers: &mut [ClientThread<Received>],
) -> Result<Measured, BenchError> {
    for thread in subscribers.iter_mut() {
        thread.connected().await?;
    }
    for thread in publishers.iter_mut() {
        thread.connected().await?;
    }
    let broker = endpoints.embedded().first();
    let stats_before = broker.map(RunningBroker::stats);
    let cpu_before = process_cpu_ns();
    gate.open(Phase::Run);
    let mut published = Vec::with_capacity(publishers.len());
    for thread in publishers.iter_mut() {
        published.push(thread.result().await?);
    }
    let mut received = Vec::with_capacity(subscribers.len());
    for thread in subscribers.iter_mut() {
        received.push(thread.result().await?);
    }
    let stats_after = match broker {
        Some(broker) => Some(settled_stats(broker).await),
        None => None,
    };
    // Every client thread is still alive (waiting to close), so the
    // process's reading includes all of their work.
    let cpu_after = process_cpu_ns();
    let mut measured = Measured::gather(&published, &received);
    // With a broker elsewhere, the rest of the process is only the
    // coordinator, whose CPU time would pass for the broker's.
    measured.process_cpu_ns = broker.and(elapsed_ns(cpu_before, cpu_after));
    measured.broker = match (stats_before, stats_after) {
        (Some(before), Some(after)) => Some(BrokerCounts::between(&before, &after, publishers.len())),
        _ => None,
    };
    Ok(measured)
}

/// The broker's counters once its byte counts stop moving. A writer
/// counts its bytes after the write returns, so the subscriber may hold
/// the last delivery before it is counted, and the subscribers' last ACKs
/// may still be on their way; with every client idle, two equal readings
/// mean everything has been counted.
async fn settled_stats(broker: &RunningBroker) -> StatsSnapshot {
    let mut last = broker.stats();
    for _ in 0..SETTLE_POLLS_MAX {
        tokio::time::sleep(SETTLE_POLL).await;
        let now = broker.stats();
        if (now.bytes_sent, now.bytes_received) == (last.bytes_sent, last.bytes_received) {
            return now;
        }
        last = now;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_counts_leave_out_the_pings_and_add_both_kinds_of_drop() {
        let before = StatsSnapshot { bytes_received: 100, bytes_sent: 50, dropped_keep_last: 1, ..Default::default() };
        let after = StatsSnapshot {
            bytes_received: 100 + 1000 + 2 * PING_FRAME_BYTES,
            bytes_sent: 50 + 3000 + 2 * PING_FRAME_BYTES,
            dropped_keep_last: 4,
            dropped_queue_full: 2,
            ..Default::default()
        };
        let counts = BrokerCounts::between(&before, &after, 2);
        assert_eq!(counts, BrokerCounts { bytes_received: 1000, bytes_sent: 3000, dropped: 5 });
    }

    #[test]
    fn gathering_adds_counts_and_cpu_and_merges_latencies() {
        let published = [
            Published { messages: 11, seconds: 1.0, cpu_ns: Some(3_000) },
            Published { messages: 11, seconds: 0.5, cpu_ns: Some(1_000) },
        ];
        let mut latency_ns = Samples::new();
        latency_ns.record(40_000);
        let received = [Received { count: 22, latency_ns: latency_ns.clone(), cpu_ns: Some(6_000) }];
        let mut measured = Measured::gather(&published, &received);
        assert_eq!((measured.published, measured.delivered), (22, 22));
        assert_eq!(measured.publish_rate_hz, (10.0 + 20.0) / 2.0);
        assert_eq!((measured.publisher_cpu_ns, measured.subscriber_cpu_ns), (Some(4_000), Some(6_000)));
        assert_eq!(measured.latency_ns.count(), 1);
        assert_eq!(measured.broker_cpu_ns(), None, "no process reading yet");
        measured.process_cpu_ns = Some(25_000);
        assert_eq!(measured.broker_cpu_ns(), Some(15_000));
        let unknown = [Received { count: 1, latency_ns, cpu_ns: None }];
        assert_eq!(Measured::gather(&published, &unknown).subscriber_cpu_ns, None);
    }
}
