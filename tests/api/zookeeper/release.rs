//! A release whose connection is lost: the session lives on (the client
//! reconnects), and so would the holder's znode, blocking every waiter
//! until the session expired, were it not deleted in the background.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stocklock::lock::ZooKeeperSession;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Servers;

/// Longer than the test: a lock freed within it was not freed by expiry.
const LONG: Duration = Duration::from_secs(30);
const PROMPT: Duration = Duration::from_secs(5);

/// ZooKeeper's opcode of a delete request.
const OP_DELETE: i32 = 2;

/// A TCP relay to a server that, once armed, drops the connection that
/// sends a delete request instead of forwarding it: the release is lost
/// in flight, and the client reconnects through it to the same session.
struct DropAtDelete {
    port: u16,
    armed: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl DropAtDelete {
    async fn to(upstream: u16) -> DropAtDelete {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let trigger = armed.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                tokio::spawn(link(client, server, trigger.clone()));
            }
        });
        DropAtDelete { port, armed, task }
    }
}

impl Drop for DropAtDelete {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Relays one connection; returning drops both sides.
async fn link(client: TcpStream, server: TcpStream, armed: Arc<AtomicBool>) {
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    let upward = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_in.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            // A request: length, xid, opcode (big-endian), then its body.
            let opcode = buf
                .get(8..12)
                .filter(|_| n >= 12)
                .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            if opcode == Some(OP_DELETE) && armed.swap(false, Ordering::SeqCst) {
                return;
            }
            if server_out.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let downward = tokio::io::copy(&mut server_in, &mut client_out);
    tokio::select! {
        _ = upward => {},
        _ = downward => {},
    }
}

#[tokio::test]
async fn a_release_lost_in_flight_still_frees_the_lock_promptly() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let relay = DropAtDelete::to(servers.servers[0].port()).await;
    let holder = ZooKeeperSession::connect(
        &format!("127.0.0.1:{}", relay.port),
        LONG,
        Duration::from_secs(10),
    )
    .await
    .expect("connect through the relay");
    let waiter = servers.session(LONG).await;
    let lock = holder.lock("lost-release").unwrap();
    let held = lock.lock(Duration::ZERO).await.unwrap().expect("free");
    let waiting = waiter.lock("lost-release").unwrap();
    let task =
        tokio::spawn(async move { waiting.lock(LONG).await.unwrap().map(|_| Instant::now()) });

    relay.armed.store(true, Ordering::SeqCst);
    let released = Instant::now();
    let unlocked = lock.unlock(&held).await;
    assert!(unlocked.is_err(), "the release was not lost: {unlocked:?}");
    assert!(
        !relay.armed.load(Ordering::SeqCst),
        "no delete went through the relay"
    );

    let acquired = tokio::time::timeout(PROMPT, task)
        .await
        .unwrap_or_else(|_| {
            panic!("the waiter did not get the lock within {PROMPT:?} of a release lost in flight (session timeout {LONG:?})")
        })
        .unwrap()
        .expect("the waiter's wait ran out");
    eprintln!(
        "zookeeper: release lost in flight, waiter got the lock after {:?}",
        acquired - released
    );
    assert!(!holder.has_ended(), "the holder's session lives on");
    drop((holder, waiter, lock));
    servers.stop().await;
}
