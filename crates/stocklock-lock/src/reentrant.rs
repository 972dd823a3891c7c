//! The reentrant lock: a hash of owner → hold count, with a lease on the key.
//!
//! Redisson's `RLock` shape (articles 000 and 001). The same owner may take
//! the lock again while holding it and must release it as many times; only
//! the last release deletes the key and wakes a waiter. Waiters are woken by
//! pub/sub ([`super::wakeups`]), not by polling.
//!
//! The lease still runs out if nobody renews it: pair it with a
//! [`super::Watchdog`] for a lock that outlives slow business but not its
//! owner's death.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use crate::store::Conn;
use redis::AsyncCommands;
use redis::Script;

use super::hook::Hook;
use super::wakeups::{Attempt, Wakeups, release_channel, wait_for_lock};
use super::{Grant, Lease, OwnerId, millis, release_in_background, ttl_from_pttl};
use crate::Error;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/reentrant_acquire.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/reentrant_release.lua")));
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/reentrant_renew.lua")));

/// What an unlock did.
///
/// ```
/// use stocklock_lock::Unlocked;
///
/// // What an owner makes of an unlock's answer: `Ok(true)` once the lock is free.
/// fn done(unlocked: Unlocked) -> Result<bool, &'static str> {
///     match unlocked {
///         Unlocked::StillHeld(_) => Ok(false), // an outer hold is left: still the holder
///         Unlocked::Released => Ok(true),      // free, and one waiter woken
///         Unlocked::NotOwner => Err("the lease ran out before the unlock"),
///     }
/// }
/// assert_eq!(done(Unlocked::StillHeld(1)), Ok(false));
/// assert!(done(Unlocked::NotOwner).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unlocked {
    /// The owner still holds it this many times.
    StillHeld(u32),
    /// That was the last hold: the lock is free and a waiter was woken.
    Released,
    /// The owner did not hold it (never did, or its lease ran out).
    NotOwner,
}

/// A reentrant lock on one key: a hash of owner → hold count with a lease,
/// taken, renewed and released by scripts; optionally fenced
/// ([`ReentrantLock::fenced`]). Cheap to clone.
///
/// With a [`Watchdog`] the lease is renewed while the owner works, and the
/// owner learns when it is lost ([`Tenure::is_lost`], [`Tenure::lost`]):
/// the lab's `slow-business` is safe with it, and `lock-vanishes-early` (the
/// key deleted before the next renewal) answers `lock_lost` instead of
/// writing. Two things still break it (`watchdog` oversells in both): the
/// key deleted after the last renewal before the write, which nothing
/// notices in time (`lock-vanishes`), and a pause of the whole process
/// past the lease (`pause-holder`). Only a fence the store checks closes
/// them ([`ReentrantLock::fenced`]).
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::{OwnerId, ReentrantLock, Wakeups, Watchdog};
/// use stocklock_lock::store::Store;
///
/// # async fn example() -> anyhow::Result<()> {
/// let store = Store::open("redis://127.0.0.1:6379")?;
/// let wakeups = Wakeups::new();
/// let _listener = wakeups.listen(store.client().clone());
/// let lock = ReentrantLock::new(store.conn().await?, "lock:{order-42}", wakeups);
/// let me = OwnerId::new("worker-1");
/// let lease = Duration::from_secs(30);
/// let Some(grant) = lock.lock(&me, lease, Duration::from_secs(5)).await? else {
///     anyhow::bail!("busy");
/// };
/// let dog = Watchdog::for_grant(lock.clone(), me.clone(), &grant); // renews every lease/3
/// // ... long work ...
/// if dog.tenure().is_lost() {
///     // A renewal was refused or never confirmed in time: someone else
///     // may hold the lock now. Do not write.
/// }
/// dog.stop();
/// lock.unlock(&me, lease).await?;
/// # Ok(())
/// # }
/// ```
///
/// [`Watchdog`]: super::Watchdog
/// [`Tenure::is_lost`]: super::Tenure::is_lost
/// [`Tenure::lost`]: super::Tenure::lost
#[derive(Clone)]
pub struct ReentrantLock {
    conn: Conn,
    key: String,
    wakeups: Wakeups,
    /// The fencing token counter (`INCR`ed by every grant) of a fenced lock.
    fence: Option<String>,
    hook: Hook,
}

impl ReentrantLock {
    /// A reentrant lock on `key`, on `conn`; its waiters are woken through `wakeups`.
    pub fn new(conn: Conn, key: impl Into<String>, wakeups: Wakeups) -> Self {
        Self {
            conn,
            key: key.into(),
            wakeups,
            fence: None,
            hook: Hook::none(),
        }
    }

    /// Notes each wait for the lock at `hook`'s [`super::wakeups::WAITS`].
    pub fn with_hook(mut self, hook: Hook) -> Self {
        self.hook = hook;
        self
    }

    /// The same lock, fenced: every grant also takes a fencing token from
    /// `INCR fence_key`, in the acquire script itself ([`Grant::token`]).
    /// The store that takes the holder's writes must refuse a token older
    /// than the newest it has seen: then even a holder paused past its
    /// lease cannot overwrite its successor (the lab's `pause-holder`:
    /// `fenced` is safe). The fence key survives resets; keep it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use stocklock_lock::{OwnerId, ReentrantLock, Wakeups};
    /// use stocklock_lock::store::Store;
    ///
    /// # async fn example() -> anyhow::Result<()> {
    /// let store = Store::open("redis://127.0.0.1:6379")?;
    /// let lock = ReentrantLock::new(store.conn().await?, "lock:{order-42}", Wakeups::new())
    ///     .fenced("fence:{order-42}");
    /// let me = OwnerId::new("worker-1");
    /// let lease = Duration::from_secs(30);
    /// if let Some(grant) = lock.lock(&me, lease, Duration::from_secs(5)).await? {
    ///     let token = grant.token.expect("a fenced lock's grant has a token");
    ///     // Send `token` with the write; the store keeps the newest token it
    ///     // accepted and refuses older ones (examples/fenced.rs does it in Lua).
    ///     # let _ = token;
    ///     lock.unlock(&me, lease).await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`Grant::token`]: super::Grant::token
    pub fn fenced(mut self, fence_key: impl Into<String>) -> Self {
        self.fence = Some(fence_key.into());
        self
    }

    /// The key the lock is stored at.
    pub fn key(&self) -> &str {
        &self.key
    }

    async fn attempt(&self, owner: &OwnerId, lease: Duration) -> Result<Attempt<Grant>, Error> {
        let sent = Instant::now();
        let (acquired, value, token): (i64, i64, i64) = ACQUIRE
            .key(&self.key)
            // Unfenced, the lock's own key stands in (never read).
            .key(self.fence.as_deref().unwrap_or(&self.key))
            .arg(owner.as_str())
            .arg(millis(lease))
            .arg(if self.fence.is_some() { "1" } else { "0" })
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(if acquired == 1 {
            Attempt::Acquired(Grant {
                sent,
                lease,
                holds: u32::try_from(value).unwrap_or(u32::MAX),
                token: self.fence.is_some().then_some(token),
            })
        } else {
            Attempt::HeldFor(ttl_from_pttl(value))
        })
    }

    /// One try: `Some(holds)` when `owner` holds the lock now (holds > 1 when
    /// it already did), `None` when someone else does.
    pub async fn try_lock(&self, owner: &OwnerId, lease: Duration) -> Result<Option<u32>, Error> {
        Ok(match self.attempt(owner, lease).await? {
            Attempt::Acquired(grant) => Some(grant.holds),
            Attempt::HeldFor(_) => None,
        })
    }

    /// Tries for up to `wait`, woken by releases. `Some(grant)` on success
    /// (its `holds`, its deadline, and its token when fenced).
    pub async fn lock(
        &self,
        owner: &OwnerId,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, Error> {
        wait_for_lock(&self.wakeups, &self.key, wait, &self.hook, || {
            self.attempt(owner, lease)
        })
        .await
    }

    /// Counts one hold down, and refreshes the lease of the holds left.
    pub async fn unlock(&self, owner: &OwnerId, lease: Duration) -> Result<Unlocked, Error> {
        self.release(owner, lease, false).await
    }

    /// Releases every hold `owner` has: for an owner that is done, and
    /// safe to repeat (a retry of a release whose answer was lost cannot
    /// take a hold twice).
    pub async fn unlock_all(&self, owner: &OwnerId) -> Result<Unlocked, Error> {
        self.release(owner, Duration::ZERO, true).await
    }

    /// [`ReentrantLock::unlock_all`], and if Redis does not answer, again in
    /// the background until `until` (when the lease would have run out).
    pub async fn unlock_all_surely(
        &self,
        owner: &OwnerId,
        until: Instant,
    ) -> Result<Unlocked, Error> {
        let unlocked = self.unlock_all(owner).await;
        if unlocked.is_err() {
            let (lock, owner) = (self.clone(), owner.clone());
            release_in_background(until, move || {
                let (lock, owner) = (lock.clone(), owner.clone());
                async move { lock.unlock_all(&owner).await.map(|_| ()) }
            });
        }
        unlocked
    }

    async fn release(
        &self,
        owner: &OwnerId,
        lease: Duration,
        all: bool,
    ) -> Result<Unlocked, Error> {
        let left: Result<i64, _> = RELEASE
            .key(&self.key)
            .arg(owner.as_str())
            .arg(millis(lease))
            .arg(release_channel(&self.key))
            .arg(if all { "1" } else { "0" })
            .arg(self.wakeups.origin())
            .invoke_async(&mut self.conn.clone())
            .await;
        // Released, or perhaps (no answer): this process's next waiter
        // tries now; the other processes hear the message.
        if !matches!(left, Ok(n) if n > 0) {
            self.wakeups.released(&self.key);
        }
        let left = left?;
        Ok(match left {
            0 => Unlocked::Released,
            n if n > 0 => Unlocked::StillHeld(u32::try_from(n).unwrap_or(u32::MAX)),
            _ => Unlocked::NotOwner,
        })
    }

    /// How many times `owner` holds the lock (0: not at all).
    pub async fn holds(&self, owner: &OwnerId) -> Result<u32, Error> {
        let holds: Option<u32> = self.conn.clone().hget(&self.key, owner.as_str()).await?;
        Ok(holds.unwrap_or(0))
    }

    /// Whether anyone holds the lock.
    pub async fn is_locked(&self) -> Result<bool, Error> {
        Ok(self.conn.clone().exists(&self.key).await?)
    }
}

impl Lease for ReentrantLock {
    fn kind(&self) -> &'static str {
        "reentrant"
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
