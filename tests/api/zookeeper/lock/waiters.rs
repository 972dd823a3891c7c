//! Waiters: a release wakes the waiter, and each waiter watches only its
//! predecessor, so a release wakes the next one alone.

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::{LONG, PROMPT, until_queued, watches};
use crate::zookeeper::Servers;

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
