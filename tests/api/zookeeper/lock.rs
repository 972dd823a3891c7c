//! The lock recipe on a real standalone server: exclusion between
//! sessions, growing tokens, a release waking the (one) waiter, a closed
//! session and an expired one freeing the lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use stocklock::lock::{ZooKeeperHold, ZooKeeperLock, ZooKeeperSession};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use zookeeper_client as zk;

use super::Servers;

/// A session timeout no test outlives: a lock freed within a test was
/// freed by its release or its session's close, not by an expiry.
const LONG: Duration = Duration::from_secs(30);
/// How long a test waits for what should happen at once.
const PROMPT: Duration = Duration::from_secs(5);

/// Waits (with a watch, no polling) until the lock's directory has
/// `count` contenders' znodes.
async fn until_queued(servers: &Servers, lock: &ZooKeeperLock, count: usize) {
    let client = zk::Client::connect(&servers.connect_string())
        .await
        .unwrap();
    let wait = async {
        loop {
            match client.list_and_watch_children(lock.dir()).await {
                Ok((children, watcher)) => {
                    if children.len() >= count {
                        return;
                    }
                    watcher.changed().await;
                }
                // The directory does not exist yet: watch for it.
                Err(zk::Error::NoNode) => {
                    let (stat, watcher) = client.check_and_watch_stat(lock.dir()).await.unwrap();
                    if stat.is_none() {
                        watcher.changed().await;
                    }
                }
                Err(err) => panic!("zookeeper: {err}"),
            }
        }
    };
    tokio::time::timeout(PROMPT, wait)
        .await
        .unwrap_or_else(|_| panic!("{count} contenders were not queued within {PROMPT:?}"));
}

#[tokio::test]
async fn two_sessions_exclude_each_other_and_tokens_grow() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let a = servers.session(LONG).await;
    let b = servers.session(LONG).await;
    let (lock_a, lock_b) = (a.lock("sku-1").unwrap(), b.lock("sku-1").unwrap());

    let first = lock_a.lock(Duration::ZERO).await.unwrap().expect("free");
    assert_eq!(
        lock_a.holder().await.unwrap().as_deref(),
        Some(&*first.path)
    );
    assert_eq!(
        lock_b.lock(Duration::ZERO).await.unwrap(),
        None,
        "held by a"
    );
    assert!(
        watches(&servers).await.is_empty(),
        "a try-lock leaves no watch behind"
    );
    let started = Instant::now();
    assert_eq!(
        lock_b.lock(Duration::from_millis(300)).await.unwrap(),
        None,
        "held by a"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // b's refused attempts left nothing queued behind a.
    let client = zk::Client::connect(&servers.connect_string())
        .await
        .unwrap();
    assert_eq!(client.list_children(lock_a.dir()).await.unwrap().len(), 1);

    assert!(lock_a.unlock(&first).await.unwrap());
    let second = lock_b
        .lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("released");
    assert!(
        second.token > first.token && second.sequence > first.sequence,
        "{second:?} after {first:?}"
    );
    // A second lock by the holder is not reentrant: it queues behind
    // itself and times out.
    assert_eq!(
        lock_b.lock(Duration::from_millis(100)).await.unwrap(),
        None,
        "the recipe is not reentrant"
    );
    assert!(lock_b.unlock(&second).await.unwrap());
    assert!(
        !lock_b.unlock(&second).await.unwrap(),
        "a second release finds nothing"
    );

    // Four sessions take the lock 25 times each: never two inside at once,
    // and each holder's token is greater than the one before it.
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut contenders = JoinSet::new();
    for _ in 0..4 {
        let session = servers.session(LONG).await;
        let (inside, tokens) = (inside.clone(), tokens.clone());
        contenders.spawn(async move {
            let lock = session.lock("sku-1").unwrap();
            for _ in 0..25 {
                let hold = lock.lock(PROMPT).await.unwrap().expect("a turn within 5 s");
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokens.lock().unwrap().push(hold.token);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(lock.unlock(&hold).await.unwrap());
            }
        });
    }
    while let Some(done) = contenders.join_next().await {
        done.unwrap();
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 100);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]) && tokens[0] > second.token,
        "tokens in the order of the holders: {tokens:?}"
    );

    // Uncontended: lock and unlock pairs per second on one session.
    let pairs = 200;
    let started = Instant::now();
    for _ in 0..pairs {
        let hold = lock_a.lock(Duration::ZERO).await.unwrap().expect("free");
        lock_a.unlock(&hold).await.unwrap();
    }
    let elapsed = started.elapsed();
    eprintln!(
        "zookeeper lock: {pairs} uncontended lock/unlock pairs in {elapsed:?}: {:.0} pairs/s",
        f64::from(pairs) / elapsed.as_secs_f64()
    );
    drop((a, b, client));
    servers.stop().await;
}

#[tokio::test]
async fn a_release_wakes_the_waiter() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let a = servers.session(LONG).await;
    let b = servers.session(LONG).await;
    let (lock_a, lock_b) = (a.lock("handoff").unwrap(), b.lock("handoff").unwrap());
    let mut handoffs = Vec::new();
    for _ in 0..10 {
        let held = lock_a.lock(Duration::ZERO).await.unwrap().expect("free");
        let waiter = {
            let lock_b = lock_b.clone();
            tokio::spawn(async move {
                let hold = lock_b.lock(LONG).await.unwrap().expect("woken");
                (Instant::now(), hold)
            })
        };
        until_queued(&servers, &lock_a, 2).await;
        let released = Instant::now();
        assert!(lock_a.unlock(&held).await.unwrap());
        let (acquired, hold) = tokio::time::timeout(PROMPT, waiter)
            .await
            .expect("the waiter was not woken within 5 s of the release")
            .unwrap();
        handoffs.push(acquired - released);
        assert!(hold.token > held.token);
        assert!(lock_b.unlock(&hold).await.unwrap());
    }
    handoffs.sort();
    eprintln!(
        "zookeeper lock: hand-off (release sent -> waiter holds) median {:?}, max {:?} over {}",
        handoffs[handoffs.len() / 2],
        handoffs[handoffs.len() - 1],
        handoffs.len()
    );
    drop((a, b));
    servers.stop().await;
}

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

/// The watches the server holds, by path (`wchp`): path → watching sessions.
async fn watches(servers: &Servers) -> std::collections::BTreeMap<String, usize> {
    let answer = stocklock::up::zookeeper::four_letter_word(servers.servers[0].port(), "wchp")
        .await
        .unwrap();
    let mut watched = std::collections::BTreeMap::new();
    let mut path = None;
    for line in answer.lines() {
        if line.starts_with('/') {
            path = Some(line.to_owned());
        } else if line.trim_start().starts_with("0x")
            && let Some(path) = &path
        {
            *watched.entry(path.clone()).or_insert(0) += 1;
        }
    }
    watched
}

#[tokio::test]
async fn each_waiter_watches_only_its_predecessor() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let holder = servers.session(LONG).await;
    let lock = holder.lock("herd").unwrap();
    let held = lock.lock(Duration::ZERO).await.unwrap().expect("free");
    let mut waiters = Vec::new();
    for queued in 2..=4 {
        let session = servers.session(LONG).await;
        let waiting = session.lock("herd").unwrap();
        waiters.push(tokio::spawn(async move {
            let hold = waiting.lock(LONG).await.unwrap().expect("a turn");
            (session, waiting, hold)
        }));
        until_queued(&servers, &lock, queued).await;
    }
    // A watch is set after the waiter's znode shows; no event says when:
    // ask the server until three are set (or 5 s).
    let deadline = Instant::now() + PROMPT;
    let mut watched = watches(&servers).await;
    while watched.len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        watched = watches(&servers).await;
    }
    let client = zk::Client::connect(&servers.connect_string())
        .await
        .unwrap();
    let mut queue = client.list_children(lock.dir()).await.unwrap();
    queue.sort_by_key(|name| name.rsplit('-').next().unwrap_or_default().to_owned());
    let expected: std::collections::BTreeMap<String, usize> = queue[..3]
        .iter()
        .map(|name| (format!("{}/{name}", lock.dir()), 1))
        .collect();
    assert_eq!(
        watched, expected,
        "each of the first three znodes watched once (by its successor), the last not at all"
    );

    // The release wakes the next waiter only; the others keep waiting.
    assert!(lock.unlock(&held).await.unwrap());
    let mut waiters = waiters.into_iter();
    let mut previous = held.token;
    while let Some(next) = waiters.next() {
        let (_session, waiting, hold) = tokio::time::timeout(PROMPT, next)
            .await
            .expect("woken within 5 s")
            .unwrap();
        assert!(hold.token > previous);
        previous = hold.token;
        assert!(
            waiters.as_slice().iter().all(|w| !w.is_finished()),
            "a later waiter went ahead of its turn"
        );
        assert!(waiting.unlock(&hold).await.unwrap());
    }
    drop((holder, client));
    servers.stop().await;
}
