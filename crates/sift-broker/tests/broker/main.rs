//! Integration tests: real brokers on ephemeral ports, real clients and raw
//! sockets over loopback. One test binary (modules below) to keep link time
//! down.

mod access;
mod admin;
mod common;
mod content;
mod cut_proxy;
mod delay;
mod delivery;
mod forwarding;
mod ges22;
mod in_process;
mod interest;
mod limits;
mod links;
mod network_delivery;
mod network_support;
mod persist;
mod policies;
mod regressions;
mod reliability;
mod replicated;
mod routing;
mod tds;
mod time;
mod tls;
mod toxiproxy;
mod transfer;
