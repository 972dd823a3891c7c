//! A lock on ZooKeeper: the classic recipe (ZooKeeper's own "Locks" recipe,
//! Apache Curator's `InterProcessMutex` / `LockInternals`).
//!
//! - **Queue.** A contender creates an *ephemeral sequential* znode under
//!   the lock's directory (`/stocklock/locks/{name}/{owner}-lock-0000000042`);
//!   the server appends the sequence number, so the children form a queue.
//! - **Owner.** The contender whose znode has the lowest sequence number
//!   holds the lock.
//! - **No herd.** Every other contender watches only its *predecessor*
//!   (the next lower znode) and looks again when that one goes: a release
//!   wakes exactly one waiter, not all of them. It reads the predecessor
//!   with a watch (Curator's `getData().usingWatcher`): a read of a znode
//!   that is already gone answers "no node" and sets no watch, where an
//!   `exists` watch would be left behind on the missing node.
//! - **Lease.** The znode lives as long as its owner's *session*: a client
//!   that dies, or pauses longer than the session timeout, has its session
//!   expired by the ensemble and its znode deleted, which wakes the next
//!   waiter. The session timeout is the lease; the client keeps it up with
//!   its pings (no watchdog of ours). **Release** deletes the owner's znode.
//! - **Protection.** The znode's name starts with the owner's unique id
//!   (Curator's "protected" mode): if the create's answer is lost, the
//!   contender finds the znode it may have created by that id instead of
//!   leaving an orphan that would block everyone until its session ends;
//!   an attempt that fails anyway (a lost connection, an election) has its
//!   znodes deleted in the background once the ensemble answers again
//!   (Curator's "guaranteed delete").
//! - **Fencing token.** The znode's `czxid`, the zxid of the transaction that
//!   created it: the ensemble's log position, strictly growing across every
//!   write, leader changes included (the epoch is its high 32 bits). The
//!   sequence number grows too, but it is the parent's child counter and
//!   starts again at 0 if the lock's directory is ever re-created.
//!
//! **Not reentrant.** Curator's `InterProcessMutex` is reentrant *per Java
//! thread*: a map in the process counts re-acquisitions; its znodes are not.
//! This recipe keeps no such count: a second [`ZooKeeperLock::lock`] by the
//! holder queues a second znode behind its first and waits, until its
//! `wait` runs out, for itself (count holds yourself, as Curator does).
//!
//! What the session cannot fix: a holder paused past its session timeout
//! wakes up holding nothing; the fencing token lets the store refuse it.

mod guard;
mod queue;
mod session;
mod sessions;

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client as zk;

use crate::Error;
use queue::{owner_of, sequence_of};

pub use guard::ZooKeeperGuard;
pub use session::ZooKeeperSession;
pub use sessions::ZooKeeperSessions;

/// Where every lock lives: `{LOCKS_ROOT}/{name}`.
pub const LOCKS_ROOT: &str = "/stocklock/locks";

/// The znode holding the ensemble's id ([`ZooKeeperSession::ensemble_id`]).
pub const ENSEMBLE_ID: &str = "/stocklock/ensemble";

/// The ZooKeeper lock name of a Redis lock key: ZooKeeper paths take no
/// `{` or `}`, so the key's hash tag goes (`lock:{sku}` → `lock:sku`).
pub fn lock_name(key: &str) -> String {
    key.chars().filter(|c| !"{}".contains(*c)).collect()
}

/// One lock: a directory of contenders' znodes.
///
/// ```no_run
/// # async fn example(lock: stocklock_lock::ZooKeeperLock) -> Result<(), stocklock_lock::Error> {
/// if let Some(hold) = lock.lock(std::time::Duration::from_secs(2)).await? {
///     // ... work, checking the session's `may_be_lost()` before each write ...
///     lock.unlock(&hold).await?; // false: the session had expired, the lock with it
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ZooKeeperLock {
    client: zk::Client,
    /// Where a hooked acquisition stops once its znode is queued
    /// ([`crate::QUEUED`]).
    hook: crate::Hook,
    /// `/stocklock/locks/{name}`: persistent, never deleted, so that the
    /// sequence numbers under it never start again.
    dir: String,
}

/// A lock held: the znode that holds it.
///
/// ```no_run
/// # async fn example(lock: stocklock_lock::ZooKeeperLock) -> Result<(), stocklock_lock::Error> {
/// if let Some(hold) = lock.lock(std::time::Duration::ZERO).await? {
///     println!("{} (#{}) holds it; fencing token {}", hold.path, hold.sequence, hold.token);
///     lock.unlock(&hold).await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZooKeeperHold {
    /// The owner's znode (`/stocklock/locks/{name}/{owner}-lock-{sequence}`).
    pub path: String,
    /// Its sequence number: its place in the lock's queue.
    pub sequence: i64,
    /// The fencing token: the zxid that created the znode.
    pub token: i64,
}

impl ZooKeeperLock {
    /// The same lock, stopping at `hook`'s points (a schedule's gates).
    pub fn with_hook(mut self, hook: crate::Hook) -> Self {
        self.hook = hook;
        self
    }

    /// The lock's directory.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Queues for the lock and waits up to `wait` to own it (`ZERO`: only
    /// if it is free now). `None` when the wait ran out: its znode is then
    /// deleted, as if it had never queued. An error when no server answers:
    /// the client waits for one to come back until its session expires, so
    /// within about the session timeout.
    ///
    /// Safe to cancel: dropped anywhere before it returns (a timeout, a
    /// `select!`), the znode it created or may have created (its answer
    /// lost) is found by the owner's unique prefix in its name and deleted
    /// in the background, as a failed acquisition's is (Curator's
    /// "protected" mode): nothing stays queued for the session's life.
    pub async fn lock(&self, wait: Duration) -> Result<Option<ZooKeeperHold>, Error> {
        let deadline = Instant::now() + wait;
        let owner = uuid::Uuid::new_v4().simple().to_string();
        // Armed until a hold is handed back or the znode is surely gone.
        let forget = crate::undo::Undo::new(|| {
            if tokio::runtime::Handle::try_current().is_ok() {
                self.forget_in_background(owner.clone());
            } else {
                tracing::warn!(
                    owner,
                    "acquire dropped outside a tokio runtime: its znode is left to its session"
                );
            }
        });
        let (path, token) = self.enqueue(&owner).await?;
        let queued = ZooKeeperHold {
            sequence: sequence_of(&path).unwrap_or(-1),
            path,
            token,
        };
        self.hook.at(crate::QUEUED).await;
        let outcome = self.wait_turn(&queued, deadline).await;
        if matches!(outcome, Ok(true)) {
            forget.disarm();
            return Ok(Some(queued));
        }
        // Leave nothing queued: a znode left behind would block everyone
        // after it until the session ends.
        if let Err(err) = self.delete_own(&queued.path).await {
            // `forget`, still armed, deletes it in the background.
            outcome?;
            return Err(err);
        }
        forget.disarm();
        outcome.map(|_| None)
    }

    /// Releases `hold`: deletes its znode. `false` when it was already gone
    /// (its session expired: the lock had been lost before this release).
    /// A release that fails (a lost connection: the session lives on, and
    /// so would the znode, blocking every waiter) is retried in the
    /// background, as a failed acquisition's znode is.
    pub async fn unlock(&self, hold: &ZooKeeperHold) -> Result<bool, Error> {
        let deleted = self.delete_own(&hold.path).await;
        if deleted.is_err()
            && let Some(owner) = owner_of(&hold.path)
        {
            self.forget_in_background(owner.to_owned());
        }
        deleted
    }

    /// The current holder's znode (the lowest), if any.
    pub async fn holder(&self) -> Result<Option<String>, Error> {
        let queue = self.queue().await?;
        Ok(queue.first().map(|child| format!("{}/{child}", self.dir)))
    }

    /// Every contender's znode now, the holder (the lowest) first.
    pub async fn contenders_in_order(&self) -> Result<Vec<String>, Error> {
        let queue = self.queue().await?;
        Ok(queue.iter().map(|c| format!("{}/{c}", self.dir)).collect())
    }

    /// Deletes a contender's znode, as its session's end would (any
    /// session may: the lock's znodes are open to all); `false` when it
    /// was gone already.
    pub async fn evict(&self, path: &str) -> Result<bool, Error> {
        self.delete_own(path).await
    }
}
