//! Prometheus metrics of one instance (`GET /metrics`).
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `stocklock_requests_total` | counter | variant, outcome | `/deductStock` answers (sold, sold_out, busy, unknown, not_stocked, unavailable) |
//! | `stocklock_busy_total` | counter | variant, reason | busy answers, by why |
//! | `stocklock_lock_wait_seconds` | histogram | variant, outcome | time spent waiting for a lock, by how the wait ended: `acquired`, `gave_up` (wait over, or Redlock's no quorum), `error` (the store failed mid-wait) |
//! | `stocklock_lock_waiters` | gauge | variant, sku | requests waiting for a lock right now |
//! | `stocklock_lock_hold_seconds` | histogram | variant | time from acquire to release |
//! | `stocklock_lock_renewals_total` | counter | variant | leases the watchdog renewed |
//! | `stocklock_lock_lost_total` | counter | variant | leases the watchdog could not keep |
//! | `stocklock_post_sale_failures_total` | counter | variant, step | steps after a written sale that failed (`chaos_check`, `enqueue`, `register`); the sale was answered sold |
//! | `stocklock_batch_calls_total` | counter | | `lua-batch`'s calls of its script |
//! | `stocklock_batch_buyers_total` | counter | | buyers those calls carried (÷ calls: the mean batch) |
//!
//! Every series carries the instance's name as the `instance` label, so a
//! Prometheus scraping each instance keeps it with `honor_labels: true`
//! (otherwise it becomes `exported_instance`).
//!
//! A series that first appears with a value loses that value to `rate()`
//! and `increase()` (there is no earlier sample to count from), and a
//! burst shorter than a scrape interval would then never show. So an
//! instance starts ([`start_at_zero`]) with every `stocklock_requests_total`
//! series at 0, and, for each lock variant, the lock waits (`acquired`,
//! `gave_up`), holds and contention's busy reasons (`lock_held`,
//! `wait_timed_out`), and `lua-batch`'s calls and buyers. The rest (rarer busy reasons, renewals, lost leases,
//! waiters per SKU, waits that failed) appear with their first event.
//!
//! SKUs are user input, so `stocklock_lock_waiters` gives its own series
//! only to the first [`WAITER_SKUS`] SKUs each instance sees waiting for a
//! lock; the waiters for any later SKU are counted together under
//! `sku="~other"` (`~` is outside the SKU alphabet, so it never names a
//! real SKU). That bounds the gauge at [`WAITER_SKUS`] + 1 series per lock
//! variant and instance, at the price of lumping together the SKUs that came
//! late (after a restart the instance starts counting again).

mod lock;
#[cfg(test)]
mod tests;

pub use lock::{WaitOutcome, Waiting, lock_hold, lock_waited, lost, renewals, waiting};

use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock, PoisonError, RwLock};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

const REQUESTS: &str = "stocklock_requests_total";
const BUSY: &str = "stocklock_busy_total";
const LOCK_WAIT: &str = "stocklock_lock_wait_seconds";
const LOCK_WAITERS: &str = "stocklock_lock_waiters";
const LOCK_HOLD: &str = "stocklock_lock_hold_seconds";
const RENEWALS: &str = "stocklock_lock_renewals_total";
const LOST: &str = "stocklock_lock_lost_total";
const POST_SALE_FAILURES: &str = "stocklock_post_sale_failures_total";
const BATCH_CALLS: &str = "stocklock_batch_calls_total";
const BATCH_BUYERS: &str = "stocklock_batch_buyers_total";

/// Every counter and gauge an instance exports, by name.
pub const COUNTERS_AND_GAUGES: [&str; 8] = [
    REQUESTS,
    BUSY,
    LOCK_WAITERS,
    RENEWALS,
    LOST,
    POST_SALE_FAILURES,
    BATCH_CALLS,
    BATCH_BUYERS,
];
/// Every histogram an instance exports; each is the series
/// `NAME_bucket`, `NAME_sum` and `NAME_count` on the page.
pub const HISTOGRAMS: [&str; 2] = [LOCK_WAIT, LOCK_HOLD];

/// How many SKUs get series of their own in `stocklock_lock_waiters`, per
/// instance; the rest share [`OTHER_SKUS`].
pub const WAITER_SKUS: usize = 64;
/// The `sku` label of the waiters for every SKU past the first [`WAITER_SKUS`].
pub const OTHER_SKUS: &str = "~other";

/// Every series name the page can hold (the names above, and each
/// histogram's `_bucket`, `_sum`, `_count`): what a dashboard may query.
pub fn series_names() -> Vec<String> {
    let mut names: Vec<String> = COUNTERS_AND_GAUGES.iter().map(|n| n.to_string()).collect();
    for histogram in HISTOGRAMS {
        for suffix in ["bucket", "sum", "count"] {
            names.push(format!("{histogram}_{suffix}"));
        }
    }
    names
}

/// Installs the recorder (once per process; later calls keep the first
/// instance label) and returns the handle that renders the text format.
pub fn install(instance: &str) -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = recorder(instance);
        let handle = recorder.handle();
        // Fails only if another recorder is installed; this handle then
        // renders an empty page rather than taking the process down.
        if metrics::set_global_recorder(recorder).is_ok() {
            describe();
        }
        handle
    })
}

fn recorder(instance: &str) -> PrometheusRecorder {
    PrometheusBuilder::new()
        .add_global_label("instance", instance)
        .set_buckets(&[
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0, 30.0, 60.0,
        ])
        .expect("static buckets are valid")
        .build_recorder()
}

/// The `# HELP` lines (shown once a metric has a series).
fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(REQUESTS, "/deductStock answers, by variant and outcome");
    describe_counter!(BUSY, "busy (429) answers, by variant and reason");
    describe_histogram!(
        LOCK_WAIT,
        Unit::Seconds,
        "time spent waiting for a lock, by variant and how the wait ended (acquired, gave_up, error)"
    );
    describe_gauge!(
        LOCK_WAITERS,
        "requests waiting for a lock right now, by variant and SKU (SKUs past the first 64 seen: sku=\"~other\")"
    );
    describe_histogram!(
        LOCK_HOLD,
        Unit::Seconds,
        "time from a lock's acquire to its release"
    );
    describe_counter!(RENEWALS, "leases the watchdog renewed");
    describe_counter!(LOST, "leases the watchdog could not keep");
    describe_counter!(BATCH_CALLS, "lua-batch's calls of its script");
    describe_counter!(
        BATCH_BUYERS,
        "buyers lua-batch's calls carried (divided by the calls: the mean batch)"
    );
    describe_counter!(
        POST_SALE_FAILURES,
        "steps after a written sale that failed, by variant and step; the sale was answered sold"
    );
    // The lock library's own (`stocklock_lock_guard_*`, `stocklock_lock_lease_*`).
    stocklock_lock::describe_metrics();
}

/// One call of `lua-batch`'s script, for `buyers` buyers.
pub fn batch_sent(buyers: usize) {
    metrics::counter!(BATCH_CALLS).increment(1);
    metrics::counter!(BATCH_BUYERS).increment(buyers as u64);
}

/// Every `outcome` of `stocklock_requests_total`: [`crate::outcome::Outcome`]'s
/// kinds, and `unavailable` (the store failed before anything was sent).
pub const ANSWER_OUTCOMES: [&str; 6] = [
    "sold",
    "sold_out",
    "busy",
    "unknown",
    "not_stocked",
    "unavailable",
];

/// The busy reasons every lock variant answers under contention: the lock
/// was held and the request may not wait, or waited `wait_ms` in vain.
pub const CONTENTION_REASONS: [&str; 2] = ["lock_held", "wait_timed_out"];

/// Registers, at 0, the series listed in the module's doc, for `variants`
/// (all of them) and `lock_variants` (those that take a lock). Repeating it
/// changes nothing.
pub fn start_at_zero(variants: &[&'static str], lock_variants: &[&'static str]) {
    metrics::counter!(BATCH_CALLS).increment(0);
    metrics::counter!(BATCH_BUYERS).increment(0);
    for &variant in variants {
        for outcome in ANSWER_OUTCOMES {
            metrics::counter!(REQUESTS, "variant" => variant, "outcome" => outcome).increment(0);
        }
    }
    for &variant in lock_variants {
        for reason in CONTENTION_REASONS {
            metrics::counter!(BUSY, "variant" => variant, "reason" => reason).increment(0);
        }
        for outcome in [WaitOutcome::Acquired, WaitOutcome::GaveUp] {
            // Registered, nothing recorded: a histogram of zero counts.
            let _ =
                metrics::histogram!(LOCK_WAIT, "variant" => variant, "outcome" => outcome.as_str());
        }
        let _ = metrics::histogram!(LOCK_HOLD, "variant" => variant);
    }
}

/// The `REQUESTS` counter of each (variant, outcome) answered since the
/// recorder was installed: registered once, then looked up (the macro
/// builds its labels afresh at each call).
static ANSWERED: LazyLock<RwLock<HashMap<(&'static str, &'static str), metrics::Counter>>> =
    LazyLock::new(Default::default);

/// Counts one `/deductStock` answer.
pub fn answered(variant: &'static str, outcome: &'static str) {
    // Before the recorder (a process that serves no metrics), the macro:
    // a handle taken then would stay a no-op for good.
    if HANDLE.get().is_none() {
        metrics::counter!(REQUESTS, "variant" => variant, "outcome" => outcome).increment(1);
        return;
    }
    let known = ANSWERED.read().unwrap_or_else(PoisonError::into_inner);
    if let Some(counter) = known.get(&(variant, outcome)) {
        counter.increment(1);
        return;
    }
    drop(known);
    let counter = metrics::counter!(REQUESTS, "variant" => variant, "outcome" => outcome);
    counter.increment(1);
    ANSWERED
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((variant, outcome), counter);
}

pub fn busy(variant: &'static str, reason: &'static str) {
    metrics::counter!(BUSY, "variant" => variant, "reason" => reason).increment(1);
}

/// A step after a written sale failed (`step`: `chaos_check`, `enqueue`,
/// `register`); the sale stood.
pub fn post_sale_failure(variant: &'static str, step: &'static str) {
    metrics::counter!(POST_SALE_FAILURES, "variant" => variant, "step" => step).increment(1);
}
