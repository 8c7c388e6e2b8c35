//! A JBI publisher: publishes its objects one at a time, each only after
//! the broker confirmed the previous one (§6: "the publisher [had] to
//! finish publishing an object and receive an acknowledgement before
//! publishing the next object").

use std::sync::Arc;
use std::time::Duration;

use sift_client::{Client, ConfirmStatus, PublishOptions};
use sift_core::workload::JbiWorkload;
use sift_core::{DeliveryMode, Message};

use super::plan::{Confirmation, Source};
use super::subscriber::Tally;
use crate::error::BenchError;

/// How long the broker waits for a sync object's acknowledgements. The
/// slowest object of the grid (twenty deliveries of 52 KB over the slow
/// link) needs under a tenth of a second; a longer wait means a fault.
pub const AWAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// What one publisher's confirms said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confirmed {
    /// Objects published.
    pub objects: u64,
    /// Deliveries the broker owed: subscriptions matched, over all objects.
    pub matched: u64,
    /// Deliveries acknowledged (sync only).
    pub acknowledged: u64,
    /// Objects that matched no subscription (the report's 404).
    pub unmatched: u64,
    /// Sync objects whose wait ended before every acknowledgement.
    pub incomplete: u64,
    /// When the last confirm came, in nanoseconds on the run's [`Tally`] clock.
    pub last_confirm_ns: u64,
}

impl Confirmed {
    /// Adds another publisher's counts.
    pub fn add(&mut self, other: &Confirmed) {
        self.objects += other.objects;
        self.matched += other.matched;
        self.acknowledged += other.acknowledged;
        self.unmatched += other.unmatched;
        self.incomplete += other.incomplete;
        self.last_confirm_ns = self.last_confirm_ns.max(other.last_confirm_ns);
    }
}

/// The `level` objects of `source` with payloads of `payload_bytes`, in the
/// delivery mode `confirmation` asks for. Made before the clock starts, so
/// that the run measures the broker and not the generator (at most
/// 2,000 objects of 52 KB, about 100 MB).
pub fn objects(
    source: Source,
    level: u64,
    payload_bytes: usize,
    confirmation: Confirmation,
) -> Result<Vec<Message>, BenchError> {
    let workload = JbiWorkload::new(source.seed)
        .map_err(|error| BenchError::Usage(error.to_string()))?
        .with_payload_bytes(payload_bytes);
    let mode = match confirmation {
        Confirmation::Sync => DeliveryMode::Reliable,
        Confirmation::Async => DeliveryMode::BestEffort,
    };
    Ok((0..level)
        .map(|index| {
            let mut object = workload.object_of(source.object_type, index);
            object.delivery_mode = mode;
            object
        })
        .collect())
}

/// Publishes `objects` one at a time, each after the previous one's
/// confirm, then closes the client; confirm times are read on `tally`'s clock.
pub async fn publish(
    client: Client,
    objects: Vec<Message>,
    confirmation: Confirmation,
    tally: Arc<Tally>,
) -> Result<Confirmed, BenchError> {
    let options = PublishOptions {
        await_delivered: confirmation == Confirmation::Sync,
        await_timeout: (confirmation == Confirmation::Sync).then_some(AWAIT_TIMEOUT),
    };
    let mut confirmed = Confirmed::default();
    let result = publish_each(&client, objects, options, &tally, &mut confirmed).await;
    client.close().await;
    result.map(|()| confirmed)
}

async fn publish_each(
    client: &Client,
    objects: Vec<Message>,
    options: PublishOptions,
    tally: &Tally,
    confirmed: &mut Confirmed,
) -> Result<(), BenchError> {
    for mut object in objects {
        // Signed here, in the measured run, as a publisher signs as it sends.
        crate::signing::sign(&mut object);
        let confirm = client.publish_confirmed(object, options).await?;
        confirmed.last_confirm_ns = tally.now_ns();
        confirmed.objects += 1;
        confirmed.matched += u64::from(confirm.matched);
        confirmed.acknowledged += u64::from(confirm.acked);
        match confirm.status {
            ConfirmStatus::NoSubscribers => confirmed.unmatched += 1,
            ConfirmStatus::Incomplete => confirmed.incomplete += 1,
            ConfirmStatus::Accepted | ConfirmStatus::Delivered => {}
        }
    }
    Ok(())
}
