//! Dead holders and dead members: a holder that stops its keep-alives
//! loses the lock when its lease runs out (and at once when its lease is
//! revoked); the lock outlives the leader's death; with two members of
//! three down nothing is granted, and every call says so within its bound.

use std::time::{Duration, Instant};

use stocklock::lock::Error as LockError;
use stocklock::lock::etcd::{EtcdClient, EtcdLock, Session};
use stocklock::up::etcd::EtcdCluster;

use super::{LONG, bounded, client, cluster, stop};

#[tokio::test]
async fn etcd_lock_of_a_dead_holder_frees_within_its_ttl() {
    bounded(async {
        let Some(cluster) = cluster().await else {
            return;
        };
        let client = client(&cluster);
        let lock = EtcdLock::new(client.clone(), "lock/dead-holder");
        let ttl = Duration::from_secs(2);
        let dead = Session::grant(&client, ttl).await.unwrap();
        let granted = dead.ttl();
        let held = lock.lock(&dead, Duration::ZERO).await.unwrap();
        let died = Instant::now();
        dead.abandon(); // no more keep-alives, nothing revoked: a crash

        let next = Session::grant(&client, LONG).await.unwrap();
        let taken = lock.lock(&next, Duration::from_secs(20)).await.unwrap();
        let freed = died.elapsed();
        super::note(&format!(
            "etcd: a dead holder's lock (TTL {granted:?}) taken by the next after {freed:?}"
        ));
        // etcd expires a lease on its leader's clock, checking every 500 ms.
        assert!(
            freed <= granted + Duration::from_secs(1),
            "freed after {freed:?}, the TTL was {granted:?}"
        );
        assert!(taken.token > held.token);

        // A holder that revokes its lease without deleting its key frees
        // the lock at once: the key goes with the lease.
        let waiter = Session::grant(&client, LONG).await.unwrap();
        let waiting = {
            let lock = lock.clone();
            tokio::spawn(async move {
                let got = lock.lock(&waiter, Duration::from_secs(20)).await;
                (got, Instant::now(), waiter)
            })
        };
        super::until_queued(&lock, 2).await;
        let revoked = Instant::now();
        next.revoke().await.unwrap();
        let (got, woken, waiter) = waiting.await.unwrap();
        let last = got.expect("the waiter takes the lock once the lease is revoked");
        assert!(woken - revoked < Duration::from_secs(2));
        assert!(last.token > taken.token);
        lock.release(&last, waiter).await.unwrap();
        stop(cluster).await;
    })
    .await;
}

#[tokio::test]
async fn etcd_lock_survives_the_leaders_death() {
    bounded(async {
        let Some(mut cluster) = cluster().await else {
            return;
        };
        let client = client(&cluster);
        let lock = EtcdLock::new(client.clone(), "lock/leader-dies");
        let a = Session::grant(&client, Duration::from_secs(3))
            .await
            .unwrap();
        let held = lock.lock(&a, Duration::ZERO).await.unwrap();

        let leader = leader(&cluster).await;
        let killed = Instant::now();
        cluster.members[leader].kill().await;

        // The holder's key was acknowledged by a majority: still there, and
        // still a's, after a new leader is elected (the waits below retry
        // while there is none).
        let b = Session::grant(&client, LONG).await;
        let b = match b {
            Ok(b) => b,
            // Granted during the election: try once more.
            Err(LockError::EtcdUnavailable(_)) => Session::grant(&client, LONG).await.unwrap(),
            Err(err) => panic!("lease grant after the leader died: {err}"),
        };
        let refused = lock.lock(&b, Duration::from_millis(300)).await;
        assert!(
            matches!(refused, Err(LockError::Busy)),
            "b must not get a's lock: {refused:?}"
        );
        // a's keep-alives go on through the members left: the lease lives
        // well past its 3 s TTL.
        tokio::time::sleep(Duration::from_secs(4)).await; // outliving the TTL is the point
        assert!(
            !a.is_lost(),
            "a's lease was not kept alive across the failover"
        );
        let holder = lock.holder().await.unwrap().expect("still held");
        assert_eq!(holder.revision, held.token);

        lock.release(&held, a).await.unwrap();
        let next = lock.lock(&b, Duration::from_secs(10)).await.unwrap();
        assert!(next.token > held.token);
        lock.release(&next, b).await.unwrap();
        super::note(&format!(
            "etcd: leader {} killed; lock kept and handed on {:?} later",
            cluster.members[leader].name(),
            killed.elapsed()
        ));
        stop(cluster).await;
    })
    .await;
}

#[tokio::test]
async fn etcd_lock_with_two_members_of_three_down_is_refused_without_a_hang() {
    bounded(async {
        let Some(mut cluster) = cluster().await else {
            return;
        };
        let timeout = Duration::from_millis(500);
        let client = EtcdClient::with_timeout(cluster.urls(), timeout).unwrap();
        let lock = EtcdLock::new(client.clone(), "lock/no-quorum");
        let session = Session::grant(&client, LONG).await.unwrap();
        cluster.members[0].kill().await;
        cluster.members[1].kill().await;

        let started = Instant::now();
        let wait = Duration::from_secs(2);
        let refused = lock.lock(&session, wait).await;
        let took = started.elapsed();
        assert!(
            matches!(refused, Err(LockError::EtcdUnavailable(_))),
            "no quorum must be an unavailable store: {refused:?}"
        );
        super::note(&format!(
            "etcd: two of three members down: lock refused after {took:?} (wait {wait:?})"
        ));
        // The wait, plus one last bounded call on each of three members.
        assert!(
            took < wait + 3 * timeout + Duration::from_secs(1),
            "took {took:?}"
        );

        let started = Instant::now();
        let grant = Session::grant(&client, LONG).await;
        assert!(
            matches!(grant, Err(LockError::EtcdUnavailable(_))),
            "{grant:?}"
        );
        assert!(started.elapsed() < 3 * timeout + Duration::from_secs(1));
        // The message names what was tried.
        let Err(LockError::EtcdUnavailable(why)) = grant else {
            unreachable!()
        };
        assert!(why.contains("127.0.0.1"), "{why}");
        drop(session);
        stop(cluster).await;
    })
    .await;
}

/// The index of the member that leads, as the members say.
async fn leader(cluster: &EtcdCluster) -> usize {
    stocklock::up::etcd::leader(&cluster.urls())
        .await
        .expect("a member that leads")
}
