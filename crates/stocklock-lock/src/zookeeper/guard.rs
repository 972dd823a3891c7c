//! The ZooKeeper lock's guard: [`ZooKeeperLock::acquire`] takes it with
//! [`LockOptions`], and the guard deletes its znode when dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::Instant;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::Instrument;
use zookeeper_client as zk;

use super::{ZooKeeperHold, ZooKeeperLock};
use crate::telemetry::{self, Counted};
use crate::{Error, LockOptions, Released};

/// The ZooKeeper lock held: its znode. Dropping it deletes the znode in
/// the background (on the tokio runtime it was dropped on);
/// [`ZooKeeperGuard::release`] does it now and says how it went.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::{LockOptions, ZooKeeperSession};
///
/// # async fn example() -> Result<(), stocklock_lock::Error> {
/// let timeout = Duration::from_secs(5); // the session's timeout is the lease
/// let session = ZooKeeperSession::connect("127.0.0.1:2181", timeout, timeout).await?;
/// let guard = session.lock("order-42")?.acquire(&LockOptions::new().wait(timeout)).await?;
/// println!("fencing token {}", guard.token());
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ZooKeeperGuard {
    lock: ZooKeeperLock,
    hold: ZooKeeperHold,
    released: bool,
    /// When its acquire handed it back (its held time counts from it).
    taken: Instant,
    /// Raised by `watch` when the znode is deleted or the session ends.
    gone: Arc<Gone>,
    watch: JoinHandle<()>,
}

/// The znode found deleted, or the session expired or closed.
#[derive(Debug, Default)]
struct Gone {
    raised: AtomicBool,
    signal: Notify,
}

impl Gone {
    fn raise(&self) {
        if !self.raised.swap(true, Ordering::AcqRel) {
            telemetry::count("zookeeper", Counted::Lost);
        }
        self.signal.notify_waiters();
    }
}

/// Watches the held znode (a data watch: ZooKeeper tells of its deletion
/// at once) and the session, raising `gone` when either ends.
fn watch(client: zk::Client, path: String, gone: Arc<Gone>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut state = client.state_watcher();
        loop {
            match state.peek_state() {
                zk::SessionState::SyncConnected => {}
                zk::SessionState::Disconnected => {
                    // Not lost yet: the session may come back in time.
                    state.changed().await;
                    continue;
                }
                _ => return gone.raise(),
            }
            let watcher = match client.check_and_watch_stat(&path).await {
                Ok((Some(_), watcher)) => watcher,
                Ok((None, _)) => return gone.raise(),
                // Disconnected meanwhile: look at the session again.
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            tokio::select! {
                event = watcher.changed() => {
                    if event.event_type == zk::EventType::NodeDeleted {
                        return gone.raise();
                    }
                }
                _ = state.changed() => {}
            }
        }
    })
}

impl ZooKeeperGuard {
    /// The znode held, its place in the queue and its fencing token.
    pub fn hold(&self) -> &ZooKeeperHold {
        &self.hold
    }

    /// The fencing token: the zxid that created the znode.
    pub fn token(&self) -> i64 {
        self.hold.token
    }

    /// Whether the holder may no longer count on the lock: its znode was
    /// deleted, or its session is not connected (it may expire before the
    /// client reconnects), expired or closed.
    pub fn is_lost(&self) -> bool {
        self.gone.raised.load(Ordering::Acquire)
            || self.lock.client.state() != zk::SessionState::SyncConnected
    }

    /// Resolves when the lock is known to be lost (at once if it is): as
    /// soon as ZooKeeper tells the client its znode was deleted, or the
    /// session leaves `SyncConnected` (disconnected, expired, closed). No
    /// renewal to wait for: the watch and the session's state are events.
    pub async fn lost(&self) {
        let mut state = self.lock.client.state_watcher();
        loop {
            let signal = self.gone.signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.is_lost() {
                return;
            }
            tokio::select! {
                _ = signal => {}
                _ = state.changed() => {}
            }
        }
    }

    /// Deletes the znode now. [`Released::Expired`] when it was already
    /// gone (the session had expired: the lock was lost before).
    pub async fn release(mut self) -> Result<Released, Error> {
        self.released = true;
        self.watch.abort();
        telemetry::held("zookeeper", self.taken.elapsed());
        let span = tracing::debug_span!("lock.release", path = %self.hold.path);
        let deleted = self.lock.unlock(&self.hold).instrument(span).await?;
        Ok(if deleted {
            Released::Released
        } else {
            telemetry::count("zookeeper", Counted::ReleasedExpired);
            Released::Expired
        })
    }
}

impl Drop for ZooKeeperGuard {
    fn drop(&mut self) {
        self.watch.abort();
        if self.released {
            return;
        }
        telemetry::held("zookeeper", self.taken.elapsed());
        let (lock, hold) = (self.lock.clone(), self.hold.clone());
        // `unlock` retries a failed delete in the background itself.
        crate::undo::in_background(&self.hold.path, async move {
            let _ = lock.unlock(&hold).await;
        });
    }
}

impl ZooKeeperLock {
    /// Takes the lock, waiting as `options` say: a guard that deletes its
    /// znode when dropped. The lease is the session's timeout, set when
    /// it was opened ([`LockOptions::lease`], `renew` and `retry_every`
    /// change nothing: the client's pings keep the session, and a waiter
    /// is woken by its predecessor's deletion). [`Error::Busy`] when
    /// someone else held it for the whole wait.
    pub async fn acquire(&self, options: &LockOptions) -> Result<ZooKeeperGuard, Error> {
        let span = tracing::debug_span!(
            "lock.acquire",
            dir = %self.dir,
            wait_ms = options.wait_time().as_millis() as u64,
        );
        let called = Instant::now();
        let hold = self.lock(options.wait_time()).instrument(span).await;
        let outcome = match &hold {
            Ok(Some(_)) => "acquired",
            Ok(None) => "busy",
            Err(_) => "error",
        };
        telemetry::acquired("zookeeper", outcome, called.elapsed());
        let hold = hold?.ok_or(Error::Busy)?;
        let gone = Arc::new(Gone::default());
        Ok(ZooKeeperGuard {
            watch: watch(self.client.clone(), hold.path.clone(), gone.clone()),
            lock: self.clone(),
            hold,
            released: false,
            gone,
            taken: Instant::now(),
        })
    }
}
