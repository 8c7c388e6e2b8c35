//! The scenarios of `sift bench`, one module each.

pub mod fjm2;
pub mod ges;
pub mod nb;
pub mod pubsub;
