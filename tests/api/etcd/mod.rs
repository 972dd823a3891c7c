//! The etcd lock library against a real 3-member etcd cluster, without
//! HTTP: mutual exclusion and growing fencing tokens, a waiter woken by the
//! release, a dead holder's lock freed by its lease, the leader's death
//! survived, and two members of three down refused without a hang. Each
//! test starts its own cluster on free loopback ports and stops it by pid.
//!
//! This file: the fixture and the lock's ordinary life; `outages.rs`:
//! dead holders and dead members.

mod outages;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use stocklock::lock::Error as LockError;
use stocklock::lock::etcd::{EtcdClient, EtcdLock, Session};
use stocklock::up::etcd::EtcdCluster;
use tokio::sync::Mutex;

use crate::helpers;
use crate::helpers::note;

/// A lease no test outlives.
const LONG: Duration = Duration::from_secs(30);
/// Each test's own bound: it fails rather than hangs.
const BOUND: Duration = Duration::from_secs(90);

/// Runs a test body, failing it if it takes longer than [`BOUND`].
async fn bounded<T>(body: impl Future<Output = T>) -> T {
    crate::helpers::within(BOUND, body).await
}

/// A healthy 3-member cluster; `None` (SKIPPED, a failure under CI=true)
/// when etcd is not installed.
async fn cluster() -> Option<EtcdCluster> {
    if stocklock::os::find_program("etcd").is_none() {
        helpers::missing_tool("etcd is not installed (scripts/deps.sh etcd-server)");
        return None;
    }
    Some(
        EtcdCluster::start(3, None)
            .await
            .expect("start 3 etcd members"),
    )
}

/// A one-member cluster, for tests that need an etcd but not its quorum;
/// `None` (SKIPPED, a failure under CI=true) when etcd is not installed.
pub(crate) async fn one_member() -> Option<EtcdCluster> {
    if stocklock::os::find_program("etcd").is_none() {
        helpers::missing_tool("etcd is not installed (scripts/deps.sh etcd-server)");
        return None;
    }
    Some(
        EtcdCluster::start(1, None)
            .await
            .expect("start 1 etcd member"),
    )
}

fn client(cluster: &EtcdCluster) -> EtcdClient {
    EtcdClient::new(cluster.urls()).unwrap()
}

/// Stops every member and checks that none is left running.
async fn stop(mut cluster: EtcdCluster) {
    cluster.stop().await;
    for member in &cluster.members {
        assert_eq!(
            member.pid(),
            None,
            "etcd {} is still running",
            member.name()
        );
    }
}

/// Waits (bounded, by looking at etcd's own queue) until `n` contenders
/// have queued their keys: the event a waiter's arrival is.
async fn until_queued(lock: &EtcdLock, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while lock.contenders().await.unwrap() < n {
        assert!(Instant::now() < deadline, "{n} contenders never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn etcd_lock_excludes_and_its_tokens_grow() {
    bounded(async {
        let Some(cluster) = cluster().await else {
            return;
        };
        let client = client(&cluster);
        let lock = EtcdLock::new(client.clone(), "lock/exclusion");
        // Tokens as the holders saw them, in the order they held the lock;
        // `inside` counts the holders in the critical section at once.
        let tokens = Arc::new(Mutex::new(Vec::new()));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut contenders = Vec::new();
        for _ in 0..4 {
            let (client, lock) = (client.clone(), lock.clone());
            let (tokens, inside, most) = (tokens.clone(), inside.clone(), most.clone());
            contenders.push(tokio::spawn(async move {
                let session = Session::grant(&client, LONG).await.unwrap();
                for _ in 0..10 {
                    let held = lock.lock(&session, Duration::from_secs(30)).await.unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokens.lock().await.push(held.token);
                    tokio::task::yield_now().await;
                    tokio::time::sleep(Duration::from_millis(2)).await; // the work
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lock.unlock(&held).await.unwrap();
                }
                session.revoke().await.unwrap();
            }));
        }
        for contender in contenders {
            contender.await.unwrap();
        }
        note(&format!(
            "etcd lock, 4 contenders, 2 ms of work each time: {:.0} grants/s",
            40.0 / started.elapsed().as_secs_f64()
        ));
        assert_eq!(most.load(Ordering::SeqCst), 1, "two holders at once");
        let tokens = tokens.lock().await;
        assert_eq!(tokens.len(), 40);
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "fencing tokens must strictly grow across holders: {tokens:?}"
        );
        assert_eq!(lock.holder().await.unwrap(), None, "left held");
        stop(cluster).await;
    })
    .await;
}

#[tokio::test]
async fn etcd_lock_refuses_a_second_owner_at_once_and_wakes_a_waiter_on_release() {
    bounded(async {
        let Some(cluster) = cluster().await else {
            return;
        };
        let client = client(&cluster);
        let lock = EtcdLock::new(client.clone(), "lock/handoff");
        let (a, b) = (
            Session::grant(&client, LONG).await.unwrap(),
            Session::grant(&client, LONG).await.unwrap(),
        );
        let held = lock.lock(&a, Duration::ZERO).await.unwrap();
        let holder = lock.holder().await.unwrap().expect("a holds it");
        assert_eq!((holder.lease, holder.revision), (a.lease(), held.token));
        assert!(matches!(
            lock.lock(&b, Duration::ZERO).await,
            Err(LockError::Busy)
        ));
        assert_eq!(lock.contenders().await.unwrap(), 1, "b left the queue");

        // Twenty hand-offs between a and b, each timed from the release to
        // the waiter's grant: the watch's wake-up, not a poll or a lease.
        let mut handoffs = Vec::new();
        let mut sessions = (a, b);
        let mut held = held;
        let first = held.token;
        for _ in 0..20 {
            let (holder, waiting) = sessions;
            let waiter = {
                let lock = lock.clone();
                tokio::spawn(async move {
                    let got = lock.lock(&waiting, Duration::from_secs(20)).await;
                    (got, Instant::now(), waiting)
                })
            };
            until_queued(&lock, 2).await;
            let released = Instant::now();
            lock.unlock(&held).await.unwrap();
            let (got, woken, waiting) = waiter.await.unwrap();
            let next = got.expect("the waiter takes the lock once released");
            assert!(next.token > held.token);
            handoffs.push(woken - released);
            held = next;
            sessions = (waiting, holder);
        }
        handoffs.sort();
        let (median, worst) = (handoffs[handoffs.len() / 2], handoffs[handoffs.len() - 1]);
        note(&format!(
            "etcd hand-off (release to the waiter's grant), 20 times: median {median:?}, max {worst:?}"
        ));
        // Woken by the release, not by a lease (30 s) or the wait (20 s).
        assert!(worst < Duration::from_secs(2), "a hand-off took {worst:?}");
        assert!(held.token > first);
        let (holder, idle) = sessions;
        lock.release(&held, holder).await.unwrap();
        idle.revoke().await.unwrap();
        assert_eq!(lock.holder().await.unwrap(), None);
        stop(cluster).await;
    })
    .await;
}

#[tokio::test]
async fn etcd_lock_pairs_uncontended() {
    bounded(async {
        let Some(cluster) = cluster().await else {
            return;
        };
        let client = client(&cluster);
        let lock = EtcdLock::new(client.clone(), "lock/pairs");
        let session = Session::grant(&client, LONG).await.unwrap();
        let held = lock.lock(&session, Duration::ZERO).await.unwrap();
        lock.unlock(&held).await.unwrap(); // warm-up: connections made
        const PAIRS: u32 = 200;
        let started = Instant::now();
        for _ in 0..PAIRS {
            let held = lock.lock(&session, Duration::ZERO).await.unwrap();
            lock.unlock(&held).await.unwrap();
        }
        let took = started.elapsed();
        let rate = f64::from(PAIRS) / took.as_secs_f64();
        note(&format!(
            "etcd lock/unlock pairs, uncontended, 3 members: {rate:.0}/s ({:?} a pair)",
            took / PAIRS
        ));
        assert!(rate > 5.0, "{rate:.1} pairs/s");
        session.revoke().await.unwrap();
        stop(cluster).await;
    })
    .await;
}

#[tokio::test]
async fn etcd_lock_serves_waiters_in_queue_order_and_skips_one_that_gave_up() {
    bounded(async {
        let Some(cluster) = cluster().await else {
            return;
        };
        let client = client(&cluster);
        let lock = EtcdLock::new(client.clone(), "lock/queue");
        let a = Session::grant(&client, LONG).await.unwrap();
        let held = lock.lock(&a, Duration::ZERO).await.unwrap();
        // b gives up after a second; c and d wait behind it, in that order.
        let b = queue(&client, &lock, Duration::from_secs(1)).await;
        until_queued(&lock, 2).await;
        let c = queue(&client, &lock, Duration::from_secs(30)).await;
        until_queued(&lock, 3).await;
        let d = queue(&client, &lock, Duration::from_secs(30)).await;
        until_queued(&lock, 4).await;

        let (gave_up, b) = b.await.unwrap();
        assert!(matches!(gave_up, Err(LockError::Busy)), "{gave_up:?}");
        b.revoke().await.unwrap();
        // c's predecessor left: c looked again, found a, and waits on.
        assert_eq!(lock.contenders().await.unwrap(), 3);
        assert!(!c.is_finished() && !d.is_finished());
        assert_eq!(lock.holder().await.unwrap().unwrap().revision, held.token);

        lock.release(&held, a).await.unwrap();
        let (got, c_session) = c.await.unwrap();
        let c_held = got.expect("c, first in the queue, takes the lock");
        assert!(!d.is_finished(), "d must wait for c, not be woken by a");
        assert_eq!(lock.holder().await.unwrap().unwrap().revision, c_held.token);
        lock.release(&c_held, c_session).await.unwrap();
        let (got, d_session) = d.await.unwrap();
        let d_held = got.expect("d follows c");
        assert!(held.token < c_held.token && c_held.token < d_held.token);
        lock.release(&d_held, d_session).await.unwrap();
        stop(cluster).await;
    })
    .await;
}

#[tokio::test]
async fn up_starts_its_etcd_members_and_stops_them_by_pid() {
    bounded(async {
        if stocklock::os::find_program("etcd").is_none() {
            helpers::missing_tool("etcd is not installed (scripts/deps.sh etcd-server)");
            return;
        }
        let stack = helpers::Stack::start_with(1, None, &["--etcd", "3"]).await;
        assert_eq!(stack.etcd_members.len(), 3, "one line per member");
        let urls: Vec<String> = stack.etcd_members.iter().map(|m| m.url.clone()).collect();
        for member in &stack.etcd_members {
            assert!(
                helpers::alive(member.pid),
                "etcd pid {} is not running",
                member.pid
            );
            assert!(
                member.url.starts_with("http://127.0.0.1:"),
                "{}",
                member.url
            );
        }
        // One cluster: a lock taken through the first member is seen held
        // through the last.
        let first = EtcdClient::new(vec![urls[0].clone()]).unwrap();
        let last = EtcdClient::new(vec![urls[2].clone()]).unwrap();
        let session = Session::grant(&first, LONG).await.unwrap();
        let held = EtcdLock::new(first, "lock/up")
            .lock(&session, Duration::ZERO)
            .await
            .unwrap();
        let holder = EtcdLock::new(last, "lock/up").holder().await.unwrap();
        assert_eq!(holder.map(|h| h.revision), Some(held.token));
        drop(session);
        stack.stop().await; // checks every member's pid is gone
    })
    .await;
}

/// A new contender with a session of its own, waiting up to `wait` for
/// `lock` in a task: its answer and its session when it is done.
async fn queue(
    client: &EtcdClient,
    lock: &EtcdLock,
    wait: Duration,
) -> tokio::task::JoinHandle<(Result<stocklock::lock::etcd::Held, LockError>, Session)> {
    let session = Session::grant(client, LONG).await.unwrap();
    let lock = lock.clone();
    tokio::spawn(async move {
        let got = lock.lock(&session, wait).await;
        (got, session)
    })
}
