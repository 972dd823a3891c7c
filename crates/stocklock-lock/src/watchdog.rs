//! The watchdog: renews a lease every lease/3 for as long as its owner holds
//! the lock (Redisson's 30 s lease renewed every 10 s, article 000).
//!
//! It makes a lease long enough for any business without making it
//! infinite: if the owner's process dies, so does its watchdog, and the lease
//! runs out. What it cannot survive is the whole process freezing (a GC or a
//! SIGSTOP) between the owner's last check and its write: the watchdog
//! freezes too, the lease runs out, and on waking the owner writes before it
//! can learn the lock is gone. Only a fencing token helps there.
//!
//! The owner counts on its lock only until a local deadline: the instant the
//! acquire, or the last renewal the store confirmed, was *sent*, plus the
//! lease, less the clock drift. Past it, [`Tenure::is_lost`] is true whether
//! or not a renewal failed: a renewal stuck in a paused Redis, or a runtime
//! too starved to renew, cannot let the owner write after its lease could
//! have run out. A refused renewal (the lock is not ours any more) raises
//! the loss at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{Grant, Hook, Lease, OwnerId, Point, drift};
use crate::telemetry::{self, Counted};

/// Where a hooked watchdog holds each renewal.
pub const RENEWAL: Point = Point::new("renewal");
/// Where a hooked watchdog stops once a renewal's outcome is known to the owner.
pub const RENEWED: Point = Point::new("renewed");

/// What a running watchdog shares with its owner.
///
/// ```
/// use std::time::Duration;
/// use stocklock_lock::{Error, Lease, OwnerId, Watchdog};
///
/// struct Refusing; // a store where the lock is someone else's now
/// impl Lease for Refusing {
///     async fn renew(&self, _: &OwnerId, _: Duration) -> Result<bool, Error> { Ok(false) }
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let dog = Watchdog::start(Refusing, OwnerId::new("w"), Duration::from_millis(30));
/// dog.tenure().lost().await; // the first renewal, after 10 ms, is refused
/// assert!(dog.tenure().is_lost() && dog.tenure().renewals() == 0);
/// # }
/// ```
#[derive(Debug)]
pub struct Tenure {
    /// The instant the deadline is counted from.
    base: Instant,
    /// The owner's deadline, in nanoseconds after `base`: it only moves
    /// forward, with each renewal the store confirmed.
    deadline_ns: AtomicU64,
    lost: AtomicBool,
    lost_signal: Notify,
    renewals: AtomicU64,
    /// The lock's kind, for the metrics' `lock` label.
    kind: &'static str,
    /// When the last [`RENEWALS_KEPT`] confirmed renewals were sent.
    renewed: std::sync::Mutex<Vec<Instant>>,
}

/// How many renewal instants a [`Tenure`] keeps.
const RENEWALS_KEPT: usize = 256;

impl Tenure {
    pub(crate) fn new(deadline: Instant, kind: &'static str) -> Self {
        let base = Instant::now();
        let tenure = Tenure {
            kind,
            base,
            deadline_ns: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            lost_signal: Notify::new(),
            renewals: AtomicU64::new(0),
            renewed: std::sync::Mutex::default(),
        };
        tenure.extend_to(deadline);
        tenure
    }

    pub(crate) fn extend_to(&self, deadline: Instant) {
        let ns = deadline.saturating_duration_since(self.base).as_nanos();
        self.deadline_ns
            .fetch_max(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::AcqRel);
    }

    /// The last instant the owner may act as the holder.
    pub fn deadline(&self) -> Instant {
        self.base + Duration::from_nanos(self.deadline_ns.load(Ordering::Acquire))
    }

    pub(crate) fn mark_lost(&self) {
        if !self.lost.swap(true, Ordering::AcqRel) {
            telemetry::count(self.kind, Counted::Lost);
        }
        self.lost_signal.notify_waiters();
    }

    /// Resolves when the lease is known to be lost (at once if it is): a
    /// renewal was refused, or the deadline passed.
    pub async fn lost(&self) {
        loop {
            let signal = self.lost_signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.is_lost() {
                // A deadline passed is a loss for good: marked (and
                // counted) here if the watchdog has not yet.
                self.mark_lost();
                return;
            }
            let deadline = tokio::time::Instant::from_std(self.deadline());
            tokio::select! {
                _ = signal => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Whether the owner may no longer count on the lock: a renewal was
    /// refused, or its deadline has passed (however the renewals fare).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || Instant::now() >= self.deadline()
    }

    /// How many renewals succeeded.
    pub fn renewals(&self) -> u64 {
        self.renewals.load(Ordering::Relaxed)
    }

    /// When the confirmed renewals were sent (the last 256), oldest first.
    pub fn renewed_at(&self) -> Vec<Instant> {
        self.renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A renewal went unanswered or failed (counted; the lease may hold).
    pub(crate) fn renewal_failed(&self) {
        telemetry::count(self.kind, Counted::RenewalFailure);
    }

    pub(crate) fn renewed(&self, sent: Instant) {
        self.renewals.fetch_add(1, Ordering::Relaxed);
        telemetry::count(self.kind, Counted::Renewal);
        let mut renewed = self
            .renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if renewed.len() < RENEWALS_KEPT {
            renewed.push(sent);
        }
    }
}

/// A running watchdog. Dropping it stops the renewals.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::{LeaseLock, OwnerId, Watchdog};
///
/// # async fn example(lock: LeaseLock) -> Result<(), stocklock_lock::Error> {
/// let me = OwnerId::new("worker-1");
/// if let Some(grant) = lock.lock(&me, Duration::from_secs(30), Duration::ZERO).await? {
///     let dog = Watchdog::for_grant(lock.clone(), me.clone(), &grant); // every 10 s
///     // ... work; before each write, check `!dog.tenure().is_lost()` ...
///     dog.stop(); // before the release, not after
///     lock.unlock(&me).await?;
/// }
/// # Ok(())
/// # }
/// ```
pub struct Watchdog {
    tenure: Arc<Tenure>,
    task: JoinHandle<()>,
}

impl Watchdog {
    /// Starts renewing `lock` for `owner` every `grant.lease`/3; the owner's
    /// deadline starts at the grant's.
    pub fn for_grant<L: Lease>(lock: L, owner: OwnerId, grant: &Grant) -> Self {
        Self::spawn(lock, owner, grant.lease, grant.deadline(), Hook::none())
    }

    /// [`Watchdog::for_grant`], each renewal held first at `hook`'s point
    /// `renewal` (a schedule's gate: a late renewal, on demand).
    pub fn for_grant_at<L: Lease>(lock: L, owner: OwnerId, grant: &Grant, hook: Hook) -> Self {
        Self::spawn(lock, owner, grant.lease, grant.deadline(), hook)
    }

    /// Starts renewing `lock` for `owner`, granted for `lease` just now
    /// (prefer [`Watchdog::for_grant`]: it counts from when the acquire
    /// was sent).
    pub fn start<L: Lease>(lock: L, owner: OwnerId, lease: Duration) -> Self {
        let now = Instant::now();
        Self::spawn(
            lock,
            owner,
            lease,
            now + lease.saturating_sub(drift(lease)),
            Hook::none(),
        )
    }

    fn spawn<L: Lease>(
        lock: L,
        owner: OwnerId,
        lease: Duration,
        deadline: Instant,
        hook: Hook,
    ) -> Self {
        let tenure = Arc::new(Tenure::new(deadline, lock.kind()));
        let shared = tenure.clone();
        let every = (lease / 3).max(Duration::from_millis(1));
        let task = tokio::spawn(async move {
            let start = tokio::time::Instant::now() + every;
            let mut ticks = tokio::time::interval_at(start, every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                // The deadline passing before the next renewal is due (the
                // last ones failed) is the loss: learned, and counted, then.
                // A tick due as well (a runtime that was frozen) goes first,
                // as before: its renewal may still be confirmed.
                let deadline = tokio::time::Instant::from_std(shared.deadline());
                tokio::select! {
                    biased;
                    _ = ticks.tick() => {}
                    () = tokio::time::sleep_until(deadline) => {
                        tracing::warn!(owner = owner.as_str(), "watchdog: lock lost, no renewal confirmed before the deadline");
                        shared.mark_lost();
                        return;
                    }
                }
                hook.at(RENEWAL).await;
                let sent = Instant::now();
                let lost = match lock.renew(&owner, lease).await {
                    Ok(true) => {
                        // The store extended the lease no earlier than the send.
                        shared.extend_to(sent + lease.saturating_sub(drift(lease)));
                        shared.renewed(sent);
                        false
                    }
                    Ok(false) => {
                        tracing::warn!(
                            owner = owner.as_str(),
                            "watchdog: lock lost, renewal refused"
                        );
                        true
                    }
                    Err(err) if shared.is_lost() => {
                        shared.renewal_failed();
                        tracing::warn!(owner = owner.as_str(), %err, "watchdog: lock lost, no renewal confirmed before the deadline");
                        true
                    }
                    Err(err) => {
                        shared.renewal_failed();
                        tracing::debug!(owner = owner.as_str(), %err, "watchdog: renewal failed, retrying");
                        false
                    }
                };
                if lost {
                    shared.mark_lost();
                }
                // Its outcome known to the owner: a hook may wait for it.
                hook.at(RENEWED).await;
                if lost {
                    return;
                }
            }
        });
        Self { tenure, task }
    }

    /// The flag, deadline and counters shared with the owner.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    /// A store whose renewals never come back (a paused Redis, a dead
    /// network): only the local deadline can tell the owner.
    struct Unanswered;

    impl Lease for Unanswered {
        async fn renew(&self, _: &OwnerId, _: Duration) -> Result<bool, Error> {
            std::future::pending().await
        }
    }

    /// A store that confirms every renewal.
    struct Confirming;

    impl Lease for Confirming {
        async fn renew(&self, _: &OwnerId, _: Duration) -> Result<bool, Error> {
            Ok(true)
        }
    }

    #[tokio::test]
    async fn an_owner_whose_renewals_never_come_back_is_lost_at_its_deadline() {
        let lease = Duration::from_millis(150);
        let grant = Grant {
            sent: Instant::now(),
            lease,
            holds: 1,
            token: None,
        };
        let dog = Watchdog::for_grant(Unanswered, OwnerId::new("t"), &grant);
        assert!(!dog.tenure().is_lost());
        tokio::time::timeout(lease * 2, dog.tenure().lost())
            .await
            .expect("the deadline passed without the owner learning it");
        let late = Instant::now().duration_since(grant.deadline());
        assert!(late < Duration::from_millis(50), "learned {late:?} late");
        assert_eq!(dog.tenure().renewals(), 0);
    }

    #[tokio::test]
    async fn confirmed_renewals_move_the_deadline_forward() {
        let lease = Duration::from_millis(90);
        let dog = Watchdog::start(Confirming, OwnerId::new("t"), lease);
        let first = dog.tenure().deadline();
        tokio::time::sleep(lease * 3).await;
        assert!(!dog.tenure().is_lost(), "renewed, yet lost");
        assert!(dog.tenure().deadline() > first + lease);
        assert!(dog.tenure().renewals() >= 5, "{}", dog.tenure().renewals());
    }
}
