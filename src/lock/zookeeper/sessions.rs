//! An instance's ZooKeeper sessions, one per lease asked for.
//!
//! The session timeout *is* a ZooKeeper lock's lease: a holder's znode
//! outlives its last sign of life by exactly that long. A request that asks
//! for a lease of L (`lease_ms`) takes its lock through a session whose
//! timeout is L; requests with the same lease share one session (one TCP
//! connection, its pings, its watches), as a process shares one Curator
//! client. A session that ended (expired while its process was frozen,
//! closed) is replaced by a new one on the next request.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::{ZooKeeperLockError, ZooKeeperSession};

/// How many different leases keep a session open at once; beyond that the
/// oldest session not in use is closed.
const MAX_SESSIONS: usize = 8;

/// How long connecting a session may take before the request gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The sessions of one instance on one ensemble. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ZooKeeperSessions {
    connect: Arc<str>,
    /// Session timeout asked for → the session, in the order they were opened.
    open: Arc<Mutex<Vec<(Duration, ZooKeeperSession)>>>,
}

impl ZooKeeperSessions {
    /// Sessions on `connect_string` (`host:port,host:port`); none is opened
    /// before a request needs one, so an instance starts without ZooKeeper.
    pub fn new(connect_string: &str) -> Self {
        Self {
            connect: connect_string.into(),
            open: Arc::default(),
        }
    }

    /// The ensemble's connect string.
    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// A live session whose timeout is `lease` (as the server grants it),
    /// opening one if none is.
    pub async fn session(&self, lease: Duration) -> Result<ZooKeeperSession, ZooKeeperLockError> {
        let mut open = self.open.lock().await;
        open.retain(|(_, session)| !session.has_ended());
        if let Some((_, session)) = open.iter().find(|(timeout, _)| *timeout == lease) {
            return Ok(session.clone());
        }
        let session = ZooKeeperSession::connect(&self.connect, lease, CONNECT_TIMEOUT).await?;
        if open.len() >= MAX_SESSIONS {
            // Requests still using it keep their clone; it closes after them.
            open.remove(0);
        }
        open.push((lease, session.clone()));
        Ok(session)
    }
}
