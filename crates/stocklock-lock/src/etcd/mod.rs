//! A lock on etcd, in etcd's own idiom (its `client/v3/concurrency`
//! `Mutex` and `Session`), through the JSON gateway ([`gateway`]).
//!
//! - The owner's lease is an etcd lease ([`Session`]), kept alive while it
//!   lives; the lock's keys are attached to it, so a dead holder's key goes
//!   when its TTL runs out, on the cluster's clock, not the holder's.
//! - Each contender puts its own key, `<prefix>/<lease id in hex>`, in one
//!   transaction: *if `create_revision(key) == 0` then put else get*. Sent
//!   twice (a retry after a timeout), it finds its own key: no duplicates.
//! - The owner is the key with the lowest `create_revision` under the
//!   prefix: a queue in arrival order, kept by etcd's consensus log.
//! - A waiter watches the deletion of its predecessor only (the key created
//!   last before its own), not the owner: one release wakes one waiter, no
//!   herd. When the predecessor goes it looks again (the predecessor may
//!   have given up waiting rather than held the lock).
//! - Release: delete the own key, then revoke the lease.
//! - The owner key's `create_revision` is the fencing token ([`Held::token`]):
//!   the revision of the etcd transaction that queued it, unique and
//!   strictly growing across every holder of every lock in the cluster,
//!   from the store's own log rather than a separate counter.
//!
//! Not reentrant (as etcd's Mutex: a second `lock` with the same session
//! finds its own key and returns at once, but one unlock releases it).
//!
//! What etcd's consensus buys over Redis: a write is acknowledged by a
//! majority of the members, so the lock survives a member's death (the
//! failover that loses a Redis lock). What it cannot fix is the same as
//! for every lease: a holder paused past its TTL still believes it holds
//! the lock; only a fencing check at the store of the protected data
//! (with [`Held::token`]) refuses its late write.

pub mod gateway;
mod guard;
mod queue;
mod session;

use std::time::{Duration, Instant};

use serde_json::json;

use crate::Error;

pub use gateway::EtcdClient;
pub use guard::EtcdGuard;
pub use session::Session;

use gateway::{b64, b64_bytes, from_b64, int, prefix_end};

/// A lock held: its key, and the fencing token that came with it.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::etcd::{EtcdLock, Session};
///
/// # async fn example(lock: EtcdLock, session: Session) -> Result<(), stocklock_lock::Error> {
/// let held = lock.lock(&session, Duration::from_secs(2)).await?;
/// // Each write carries (held.cluster, held.token): the store refuses a token
/// // lower than the newest it has seen from that cluster.
/// println!("{} held; token {} of cluster {}", held.key, held.token, held.cluster);
/// lock.unlock(&held).await?; // the session stays, for another lock
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// `<prefix>/<lease id in hex>`.
    pub key: String,
    /// The key's `create_revision`: the fencing token.
    pub token: i64,
    /// The cluster's id (every answer's `header.cluster_id`): whose
    /// revisions the token counts, so that a store fencing with it can tell
    /// a fresh cluster, counting from 1 again, from the one it knew.
    pub cluster: String,
    /// When the transaction that queued the key was sent.
    pub sent: Instant,
}

/// Who holds a lock now, as etcd says.
///
/// ```no_run
/// # async fn example(lock: stocklock_lock::etcd::EtcdLock) -> Result<(), stocklock_lock::Error> {
/// if let Some(holder) = lock.holder().await? {
///     let left = lock.lease_left(holder.lease).await?; // None: the lease is gone
///     println!("{} holds it (token {}), {left:?} left", holder.key, holder.revision);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The lock's key: `<prefix>/<lease id in hex>`.
    pub key: String,
    /// The etcd lease the key is attached to (the session's).
    pub lease: i64,
    /// Its `create_revision`: the holder's fencing token.
    pub revision: i64,
}

/// One named lock on an etcd cluster. Cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::Error;
/// use stocklock_lock::etcd::{EtcdClient, EtcdLock, Session};
///
/// # async fn example() -> Result<(), Error> {
/// let client = EtcdClient::new(vec!["http://127.0.0.1:2379".into()])?;
/// let lock = EtcdLock::new(client.clone(), "locks/order-42");
/// let session = Session::grant(&client, Duration::from_secs(10)).await?; // kept alive
/// match lock.lock(&session, Duration::from_secs(2)).await {
///     Ok(held) => lock.release(&held, session).await?, // the key, then the lease
///     Err(Error::Busy) => { /* others held it for the whole 2 s */ }
///     Err(other) => return Err(other),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct EtcdLock {
    client: EtcdClient,
    /// Where a hooked acquisition stops once its key is queued
    /// ([`crate::QUEUED`]) and each time it waits for a predecessor
    /// ([`crate::WAITS`]).
    hook: crate::Hook,
    /// `<name>/`: every contender's key starts with it.
    prefix: String,
}

impl EtcdLock {
    /// The lock called `name` (its keys live under `name/`).
    pub fn new(client: EtcdClient, name: &str) -> Self {
        Self {
            client,
            prefix: format!("{name}/"),
            hook: crate::Hook::none(),
        }
    }

    /// The same lock, stopping at `hook`'s points (a schedule's gates).
    pub fn with_hook(mut self, hook: crate::Hook) -> Self {
        self.hook = hook;
        self
    }

    /// Takes the lock for `session`'s lease, waiting at most `wait` for the
    /// holders before it to go (`Duration::ZERO`: only if free now). A
    /// contender that gives up takes its key back out of the queue.
    ///
    /// An etcd that cannot serve (no quorum) is retried until `wait` has
    /// passed, then reported as [`Error::EtcdUnavailable`]; each call is bounded,
    /// so this never hangs.
    pub async fn lock(&self, session: &Session, wait: Duration) -> Result<Held, Error> {
        let deadline = Instant::now() + wait;
        let key = format!("{}{:016x}", self.prefix, session.lease());
        let sent = Instant::now();
        let (token, owner, cluster) = loop {
            match self.queue(&key, session.lease()).await {
                Ok(queued) => break queued,
                Err(Error::EtcdUnavailable(why)) if Instant::now() < deadline => {
                    tracing::debug!(%why, "etcd unavailable while queueing; trying again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(Error::EtcdRefused(why)) if why.contains("lease not found") => {
                    return Err(Error::SessionLost);
                }
                Err(err) => return Err(err),
            }
        };
        let held = Held {
            key,
            token,
            cluster,
            sent,
        };
        self.hook.at(crate::QUEUED).await;
        if owner == Some(token) {
            return Ok(held);
        }
        let waited = if wait.is_zero() {
            Err(Error::Busy)
        } else {
            self.wait_for_predecessors(token, deadline).await
        };
        if let Err(err) = waited {
            // Out of the queue, or the holders after us would wait for us.
            if let Err(undo) = self.delete(&held.key).await {
                tracing::warn!(%undo, key = held.key, "could not leave the etcd lock's queue; the lease will");
            }
            return Err(err);
        }
        // Our turn, if our key is still there: a lease lost while waiting
        // took the key (and our place) with it.
        if session.is_lost() || !self.exists(&held.key).await? {
            return Err(Error::SessionLost);
        }
        Ok(held)
    }

    /// Releases a lock held: deletes its key (waking the next waiter).
    /// The session stays, for another lock; [`EtcdLock::release`] ends both.
    pub async fn unlock(&self, held: &Held) -> Result<(), Error> {
        self.delete(&held.key).await
    }

    /// Releases the lock and revokes the session's lease.
    pub async fn release(&self, held: &Held, session: Session) -> Result<(), Error> {
        let deleted = self.delete(&held.key).await;
        let revoked = session.revoke().await;
        deleted.and(revoked)
    }

    /// Who holds the lock now (the queue's first key), if anyone.
    pub async fn holder(&self) -> Result<Option<Holder>, Error> {
        let answer = self
            .client
            .call("/v3/kv/range", &self.first_created(None, "ASCEND"))
            .await?;
        let Some(kv) = answer["kvs"].get(0) else {
            return Ok(None);
        };
        Ok(Some(Holder {
            key: from_b64(&kv["key"]).unwrap_or_default(),
            lease: int(&kv["lease"])?,
            revision: int(&kv["create_revision"])?,
        }))
    }

    /// Every contender queued now, the holder first (by creation).
    pub async fn contenders_in_order(&self) -> Result<Vec<Holder>, Error> {
        let mut range = self.first_created(None, "ASCEND");
        range["limit"] = json!(0);
        let answer = self.client.call("/v3/kv/range", &range).await?;
        let kvs = answer["kvs"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        kvs.iter()
            .map(|kv| {
                Ok(Holder {
                    key: from_b64(&kv["key"]).unwrap_or_default(),
                    lease: int(&kv["lease"])?,
                    revision: int(&kv["create_revision"])?,
                })
            })
            .collect()
    }

    /// Ends a contender's `lease` now, as its TTL would once its
    /// keep-alives stopped: etcd deletes its key with it, and its own
    /// keep-alive finds it gone. A lease already gone is no error.
    pub async fn end_lease(&self, lease: i64) -> Result<(), Error> {
        session::revoke_lease(&self.client, lease).await
    }

    /// How long `lease` has left, as etcd counts it (`None`: it is gone).
    pub async fn lease_left(&self, lease: i64) -> Result<Option<Duration>, Error> {
        let answer = self
            .client
            .call("/v3/lease/timetolive", &json!({"ID": lease.to_string()}))
            .await?;
        let ttl = int(&answer["TTL"])?;
        Ok((ttl >= 0).then(|| Duration::from_secs(ttl.unsigned_abs())))
    }

    /// How many contenders are queued (the holder included).
    pub async fn contenders(&self) -> Result<u64, Error> {
        let answer = self
            .client
            .call(
                "/v3/kv/range",
                &json!({
                    "key": b64(&self.prefix),
                    "range_end": b64_bytes(&prefix_end(&self.prefix)),
                    "count_only": true,
                }),
            )
            .await?;
        Ok(int(&answer["count"])?.max(0).unsigned_abs())
    }
}
