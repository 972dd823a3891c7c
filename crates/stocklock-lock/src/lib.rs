//! A small distributed lock library on Redis (and one lock on ZooKeeper),
//! usable outside HTTP.
//!
//! It has the capabilities of article 000's lock interface:
//!
//! | capability                        | here |
//! |-----------------------------------|------|
//! | try-lock with a wait and a lease  | [`LeaseLock::lock`], [`ReentrantLock::lock`], [`Redlock::lock`]: a [`Grant`] |
//! | knowing when the lock may be lost | [`Grant::deadline`] (acquire *sent* + lease − drift), kept up by [`Watchdog`]'s confirmed renewals: [`Tenure::is_lost`] |
//! | unlock by the owner only, atomic  | [`LeaseLock::unlock`], [`ReentrantLock::unlock`] (Lua compare-and-delete) |
//! | nothing left behind on errors     | [`LeaseLock::unlock_surely`], [`ReentrantLock::unlock_all_surely`]: retried until answered or the lease is over |
//! | is-locked                         | [`LeaseLock::is_locked`], [`ReentrantLock::is_locked`] |
//! | reentrant lock with a hold count  | [`ReentrantLock`] |
//! | fencing token with the grant      | [`ReentrantLock::fenced`]: `INCR` in the acquire script, [`Grant::token`] |
//! | renewal                           | [`Lease::renew`], and [`Watchdog`] to do it while held |
//! | waiting without polling           | [`Wakeups`]: releases are published, waiters woken (Redlock's too) |
//! | a lock on a majority of N Redis   | [`Redlock`] on [`RedlockNodes`] (renewable by [`Watchdog`]; its validity is its deadline) |
//! | a lock on a CP store (etcd)       | [`etcd::EtcdLock`]: lease + keep-alive, queue by `create_revision`, watch the predecessor; the revision is the fencing token |
//! | a lock on ZooKeeper               | [`ZooKeeperLock`]: ephemeral sequential znodes, predecessor watch, the session as lease, czxid as fencing token (not reentrant) |
//! | points a caller may hold a step at | [`Hook`]: named [`Point`]s (a schedule's gates, a test), one branch each when none is set |
//!
//! What a local deadline cannot fix: a pause *between* the owner's last look
//! at its deadline and its write (a GC, a SIGSTOP). Nothing the owner checks
//! can come after that moment; only the store refusing a stale fencing
//! token can ([`ReentrantLock::fenced`], and the `fenced` variant).
//!
//! Every script is built once and called by EVALSHA (redis-rs reloads it by
//! itself after a `NOSCRIPT`).

#[cfg(feature = "etcd")]
pub mod etcd;
mod hook;
mod lease;
pub mod per_key;
#[cfg(feature = "redlock")]
pub mod redlock;
mod reentrant;
#[cfg(feature = "sentinel")]
pub mod sentinel;
pub mod store;
pub mod wakeups;
mod watchdog;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

pub use hook::{Held, Hook, Point, Reached};
pub use lease::LeaseLock;
#[cfg(feature = "redlock")]
pub use redlock::{Holding, Redlock, RedlockNodes, Refused, Round};
pub use reentrant::{ReentrantLock, Unlocked};
pub use wakeups::{Heard, WAITS, Wakeups};

/// Where a lock that queues its contenders (etcd's keys, ZooKeeper's
/// znodes) stops once its own entry is in the queue, before it learns
/// whether its turn has come.
pub const QUEUED: Point = Point::new("queued");
pub use watchdog::{RENEWAL, RENEWED, Tenure, Watchdog};
#[cfg(feature = "zookeeper")]
pub use zookeeper::{ZooKeeperHold, ZooKeeperLock, ZooKeeperSession, ZooKeeperSessions};

/// Everything that can go wrong in this library, whichever store the lock
/// is on. A lock being held by someone else is not an error of
/// [`LeaseLock::lock`] and the like (they answer `None`); only the guard
/// API, which has no other way to say it, answers [`Error::Busy`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Redis did not answer, or answered with an error: nothing is known to
    /// have been decided.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Another owner held the lock for the whole wait (or at once, with no wait).
    #[error("the lock is held by another owner")]
    Busy,
    /// The etcd session's lease ended before the lock was acquired (its key
    /// went with it).
    #[cfg(feature = "etcd")]
    #[error("the etcd lease ended before the lock was acquired")]
    SessionLost,
    /// No etcd member answered usefully in time: down, unreachable, or
    /// without a quorum behind it. Nothing is known to have changed.
    #[cfg(feature = "etcd")]
    #[error("etcd unavailable: {0}")]
    EtcdUnavailable(String),
    /// etcd answered with an error of its own (a gRPC status).
    #[cfg(feature = "etcd")]
    #[error("etcd refused the request: {0}")]
    EtcdRefused(String),
    /// An answer of etcd this client cannot read.
    #[cfg(feature = "etcd")]
    #[error("unexpected answer from etcd: {0}")]
    EtcdProtocol(String),
    /// ZooKeeper answered with an error, or the session failed.
    #[cfg(feature = "zookeeper")]
    #[error("zookeeper: {0}")]
    ZooKeeper(#[from] zookeeper_client::Error),
    /// ZooKeeper gave no answer in time.
    #[cfg(feature = "zookeeper")]
    #[error("zookeeper: no answer within {0:?}")]
    ZooKeeperTimeout(Duration),
    /// A lock name a store cannot take (ZooKeeper: letters, digits, `-`,
    /// `_`, `.` and `:` only).
    #[error("invalid lock name {0:?}: letters, digits, '-', '_', '.' and ':' only")]
    BadName(String),
}

/// Who holds a lock: `<instance>:<random>`, so the holder's instance can be
/// shown and no two acquisitions anywhere share an owner by accident.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerId(String);

impl OwnerId {
    /// A fresh owner on `instance`.
    pub fn new(instance: &str) -> Self {
        Self(format!("{instance}:{}", uuid::Uuid::new_v4().simple()))
    }

    /// The owner as its store writes it: `<instance>:<random>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The clock drift allowed between a lock's store and its owner over one
/// lease: 1 % of it plus 2 ms (Redlock's suggestion, used by every lock here).
pub fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// A lock granted to its owner.
///
/// The owner may count on it only until [`Grant::deadline`]: the instant the
/// request that won it was *sent*, plus the lease, less the drift. Counting
/// from the send, not from the answer, is what makes the deadline safe: the
/// store started the lease no earlier than the send, however late the
/// answer came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// When the winning request was sent.
    pub sent: Instant,
    /// How long the store keeps the lock without a renewal.
    pub lease: Duration,
    /// How many times the owner holds it now (a reentrant lock; 1 otherwise).
    pub holds: u32,
    /// The fencing token issued with the grant, by the same atomic step
    /// (a fenced lock; `None` otherwise).
    pub token: Option<i64>,
}

impl Grant {
    /// The last instant the owner may act as the holder, unless a renewal
    /// confirmed later moves it.
    pub fn deadline(&self) -> Instant {
        self.sent + self.lease.saturating_sub(drift(self.lease))
    }
}

/// Keeps trying, in the background, a release whose answer never came (a
/// timeout while Redis was paused, a dropped connection): every 100 ms,
/// until one is answered or `until` passes (the lease would have run out
/// by then anyway). An owner that is done never leaves its lock held for a
/// whole lease because one release was lost.
pub fn release_in_background<F, Fut>(until: Instant, mut release: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), Error>> + Send,
{
    tokio::spawn(async move {
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(100)).await;
            match release().await {
                Ok(()) => return,
                Err(err) => tracing::debug!(%err, "release still not answered; trying again"),
            }
        }
    });
}

/// A lock whose lease its owner can extend.
pub trait Lease: Send + Sync + 'static {
    /// Extends the lease to `lease` from now if `owner` still holds the lock;
    /// `false` when it does not (expired, or taken by someone else).
    fn renew(
        &self,
        owner: &OwnerId,
        lease: Duration,
    ) -> impl Future<Output = Result<bool, Error>> + Send;
}

/// Milliseconds for Redis (at least 1: `PX 0` is an error).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Reads a `PTTL` answer: `Some(ttl)` for a lease, `None` for a key without
/// expiry (-1). A key gone in between (-2) means "try again now".
fn ttl_from_pttl(pttl: i64) -> Option<Duration> {
    match pttl {
        -1 => None,
        n if n < 0 => Some(Duration::ZERO),
        n => Some(Duration::from_millis(n.unsigned_abs())),
    }
}
