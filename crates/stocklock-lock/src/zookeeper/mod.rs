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
mod sessions;

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client as zk;

use crate::Error;

pub use guard::ZooKeeperGuard;
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

/// One ZooKeeper session: the lease of every lock taken through it.
/// Cloning shares the session; when the last clone is dropped the session
/// is closed and the server deletes its znodes at once.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::ZooKeeperSession;
///
/// # async fn example() -> Result<(), stocklock_lock::Error> {
/// let (lease, connect) = (Duration::from_secs(5), Duration::from_secs(2));
/// let session = ZooKeeperSession::connect("127.0.0.1:2181", lease, connect).await?;
/// let lock = session.lock("order-42")?; // Err(Error::BadName) for "orders/42"
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ZooKeeperSession {
    client: zk::Client,
    /// The ensemble's id, read once per session.
    ensemble: std::sync::Arc<tokio::sync::OnceCell<String>>,
}

impl ZooKeeperSession {
    /// Opens a session on `connect_string` (`host:port,host:port`) whose
    /// timeout (the locks' lease) is `session_timeout`, as the server
    /// negotiates it within its bounds; giving up after `connect_timeout`.
    pub async fn connect(
        connect_string: &str,
        session_timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self, Error> {
        let connect = zk::Client::connector()
            .with_session_timeout(session_timeout)
            .with_connection_timeout(connect_timeout.min(session_timeout))
            .connect(connect_string);
        let client = tokio::time::timeout(connect_timeout, connect)
            .await
            .map_err(|_| Error::ZooKeeperTimeout(connect_timeout))??;
        Ok(Self {
            client,
            ensemble: Default::default(),
        })
    }

    /// The ensemble's identity: a random id that the first client to ask
    /// writes in [`ENSEMBLE_ID`], the same for every client of the
    /// ensemble and another for a fresh one. A store fencing with czxids
    /// needs it: a fresh ensemble's zxids count again from the start, so
    /// they compare only with tokens of the same ensemble. (The czxid of a
    /// znode of ours would not do: two fresh ensembles that did the same
    /// few writes give it the same value.)
    pub async fn ensemble_id(&self) -> Result<String, Error> {
        let id = self
            .ensemble
            .get_or_try_init(|| async {
                let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                let parent = &ENSEMBLE_ID[..ENSEMBLE_ID.rfind('/').unwrap_or(0)];
                self.client.mkdir(parent, &persistent).await?;
                let fresh = uuid::Uuid::new_v4().simple().to_string();
                match self
                    .client
                    .create(ENSEMBLE_ID, fresh.as_bytes(), &persistent)
                    .await
                {
                    Ok(_) => Ok(fresh),
                    Err(zk::Error::NodeExists) => {
                        let (id, _) = self.client.get_data(ENSEMBLE_ID).await?;
                        Ok::<_, Error>(String::from_utf8_lossy(&id).into_owned())
                    }
                    Err(err) => Err(err.into()),
                }
            })
            .await?;
        Ok(id.clone())
    }

    /// The session timeout the server granted: how long after the owner's
    /// last sign of life its znodes (and so its locks) outlive it.
    pub fn session_timeout(&self) -> Duration {
        self.client.session_timeout()
    }

    /// The session's id, as the server shows it (`cons`, `ephemeralOwner`).
    pub fn session_id(&self) -> i64 {
        self.client.session_id().0
    }

    /// Whether the session may have ended: disconnected (it may expire
    /// before the client reconnects), expired or closed. A holder must stop
    /// counting on its lock then, as Curator's `SUSPENDED` / `LOST`.
    pub fn may_be_lost(&self) -> bool {
        self.client.state() != zk::SessionState::SyncConnected
    }

    /// Whether the session is over for good (expired, closed): its znodes
    /// are gone and a new session is needed.
    pub fn has_ended(&self) -> bool {
        self.client.state().is_terminated()
    }

    /// The lock `name` through this session.
    pub fn lock(&self, name: &str) -> Result<ZooKeeperLock, Error> {
        let valid = !name.is_empty()
            && name.len() <= 200
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
            && name != "."
            && name != "..";
        if !valid {
            return Err(Error::BadName(name.to_owned()));
        }
        Ok(ZooKeeperLock {
            client: self.client.clone(),
            dir: format!("{LOCKS_ROOT}/{name}"),
            hook: crate::Hook::none(),
        })
    }
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
    pub async fn lock(&self, wait: Duration) -> Result<Option<ZooKeeperHold>, Error> {
        let deadline = Instant::now() + wait;
        let owner = uuid::Uuid::new_v4().simple().to_string();
        let (path, token) = match self.enqueue(&owner).await {
            Ok(created) => created,
            Err(err) => {
                self.forget_in_background(owner);
                return Err(err);
            }
        };
        let queued = ZooKeeperHold {
            sequence: sequence_of(&path).unwrap_or(-1),
            path,
            token,
        };
        self.hook.at(crate::QUEUED).await;
        let outcome = self.wait_turn(&queued, deadline).await;
        if matches!(outcome, Ok(true)) {
            return Ok(Some(queued));
        }
        // Leave nothing queued: a znode left behind would block everyone
        // after it until the session ends.
        if let Err(err) = self.delete_own(&queued.path).await {
            self.forget_in_background(owner);
            outcome?;
            return Err(err);
        }
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

    /// Creates the contender's ephemeral sequential znode; its path and czxid.
    async fn enqueue(&self, owner: &str) -> Result<(String, i64), Error> {
        let prefix = format!("{}/{owner}-lock-", self.dir);
        let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let created = match self.client.create(&prefix, &[], &ephemeral).await {
            Err(zk::Error::NoNode) => {
                let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                self.client.mkdir(&self.dir, &persistent).await?;
                self.client.create(&prefix, &[], &ephemeral).await
            }
            other => other,
        };
        match created {
            Ok((stat, sequence)) => Ok((format!("{prefix}{sequence}"), stat.czxid)),
            // The answer was lost, perhaps not the create: find ours.
            Err(err @ zk::Error::ConnectionLoss) => {
                let children = self.client.list_children(&self.dir).await?;
                let Some(mine) = children.into_iter().find(|c| c.starts_with(owner)) else {
                    return Err(err.into());
                };
                let path = format!("{}/{mine}", self.dir);
                let (_, stat) = self.client.get_data(&path).await?;
                Ok((path, stat.czxid))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The lock's queue: its children by sequence number.
    async fn queue(&self) -> Result<Vec<String>, Error> {
        let mut children = match self.client.list_children(&self.dir).await {
            Err(zk::Error::NoNode) => Vec::new(),
            other => other?,
        };
        children.sort_by_key(|child| sequence_of(child).unwrap_or(i64::MAX));
        Ok(children)
    }

    /// Waits until `queued` is first in the queue (`true`), or `deadline`.
    async fn wait_turn(&self, queued: &ZooKeeperHold, deadline: Instant) -> Result<bool, Error> {
        let own = queued.path.rsplit('/').next().unwrap_or_default();
        loop {
            let queue = self.queue().await?;
            let Some(place) = queue.iter().position(|child| child == own) else {
                // Our znode is gone: the session expired while we waited.
                return Err(zk::Error::SessionExpired.into());
            };
            if place == 0 {
                return Ok(true);
            }
            // Out of time (a try-lock): no watch to leave behind.
            if Instant::now() >= deadline {
                return Ok(false);
            }
            let predecessor = format!("{}/{}", self.dir, queue[place - 1]);
            let watcher = match self.client.get_and_watch_data(&predecessor).await {
                Ok((_, _, watcher)) => watcher,
                // Gone between the listing and the watch: look again.
                Err(zk::Error::NoNode) => continue,
                Err(err) => return Err(err.into()),
            };
            self.hook.at(crate::WAITS).await;
            tokio::select! {
                // Deleted (released, or its session ended), or the session
                // changed: look at the queue again either way.
                _ = watcher.changed() => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(false),
            }
        }
    }

    /// Curator's "guaranteed delete": after an attempt that failed (a lost
    /// connection, an election under way), removes in the background any
    /// znode of `owner` it may have left, trying every 100 ms while the
    /// session lives and for at most two session timeouts (the session's
    /// end removes them anyway).
    fn forget_in_background(&self, owner: String) {
        let lock = self.clone();
        tokio::spawn(async move {
            let give_up = Instant::now() + 2 * lock.client.session_timeout();
            while Instant::now() < give_up && !lock.client.state().is_terminated() {
                let children = match lock.client.list_children(&lock.dir).await {
                    Ok(children) => children,
                    Err(zk::Error::NoNode) => return,
                    Err(_) => Vec::new(),
                };
                let mut left = 0;
                for child in children.iter().filter(|c| c.starts_with(&owner)) {
                    let path = format!("{}/{child}", lock.dir);
                    left += usize::from(lock.delete_own(&path).await.is_err());
                }
                if left == 0 && lock.client.state() == zk::SessionState::SyncConnected {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    /// Deletes the owner's znode; `false` when it was already gone.
    async fn delete_own(&self, path: &str) -> Result<bool, Error> {
        match self.client.delete(path, None).await {
            Ok(()) => Ok(true),
            Err(zk::Error::NoNode) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }
}

/// The owner a contender's znode was created for (`{dir}/{owner}-lock-N`).
fn owner_of(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next()?;
    name.rsplit_once("-lock-").map(|(owner, _)| owner)
}

/// The sequence number the server appended to a contender's znode name.
fn sequence_of(name: &str) -> Option<i64> {
    let (_, digits) = name.rsplit_once("-lock-")?;
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_ordered_by_the_servers_sequence_not_by_owner() {
        assert_eq!(sequence_of("ffff-lock-0000000007"), Some(7));
        assert_eq!(sequence_of("/a/b/0a-lock-0000000010"), Some(10));
        assert_eq!(sequence_of("no-sequence"), None);
        assert_eq!(sequence_of("x-lock-12a"), None);
    }

    #[test]
    fn the_owner_is_read_back_from_a_contenders_path() {
        assert_eq!(owner_of("/locks/lock:a/0af3-lock-0000000007"), Some("0af3"));
        assert_eq!(owner_of("/locks/lock:a/no-sequence"), None);
    }
}
