//! Cancel-safe acquires: what a dropped acquire may have taken, let go.

use std::time::{Duration, Instant};

use crate::OwnerId;
use crate::Released;
use crate::guard::Lock;
use crate::telemetry::{self, Counted};

/// An acquire under way: dropped before [`Undo::disarm`] (its future
/// cancelled, or an error that may have come after the store took the
/// lock), it runs its undo. Every acquire of the library keeps one.
pub(crate) struct Undo<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Undo<F> {
    /// Runs `undo` when dropped, unless disarmed first.
    pub(crate) fn new(undo: F) -> Self {
        Self(Some(undo))
    }

    /// Nothing to undo: the acquire handed back what it took, or surely
    /// took nothing.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for Undo<F> {
    fn drop(&mut self) {
        if let Some(undo) = self.0.take() {
            undo();
        }
    }
}

/// Releases `owner`'s `holds` of `lock` in the background, retried until
/// answered or `lease` is over: a compare-and-delete by the owner's token,
/// safe whether or not the lock was taken (a dropped acquire's fresh owner,
/// a dropped guard's). `held`: a guard's, whose release finding the lock
/// expired is counted.
pub(crate) fn release_in_background(
    lock: Lock,
    owner: OwnerId,
    holds: u32,
    lease: Duration,
    held: bool,
) {
    let until = Instant::now() + lease;
    tracing::debug!(key = lock.key(), %owner, held, "letting go in the background");
    let key = lock.key().to_owned();
    in_background(&key, async move {
        while Instant::now() < until {
            match lock.release(&owner, holds, lease).await {
                Ok(Released::Expired) if held => {
                    telemetry::count(lock.kind(), Counted::ReleasedExpired);
                    return;
                }
                Ok(_) => return,
                Err(err) => tracing::debug!(%err, "release still not answered; trying again"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

/// Runs a dropped guard's `release` on the tokio runtime it was dropped
/// on; outside one, says that the lock `key` is left to its lease.
pub(crate) fn in_background(key: &str, release: impl Future<Output = ()> + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(release)),
        Err(_) => tracing::warn!(
            key,
            "guard dropped outside a tokio runtime: the lock is left to its lease"
        ),
    }
}
