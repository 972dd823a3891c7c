//! A lease kept alive while its owner lives: etcd's `concurrency.Session`.
//!
//! The lock's key is attached to the lease, so the key lives exactly as
//! long as the lease: a holder that dies stops its keep-alives and etcd
//! deletes the key when the TTL runs out (the Redis locks' lease, kept by
//! the cluster's consensus instead of one server's clock). While the owner
//! lives, a task renews the lease every third of its TTL, as the
//! [`crate::Watchdog`] renews a Redis lease.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinHandle;

use super::gateway::{EtcdClient, b64, int};
use crate::{Error, Tenure};

/// A granted lease and the task keeping it alive.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::etcd::{EtcdClient, Session};
///
/// # async fn example(client: EtcdClient) -> Result<(), stocklock_lock::Error> {
/// let session = Session::grant(&client, Duration::from_millis(2500)).await?;
/// assert!(session.ttl() >= Duration::from_secs(3)); // whole seconds, rounded up
/// // ... locks taken with it; once `session.is_lost()`, none of them counts ...
/// session.revoke().await?; // deletes every key attached to the lease
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Session {
    client: EtcdClient,
    lease: i64,
    ttl: Duration,
    /// Until when the lease is known to live (the last confirmed
    /// keep-alive's *send* plus the TTL etcd answered, as a
    /// [`crate::Grant`]'s deadline), and whether it is lost.
    tenure: Arc<Tenure>,
    watched: Arc<Watched>,
    keepalive: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Watched {
    /// The locks held with the session: each key and the `create_revision`
    /// (fencing token) it was created with. A renewal that finds one gone,
    /// or created again by someone else, loses the session's tenure.
    keys: Mutex<Vec<(String, i64)>>,
}

impl Session {
    /// Grants a lease of `ttl` (etcd counts whole seconds: rounded up, and
    /// raised to etcd's own minimum, which it answers with) and starts
    /// keeping it alive.
    pub async fn grant(client: &EtcdClient, ttl: Duration) -> Result<Self, Error> {
        let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        let sent = Instant::now();
        let answer = client
            .call("/v3/lease/grant", &json!({"TTL": seconds.max(1)}))
            .await?;
        let lease = int(&answer["ID"])?;
        let granted = Duration::from_secs(int(&answer["TTL"])?.max(0).unsigned_abs());
        if lease == 0 || granted.is_zero() {
            return Err(Error::EtcdProtocol(format!(
                "lease grant answered {answer}"
            )));
        }
        let tenure = Arc::new(Tenure::new(sent + granted, "etcd"));
        let watched = Arc::new(Watched::default());
        let keepalive = tokio::spawn(keep_alive(
            client.clone(),
            lease,
            granted,
            tenure.clone(),
            watched.clone(),
        ));
        Ok(Self {
            client: client.clone(),
            lease,
            ttl: granted,
            tenure,
            watched,
            keepalive,
        })
    }

    /// The lease's id (the lock names its key after it).
    pub fn lease(&self) -> i64 {
        self.lease
    }

    /// The TTL etcd granted.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Until when the lease is known to live.
    pub fn deadline(&self) -> Instant {
        self.tenure.deadline()
    }

    /// How many keep-alives etcd has confirmed so far.
    pub fn renewals(&self) -> u64 {
        self.tenure.renewals()
    }

    /// The lease is gone, or may be: etcd said so, no keep-alive was
    /// confirmed in time, or a lock held with it was found deleted.
    pub fn is_lost(&self) -> bool {
        self.tenure.is_lost()
    }

    /// Resolves when the session is known to be lost (at once if it is):
    /// within one keep-alive interval (a third of the TTL) of etcd saying
    /// the lease is gone or of a watched key found deleted, and at the
    /// deadline when no keep-alive is confirmed.
    pub async fn lost(&self) {
        self.tenure.lost().await;
    }

    /// Checks `key`, created at `create_revision`, with each confirmed
    /// keep-alive: found deleted (or created again), the session is lost.
    pub(super) fn watch(&self, key: &str, create_revision: i64) {
        self.watched
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((key.to_owned(), create_revision));
    }

    /// Ends the session: stops the keep-alives and revokes the lease, which
    /// deletes every key attached to it. A lease already gone is no error.
    pub async fn revoke(self) -> Result<(), Error> {
        self.keepalive.abort();
        revoke_lease(&self.client, self.lease).await
    }

    /// Stops the keep-alives without revoking: what a crashed or frozen
    /// holder does. The lease, and the lock with it, end after the TTL.
    pub fn abandon(self) {
        self.keepalive.abort();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

/// Renews the lease every third of its TTL until etcd says it is gone or
/// no renewal was confirmed before it would have run out; after each
/// confirmed renewal, checks that the watched keys are still there.
async fn keep_alive(
    client: EtcdClient,
    lease: i64,
    ttl: Duration,
    tenure: Arc<Tenure>,
    watched: Arc<Watched>,
) {
    let body = json!({"ID": lease.to_string()});
    // After an unanswered renewal, try again sooner: the lease is running out.
    let mut pause = ttl / 3;
    loop {
        tokio::time::sleep(pause).await;
        pause = ttl / 3;
        let sent = Instant::now();
        match client.call("/v3/lease/keepalive", &body).await {
            Ok(answer) => match int(&answer["result"]["TTL"]) {
                Ok(left) if left > 0 => {
                    tenure.extend_to(sent + Duration::from_secs(left.unsigned_abs()));
                    tenure.renewed(sent);
                    if let Some(key) = deleted_key(&client, &watched).await {
                        tracing::warn!(lease, key, "etcd lock key deleted: the lock is lost");
                        tenure.mark_lost();
                        return;
                    }
                }
                _ => {
                    tracing::warn!(lease, "etcd lease gone: the lock it carried is lost");
                    tenure.mark_lost();
                    return;
                }
            },
            Err(err) => {
                tracing::debug!(lease, %err, "etcd keep-alive not answered; trying again");
                tenure.renewal_failed();
                if tenure.is_lost() {
                    tenure.mark_lost();
                    return;
                }
                pause = pause.min(Duration::from_millis(200));
            }
        }
    }
}

/// The first watched key that is gone or was created again (someone
/// deleted it, and maybe queued anew); `None` when all are there, or when
/// etcd did not answer (the next renewal looks again).
async fn deleted_key(client: &EtcdClient, watched: &Watched) -> Option<String> {
    let keys = watched
        .keys
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for (key, created) in keys {
        let answer = client
            .call(
                "/v3/kv/range",
                &json!({"key": b64(&key), "keys_only": true}),
            )
            .await
            .ok()?;
        let now = answer["kvs"]
            .as_array()
            .and_then(|kvs| kvs.first())
            .map(|kv| int(&kv["create_revision"]));
        match now {
            Some(Ok(revision)) if revision == created => {}
            Some(Err(_)) => {}
            _ => return Some(key),
        }
    }
    None
}

/// Revokes `lease`: etcd deletes every key attached to it. A lease already
/// gone is no error.
pub(super) async fn revoke_lease(client: &EtcdClient, lease: i64) -> Result<(), Error> {
    match client
        .call("/v3/lease/revoke", &json!({"ID": lease.to_string()}))
        .await
    {
        Ok(_) => Ok(()),
        Err(Error::EtcdRefused(message)) if message.contains("not found") => Ok(()),
        Err(err) => Err(err),
    }
}
