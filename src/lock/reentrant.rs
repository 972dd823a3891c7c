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
use std::time::Duration;

use crate::store::Conn;
use redis::AsyncCommands;
use redis::Script;

use super::wakeups::{Attempt, Wakeups, release_channel, wait_for_lock};
use super::{Lease, OwnerId, millis, ttl_from_pttl};
use crate::store::StoreError;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/reentrant_acquire.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/reentrant_release.lua")));
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/reentrant_renew.lua")));

/// What an unlock did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unlocked {
    /// The owner still holds it this many times.
    StillHeld(u32),
    /// That was the last hold: the lock is free and a waiter was woken.
    Released,
    /// The owner did not hold it (never did, or its lease ran out).
    NotOwner,
}

/// A reentrant lock on one key. Cheap to clone.
#[derive(Clone)]
pub struct ReentrantLock {
    conn: Conn,
    key: String,
    wakeups: Wakeups,
}

impl ReentrantLock {
    pub fn new(conn: Conn, key: impl Into<String>, wakeups: Wakeups) -> Self {
        Self {
            conn,
            key: key.into(),
            wakeups,
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    async fn attempt(&self, owner: &OwnerId, lease: Duration) -> Result<Attempt<u32>, StoreError> {
        let (acquired, value): (i64, i64) = ACQUIRE
            .key(&self.key)
            .arg(owner.as_str())
            .arg(millis(lease))
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(if acquired == 1 {
            Attempt::Acquired(u32::try_from(value).unwrap_or(u32::MAX))
        } else {
            Attempt::HeldFor(ttl_from_pttl(value))
        })
    }

    /// One try: `Some(holds)` when `owner` holds the lock now (holds > 1 when
    /// it already did), `None` when someone else does.
    pub async fn try_lock(
        &self,
        owner: &OwnerId,
        lease: Duration,
    ) -> Result<Option<u32>, StoreError> {
        Ok(match self.attempt(owner, lease).await? {
            Attempt::Acquired(holds) => Some(holds),
            Attempt::HeldFor(_) => None,
        })
    }

    /// Tries for up to `wait`, woken by releases. `Some(holds)` on success.
    pub async fn lock(
        &self,
        owner: &OwnerId,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<u32>, StoreError> {
        wait_for_lock(&self.wakeups, &self.key, wait, || {
            self.attempt(owner, lease)
        })
        .await
    }

    /// Counts one hold down, and refreshes the lease of the holds left.
    pub async fn unlock(&self, owner: &OwnerId, lease: Duration) -> Result<Unlocked, StoreError> {
        let left: i64 = RELEASE
            .key(&self.key)
            .arg(owner.as_str())
            .arg(millis(lease))
            .arg(release_channel(&self.key))
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(match left {
            0 => Unlocked::Released,
            n if n > 0 => Unlocked::StillHeld(u32::try_from(n).unwrap_or(u32::MAX)),
            _ => Unlocked::NotOwner,
        })
    }

    /// How many times `owner` holds the lock (0: not at all).
    pub async fn holds(&self, owner: &OwnerId) -> Result<u32, StoreError> {
        let holds: Option<u32> = self.conn.clone().hget(&self.key, owner.as_str()).await?;
        Ok(holds.unwrap_or(0))
    }

    /// Whether anyone holds the lock.
    pub async fn is_locked(&self) -> Result<bool, StoreError> {
        Ok(self.conn.clone().exists(&self.key).await?)
    }
}

impl Lease for ReentrantLock {
    async fn renew(&self, owner: &OwnerId, lease: Duration) -> Result<bool, StoreError> {
        let renewed: i64 = RENEW
            .key(&self.key)
            .arg(owner.as_str())
            .arg(millis(lease))
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(renewed == 1)
    }
}
