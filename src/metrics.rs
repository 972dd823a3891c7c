//! Prometheus metrics of one instance (`GET /metrics`).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `stocklock_requests_total` | variant, outcome | `/deductStock` answers (sold, sold_out, busy, unknown, not_stocked, unavailable) |
//! | `stocklock_busy_total` | variant, reason | busy answers, by why |
//! | `stocklock_lock_wait_seconds` | variant | time to acquire a lock (or give up) |
//! | `stocklock_lock_hold_seconds` | variant | time from acquire to release |
//! | `stocklock_lock_renewals_total` | variant | leases the watchdog renewed |
//! | `stocklock_lock_lost_total` | variant | leases the watchdog could not keep |
//!
//! Every series carries the instance's name as the `instance` label.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the recorder (once per process; later calls keep the first
/// instance label) and returns the handle that renders the text format.
pub fn install(instance: &str) -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .add_global_label("instance", instance)
            .set_buckets(&[
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ])
            .expect("static buckets are valid")
            .build_recorder();
        let handle = recorder.handle();
        // Fails only if another recorder is installed; this handle then
        // renders an empty page rather than taking the process down.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// Counts one `/deductStock` answer.
pub fn answered(variant: &'static str, outcome: &'static str) {
    metrics::counter!("stocklock_requests_total", "variant" => variant, "outcome" => outcome)
        .increment(1);
}

pub fn busy(variant: &'static str, reason: &'static str) {
    metrics::counter!("stocklock_busy_total", "variant" => variant, "reason" => reason)
        .increment(1);
}

pub fn lock_wait(variant: &'static str, waited: Duration) {
    metrics::histogram!("stocklock_lock_wait_seconds", "variant" => variant)
        .record(waited.as_secs_f64());
}

pub fn lock_hold(variant: &'static str, held: Duration) {
    metrics::histogram!("stocklock_lock_hold_seconds", "variant" => variant)
        .record(held.as_secs_f64());
}

pub fn renewals(variant: &'static str, n: u64) {
    metrics::counter!("stocklock_lock_renewals_total", "variant" => variant).increment(n);
}

pub fn lost(variant: &'static str) {
    metrics::counter!("stocklock_lock_lost_total", "variant" => variant).increment(1);
}
