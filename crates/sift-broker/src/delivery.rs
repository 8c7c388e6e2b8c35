//! Putting one routed message into one subscriber's queue, and handing a
//! departing subscriber's messages to the rest of its queue group.

use sift_proto::ErrorCode;

use crate::conn::{error_frame, ConnShared};
use crate::outbox::{Entry, PushOutcome};
use crate::router::Router;
use crate::stats::{bump, Stats};
use crate::subscription::SubRef;

/// Result of [`push_to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Queued, or dropped by the subscriber's own policy (which is final).
    Done,
    /// Full under `block` for a reliable message: try again when there is space.
    Full,
    /// The subscription is gone; the message may go to another group member.
    Gone,
}

/// Queues `entry` for `target` and acts on the outcome. Never waits.
pub fn push_to(stats: &Stats, target: &SubRef, entry: Entry) -> Pushed {
    let outcome = target.conn.lock().push(target.sub_id, entry);
    let wake = matches!(outcome, PushOutcome::Queued { wake_writer: true });
    if wake {
        target.conn.writer_wake.notify_one();
    }
    act_on(stats, target, outcome)
}

/// Queues a batch of best-effort entries for subscriptions of one
/// connection under one lock, with at most one writer wake-up.
pub fn push_batch(stats: &Stats, conn: &ConnShared, batch: &mut Vec<(SubRef, Entry)>, lost: &mut u64) {
    let mut outcomes = Vec::new();
    let mut wake = false;
    {
        let mut outbox = conn.lock();
        for (target, entry) in batch.drain(..) {
            match outbox.push(target.sub_id, entry) {
                PushOutcome::Queued { wake_writer } => wake |= wake_writer,
                other => outcomes.push((target, other)),
            }
        }
    }
    if wake {
        conn.writer_wake.notify_one();
    }
    for (target, outcome) in outcomes {
        // Best-effort promises at most once: a copy whose subscriber just
        // went away is counted lost, not handed to another group member.
        if act_on(stats, &target, outcome) == Pushed::Gone {
            *lost += 1;
        }
    }
}

/// Acts on a push outcome after the outbox lock is released.
fn act_on(stats: &Stats, target: &SubRef, outcome: PushOutcome) -> Pushed {
    match outcome {
        PushOutcome::Queued { .. } => {}
        PushOutcome::Dropped(dropped) => {
            bump(&stats.dropped_queue_full);
            dropped.routed.report_lost(target.key);
        }
        PushOutcome::Evicted(evicted) => {
            bump(&stats.dropped_keep_last);
            target.conn.writer_wake.notify_one();
            evicted.routed.report_lost(target.key);
        }
        PushOutcome::Disconnect(dropped) => {
            let message = format!("subscription {} fell behind and its policy is disconnect", target.sub_id);
            let error = error_frame(ErrorCode::SlowConsumer, u64::from(target.sub_id), true, message);
            // Several copies of one batch can find the queue full; the
            // subscriber is disconnected (and counted) once.
            if target.conn.close(Some(error)) {
                bump(&stats.slow_consumer_disconnects);
            }
            dropped.routed.report_lost(target.key);
        }
        PushOutcome::Gone(_) => return Pushed::Gone,
        PushOutcome::Full(_) => return Pushed::Full,
    }
    Pushed::Done
}

/// Hands the messages of a departed subscription to another member of its
/// queue group (reliable ones only: best-effort promises nothing), or counts
/// them lost. Messages moved this way are marked redelivered.
pub fn hand_over((router, stats): (&Router, &Stats), departed: &SubRef, entries: Vec<Entry>) {
    let mut cursor = departed.key as usize;
    for entry in entries {
        let reliable = entry.routed.needs_ack;
        let taken = match (&departed.group, reliable) {
            (Some(group), true) => {
                cursor += 1;
                match take_over((router, stats), departed, group, entry, cursor) {
                    Ok(()) => continue,
                    Err(returned) => returned,
                }
            }
            _ => entry,
        };
        bump(&stats.dropped_subscriber_gone);
        taken.routed.report_lost(departed.key);
    }
}

/// Gives `entry` to a live member of `group` that matches its topic and
/// whose content filter, if any, passes it.
fn take_over(
    (router, stats): (&Router, &Stats),
    departed: &SubRef,
    group: &str,
    entry: Entry,
    cursor: usize,
) -> Result<(), Entry> {
    let Some(topic) = entry.routed.topic() else { return Err(entry) };
    let matches = router.matches_uncached(&topic);
    let Some((_, members)) = matches.groups.iter().find(|(name, _)| &**name == group) else {
        return Err(entry);
    };
    // Members with content filters take only what passes them; the message
    // is decoded back from its encoding for that (a rare path).
    let filtered = members.iter().any(|member| member.content.is_some());
    let message = if filtered { sift_proto::decode_message(&entry.routed.encoded).ok() } else { None };
    let mut entry = entry;
    for offset in 0..members.len() {
        let member = &members[(cursor + offset) % members.len()];
        if member.key == departed.key || member.conn.is_closing() {
            continue;
        }
        if member.content.is_some() && !message.as_ref().is_some_and(|message| member.accepts(message)) {
            continue;
        }
        // Rename the owed ack before the push: the new member may ack at once.
        let report = entry.routed.report.clone();
        if let Some(report) = &report {
            report.reassign(departed.key, member.key, member.label.clone());
        }
        let pushed = member.conn.lock().push_unbounded(member.sub_id, entry);
        match pushed {
            Ok(wake) => {
                if wake {
                    member.conn.writer_wake.notify_one();
                }
                bump(&stats.redelivered);
                return Ok(());
            }
            Err(returned) => {
                if let Some(report) = &report {
                    report.reassign(member.key, departed.key, departed.label.clone());
                }
                entry = returned;
            }
        }
    }
    Err(entry)
}
