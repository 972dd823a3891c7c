//! Cancel-safe acquires: what a dropped acquire may have taken, let go.

use std::time::{Duration, Instant};

use crate::OwnerId;
use crate::guard::{Lock, in_background};

/// An acquire under way: dropped before [`Undo::disarm`] (the future
/// cancelled, or an error that may have come after the store took the
/// lock), it releases `owner`'s hold in the background, retried until
/// answered or the lease is over. A compare-and-delete by a fresh owner's
/// token: safe whether or not the lock was taken.
pub(crate) struct Undo {
    pub(crate) lock: Lock,
    pub(crate) owner: OwnerId,
    pub(crate) lease: Duration,
    pub(crate) armed: bool,
}

impl Undo {
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (lock, owner, lease) = (self.lock.clone(), self.owner.clone(), self.lease);
        let until = Instant::now() + lease;
        tracing::debug!(key = lock.key(), %owner, "acquire dropped: letting go of what it may have taken");
        in_background(self.lock.key(), async move {
            while Instant::now() < until {
                match lock.release(&owner, 1, lease).await {
                    Ok(_) => return,
                    Err(err) => tracing::debug!(%err, "release still not answered; trying again"),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
}
