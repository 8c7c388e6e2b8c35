//! Persistent delivery: streams, durable subscriptions, replay and archive
//! queries, on the message log of `sift-store`.
//!
//! [`Storage`] owns every open stream and durable subscription of a broker.
//! A published message is stored in every named stream whose topics hold
//! it, whatever its mode; a `persistent` message that no named stream holds
//! goes to the `default` stream. The publisher of a persistent message is
//! confirmed once it is stored ([`gate`]). Stream subscriptions (replays and
//! durables) read the log through a [`consumer::Consumer`], so old and live
//! messages come the same way.
//!
//! On disk, under `data_dir`: `streams/NAME/` (a `stream.json` definition and
//! the segment files, `docs/STORAGE.md`) and `durables/NAME/` (a
//! `durable.json` definition and a position log), and `broker.lock`, held
//! by the one broker that owns the directory ([`lock`]).

pub mod consumer;
pub mod cursor;
pub mod durable;
pub mod gate;
pub mod lock;
pub mod queue_depth;
mod ranges;
pub mod registry;
mod replicated_state;
pub mod settings;
pub mod stream;
pub mod stream_reader;

pub use lock::{DataDirLock, LockError, LockState};
pub use registry::Storage;
pub use settings::{
    check_name, StorageConfig, StorageError, StreamDefinition, DEFAULT_STREAM, DEFINITION_FILE, NAME_BYTES_MAX,
};

/// Syncs durable positions to disk every `storage.position_sync_ms` until
/// the broker shuts down (positions reach the operating system on every
/// change already; this bounds what a power loss can take back).
pub async fn sync_positions(storage: std::sync::Arc<Storage>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let every = std::time::Duration::from_millis(storage.config().position_sync_ms);
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        let syncing = storage.clone();
        // fsync blocks; keep it off the runtime's workers.
        let _ = tokio::task::spawn_blocking(move || syncing.sync_positions()).await;
    }
}
