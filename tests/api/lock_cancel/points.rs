//! Every lock's acquire dropped at each of its hook points: a hook that
//! says when the acquire got there and never lets it go on, and the test
//! drops the future then (an event, not a timer). The Redis locks wait at
//! `waits` behind a holder; Redlock's round is dropped at each node's
//! `vote:K` (its question not sent) and `voted:K` (that node answered:
//! it holds the key for the dropped owner) and at `waits`; etcd's and
//! ZooKeeper's at `queued` (their key or znode just created) and at
//! `waits`. After each drop the next buyer gets the lock within seconds
//! (every lease is 30 s), nothing is left in the store once it lets go,
//! no waiter stays registered, and a fence counts each holder once.
//! Redlock's, etcd's and ZooKeeper's acquires are dropped at random moments
//! too (the Redis locks' are in `mod.rs`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stocklock::lock::etcd::{EtcdClient, EtcdGuard, EtcdLock};
use stocklock::lock::{
    Error, Held, Hook, LeaseLock, LockGuard, LockOptions, Point, QUEUED, Reached, Redlock,
    RedlockNodes, ReentrantLock, WAITS, ZooKeeperGuard, ZooKeeperLock,
};

use super::{LEASE, PROMPT, store_has};
use crate::helpers;
use crate::lock::setup;
use crate::zookeeper::Servers;

/// A hook that says when the acquire reached `at` and never lets it past.
struct Stuck {
    at: Point,
    there: tokio::sync::Notify,
}

impl Stuck {
    fn at(at: Point) -> Arc<Stuck> {
        Arc::new(Stuck {
            at,
            there: tokio::sync::Notify::new(),
        })
    }
}

impl Reached for Stuck {
    fn reached(&self, point: Point) -> Held<'_> {
        let stuck = point == self.at;
        Box::pin(async move {
            if stuck {
                self.there.notify_one();
                std::future::pending::<()>().await;
            }
        })
    }
}

/// Runs `acquire` until it reaches `stuck`'s point, and drops it there.
async fn drop_at<T: std::fmt::Debug>(stuck: &Stuck, acquire: impl Future<Output = T>) {
    let reached = helpers::within(Duration::from_secs(10), async {
        tokio::select! {
            done = acquire => panic!("finished before reaching {}: {done:?}", stuck.at),
            () = stuck.there.notified() => {}
        }
    });
    reached.await;
}

/// The Redis locks (lease, reentrant, renewed and fenced), each dropped
/// while it waits behind a holder: the waiter goes with it, and the
/// holder's successor is the next buyer, its fence one more.
#[tokio::test]
async fn a_redis_acquire_dropped_while_it_waits_leaves_no_waiter() {
    let (_redis, store, wakeups) = setup().await;
    let conn = store.conn().await.unwrap();
    let key = "lock:{points}";
    let stuck = Stuck::at(WAITS);
    let hook = Hook::new(stuck.clone());
    for kind in ["lease", "reentrant", "reentrant, renewed, fenced"] {
        let options = LockOptions::new().lease(LEASE);
        let (plain, hooked, options) = match kind {
            "lease" => {
                let lock = LeaseLock::new(conn.clone(), key, wakeups.clone());
                (lock.clone(), Some(lock.with_hook(hook.clone())), options)
            }
            _ => (
                LeaseLock::new(conn.clone(), key, wakeups.clone()),
                None,
                options,
            ),
        };
        let reentrant = ReentrantLock::new(conn.clone(), key, wakeups.clone());
        let (reentrant, options) = match kind {
            "reentrant" => (reentrant, options),
            _ => (reentrant.fenced("fence:{points}"), options.renew(true)),
        };
        let take = |options: LockOptions| {
            let (plain, reentrant) = (plain.clone(), reentrant.clone());
            async move {
                match kind {
                    "lease" => plain.acquire(&options).await,
                    _ => reentrant.acquire(&options).await,
                }
            }
        };
        let holder = take(options.clone()).await.unwrap();
        let waiting = options.clone().wait(LEASE);
        match &hooked {
            Some(lock) => drop_at(&stuck, lock.acquire(&waiting)).await,
            None => {
                let lock = reentrant.clone().with_hook(hook.clone());
                drop_at(&stuck, lock.acquire(&waiting)).await
            }
        }
        assert_eq!(wakeups.waited_on(), 0, "{kind}: a waiter stays registered");
        let fence = holder.token();
        holder.release().await.unwrap();
        let next = take(options.clone().wait(PROMPT)).await.unwrap();
        if let Some(fence) = fence {
            assert_eq!(next.token(), Some(fence + 1), "{kind}: a fence taken twice");
        }
        next.release().await.unwrap();
        assert!(!store_has(&store, key).await, "{kind}: left behind");
    }
}

/// Where an acquire is dropped: at a hook point, or after a moment.
type At = Result<Point, Duration>;

/// A lock whose acquire the tests drop, and the guard it hands back.
trait Droppable: Clone {
    type Guard;
    fn hooked(&self, hook: Hook) -> Self;
    fn take(&self, options: &LockOptions) -> impl Future<Output = Result<Self::Guard, Error>>;
    fn let_go(guard: Self::Guard) -> impl Future<Output = ()>;
}

impl Droppable for Redlock {
    type Guard = LockGuard;
    fn hooked(&self, hook: Hook) -> Self {
        self.clone().with_hook(hook)
    }
    async fn take(&self, options: &LockOptions) -> Result<LockGuard, Error> {
        self.acquire(options).await
    }
    async fn let_go(guard: LockGuard) {
        guard.release().await.unwrap();
    }
}

impl Droppable for EtcdLock {
    type Guard = EtcdGuard;
    fn hooked(&self, hook: Hook) -> Self {
        self.clone().with_hook(hook)
    }
    async fn take(&self, options: &LockOptions) -> Result<EtcdGuard, Error> {
        self.acquire(options).await
    }
    async fn let_go(guard: EtcdGuard) {
        guard.release().await.unwrap();
    }
}

impl Droppable for ZooKeeperLock {
    type Guard = ZooKeeperGuard;
    fn hooked(&self, hook: Hook) -> Self {
        self.clone().with_hook(hook)
    }
    async fn take(&self, options: &LockOptions) -> Result<ZooKeeperGuard, Error> {
        self.acquire(options).await
    }
    async fn let_go(guard: ZooKeeperGuard) {
        guard.release().await.unwrap();
    }
}

/// Drops `lock`'s acquire at each of `points` and at 12 random moments
/// below `moments` (a holder there for every `waits` and for half the
/// moments); after each the next buyer gets the lock within the prompt
/// and, once it let go, `left` finds nothing in the store.
async fn drop_each<L: Droppable, F: Future<Output = ()>>(
    lock: &L,
    options: &LockOptions,
    points: Vec<Point>,
    moments: Duration,
    left: impl Fn(At) -> F,
) {
    let mut rng = fastrand::Rng::with_seed(62);
    let max = moments.as_micros() as u64;
    let mut all: Vec<At> = points.into_iter().map(Ok).collect();
    all.extend((0..12).map(|_| Err(Duration::from_micros(rng.u64(0..max)))));
    for at in all {
        let holder = match at == Ok(WAITS) || (at.is_err() && rng.bool()) {
            true => Some(lock.take(options).await.unwrap()),
            false => None,
        };
        let waiting = options.clone().wait(LEASE);
        match at {
            Ok(point) => {
                let stuck = Stuck::at(point);
                let hooked = lock.hooked(Hook::new(stuck.clone()));
                drop_at(&stuck, async { hooked.take(&waiting).await.is_ok() }).await;
            }
            Err(within) => drop(tokio::time::timeout(within, lock.take(&waiting)).await),
        }
        if let Some(holder) = holder {
            L::let_go(holder).await;
        }
        let next = helpers::within(PROMPT, lock.take(&options.clone().wait(PROMPT))).await;
        let Ok(next) = next else {
            panic!("{at:?}: what the dropped acquire took is left behind")
        };
        L::let_go(next).await;
        left(at).await;
    }
}

/// Redlock on three nodes: a round dropped before a node's question is
/// sent (`vote:K`), once a node answered yes (`voted:K`: it holds the key
/// for an owner nobody will hear of), while waiting behind a holder, and
/// at random moments (0 to 5 ms: a round on three nodes takes a few): no
/// node keeps the key.
#[tokio::test]
async fn a_redlock_acquire_dropped_at_each_vote_leaves_no_node_holding() {
    let servers = crate::redlock::start_nodes(3).await;
    let nodes = RedlockNodes::open(&crate::redlock::urls(&servers)).unwrap();
    let key = "lock:{redlock-points}";
    let mut points: Vec<Point> = (0..3)
        .flat_map(|k| [Point::nth("vote", k), Point::nth("voted", k)])
        .collect();
    points.push(WAITS);
    let options = LockOptions::new().lease(LEASE);
    let nodes_hold = |at: At| {
        let servers = &servers;
        async move {
            for (k, server) in servers.iter().enumerate() {
                let mut conn = helpers::redis_conn(&server.url()).await;
                let exists: i64 = redis::cmd("EXISTS")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(exists, 0, "{at:?}: node {k} still holds the key");
            }
        }
    };
    drop_each(
        &nodes.lock(key),
        &options,
        points,
        Duration::from_millis(5),
        nodes_hold,
    )
    .await;
}

/// etcd: an acquire dropped once its key is queued (it holds the lock,
/// unanswered), while it waits behind a holder, and at random moments (0
/// to 30 ms: a queue transaction takes a few): no key stays queued (its
/// session's lease is revoked at once, not left to its TTL).
#[tokio::test]
async fn an_etcd_acquire_dropped_at_each_point_or_any_moment_leaves_no_key() {
    let Some(mut cluster) = crate::etcd::one_member().await else {
        return;
    };
    let client = EtcdClient::new(cluster.urls()).unwrap();
    let lock = EtcdLock::new(client, "lock/cancel");
    let options = LockOptions::new().lease(LEASE);
    let queued = |at: At| {
        let lock = &lock;
        async move { assert_eq!(lock.contenders().await.unwrap(), 0, "{at:?}") }
    };
    let points = vec![QUEUED, WAITS];
    drop_each(&lock, &options, points, Duration::from_millis(30), queued).await;
    cluster.stop().await;
}

/// ZooKeeper: an acquire dropped once its znode is queued, while it waits
/// behind a holder, and at random moments (0 to 20 ms) leaves no znode
/// behind (the session lives on: without the library deleting it, it
/// would stay first in line or block everyone after it for the session's
/// life).
#[tokio::test]
async fn a_zookeeper_acquire_dropped_at_each_point_or_any_moment_leaves_no_znode() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let session = servers.session(LEASE).await;
    let lock = session.lock("cancel").unwrap();
    // The background deletion of a dropped znode may still be on its way:
    // the queue empties within the prompt.
    let queued = |_: At| {
        let lock = &lock;
        helpers::within(PROMPT, async move {
            while !lock.contenders_in_order().await.unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let points = vec![QUEUED, WAITS];
    drop_each(
        &lock,
        &LockOptions::new(),
        points,
        Duration::from_millis(20),
        queued,
    )
    .await;
    drop(session);
    servers.stop().await;
}
