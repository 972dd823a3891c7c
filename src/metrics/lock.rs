//! The lock's series of an instance: how each wait for a lock ended, the
//! requests waiting right now (per SKU, up to [`WAITER_SKUS`] of them), how
//! long locks were held, and the watchdog's renewals and lost leases.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::{LOCK_HOLD, LOCK_WAIT, LOCK_WAITERS, LOST, OTHER_SKUS, RENEWALS, WAITER_SKUS};

/// How a wait for a lock ended: the `outcome` label of
/// `stocklock_lock_wait_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The lock was taken.
    Acquired,
    /// The wait ended without the lock: held past `wait_ms` (at once when
    /// 0), or, for Redlock, too few nodes answered.
    GaveUp,
    /// The store failed while the request waited.
    Error,
}

impl WaitOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitOutcome::Acquired => "acquired",
            WaitOutcome::GaveUp => "gave_up",
            WaitOutcome::Error => "error",
        }
    }
}

/// One wait for a lock, and how it ended.
pub fn lock_waited(variant: &'static str, outcome: WaitOutcome, waited: Duration) {
    metrics::histogram!(LOCK_WAIT, "variant" => variant, "outcome" => outcome.as_str())
        .record(waited.as_secs_f64());
}

/// A request waiting for a lock on `sku`: counted in `stocklock_lock_waiters`
/// until the returned guard is dropped.
pub fn waiting(variant: &'static str, sku: &str) -> Waiting {
    let gauge =
        metrics::gauge!(LOCK_WAITERS, "variant" => variant, "sku" => waiters_sku_label(sku));
    gauge.increment(1.0);
    Waiting(gauge)
}

/// One request in `stocklock_lock_waiters`; dropping it ends its wait,
/// whichever way the wait ends (the lock, giving up, an error, a panic).
#[must_use = "the request counts as waiting only while this lives"]
pub struct Waiting(metrics::Gauge);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// The SKU itself for the first [`WAITER_SKUS`] SKUs seen (and always for
/// those), [`OTHER_SKUS`] for any later one.
fn waiters_sku_label(sku: &str) -> String {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    admit(&mut seen, sku, WAITER_SKUS)
}

fn admit(seen: &mut HashSet<String>, sku: &str, cap: usize) -> String {
    if seen.contains(sku) {
        return sku.to_owned();
    }
    if seen.len() < cap {
        seen.insert(sku.to_owned());
        return sku.to_owned();
    }
    OTHER_SKUS.to_owned()
}

pub fn lock_hold(variant: &'static str, held: Duration) {
    metrics::histogram!(LOCK_HOLD, "variant" => variant).record(held.as_secs_f64());
}

pub fn renewals(variant: &'static str, n: u64) {
    metrics::counter!(RENEWALS, "variant" => variant).increment(n);
}

pub fn lost(variant: &'static str) {
    metrics::counter!(LOST, "variant" => variant).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_skus_get_a_series_of_their_own() {
        let mut seen = HashSet::new();
        assert_eq!(admit(&mut seen, "a", 2), "a");
        assert_eq!(admit(&mut seen, "b", 2), "b");
        assert_eq!(admit(&mut seen, "c", 2), OTHER_SKUS);
        assert_eq!(admit(&mut seen, "d", 2), OTHER_SKUS);
        // Admitted once, always its own: increments and decrements agree.
        assert_eq!(admit(&mut seen, "a", 2), "a");
        assert_eq!(seen.len(), 2);
        // No real SKU can be called like the catch-all.
        assert!(crate::knobs::Sku::parse(OTHER_SKUS).is_err());
    }
}
