//! `PUBLISH`: check, stamp, match, queue, confirm.
//!
//! This is the hot path. The reader that decoded the frame does all of it:
//! the message is encoded once, wrapped in one shared [`Routed`], and a
//! reference is pushed into each matching subscriber's outbox; that
//! subscriber's writer copies the bytes to its socket.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use sift_core::DeliveryMode;
use sift_proto::{
    encode_message, publish_flags, Confirm, ConfirmStatus, ErrorCode, Frame, Publish,
};

use crate::connection::Session;
use crate::delivery::{deliver, Delivered};
use crate::outbox::{failure_event, Entry, Routed};
use crate::report::DeliveryReport;
use crate::stats::bump;
use crate::subscription::SubRef;

/// Nanoseconds since the Unix epoch, or 0 if the clock is before it.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
        })
}

impl Session {
    /// Handles one publish; always returns true (the connection goes on).
    pub(crate) async fn publish(&mut self, publish: Publish) -> bool {
        let Publish {
            request_id,
            flags,
            await_timeout_ms,
            mut message,
        } = publish;
        let limits = &self.shared.config.limits;
        if message.payload.len() > limits.max_payload_bytes as usize {
            let text = format!(
                "payload is {} bytes; max_payload_bytes = {}",
                message.payload.len(),
                limits.max_payload_bytes
            );
            self.refuse(ErrorCode::PayloadTooLarge, request_id, text);
            return true;
        }
        if message.delivery_mode == DeliveryMode::Persistent {
            let text =
                "persistent delivery is not available on this broker yet; use reliable".to_string();
            self.refuse(ErrorCode::Unsupported, request_id, text);
            return true;
        }
        let await_delivered = flags & publish_flags::AWAIT_DELIVERED != 0;
        if await_delivered {
            // Waiting for acknowledgements only makes sense for messages that get them.
            message.delivery_mode = DeliveryMode::Reliable;
        }
        let wants_confirm =
            flags & publish_flags::CONFIRM != 0 || message.delivery_mode.needs_ack();
        message.id = self.shared.next_message_id.fetch_add(1, Ordering::Relaxed);
        message.publisher.clone_from(&self.conn.name);
        message.timestamp_ns = now_ns();
        bump(&self.shared.stats.messages_published);

        let matches =
            self.shared
                .router
                .matches(&message.topic, &mut self.cache, &self.shared.stats);
        let matched = (matches.plain.len() + matches.groups.len()) as u32;
        if matched == 0 {
            bump(&self.shared.stats.messages_unmatched);
            if wants_confirm {
                self.confirm(request_id, ConfirmStatus::NoSubscribers, 0);
            }
            return true;
        }
        let mut encoded =
            BytesMut::with_capacity(64 + message.topic.as_str().len() + message.payload.len());
        if let Err(error) = encode_message(&mut encoded, &message) {
            self.refuse(ErrorCode::InvalidField, request_id, error.to_string());
            return true;
        }
        let report =
            await_delivered.then(|| DeliveryReport::new(self.conn.clone(), request_id, matched));
        let targets = self.pick_targets(&matches.plain, &matches.groups);
        if let Some(report) = &report {
            for target in &targets {
                report.expect(target.key, target.label.clone());
            }
        }
        let routed = Arc::new(Routed {
            message,
            encoded: encoded.freeze(),
            report: report.clone(),
        });
        for target in &targets {
            self.deliver_one(target, &routed, &matches.groups).await;
        }
        match report {
            Some(report) => self.arm_report_timeout(report, await_timeout_ms),
            None if wants_confirm => self.confirm(request_id, ConfirmStatus::Accepted, matched),
            None => {}
        }
        true
    }

    /// Every plain subscription plus one member of each queue group, chosen
    /// round-robin.
    fn pick_targets(
        &mut self,
        plain: &[SubRef],
        groups: &[(Arc<str>, Vec<SubRef>)],
    ) -> Vec<SubRef> {
        let mut targets = Vec::with_capacity(plain.len() + groups.len());
        targets.extend(plain.iter().cloned());
        for (_, members) in groups {
            self.group_cursor = self.group_cursor.wrapping_add(1);
            targets.push(members[self.group_cursor % members.len()].clone());
        }
        targets
    }

    /// Delivers to `target`; if it has just gone away and belongs to a group,
    /// tries the other members of the group.
    async fn deliver_one(
        &mut self,
        target: &SubRef,
        routed: &Arc<Routed>,
        groups: &[(Arc<str>, Vec<SubRef>)],
    ) {
        let Delivered::Gone(mut entry) =
            deliver(&self.shared, target, Entry::new(routed.clone())).await
        else {
            return;
        };
        let members = target
            .group
            .as_ref()
            .and_then(|group| groups.iter().find(|(name, _)| name == group))
            .map(|(_, members)| members.as_slice())
            .unwrap_or_default();
        // The key under which the report expects an ack follows the entry.
        let mut owner_key = target.key;
        for member in members.iter().filter(|member| member.key != target.key) {
            if let Some(report) = &routed.report {
                report.reassign(owner_key, member.key, member.label.clone());
            }
            owner_key = member.key;
            match deliver(&self.shared, member, entry).await {
                Delivered::Done => return,
                Delivered::Gone(returned) => entry = returned,
            }
        }
        bump(&self.shared.stats.dropped_subscriber_gone);
        if let Some(event) = failure_event(&entry, owner_key) {
            event.apply();
        }
    }

    fn arm_report_timeout(&self, report: Arc<DeliveryReport>, requested_ms: u32) {
        let delivery = &self.shared.config.delivery;
        let timeout_ms = match requested_ms {
            0 => delivery.await_timeout_ms_default,
            requested => requested.min(delivery.await_timeout_ms_max),
        };
        if report.is_finished() {
            return;
        }
        let shutdown = self.shared.shutdown_watch();
        tokio::spawn(async move {
            let mut shutdown = shutdown;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(u64::from(timeout_ms))) => {}
                _ = shutdown.changed() => {}
            }
            report.time_out();
        });
    }

    fn confirm(&self, request_id: u64, status: ConfirmStatus, matched: u32) {
        let confirm = Confirm {
            request_id,
            status,
            matched,
            acked: 0,
            pending: Vec::new(),
        };
        self.conn.send_control(&Frame::Confirm(confirm));
    }
}
