//! The Redlock library against five real redis-servers, without HTTP:
//! mutual exclusion, a minority and a majority of the nodes down, the
//! validity shrinking with the time spent acquiring, and the watchdog
//! renewing a Redlock. Every server is stopped at the end of its test (and
//! killed when a failed test drops it).
//!
//! This file: the fixtures and mutual exclusion; `outages.rs`: nodes down
//! or slow; `handoff.rs`: a Redlock kept past its lease by the watchdog
//! and handed on to a woken waiter.

mod handoff;
mod outages;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use stocklock::lock::drift;
use stocklock::lock::redlock::{NODE_TIMEOUT, validity};
use stocklock::lock::{Lease, OwnerId, Redlock, RedlockNodes, Refused, Watchdog};
use stocklock::up::redis::RedisServer;

use crate::helpers;

/// A lease no test outlives.
const LONG: Duration = Duration::from_secs(30);
/// The longest pause between two of `lock`'s rounds (its `RETRY_MAX`): a
/// wait ends at most this much before its deadline.
const RETRY_MAX: Duration = Duration::from_millis(20);
/// How long a "slow" node keeps every command waiting (CLIENT PAUSE).
const PAUSE: Duration = Duration::from_millis(500);
/// The node timeout of the tests that are not about it: generous, so that
/// a loaded machine does not turn a live node into a down one (a stopped
/// node refuses the connection at once whatever the timeout).
const NODE_WAIT: Duration = Duration::from_millis(500);
/// What Redis's millisecond clock may be ahead of ours over a pause.
const CLOCKS: Duration = Duration::from_millis(5);
/// Each test's own bound: it fails rather than hangs.
const BOUND: Duration = Duration::from_secs(60);

/// Runs a test body, failing it if it takes longer than [`BOUND`].
async fn bounded<T>(body: impl Future<Output = T>) -> T {
    crate::helpers::within(BOUND, body).await
}

/// `n` independent redis-servers, one after the other (each on a free port).
pub(crate) async fn start_nodes(n: usize) -> Vec<RedisServer> {
    let mut servers = Vec::with_capacity(n);
    for _ in 0..n {
        servers.push(helpers::redis().await);
    }
    servers
}

pub(crate) fn urls(servers: &[RedisServer]) -> Vec<String> {
    servers.iter().map(RedisServer::url).collect()
}

/// Handles on `urls` with the [`NODE_WAIT`] timeout.
fn open(urls: &[String]) -> RedlockNodes {
    RedlockNodes::open(urls)
        .unwrap()
        .with_node_timeout(NODE_WAIT)
}

/// Stops every server and waits until each has exited.
async fn stop_all(servers: &mut [RedisServer]) {
    for server in servers.iter_mut() {
        server.stop().await;
    }
    for server in servers.iter() {
        assert_eq!(server.pid(), None, "a redis-server is still running");
    }
}

/// A plain connection of our own to one node (not the lock's), which
/// waits up to 5 s for an answer (a paused node answers late).
async fn conn(url: &str) -> MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(5)));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// Who holds `key` on each of `servers`, as each one stores it.
async fn holders(servers: &[RedisServer], key: &str) -> Vec<Option<String>> {
    let mut holders = Vec::new();
    for server in servers {
        let holder: Option<String> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn(&server.url()).await)
            .await
            .unwrap();
        holders.push(holder);
    }
    holders
}

/// `owner` `n` times, for comparing with [`holders`].
fn held_by(owner: &OwnerId, n: usize) -> Vec<Option<String>> {
    vec![Some(owner.as_str().to_owned()); n]
}

/// Takes and releases a lock once, so that every node is connected before
/// a test measures anything.
async fn warm_up(nodes: &RedlockNodes) {
    let lock = nodes.lock("lock:{warm-up}");
    let owner = OwnerId::new("warm-up");
    lock.lock(&owner, LONG, Duration::ZERO)
        .await
        .unwrap()
        .expect("five healthy nodes grant a free lock");
    assert_eq!(lock.unlock(&owner).await, nodes.len());
}

#[tokio::test]
async fn redlock_excludes_a_second_owner_until_released() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let nodes = open(&urls(&servers));
        assert_eq!((nodes.len(), nodes.quorum()), (5, 3));
        let lock = nodes.lock("lock:{r1}");
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));

        let grant = lock
            .lock(&a, LONG, Duration::ZERO)
            .await
            .unwrap()
            .expect("a takes a free lock");
        // What is left of it: the validity, counted from the round's send.
        let held = grant.deadline().saturating_duration_since(Instant::now());
        assert!(
            held <= LONG - drift(LONG),
            "validity {held:?} of a {LONG:?} lease"
        );
        assert!(held > LONG - Duration::from_secs(1), "validity {held:?}");
        assert_eq!(holders(&servers, lock.key()).await, held_by(&a, 5));

        // Every node answers, none grants: held, not a lack of quorum.
        let round = lock.try_round(&b, LONG).await;
        assert_eq!(
            (round.granted, round.answered, round.validity),
            (0, 5, None)
        );
        assert_eq!(
            lock.lock(&b, LONG, Duration::ZERO).await.unwrap(),
            Err(Refused::Held)
        );
        let started = Instant::now();
        assert_eq!(
            lock.lock(&b, LONG, Duration::from_millis(200))
                .await
                .unwrap(),
            Err(Refused::Held)
        );
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(200) - RETRY_MAX,
            "b gave up after {waited:?} of a 200 ms wait"
        );

        // Only the holder can extend the lease.
        assert!(!lock.renew(&b, LONG).await.unwrap(), "b renewed a's lock");
        assert!(lock.renew(&a, LONG).await.unwrap(), "a could not renew");

        // b's failed attempts released nothing of a's; a releases all five.
        assert_eq!(lock.unlock(&b).await, 0);
        assert_eq!(holders(&servers, lock.key()).await, held_by(&a, 5));
        assert_eq!(lock.unlock(&a).await, 5);
        assert_eq!(holders(&servers, lock.key()).await, vec![None; 5]);
        assert!(
            lock.lock(&b, LONG, Duration::ZERO).await.unwrap().is_ok(),
            "b gets the lock a released"
        );
        assert_eq!(lock.unlock(&b).await, 5);

        stop_all(&mut servers).await;
    })
    .await;
}

/// A round that got some nodes but no majority gives back what it got.
#[tokio::test]
async fn a_refused_owner_gives_back_the_nodes_it_got() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let nodes = open(&urls(&servers));
        let lock = nodes.lock("lock:{r2}");
        let b = OwnerId::new("b");
        // c holds the key on three nodes (set there directly).
        for server in &servers[..3] {
            let _: () = redis::cmd("SET")
                .arg(lock.key())
                .arg("c")
                .arg("PX")
                .arg(LONG.as_millis() as u64)
                .query_async(&mut conn(&server.url()).await)
                .await
                .unwrap();
        }
        let round = lock.try_round(&b, LONG).await;
        assert_eq!(
            (round.granted, round.answered, round.validity),
            (2, 5, None)
        );
        assert_eq!(
            lock.unlock(&b).await,
            2,
            "the bare round kept its two nodes"
        );

        assert_eq!(
            lock.lock(&b, LONG, Duration::ZERO).await.unwrap(),
            Err(Refused::Held)
        );
        let c = Some("c".to_owned());
        assert_eq!(
            holders(&servers, lock.key()).await,
            vec![c.clone(), c.clone(), c.clone(), None, None],
            "lock() must release the two nodes its refused round got"
        );

        // c loses one node: three are free, a majority.
        let _: i64 = redis::cmd("DEL")
            .arg(lock.key())
            .query_async(&mut conn(&servers[2].url()).await)
            .await
            .unwrap();
        lock.lock(&b, LONG, Duration::ZERO)
            .await
            .unwrap()
            .expect("three free nodes of five are a majority");
        let mine = Some(b.as_str().to_owned());
        assert_eq!(
            holders(&servers, lock.key()).await,
            vec![c.clone(), c, mine.clone(), mine.clone(), mine]
        );
        assert_eq!(lock.unlock(&b).await, 3);

        stop_all(&mut servers).await;
    })
    .await;
}

/// 16 tasks increment a counter on another Redis by a plain GET then SET,
/// each under the Redlock: no update is lost and no two are ever inside at
/// once. The same increments without the lock lose updates, which shows the
/// test can see a broken lock.
#[tokio::test]
async fn redlock_serializes_concurrent_read_modify_writes() {
    const TASKS: usize = 16;
    const ROUNDS: usize = 5;
    const LEASE: Duration = Duration::from_secs(5);

    /// Runs TASKS x ROUNDS unprotected read-modify-writes of `counter`,
    /// each under `lock` when there is one; the final value and the most
    /// tasks ever inside at once.
    async fn increments(url: &str, lock: Option<Redlock>) -> (i64, usize) {
        let mut counter = conn(url).await;
        let _: () = redis::cmd("SET")
            .arg("counter")
            .arg(0)
            .query_async(&mut counter)
            .await
            .unwrap();
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let (lock, mut counter) = (lock.clone(), counter.clone());
                let (inside, most) = (inside.clone(), most.clone());
                tokio::spawn(async move {
                    for _ in 0..ROUNDS {
                        let owner = OwnerId::new(&format!("t{t}"));
                        let acquired = Instant::now();
                        let validity = match &lock {
                            Some(lock) => lock
                                .lock(&owner, LEASE, Duration::from_secs(10))
                                .await
                                .unwrap()
                                .expect("a task waited 10 s in vain")
                                .deadline()
                                .saturating_duration_since(acquired),
                            None => LEASE,
                        };
                        most.fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                        let n: i64 = redis::cmd("GET")
                            .arg("counter")
                            .query_async(&mut counter)
                            .await
                            .unwrap();
                        let _: () = redis::cmd("SET")
                            .arg("counter")
                            .arg(n + 1)
                            .query_async(&mut counter)
                            .await
                            .unwrap();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        // Beyond its validity the lock no longer excludes.
                        assert!(acquired.elapsed() < validity, "a section outlived its lock");
                        if let Some(lock) = &lock {
                            // A node slow to answer may keep its copy
                            // until the lease runs out: not asserted.
                            lock.unlock(&owner).await;
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let n: i64 = redis::cmd("GET")
            .arg("counter")
            .query_async(&mut counter)
            .await
            .unwrap();
        (n, most.load(Ordering::SeqCst))
    }

    bounded(async {
        let mut servers = start_nodes(5).await;
        let mut counter = helpers::redis().await;
        let nodes = open(&urls(&servers));

        let started = Instant::now();
        let (n, most) = increments(&counter.url(), Some(nodes.lock("lock:{counter}"))).await;
        eprintln!(
            "redlock: {} locked increments by {TASKS} tasks in {:?}",
            TASKS * ROUNDS,
            started.elapsed()
        );
        assert_eq!(n, (TASKS * ROUNDS) as i64, "lost updates under the Redlock");
        assert_eq!(most, 1, "{most} tasks were inside the lock at once");

        let (n, most) = increments(&counter.url(), None).await;
        assert!(
            n < (TASKS * ROUNDS) as i64 && most > 1,
            "without the lock no update was lost ({n}, {most} inside at once): the test cannot see a broken lock"
        );

        stop_all(&mut servers).await;
        counter.stop().await;
    })
    .await;
}
