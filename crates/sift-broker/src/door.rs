//! The doors into a broker: which protocol a session came in by, where from,
//! and each door's own counters.
//!
//! Every session is the same session machine whatever its door; what
//! differs is only who is on the other side. The admin reports, the
//! dashboard and `/metrics` show each connection's [`Door`] and peer, so
//! that an operator can tell a STOMP client from an MQTT device. A
//! protocol front-end registers its counters ([`DoorCounters`]) with the
//! broker once, and the broker's `stats` report carries them under
//! `doors`, so that every door's counters reach every place the broker's
//! do, one way.

use std::net::SocketAddr;
use std::sync::Arc;

/// The protocol a session came in by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Door {
    /// The native protocol over TCP, or an embedding application's
    /// in-process client.
    Native,
    /// HTTP: publishes, event streams, WebSockets and callbacks.
    Http,
    /// STOMP 1.0 to 1.2.
    Stomp,
    /// MQTT 3.1.1 and 5.0.
    Mqtt,
    /// AMQP 1.0 (JMS clients).
    Amqp,
}

impl Door {
    /// The door's name in reports and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Door::Native => "native",
            Door::Http => "http",
            Door::Stomp => "stomp",
            Door::Mqtt => "mqtt",
            Door::Amqp => "amqp",
        }
    }
}

impl std::fmt::Display for Door {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

/// Where an in-process session comes from: its door, and the address of the
/// protocol client it serves when there is one (a STOMP or MQTT client);
/// `None` for a session a front-end shares among its clients (HTTP's
/// publishing sessions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The door.
    pub door: Door,
    /// The protocol client's address.
    pub peer: Option<SocketAddr>,
}

impl Origin {
    /// An in-process session of an embedding application.
    pub const EMBEDDED: Origin = Origin { door: Door::Native, peer: None };

    /// The peer as reports show it: `ip:port`, or `in-process`.
    pub fn peer_text(&self) -> String {
        self.peer.map_or_else(|| "in-process".to_string(), |address| address.to_string())
    }
}

/// A front-end's counters, as the broker's reports read them.
pub trait DoorCounters: Send + Sync + std::fmt::Debug {
    /// Name and value of every counter, in a fixed order. Names ending in
    /// `_current` are levels (gauges); the others only grow.
    fn entries(&self) -> Vec<(&'static str, u64)>;
}

/// Declares a front-end's counters: a struct of relaxed atomic counters
/// with one documented field per counter, its `entries` in declaration
/// order, and its [`DoorCounters`] implementation. Name levels (gauges)
/// `..._current`.
#[macro_export]
macro_rules! door_counters {
    ($(#[$struct_doc:meta])* $struct_name:ident { $($(#[$doc:meta])* $name:ident,)* }) => {
        $(#[$struct_doc])*
        #[derive(Debug, Default)]
        pub struct $struct_name {
            $($(#[$doc])* pub $name: std::sync::atomic::AtomicU64,)*
        }

        impl $struct_name {
            /// Name and value of every counter, in declaration order.
            pub fn entries(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(std::sync::atomic::Ordering::Relaxed)),)*]
            }

            /// Adds one to `counter`.
            pub fn bump(counter: &std::sync::atomic::AtomicU64) {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }

            /// Takes one from a level (`..._current`).
            pub fn drop_one(counter: &std::sync::atomic::AtomicU64) {
                counter.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }

        impl $crate::door::DoorCounters for $struct_name {
            fn entries(&self) -> Vec<(&'static str, u64)> {
                $struct_name::entries(self)
            }
        }
    };
}

/// True for a counter that is a level rather than a total.
pub fn is_gauge(name: &str) -> bool {
    name.ends_with("_current")
}

/// The counters each front-end registered, by door, and the TLS counters
/// of each door (and of the links) that speaks TLS.
#[derive(Debug, Default)]
pub struct DoorRegistry {
    registered: std::sync::Mutex<Vec<(Door, Arc<dyn DoorCounters>)>>,
    tls: std::sync::Mutex<Vec<(&'static str, Arc<sift_tls::ServerTls>)>>,
}

impl DoorRegistry {
    /// Registers `counters` as `door`'s, replacing any earlier ones (a
    /// front-end started again).
    pub fn register(&self, door: Door, counters: Arc<dyn DoorCounters>) {
        let mut registered = self.registered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        registered.retain(|(known, _)| *known != door);
        registered.push((door, counters));
    }

    /// Registers the TLS of the door named `name` (a [`Door::name`], or
    /// `links`), replacing any earlier one: its counters join the door's.
    pub fn register_tls(&self, name: &'static str, tls: Arc<sift_tls::ServerTls>) {
        let mut registered = self.tls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        registered.retain(|(known, _)| *known != name);
        registered.push((name, tls));
    }

    /// Every registered door's counters, with its TLS counters, as a JSON
    /// object by door name.
    pub fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let registered = self.registered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut report: serde_json::Map<String, serde_json::Value> = registered
            .iter()
            .map(|(door, counters)| {
                let values: serde_json::Map<String, serde_json::Value> =
                    counters.entries().into_iter().map(|(name, value)| (name.to_string(), value.into())).collect();
                (door.name().to_string(), serde_json::Value::Object(values))
            })
            .collect();
        let tls = self.tls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (door, door_tls) in tls.iter() {
            let entry = report.entry(door.to_string()).or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let serde_json::Value::Object(values) = entry {
                values.extend(
                    door_tls.counters.entries().into_iter().map(|(name, value)| (name.to_string(), value.into())),
                );
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    door_counters! {
        /// Counters for the test.
        TestCounters {
            /// Accepted.
            accepted,
            /// Open now.
            open_current,
        }
    }

    #[test]
    fn registered_counters_appear_by_door_and_a_second_registration_replaces_the_first() {
        let registry = DoorRegistry::default();
        let first = Arc::new(TestCounters::default());
        TestCounters::bump(&first.accepted);
        registry.register(Door::Stomp, first);
        let second = Arc::new(TestCounters::default());
        TestCounters::bump(&second.open_current);
        TestCounters::bump(&second.open_current);
        TestCounters::drop_one(&second.open_current);
        registry.register(Door::Stomp, second);
        let report = serde_json::Value::Object(registry.report());
        assert_eq!(report, serde_json::json!({ "stomp": { "accepted": 0, "open_current": 1 } }));
        assert!(is_gauge("open_current") && !is_gauge("accepted"));
    }
}
