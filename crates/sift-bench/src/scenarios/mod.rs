//! The scenarios of `sift bench`, one module each.

pub mod dds;
pub mod fjm2;
pub mod fjm2_multicast;
pub mod ges;
pub mod http;
pub mod jbi;
pub mod nb;
pub mod persist;
pub mod pubsub;
pub mod stomp;
