//! The options a lock is taken with ([`LockOptions`]): its lease, its
//! wait, how often to retry while waiting, its renewal, its owner.

use std::time::{Duration, Instant};

use crate::OwnerId;

/// How to take a lock: its lease, how long to wait for it, whether a
/// [`Watchdog`](crate::Watchdog) renews it while held, and who takes it.
///
/// The default: a 30 s lease, no wait (one try), no renewal, a fresh owner
/// named after the process.
///
/// ```
/// use std::time::Duration;
/// use stocklock_lock::LockOptions;
///
/// let options = LockOptions::new().lease(Duration::from_secs(5)).wait(Duration::from_millis(200));
/// assert_eq!(options.lease_time(), Duration::from_secs(5));
/// assert!(!options.renews());
/// ```
///
/// Waiting retries when the holder's release is announced (a
/// [`Wakeups`](crate::Wakeups) listener) or its lease runs out, whichever
/// comes first; a Redlock round whose votes split with nobody holding a
/// majority retries after a random pause of 2–20 ms.
/// [`LockOptions::retry_every`] bounds the time between two tries (for a
/// process without a listener, or a holder with a long lease).
#[derive(Clone, Debug)]
pub struct LockOptions {
    lease: Duration,
    wait: Duration,
    retry_every: Option<Duration>,
    renew: bool,
    owner: Option<OwnerId>,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
            retry_every: None,
            renew: false,
            owner: None,
        }
    }
}

impl LockOptions {
    /// The defaults: a 30 s lease, no wait, no renewal.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long the store keeps the lock without a renewal (at least 1 ms).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// How long to wait for a held lock (zero: try once).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// While waiting, try again at least this often (at least 1 ms), even
    /// when no release was announced. By default a waiter tries again when
    /// a release is announced or the holder's lease ends.
    pub fn retry_every(mut self, every: Duration) -> Self {
        self.retry_every = Some(every.max(Duration::from_millis(1)));
        self
    }

    /// Whether a [`Watchdog`](crate::Watchdog) renews the lease every lease/3 while the
    /// guard lives (moving [`LockGuard::deadline`](crate::LockGuard::deadline) with each renewal the
    /// store confirmed).
    pub fn renew(mut self, renew: bool) -> Self {
        self.renew = renew;
        self
    }

    /// Who takes the lock (by default a fresh [`OwnerId`] per acquisition,
    /// named after the process). A reentrant lock counts the holds of one
    /// owner.
    pub fn owner(mut self, owner: OwnerId) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The lease asked for.
    pub fn lease_time(&self) -> Duration {
        self.lease
    }

    /// The wait allowed.
    pub fn wait_time(&self) -> Duration {
        self.wait
    }

    /// The longest time between two tries while waiting, if bounded.
    pub fn retry_interval(&self) -> Option<Duration> {
        self.retry_every
    }

    /// Whether the lease is renewed while held.
    pub fn renews(&self) -> bool {
        self.renew
    }

    /// When a wait that starts now ends.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.wait
    }

    /// How long the next try may wait, the whole wait ending at `deadline`:
    /// what is left of it, at most [`retry_every`](Self::retry_every).
    pub(crate) fn slice(&self, deadline: Instant) -> Duration {
        let left = deadline.saturating_duration_since(Instant::now());
        self.retry_every.map_or(left, |every| every.min(left))
    }

    /// Whether the caller named the owner ([`LockOptions::owner`]).
    pub(crate) fn owner_given(&self) -> bool {
        self.owner.is_some()
    }

    pub(crate) fn owner_or_fresh(&self) -> OwnerId {
        self.owner
            .clone()
            .unwrap_or_else(|| OwnerId::new(&format!("pid{}", std::process::id())))
    }
}
