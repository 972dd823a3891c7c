//! A holder's session ends: closed, it frees its lock at once; cut off,
//! after its timeout; and a lock asked of a dead server is an error.

use std::time::{Duration, Instant};

use stocklock::lock::{ZooKeeperHold, ZooKeeperSession};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::{LONG, PROMPT, until_queued};
use crate::zookeeper::Servers;

/// Takes `name` through `holder` and starts a waiter on `waiter`'s session;
/// returns the hold and the waiter (its instant of acquisition and hold),
/// once the waiter is queued.
async fn held_with_a_waiter(
    servers: &Servers,
    holder: &ZooKeeperSession,
    waiter: &ZooKeeperSession,
    name: &str,
) -> (
    ZooKeeperHold,
    tokio::task::JoinHandle<(Instant, ZooKeeperHold)>,
) {
    let lock = holder.lock(name).unwrap();
    let held = lock.lock(Duration::ZERO).await.unwrap().expect("free");
    let waiting = waiter.lock(name).unwrap();
    let task = tokio::spawn(async move {
        let hold = waiting.lock(LONG).await.unwrap().expect("freed");
        (Instant::now(), hold)
    });
    until_queued(servers, &lock, 2).await;
    (held, task)
}

#[tokio::test]
async fn a_closed_session_frees_its_lock_at_once() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let holder = servers.session(LONG).await;
    let waiter = servers.session(LONG).await;
    let (held, task) = held_with_a_waiter(&servers, &holder, &waiter, "closed").await;
    let closed = Instant::now();
    drop(holder); // the last clone: the client closes the session
    let (acquired, hold) = tokio::time::timeout(PROMPT, task)
        .await
        .expect("the lock was not freed within 5 s of the close")
        .unwrap();
    assert!(
        acquired - closed < PROMPT && hold.token > held.token,
        "freed by the close, long before the 30 s session could expire"
    );
    drop(waiter);
    servers.stop().await;
}

/// A TCP relay between a client and the server that can be cut: every
/// connection through it dropped, and no new one accepted. The client is
/// then as dead as a killed or paused process, as far as the server sees.
struct Relay {
    port: u16,
    tasks: JoinSet<()>,
}

impl Relay {
    async fn to(upstream: u16) -> Relay {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut links = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                links.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Relay { port, tasks }
    }

    /// Drops every connection and the listener.
    async fn cut(mut self) {
        self.tasks.shutdown().await;
    }
}

#[tokio::test]
async fn an_expired_session_frees_its_lock_after_its_timeout() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let relay = Relay::to(servers.servers[0].port()).await;
    let holder = ZooKeeperSession::connect(
        &format!("127.0.0.1:{}", relay.port),
        Duration::from_millis(1500),
        Duration::from_secs(10),
    )
    .await
    .expect("connect through the relay");
    let timeout = holder.session_timeout();
    assert_eq!(timeout, Duration::from_millis(1500), "granted as asked");
    let waiter = servers.session(LONG).await;
    let (held, task) = held_with_a_waiter(&servers, &holder, &waiter, "expired").await;

    let cut = Instant::now();
    relay.cut().await;
    let (acquired, hold) = tokio::time::timeout(timeout + PROMPT, task)
        .await
        .expect("the lock was not freed within the session timeout and 5 s")
        .unwrap();
    let freed_after = acquired - cut;
    eprintln!(
        "zookeeper lock: holder cut off, lock freed after {freed_after:?} (session timeout {timeout:?})"
    );
    // The client pings every third of the timeout; the server expires the
    // session a timeout after the last one it heard.
    assert!(
        freed_after >= timeout / 2,
        "freed after {freed_after:?}: before the session could expire"
    );
    assert!(hold.token > held.token);
    assert!(
        holder.may_be_lost(),
        "the cut-off holder knows it may have lost it"
    );
    drop((holder, waiter));
    servers.stop().await;
}

/// A lock asked of a server that is gone is an error, not a hang and not a
/// panic: the client waits for a server to come back until its session
/// expires, so the error comes within about the session timeout.
#[tokio::test]
async fn a_dead_server_is_an_error_within_the_session_timeout() {
    let Some(mut servers) = Servers::start(1).await else {
        return;
    };
    let session = servers.session(Duration::from_secs(2)).await;
    let timeout = session.session_timeout();
    let lock = session.lock("dead").unwrap();
    servers.servers[0].stop().await;
    let started = Instant::now();
    let attempt = tokio::time::timeout(timeout + PROMPT, lock.lock(Duration::ZERO))
        .await
        .expect("no answer within the session timeout and 5 s");
    assert!(attempt.is_err(), "{attempt:?}");
    assert!(session.may_be_lost());
    eprintln!(
        "zookeeper lock: server gone, lock() failed after {:?}: {}",
        started.elapsed(),
        attempt.unwrap_err()
    );
    drop(session);
    servers.stop().await;
}
