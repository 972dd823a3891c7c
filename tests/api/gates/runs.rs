//! A schedule's run: abandoned, it holds nobody; without chaos mode, it
//! is refused.

use stocklock::chaos::Chaos;
use stocklock::store::Store;

use super::{Driver, buyer};
use crate::helpers::{self, InProcess};

/// An abandoned run lets its waiting buyer go, and holds nobody after.
#[tokio::test]
async fn an_abandoned_run_holds_nobody() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let a = InProcess::start(&store, "a", Chaos::on(0)).await;
    a.reset("watchdog", 5, 0).await;
    let mut driver = Driver::start(&redis.url(), "gone").await;
    let held = buyer(&a, "watchdog", "gone", "A");
    assert_eq!(driver.next_of("A").await, "before_acquire");
    driver.scheduler.abandon().await.unwrap();
    assert_eq!(held.await.unwrap().0, 200);
    // Nobody lets B go: it must pass every gate by itself.
    let (status, body) = buyer(&a, "watchdog", "gone", "B").await.unwrap();
    assert_eq!((status, body["unit"].as_i64()), (200, Some(4)), "{body}");
}

/// Without chaos mode a schedule is refused, and nothing is sold.
#[tokio::test]
async fn a_schedule_needs_chaos_mode() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let plain = InProcess::start(&store, "p", Chaos::off()).await;
    plain.reset("none", 5, 0).await;
    let (status, body) = plain.get("/deductStock/none?sku=none&schedule=r:A").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("chaos mode"),
        "{body}"
    );
    let (status, body) = plain.get("/deductStock/none?sku=none&schedule=r:A:B").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("RUN:BUYER"),
        "{body}"
    );
    assert_eq!(plain.state("none").await.remaining, 5);
}
