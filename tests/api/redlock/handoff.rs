//! A Redlock kept and handed on: the watchdog renews it past its lease
//! (and stopping it frees the lock), and a release wakes the next waiter.

use super::*;

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

/// Five nodes and the lock `key` on them, its releases announced on a
/// main Redis whose listener wakes the lock's waiters.
struct Announced {
    servers: Vec<RedisServer>,
    main: RedisServer,
    nodes: RedlockNodes,
    lock: Redlock,
}

async fn announced(key: &str) -> Announced {
    let servers = start_nodes(5).await;
    let main = helpers::redis().await;
    let store = stocklock::store::Store::open(&main.url()).unwrap();
    let wakeups = stocklock::lock::Wakeups::new();
    // The listener lives as long as the test's runtime.
    let _listener = wakeups.listen(store.client().clone());
    wakeups.subscribed().await;
    let nodes = open(&urls(&servers));
    warm_up(&nodes).await;
    let lock = nodes
        .lock(key)
        .with_wakeups(store.conn().await.unwrap(), wakeups);
    Announced {
        servers,
        main,
        nodes,
        lock,
    }
}

/// A Redlock waiter is woken by the release's publish on the main Redis,
/// not by a retry pause (it has none while a majority holds the lock):
/// over 20 hand-offs, the median time from the holder's release to the
/// next holder's grant is under 20 ms.
#[tokio::test]
async fn a_redlock_waiter_is_woken_by_the_release() {
    bounded(async {
        let Announced {
            mut servers,
            main: _main,
            lock,
            ..
        } = announced("lock:{handoff}").await;
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

/// A waiter that a majority refused waits for the release, or for the
/// holder's lease to run out on its nodes; it does not ask the nodes again
/// meanwhile (it once did every 100-120 ms: 64 waiters' rounds then kept
/// a loaded machine's nodes and instances busy for nothing). One round at
/// the start, one at the end of its wait: two `SET`s on a node in a second;
/// and a holder's lease that runs out lets it in at once, unreleased.
#[tokio::test]
async fn a_redlock_waiter_refused_by_a_majority_asks_again_only_when_the_lock_can_be_free() {
    bounded(async {
        let Announced {
            mut servers,
            main: _main,
            nodes,
            lock,
        } = announced("lock:{patient}").await;
        let first_node = servers[0].url();
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));

        lock.lock(&a, LONG, Duration::ZERO)
            .await
            .unwrap()
            .expect("a takes the free lock");
        let before = sets_run(&first_node).await;
        let started = Instant::now();
        assert_eq!(
            lock.lock(&b, LONG, Duration::from_secs(1)).await.unwrap(),
            Err(Refused::Held)
        );
        assert!(started.elapsed() >= Duration::from_secs(1));
        assert_eq!(sets_run(&first_node).await - before, 2, "b's rounds");
        assert_eq!(lock.unlock(&a).await, 5);

        // a's lease of 400 ms runs out unreleased: b, refused at first, is in
        // within a few rounds of its end.
        let lease = Duration::from_millis(400);
        lock.lock(&a, lease, Duration::ZERO)
            .await
            .unwrap()
            .expect("a takes the free lock");
        let (before, started) = (sets_run(&first_node).await, Instant::now());
        lock.lock(&b, LONG, Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a's lease ran out");
        let waited = started.elapsed();
        assert!(
            waited >= lease - RETRY_MAX && waited < lease + Duration::from_millis(300),
            "b waited {waited:?} for a {lease:?} lease"
        );
        let rounds = sets_run(&first_node).await - before;
        assert!((2..=4).contains(&rounds), "b's rounds: {rounds}");
        // (b holds a majority at least: expiry is per node.)
        assert!(lock.unlock(&b).await >= nodes.quorum());
        stop_all(&mut servers).await;
    })
    .await;
}
