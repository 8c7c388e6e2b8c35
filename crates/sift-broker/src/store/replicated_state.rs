//! A replicated stream's state changes applied to this broker's storage
//! (`crate::replication::durables`): durable subscriptions made, moved and
//! removed at another member are made, moved and removed here, so that
//! their subscribers can resume here.

use std::sync::Arc;

use super::consumer::Consumer;
use super::cursor::Cursor;
use super::durable::{DurableDefinition, DurableRecord};
use super::registry::{parse_definition, Storage, DURABLES_DIR};
use crate::replication::durables::StateChange;

impl Storage {
    /// Applies `change`, committed in the log of the replicated stream
    /// `stream`. Runs on every member in log order; a change this broker
    /// cannot apply is logged and passed over (its durables then stand as
    /// they are, and a subscriber resumes from there).
    pub fn apply_replicated(&self, stream: &str, change: StateChange) {
        match change {
            StateChange::Durable { definition, ack_floor } => self.adopt_durable(stream, definition, ack_floor),
            StateChange::Position { name, ack_floor, done_above } => {
                let position = StateChange::position(ack_floor, &done_above);
                let Some(consumer) = self.durable(&name) else { return };
                // A durable with subscribers here is the one these
                // positions come from; its own cursor is ahead.
                // A subscriber that came here from another replica is given
                // nothing before the positions its acknowledgements there
                // stored are applied ([`crate::replication`]'s catch-up):
                // the cursor takes them in while nothing is in flight.
                if consumer.stream.name() != stream {
                    return;
                }
                consumer.cursor.advance_to(&position);
                if let (Some(record), Some(moved)) = (&consumer.durable, consumer.cursor.take_position()) {
                    record.store_position(&moved);
                }
            }
            StateChange::Barrier => {}
            StateChange::DurableRemoved { name } => {
                let idle = self.durable(&name).is_some_and(|consumer| consumer.member_count() == 0);
                if idle {
                    if let Err((_, why)) = self.remove_durable_here(&name) {
                        tracing::warn!(durable = %name, %why, "a durable removed at another replica stays here");
                    }
                }
            }
        }
    }

    /// Makes the durable `definition` made at another member, without a
    /// consumer, unless it exists here already.
    fn adopt_durable(&self, stream: &str, definition: DurableDefinition, ack_floor: u64) {
        let mut durables = self.durables_lock();
        if durables.contains_key(&definition.name) || definition.stream != stream {
            return;
        }
        let name = definition.name.clone();
        let made = (|| {
            let stream = self.stream(stream).ok_or_else(|| format!("no stream {stream}"))?;
            let (topic_filter, content) = parse_definition(&definition)?;
            let start = StateChange::position(ack_floor, &[]);
            let dir = self.root().join(DURABLES_DIR).join(&definition.name);
            let record = DurableRecord::create(&dir, definition, &start).map_err(|error| error.to_string())?;
            let cursor = Arc::new(Cursor::resuming(&start));
            Ok::<_, String>(Arc::new(Consumer::new(stream, cursor, topic_filter, content, Some(record))))
        })();
        match made {
            Ok(consumer) => {
                durables.insert(name, consumer);
            }
            Err(why) => tracing::warn!(durable = %name, %why, "a durable made at another replica is not made here"),
        }
    }
}
