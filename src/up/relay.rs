//! The replication relay: a plain TCP forwarder between the replica and its
//! master, run as its own process (`stocklock relay --listen A --to B`,
//! hidden), so that replication can be held back deterministically.
//!
//! The replica replicates *through* it (`replicaof 127.0.0.1 <relay port>`).
//! SIGSTOP the relay's pid ([`hold`], which also waits until the kernel
//! says it is stopped) and every byte the master sends from then on stays
//! in the kernel's buffers, undelivered: the master answers its clients,
//! the replica never sees the writes. SIGKILL it after the master died and
//! those bytes are gone for good. That is the classic lost-lock failover,
//! made to happen every time instead of once in a while.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Child;

use super::process;
use crate::os::free_port;

/// How long the relay may take to say it listens.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The relay's own process: accepts on `listen` and copies every
/// connection both ways to `to`, each in its own task, until killed.
/// Prints `relay listening on ADDR` once bound.
pub async fn run(listen: SocketAddr, to: SocketAddr) -> anyhow::Result<()> {
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!("relay listening on {}", listener.local_addr()?);
    loop {
        let (mut inbound, _) = listener.accept().await?;
        tokio::spawn(async move {
            let _ = inbound.set_nodelay(true);
            match TcpStream::connect(to).await {
                Ok(mut outbound) => {
                    let _ = outbound.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
                Err(err) => eprintln!("relay: cannot reach {to}: {err}"),
            }
        });
    }
}

/// Holds replication back: freezes the relay `pid` ([`crate::os::freeze`]).
/// `kill` returns before the target has stopped; a write sent in between
/// could still be forwarded, so only after this returns is the hold
/// certain: every byte the master sends from then on stays in the kernel's
/// buffers.
pub async fn hold(pid: u32) -> anyhow::Result<()> {
    crate::os::freeze(pid).await
}

/// Lets held replication flow again (SIGCONT): the master's writes reach
/// the replica.
pub fn release(pid: u32) {
    crate::os::signal(pid, nix::sys::signal::Signal::SIGCONT);
}

/// A running relay process (this same binary as `stocklock relay`),
/// stopped by [`stop`](Relay::stop) and killed by pid when dropped.
pub struct Relay {
    child: Child,
    listen: SocketAddr,
}

impl Relay {
    /// Starts a relay on a free loopback port forwarding to `to`, and waits
    /// until it listens (trying another port if the one picked was taken).
    pub async fn start(to: SocketAddr) -> anyhow::Result<Relay> {
        let binary = std::env::current_exe().context("cannot find this program's own path")?;
        let mut last = None;
        for _ in 0..3 {
            let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            let mut child = process::command(&binary)
                .arg("relay")
                .arg("--listen")
                .arg(listen.to_string())
                .arg("--to")
                .arg(to.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("cannot run {} relay", binary.display()))?;
            let stdout = child.stdout.take().context("relay stdout")?;
            let (output, ready) = process::watch_output(stdout, Some("relay listening on"), None);
            match process::wait_ready(&mut child, ready, &output, "relay", READY_TIMEOUT).await {
                Ok(_) => return Ok(Relay { child, listen }),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("the relay did not start")))
    }

    /// Where it listens: the address the replica replicates from.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// The process id (`None` once it has been reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops it (SIGTERM, then SIGKILL; a stopped relay is killed) and waits.
    pub async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            // A SIGSTOPped relay would sit on SIGTERM until the grace ran out.
            crate::os::signal(pid, nix::sys::signal::Signal::SIGCONT);
        }
        process::stop(&mut self.child, Duration::from_secs(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::is_stopped;

    #[tokio::test]
    async fn hold_returns_once_the_process_is_stopped_and_release_lets_it_run() {
        let mut child = tokio::process::Command::new("sleep")
            .arg("30")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        assert!(!is_stopped(pid));
        hold(pid).await.unwrap();
        assert!(is_stopped(pid));
        release(pid);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while is_stopped(pid) {
            assert!(std::time::Instant::now() < deadline, "still stopped");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _ = child.kill().await;
        assert!(!is_stopped(u32::MAX), "no such process is not stopped");
    }
}
