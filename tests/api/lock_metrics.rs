//! The lock library's `metrics` feature, read through a Prometheus
//! recorder local to the test: a guard's acquire (taken, and refused while
//! another holds it), its renewals, its loss (the key deleted under it),
//! its release finding the lock expired, and renewals that fail once the
//! store is gone. Each figure is counted exactly, not only seen.

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use stocklock::lock::{LeaseLock, LockOptions, Released};

use crate::helpers;
use crate::lock::setup;

/// The value of the series `name{labels}` in Prometheus's text format
/// (the labels as the exporter writes them, sorted by name).
fn value(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in:\n{page}"))
}

#[test]
fn a_guards_acquire_renewals_loss_and_expired_release_are_counted() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    // The recorder is this thread's; a current-thread runtime keeps every
    // task (the watchdog's renewals, the background releases) on it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lease = Duration::from_millis(300);
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            stocklock::lock::describe_metrics();
            let (mut redis, store, wakeups) = setup().await;
            let conn = store.conn().await.unwrap();
            let lock = LeaseLock::new(conn.clone(), "lock:{metrics}", wakeups);
            let options = LockOptions::new().lease(lease).renew(true);
            let guard = lock.acquire(&options).await.unwrap();
            // Refused while it is held.
            assert!(lock.acquire(&options).await.is_err());
            // Two renewals at least (one every 100 ms), then the key goes:
            // the next renewal is refused and the hold is lost.
            tokio::time::sleep(lease).await;
            let mut admin = conn.clone();
            let _: i64 = redis::cmd("DEL")
                .arg("lock:{metrics}")
                .query_async(&mut admin)
                .await
                .unwrap();
            helpers::within(lease * 2, guard.lost()).await;
            assert_eq!(guard.release().await.unwrap(), Released::Expired);
            // A renewed guard whose store goes away: its renewals fail.
            let guard = lock.acquire(&options).await.unwrap();
            redis.stop().await;
            helpers::within(lease * 2, guard.lost()).await;
            std::mem::forget(guard); // no store to release it on
        })
    });
    let page = handle.render();
    helpers::note(&format!("lock metrics:\n{page}"));
    let lease_lock = "{lock=\"lease\"}";
    let acquired =
        "stocklock_lock_guard_acquire_seconds_count{lock=\"lease\",outcome=\"acquired\"}";
    let busy = "stocklock_lock_guard_acquire_seconds_count{lock=\"lease\",outcome=\"busy\"}";
    assert_eq!(value(&page, acquired), 2.0);
    assert_eq!(value(&page, busy), 1.0);
    let renewals = value(
        &page,
        &format!("stocklock_lock_lease_renewals_total{lease_lock}"),
    );
    assert!(renewals >= 2.0, "renewals {renewals}");
    let failures = format!("stocklock_lock_lease_renewal_failures_total{lease_lock}");
    assert!(value(&page, &failures) >= 1.0);
    // Lost twice: the deleted key's refused renewal, the dead store's deadline.
    assert_eq!(
        value(
            &page,
            &format!("stocklock_lock_lease_lost_total{lease_lock}")
        ),
        2.0
    );
    let expired = format!("stocklock_lock_guard_released_expired_total{lease_lock}");
    assert_eq!(value(&page, &expired), 1.0);
    let held = format!("stocklock_lock_guard_held_seconds_count{lease_lock}");
    assert_eq!(value(&page, &held), 1.0);
    assert!(page.contains("# HELP stocklock_lock_lease_lost_total"));
}
