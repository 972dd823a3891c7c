//! The watchdog: renews a lease every lease/3 for as long as its owner holds
//! the lock (Redisson's 30 s lease renewed every 10 s, article 000).
//!
//! It makes a lease long enough for any business without making it
//! infinite: if the owner's process dies, so does its watchdog, and the lease
//! runs out. What it cannot survive is the whole process freezing (a GC or a
//! SIGSTOP): the watchdog freezes too, the lease runs out, and on waking the
//! owner writes before it can learn the lock is gone.
//!
//! When a renewal is refused (the lock is not ours any more) or Redis cannot
//! be reached for a whole lease, the loss is logged, counted and raised on a
//! flag the owner checks before it writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{Lease, OwnerId};

/// What a running watchdog shares with its owner.
#[derive(Debug, Default)]
pub struct Tenure {
    lost: AtomicBool,
    lost_signal: Notify,
    renewals: AtomicU64,
}

impl Tenure {
    fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.lost_signal.notify_waiters();
    }

    /// Resolves when the lease is known to be lost (at once if it is).
    pub async fn lost(&self) {
        loop {
            let signal = self.lost_signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.is_lost() {
                return;
            }
            signal.await;
        }
    }

    /// Whether the lease is known to be lost.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// How many renewals succeeded.
    pub fn renewals(&self) -> u64 {
        self.renewals.load(Ordering::Relaxed)
    }
}

/// A running watchdog. Dropping it stops the renewals.
pub struct Watchdog {
    tenure: Arc<Tenure>,
    task: JoinHandle<()>,
}

impl Watchdog {
    /// Starts renewing `lock` for `owner` every `lease`/3.
    pub fn start<L: Lease>(lock: L, owner: OwnerId, lease: Duration) -> Self {
        let tenure = Arc::new(Tenure::default());
        let shared = tenure.clone();
        let every = (lease / 3).max(Duration::from_millis(1));
        let task = tokio::spawn(async move {
            let mut last_renewed = Instant::now();
            let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                match lock.renew(&owner, lease).await {
                    Ok(true) => {
                        last_renewed = Instant::now();
                        shared.renewals.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(false) => {
                        tracing::warn!(
                            owner = owner.as_str(),
                            "watchdog: lock lost, renewal refused"
                        );
                        shared.mark_lost();
                        return;
                    }
                    Err(err) if last_renewed.elapsed() >= lease => {
                        tracing::warn!(owner = owner.as_str(), %err, "watchdog: lock lost, no renewal for a whole lease");
                        shared.mark_lost();
                        return;
                    }
                    Err(err) => {
                        tracing::debug!(owner = owner.as_str(), %err, "watchdog: renewal failed, retrying");
                    }
                }
            }
        });
        Self { tenure, task }
    }

    /// The flag and counters shared with the owner.
    pub fn tenure(&self) -> &Arc<Tenure> {
        &self.tenure
    }

    /// Stops renewing (call before releasing the lock).
    pub fn stop(self) -> Arc<Tenure> {
        self.task.abort();
        self.tenure.clone()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
    }
}
