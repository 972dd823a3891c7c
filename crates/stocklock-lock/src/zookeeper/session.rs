//! A ZooKeeper session: the lease of every lock taken through it, and the
//! ensemble's identity its tokens are compared within.

use std::time::Duration;

use zookeeper_client as zk;

use super::{ENSEMBLE_ID, LOCKS_ROOT, ZooKeeperLock};
use crate::Error;

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
