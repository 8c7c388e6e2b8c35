//! Putting one routed message into one subscriber's queue, and handing a
//! departing subscriber's messages to the rest of its queue group.

use std::sync::Arc;
use std::time::Duration;

use sift_proto::ErrorCode;

use crate::connection::{apply_events, error_frame};
use crate::outbox::{failure_event, Entry, PushOutcome};
use crate::server::BrokerShared;
use crate::stats::bump;
use crate::subscription::SubRef;

/// How long a publisher blocked on a full `block` queue waits before it looks
/// again; a wake-up normally comes sooner, from the subscriber's writer.
const BLOCKED_RECHECK: Duration = Duration::from_millis(50);

/// Result of [`deliver`].
#[derive(Debug)]
pub enum Delivered {
    /// Queued (or dropped by the subscriber's own policy, which is final).
    Done,
    /// The subscription is gone; the entry can go to another group member.
    Gone(Entry),
}

/// Queues `entry` for `target`, applying its policy. Under `block` a reliable
/// entry waits here for space, which holds back this publisher only.
pub async fn deliver(shared: &BrokerShared, target: &SubRef, mut entry: Entry) -> Delivered {
    let mut blocked = false;
    loop {
        let space = target.conn.space.notified();
        tokio::pin!(space);
        space.as_mut().enable();
        let outcome = target.conn.lock().push(target.sub_id, entry);
        match outcome {
            PushOutcome::Queued { wake_writer } => {
                if wake_writer {
                    target.conn.writer_wake.notify_one();
                }
                return Delivered::Done;
            }
            PushOutcome::Dropped(dropped) => {
                bump(&shared.stats.dropped_queue_full);
                apply_events(failure_event(&dropped, target.key).into_iter().collect());
                return Delivered::Done;
            }
            PushOutcome::Evicted(evicted) => {
                bump(&shared.stats.dropped_keep_last);
                target.conn.writer_wake.notify_one();
                apply_events(failure_event(&evicted, target.key).into_iter().collect());
                return Delivered::Done;
            }
            PushOutcome::Disconnect(dropped) => {
                bump(&shared.stats.slow_consumer_disconnects);
                let message = format!(
                    "subscription {} fell behind and its policy is disconnect",
                    target.sub_id
                );
                target.conn.close(Some(error_frame(
                    ErrorCode::SlowConsumer,
                    u64::from(target.sub_id),
                    true,
                    message,
                )));
                apply_events(failure_event(&dropped, target.key).into_iter().collect());
                return Delivered::Done;
            }
            PushOutcome::Gone(returned) => return Delivered::Gone(returned),
            PushOutcome::Full(returned) => {
                if !blocked {
                    blocked = true;
                    bump(&shared.stats.publisher_blocked);
                }
                entry = returned;
                if shared.is_shutting_down() {
                    apply_events(failure_event(&entry, target.key).into_iter().collect());
                    return Delivered::Done;
                }
                let _ = tokio::time::timeout(BLOCKED_RECHECK, space).await;
            }
        }
    }
}

/// Hands the messages of a departed subscription to another member of its
/// queue group (reliable ones only: best-effort promises nothing), or counts
/// them lost. Messages moved this way are marked redelivered.
pub fn hand_over(shared: &Arc<BrokerShared>, departed: &SubRef, entries: Vec<Entry>) {
    let mut cursor = departed.key as usize;
    for mut entry in entries {
        let reliable = entry.routed.message.delivery_mode.needs_ack();
        let taken = match (&departed.group, reliable) {
            (Some(group), true) => {
                entry.attempts += 1;
                cursor += 1;
                match take_over(shared, departed, group, entry, cursor) {
                    Ok(()) => continue,
                    Err(returned) => returned,
                }
            }
            _ => entry,
        };
        bump(&shared.stats.dropped_subscriber_gone);
        apply_events(failure_event(&taken, departed.key).into_iter().collect());
    }
}

/// Gives `entry` to a live member of `group` that matches its topic.
fn take_over(
    shared: &BrokerShared,
    departed: &SubRef,
    group: &str,
    entry: Entry,
    cursor: usize,
) -> Result<(), Entry> {
    let matches = shared.router.matches_uncached(&entry.routed.message.topic);
    let Some((_, members)) = matches.groups.iter().find(|(name, _)| &**name == group) else {
        return Err(entry);
    };
    let mut entry = entry;
    for offset in 0..members.len() {
        let member = &members[(cursor + offset) % members.len()];
        if member.key == departed.key || member.conn.is_closing() {
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
                bump(&shared.stats.redelivered);
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
