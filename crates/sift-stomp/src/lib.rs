//! Sift's STOMP 1.2 front-end.

pub mod frame;
