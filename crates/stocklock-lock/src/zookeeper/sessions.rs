//! An instance's ZooKeeper sessions, one per lease asked for.
//!
//! The session timeout *is* a ZooKeeper lock's lease: a holder's znode
//! outlives its last sign of life by exactly that long. A request that asks
//! for a lease of L (`lease_ms`) takes its lock through a session whose
//! timeout is L; requests with the same lease share one session (one TCP
//! connection, its pings, its watches), as a process shares one Curator
//! client. A session that ended (expired while its process was frozen,
//! closed) is replaced by a new one on the next request.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use super::ZooKeeperSession;
use crate::Error;

/// How many different leases keep a session open at once; beyond that the
/// oldest is forgotten (requests still using it keep their clone; it closes
/// after them).
const MAX_SESSIONS: usize = 8;

/// How long connecting a session may take at most, whatever the wait.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a request that waits less (`wait_ms=0`) still lets a connect take.
const MIN_CONNECT: Duration = Duration::from_millis(500);

/// One lease's session, opened by one request at a time: the others wait
/// for it (and share it) rather than open their own, each no longer than
/// its own wait.
type Slot = Arc<Mutex<Option<ZooKeeperSession>>>;

/// The sessions of one instance on one ensemble. Cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::ZooKeeperSessions;
///
/// # async fn example() -> Result<(), stocklock_lock::Error> {
/// let sessions = ZooKeeperSessions::new("127.0.0.1:2181"); // nothing connected yet
/// let session = sessions.session(Duration::from_secs(5)).await?; // the lease: 5 s
/// let again = sessions.session(Duration::from_secs(5)).await?; // the same lease's session
/// assert_eq!(session.session_id(), again.session_id());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ZooKeeperSessions {
    connect: Arc<str>,
    /// Session timeout asked for → its slot, in the order they were made.
    /// Held only to find a slot, never across a connect: a connect to a
    /// ZooKeeper that is down takes seconds, and requests for every lease
    /// would queue behind it.
    slots: Arc<std::sync::Mutex<Vec<(Duration, Slot)>>>,
}

impl ZooKeeperSessions {
    /// Sessions on `connect_string` (`host:port,host:port`); none is opened
    /// before a request needs one, so an instance starts without ZooKeeper.
    pub fn new(connect_string: &str) -> Self {
        Self {
            connect: connect_string.into(),
            slots: Arc::default(),
        }
    }

    /// The ensemble's connect string.
    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// A live session whose timeout is `lease` (as the server grants it),
    /// opening one if none is, within 5 s (`CONNECT_TIMEOUT`).
    pub async fn session(&self, lease: Duration) -> Result<ZooKeeperSession, Error> {
        self.session_within(lease, CONNECT_TIMEOUT).await
    }

    /// [`Self::session`] for a request that waits `wait` for its lock: it
    /// gives up after that long (at least 0.5 s, `MIN_CONNECT`, at most
    /// 5 s, `CONNECT_TIMEOUT`), whether connecting itself or waiting for
    /// another request's connect to the same lease.
    pub async fn session_within(
        &self,
        lease: Duration,
        wait: Duration,
    ) -> Result<ZooKeeperSession, Error> {
        let limit = wait.clamp(MIN_CONNECT, CONNECT_TIMEOUT);
        let deadline = Instant::now() + limit;
        let slot = self.slot(lease);
        let mut current = tokio::time::timeout_at(deadline, slot.lock())
            .await
            .map_err(|_| Error::ZooKeeperTimeout(limit))?;
        if let Some(session) = current.as_ref().filter(|session| !session.has_ended()) {
            return Ok(session.clone());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::ZooKeeperTimeout(limit));
        }
        let session = ZooKeeperSession::connect(&self.connect, lease, left).await?;
        *current = Some(session.clone());
        Ok(session)
    }

    /// `lease`'s slot, made if there is none.
    fn slot(&self, lease: Duration) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, slot)) = slots.iter().find(|(timeout, _)| *timeout == lease) {
            return slot.clone();
        }
        if slots.len() >= MAX_SESSIONS {
            slots.remove(0);
        }
        let slot = Slot::default();
        slots.push((lease, slot.clone()));
        slot
    }
}
