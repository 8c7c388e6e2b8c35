//! A TCP proxy between two brokers that a test can black-hole and restore,
//! to fail a link the way a network does: bytes sent while the link is
//! black-holed vanish, and both ends notice only by silence.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Size of one read while pumping bytes.
const PUMP_BUFFER_BYTES: usize = 64 * 1024;

#[derive(Debug, Default)]
struct ProxyState {
    /// True while bytes are dropped instead of passed on.
    black_hole: AtomicBool,
    /// Bumped by [`CutProxy::restore`]; connections of an older generation end.
    generation: AtomicU64,
}

/// A proxy in front of one address; stops (with its connections) when dropped.
pub struct CutProxy {
    address: SocketAddr,
    state: Arc<ProxyState>,
    accept_task: JoinHandle<()>,
}

impl CutProxy {
    /// A proxy on an ephemeral loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address");
        let state = Arc::new(ProxyState::default());
        let accept_task = tokio::spawn(accept_loop(listener, target, state.clone()));
        CutProxy { address, state, accept_task }
    }

    /// Where to dial instead of the target.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// From now on, bytes in both directions are dropped.
    pub fn black_hole(&self) {
        self.state.black_hole.store(true, Ordering::SeqCst);
    }

    /// Ends every connection through the proxy (a stream that lost bytes
    /// in the middle cannot be resumed) and passes bytes again on new ones.
    pub fn restore(&self) {
        self.state.generation.fetch_add(1, Ordering::SeqCst);
        self.state.black_hole.store(false, Ordering::SeqCst);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        // Connections of the old generation end at their next read.
        self.state.generation.fetch_add(1, Ordering::SeqCst);
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, state: Arc<ProxyState>) {
    while let Ok((inbound, _)) = listener.accept().await {
        let Ok(outbound) = TcpStream::connect(target).await else { continue };
        let generation = state.generation.load(Ordering::SeqCst);
        let (inbound_read, inbound_write) = inbound.into_split();
        let (outbound_read, outbound_write) = outbound.into_split();
        tokio::spawn(pump(inbound_read, outbound_write, state.clone(), generation));
        tokio::spawn(pump(outbound_read, inbound_write, state.clone(), generation));
    }
}

/// Copies bytes one way until either side closes or the connection's
/// generation is over, dropping them while the proxy is black-holed.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    state: Arc<ProxyState>,
    generation: u64,
) {
    let mut buffer = vec![0u8; PUMP_BUFFER_BYTES];
    loop {
        let read = tokio::time::timeout(std::time::Duration::from_millis(50), from.read(&mut buffer)).await;
        if state.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let count = match read {
            Err(_) => continue,
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(count)) => count,
        };
        if state.black_hole.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buffer[..count]).await.is_err() {
            return;
        }
    }
}
