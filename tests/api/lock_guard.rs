//! The lock library's guard API (`LockOptions`, `LockGuard`) against a
//! real redis-server: a dropped guard releases, an explicit release says
//! how it went, a guard carries its fencing token, renewal keeps a lock
//! past its lease, a waiter retries as often as asked, and the one error
//! enum says why a lock was not taken.

use std::sync::Arc;
use std::time::Duration;

use stocklock::lock::{
    Error, Held, Hook, LeaseLock, LockOptions, OwnerId, Point, Reached, Redlock, RedlockNodes,
    ReentrantLock, Released, WAITS, Wakeups,
};
use stocklock::store::Store;
use tokio::sync::mpsc;

use crate::helpers;
use crate::lock::setup;

#[tokio::test]
async fn a_dropped_guard_releases_and_its_waiter_is_woken() {
    let (_redis, store, wakeups) = setup().await;
    let lock = LeaseLock::new(store.conn().await.unwrap(), "lock:{g1}", wakeups);
    let long = LockOptions::new().lease(Duration::from_secs(30));
    let first = lock.acquire(&long).await.unwrap();
    assert_eq!(first.token(), None, "an unfenced lock has no token");
    assert!(!first.is_lost());

    let refused = lock.acquire(&long).await;
    assert!(matches!(refused, Err(Error::Busy)), "{refused:?}");

    // A waiter with a wait far longer than the test: it gets the lock
    // because the drop released it (the lease is 30 s), not by expiry.
    let waiter = {
        let (lock, options) = (lock.clone(), long.clone().wait(Duration::from_secs(20)));
        tokio::spawn(async move { lock.acquire(&options).await })
    };
    drop(first);
    let second = waiter.await.unwrap().unwrap();
    assert!(second.deadline() > std::time::Instant::now() + Duration::from_secs(20));
    assert_eq!(second.release().await.unwrap(), Released::Released);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn an_explicit_release_says_the_lock_was_no_longer_ours() {
    let (_redis, store, wakeups) = setup().await;
    let lock = LeaseLock::new(store.conn().await.unwrap(), "lock:{g2}", wakeups);
    let mine = lock.acquire(&LockOptions::new()).await.unwrap();
    // The lease "runs out" (the key goes, as at expiry) and another owner
    // takes the lock.
    let mut conn = store.conn().await.unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg("lock:{g2}")
        .query_async(&mut conn)
        .await
        .unwrap();
    let theirs = OwnerId::new("theirs");
    let other = lock
        .acquire(&LockOptions::new().owner(theirs.clone()))
        .await
        .unwrap();
    assert_eq!(mine.release().await.unwrap(), Released::Expired);
    assert!(
        lock.holds(&theirs).await.unwrap(),
        "a stale release freed the new holder's lock"
    );
    assert_eq!(other.release().await.unwrap(), Released::Released);
}

#[tokio::test]
async fn a_fenced_guard_carries_a_token_that_grows_with_each_grant() {
    let (_redis, store, wakeups) = setup().await;
    let lock =
        ReentrantLock::new(store.conn().await.unwrap(), "lock:{g3}", wakeups).fenced("fence:{g3}");
    let first = lock.acquire(&LockOptions::new()).await.unwrap();
    let t1 = first.token().expect("a fenced guard has a token");
    assert_eq!(first.release().await.unwrap(), Released::Released);
    let second = lock.acquire(&LockOptions::new()).await.unwrap();
    let t2 = second.token().expect("a fenced guard has a token");
    assert!(t2 > t1, "tokens {t1} then {t2}");
}

#[tokio::test]
async fn a_reentrant_guard_releases_one_hold_at_a_time() {
    let (_redis, store, wakeups) = setup().await;
    let lock = ReentrantLock::new(store.conn().await.unwrap(), "lock:{g4}", wakeups);
    let me = LockOptions::new().owner(OwnerId::new("me"));
    let outer = lock.acquire(&me).await.unwrap();
    let inner = lock.acquire(&me).await.unwrap();
    assert_eq!(inner.grant().holds, 2);
    let other = lock.acquire(&LockOptions::new()).await;
    assert!(matches!(other, Err(Error::Busy)), "{other:?}");
    assert_eq!(inner.release().await.unwrap(), Released::StillHeld(1));
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(outer.release().await.unwrap(), Released::Released);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_renewed_guard_keeps_its_lock_past_several_leases() {
    let (_redis, store, wakeups) = setup().await;
    let lock = LeaseLock::new(store.conn().await.unwrap(), "lock:{g5}", wakeups);
    let lease = Duration::from_millis(300);
    let renewed = lock
        .acquire(&LockOptions::new().lease(lease).renew(true))
        .await
        .unwrap();
    let first_deadline = renewed.deadline();
    // Time itself is what is tested: four leases pass.
    tokio::time::sleep(lease * 4).await;
    assert!(!renewed.is_lost(), "the watchdog let the lease run out");
    assert!(renewed.deadline() > first_deadline + lease * 2);
    let other = lock.acquire(&LockOptions::new()).await;
    assert!(matches!(other, Err(Error::Busy)), "{other:?}");
    assert_eq!(renewed.release().await.unwrap(), Released::Released);

    // Without renewal the same guard is lost once its deadline passes.
    let plain = lock
        .acquire(&LockOptions::new().lease(lease))
        .await
        .unwrap();
    plain.lost().await;
    assert!(plain.is_lost());
}

#[tokio::test]
async fn redlock_without_a_majority_answers_no_quorum() {
    // Three ports nothing listens on: every node is down.
    let urls: Vec<String> = (0..3)
        .map(|_| format!("redis://127.0.0.1:{}", stocklock::os::free_port().unwrap()))
        .collect();
    let lock: Redlock = RedlockNodes::open(&urls).unwrap().lock("lock:{g6}");
    let refused = lock.acquire(&LockOptions::new()).await;
    assert!(
        matches!(
            refused,
            Err(Error::NoQuorum {
                answered: 0,
                quorum: 2
            })
        ),
        "{refused:?}"
    );
}

/// Tells the test each time its lock found the lock held and waits.
struct Waiting(mpsc::UnboundedSender<()>);

impl Reached for Waiting {
    fn reached(&self, point: Point) -> Held<'_> {
        if point == WAITS {
            let _ = self.0.send(());
        }
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_waiter_without_a_listener_retries_as_often_as_asked() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    // Two handles, each with wake-ups of its own and no listener: the
    // holder's release is announced to nobody, and its lease (60 s) is
    // longer than the waiter's wait (20 s). Only retrying finds it free.
    let holder = LeaseLock::new(store.conn().await.unwrap(), "lock:{g7}", Wakeups::new());
    let (tx, mut waits) = mpsc::unbounded_channel();
    let waiter = LeaseLock::new(store.conn().await.unwrap(), "lock:{g7}", Wakeups::new())
        .with_hook(Hook::new(Arc::new(Waiting(tx))));
    let held = holder
        .acquire(&LockOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap();
    let options = LockOptions::new()
        .wait(Duration::from_secs(20))
        .retry_every(Duration::from_millis(50));
    let waiting = tokio::spawn(async move { waiter.acquire(&options).await });
    // Three tries found it held: the waiter retries with nothing announced.
    for n in 1..=3 {
        assert!(
            waits.recv().await.is_some(),
            "the waiter gave up after {n} tries"
        );
    }
    assert_eq!(held.release().await.unwrap(), Released::Released);
    let got = waiting.await.unwrap();
    assert!(got.is_ok(), "{got:?}");
}

#[tokio::test]
async fn an_etcd_guard_releases_on_drop_and_its_tokens_grow() {
    let Some(mut cluster) = crate::etcd::one_member().await else {
        return;
    };
    let client = stocklock::lock::etcd::EtcdClient::new(cluster.urls()).unwrap();
    let lock = stocklock::lock::etcd::EtcdLock::new(client, "lock/guard");
    let long = LockOptions::new().lease(Duration::from_secs(30));
    let first = lock.acquire(&long).await.unwrap();
    assert!(!first.is_lost());
    let refused = lock.acquire(&long).await;
    assert!(matches!(refused, Err(Error::Busy)), "{refused:?}");
    // Woken by the drop's release, long before the lease (30 s) or the wait (20 s).
    let waiter = {
        let (lock, options) = (lock.clone(), long.clone().wait(Duration::from_secs(20)));
        tokio::spawn(async move { lock.acquire(&options).await })
    };
    let token = first.token();
    drop(first);
    let second = waiter.await.unwrap().unwrap();
    assert!(second.token() > token, "{} then {}", token, second.token());
    assert_eq!(second.release().await.unwrap(), Released::Released);
    assert_eq!(
        lock.holder().await.unwrap(),
        None,
        "released, session revoked"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn a_zookeeper_guard_releases_on_drop_and_says_when_its_znode_was_gone() {
    let Some(servers) = crate::zookeeper::Servers::start(1).await else {
        return;
    };
    let long = Duration::from_secs(30);
    let (a, b) = (servers.session(long).await, servers.session(long).await);
    let (lock_a, lock_b) = (a.lock("guard").unwrap(), b.lock("guard").unwrap());
    let held = lock_a.acquire(&LockOptions::new()).await.unwrap();
    assert!(!held.is_lost());
    let refused = lock_b.acquire(&LockOptions::new()).await;
    assert!(matches!(refused, Err(Error::Busy)), "{refused:?}");
    let waiter = {
        let options = LockOptions::new().wait(Duration::from_secs(20));
        tokio::spawn(async move { lock_b.acquire(&options).await })
    };
    let token = held.token();
    drop(held);
    let second = waiter.await.unwrap().unwrap();
    assert!(second.token() > token);
    // Its znode deleted under it (as its session's expiry would): the
    // release says the lock was no longer held.
    assert!(lock_a.evict(&second.hold().path).await.unwrap());
    assert_eq!(second.release().await.unwrap(), Released::Expired);
    servers.stop().await;
}
