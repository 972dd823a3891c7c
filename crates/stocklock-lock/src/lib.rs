//! Distributed locks for tokio programs on Redis (lease, reentrant,
//! watchdog, fenced; Redlock with the feature `redlock`), etcd (`etcd`)
//! and ZooKeeper (`zookeeper`), each documented with what it guarantees
//! and what it does not. The store may also be a Redis Cluster (`cluster`)
//! or the master a set of Sentinels names (`sentinel`); `full` turns every
//! feature on. By default only redis, tokio, thiserror, tracing and uuid
//! are needed.
//!
//! Most users want the guard API: [`LockOptions`] in, a [`LockGuard`] out
//! that releases on drop (and [`LockGuard::release`] to learn how it went):
//!
//! ```no_run
//! use std::time::Duration;
//! use stocklock_lock::{LeaseLock, LockOptions, Wakeups};
//! use stocklock_lock::store::Store;
//!
//! # async fn example() -> Result<(), stocklock_lock::Error> {
//! let store = Store::open("redis://127.0.0.1:6379")?;
//! let lock = LeaseLock::new(store.conn().await?, "lock:{order-42}", Wakeups::new());
//! let guard = lock.acquire(&LockOptions::new().lease(Duration::from_secs(10))).await?;
//! // ... work; `guard.is_lost()` before a write ...
//! guard.release().await?;
//! # Ok(())
//! # }
//! ```
//!
//! Under it, the capabilities of a full lock interface:
//!
//! | capability                        | here |
//! |-----------------------------------|------|
//! | a guard that releases on drop     | [`LeaseLock::acquire`], [`ReentrantLock::acquire`], `Redlock::acquire` with [`LockOptions`]: a [`LockGuard`] (its token, its deadline, [`LockGuard::release`]); `EtcdLock::acquire`, `ZooKeeperLock::acquire`: `EtcdGuard`, `ZooKeeperGuard` |
//! | try-lock with a wait and a lease  | [`LeaseLock::lock`], [`ReentrantLock::lock`], `Redlock::lock`: a [`Grant`] |
//! | knowing when the lock may be lost | [`Grant::deadline`] (acquire *sent* + lease − drift), kept up by [`Watchdog`]'s confirmed renewals: [`Tenure::is_lost`] |
//! | unlock by the owner only, atomic  | [`LeaseLock::unlock`], [`ReentrantLock::unlock`] (Lua compare-and-delete) |
//! | nothing left behind on errors     | [`LeaseLock::unlock_surely`], [`ReentrantLock::unlock_all_surely`]: retried until answered or the lease is over |
//! | safe to cancel                    | every `acquire` dropped before it returns (a timeout, a `select!`) lets go in the background of what it took or may have taken (a fresh owner's hold, an etcd session's lease, a ZooKeeper znode found by its owner's prefix) |
//! | is-locked                         | [`LeaseLock::is_locked`], [`ReentrantLock::is_locked`] |
//! | reentrant lock with a hold count  | [`ReentrantLock`] |
//! | fencing token with the grant      | [`ReentrantLock::fenced`]: `INCR` in the acquire script, [`Grant::token`] |
//! | renewal                           | [`Lease::renew`], and [`Watchdog`] to do it while held |
//! | waiting without polling           | [`Wakeups`]: releases are published, waiters woken (Redlock's too) |
//! | a lock on a majority of N Redis   | `Redlock` on `RedlockNodes` (feature `redlock`; renewable by [`Watchdog`]; its validity is its deadline) |
//! | a lock on a CP store (etcd)       | `etcd::EtcdLock` (feature `etcd`): lease + keep-alive, queue by `create_revision`, watch the predecessor; the revision is the fencing token |
//! | a lock on ZooKeeper               | `ZooKeeperLock` (feature `zookeeper`): ephemeral sequential znodes, predecessor watch, the session as lease, czxid as fencing token (not reentrant) |
//! | points a caller may hook          | [`Hook`]: named [`Point`]s where the hook may hold the step (a schedule's gate), end the process (a crash at that step) or record it (a timeline); one branch each when none is set |
//!
//! What a local deadline cannot fix: a pause *between* the owner's last look
//! at its deadline and its write (a GC, a SIGSTOP). Nothing the owner checks
//! can come after that moment; only the store refusing a stale fencing
//! token can ([`ReentrantLock::fenced`], and the `fenced` variant).
//!
//! Every script is built once and called by EVALSHA (redis-rs reloads it by
//! itself after a `NOSCRIPT`).

#![deny(missing_docs)]

/// The README's examples, compiled as doctests (they use every store).
#[cfg(all(doctest, feature = "full"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

#[cfg(feature = "etcd")]
pub mod etcd;
mod guard;
mod hook;
mod lease;
mod options;
pub mod per_key;
#[cfg(feature = "redlock")]
pub mod redlock;
mod reentrant;
#[cfg(feature = "sentinel")]
pub mod sentinel;
pub mod store;
mod telemetry;
mod undo;
pub mod wakeups;
mod watchdog;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

pub use guard::{LockGuard, Released};
pub use hook::{Held, Hook, Point, Reached};
pub use lease::LeaseLock;
pub use options::LockOptions;
#[cfg(feature = "redlock")]
pub use redlock::{Holding, Redlock, RedlockNodes, Refused, Round};
pub use reentrant::{ReentrantLock, Unlocked};
#[cfg(feature = "metrics")]
pub use telemetry::describe_metrics;
pub use wakeups::{Heard, WAITS, Wakeups};

/// Where a lock that queues its contenders (etcd's keys, ZooKeeper's
/// znodes) stops once its own entry is in the queue, before it learns
/// whether its turn has come.
pub const QUEUED: Point = Point::new("queued");
pub use watchdog::{RENEWAL, RENEWED, Tenure, Watchdog};
#[cfg(feature = "zookeeper")]
pub use zookeeper::{
    ZooKeeperGuard, ZooKeeperHold, ZooKeeperLock, ZooKeeperSession, ZooKeeperSessions,
};

/// Everything that can go wrong in this library, whichever store the lock
/// is on. A lock being held by someone else is not an error of
/// [`LeaseLock::lock`] and the like (they answer `None`); only the guard
/// API, which has no other way to say it, answers [`Error::Busy`].
///
/// ```
/// use stocklock_lock::Error;
///
/// assert_eq!(Error::Busy.to_string(), "the lock is held by another owner");
/// let bad = Error::BadName("locks/a".into());
/// assert!(bad.to_string().starts_with(r#"invalid lock name "locks/a""#));
/// ```
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
    /// Fewer than a majority of Redlock's nodes answered: nobody can hold
    /// the lock until they come back.
    #[cfg(feature = "redlock")]
    #[error("{answered} of the Redlock nodes answered, {quorum} needed")]
    NoQuorum {
        /// How many nodes answered.
        answered: usize,
        /// How many make a majority.
        quorum: usize,
    },
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
///
/// ```
/// use stocklock_lock::OwnerId;
///
/// let (a, b) = (OwnerId::new("worker-1"), OwnerId::new("worker-1"));
/// assert!(a.as_str().starts_with("worker-1:"));
/// assert_ne!(a, b); // the same instance, yet two owners
/// assert_eq!(a.to_string(), a.as_str());
/// ```
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
///
/// ```
/// use std::time::{Duration, Instant};
/// use stocklock_lock::Grant;
///
/// let sent = Instant::now();
/// let grant = Grant { sent, lease: Duration::from_secs(10), holds: 1, token: None };
/// // 10 s less the drift (1 % of the lease plus 2 ms), counted from the send:
/// assert_eq!(grant.deadline(), sent + Duration::from_millis(9_898));
/// ```
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

/// A lock whose lease its owner can extend: what a [`Watchdog`] renews.
///
/// ```
/// use std::time::Duration;
/// use stocklock_lock::{Error, Lease, OwnerId};
///
/// struct Confirming; // a store that extends every lease (a test's stand-in)
///
/// impl Lease for Confirming {
///     async fn renew(&self, _: &OwnerId, _: Duration) -> Result<bool, Error> {
///         Ok(true)
///     }
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// assert!(Confirming.renew(&OwnerId::new("w"), Duration::from_secs(1)).await?);
/// # Ok(())
/// # }
/// ```
pub trait Lease: Send + Sync + 'static {
    /// Extends the lease to `lease` from now if `owner` still holds the lock;
    /// `false` when it does not (expired, or taken by someone else).
    fn renew(
        &self,
        owner: &OwnerId,
        lease: Duration,
    ) -> impl Future<Output = Result<bool, Error>> + Send;

    /// The lock's kind, as the `metrics` feature labels its renewals
    /// (`lock="…"`): `lease`, `reentrant`, `redlock`; `custom` unless a
    /// lock of the application's own says otherwise.
    fn kind(&self) -> &'static str {
        "custom"
    }
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
