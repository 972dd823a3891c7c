//! The gates of particular locks: Redlock's votes, a watchdog's renewal,
//! and the queue of etcd and ZooKeeper.

use std::time::Duration;

use stocklock::chaos::Chaos;
use stocklock::gate::{Arrival, WAITS_FOR_LOCK, is_note};
use stocklock::store::Store;

use super::{ARRIVAL, Driver, SECTION};
use crate::helpers::{self, InProcess};

/// Redlock's votes are gates of their own (`vote:K`): the schedule gives
/// nodes 1-2 to A and nodes 3-5 to B, so B holds a majority and A, with
/// two votes of five, has none (and does not wait: busy).
#[tokio::test]
async fn a_schedule_splits_redlocks_votes() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let a = InProcess::start(&store, "a", Chaos::on(0)).await;
    let b = InProcess::start(&store, "b", Chaos::on(0)).await;
    a.reset("redlock", 5, 0).await;
    let mut driver = Driver::start(&redis.url(), "votes").await;
    let spawn = |instance: &InProcess, name: &str| {
        let instance = instance.clone();
        let uri = format!("/deductStock/redlock?sku=redlock&wait_ms=0&schedule=votes:{name}");
        tokio::spawn(async move {
            let (status, body) = instance.get(&uri).await;
            (status.as_u16(), body)
        })
    };
    let first = spawn(&a, "A");
    let second = spawn(&b, "B");
    driver.pass("A", "before_acquire").await;
    driver.pass("B", "before_acquire").await;
    // Each round asks all five nodes at once: ten votes wait.
    let mut votes = Vec::new();
    while votes.len() < 10 {
        let arrival = driver
            .scheduler
            .next(ARRIVAL)
            .await
            .unwrap()
            .expect("a vote");
        assert!(arrival.gate.starts_with("vote:"), "{arrival:?}");
        votes.push(arrival);
    }
    let node = |arrival: &Arrival| arrival.gate["vote:".len()..].parse::<usize>().unwrap();
    let (early, late): (Vec<_>, Vec<_>) = votes
        .into_iter()
        .partition(|v| (v.buyer == "A") == (node(v) < 2));
    for vote in &early {
        driver.scheduler.release(vote).await.unwrap();
    }
    // The late votes go only once the early ones are answered (each noted
    // at `voted:K`): let go together, a late vote could reach its node
    // first on a loaded machine.
    let answered = |heard: &[Arrival]| {
        early.iter().all(|v| {
            heard
                .iter()
                .any(|h| h.buyer == v.buyer && h.gate == format!("voted:{}", node(v)))
        })
    };
    while !answered(&driver.heard) {
        let arrival = driver.scheduler.next(ARRIVAL).await.unwrap();
        driver.heard.push(arrival.expect("an early vote's answer"));
    }
    for vote in &late {
        driver.scheduler.release(vote).await.unwrap();
    }
    driver.through("B", &SECTION).await;
    driver.pass("B", "after_release").await;
    driver.pass("A", "after_release").await;
    let (status, body) = second.await.unwrap();
    assert_eq!((status, body["unit"].as_i64()), (200, Some(5)), "{body}");
    let (status, body) = first.await.unwrap();
    assert_eq!(
        (status, body["reason"].as_str()),
        (429, Some("lock_held")),
        "{body}"
    );
    // Each vote's answer was noted (`voted:K`), and nobody was held there.
    while let Some(arrival) = driver.scheduler.try_next().await.unwrap() {
        driver.heard.push(arrival);
    }
    let mut voted: Vec<String> = driver
        .heard
        .iter()
        .filter(|a| a.gate.starts_with("voted:"))
        .map(|a| format!("{} {}", a.buyer, a.gate))
        .collect();
    voted.sort();
    let every: Vec<String> = ["A", "B"]
        .iter()
        .flat_map(|b| (0..5).map(move |k| format!("{b} voted:{k}")))
        .collect();
    assert_eq!(voted, every);
    assert!(driver.scheduler.waiting().iter().all(|a| !is_note(&a.gate)));
}

/// A watchdog's renewal is a gate: held, it comes late. A's lease (300 ms)
/// runs out while A waits after its read; B takes the lock and sells. When
/// A goes on, its local deadline has passed: it does not write.
#[tokio::test]
async fn a_late_renewal_on_demand_and_the_watchdog_backs_off() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let a = InProcess::start(&store, "a", Chaos::on(0)).await;
    let b = InProcess::start(&store, "b", Chaos::on(0)).await;
    a.reset("watchdog", 5, 0).await;
    let mut driver = Driver::start(&redis.url(), "late").await;
    let spawn = |instance: &InProcess, name: &str| {
        let instance = instance.clone();
        let uri = format!(
            "/deductStock/watchdog?sku=watchdog&lease_ms=300&wait_ms=5000&schedule=late:{name}"
        );
        tokio::spawn(async move {
            let (status, body) = instance.get(&uri).await;
            (status.as_u16(), body)
        })
    };
    let first = spawn(&a, "A");
    driver
        .through("A", &["before_acquire", "after_acquire"])
        .await;
    // A waits after its read, and its first renewal waits too.
    let mut held = Vec::new();
    while held.len() < 2 {
        held.push(driver.arrival_of("A").await);
    }
    let gates: Vec<&str> = held.iter().map(|a| a.gate.as_str()).collect();
    assert!(
        gates.contains(&"after_read") && gates.contains(&"renewal"),
        "{gates:?}"
    );
    // B waits for the lock (and notes so: nobody lets that go), and gets
    // it once A's lease has run out.
    let second = spawn(&b, "B");
    driver.pass("B", "before_acquire").await;
    driver.through("B", &SECTION).await;
    assert!(
        driver
            .heard
            .iter()
            .any(|a| a.buyer == "B" && a.gate == WAITS_FOR_LOCK),
        "B waited for A's lock without a note: {:?}",
        driver.heard
    );
    driver.pass("B", "after_release").await;
    let (status, body) = second.await.unwrap();
    assert_eq!((status, body["unit"].as_i64()), (200, Some(5)), "{body}");
    // The renewal goes, finds the lock gone, and says so ("renewed"); then
    // A goes on from its read.
    let (renewal, read): (Vec<_>, Vec<_>) = held.into_iter().partition(|a| a.gate == "renewal");
    driver.scheduler.release(&renewal[0]).await.unwrap();
    driver.pass("A", "renewed").await;
    driver.scheduler.release(&read[0]).await.unwrap();
    driver
        .through("A", &["before_check", "before_release", "after_release"])
        .await;
    let (status, body) = first.await.unwrap();
    assert_eq!(
        (status, body["reason"].as_str()),
        (429, Some("lock_lost")),
        "{body}"
    );
    assert_eq!(a.state("watchdog").await.oversold, 0);
}

/// etcd and ZooKeeper queue their contenders: a buyer stops once its entry
/// is queued (`queued`; etcd first at `after_grant`, its lease granted and
/// its key not yet put). B queues first while A waits at its door; A,
/// queued behind B, notes that it waits and cannot go in, however the
/// schedule lets it go, until B released: B sells the first unit, A the
/// second.
#[tokio::test]
async fn a_queue_lock_serves_in_the_order_its_contenders_queued() {
    helpers::within(Duration::from_secs(180), async {
        let mut args = vec!["--chaos"];
        args.extend(helpers::LOCK_STORES);
        let stack = helpers::Stack::start_with(2, None, &args).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        for variant in ["etcd", "zookeeper"] {
            stack.client.reset(variant, 5, 0).await.unwrap();
            let run = format!("queue-{variant}");
            let mut driver = Driver::start(&redis_url, &run).await;
            let send = |at: usize, name: &str| {
                let client = stack.client.at(&stack.instances[at].url);
                let path = format!(
                    "/deductStock/{variant}?sku={variant}&wait_ms=10000&schedule={run}:{name}"
                );
                tokio::spawn(async move { client.deduct(&path).await })
            };
            let (a, b) = (send(0, "A"), send(1, "B"));
            let door: &[&str] = match variant {
                "etcd" => &["before_acquire", "after_grant"],
                _ => &["before_acquire"],
            };
            driver.through("B", door).await;
            assert_eq!(driver.next_of("B").await, "queued", "{variant}");
            driver.through("A", door).await;
            driver.pass("A", "queued").await;
            // A found B ahead of it: it waits for the lock, noted, not held.
            let waits = loop {
                let arrival = driver.scheduler.next(ARRIVAL).await.unwrap();
                let arrival = arrival.unwrap_or_else(|| panic!("{variant}: A noted no wait"));
                if arrival.buyer == "A" && arrival.gate == WAITS_FOR_LOCK {
                    break arrival;
                }
                driver.heard.push(arrival);
            };
            assert_eq!(waits.gate, WAITS_FOR_LOCK);
            driver.pass("B", "queued").await;
            driver.through("B", &SECTION).await;
            driver.pass("B", "after_release").await;
            driver.through("A", &SECTION).await;
            driver.pass("A", "after_release").await;
            let (b, a) = (b.await.unwrap(), a.await.unwrap());
            assert_eq!(b.unit(), Some(5), "{variant}: B {b:?}");
            assert_eq!(a.unit(), Some(4), "{variant}: A {a:?}");
        }
        stack.stop().await;
    })
    .await;
}
