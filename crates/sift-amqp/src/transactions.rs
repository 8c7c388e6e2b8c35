//! The bound on what a connection's open transactions hold.
//!
//! The AMQP library serves local transactions itself: a transfer posted in
//! a transaction waits in the library's session until the transaction is
//! discharged, and only then reaches the producer's link (on commit) or is
//! dropped (on rollback). Nothing in the library bounds what waits, so the
//! stream check ([`crate::stream`]) keeps this account of it from the
//! frames the client sends, before the library reads them:
//!
//! - an `attach` whose target is a coordinator marks its link as a
//!   transaction controller's, and its `detach` unmarks it;
//! - a transfer whose state is transactional adds its payload's bytes to
//!   its transaction;
//! - a `discharge` sent on a controller's link (commit or rollback alike)
//!   ends the transaction and frees its bytes.
//!
//! When the bytes held by a connection's open transactions would pass
//! `amqp.transaction_bytes_max`, the connection is closed with an error
//! saying so: the library has no way to refuse one posted transfer.
//!
//! One thing the library leaves out is put right here too. A consumer in a
//! transaction retires each message with a *settled* transactional
//! disposition; on rollback the library forgets those dispositions, so the
//! broker would never hear of the messages again and they would stay with
//! the consumer, neither acknowledged nor redelivered. JMS wants them back
//! in the queue, marked redelivered, as ActiveMQ does. So the check notes
//! each retirement, and after a discharge that rolls back it puts into the
//! stream, behind the discharge, one plain disposition per retirement with
//! the outcome `modified` (delivery failed): the consumer's link takes it
//! as a failed delivery, which the broker redelivers and counts.

use std::collections::{HashMap, HashSet};

use bytes::{BufMut, BytesMut};
use fe2o3_amqp::types::definitions::Role;
use fe2o3_amqp::types::messaging::{AmqpValue, DeliveryState, Modified, TargetArchetype};
use fe2o3_amqp::types::performatives::{Attach, Detach, Disposition, Performative, Transfer};
use fe2o3_amqp::types::transaction::Discharge;

use crate::commits::PostedDelivery;
use crate::encoding;

/// A link as the client numbers it: its session's channel and its handle.
pub type LinkKey = (u16, u32);

/// What one retirement counts against `amqp.transaction_bytes_max`: about
/// what the note of it takes.
const RETIREMENT_BYTES: usize = 64;

/// A transactional disposition of the broker's deliveries, kept until its
/// transaction is discharged: the session's channel and the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retirement {
    channel: u16,
    first: u32,
    last: Option<u32>,
}

/// A commit the client sent: the `discharge`'s channel and delivery id, and
/// the deliveries its transaction posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitNotice {
    /// The session's channel.
    pub channel: u16,
    /// The delivery id of the `discharge`.
    pub discharge_id: u32,
    /// What the commit's answer waits for.
    pub posted: Vec<PostedDelivery>,
}

/// What a connection's open transactions hold, by transaction id.
#[derive(Debug, Default)]
pub struct TransactionBudget {
    /// The links whose target is a transaction coordinator.
    controllers: HashSet<LinkKey>,
    /// Payload bytes posted in each open transaction (and
    /// [`RETIREMENT_BYTES`] per retirement).
    held_bytes_by_transaction: HashMap<Vec<u8>, usize>,
    /// The deliveries each open transaction retired.
    retired_by_transaction: HashMap<Vec<u8>, Vec<Retirement>>,
    /// The deliveries each open transaction posted, by producer link name
    /// and delivery id: a commit waits for them ([`crate::commits`]).
    posted_by_transaction: HashMap<Vec<u8>, Vec<PostedDelivery>>,
    /// The name of each link the client sends on (a producer's), by
    /// channel and the client's handle.
    sending_links: HashMap<LinkKey, String>,
    /// Frames to put into the stream behind the frame just checked.
    injected: BytesMut,
    /// Their sum.
    held_bytes: usize,
    /// The most `held_bytes` may reach.
    held_bytes_max: usize,
}

impl TransactionBudget {
    /// A budget of `held_bytes_max` bytes.
    pub fn new(held_bytes_max: usize) -> TransactionBudget {
        TransactionBudget { held_bytes_max, ..TransactionBudget::default() }
    }

    /// Bytes the connection's open transactions hold now.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Whether dispositions need reading: only while the connection has a
    /// transaction controller, since only then can one be transactional.
    pub fn reads_dispositions(&self) -> bool {
        !self.controllers.is_empty()
    }

    /// Frames to put into the stream behind the frame just checked, taken.
    pub fn take_injected(&mut self) -> BytesMut {
        self.injected.split()
    }

    /// Links noted now: controllers and producers.
    pub fn links_noted(&self) -> usize {
        self.controllers.len() + self.sending_links.len()
    }

    /// Notes a link the client attaches.
    pub fn on_attach(&mut self, channel: u16, attach: &Attach) {
        let link = (channel, attach.handle.0);
        match attach.target.as_deref() {
            Some(TargetArchetype::Coordinator(_)) => self.controllers.insert(link),
            _ => self.controllers.remove(&link),
        };
        match (&attach.role, attach.target.as_deref()) {
            (Role::Sender, Some(TargetArchetype::Target(_))) => self.sending_links.insert(link, attach.name.clone()),
            _ => self.sending_links.remove(&link),
        };
    }

    /// Notes a link the client detaches.
    pub fn on_detach(&mut self, channel: u16, detach: &Detach) {
        self.controllers.remove(&(channel, detach.handle.0));
        self.sending_links.remove(&(channel, detach.handle.0));
    }

    /// Accounts for one transfer frame and its payload; an error when the
    /// open transactions would hold more than their bound. A commit comes
    /// out as what its answer waits for.
    pub fn on_transfer(
        &mut self,
        channel: u16,
        transfer: &Transfer,
        payload: &[u8],
    ) -> Result<Option<CommitNotice>, String> {
        let link = (channel, transfer.handle.0);
        if self.controllers.contains(&link) {
            let discharge_id = transfer.delivery_id;
            return Ok(self.on_control_message(payload).zip(discharge_id).map(|(posted, discharge_id)| CommitNotice {
                channel,
                discharge_id,
                posted,
            }));
        }
        let Some(DeliveryState::TransactionalState(state)) = transfer.state.as_ref() else { return Ok(None) };
        self.hold(&state.txn_id, payload.len())?;
        if let (Some(delivery_id), Some(name)) = (transfer.delivery_id, self.sending_links.get(&link)) {
            let posted = self.posted_by_transaction.entry(state.txn_id.to_vec()).or_default();
            posted.push((name.clone(), delivery_id));
        }
        Ok(None)
    }

    /// Notes a disposition the client sends: a transactional one of the
    /// broker's deliveries is a retirement its transaction holds.
    pub fn on_disposition(&mut self, channel: u16, disposition: &Disposition) -> Result<(), String> {
        let Some(DeliveryState::TransactionalState(state)) = disposition.state.as_ref() else {
            return Ok(());
        };
        if disposition.role != Role::Receiver {
            return Ok(());
        }
        self.hold(&state.txn_id, RETIREMENT_BYTES)?;
        let retirement = Retirement { channel, first: disposition.first, last: disposition.last };
        self.retired_by_transaction.entry(state.txn_id.to_vec()).or_default().push(retirement);
        Ok(())
    }

    /// Counts `bytes` more held by a transaction, within the bound.
    fn hold(&mut self, txn_id: &[u8], bytes: usize) -> Result<(), String> {
        let held = self.held_bytes + bytes;
        if held > self.held_bytes_max {
            let limit = self.held_bytes_max;
            return Err(format!(
                "open transactions would hold {held} bytes, over amqp.transaction_bytes_max = {limit}"
            ));
        }
        self.held_bytes = held;
        *self.held_bytes_by_transaction.entry(txn_id.to_vec()).or_default() += bytes;
        debug_assert_eq!(self.held_bytes, self.held_bytes_by_transaction.values().sum::<usize>());
        Ok(())
    }

    /// A controller's message: a discharge frees its transaction's bytes;
    /// a declare (or anything else, which the library refuses) holds none.
    /// A commit comes out as the deliveries its transaction posted.
    fn on_control_message(&mut self, payload: &[u8]) -> Option<Vec<PostedDelivery>> {
        let discharge = discharge_of(payload)?;
        if let Some(bytes) = self.held_bytes_by_transaction.remove(&discharge.txn_id[..]) {
            self.held_bytes -= bytes;
        }
        let retired = self.retired_by_transaction.remove(&discharge.txn_id[..]).unwrap_or_default();
        let posted = self.posted_by_transaction.remove(&discharge.txn_id[..]).unwrap_or_default();
        if discharge.fail == Some(true) {
            for retirement in retired {
                put_failed_delivery(&mut self.injected, retirement);
            }
            return None;
        }
        Some(posted)
    }
}

/// Appends the frame of a settled disposition that gives a rolled-back
/// retirement's deliveries the outcome `modified` (delivery failed).
fn put_failed_delivery(out: &mut BytesMut, retirement: Retirement) {
    let failed = Modified { delivery_failed: Some(true), undeliverable_here: None, message_annotations: None };
    let disposition = Disposition {
        role: Role::Receiver,
        first: retirement.first,
        last: retirement.last,
        settled: true,
        state: Some(DeliveryState::Modified(failed)),
        batchable: false,
    };
    // A disposition always encodes; were it not to, the deliveries would
    // stay with the consumer until its link closes, as without this.
    let Ok(body) = serde_amqp::to_vec(&Performative::Disposition(disposition)) else { return };
    out.put_u32((crate::wire::FRAME_HEADER_BYTES + body.len()) as u32);
    out.put_slice(&[2, 0]);
    out.put_u16(retirement.channel);
    out.put_slice(&body);
}

/// The discharge a controller's message carries in its `amqp-value`
/// section, if it is one. The stream check has already walked the message,
/// so its sections are whole.
fn discharge_of(message: &[u8]) -> Option<Discharge> {
    let mut position = 0;
    while position < message.len() {
        let end = encoding::check_value(message, position).ok()?;
        if let Ok(AmqpValue(discharge)) = serde_amqp::from_slice::<AmqpValue<Discharge>>(&message[position..end]) {
            return Some(discharge);
        }
        position = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp::types::definitions::Handle;
    use fe2o3_amqp::types::messaging::{Accepted, Outcome};
    use fe2o3_amqp::types::transaction::{Coordinator, TransactionId, TransactionalState};

    fn attach(handle: u32, coordinator: bool) -> Attach {
        let target = coordinator.then(|| Box::new(TargetArchetype::Coordinator(Coordinator::new(None))));
        Attach {
            name: format!("link-{handle}"),
            handle: Handle(handle),
            role: Role::Sender,
            snd_settle_mode: Default::default(),
            rcv_settle_mode: Default::default(),
            source: None,
            target,
            unsettled: None,
            incomplete_unsettled: false,
            initial_delivery_count: Some(0),
            max_message_size: None,
            offered_capabilities: None,
            desired_capabilities: None,
            properties: None,
        }
    }

    fn transfer(handle: u32, txn_id: Option<&[u8]>) -> Transfer {
        let state = txn_id.map(|id| {
            DeliveryState::TransactionalState(TransactionalState {
                txn_id: TransactionId::from(id.to_vec()),
                outcome: Some(Outcome::Accepted(Accepted {})),
            })
        });
        Transfer {
            handle: Handle(handle),
            delivery_id: Some(0),
            delivery_tag: None,
            message_format: None,
            settled: None,
            more: false,
            rcv_settle_mode: None,
            state,
            resume: false,
            aborted: false,
            batchable: false,
        }
    }

    fn discharge(txn_id: &[u8], fail: bool) -> Vec<u8> {
        let discharge = Discharge { txn_id: TransactionId::from(txn_id.to_vec()), fail: Some(fail) };
        let mut message = serde_amqp::to_vec(&fe2o3_amqp::types::messaging::Header::default()).expect("a header");
        message.extend(serde_amqp::to_vec(&AmqpValue(discharge)).expect("a discharge encodes"));
        message
    }

    #[test]
    fn transactional_bytes_are_held_until_a_discharge_on_the_controllers_link() {
        let mut budget = TransactionBudget::new(100);
        budget.on_attach(0, &attach(7, true));
        budget.on_transfer(0, &transfer(1, Some(b"t1")), &[0; 40]).expect("within the bound");
        budget.on_transfer(0, &transfer(1, None), &[0; 90]).expect("outside transactions nothing is held");
        budget.on_transfer(0, &transfer(1, Some(b"t2")), &[0; 50]).expect("within the bound");
        assert_eq!(budget.held_bytes(), 90);
        let refused = budget.on_transfer(0, &transfer(1, Some(b"t2")), &[0; 20]).expect_err("over the bound");
        assert!(refused.contains("amqp.transaction_bytes_max = 100"), "{refused}");
        budget.on_transfer(0, &transfer(7, None), &discharge(b"t1", false)).expect("a commit");
        assert_eq!(budget.held_bytes(), 50);
        budget.on_transfer(0, &transfer(7, None), &discharge(b"t2", true)).expect("a rollback");
        assert_eq!(budget.held_bytes(), 0);
    }

    fn retirement(first: u32, txn_id: &[u8]) -> Disposition {
        let state = TransactionalState {
            txn_id: TransactionId::from(txn_id.to_vec()),
            outcome: Some(Outcome::Accepted(Accepted {})),
        };
        Disposition {
            role: Role::Receiver,
            first,
            last: None,
            settled: true,
            state: Some(DeliveryState::TransactionalState(state)),
            batchable: false,
        }
    }

    #[test]
    fn a_rollback_fails_the_deliveries_its_transaction_retired_and_a_commit_leaves_them() {
        let mut budget = TransactionBudget::new(1000);
        budget.on_attach(0, &attach(7, true));
        assert!(budget.reads_dispositions());
        budget.on_disposition(2, &retirement(5, b"t1")).expect("within the bound");
        budget.on_disposition(2, &retirement(9, b"t2")).expect("within the bound");
        assert_eq!(budget.held_bytes(), 2 * RETIREMENT_BYTES);
        budget.on_transfer(0, &transfer(7, None), &discharge(b"t2", false)).expect("a commit");
        assert!(budget.take_injected().is_empty(), "a commit's retirements are the library's to apply");
        budget.on_transfer(0, &transfer(7, None), &discharge(b"t1", true)).expect("a rollback");
        assert_eq!(budget.held_bytes(), 0);
        let injected = budget.take_injected();
        let limits = crate::stream::StreamLimits {
            max_frame_bytes: 4096,
            max_message_bytes: 4096,
            transaction_bytes_max: 4096,
            drain_hold_max: std::time::Duration::from_secs(1),
            commit_wait_max: std::time::Duration::from_secs(1),
            links_max: 1024,
        };
        assert_eq!(crate::wire::decode_frames(&injected, limits).len(), 1, "the frame passes the stream check");
        assert_eq!(u16::from_be_bytes([injected[6], injected[7]]), 2, "on the retirement's channel");
        let body = &injected[crate::wire::FRAME_HEADER_BYTES..];
        let Ok(Performative::Disposition(failed)) = serde_amqp::from_slice::<Performative>(body) else {
            panic!("a disposition");
        };
        assert_eq!((failed.first, failed.settled), (5, true));
        assert!(matches!(failed.state, Some(DeliveryState::Modified(Modified { delivery_failed: Some(true), .. }))));
    }

    fn producer_attach(handle: u32) -> Attach {
        let mut attach = attach(handle, false);
        attach.target = Some(Box::new(TargetArchetype::Target(fe2o3_amqp::types::messaging::Target::default())));
        attach
    }

    #[test]
    fn a_commit_waits_for_the_deliveries_its_transaction_posted_and_a_rollback_for_none() {
        let mut budget = TransactionBudget::new(1000);
        budget.on_attach(0, &attach(7, true));
        budget.on_attach(0, &producer_attach(1));
        budget.on_transfer(0, &transfer(1, Some(b"t1")), &[0; 10]).expect("posted");
        budget.on_transfer(0, &transfer(1, Some(b"t2")), &[0; 10]).expect("posted");
        let commit = budget.on_transfer(0, &transfer(7, None), &discharge(b"t1", false)).expect("a commit");
        let expected = CommitNotice { channel: 0, discharge_id: 0, posted: vec![("link-1".to_string(), 0)] };
        assert_eq!(commit, Some(expected));
        let rollback = budget.on_transfer(0, &transfer(7, None), &discharge(b"t2", true)).expect("a rollback");
        assert_eq!(rollback, None);
    }

    #[test]
    fn a_discharge_counts_only_on_a_controllers_link() {
        let mut budget = TransactionBudget::new(100);
        budget.on_attach(0, &attach(7, false));
        budget.on_transfer(0, &transfer(1, Some(b"t1")), &[0; 40]).expect("within the bound");
        budget.on_transfer(0, &transfer(7, None), &discharge(b"t1", false)).expect("a plain message");
        assert_eq!(budget.held_bytes(), 40, "a plain link's message is not a discharge");
        budget.on_attach(1, &attach(7, true));
        budget.on_transfer(0, &transfer(7, None), &discharge(b"t1", false)).expect("another session's handle");
        assert_eq!(budget.held_bytes(), 40, "the controller is on another channel");
        budget.on_transfer(1, &transfer(7, None), &discharge(b"t1", false)).expect("a commit");
        assert_eq!(budget.held_bytes(), 0);
    }
}
