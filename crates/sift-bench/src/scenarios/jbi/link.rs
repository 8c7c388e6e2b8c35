//! The "slow" subscriber's link, emulated in its receive loop.
//!
//! The report's slow machine had the lab's only 100 Mbit/s card (§4.3),
//! and both brokers "had to wait on the slow system before moving on to the
//! next published object". Here every subscriber runs on loopback; the slow
//! one holds each delivery for the time its object would take on a link of
//! the given rate (object bytes × 8 / rate), one object after another, and
//! acknowledges it only then. So in sync mode the broker's confirm, and with
//! it the publisher's next object, waits for the slow link as it did in the
//! report. This is a per-message processing delay in the subscriber, not a
//! throttled socket: the kernel here has no netem and a traffic shaper is
//! not on every user's machine, and the delay gives the same figure for
//! every run. It emulates the link only, not the slow machine's 500 MHz CPU.

use std::time::{Duration, Instant};

/// A serial link: each object occupies it for its size over the rate,
/// from when it arrived or when the previous one left, whichever is later.
#[derive(Debug, Clone)]
pub struct SlowLink {
    bits_per_s: f64,
    free_at: Option<Instant>,
}

impl SlowLink {
    /// A link of `bits_per_s`.
    pub fn new(bits_per_s: f64) -> SlowLink {
        SlowLink { bits_per_s, free_at: None }
    }

    /// How long `bytes` take on the link.
    pub fn transmit_time(&self, bytes: usize) -> Duration {
        Duration::from_secs_f64(bytes as f64 * 8.0 / self.bits_per_s)
    }

    /// When an object of `bytes` that arrived at `arrived` has crossed the
    /// link; the link is busy until then.
    pub fn departure(&mut self, bytes: usize, arrived: Instant) -> Instant {
        let start = self.free_at.map_or(arrived, |free_at| free_at.max(arrived));
        let departure = start + self.transmit_time(bytes);
        self.free_at = Some(departure);
        departure
    }
}

/// Waits until `deadline` (a departure from the link), to within tens of
/// microseconds.
pub async fn wait_until(deadline: Instant) {
    let Some(remaining) = deadline.checked_duration_since(Instant::now()) else { return };
    // Tokio's timer counts whole milliseconds, three times the 0.34 ms a
    // 4 KB object takes at 100 Mbit/s; a thread's sleep is precise to tens
    // of microseconds, so the wait runs on the blocking pool.
    let _ = tokio::task::spawn_blocking(move || std::thread::sleep(remaining)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_queue_behind_each_other_and_idle_time_is_not_lent() {
        let mut link = SlowLink::new(100e6);
        let start = Instant::now();
        // 12,500 bytes are 100,000 bits: 1 ms at 100 Mbit/s.
        assert_eq!(link.transmit_time(12_500), Duration::from_millis(1));
        assert_eq!(link.departure(12_500, start), start + Duration::from_millis(1));
        // Arrived together with the first: leaves after it.
        assert_eq!(link.departure(12_500, start), start + Duration::from_millis(2));
        // Arrived when the link was idle: starts at once.
        let later = start + Duration::from_millis(10);
        assert_eq!(link.departure(1_250, later), later + Duration::from_micros(100));
    }

    #[tokio::test]
    async fn carrying_takes_the_transmit_time_without_rounding_up_each_object() {
        let mut link = SlowLink::new(100e6);
        let started = Instant::now();
        for _ in 0..20 {
            // 0.25 ms each, all arrived at once: 5 ms in all. Were each wait
            // rounded up to tokio's millisecond, it would take 20 ms.
            wait_until(link.departure(3_125, started)).await;
        }
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(5), "{elapsed:?}");
        assert!(elapsed < Duration::from_millis(15), "{elapsed:?}");
    }
}
