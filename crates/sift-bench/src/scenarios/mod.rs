//! The scenarios of `sift bench`, one module each.
