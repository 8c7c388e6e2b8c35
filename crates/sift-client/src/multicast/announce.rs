//! Interest announcements: how a LAN's subscribers tell its gateway what
//! they want, so that the gateway asks the broker network for exactly that
//! (FJM2D forwards by interest in both directions).
//!
//! Each subscriber multicasts its subscriptions as one object of mode
//! [`MODE_INTEREST`](super::MODE_INTEREST) every [`ANNOUNCE_INTERVAL`], and
//! at once when they change; the data is JSON:
//! `{"ttl_ms": 15000, "subscriptions": [{"topic": "q.>", "kind": "sql", "filter": "price > 100"}]}`.
//! An announcement replaces the node's previous one and lapses after
//! `ttl_ms` without a renewal, so a subscriber that goes away is forgotten
//! without saying goodbye.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// How often a subscriber repeats its announcement.
pub const ANNOUNCE_INTERVAL: Duration = Duration::from_secs(5);
/// How long an announcement holds without a renewal: three intervals.
pub const ANNOUNCE_TTL: Duration = Duration::from_secs(15);
/// Subscriptions one announcement may carry.
pub const ANNOUNCED_SUBSCRIPTIONS_MAX: usize = 1024;
/// Nodes whose interest a gateway keeps.
pub const ANNOUNCING_NODES_MAX: usize = 4096;

/// One announced subscription: topic filter, filter language, filter text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Announced {
    /// The topic filter.
    pub topic: String,
    /// `none`, `tags`, `sql`, `xpath` or `regex`.
    pub kind: String,
    /// The content filter text (empty with `none`).
    pub filter: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Announcement {
    ttl_ms: u64,
    subscriptions: Vec<Announced>,
}

/// Encodes an announcement of `subscriptions`.
pub fn encode(subscriptions: &[Announced]) -> Vec<u8> {
    let announcement = Announcement { ttl_ms: ANNOUNCE_TTL.as_millis() as u64, subscriptions: subscriptions.to_vec() };
    serde_json::to_vec(&announcement).unwrap_or_default()
}

/// Decodes an announcement: its subscriptions and how long they hold.
pub fn decode(data: &[u8]) -> Result<(Vec<Announced>, Duration), String> {
    let announcement: Announcement = serde_json::from_slice(data).map_err(|error| format!("announcement: {error}"))?;
    if announcement.subscriptions.len() > ANNOUNCED_SUBSCRIPTIONS_MAX {
        return Err(format!(
            "announcement: {} subscriptions, over {ANNOUNCED_SUBSCRIPTIONS_MAX}",
            announcement.subscriptions.len()
        ));
    }
    Ok((
        announcement.subscriptions,
        Duration::from_millis(announcement.ttl_ms.min(ANNOUNCE_TTL.as_millis() as u64 * 4)),
    ))
}

/// The LAN's interest as a gateway sees it: each node's last announcement.
#[derive(Debug, Default)]
pub struct LanInterest {
    nodes: HashMap<u32, (Vec<Announced>, Instant)>,
}

impl LanInterest {
    /// Records `node`'s announcement, holding until `now + ttl`; false when
    /// the table is full and the node new.
    pub fn announce(&mut self, node: u32, subscriptions: Vec<Announced>, ttl: Duration, now: Instant) -> bool {
        if !self.nodes.contains_key(&node) && self.nodes.len() >= ANNOUNCING_NODES_MAX {
            return false;
        }
        self.nodes.insert(node, (subscriptions, now + ttl));
        true
    }

    /// Forgets announcements that lapsed at `now`.
    pub fn expire(&mut self, now: Instant) {
        self.nodes.retain(|_, (_, until)| *until > now);
    }

    /// When the next announcement lapses.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.nodes.values().map(|(_, until)| *until).min()
    }

    /// Every distinct subscription some node wants.
    pub fn union(&self) -> BTreeSet<Announced> {
        self.nodes.values().flat_map(|(subscriptions, _)| subscriptions.iter().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announced(topic: &str) -> Announced {
        Announced { topic: topic.into(), kind: "none".into(), filter: String::new() }
    }

    #[test]
    fn announcements_round_trip_and_lapse() {
        let (subscriptions, ttl) = decode(&encode(&[announced("a.>")])).expect("decodes");
        assert_eq!(subscriptions, vec![announced("a.>")]);
        assert_eq!(ttl, ANNOUNCE_TTL);
        let mut lan = LanInterest::default();
        let now = Instant::now();
        lan.announce(1, subscriptions, ttl, now);
        lan.announce(2, vec![announced("a.>"), announced("b")], ttl / 3, now);
        assert_eq!(lan.union().len(), 2);
        lan.expire(now + ttl / 2);
        assert_eq!(lan.union(), [announced("a.>")].into_iter().collect());
        assert!(decode(b"not json").is_err());
    }
}
