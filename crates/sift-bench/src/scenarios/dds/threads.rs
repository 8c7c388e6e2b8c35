//! Client threads: each publisher and each subscriber of a point runs on
//! an OS thread of its own, in a current-thread tokio runtime, so that
//! the thread's CPU time is exactly that client's (its own code and its
//! connection's reader and writer tasks) and nothing else's.
//!
//! The coordinator and a thread talk through three channels: the thread
//! says when it is connected (`ready`), the coordinator opens a [`Gate`]
//! to start everyone at once and later to let them close, and the thread
//! reports what it measured (`result`) before it closes its connection,
//! so that the broker's byte counters can be read between the two.

use std::future::Future;
use std::thread::JoinHandle;

use tokio::sync::{oneshot, watch};

use crate::error::BenchError;

/// What the coordinator lets the client threads do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Connect, subscribe, and say so.
    Connect,
    /// Publish and receive.
    Run,
    /// Close the connection and end.
    Close,
}

/// The coordinator's side of the gate every client thread of a point waits at.
#[derive(Debug)]
pub struct Gate(watch::Sender<Phase>);

impl Gate {
    /// A gate at [`Phase::Connect`].
    pub fn new() -> Gate {
        Gate(watch::Sender::new(Phase::Connect))
    }

    /// Lets every thread on to `phase`.
    pub fn open(&self, phase: Phase) {
        self.0.send_replace(phase);
    }

    fn watcher(&self) -> watch::Receiver<Phase> {
        self.0.subscribe()
    }
}

/// A client thread's side of its channels.
#[derive(Debug)]
pub struct Links<T> {
    ready: Option<oneshot::Sender<()>>,
    gate: watch::Receiver<Phase>,
    result: Option<oneshot::Sender<Result<T, BenchError>>>,
}

impl<T> Links<T> {
    /// Says the client is connected, then waits until the coordinator
    /// starts the run; `false` when it was told to close instead.
    pub async fn ready_then_wait_for_run(&mut self) -> bool {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(());
        }
        matches!(self.gate.wait_for(|phase| *phase >= Phase::Run).await.map(|phase| *phase), Ok(Phase::Run))
    }

    /// Reports what the client measured, or why it failed (once).
    pub fn report(&mut self, result: Result<T, BenchError>) {
        if let Some(sender) = self.result.take() {
            let _ = sender.send(result);
        }
    }

    /// Waits until the coordinator lets the threads close (or is gone).
    pub async fn wait_for_close(&mut self) {
        let _ = self.gate.wait_for(|phase| *phase == Phase::Close).await;
    }
}

/// The coordinator's handle on one client thread.
#[derive(Debug)]
pub struct ClientThread<T> {
    role: &'static str,
    ready: oneshot::Receiver<()>,
    result: oneshot::Receiver<Result<T, BenchError>>,
    join: JoinHandle<()>,
}

impl<T: Send + 'static> ClientThread<T> {
    /// Starts thread `name` running `body` in a current-thread runtime.
    pub fn spawn<F, Fut>(role: &'static str, name: String, gate: &Gate, body: F) -> Result<ClientThread<T>, BenchError>
    where
        F: FnOnce(Links<T>) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (ready_sender, ready) = oneshot::channel();
        let (result_sender, result) = oneshot::channel();
        let mut links = Links { ready: Some(ready_sender), gate: gate.watcher(), result: Some(result_sender) };
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime.block_on(body(links)),
                Err(error) => links.report(Err(BenchError::Task { role, reason: format!("no runtime: {error}") })),
            }
        });
        let join = thread.map_err(|error| BenchError::Task { role, reason: format!("no thread: {error}") })?;
        Ok(ClientThread { role, ready, result, join })
    }

    /// Waits until the client is connected; its error if it failed first.
    pub async fn connected(&mut self) -> Result<(), BenchError> {
        match (&mut self.ready).await {
            Ok(()) => Ok(()),
            Err(_) => Err(self.failure().await),
        }
    }

    /// Waits for what the client measured.
    pub async fn result(&mut self) -> Result<T, BenchError> {
        match (&mut self.result).await {
            Ok(result) => result,
            Err(_) => Err(BenchError::Task { role: self.role, reason: "ended without a result".into() }),
        }
    }

    async fn failure(&mut self) -> BenchError {
        match self.result().await {
            Ok(_) => BenchError::Task { role: self.role, reason: "reported before it was connected".into() },
            Err(error) => error,
        }
    }

    /// Waits until the thread has ended, without holding up the async
    /// runtime (which may be running the broker the thread is closing with).
    pub async fn join(self) -> Result<(), BenchError> {
        let role = self.role;
        let joined = tokio::task::spawn_blocking(move || self.join.join()).await;
        match joined {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(BenchError::Task { role, reason: "the thread panicked".into() }),
            Err(error) => Err(BenchError::Task { role, reason: error.to_string() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_thread_connects_waits_for_the_gate_reports_and_closes() {
        let gate = Gate::new();
        let mut thread =
            ClientThread::spawn("publisher", "test-client".into(), &gate, |mut links: Links<u64>| async move {
                if links.ready_then_wait_for_run().await {
                    links.report(Ok(std::thread::current().name().map_or(0, str::len) as u64));
                    links.wait_for_close().await;
                }
            })
            .expect("spawned");
        thread.connected().await.expect("connected");
        gate.open(Phase::Run);
        assert_eq!(thread.result().await.expect("result"), "test-client".len() as u64);
        gate.open(Phase::Close);
        thread.join().await.expect("joined");
    }

    #[tokio::test]
    async fn a_thread_that_fails_before_connecting_reports_its_error() {
        let gate = Gate::new();
        let mut thread =
            ClientThread::spawn("subscriber", "failing".into(), &gate, |mut links: Links<()>| async move {
                links.report(Err(BenchError::Usage("no broker".into())));
            })
            .expect("spawned");
        let error = thread.connected().await.expect_err("failed");
        assert_eq!(error.to_string(), "no broker");
        thread.join().await.expect("joined");
    }

    #[tokio::test]
    async fn closing_before_the_run_releases_a_waiting_thread() {
        let gate = Gate::new();
        let mut thread = ClientThread::spawn("publisher", "closed".into(), &gate, |mut links: Links<()>| async move {
            let ran = links.ready_then_wait_for_run().await;
            links.report(if ran { Ok(()) } else { Err(BenchError::Usage("closed".into())) });
        })
        .expect("spawned");
        thread.connected().await.expect("connected");
        gate.open(Phase::Close);
        assert!(thread.result().await.is_err());
        thread.join().await.expect("joined");
    }
}
