//! The lease lock: `SET key <owner token> NX PX <lease>`.
//!
//! The right way of articles 001 and 002. One command sets the value and the
//! expiry together (no crash can leave a lock without a TTL), the value is a
//! token unique to this acquisition (so only the owner can release), and the
//! release compares and deletes in one script.
//!
//! What it cannot do on its own: know that its lease ran out while the
//! business was still working. Then a second owner takes the lock and both
//! write. [`super::Watchdog`] renews the lease while the owner lives; a fencing
//! token guards against the owner that froze.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use crate::store::Conn;
use redis::{AsyncCommands, Script, SetExpiry, SetOptions};

use super::hook::Hook;
use super::wakeups::{Attempt, Wakeups, release_channel, wait_for_lock};
use super::{Grant, Lease, OwnerId, millis, release_in_background, ttl_from_pttl};
use crate::Error;

static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/lease_release.lua")));
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/lease_renew.lua")));

/// A lease lock on one key: `SET NX PX` with the owner's token, released
/// by a compare-and-delete script (nobody releases a lock that is not
/// theirs), renewable ([`Lease::renew`]). Cheap to clone.
///
/// What it guarantees: one owner at a time *while the lease lasts*, and
/// the owner knows until when ([`Grant::deadline`]). What it does not:
/// work that outlives the lease (the lab's `slow-business`: `token`
/// oversells) or a pause past it (`pause-holder`); a [`Watchdog`] covers
/// the first, only fencing the second ([`ReentrantLock::fenced`]).
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::{LeaseLock, OwnerId, Wakeups};
/// use stocklock_lock::store::Store;
///
/// # async fn example() -> anyhow::Result<()> {
/// let store = Store::open("redis://127.0.0.1:6379")?;
/// let wakeups = Wakeups::new();
/// let _listener = wakeups.listen(store.client().clone()); // wakes waiters on release
/// let lock = LeaseLock::new(store.conn().await?, "lock:{order-42}", wakeups);
/// let me = OwnerId::new("worker-1");
/// // Wait up to 2 s for it, woken by the holder's release; hold it for 10 s at most.
/// if let Some(grant) = lock.lock(&me, Duration::from_secs(10), Duration::from_secs(2)).await? {
///     // ... work, and check std::time::Instant::now() < grant.deadline() before writing ...
///     let released = lock.unlock(&me).await?; // false: the lease had run out
///     # let _ = (grant, released);
/// }
/// # Ok(())
/// # }
/// ```
///
/// [`Lease::renew`]: super::Lease::renew
/// [`Grant::deadline`]: super::Grant::deadline
/// [`Watchdog`]: super::Watchdog
/// [`ReentrantLock::fenced`]: super::ReentrantLock::fenced
#[derive(Clone)]
pub struct LeaseLock {
    conn: Conn,
    key: String,
    wakeups: Wakeups,
    hook: Hook,
}

impl LeaseLock {
    /// A lease lock on `key`, on `conn`; its waiters are woken through `wakeups`.
    pub fn new(conn: Conn, key: impl Into<String>, wakeups: Wakeups) -> Self {
        Self {
            conn,
            key: key.into(),
            wakeups,
            hook: Hook::none(),
        }
    }

    /// Notes each wait for the lock at `hook`'s [`super::wakeups::WAITS`].
    pub fn with_hook(mut self, hook: Hook) -> Self {
        self.hook = hook;
        self
    }

    /// The key the lock is stored at.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// One `SET NX PX`: `true` when `owner` holds the lock now.
    pub async fn try_lock(&self, owner: &OwnerId, lease: Duration) -> Result<bool, Error> {
        let options = SetOptions::default()
            .conditional_set(redis::ExistenceCheck::NX)
            .with_expiration(SetExpiry::PX(millis(lease)));
        let set: Option<String> = self
            .conn
            .clone()
            .set_options(&self.key, owner.as_str(), options)
            .await?;
        Ok(set.is_some())
    }

    /// Tries for up to `wait`, woken by releases; `wait` zero tries once.
    /// `Some(grant)` when `owner` holds the lock: it may count on it until
    /// [`Grant::deadline`].
    pub async fn lock(
        &self,
        owner: &OwnerId,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, Error> {
        wait_for_lock(&self.wakeups, &self.key, wait, &self.hook, || async {
            let sent = Instant::now();
            if self.try_lock(owner, lease).await? {
                return Ok(Attempt::Acquired(Grant {
                    sent,
                    lease,
                    holds: 1,
                    token: None,
                }));
            }
            let pttl: i64 = self.conn.clone().pttl(&self.key).await?;
            Ok(Attempt::HeldFor(ttl_from_pttl(pttl)))
        })
        .await
    }

    /// Releases the lock if `owner` still holds it; `false` means it had
    /// expired (and may belong to someone else now, who keeps it).
    pub async fn unlock(&self, owner: &OwnerId) -> Result<bool, Error> {
        let released: i64 = RELEASE
            .key(&self.key)
            .arg(owner.as_str())
            .arg(release_channel(&self.key))
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(released == 1)
    }

    /// [`LeaseLock::unlock`], and if Redis does not answer, again in the
    /// background until `until` (when the lease would have run out): an
    /// owner that is done leaves nothing behind (a compare-and-delete is
    /// safe to repeat).
    pub async fn unlock_surely(&self, owner: &OwnerId, until: Instant) -> Result<bool, Error> {
        let released = self.unlock(owner).await;
        if released.is_err() {
            let (lock, owner) = (self.clone(), owner.clone());
            release_in_background(until, move || {
                let (lock, owner) = (lock.clone(), owner.clone());
                async move { lock.unlock(&owner).await.map(|_| ()) }
            });
        }
        released
    }

    /// Whether anyone holds the lock.
    pub async fn is_locked(&self) -> Result<bool, Error> {
        Ok(self.conn.clone().exists(&self.key).await?)
    }

    /// Whether `owner` holds the lock (its token is the key's value).
    pub async fn holds(&self, owner: &OwnerId) -> Result<bool, Error> {
        let value: Option<String> = self.conn.clone().get(&self.key).await?;
        Ok(value.as_deref() == Some(owner.as_str()))
    }
}

impl Lease for LeaseLock {
    fn kind(&self) -> &'static str {
        "lease"
    }

    async fn renew(&self, owner: &OwnerId, lease: Duration) -> Result<bool, Error> {
        let renewed: i64 = RENEW
            .key(&self.key)
            .arg(owner.as_str())
            .arg(millis(lease))
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(renewed == 1)
    }
}
