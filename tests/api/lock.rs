//! The lock library against a real redis-server, without HTTP.

use std::time::{Duration, Instant};

use stocklock::lock::wakeups::{Attempt, wait_for_lock};
use stocklock::lock::{
    Hook, Lease, LeaseLock, OwnerId, ReentrantLock, Unlocked, Wakeups, Watchdog,
};
use stocklock::store::Store;
use stocklock::up::redis::RedisServer;

use crate::helpers;

const LONG: Duration = Duration::from_secs(30);

/// A store and a subscribed wake-up listener on a fresh redis-server.
pub(crate) async fn setup() -> (RedisServer, Store, Wakeups) {
    let server = helpers::redis().await;
    let store = Store::open(&server.url()).unwrap();
    let wakeups = Wakeups::new();
    let _listener = wakeups.listen(store.client().clone());
    wakeups.subscribed().await;
    (server, store, wakeups)
}

#[tokio::test]
async fn lease_lock_excludes_a_second_owner_until_released() {
    let (_redis, store, wakeups) = setup().await;
    let lock = LeaseLock::new(store.conn().await.unwrap(), "lock:{t1}", wakeups);
    let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));

    assert!(lock.try_lock(&a, LONG).await.unwrap());
    assert!(
        !lock.try_lock(&b, LONG).await.unwrap(),
        "b took a lock a holds"
    );
    assert!(
        lock.lock(&b, LONG, Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    assert!(lock.is_locked().await.unwrap());

    assert!(lock.unlock(&a).await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    assert!(lock.try_lock(&b, LONG).await.unwrap());
}

#[tokio::test]
async fn lease_lock_release_by_a_non_owner_is_refused() {
    let (_redis, store, wakeups) = setup().await;
    let lock = LeaseLock::new(store.conn().await.unwrap(), "lock:{t2}", wakeups);
    let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
    assert!(lock.try_lock(&a, LONG).await.unwrap());
    assert!(!lock.unlock(&b).await.unwrap(), "b released a's lock");
    assert!(lock.is_locked().await.unwrap());
    assert!(!lock.try_lock(&b, LONG).await.unwrap());
}

#[tokio::test]
async fn lease_expiry_frees_the_lock_and_renewal_after_it_is_refused() {
    let (_redis, store, wakeups) = setup().await;
    let lock = LeaseLock::new(store.conn().await.unwrap(), "lock:{t3}", wakeups);
    let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
    let lease = Duration::from_millis(200);

    let start = Instant::now();
    assert!(lock.try_lock(&a, lease).await.unwrap());
    assert!(
        lock.renew(&a, lease).await.unwrap(),
        "a live lease must renew"
    );
    // Nobody releases: b gets the lock only because a's lease ran out.
    assert!(
        lock.lock(&b, LONG, Duration::from_secs(5))
            .await
            .unwrap()
            .is_some()
    );
    let waited = start.elapsed();
    assert!(
        waited >= lease,
        "b got the lock after {waited:?}, before a's lease ran out"
    );

    assert!(
        !lock.renew(&a, lease).await.unwrap(),
        "a renewed a lease that had run out"
    );
    assert!(!lock.unlock(&a).await.unwrap(), "a released b's lock");
    assert!(lock.unlock(&b).await.unwrap());
    assert!(
        !lock.renew(&b, lease).await.unwrap(),
        "renewed a released lock"
    );
}

#[tokio::test]
async fn reentrant_lock_counts_holds_and_only_the_last_release_frees_it() {
    let (_redis, store, wakeups) = setup().await;
    let lock = ReentrantLock::new(store.conn().await.unwrap(), "lock:{t4}", wakeups);
    let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));

    assert_eq!(lock.try_lock(&a, LONG).await.unwrap(), Some(1));
    assert_eq!(lock.try_lock(&a, LONG).await.unwrap(), Some(2));
    assert_eq!(lock.holds(&a).await.unwrap(), 2);
    assert_eq!(lock.try_lock(&b, LONG).await.unwrap(), None);

    assert_eq!(lock.unlock(&b, LONG).await.unwrap(), Unlocked::NotOwner);
    assert_eq!(lock.unlock(&a, LONG).await.unwrap(), Unlocked::StillHeld(1));
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.try_lock(&b, LONG).await.unwrap(), None);

    assert_eq!(lock.unlock(&a, LONG).await.unwrap(), Unlocked::Released);
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.try_lock(&b, LONG).await.unwrap(), Some(1));
    assert_eq!(lock.unlock(&a, LONG).await.unwrap(), Unlocked::NotOwner);
}

#[tokio::test]
async fn watchdog_keeps_a_lock_held_well_past_its_lease() {
    let (_redis, store, wakeups) = setup().await;
    let lock = ReentrantLock::new(store.conn().await.unwrap(), "lock:{t5}", wakeups);
    let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
    let lease = Duration::from_millis(300);

    assert_eq!(lock.try_lock(&a, lease).await.unwrap(), Some(1));
    let dog = Watchdog::start(lock.clone(), a.clone(), lease);
    // Four leases long, b waits in vain: the watchdog keeps renewing.
    let started = Instant::now();
    assert!(lock.lock(&b, lease, lease * 4).await.unwrap().is_none());
    assert!(started.elapsed() >= lease * 4);
    let tenure = dog.stop();
    assert!(!tenure.is_lost());
    assert!(
        tenure.renewals() >= 6,
        "only {} renewals in four leases",
        tenure.renewals()
    );
    assert_eq!(lock.holds(&a).await.unwrap(), 1);

    // Without the watchdog the lease runs out and b gets in.
    let grant = lock.lock(&b, lease, Duration::from_secs(5)).await.unwrap();
    assert_eq!(grant.map(|g| g.holds), Some(1));
}

#[tokio::test]
async fn watchdog_reports_a_lost_lock() {
    let (_redis, store, wakeups) = setup().await;
    let mut conn = store.conn().await.unwrap();
    let lock = ReentrantLock::new(conn.clone(), "lock:{t6}", wakeups);
    let a = OwnerId::new("a");
    let lease = Duration::from_millis(150);
    assert_eq!(lock.try_lock(&a, lease).await.unwrap(), Some(1));
    let dog = Watchdog::start(lock.clone(), a.clone(), lease);
    // The lock vanishes under its owner (a failover, a clock jump).
    let _: i64 = redis::cmd("DEL")
        .arg("lock:{t6}")
        .query_async(&mut conn)
        .await
        .unwrap();
    // It learns at its next renewal, a third of a lease later.
    tokio::time::timeout(Duration::from_secs(5), dog.tenure().lost())
        .await
        .expect("the watchdog never noticed the lock was gone");
    assert!(dog.tenure().is_lost());
}

/// A waiter on a lock with a 30 s lease is woken by the release's publish,
/// not by the lease running out. Measures the hand-off: from the holder's
/// release returning to the waiter holding the lock.
#[tokio::test]
async fn a_waiter_is_woken_by_the_release_within_milliseconds() {
    let (_redis, store, wakeups) = setup().await;
    let lock = ReentrantLock::new(store.conn().await.unwrap(), "lock:{t7}", wakeups.clone());
    let mut handoffs = Vec::new();
    for _ in 0..30 {
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
        assert_eq!(lock.try_lock(&a, LONG).await.unwrap(), Some(1));

        let (waiting_tx, waiting_rx) = tokio::sync::oneshot::channel();
        let waiter = {
            let (lock, wakeups) = (lock.clone(), wakeups.clone());
            tokio::spawn(async move {
                let mut waiting = Some(waiting_tx);
                let got = wait_for_lock(&wakeups, lock.key(), LONG, &Hook::none(), || {
                    let (lock, b) = (lock.clone(), b.clone());
                    let waiting = waiting.take();
                    async move {
                        Ok(match lock.try_lock(&b, LONG).await? {
                            Some(holds) => Attempt::Acquired((holds, Instant::now())),
                            None => {
                                if let Some(tx) = waiting {
                                    let _ = tx.send(());
                                }
                                Attempt::HeldFor(Some(LONG))
                            }
                        })
                    }
                })
                .await
                .unwrap();
                (got, b)
            })
        };
        // b's first try failed: it is waiting now.
        waiting_rx.await.unwrap();
        let released_at = Instant::now();
        assert_eq!(lock.unlock(&a, LONG).await.unwrap(), Unlocked::Released);
        let (got, b) = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter was not woken by the release")
            .unwrap();
        let (holds, acquired_at) = got.expect("the waiter gave up");
        assert_eq!(holds, 1);
        handoffs.push(acquired_at.duration_since(released_at));
        assert_eq!(lock.unlock(&b, LONG).await.unwrap(), Unlocked::Released);
    }
    handoffs.sort();
    let median = handoffs[handoffs.len() / 2];
    let worst = handoffs[handoffs.len() - 1];
    eprintln!(
        "lock hand-off (release -> waiter holds it), {} runs: median {:.2} ms, max {:.2} ms",
        handoffs.len(),
        median.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3
    );
}

/// Through the public `lock()` API: a queue of waiters on one lock, each
/// released by the one before; all get it long before the 30 s lease.
#[tokio::test]
async fn waiters_take_turns_through_lock_and_unlock() {
    let (_redis, store, wakeups) = setup().await;
    let lock = ReentrantLock::new(store.conn().await.unwrap(), "lock:{t8}", wakeups);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            let owner = OwnerId::new(&format!("w{i}"));
            assert!(
                lock.lock(&owner, LONG, Duration::from_secs(20))
                    .await
                    .unwrap()
                    .is_some()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(lock.unlock(&owner, LONG).await.unwrap(), Unlocked::Released);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    // Had any waiter missed its wake-up it would have slept out the 30 s lease.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// A fenced lock's token comes with the grant, from the acquire script
/// itself: tokens grow with every grant, and a refused try takes none.
#[tokio::test]
async fn a_fenced_lock_issues_its_token_with_the_grant() {
    let (_redis, store, wakeups) = setup().await;
    let mut conn = store.conn().await.unwrap();
    let lock = ReentrantLock::new(conn.clone(), "lock:{f1}", wakeups).fenced("fence:{f1}");
    let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
    let first = lock.lock(&a, LONG, Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(first.token, Some(1));
    assert!(
        lock.lock(&b, LONG, Duration::ZERO).await.unwrap().is_none(),
        "b took a held lock"
    );
    let counter: i64 = redis::cmd("GET")
        .arg("fence:{f1}")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(counter, 1, "a refused try took a token");
    assert_eq!(lock.unlock(&a, LONG).await.unwrap(), Unlocked::Released);
    let second = lock.lock(&b, LONG, Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(second.token, Some(2));
    assert!(second.deadline() > first.deadline());
}

/// A release wakes the releasing process's own next waiter at once, not
/// through its message coming back from Redis: with no listener at all,
/// eight waiters of one process still take turns, where each would
/// otherwise sleep out the holder's 30 s lease (longer than its wait).
/// The other processes are woken by the message, which names the
/// releasing process so that its own listener does not wake a second one.
#[tokio::test]
async fn a_release_wakes_the_next_waiter_of_its_own_process_without_pub_sub() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    // Never listening: no message can wake anyone.
    let wakeups = Wakeups::new();
    let lock = ReentrantLock::new(store.conn().await.unwrap(), "lock:{t9}", wakeups);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            let owner = OwnerId::new(&format!("w{i}"));
            let granted = lock
                .lock(&owner, LONG, Duration::from_secs(5))
                .await
                .unwrap();
            assert!(granted.is_some(), "w{i} waited 5 s in vain");
            assert_eq!(lock.unlock(&owner, LONG).await.unwrap(), Unlocked::Released);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}
