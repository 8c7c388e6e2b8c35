//! The scenarios of `sift bench`, one module each.

pub mod pubsub;
