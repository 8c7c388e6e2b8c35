//! `RAFT` frames across the network: a replicated stream's calls between
//! its replicas, and publishes forwarded to its leader, routed hop by hop
//! to the broker they name as delivery reports are (each broker sends them
//! to the first hop of its own shortest path there). Replicas need not be
//! neighbours: any broker of the network carries their calls.

use sift_proto::link::{LinkFrame, RaftFrame};
use tokio::sync::mpsc::error::TrySendError;

use crate::stats::{bump, Stats};

use super::frames::encode;
use super::network::LinkNetwork;

/// Why a `RAFT` frame was not sent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteFailure {
    /// No path to the broker it names is known now.
    NoPath,
    /// The first hop's send queue is full.
    QueueFull,
}

impl LinkNetwork {
    /// Sends `frame` towards the broker it names (not this one).
    pub(crate) fn route_raft(&self, frame: RaftFrame, stats: &Stats) -> Result<(), RouteFailure> {
        let state = self.lock();
        debug_assert_ne!(frame.to, *state.own_name, "a frame for this broker is not routed");
        let hop = state.topology.tree(&state.own_name).first_hop(&frame.to);
        let Some(live) = hop.as_ref().and_then(|hop| state.links.get(hop)) else {
            bump(&stats.raft_frames_dropped);
            return Err(RouteFailure::NoPath);
        };
        let Some(bytes) = encode(&LinkFrame::Raft(frame)) else { return Err(RouteFailure::NoPath) };
        match live.sender.try_send(bytes) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                bump(&stats.raft_frames_dropped);
                Err(RouteFailure::QueueFull)
            }
            Err(TrySendError::Closed(_)) => {
                bump(&stats.raft_frames_dropped);
                Err(RouteFailure::NoPath)
            }
        }
    }
}
