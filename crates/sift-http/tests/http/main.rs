//! Integration tests of the HTTP front-end: a real broker, the front-end on
//! an ephemeral port, raw HTTP/1.1 over loopback sockets (so that malformed
//! and slow requests can be sent exactly), and native clients on the other
//! side. One test binary, modules below.

mod callbacks;
mod common;
mod limits;
mod publish;
mod reports;
mod sse;
mod streams;
mod websocket;
