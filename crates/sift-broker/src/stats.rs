//! Broker-wide counters. Every drop, redelivery and limit hit is counted here
//! so that an operator can see what the broker did and why.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Broker-wide counters, updated with relaxed atomics.
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        /// A point-in-time copy of [`Stats`].
        #[derive(Debug, Default, Clone, PartialEq, Eq)]
        pub struct StatsSnapshot {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Stats {
            /// Copies every counter.
            pub fn snapshot(&self) -> StatsSnapshot {
                StatsSnapshot { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl StatsSnapshot {
            /// Name and value of every counter, in declaration order.
            pub fn entries(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

counters! {
    /// Connections accepted since start.
    connections_accepted,
    /// Connections refused by `max_connections`.
    connections_refused,
    /// Connections open now.
    connections_current,
    /// In-process connections opened since start (the HTTP front-end's
    /// sessions); counted in `connections_accepted` too.
    connections_in_process,
    /// Messages accepted from publishers.
    messages_published,
    /// Deliveries written to subscribers.
    messages_delivered,
    /// Publishes that matched no subscription.
    messages_unmatched,
    /// Bytes read from clients.
    bytes_received,
    /// Bytes written to clients.
    bytes_sent,
    /// Deliveries dropped because a `drop-new` (or full `block`, best-effort) queue was full.
    dropped_queue_full,
    /// Deliveries evicted by `keep-last` to make room for newer ones.
    dropped_keep_last,
    /// Deliveries dropped because the message expired before it was sent.
    dropped_expired,
    /// Deliveries dropped after `max_redeliveries`, or nacked without requeue.
    dropped_rejected,
    /// Deliveries lost because their subscriber went away with no group to take them.
    dropped_subscriber_gone,
    /// Reliable deliveries sent again after an ack timeout, a nack or a disconnect.
    redelivered,
    /// Connections closed for falling behind: the `disconnect` policy, or
    /// unread responses over `max_pending_bytes_per_connection`.
    slow_consumer_disconnects,
    /// Times a reliable publisher waited for space in a `block` queue.
    publisher_blocked,
    /// Error frames sent to clients.
    errors_sent,
    /// `AUTH`s that signed a session in.
    auth_sign_ins,
    /// `AUTH`s refused (unknown user, wrong password, refused token).
    auth_failures,
    /// Sessions closed for acting before signing in on a broker that requires it.
    auth_required_closes,
    /// Actions refused because the user (or anonymous access) may not do them.
    permission_denials,
    /// Sessions or subscriptions refused by a user's `connections_max` or
    /// `subscriptions_max`.
    user_limit_refusals,
    /// Publishes that waited for their user's `publish_*_per_s_max`.
    publishes_throttled,
    /// Messages refused on a signed topic: unsigned, by another key, or forged.
    signature_refusals,
    /// `FORWARD`s dropped because a neighbour's `[[broker]]` grant does not
    /// let it send them here, or be sent them.
    link_permission_drops,
    /// ACK or NACK tags that were not awaiting an acknowledgement.
    unknown_delivery_tags,
    /// Match lookups answered from a connection's cache.
    match_cache_hits,
    /// Match lookups that walked the subject trie.
    match_cache_misses,
    /// Chunks the readers allocated to encode published messages into.
    encode_arena_chunks,
    /// Broker links up now.
    links_up,
    /// Broker links that completed their handshake since start.
    links_established,
    /// Link dials that failed: no connection, or a handshake that failed or was refused.
    link_connect_failures,
    /// `LINK_STATE` records received from other brokers.
    link_states_received,
    /// `INTEREST` frames queued on links: increments originated or flooded, and resync copies.
    interest_updates_sent,
    /// `INTEREST` frames received from other brokers (increments and resync copies).
    interest_updates_received,
    /// Full interest resync brackets received complete.
    interest_resyncs_received,
    /// Other brokers' interest entries held now.
    interest_entries,
    /// `LINK_ERROR`s sent or received, and links dropped for silence or a full send queue.
    link_errors,
    /// `FORWARD` frames queued on links: one per message per next hop.
    messages_forwarded,
    /// `FORWARD`s received from other brokers and taken (not duplicates).
    forwards_received,
    /// `FORWARD`s received again (same origin and origin sequence) and dropped.
    forward_duplicates_dropped,
    /// `FORWARD`s delivered here but not sent on: their hop count reached the hop limit.
    forward_hop_limit_dropped,
    /// `FORWARD`s not queued because the link's send queue was full (best-effort).
    forward_queue_full_dropped,
    /// Gauge: reliable `FORWARD`s kept until acknowledged, plus reliable messages stranded by failed links.
    forward_frames_kept,
    /// Re-routed `FORWARD`s sent: stranded messages sent again over the paths that remain.
    forwards_rerouted,
    /// Reliable `FORWARD`s not kept because `network.link_unacked_frames_max` was reached.
    forward_unacked_full_dropped,
    /// Stranded reliable messages dropped after `network.stranded_expiry_ms` without a path.
    forward_stranded_expired,
    /// `LINK_ACK`s sent.
    link_acks_sent,
    /// `LINK_ACK`s received.
    link_acks_received,
    /// `DELIVERY_REPORT`s this broker originated (for messages forwarded to it).
    delivery_reports_sent,
    /// `DELIVERY_REPORT`s received from neighbours (to apply or pass on).
    delivery_reports_received,
    /// `DELIVERY_REPORT`s dropped: nobody awaits them, no path to the origin, or a full link queue.
    delivery_reports_dropped,
    /// Await=delivered publishes whose remote reports were not awaited: `network.awaited_reports_max` reached.
    awaited_reports_full,
    /// Messages whose queue group was served by another broker (one per group).
    group_forwards,
    /// Reads held back because a broker link's send queue was nearly full.
    link_congestion_stalls,
    /// Persistent messages handed to their streams (confirmed once stored).
    persistent_published,
    /// Persistent publishes refused at once because a stream's disk refused the last write.
    persistent_refused,
    /// Stored messages queued for stream subscribers (replays and durables).
    stream_deliveries,
    /// Messages held for a later delivery time (`JMSDeliveryTime`).
    scheduled,
    /// Held messages released to the subscribers there were at their time.
    scheduled_released,
    /// Copies of released messages whose subscriber had gone.
    scheduled_subscriber_gone,
    /// Publishes refused because `limits.scheduled_max` messages were held.
    scheduled_refusals,
    /// Publishes refused because their queue held `storage.queue_max_msgs` messages.
    queue_full_refusals,
    /// Stored messages a shared durable held back: no subscriber's own filter passed them yet.
    stream_parked,
    /// Message groups whose member a shared durable forgot: `storage.message_groups_max` reached.
    message_groups_forgotten,
    /// `GAP` frames sent: stored messages a stream subscriber will never get.
    stream_gaps,
    /// Messages those gaps covered.
    stream_gap_messages,
    /// Archive queries run.
    queries,
    /// Messages archive queries returned.
    query_results,
    /// Stored messages archive queries scanned.
    query_scanned,
    /// Calls this broker sent to replicas of its replicated streams (and publishes forwarded to leaders).
    raft_calls_sent,
    /// Of those, calls that got no answer: no path, no answer in time.
    raft_calls_failed,
    /// Calls not sent because `storage.raft_calls_max` calls awaited answers.
    raft_calls_full,
    /// Calls from other brokers this broker answered.
    raft_calls_served,
    /// `RAFT` frames passed on towards another broker.
    raft_frames_passed_on,
    /// `RAFT` frames dropped: no path to their broker, or a full link queue.
    raft_frames_dropped,
    /// Messages a replicated stream's group stored (committed) as this broker's leader wrote them.
    replicated_appends,
    /// Raft entries (batches of messages) this broker wrote as a replicated stream's leader.
    replicated_batches,
    /// Publishes to a replicated stream that this broker forwarded to the stream's leader.
    replicated_forwarded,
    /// Persistent publishes to a replicated stream refused with `no_quorum`.
    replicated_no_quorum,
    /// Messages to a replicated stream nobody waited for (not persistent), or durable positions, dropped: `storage.raft_calls_max` of them were under way.
    replicated_unconfirmed_dropped,
}

/// Adds one to a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds `amount` to a counter.
pub(crate) fn add(counter: &AtomicU64, amount: u64) {
    counter.fetch_add(amount, Ordering::Relaxed);
}

/// Counters a reader updates per message, kept locally and added to the
/// broker-wide [`crate::stats::Stats`] once per read, so that the hot path
/// does not bounce shared cache lines between cores.
#[derive(Debug, Default)]
pub struct LocalCounters {
    /// Messages accepted.
    pub published: u64,
    /// Publishes that matched nothing.
    pub unmatched: u64,
    /// Match lookups answered by the cache.
    pub cache_hits: u64,
    /// Match lookups that walked the trie.
    pub cache_misses: u64,
    /// Copies lost because their subscriber went away.
    pub subscriber_gone: u64,
    /// Encode-arena chunks allocated.
    pub encode_arena_chunks: u64,
    /// Persistent messages handed to their streams.
    pub persistent_stored: u64,
}

impl LocalCounters {
    pub(crate) fn flush(&mut self, stats: &Stats) {
        let taken = std::mem::take(self);
        for (counter, amount) in [
            (&stats.messages_published, taken.published),
            (&stats.messages_unmatched, taken.unmatched),
            (&stats.match_cache_hits, taken.cache_hits),
            (&stats.match_cache_misses, taken.cache_misses),
            (&stats.dropped_subscriber_gone, taken.subscriber_gone),
            (&stats.encode_arena_chunks, taken.encode_arena_chunks),
            (&stats.persistent_published, taken.persistent_stored),
        ] {
            if amount != 0 {
                add(counter, amount);
            }
        }
    }
}
