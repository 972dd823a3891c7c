//! The guard API: take a lock with its [`LockOptions`] (lease, wait,
//! renewal, owner), hold a [`LockGuard`], and let it go by dropping the
//! guard or, to learn how it went, by [`LockGuard::release`].
//!
//! ```no_run
//! use std::time::Duration;
//! use stocklock_lock::{LeaseLock, LockOptions, Released, Wakeups};
//! use stocklock_lock::store::Store;
//!
//! # async fn example() -> Result<(), stocklock_lock::Error> {
//! let store = Store::open("redis://127.0.0.1:6379")?;
//! let lock = LeaseLock::new(store.conn().await?, "lock:{order-42}", Wakeups::new());
//! let options = LockOptions::new()
//!     .lease(Duration::from_secs(10))
//!     .wait(Duration::from_secs(2))
//!     .renew(true); // a watchdog renews the lease every lease/3 while held
//! let guard = lock.acquire(&options).await?; // Err(Error::Busy) after 2 s of waiting
//! if guard.is_lost() {
//!     // a renewal was refused or came too late: do not write
//! }
//! match guard.release().await? {
//!     Released::Released => {}
//!     other => eprintln!("the lease ran out before the release: {other:?}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The guard's lifetime is not the lock's: a lease runs out on its own,
//! and a holder paused past it keeps its guard. [`LockGuard::is_lost`] is
//! the holder's last look before a write; only a store that checks
//! [`LockGuard::token`] (a fenced lock) refuses a write that comes after.

use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::telemetry::{self, Counted};
use crate::undo::{Undo, release_in_background};
use crate::{Error, Grant, LeaseLock, LockOptions, OwnerId, ReentrantLock, Unlocked, Watchdog};

/// How a release went.
///
/// ```
/// use stocklock_lock::Released;
/// assert_ne!(Released::Released, Released::Expired);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// The lock was ours and is free now.
    Released,
    /// One hold of a reentrant lock released; the owner still holds it
    /// this many times.
    StillHeld(u32),
    /// The lock was no longer ours: the lease had run out (and someone
    /// else may have held it in the meantime; for Redlock, fewer than a
    /// majority of the nodes still had it).
    Expired,
}

/// The lock a guard holds.
#[derive(Clone)]
pub(crate) enum Lock {
    Lease(LeaseLock),
    Reentrant(ReentrantLock),
    #[cfg(feature = "redlock")]
    Redlock(crate::Redlock),
}

impl Lock {
    /// The metrics' `lock` label.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Lock::Lease(_) => "lease",
            Lock::Reentrant(_) => "reentrant",
            #[cfg(feature = "redlock")]
            Lock::Redlock(_) => "redlock",
        }
    }

    pub(crate) fn key(&self) -> &str {
        match self {
            Lock::Lease(lock) => lock.key(),
            Lock::Reentrant(lock) => lock.key(),
            #[cfg(feature = "redlock")]
            Lock::Redlock(lock) => lock.key(),
        }
    }

    /// One wait of up to `wait` for the lock: the grant, or why not
    /// ([`Error::Busy`], [`Error::NoQuorum`]).
    async fn try_for(
        &self,
        owner: &OwnerId,
        lease: Duration,
        wait: Duration,
    ) -> Result<Result<Grant, Error>, Error> {
        Ok(match self {
            Lock::Lease(lock) => lock.lock(owner, lease, wait).await?.ok_or(Error::Busy),
            Lock::Reentrant(lock) => lock.lock(owner, lease, wait).await?.ok_or(Error::Busy),
            #[cfg(feature = "redlock")]
            Lock::Redlock(lock) => {
                lock.lock(owner, lease, wait)
                    .await?
                    .map_err(|refused| match refused {
                        crate::Refused::Held => Error::Busy,
                        crate::Refused::NoQuorum { answered, quorum } => {
                            Error::NoQuorum { answered, quorum }
                        }
                    })
            }
        })
    }

    fn watchdog(&self, owner: &OwnerId, grant: &Grant) -> Watchdog {
        let owner = owner.clone();
        match self {
            Lock::Lease(lock) => Watchdog::for_grant(lock.clone(), owner, grant),
            Lock::Reentrant(lock) => Watchdog::for_grant(lock.clone(), owner, grant),
            #[cfg(feature = "redlock")]
            Lock::Redlock(lock) => Watchdog::for_grant(lock.clone(), owner, grant),
        }
    }

    /// Releases one hold of `owner` (`holds`: how many it had).
    pub(crate) async fn release(
        &self,
        owner: &OwnerId,
        holds: u32,
        lease: Duration,
    ) -> Result<Released, Error> {
        Ok(match self {
            Lock::Lease(lock) => match lock.unlock(owner).await? {
                true => Released::Released,
                false => Released::Expired,
            },
            Lock::Reentrant(lock) => {
                // The first hold releases them all (safe to repeat); a
                // nested one counts down and refreshes the lease.
                let unlocked = if holds <= 1 {
                    lock.unlock_all(owner).await?
                } else {
                    lock.unlock(owner, lease).await?
                };
                match unlocked {
                    Unlocked::Released => Released::Released,
                    Unlocked::StillHeld(n) => Released::StillHeld(n),
                    Unlocked::NotOwner => Released::Expired,
                }
            }
            #[cfg(feature = "redlock")]
            Lock::Redlock(lock) => match lock.unlock(owner).await >= lock.quorum() {
                true => Released::Released,
                false => Released::Expired,
            },
        })
    }
}

/// A lock held. Dropping it releases the lock in the background (on the
/// tokio runtime it was dropped on, retried every 100 ms until answered or
/// the lease is over); [`LockGuard::release`] releases it now and says how
/// it went, which a drop cannot.
///
/// ```no_run
/// use stocklock_lock::{LockOptions, ReentrantLock, Wakeups};
/// use stocklock_lock::store::Store;
///
/// # async fn example() -> Result<(), stocklock_lock::Error> {
/// let store = Store::open("redis://127.0.0.1:6379")?;
/// let lock = ReentrantLock::new(store.conn().await?, "lock:{order-42}", Wakeups::new())
///     .fenced("fence:{order-42}");
/// let guard = lock.acquire(&LockOptions::new()).await?;
/// let token = guard.token().expect("a fenced lock's guard carries a token");
/// // ... send `token` with the write; the store refuses older tokens ...
/// # let _ = token;
/// drop(guard); // released in the background
/// # Ok(())
/// # }
/// ```
pub struct LockGuard {
    lock: Lock,
    owner: OwnerId,
    grant: Grant,
    watchdog: Option<Watchdog>,
    /// Set once released explicitly: the drop has nothing left to do.
    released: bool,
}

impl LockGuard {
    /// Takes `lock` as `options` say: tries with slices of the wait (each
    /// at most its retry interval) until it is granted or the wait is
    /// over (then the last refusal), all in a `lock.acquire` span; the
    /// guard's watchdog started if `options` say so.
    async fn take(lock: Lock, options: &LockOptions) -> Result<LockGuard, Error> {
        let called = Instant::now();
        let owner = options.owner_or_fresh();
        // Until the guard is handed back, this future may be dropped (a
        // timeout, a `select!`, a cancelled request) after the store took
        // the lock and before its answer came: then the lock is let go in
        // the background. Only for a fresh owner: the store cannot tell an
        // attempt of a caller's own owner from its other holds.
        let undo = Undo::new(|| {
            if !options.owner_given() {
                release_in_background(lock.clone(), owner.clone(), 1, options.lease_time(), false);
            }
        });
        let span = tracing::debug_span!(
            "lock.acquire",
            key = lock.key(),
            %owner,
            lease_ms = options.lease_time().as_millis() as u64,
            wait_ms = options.wait_time().as_millis() as u64,
        );
        let grant = async {
            let deadline = options.deadline();
            loop {
                let wait = options.slice(deadline);
                let answer = lock.try_for(&owner, options.lease_time(), wait).await?;
                if answer.is_ok() || Instant::now() >= deadline {
                    return answer;
                }
            }
        }
        .instrument(span.clone())
        .await;
        let grant = match grant {
            Ok(grant) => grant,
            // Refused by the store: nothing was taken.
            Err(Error::Busy) => {
                undo.disarm();
                telemetry::acquired(lock.kind(), "busy", called.elapsed());
                return Err(Error::Busy);
            }
            // Unanswered, or (Redlock) too few nodes answered: some may
            // have taken it; `undo` lets it go.
            Err(err) => {
                telemetry::acquired(lock.kind(), "error", called.elapsed());
                return Err(err);
            }
        };
        telemetry::acquired(lock.kind(), "acquired", called.elapsed());
        span.in_scope(|| tracing::debug!(holds = grant.holds, token = grant.token, "acquired"));
        let watchdog = options.renews().then(|| lock.watchdog(&owner, &grant));
        undo.disarm();
        Ok(LockGuard {
            lock,
            owner,
            grant,
            watchdog,
            released: false,
        })
    }

    /// Who holds the lock.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The grant the lock came with: when its request was sent, its lease,
    /// the holds, the token.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// The fencing token that came with the lock, from the same atomic step
    /// that granted it (a fenced lock; `None` otherwise). Send it with every
    /// write; a store that refuses tokens older than the newest it saw
    /// refuses a holder whose lease ran out unnoticed.
    pub fn token(&self) -> Option<i64> {
        self.grant.token
    }

    /// The last instant the holder may count on the lock: the grant's
    /// deadline, moved forward by each renewal the store confirmed.
    pub fn deadline(&self) -> Instant {
        match &self.watchdog {
            Some(watchdog) => watchdog.tenure().deadline(),
            None => self.grant.deadline(),
        }
    }

    /// Whether the holder may no longer count on the lock: its deadline
    /// passed, or a renewal was refused.
    pub fn is_lost(&self) -> bool {
        match &self.watchdog {
            Some(watchdog) => watchdog.tenure().is_lost(),
            None => Instant::now() >= self.grant.deadline(),
        }
    }

    /// Resolves when the lock is known to be lost (at once if it is).
    pub async fn lost(&self) {
        match &self.watchdog {
            Some(watchdog) => watchdog.tenure().lost().await,
            None => {
                tokio::time::sleep_until(tokio::time::Instant::from_std(self.grant.deadline()))
                    .await
            }
        }
    }

    /// Releases the lock now (its renewals stopped first) and says how it
    /// went: [`Released::Expired`] when it was no longer ours. On an error
    /// the release is retried in the background, as a drop would.
    pub async fn release(mut self) -> Result<Released, Error> {
        self.released = true;
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.stop();
        }
        telemetry::held(self.lock.kind(), self.grant.sent.elapsed());
        let span = tracing::debug_span!("lock.release", key = self.lock.key(), owner = %self.owner);
        let released = self
            .lock
            .release(&self.owner, self.grant.holds, self.grant.lease)
            .instrument(span.clone())
            .await;
        match &released {
            Ok(how) => {
                if *how == Released::Expired {
                    telemetry::count(self.lock.kind(), Counted::ReleasedExpired);
                }
                span.in_scope(|| tracing::debug!(?how, "released"));
            }
            Err(err) => {
                span.in_scope(
                    || tracing::warn!(%err, "release not answered; retried in the background"),
                );
                self.release_in_background();
            }
        }
        released
    }

    fn release_in_background(&self) {
        let (lock, owner) = (self.lock.clone(), self.owner.clone());
        release_in_background(lock, owner, self.grant.holds, self.grant.lease, true);
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.stop();
        }
        if !self.released {
            telemetry::held(self.lock.kind(), self.grant.sent.elapsed());
            self.release_in_background();
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.lock.key())
            .field("owner", &self.owner)
            .field("grant", &self.grant)
            .field("renewed", &self.watchdog.is_some())
            .finish()
    }
}

impl LeaseLock {
    /// Takes the lock as `options` say, as a guard that releases it when
    /// dropped. [`Error::Busy`] when someone else held it for the whole wait.
    pub async fn acquire(&self, options: &LockOptions) -> Result<LockGuard, Error> {
        LockGuard::take(Lock::Lease(self.clone()), options).await
    }
}

impl ReentrantLock {
    /// Takes the lock as `options` say, as a guard that releases its hold
    /// when dropped (the same owner may hold it again meanwhile:
    /// [`LockOptions::owner`]). [`Error::Busy`] when someone else held it
    /// for the whole wait.
    ///
    /// Release one owner's guards in the reverse order of taking them, as
    /// scopes do: the guard of the first hold releases every hold (so that
    /// a release retried after a lost answer cannot count one down twice).
    pub async fn acquire(&self, options: &LockOptions) -> Result<LockGuard, Error> {
        LockGuard::take(Lock::Reentrant(self.clone()), options).await
    }
}

#[cfg(feature = "redlock")]
impl crate::Redlock {
    /// Takes the lock on a majority of the nodes as `options` say, as a
    /// guard that releases it on every node when dropped. [`Error::Busy`]
    /// when others held it; [`Error::NoQuorum`] when too few nodes answered.
    pub async fn acquire(&self, options: &LockOptions) -> Result<LockGuard, Error> {
        LockGuard::take(Lock::Redlock(self.clone()), options).await
    }
}
