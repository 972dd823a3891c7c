//! What the locks count, through the [`metrics`](https://docs.rs/metrics)
//! facade when the crate's `metrics` feature is on (and nothing at all when
//! it is off): the application installs whatever recorder it likes (a
//! Prometheus exporter, statsd); the crate ships none.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `stocklock_lock_guard_acquire_seconds` | histogram | `lock`, `outcome` | a guard's acquire, from call to answer: `acquired`, `busy`, `error` |
//! | `stocklock_lock_guard_held_seconds` | histogram | `lock` | a guard's hold, from its grant to its release or drop |
//! | `stocklock_lock_lease_renewals_total` | counter | `lock` | renewals the store confirmed (watchdog, etcd keep-alive) |
//! | `stocklock_lock_lease_renewal_failures_total` | counter | `lock` | renewals unanswered or failed (the lease may still hold) |
//! | `stocklock_lock_lease_lost_total` | counter | `lock` | holds learned lost: a renewal refused, the deadline passed unrenewed, the key or znode gone |
//! | `stocklock_lock_guard_released_expired_total` | counter | `lock` | releases that found the lock no longer theirs |
//!
//! `lock` is `lease`, `reentrant`, `redlock`, `etcd` or `zookeeper` (a
//! [`crate::Lease`] of the application's own says its name with
//! [`crate::Lease::kind`]).

use std::time::Duration;

/// Names and help text of every metric, for
/// [`describe`](crate::describe_metrics).
#[cfg(feature = "metrics")]
const METRICS: [(&str, &str); 6] = [
    (
        "stocklock_lock_guard_acquire_seconds",
        "Time from a guard's acquire call to its answer, by lock and outcome.",
    ),
    (
        "stocklock_lock_guard_held_seconds",
        "Time a guard held its lock, from its grant to its release or drop.",
    ),
    (
        "stocklock_lock_lease_renewals_total",
        "Lease renewals the store confirmed.",
    ),
    (
        "stocklock_lock_lease_renewal_failures_total",
        "Lease renewals unanswered or failed.",
    ),
    (
        "stocklock_lock_lease_lost_total",
        "Holds learned lost (a renewal refused, the deadline passed, the key gone).",
    ),
    (
        "stocklock_lock_guard_released_expired_total",
        "Releases that found the lock no longer theirs.",
    ),
];

/// Describes every metric of the crate to the installed recorder (their
/// help text and units), as an exporter shows them. Optional: the metrics
/// are recorded whether or not they were described.
#[cfg(feature = "metrics")]
pub fn describe_metrics() {
    for (name, help) in METRICS {
        if name.ends_with("_seconds") {
            metrics::describe_histogram!(name, metrics::Unit::Seconds, help);
        } else {
            metrics::describe_counter!(name, help);
        }
    }
}

/// An acquire answered after `took`: `outcome` is `acquired`, `busy` or
/// `error`.
pub(crate) fn acquired(lock: &'static str, outcome: &'static str, took: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("stocklock_lock_guard_acquire_seconds", "lock" => lock, "outcome" => outcome)
        .record(took);
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, outcome, took);
}

/// A guard let go of its lock after holding it `for_`.
pub(crate) fn held(lock: &'static str, for_: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("stocklock_lock_guard_held_seconds", "lock" => lock).record(for_);
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, for_);
}

/// One of the counters, by its name's middle: `renewals`,
/// `renewal_failures`, `lost`, `released_expired`.
pub(crate) fn count(lock: &'static str, what: Counted) {
    #[cfg(feature = "metrics")]
    {
        let name = match what {
            Counted::Renewal => "stocklock_lock_lease_renewals_total",
            Counted::RenewalFailure => "stocklock_lock_lease_renewal_failures_total",
            Counted::Lost => "stocklock_lock_lease_lost_total",
            Counted::ReleasedExpired => "stocklock_lock_guard_released_expired_total",
        };
        metrics::counter!(name, "lock" => lock).increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, what);
}

/// What [`count`] counts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Counted {
    Renewal,
    RenewalFailure,
    Lost,
    ReleasedExpired,
}
