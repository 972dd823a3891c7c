//! Cancel-safe acquires: what a dropped acquire may have taken, let go.

use std::time::{Duration, Instant};

use crate::OwnerId;
use crate::guard::{Lock, in_background};

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

/// Releases `owner`'s hold of `lock` in the background, retried until
/// answered or `lease` is over: a compare-and-delete by a fresh owner's
/// token, safe whether or not the lock was taken.
pub(crate) fn release_in_background(lock: Lock, owner: OwnerId, lease: Duration) {
    let until = Instant::now() + lease;
    tracing::debug!(key = lock.key(), %owner, "acquire dropped: letting go of what it may have taken");
    let key = lock.key().to_owned();
    in_background(&key, async move {
        while Instant::now() < until {
            match lock.release(&owner, 1, lease).await {
                Ok(_) => return,
                Err(err) => tracing::debug!(%err, "release still not answered; trying again"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
