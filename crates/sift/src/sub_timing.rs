//! `sift sub --order` and `--tds`: the time-ordering buffer and the time
//! differential release between the subscription and the output.
//!
//! A delivery goes into the ordering buffer (when asked) keyed by its
//! timestamp in the broker's clock, which orders it as well as any clock
//! would; what the buffer releases goes to the TDS thread (when asked)
//! keyed by the timestamp carried into this machine's clock, and the TDS
//! prints it at its due time. Without either, lines are printed at once.

use std::io::Write;

use sift_client::{
    Client, ClockEstimate, Delivery, OrderingBuffer, OrderingConfig, Release, TdsConfig, TimeDifferential,
};

use crate::CliError;

/// A delivery on its way out, with the fields the output shows.
struct Outgoing {
    delivery: Delivery,
    /// Its publisher's timestamp in this machine's clock, and the bound.
    local_timestamp_ns: u64,
    time_error_ns: u64,
}

/// The stages between the subscription and standard output.
pub struct TimedOutput {
    client: Client,
    json: bool,
    buffer: Option<OrderingBuffer<Outgoing>>,
    tds: Option<TimeDifferential<Outgoing>>,
    released: Vec<Outgoing>,
    /// The estimate of the broker's clock that timestamps are mapped with.
    /// It is held, not refreshed with every sample: a new sample with a
    /// different round trip would shift the mapping and, with it, the
    /// spacing the TDS keeps. It is replaced only when a newer estimate
    /// proves it wrong (their bounds do not overlap).
    mapping: Option<ClockEstimate>,
    /// Times the mapping was replaced.
    mapping_steps: u64,
}

impl TimedOutput {
    /// The stages `order` and `tds` ask for; with `tds`, the clock is
    /// synchronised with the broker first.
    pub async fn start(
        client: &Client,
        order: Option<OrderingConfig>,
        tds: Option<TdsConfig>,
        json: bool,
    ) -> Result<TimedOutput, CliError> {
        let tds = match tds {
            Some(config) => {
                client.sync_clock(sift_client::CLOCK_SYNC_BURST).await?;
                let print = move |outgoing: Outgoing, release: Release| {
                    let _ = print_line(&outgoing, Some(release), json);
                };
                let tds = TimeDifferential::spawn(config, client.clock(), print)
                    .map_err(|error| CliError::Usage(format!("--tds: cannot start the release thread: {error}")))?;
                Some(tds)
            }
            None => None,
        };
        Ok(TimedOutput {
            client: client.clone(),
            json,
            buffer: order.map(OrderingBuffer::new),
            tds,
            released: Vec::new(),
            mapping: client.clock_estimate(),
            mapping_steps: 0,
        })
    }

    /// True when neither stage is on: lines go out as they come.
    pub fn is_direct(&self) -> bool {
        self.buffer.is_none() && self.tds.is_none()
    }

    /// Takes one delivery in.
    pub fn accept(&mut self, delivery: Delivery) -> Result<(), CliError> {
        let current = self.client.clock_estimate();
        self.update_mapping(current);
        let message = &delivery.message;
        let outgoing = Outgoing {
            local_timestamp_ns: self
                .mapping
                .map_or(message.timestamp_ns, |mapping| mapping.to_local(message.timestamp_ns)),
            time_error_ns: u64::from(message.time_error_ns)
                .saturating_add(current.map_or(0, |current| current.error_ns)),
            delivery,
        };
        match &mut self.buffer {
            Some(buffer) => {
                let timestamp_ns = outgoing.delivery.message.timestamp_ns;
                let bytes = outgoing.delivery.message.payload.len();
                buffer.push(outgoing, timestamp_ns, bytes, self.client.now_ns(), &mut self.released);
            }
            None => self.released.push(outgoing),
        }
        self.pass_on()
    }

    /// Replaces the mapping when `current` proves it wrong, or when there
    /// was none.
    fn update_mapping(&mut self, current: Option<ClockEstimate>) {
        let Some(current) = current else { return };
        let Some(mapping) = self.mapping else {
            self.mapping = Some(current);
            return;
        };
        let apart_ns = mapping.offset_ns.abs_diff(current.offset_ns);
        if apart_ns > mapping.error_ns.saturating_add(current.error_ns) {
            self.mapping = Some(current);
            self.mapping_steps += 1;
        }
    }

    /// When the ordering buffer's wait rule next fires, in this client's clock.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.buffer.as_ref()?.next_deadline_ns()
    }

    /// Applies the buffer's wait rule now.
    pub fn poll(&mut self) -> Result<(), CliError> {
        if let Some(buffer) = &mut self.buffer {
            buffer.poll(self.client.now_ns(), &mut self.released);
        }
        self.pass_on()
    }

    /// Releases everything held (each TDS message at its due time) and
    /// reports what the stages did on standard error.
    pub fn finish(mut self) -> Result<(), CliError> {
        if let Some(buffer) = &mut self.buffer {
            buffer.drain(&mut self.released);
        }
        self.pass_on()?;
        if let Some(buffer) = &self.buffer {
            let counters = buffer.counters();
            report(format_args!(
                "order: {} released in order, {} late; rules fired: entries {}, bytes {}, wait {}",
                counters.released, counters.late, counters.fired_entries, counters.fired_bytes, counters.fired_wait
            ));
        }
        if let Some(tds) = self.tds.take() {
            let counters = tds.finish();
            report(format_args!(
                "tds: {} released, {} late, {} pushed out by the bound; {} wake-ups, {:.3} ms CPU; clock mapping stepped {} times",
                counters.released,
                counters.late,
                counters.overflowed,
                counters.wakeups,
                counters.cpu_ns as f64 / 1e6,
                self.mapping_steps
            ));
        }
        Ok(())
    }

    /// Hands what the buffer released to the TDS, or prints it.
    fn pass_on(&mut self) -> Result<(), CliError> {
        for outgoing in self.released.drain(..) {
            match &self.tds {
                Some(tds) => {
                    let local_timestamp_ns = outgoing.local_timestamp_ns;
                    tds.submit(outgoing, local_timestamp_ns);
                }
                None => print_line(&outgoing, None, self.json)?,
            }
        }
        Ok(())
    }
}

/// Writes a summary line to standard error; a closed standard error (a
/// script that stopped listening) loses the line rather than the run.
fn report(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Prints one released delivery; JSON lines gain the local timestamp, its
/// bound and, after the TDS, the release times.
fn print_line(outgoing: &Outgoing, release: Option<Release>, json: bool) -> Result<(), CliError> {
    let line = if json {
        let mut extra = vec![
            ("redelivered", serde_json::Value::Bool(outgoing.delivery.redelivered)),
            ("local_timestamp_ns", outgoing.local_timestamp_ns.into()),
            ("time_error_ns", outgoing.time_error_ns.into()),
        ];
        if let Some(release) = release {
            extra.push(("release_target_ns", release.target_ns.into()));
            extra.push(("released_ns", release.released_ns.into()));
            extra.push(("late", release.late.into()));
        }
        crate::sub_cmd::message_json(&outgoing.delivery.message, &extra)
    } else {
        crate::sub_cmd::message_text(&outgoing.delivery.message)
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).map_err(CliError::Output)
}
