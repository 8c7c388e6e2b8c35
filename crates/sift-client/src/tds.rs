//! The time differential service (TDS): releases messages with the spacing
//! they were sent with, taking out the jitter the network added.
//!
//! Each message is released at its publisher timestamp (carried into this
//! client's clock, [`crate::Client::local_time`]) plus a fixed playout delay,
//! `max_delay`. Every message that arrives within `max_delay` of being sent
//! therefore leaves exactly as far from its predecessor as it was sent; one
//! that arrives later is *late*: released at once and counted.
//!
//! NaradaBrokering polled its buffer from five interleaved Java threads,
//! because one thread could not wake more often than every few
//! milliseconds. Here one thread sleeps until the next release on a timer
//! with its slack set to 1 ns (`/proc/thread-self/timerslack_ns`; the
//! default 50 µs would be jitter of our own), then spins for the last
//! `spin` of the wait, which covers the kernel's wake-up latency. Between messages it costs nothing.
//! A `tick` instead makes it wake on a fixed period, as NB's threads did,
//! to compare the two.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::time::ClockSource;

/// Default bound on messages the TDS holds.
pub const TDS_ENTRIES_DEFAULT: usize = 65_536;

/// How the TDS releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TdsConfig {
    /// The playout delay: a message leaves at its send time plus this.
    pub max_delay: Duration,
    /// `None`: a timer for each release. `Some(period)`: wake every period
    /// and release what is due (NaradaBrokering's way).
    pub tick: Option<Duration>,
    /// The last part of each wait spent spinning instead of sleeping.
    pub spin: Duration,
    /// Most messages held; beyond it the earliest goes at once (counted).
    pub max_entries: usize,
}

impl Default for TdsConfig {
    fn default() -> Self {
        TdsConfig {
            max_delay: Duration::from_millis(100),
            tick: None,
            spin: Duration::from_micros(20),
            max_entries: TDS_ENTRIES_DEFAULT,
        }
    }
}

impl TdsConfig {
    /// Parses `max-delay=MS[,tick=US][,spin=US][,entries=N]`.
    pub fn parse(spec: &str) -> Result<TdsConfig, String> {
        let mut config = TdsConfig::default();
        for item in spec.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("tds: {item:?} is not key=value"))?;
            let number = |unit: &str| -> Result<f64, String> {
                let parsed: f64 =
                    value.parse().map_err(|_| format!("tds: {key} = {value:?} is not a number of {unit}"))?;
                if parsed.is_finite() && parsed >= 0.0 {
                    Ok(parsed)
                } else {
                    Err(format!("tds: {key} = {value:?} must be 0 or more {unit}"))
                }
            };
            match key {
                "max-delay" => config.max_delay = Duration::from_secs_f64(number("milliseconds")? / 1e3),
                "tick" => config.tick = Some(Duration::from_secs_f64(number("microseconds")? / 1e6)),
                "spin" => config.spin = Duration::from_secs_f64(number("microseconds")? / 1e6),
                "entries" => config.max_entries = number("messages")? as usize,
                _ => return Err(format!("tds: {key:?} is not one of max-delay, tick, spin, entries")),
            }
        }
        if config.max_entries == 0 {
            return Err("tds: entries must be at least 1".into());
        }
        if config.tick.is_some_and(|tick| tick.is_zero()) {
            return Err("tds: tick must be above 0".into());
        }
        Ok(config)
    }
}

/// How one message was released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// When it was due: its local send time plus `max_delay`.
    pub target_ns: u64,
    /// When it went, by the same clock.
    pub released_ns: u64,
    /// It arrived after its due time (or was pushed out by the bound).
    pub late: bool,
}

/// What the TDS has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TdsCounters {
    /// Messages released.
    pub released: u64,
    /// Messages that arrived after their due time.
    pub late: u64,
    /// Messages released early because `max_entries` were held.
    pub overflowed: u64,
    /// Times the release thread woke.
    pub wakeups: u64,
    /// CPU time the release thread used, in nanoseconds.
    pub cpu_ns: u64,
}

/// The callback that gets each released message, on the TDS thread.
type ReleaseFn<T> = Box<dyn FnMut(T, Release) + Send>;

/// One message waiting: a late one waits under its arrival time, so that
/// late ones go at once and in arrival order.
struct Waiting<T> {
    item: T,
    target_ns: u64,
    late: bool,
}

struct Queue<T> {
    /// By (release time, arrival number).
    due: BTreeMap<(u64, u64), Waiting<T>>,
    arrivals: u64,
    /// Release what is held, then stop.
    closing: bool,
    /// Stop now, dropping what is held.
    abandoned: bool,
    counters: TdsCounters,
}

struct Shared<T> {
    queue: Mutex<Queue<T>>,
    wake: Condvar,
    /// The release thread's `/proc` directory, to read its CPU time from
    /// outside it (a reading inside would delay releases by a system call).
    task_dir: OnceLock<Option<PathBuf>>,
    /// Its CPU time when it ended.
    cpu_ns_at_exit: AtomicU64,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The TDS: a thread that releases submitted messages at their due times.
pub struct TimeDifferential<T: Send + 'static> {
    config: TdsConfig,
    clock: ClockSource,
    shared: Arc<Shared<T>>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> TimeDifferential<T> {
    /// Starts the release thread; `release` gets each message, in due order.
    pub fn spawn(
        config: TdsConfig,
        clock: ClockSource,
        release: impl FnMut(T, Release) + Send + 'static,
    ) -> std::io::Result<TimeDifferential<T>> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                due: BTreeMap::new(),
                arrivals: 0,
                closing: false,
                abandoned: false,
                counters: TdsCounters::default(),
            }),
            wake: Condvar::new(),
            task_dir: OnceLock::new(),
            cpu_ns_at_exit: AtomicU64::new(0),
        });
        let worker = Worker { config, clock: clock.clone(), shared: shared.clone(), release: Box::new(release) };
        let thread = std::thread::Builder::new().name("sift-tds".into()).spawn(move || worker.run())?;
        Ok(TimeDifferential { config, clock, shared, thread: Some(thread) })
    }

    /// Hands over `item`, sent at `local_timestamp_ns` by this client's clock.
    pub fn submit(&self, item: T, local_timestamp_ns: u64) {
        let now_ns = self.clock.now_ns();
        let target_ns = local_timestamp_ns.saturating_add(duration_ns(self.config.max_delay));
        let late = target_ns < now_ns;
        let mut queue = self.shared.lock();
        let arrival = queue.arrivals;
        queue.arrivals += 1;
        let release_ns = if late { now_ns } else { target_ns };
        let earliest = queue.due.first_key_value().is_none_or(|(&(first_ns, _), _)| release_ns < first_ns);
        queue.due.insert((release_ns, arrival), Waiting { item, target_ns, late });
        drop(queue);
        if earliest || late {
            self.shared.wake.notify_one();
        }
    }

    /// Messages waiting for their due time.
    pub fn len(&self) -> usize {
        self.shared.lock().due.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the TDS has done so far.
    pub fn counters(&self) -> TdsCounters {
        let mut counters = self.shared.lock().counters;
        let task_dir = self.shared.task_dir.get().and_then(Option::as_deref);
        counters.cpu_ns = match task_dir.and_then(crate::cpu::task_cpu_ns) {
            Some(cpu_ns) if self.thread.is_some() => cpu_ns,
            _ => self.shared.cpu_ns_at_exit.load(Ordering::Relaxed),
        };
        counters
    }

    /// Releases what is held, each at its due time, then stops the thread.
    pub fn finish(mut self) -> TdsCounters {
        self.stop(false);
        self.counters()
    }

    /// Stops the thread; `abandon` drops what is held instead of waiting.
    fn stop(&mut self, abandon: bool) {
        let mut queue = self.shared.lock();
        queue.closing = true;
        queue.abandoned |= abandon;
        drop(queue);
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<T: Send + 'static> Drop for TimeDifferential<T> {
    /// Stops at once; messages still held are dropped ([`Self::finish`]
    /// waits for them).
    fn drop(&mut self) {
        self.stop(true);
    }
}

/// The release thread's own state.
struct Worker<T> {
    config: TdsConfig,
    clock: ClockSource,
    shared: Arc<Shared<T>>,
    release: ReleaseFn<T>,
}

impl<T> Worker<T> {
    fn run(mut self) {
        if !crate::cpu::set_thread_timer_slack_ns(1) {
            tracing::debug!("cannot lower the TDS thread's timer slack; its sleeps may end up to 50 µs late");
        }
        let _ = self.shared.task_dir.set(crate::cpu::thread_task_dir());
        self.release_until_closed();
        let cpu_ns = crate::cpu::thread_cpu_ns().unwrap_or(0);
        self.shared.cpu_ns_at_exit.store(cpu_ns, Ordering::Relaxed);
    }

    /// Releases each message at its time until told to stop.
    fn release_until_closed(&mut self) {
        let mut guard = self.shared.lock();
        loop {
            guard.counters.wakeups += 1;
            if guard.abandoned {
                return;
            }
            let Some((&(release_ns, _), _)) = guard.due.first_key_value() else {
                if guard.closing {
                    return;
                }
                guard = self.shared.wake.wait(guard).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let now_ns = self.clock.now_ns();
            let overflowing = guard.due.len() > self.config.max_entries;
            if release_ns > now_ns && !overflowing {
                guard = self.wait_until(guard, release_ns, now_ns);
                continue;
            }
            let Some((_, waiting)) = guard.due.pop_first() else { continue };
            let pushed_out = release_ns > now_ns;
            guard.counters.released += 1;
            guard.counters.late += u64::from(waiting.late);
            guard.counters.overflowed += u64::from(pushed_out);
            drop(guard);
            let Waiting { item, target_ns, late } = waiting;
            let released_ns = self.clock.now_ns();
            (self.release)(item, Release { target_ns, released_ns, late: late || pushed_out });
            guard = self.shared.lock();
        }
    }

    /// Waits for `target_ns` (or a new, earlier message): sleeps on the
    /// condition variable until `spin` before it, then spins; in tick mode,
    /// sleeps one tick.
    fn wait_until<'a>(
        &'a self,
        guard: MutexGuard<'a, Queue<T>>,
        target_ns: u64,
        now_ns: u64,
    ) -> MutexGuard<'a, Queue<T>> {
        let remaining_ns = target_ns - now_ns;
        if let Some(tick) = self.config.tick {
            drop(guard);
            std::thread::sleep(tick);
            return self.shared.lock();
        }
        let spin_ns = duration_ns(self.config.spin);
        if remaining_ns > spin_ns {
            let sleep = Duration::from_nanos(remaining_ns - spin_ns);
            let (guard, _) = self.shared.wake.wait_timeout(guard, sleep).unwrap_or_else(PoisonError::into_inner);
            return guard;
        }
        drop(guard);
        while self.clock.now_ns() < target_ns {
            std::hint::spin_loop();
        }
        self.shared.lock()
    }
}

fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn the_specification_parses() {
        let config = TdsConfig::parse("max-delay=50,tick=100,spin=0").expect("valid");
        assert_eq!(config.max_delay, Duration::from_millis(50));
        assert_eq!(config.tick, Some(Duration::from_micros(100)));
        assert_eq!(config.spin, Duration::ZERO);
        assert!(TdsConfig::parse("max-delay=x").is_err());
        assert!(TdsConfig::parse("delay=3").is_err());
        assert!(TdsConfig::parse("tick=0").is_err());
    }

    #[test]
    fn late_messages_go_at_once_in_arrival_order_and_are_counted() {
        let (sender, receiver) = mpsc::channel();
        let config = TdsConfig { max_delay: Duration::ZERO, ..TdsConfig::default() };
        let tds = TimeDifferential::spawn(config, ClockSource::system(), move |item: u32, release| {
            let _ = sender.send((item, release.late));
        })
        .expect("thread starts");
        // Sent an hour ago: far past due.
        let hour_ago_ns = crate::system_now_ns() - 3_600_000_000_000;
        tds.submit(1, hour_ago_ns + 5);
        tds.submit(2, hour_ago_ns);
        let counters = tds.finish();
        let released: Vec<(u32, bool)> = receiver.iter().collect();
        assert_eq!(released.len(), 2);
        assert!(released.iter().all(|(_, late)| *late));
        assert_eq!(counters.late, 2);
        assert_eq!(counters.released, 2);
    }

    #[test]
    fn messages_leave_in_due_order_not_arrival_order() {
        let (sender, receiver) = mpsc::channel();
        let config = TdsConfig { max_delay: Duration::from_millis(30), ..TdsConfig::default() };
        let tds = TimeDifferential::spawn(config, ClockSource::system(), move |item: u32, release| {
            let _ = sender.send((item, release));
        })
        .expect("thread starts");
        let now_ns = crate::system_now_ns();
        tds.submit(3, now_ns + 2_000_000);
        tds.submit(1, now_ns);
        tds.submit(2, now_ns + 1_000_000);
        let counters = tds.finish();
        let released: Vec<(u32, Release)> = receiver.iter().collect();
        assert_eq!(released.iter().map(|(item, _)| *item).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!(released.iter().all(|(_, release)| release.released_ns >= release.target_ns));
        assert_eq!(counters.late, 0);
    }

    #[test]
    fn the_bound_pushes_the_earliest_out() {
        let (sender, receiver) = mpsc::channel();
        let config = TdsConfig { max_delay: Duration::from_secs(3_600), max_entries: 1, ..TdsConfig::default() };
        let tds = TimeDifferential::spawn(config, ClockSource::system(), move |item: u32, release| {
            let _ = sender.send((item, release.late));
        })
        .expect("thread starts");
        let now_ns = crate::system_now_ns();
        tds.submit(1, now_ns);
        tds.submit(2, now_ns + 1);
        // The first is pushed out by the second, an hour early.
        assert_eq!(receiver.recv_timeout(Duration::from_secs(10)).expect("released"), (1, true));
        assert_eq!(tds.counters().overflowed, 1);
        drop(tds);
    }
}
