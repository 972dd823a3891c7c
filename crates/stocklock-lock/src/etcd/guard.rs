//! The etcd lock's guard: [`EtcdLock::acquire`] takes it with
//! [`LockOptions`] and a session of its own, and the guard releases the
//! lock and ends the session when dropped.

use std::time::Instant;

use tracing::Instrument;

use super::{EtcdLock, Held, Session};
use crate::telemetry::{self, Counted};
use crate::{Error, LockOptions, Released};

/// The etcd lock held, with the session whose lease keeps it. Dropping it
/// deletes the key and revokes the lease in the background (on the tokio
/// runtime it was dropped on); [`EtcdGuard::release`] does it now and says
/// how it went.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::LockOptions;
/// use stocklock_lock::etcd::{EtcdClient, EtcdLock};
///
/// # async fn example() -> Result<(), stocklock_lock::Error> {
/// let client = EtcdClient::new(vec!["http://127.0.0.1:2379".into()])?;
/// let lock = EtcdLock::new(client, "locks/order-42");
/// let guard = lock.acquire(&LockOptions::new().lease(Duration::from_secs(5))).await?;
/// println!("fencing token {}", guard.token());
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct EtcdGuard {
    lock: EtcdLock,
    held: Held,
    /// `None` once released.
    session: Option<Session>,
}

impl EtcdGuard {
    /// The key held, its fencing token and when it was asked for.
    pub fn held(&self) -> &Held {
        &self.held
    }

    /// The fencing token: the key's `create_revision`, strictly growing
    /// across holders.
    pub fn token(&self) -> i64 {
        self.held.token
    }

    /// Until when the session's lease is known to live (moved by each
    /// confirmed keep-alive).
    pub fn deadline(&self) -> Instant {
        self.session
            .as_ref()
            .map_or_else(Instant::now, Session::deadline)
    }

    /// Whether the holder may no longer count on the lock: etcd said the
    /// lease is gone, the key was found deleted, or no keep-alive was
    /// confirmed in time.
    pub fn is_lost(&self) -> bool {
        self.session.as_ref().is_none_or(Session::is_lost)
    }

    /// Resolves when the lock is known to be lost (at once if it is):
    /// within one keep-alive interval (a third of the session's TTL) of
    /// the lease going or the key being deleted, each keep-alive checking
    /// both; at the deadline when no keep-alive is confirmed.
    pub async fn lost(&self) {
        if let Some(session) = &self.session {
            session.lost().await;
        }
    }

    /// Deletes the key and revokes the lease now. [`Released::Expired`]
    /// when the lease was already lost (someone else may have held the
    /// lock since).
    pub async fn release(mut self) -> Result<Released, Error> {
        let Some(session) = self.session.take() else {
            return Ok(Released::Expired);
        };
        let lost = session.is_lost();
        telemetry::held("etcd", self.held.sent.elapsed());
        if lost {
            telemetry::count("etcd", Counted::ReleasedExpired);
        }
        let span = tracing::debug_span!("lock.release", key = %self.held.key);
        self.lock
            .release(&self.held, session)
            .instrument(span)
            .await?;
        Ok(if lost {
            Released::Expired
        } else {
            Released::Released
        })
    }
}

impl Drop for EtcdGuard {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        telemetry::held("etcd", self.held.sent.elapsed());
        let (lock, held) = (self.lock.clone(), self.held.clone());
        crate::undo::in_background(&self.held.key, async move {
            if let Err(err) = lock.release(&held, session).await {
                tracing::warn!(%err, key = %held.key, "release of a dropped guard failed: the lock is left to its lease");
            }
        });
    }
}

impl EtcdLock {
    /// Takes the lock with a session of its own whose TTL is the options'
    /// lease (etcd counts whole seconds, rounded up), waiting as they say:
    /// a guard that releases the lock and ends the session when dropped.
    /// The session's lease is kept alive while the guard lives (every
    /// etcd session's is: [`LockOptions::renew`] changes nothing), and an
    /// etcd waiter is woken by its predecessor's deletion
    /// ([`LockOptions::retry_every`] changes nothing either).
    /// [`Error::Busy`] when someone else held it for the whole wait.
    pub async fn acquire(&self, options: &LockOptions) -> Result<EtcdGuard, Error> {
        let span = tracing::debug_span!(
            "lock.acquire",
            key = %self.prefix,
            lease_ms = options.lease_time().as_millis() as u64,
            wait_ms = options.wait_time().as_millis() as u64,
        );
        let called = Instant::now();
        let acquired = async {
            let session = Session::grant(&self.client, options.lease_time()).await?;
            // Dropped from here until the guard is handed back (a timeout,
            // a `select!`), the session's lease is revoked in the
            // background: its queued key goes with it at once, not at the
            // end of its TTL, and no waiter behind it waits for that.
            let (client, lease) = (self.client.clone(), session.lease());
            let revoke = crate::undo::Undo::new(|| {
                crate::undo::in_background(&self.prefix, async move {
                    let _ = super::session::revoke_lease(&client, lease).await;
                });
            });
            let locked = self.lock(&session, options.wait_time()).await;
            revoke.disarm();
            match locked {
                Ok(held) => Ok(EtcdGuard {
                    // The guard's own session: its key checked with each
                    // keep-alive, so a deletion is learned within one.
                    held: {
                        session.watch(&held.key, held.token);
                        held
                    },
                    lock: self.clone(),
                    session: Some(session),
                }),
                Err(err) => {
                    // Nothing is held: the session's lease goes too (its
                    // queued key with it).
                    let _ = session.revoke().await;
                    Err(err)
                }
            }
        }
        .instrument(span)
        .await;
        let outcome = match &acquired {
            Ok(_) => "acquired",
            Err(Error::Busy) => "busy",
            Err(_) => "error",
        };
        telemetry::acquired("etcd", outcome, called.elapsed());
        acquired
    }
}
