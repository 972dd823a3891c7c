//! Races a schedule decides: a buyer held after its read while another
//! sells, with no lock and with one, and `setnx` held between SETNX and
//! EXPIRE.

use stocklock::chaos::Chaos;
use stocklock::knobs::Sku;
use stocklock::store::{Keys, Store};

use super::{Driver, SECTION, buyer};
use crate::helpers::{self, InProcess};

/// A reads on instance a and is held there; B, on instance b, goes through
/// its whole sale; then A writes. With no lock both sell the unit they
/// read (oversold 1); with `token`, B finds the lock held and is busy.
#[tokio::test]
async fn a_schedule_decides_the_race_across_two_instances() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let a = InProcess::start(&store, "a", Chaos::on(0)).await;
    let b = InProcess::start(&store, "b", Chaos::on(0)).await;
    for (variant, oversold) in [("none", 1), ("token", 0)] {
        a.reset(variant, 5, 0).await;
        let run = format!("race-{variant}");
        let mut driver = Driver::start(&redis.url(), &run).await;
        let first = buyer(&a, variant, &run, "A");
        driver
            .through("A", &["before_acquire", "after_acquire"])
            .await;
        assert_eq!(driver.next_of("A").await, "after_read", "{variant}");
        // A has read stock 5 and waits. B goes all the way.
        let second = buyer(&b, variant, &run, "B");
        driver.pass("B", "before_acquire").await;
        if oversold == 1 {
            driver.through("B", &SECTION).await;
        }
        driver.pass("B", "after_release").await;
        let (status, body) = second.await.unwrap();
        if oversold == 1 {
            assert_eq!(
                (status, body["unit"].as_i64()),
                (200, Some(5)),
                "{variant}: {body}"
            );
        } else {
            assert_eq!(
                (status, body["reason"].as_str()),
                (429, Some("lock_held")),
                "{variant}: {body}"
            );
        }
        // Now A goes on from its read.
        driver
            .through(
                "A",
                &[
                    "after_read",
                    "before_check",
                    "before_write",
                    "before_release",
                    "after_release",
                ],
            )
            .await;
        let (status, body) = first.await.unwrap();
        assert_eq!(
            (status, body["unit"].as_i64()),
            (200, Some(5)),
            "{variant}: {body}"
        );
        let state = a.state(variant).await;
        assert_eq!(state.oversold, oversold, "{variant}: {state:?}");
        // The timeline saw A held after its read, on instance a, and let go.
        let mut conn = store.conn().await.unwrap();
        let events = stocklock::timeline::events(&mut conn, variant)
            .await
            .unwrap();
        let seen = |kind: &str, detail: &str| {
            events
                .iter()
                .any(|e| e.kind == kind && e.detail == detail && e.instance.as_deref() == Some("a"))
        };
        assert!(
            seen("gate_hold", "A waits at after_read"),
            "{variant}: {events:#?}"
        );
        assert!(
            seen("gate_release", "A goes on from after_read"),
            "{variant}: {events:#?}"
        );
    }
}

/// `setnx` has a gate of its own between SETNX and EXPIRE.
#[tokio::test]
async fn setnx_is_held_between_setnx_and_expire() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let a = InProcess::start(&store, "a", Chaos::on(0)).await;
    a.reset("setnx", 5, 0).await;
    let mut driver = Driver::start(&redis.url(), "setnx-gap").await;
    let request = buyer(&a, "setnx", "setnx-gap", "A");
    driver.pass("A", "before_acquire").await;
    assert_eq!(driver.next_of("A").await, "after_setnx");
    // Held in the gap: the lock is there, with no TTL yet.
    let mut conn = store.conn().await.unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(Keys::new(&Sku::parse("setnx").unwrap()).lock)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(ttl, -1, "the lock between SETNX and EXPIRE has no TTL");
    driver.pass("A", "after_setnx").await;
    driver.through("A", &SECTION).await;
    driver.pass("A", "after_release").await;
    assert_eq!(request.await.unwrap().0, 200);
}
