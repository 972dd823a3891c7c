//! The Redlock library against five real redis-servers, without HTTP:
//! mutual exclusion, a minority and a majority of the nodes down, the
//! validity shrinking with the time spent acquiring, and the watchdog
//! renewing a Redlock. Every server is stopped at the end of its test (and
//! killed when a failed test drops it).

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
    tokio::time::timeout(BOUND, body)
        .await
        .unwrap_or_else(|_| panic!("the test did not finish within {BOUND:?}"))
}

/// `n` independent redis-servers, one after the other (each on a free port).
async fn start_nodes(n: usize) -> Vec<RedisServer> {
    let mut servers = Vec::with_capacity(n);
    for _ in 0..n {
        servers.push(helpers::redis().await);
    }
    servers
}

fn urls(servers: &[RedisServer]) -> Vec<String> {
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

/// Makes nodes slow: `CLIENT PAUSE <PAUSE> ALL` on each of `conns`, so
/// every command another client sends them waits until the pause ends.
/// Returns when every node has acknowledged (the pause is in effect), with
/// the instant the first command was sent: no pause began before it, so
/// none ends before it + [`PAUSE`].
///
/// Unlike `DEBUG SLEEP`, whose only answer comes when the sleep is over,
/// CLIENT PAUSE says when it has begun: the round that follows is certain
/// to be held up, by a known minimum, on both nodes.
async fn pause(conns: &mut [MultiplexedConnection]) -> Instant {
    let mut command = redis::cmd("CLIENT");
    command
        .arg("PAUSE")
        .arg(PAUSE.as_millis() as u64)
        .arg("ALL");
    let sent = Instant::now();
    let acks = join_all(conns.iter_mut().map(|conn| command.query_async::<()>(conn))).await;
    for ack in acks {
        ack.expect("CLIENT PAUSE");
    }
    sent
}

/// Resolves when the paused node behind `conn` serves commands again.
async fn pause_over(conn: &mut MultiplexedConnection) {
    let pong: String = redis::cmd("PING").query_async(conn).await.unwrap();
    assert_eq!(pong, "PONG");
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

#[tokio::test]
async fn two_nodes_of_five_down_the_lock_still_works_and_still_excludes() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let urls = urls(&servers);
        let nodes = open(&urls);
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r3}");
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));

        // Two connected nodes die.
        servers[3].stop().await;
        servers[4].stop().await;

        let held = lock
            .lock(&a, LONG, Duration::ZERO)
            .await
            .unwrap()
            .expect("three nodes of five are a majority")
            .deadline()
            .saturating_duration_since(Instant::now());
        assert!(held <= LONG - drift(LONG), "validity {held:?}");
        assert_eq!(holders(&servers[..3], lock.key()).await, held_by(&a, 3));

        let round = lock.try_round(&b, LONG).await;
        assert_eq!(
            (round.granted, round.answered, round.validity),
            (0, 3, None)
        );
        assert_eq!(
            lock.lock(&b, LONG, Duration::ZERO).await.unwrap(),
            Err(Refused::Held),
            "three nodes answered: the lock is held, quorum is not the question"
        );
        // Nodes never connected to (a fresh handle) count as down just the same.
        let fresh = open(&urls).lock(lock.key());
        assert_eq!(
            fresh.lock(&b, LONG, Duration::ZERO).await.unwrap(),
            Err(Refused::Held)
        );

        assert_eq!(lock.unlock(&a).await, 3);
        assert!(lock.lock(&b, LONG, Duration::ZERO).await.unwrap().is_ok());
        assert_eq!(lock.unlock(&b).await, 3);

        stop_all(&mut servers).await;
    })
    .await;
}

#[tokio::test]
async fn three_nodes_of_five_down_nobody_gets_the_lock_until_they_return() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let nodes = open(&urls(&servers));
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r4}");
        let a = OwnerId::new("a");
        let no_quorum = Err(Refused::NoQuorum {
            answered: 2,
            quorum: 3,
        });

        let ports: Vec<u16> = servers[2..].iter().map(RedisServer::port).collect();
        for server in &mut servers[2..] {
            server.stop().await;
        }

        assert_eq!(
            lock.lock(&a, LONG, Duration::ZERO).await.unwrap(),
            no_quorum
        );
        let wait = Duration::from_millis(300);
        let started = Instant::now();
        assert_eq!(lock.lock(&a, LONG, wait).await.unwrap(), no_quorum);
        let waited = started.elapsed();
        assert!(
            waited >= wait - RETRY_MAX,
            "gave up after {waited:?} of a {wait:?} wait"
        );
        assert!(
            waited < wait + Duration::from_secs(1),
            "gave up only after {waited:?}"
        );
        // The two live nodes it got in each round were given back.
        assert_eq!(holders(&servers[..2], lock.key()).await, vec![None; 2]);

        // The three come back on their ports (empty: no persistence).
        for (server, port) in servers[2..].iter_mut().zip(ports) {
            *server = RedisServer::start(Some(port))
                .await
                .expect("restart a redis-server on its port");
        }
        let started = Instant::now();
        lock.lock(&a, LONG, Duration::from_secs(3))
            .await
            .unwrap()
            .expect("the majority is back: the lock works again");
        eprintln!(
            "redlock: lock taken again {:?} after the nodes returned",
            started.elapsed()
        );
        assert_eq!(holders(&servers, lock.key()).await, held_by(&a, 5));
        assert_eq!(lock.unlock(&a).await, 5);

        stop_all(&mut servers).await;
    })
    .await;
}

/// validity = lease - time spent acquiring - drift: two slow nodes (paused
/// for 500 ms) make the round last, and the validity shrinks by as much.
#[tokio::test]
async fn validity_shrinks_by_the_time_slow_nodes_took() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let urls = urls(&servers);
        let lease = Duration::from_secs(2);
        // Long enough to wait for the paused nodes' answers.
        let nodes = RedlockNodes::open(&urls)
            .unwrap()
            .with_node_timeout(Duration::from_millis(950));
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r5}");
        let a = OwnerId::new("a");
        let mut slow = vec![conn(&urls[3]).await, conn(&urls[4]).await];

        // All five fast: nearly the whole lease.
        let round = lock.try_round(&a, lease).await;
        assert_eq!((round.granted, round.answered), (5, 5));
        let fast = round.validity.expect("a free lock on five fast nodes");
        assert!(fast > lease - Duration::from_millis(100), "validity {fast:?}");
        assert_eq!(fast, lease - round.elapsed - drift(lease));
        assert_eq!(lock.unlock(&a).await, 5);

        // Two slow nodes: the round waits for their answers.
        let sent = pause(&mut slow).await;
        let before = Instant::now();
        let round = lock.try_round(&a, lease).await;
        let late = before - sent;
        eprintln!(
            "redlock: round with two paused nodes took {:?} (the pause began at most {late:?} before it)",
            round.elapsed
        );
        assert_eq!(
            (round.granted, round.answered),
            (5, 5),
            "the slow nodes must answer within the node timeout: {round:?}"
        );
        assert!(
            round.elapsed + late + CLOCKS >= PAUSE,
            "the round took {:?}, yet the nodes were paused for {PAUSE:?} from at most {late:?} before it",
            round.elapsed
        );
        assert!(
            round.elapsed >= Duration::from_millis(300),
            "{round:?}"
        );
        let slowed = round.validity.expect("1.5 s of a 2 s lease are left");
        assert_eq!(round.validity, validity(lease, round.elapsed));
        assert_eq!(slowed, lease - round.elapsed - drift(lease));
        assert!(slowed <= lease - Duration::from_millis(300), "{slowed:?}");
        assert!(fast - slowed >= Duration::from_millis(300));
        assert_eq!(lock.unlock(&a).await, 5);

        // The same through lock(): the deadline it hands out leaves only
        // the shrunk validity once the round is over.
        let sent = pause(&mut slow).await;
        let before = Instant::now();
        let held = lock
            .lock(&a, lease, Duration::ZERO)
            .await
            .unwrap()
            .expect("slow nodes still grant")
            .deadline()
            .saturating_duration_since(Instant::now());
        let late = before - sent;
        assert!(
            held + PAUSE <= lease - drift(lease) + late + CLOCKS,
            "validity {held:?} despite a {PAUSE:?} pause begun at most {late:?} before"
        );
        assert!(held <= lease - Duration::from_millis(300), "{held:?}");
        assert_eq!(lock.unlock(&a).await, 5);

        // With the default node timeout a slow node is not waited for: the
        // round costs about NODE_TIMEOUT, and the majority is the three
        // fast nodes.
        let quick = RedlockNodes::open(&urls).unwrap();
        warm_up(&quick).await;
        let lock = quick.lock("lock:{r5b}");
        let sent = pause(&mut slow).await;
        let round = lock.try_round(&a, lease).await;
        assert!(sent.elapsed() < PAUSE, "the round outlasted the pause");
        assert_eq!((round.granted, round.answered), (3, 3), "{round:?}");
        assert!(round.elapsed >= NODE_TIMEOUT, "{round:?}");
        assert_eq!(round.validity, validity(lease, round.elapsed));
        assert!(round.validity.unwrap() <= lease - NODE_TIMEOUT - drift(lease));
        // Once the pause is over a release leaves the key on no node. A
        // node that timed out may still run the SET it was sent (why a
        // release goes to every node); whether it did depends on the
        // client (one that drops the connection of a node that timed out
        // takes the SET back with it), but either way nothing is left.
        for conn in &mut slow {
            pause_over(conn).await;
        }
        let released = lock.unlock(&a).await;
        assert!((3..=5).contains(&released), "released on {released} nodes");
        assert_eq!(holders(&servers, lock.key()).await, vec![None; 5]);

        stop_all(&mut servers).await;
    })
    .await;
}

/// Keyspace events of the generic class on `key` of one node: `expire` for
/// a SET with PX and for every PEXPIRE, `del` for a release.
async fn generic_events(url: &str, key: &str) -> impl futures_util::Stream<Item = String> + use<> {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Kg")
        .query_async(&mut conn(url).await)
        .await
        .unwrap();
    let mut events = redis::Client::open(url)
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    events
        .subscribe(format!("__keyspace@0__:{key}"))
        .await
        .unwrap();
    events
        .into_on_message()
        .map(|msg| msg.get_payload::<String>().unwrap())
}

#[tokio::test]
async fn the_watchdog_keeps_a_redlock_past_its_lease_and_stopping_it_frees_it() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let nodes = open(&urls(&servers));
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r6}");
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
        let lease = Duration::from_millis(300);
        let mut events = generic_events(&servers[0].url(), lock.key()).await;

        lock.lock(&a, lease, Duration::ZERO)
            .await
            .unwrap()
            .expect("a takes a free lock");
        let dog = Watchdog::start(lock.clone(), a.clone(), lease);
        // On the first node: the lock's SET PX, then one PEXPIRE per renewal. The
        // dog sends its third renewal only once the second was counted.
        for seen in 0..4 {
            let event = tokio::time::timeout(Duration::from_secs(5), events.next())
                .await
                .unwrap_or_else(|_| panic!("no renewal after {seen} expire events"))
                .expect("the event stream ended");
            assert_eq!(event, "expire");
        }
        assert!(
            dog.tenure().renewals() >= 2,
            "{} renewals",
            dog.tenure().renewals()
        );

        // b tries for two whole leases in vain.
        let started = Instant::now();
        assert_eq!(
            lock.lock(&b, lease, lease * 2).await.unwrap(),
            Err(Refused::Held)
        );
        assert!(started.elapsed() >= lease * 2 - RETRY_MAX);
        // Every node still holds a's lease, renewed.
        for server in &servers {
            let mut conn = conn(&server.url()).await;
            let pttl: i64 = redis::cmd("PTTL")
                .arg(lock.key())
                .query_async(&mut conn)
                .await
                .unwrap();
            assert!(pttl > 0, "PTTL {pttl} on {}", server.url());
        }
        assert_eq!(holders(&servers, lock.key()).await, held_by(&a, 5));
        assert!(!dog.tenure().is_lost());

        // Without the dog the lease runs out and b gets in, nobody having
        // released anything.
        let tenure = dog.stop();
        assert!(tenure.renewals() >= 4, "{} renewals", tenure.renewals());
        let started = Instant::now();
        lock.lock(&b, LONG, Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a's lease ran out");
        assert!(
            started.elapsed() < lease + Duration::from_millis(200),
            "b waited {:?} for a {lease:?} lease",
            started.elapsed()
        );
        assert_eq!(lock.unlock(&a).await, 0, "a released b's lock");
        // b holds a majority; a node where a's lease had not quite run out
        // when b asked it said no (expiry is per node).
        let b_holds = holders(&servers, lock.key())
            .await
            .iter()
            .filter(|h| h.as_deref() == Some(b.as_str()))
            .count();
        assert!(b_holds >= nodes.quorum(), "b holds {b_holds} nodes");
        assert_eq!(lock.unlock(&b).await, b_holds);

        stop_all(&mut servers).await;
    })
    .await;
}

/// How many `SET`s a node has run: a waiter's try shows up here.
async fn sets_run(url: &str) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn(url).await)
        .await
        .unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_set:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// A Redlock waiter is woken by the release's publish on the main Redis,
/// not by its retry pause (100-120 ms while a majority holds the lock):
/// over 20 hand-offs, the median time from the holder's release to the
/// next holder's grant is under 20 ms.
#[tokio::test]
async fn a_redlock_waiter_is_woken_by_the_release() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let main = helpers::redis().await;
        let store = stocklock::store::Store::open(&main.url()).unwrap();
        let wakeups = stocklock::lock::Wakeups::new();
        let _listener = wakeups.listen(store.client().clone());
        wakeups.subscribed().await;
        let nodes = open(&urls(&servers));
        warm_up(&nodes).await;
        let lock = nodes
            .lock("lock:{handoff}")
            .with_wakeups(store.conn().await.unwrap(), wakeups);
        let first_node = servers[0].url();
        let mut handoffs = Vec::new();
        for _ in 0..20 {
            let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
            lock.lock(&a, LONG, Duration::ZERO)
                .await
                .unwrap()
                .expect("a takes the free lock");
            let tried_before = sets_run(&first_node).await;
            let waiter = {
                let lock = lock.clone();
                tokio::spawn(async move {
                    let grant = lock.lock(&b, LONG, Duration::from_secs(10)).await;
                    (grant, Instant::now(), b)
                })
            };
            // b's first try has run (and failed: a holds it); b waits now.
            while sets_run(&first_node).await == tried_before {
                tokio::task::yield_now().await;
            }
            let released = Instant::now();
            assert_eq!(lock.unlock(&a).await, 5);
            let (grant, granted, b) = waiter.await.unwrap();
            grant.unwrap().expect("b got the lock after a released it");
            handoffs.push(granted.duration_since(released));
            assert_eq!(lock.unlock(&b).await, 5);
        }
        handoffs.sort();
        let median = handoffs[handoffs.len() / 2];
        eprintln!(
            "redlock hand-off (release -> next holder granted), {} runs: median {:.2} ms, max {:.2} ms",
            handoffs.len(),
            median.as_secs_f64() * 1e3,
            handoffs[handoffs.len() - 1].as_secs_f64() * 1e3
        );
        assert!(
            median < Duration::from_millis(20),
            "median hand-off {median:?}: the waiter slept out its retry pause"
        );
        stop_all(&mut servers).await;
    })
    .await;
}
