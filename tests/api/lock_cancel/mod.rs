//! The lock library's acquires dropped part-way (a timeout around them, a
//! `select!`, a cancelled request), against real stores: whatever the
//! dropped future took, or may have taken, is let go at once, not at the
//! end of its lease, and no waiter stays registered.
//!
//! The hardest moment is made to happen on purpose: Redis paused (`CLIENT
//! PAUSE`), so the acquire's command is sent and its answer not come when
//! the future is dropped; the command then runs and takes the lock for the
//! dropped owner. The leases are 30 s, far longer than the test: a lock
//! taken by the next buyer within seconds was let go, not expired.
//!
//! This file: the Redis locks dropped into a paused Redis and at random
//! moments; `points.rs`: every lock (Redis, Redlock, etcd, ZooKeeper)
//! dropped at each of its hook points, and etcd's and ZooKeeper's at
//! random moments.

mod points;

use std::time::Duration;

use stocklock::lock::{LeaseLock, LockOptions, ReentrantLock, Wakeups};
use stocklock::store::Store;

use crate::helpers;
use crate::lock::setup;

/// Longer than any test: a lock free again within one was let go.
const LEASE: Duration = Duration::from_secs(30);
/// How long the next buyer may wait for a lock let go in the background.
const PROMPT: Duration = Duration::from_secs(5);

/// A way to take a guard, by name: it makes an acquire of some options.
type Kind = (&'static str, Box<dyn Fn(LockOptions) -> Acquire>);

/// The kinds of Redis lock a guard is taken on, each on `key`.
async fn kinds(store: &Store, key: &str, wakeups: &Wakeups) -> Vec<Kind> {
    let conn = store.conn().await.unwrap();
    let lease = LeaseLock::new(conn.clone(), key, wakeups.clone());
    let reentrant = ReentrantLock::new(conn.clone(), key, wakeups.clone());
    let fenced = ReentrantLock::new(conn, key, wakeups.clone()).fenced(format!("fence:{key}"));
    vec![
        ("lease", Box::new(move |o| Acquire::Lease(lease.clone(), o))),
        (
            "reentrant",
            Box::new(move |o| Acquire::Reentrant(reentrant.clone(), o)),
        ),
        (
            "reentrant, renewed, fenced",
            Box::new(move |o: LockOptions| Acquire::Reentrant(fenced.clone(), o.renew(true))),
        ),
    ]
}

/// One acquire of one kind, to be run (and dropped) by the test.
enum Acquire {
    Lease(LeaseLock, LockOptions),
    Reentrant(ReentrantLock, LockOptions),
}

impl Acquire {
    async fn run(self) -> Result<stocklock::lock::LockGuard, stocklock::lock::Error> {
        match self {
            Acquire::Lease(lock, options) => lock.acquire(&options).await,
            Acquire::Reentrant(lock, options) => lock.acquire(&options).await,
        }
    }
}

/// Pauses every client of the Redis at `url` for `ms`.
async fn pause(url: &str, ms: u64) {
    let mut conn = helpers::redis_conn(url).await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("ALL")
        .query_async(&mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn an_acquire_dropped_before_its_answer_lets_the_lock_go_at_once() {
    let (redis, store, wakeups) = setup().await;
    for (kind, acquire) in kinds(&store, "lock:{cancel}", &wakeups).await {
        let options = LockOptions::new().lease(LEASE);
        // The command is sent into a paused Redis; the acquire is dropped
        // while its answer is awaited; then Redis runs it.
        pause(&redis.url(), 400).await;
        let dropped =
            tokio::time::timeout(Duration::from_millis(100), acquire(options.clone()).run()).await;
        assert!(
            dropped.is_err(),
            "{kind}: the acquire was answered in a paused Redis"
        );
        // The next buyer, with a fresh owner, waits: it gets the lock once
        // the dropped owner's hold is let go, long before the lease.
        let next = acquire(options.clone().wait(PROMPT)).run().await;
        let next = next.unwrap_or_else(|err| {
            panic!("{kind}: the dropped acquire's lock was left behind: {err}")
        });
        next.release().await.unwrap();
        assert!(!store_has(&store, "lock:{cancel}").await, "{kind}");
        assert_eq!(wakeups.waited_on(), 0, "{kind}: a waiter stays registered");
    }
}

/// Whether `key` exists.
async fn store_has(store: &Store, key: &str) -> bool {
    let mut conn = store.conn().await.unwrap();
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(&mut conn)
        .await
        .unwrap()
        == 1
}

/// Acquires dropped at random moments (a timeout of 0 to 3 ms, some while
/// another owner holds the lock and they wait): afterwards the lock is
/// free, nothing renews it and nobody waits.
#[tokio::test]
async fn acquires_dropped_at_random_moments_leave_nothing_behind() {
    let (_redis, store, wakeups) = setup().await;
    let mut rng = fastrand::Rng::with_seed(62);
    for (kind, acquire) in kinds(&store, "lock:{random}", &wakeups).await {
        for round in 0..40 {
            let holder = match rng.bool() {
                true => Some(
                    acquire(LockOptions::new().lease(LEASE))
                        .run()
                        .await
                        .unwrap(),
                ),
                false => None,
            };
            let options = LockOptions::new().lease(LEASE).wait(Duration::from_secs(1));
            let within = Duration::from_micros(rng.u64(0..3_000));
            // Done in time: a guard dropped at once, or the holder's refusal;
            // or not, and dropped wherever it was.
            drop(tokio::time::timeout(within, acquire(options).run()).await);
            if let Some(holder) = holder {
                holder.release().await.unwrap();
            }
            let next = acquire(LockOptions::new().lease(LEASE).wait(PROMPT))
                .run()
                .await;
            let next =
                next.unwrap_or_else(|err| panic!("{kind}, round {round}: left behind: {err}"));
            next.release().await.unwrap();
        }
        assert!(!store_has(&store, "lock:{random}").await, "{kind}");
        assert_eq!(wakeups.waited_on(), 0, "{kind}: a waiter stays registered");
    }
}
