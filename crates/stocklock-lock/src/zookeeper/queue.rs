//! The lock's queue of znodes: creating a contender's, reading the queue in
//! the server's order, waiting for its turn behind a watched predecessor,
//! and deleting its own (at once, or in the background after a failure).

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client as zk;

use super::{ZooKeeperHold, ZooKeeperLock};
use crate::Error;

impl ZooKeeperLock {
    /// Creates the contender's ephemeral sequential znode; its path and czxid.
    pub(super) async fn enqueue(&self, owner: &str) -> Result<(String, i64), Error> {
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
    pub(super) async fn queue(&self) -> Result<Vec<String>, Error> {
        let mut children = match self.client.list_children(&self.dir).await {
            Err(zk::Error::NoNode) => Vec::new(),
            other => other?,
        };
        children.sort_by_key(|child| sequence_of(child).unwrap_or(i64::MAX));
        Ok(children)
    }

    /// Waits until `queued` is first in the queue (`true`), or `deadline`.
    pub(super) async fn wait_turn(
        &self,
        queued: &ZooKeeperHold,
        deadline: Instant,
    ) -> Result<bool, Error> {
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
    pub(super) fn forget_in_background(&self, owner: String) {
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
    pub(super) async fn delete_own(&self, path: &str) -> Result<bool, Error> {
        match self.client.delete(path, None).await {
            Ok(()) => Ok(true),
            Err(zk::Error::NoNode) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }
}

/// The owner a contender's znode was created for (`{dir}/{owner}-lock-N`).
pub(super) fn owner_of(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next()?;
    name.rsplit_once("-lock-").map(|(owner, _)| owner)
}

/// The sequence number the server appended to a contender's znode name.
pub(super) fn sequence_of(name: &str) -> Option<i64> {
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
