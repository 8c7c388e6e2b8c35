//! A passive member of a group that reads every NORM packet on it and
//! counts what it sees ([`Tally`]): data, repairs, NACKs, commands, and
//! packets it never saw. It needs no libnorm and sends nothing, so it can
//! sit beside the senders and receivers it watches (the socket shares the
//! port with theirs).

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::packet::Tally;
use crate::NormError;

/// Largest datagram read: NORM's own message limit.
pub const WATCH_DATAGRAM_BYTES_MAX: usize = 65_536;
/// Kernel receive buffer asked for, so that bursts at the full rate are
/// not dropped before they are counted (capped by `net.core.rmem_max`).
pub const WATCH_SOCKET_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// Reads a group's packets into a [`Tally`].
pub struct Watcher {
    socket: tokio::net::UdpSocket,
    buffer: Vec<u8>,
    /// What was seen so far.
    pub tally: Tally,
}

impl Watcher {
    /// Joins `group` on `interface` (`None`: the routing table's choice).
    /// Must be called within a Tokio runtime.
    pub fn open(group: SocketAddrV4, interface: Option<&str>) -> Result<Watcher, NormError> {
        let failed = |what: &str, error: std::io::Error| NormError::Session(format!("watch {group}: {what}: {error}"));
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))
            .map_err(|error| failed("socket", error))?;
        socket.set_reuse_address(true).map_err(|error| failed("SO_REUSEADDR", error))?;
        socket.set_reuse_port(true).map_err(|error| failed("SO_REUSEPORT", error))?;
        // Best effort: the kernel caps the size, and a smaller buffer only
        // makes the watcher miss packets in a burst (counted as unseen).
        let _ = socket.set_recv_buffer_size(WATCH_SOCKET_BUFFER_BYTES);
        let address = SocketAddrV4::new(*group.ip(), group.port());
        socket.bind(&address.into()).map_err(|error| failed("bind", error))?;
        let interface = match interface {
            Some(name) => socket2::InterfaceIndexOrAddress::Index(interface_index(name)?),
            None => socket2::InterfaceIndexOrAddress::Address(Ipv4Addr::UNSPECIFIED),
        };
        socket.join_multicast_v4_n(group.ip(), &interface).map_err(|error| failed("join", error))?;
        socket.set_nonblocking(true).map_err(|error| failed("non-blocking", error))?;
        let socket = tokio::net::UdpSocket::from_std(socket.into()).map_err(|error| failed("register", error))?;
        Ok(Watcher { socket, buffer: vec![0; WATCH_DATAGRAM_BYTES_MAX], tally: Tally::default() })
    }

    /// Waits for the next datagram on the group and counts it.
    pub async fn record_next(&mut self) -> Result<(), NormError> {
        let (length, _) = self
            .socket
            .recv_from(&mut self.buffer)
            .await
            .map_err(|error| NormError::Session(format!("watch: receive: {error}")))?;
        self.tally.record(&self.buffer[..length]);
        Ok(())
    }
}

/// The kernel's index of interface `name`, from sysfs (no C call needed);
/// an error naming it when there is no such interface.
pub fn interface_index(name: &str) -> Result<u32, NormError> {
    let unknown = || NormError::Session(format!("no network interface named {name:?}"));
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(unknown());
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).map_err(|_| unknown())?;
    text.trim().parse().map_err(|_| unknown())
}
