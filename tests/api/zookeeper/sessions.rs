//! Opening sessions with ZooKeeper unreachable: requests do not queue
//! behind each other's connect, each gives up within its own wait.

use std::time::{Duration, Instant};

use stocklock::chaos::Chaos;
use stocklock::lock::{LockStoresConfig, Wakeups};
use stocklock::store::Store;

use crate::helpers::{self, InProcess, in_process_config};

#[tokio::test]
async fn requests_with_zookeeper_unreachable_answer_within_their_wait() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    // A server that takes connections (the kernel's backlog) and never
    // answers: a connect hangs until its timeout, every time.
    let black_hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let connect = black_hole.local_addr().unwrap().to_string();
    let instance = InProcess::with(
        &store,
        Wakeups::new(),
        stocklock::http::InstanceConfig {
            chaos: Chaos::off(),
            lock_stores: LockStoresConfig {
                zookeeper: Some(connect),
                ..Default::default()
            },
            ..in_process_config("a")
        },
    );
    instance.reset("zk-down", 10, 0).await;

    const REQUESTS: usize = 20;
    let started = Instant::now();
    let requests = (0..REQUESTS).map(|_| {
        let instance = instance.clone();
        async move {
            let (status, body) = instance
                .get("/deductStock/zookeeper?sku=zk-down&wait_ms=1000")
                .await;
            (status, body, started.elapsed())
        }
    });
    let answers = tokio::time::timeout(
        Duration::from_secs(4),
        futures_util::future::join_all(requests),
    )
    .await
    .unwrap_or_else(|_| panic!("{REQUESTS} requests with wait_ms=1000 still waiting after 4 s"));
    let slowest = answers.iter().map(|(_, _, took)| *took).max().unwrap();
    eprintln!("{REQUESTS} requests, ZooKeeper unreachable: the slowest answered after {slowest:?}");
    // An unreachable lock store is a refusal: busy, no quorum, nothing sold.
    for (status, body, _) in &answers {
        assert_eq!(status.as_u16(), 429, "{body}");
        assert_eq!(body["reason"], "no_quorum", "{body}");
    }
    assert!(
        slowest < Duration::from_millis(1500),
        "the slowest of {REQUESTS} answered after {slowest:?}"
    );
    assert_eq!(instance.state("zk-down").await.remaining, 10);
}
